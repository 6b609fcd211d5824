//! TensorFlow's graph messages: [`GraphDef`] (`graph.proto`), [`NodeDef`]
//! (`node_def.proto`), [`VersionDef`] (`versions.proto`) and, as far as the
//! importer reads it, the [`FunctionDefLibrary`] (`function.proto`): each
//! function's signature name and body nodes, and the gradient registrations.
//! Fields the proto crate does not declare (`NodeDef.experimental_debug_info`,
//! `GraphDef.debug_info`, functions' return maps …) are dropped when decoding.

use std::collections::BTreeSet;

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
                    signature: Some(OpDef { name: "f".into() }),
                    node_def: vec![],
                },
                FunctionDef::default(),
            ],
            gradient: vec![GradientDef {
                function_name: "f".into(),
                gradient_func: "g".into(),
            }],
        };
        let names: Vec<_> = function_names(&lib).into_iter().collect();
        assert_eq!(names, ["f", "g"]);
    }
}
