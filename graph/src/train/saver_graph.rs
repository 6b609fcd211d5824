//! The save and restore nodes TensorFlow's `Saver` adds to a graph, and the
//! [`SaverDef`] that names them: built once here, used by the root crate's
//! `Saver` (checkpoints) and by the SavedModel builder (`variables/`), and
//! recorded in every `MetaGraphDef` so a loader can restore without knowing how
//! the graph was built.
//!
//! ```text
//! save/filename/input      Const "model"
//! save/filename            PlaceholderWithDefault: the checkpoint prefix, fed per call
//! save/SaveV2              writes every variable's value (read next to the variable)
//! save/control_dependency  Identity(filename) after SaveV2: the save tensor
//! save/RestoreV2           reads every variable's saved value
//! save/Assign, …           assigns each (AssignVariableOp for resource variables)
//! save/restore_all         NoOp after every assignment: the restore op
//! ```

use crate::builder::{Operation, Output, Scope};
use crate::ops;
use crate::proto::tf::{saver_def::CheckpointFormatVersion, SaverDef};
use crate::train::variables::VarRef;
use crate::{DType, Result, Shape, Status, Tensor};

/// The nodes of a saver in a graph.
#[derive(Clone, Debug)]
pub struct SaverNodes {
    /// The saved variables, sorted by name (each saved under its node name).
    pub variables: Vec<VarRef>,
    /// The string scalar fed with the checkpoint prefix.
    pub filename: Output,
    /// The tensor to fetch to save (its value is the prefix written).
    pub save: Output,
    /// The op to run to restore.
    pub restore: Operation,
}

impl SaverNodes {
    /// Adds a saver of `variables` to `s`'s graph under the name scope `name`
    /// (made unique, as TensorFlow's `save_1`, … are). Two variables of one
    /// name, or none at all, is `InvalidArgument`.
    pub fn build(s: &Scope, variables: &[VarRef], name: &str) -> Result<SaverNodes> {
        let mut vars = variables.to_vec();
        if vars.is_empty() {
            return Err(Status::invalid_argument("No variables to save"));
        }
        vars.sort_by(|a, b| a.name().cmp(b.name()));
        for w in vars.windows(2) {
            if w[0].name() == w[1].name() {
                return Err(Status::invalid_argument(format!(
                    "variable '{}' is listed twice",
                    w[0].name()
                )));
            }
        }
        let ss = s.without_control_dependencies().with_name_scope(name);
        let default = ss
            .op("Const")
            .name("filename/input")
            .attr("dtype", DType::String)
            .attr("value", Tensor::string_scalar("model"))
            .build1()?;
        let filename = ss
            .op("PlaceholderWithDefault")
            .name("filename")
            .input(&default)
            .attr("shape", Shape::scalar())
            .build1()?;
        let names: Vec<String> = vars.iter().map(|v| v.name().to_owned()).collect();
        let values: Vec<Output> = vars.iter().map(|v| v.read(&ss)).collect::<Result<_>>()?;
        let save_op = ops::save_v2(&ss, &filename, &names, &values)?;
        let save = ss
            .op("Identity")
            .name("control_dependency")
            .input(&filename)
            .control_input(&save_op)
            .build1()?;
        let dtypes: Vec<DType> = vars.iter().map(VarRef::dtype).collect();
        let restored = ops::restore_v2(&ss, &filename, &names, &dtypes)?;
        let mut assigns = Vec::with_capacity(vars.len());
        for (v, t) in vars.iter().zip(&restored) {
            assigns.push(v.assign(&ss, t)?);
        }
        let mut b = ss.op("NoOp").name("restore_all");
        for a in &assigns {
            b = b.control_input(a);
        }
        let restore = b.build()?;
        Ok(SaverNodes {
            variables: vars,
            filename,
            save,
            restore,
        })
    }

    /// The `SaverDef` naming these nodes (checkpoint format V2, unsharded),
    /// keeping `max_to_keep` checkpoints.
    pub fn saver_def(&self, max_to_keep: usize) -> SaverDef {
        SaverDef {
            filename_tensor_name: self.filename.name(),
            save_tensor_name: self.save.name(),
            restore_op_name: self.restore.name().to_owned(),
            max_to_keep: i32::try_from(max_to_keep).unwrap_or(i32::MAX),
            sharded: false,
            // TensorFlow's default: never keep extra checkpoints by age.
            keep_checkpoint_every_n_hours: 10000.0,
            version: CheckpointFormatVersion::V2 as i32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Variable;
    use crate::Code;

    #[test]
    fn names_the_nodes_it_adds() {
        let s = Scope::new();
        let c = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
        let b = Variable::new(&s, "b", &c, true).unwrap();
        let a = Variable::new(&s, "a", &c, true).unwrap();
        let vars = [VarRef::from(&b), VarRef::from(&a)];
        let n = SaverNodes::build(&s, &vars, "save").unwrap();
        let names: Vec<&str> = n.variables.iter().map(VarRef::name).collect();
        assert_eq!(names, ["a", "b"]);
        let d = n.saver_def(5);
        assert_eq!(d.filename_tensor_name, "save/filename:0");
        assert_eq!(d.save_tensor_name, "save/control_dependency:0");
        assert_eq!(d.restore_op_name, "save/restore_all");
        assert_eq!(d.version, CheckpointFormatVersion::V2 as i32);
        // a second saver gets its own scope
        let again = SaverNodes::build(&s, &vars, "save").unwrap();
        assert_eq!(again.restore.name(), "save_1/restore_all");
        let dup = SaverNodes::build(&s, &[VarRef::from(&a), VarRef::from(&a)], "save");
        assert_eq!(dup.unwrap_err().code(), Code::InvalidArgument);
        let none = SaverNodes::build(&s, &[], "save").unwrap_err();
        assert_eq!(none.message(), "No variables to save");
    }
}
