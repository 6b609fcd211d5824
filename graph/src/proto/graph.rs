//! TensorFlow's graph messages: [`GraphDef`] (`graph.proto`), [`NodeDef`]
//! (`node_def.proto`), [`VersionDef`] (`versions.proto`), the
//! [`FunctionDefLibrary`] with its [`FunctionDef`]s (`function.proto`) and their
//! signatures, [`OpDef`] (`op_def.proto`). Fields the proto crate does not
//! declare (`NodeDef.experimental_debug_info`, `GraphDef.debug_info`,
//! `ArgDef.experimental_full_type` …) are dropped when decoding.

use std::collections::BTreeSet;

pub use ::proto::tensorflow::op_def::{ArgDef, AttrDef};
pub use ::proto::tensorflow::{
    FunctionDef, FunctionDefLibrary, GradientDef, GraphDef, NodeDef, OpDef, VersionDef,
};

/// The names of the functions `library` defines (gradient functions included).
pub fn function_names(library: &FunctionDefLibrary) -> BTreeSet<String> {
    library
        .function
        .iter()
        .filter_map(|f| f.signature.as_ref().map(|s| s.name.clone()))
        .chain(library.gradient.iter().map(|g| g.gradient_func.clone()))
        .filter(|n| !n.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_names_include_gradients() {
        let lib = FunctionDefLibrary {
            function: vec![
                FunctionDef {
                    signature: Some(OpDef {
                        name: "f".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                FunctionDef::default(),
            ],
            gradient: vec![GradientDef {
                function_name: "f".into(),
                gradient_func: "g".into(),
            }],
            ..Default::default()
        };
        let names: Vec<_> = function_names(&lib).into_iter().collect();
        assert_eq!(names, ["f", "g"]);
    }
}
