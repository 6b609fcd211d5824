//! Imports the TensorFlow graphs in `tests/fixtures/` (written by TensorFlow itself
//! through `gen_tf_graphs.py`, binary and text) and checks node counts, attributes
//! and constant values; checks that import → export → import is the identity; and,
//! when `ACTORFLOW_TF_EXPORT_DIR` is set, writes exported graphs there for
//! `check_tf_export.py` to load into TensorFlow.

use std::path::PathBuf;

use actorflow_graph::import::{
    graph_def_from_tf_bytes, graph_def_from_tf_text, graph_def_to_tf_bytes, graph_def_to_tf_text,
    load_graph_def, save_graph_def, ImportOptions,
};
use actorflow_graph::{
    bf16, builder, f16, ops, AttrValue, Code, DType, Graph, GraphDef, OpRegistry, Shape, Tensor,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Loads `NAME.pb` and `NAME.pbtxt`, checks they import to the same graph.
fn load(name: &str) -> GraphDef {
    let opts = ImportOptions::default();
    let pb = load_graph_def(&fixture(&format!("{name}.pb")), &opts).unwrap();
    let txt = load_graph_def(&fixture(&format!("{name}.pbtxt")), &opts).unwrap();
    assert_eq!(pb, txt, "{name}: binary and text import differently");
    pb
}

fn value(g: &GraphDef, node: &str) -> Tensor {
    g.find(node)
        .unwrap_or_else(|| panic!("no node {node}"))
        .get_attr::<Tensor>("value")
        .unwrap()
}

fn ops_of(g: &GraphDef, op: &str) -> usize {
    g.node.iter().filter(|n| n.op == op).count()
}

#[test]
fn basic_graph() {
    let g = load("basic");
    assert_eq!(g.node.len(), 8);
    assert!(g.versions.producer > 0);
    for op in ["Placeholder", "MatMul", "AddV2", "Mul", "Identity"] {
        assert_eq!(ops_of(&g, op), 1, "{op}");
    }
    let w = Tensor::new(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    assert_eq!(value(&g, "w"), w);
    assert_eq!(value(&g, "b"), Tensor::vector(&[0.5f32, -0.5]));
    assert_eq!(value(&g, "mul/y"), Tensor::scalar(2.0f32));
    let x = g.find("x").unwrap();
    assert_eq!(
        x.get_attr::<Shape>("shape").unwrap(),
        Shape::from_dims(&[None, Some(3)])
    );
    assert_eq!(x.get_attr::<DType>("dtype").unwrap(), DType::F32);
    let mm = g.find("matmul").unwrap();
    assert_eq!(mm.device, "/device:CPU:0");
    assert_eq!(mm.input, ["x", "w"]);
    assert!(!mm.get_attr::<bool>("transpose_a").unwrap());
    let graph = Graph::from_graph_def(&g, OpRegistry::global()).unwrap();
    assert_eq!(
        graph.find("out").map(|id| graph.node(id).num_outputs()),
        Some(1)
    );

    let opts = ImportOptions::default().with_clear_devices(true);
    let cleared = load_graph_def(&fixture("basic.pb"), &opts).unwrap();
    assert!(cleared.node.iter().all(|n| n.device.is_empty()));
}

#[test]
fn every_dtype_decodes() {
    let g = load("dtypes");
    assert_eq!(g.node.len(), 23);
    assert!(
        g.node
            .iter()
            .all(|n| !n.attr.contains_key("_output_shapes")),
        "_output_shapes must be dropped"
    );
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    assert_eq!(value(&g, "f16"), Tensor::vector(&h(&[1.5, -2.0, 0.25])));
    assert_eq!(value(&g, "f16_scalar"), Tensor::scalar(f16::from_f32(1.5)));
    let b = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
    assert_eq!(value(&g, "bf16"), Tensor::vector(&b));
    assert_eq!(
        value(&g, "bf16_scalar"),
        Tensor::scalar(bf16::from_f32(-2.0))
    );
    assert_eq!(value(&g, "f32_scalar"), Tensor::scalar(3.25f32));
    assert_eq!(value(&g, "f64"), Tensor::vector(&[1.0f64, 2.5]));
    assert_eq!(value(&g, "i8"), Tensor::vector(&[-128i8, 127]));
    assert_eq!(value(&g, "u8"), Tensor::vector(&[0u8, 255]));
    assert_eq!(value(&g, "i16"), Tensor::vector(&[-32768i16, 7]));
    assert_eq!(value(&g, "u16"), Tensor::vector(&[65535u16, 1]));
    assert_eq!(
        value(&g, "i32"),
        Tensor::new(&[2, 2], vec![1i32, 2, 3, 4]).unwrap()
    );
    assert_eq!(value(&g, "i64"), Tensor::vector(&[-(1i64 << 62), 1 << 62]));
    assert_eq!(value(&g, "u32_scalar"), Tensor::scalar(4_000_000_000u32));
    assert_eq!(value(&g, "u32"), Tensor::vector(&[1u32, 4_000_000_000]));
    assert_eq!(value(&g, "u64_scalar"), Tensor::scalar((1u64 << 63) + 5));
    assert_eq!(value(&g, "bool"), Tensor::vector(&[true, false, true]));
    let strings: Vec<&[u8]> = vec![b"hello", b"a\x00b\xffc", b""];
    assert_eq!(
        value(&g, "str"),
        Tensor::from_strings(&[3], strings).unwrap()
    );
    assert_eq!(value(&g, "str_scalar"), Tensor::string_scalar("one"));
    // Splat constants: one value fills the shape.
    assert_eq!(value(&g, "zeros"), Tensor::zeros(DType::F32, [2, 3]));
    assert_eq!(
        value(&g, "sevens"),
        Tensor::new(&[2, 2], vec![7i64; 4]).unwrap()
    );
    assert_eq!(value(&g, "empty"), Tensor::zeros(DType::F32, [0, 4]));
    Graph::from_graph_def(&g, OpRegistry::global()).unwrap();
}

#[test]
fn variables_keep_colocation() {
    let g = load("variables");
    assert_eq!(g.node.len(), 15);
    assert_eq!(ops_of(&g, "VariableV2"), 1);
    assert_eq!(ops_of(&g, "VarHandleOp"), 1);
    let assign = g.node.iter().find(|n| n.op == "Assign").unwrap();
    assert_eq!(
        assign.get_attr::<Vec<String>>("_class").unwrap(),
        ["loc:@v"]
    );
    let init = g.find("init").unwrap();
    assert_eq!(init.op, "NoOp");
    assert!(init.input.iter().all(|i| i.starts_with('^')) && init.input.len() == 2);
    assert_eq!(value(&g, "ones"), Tensor::vector(&[1.0f32, 1.0]));
    Graph::from_graph_def(&g, OpRegistry::global()).unwrap();
}

#[test]
fn v1_cond_imports() {
    let g = load("cond");
    assert_eq!(g.node.len(), 14);
    assert!(ops_of(&g, "Switch") >= 2);
    assert_eq!(ops_of(&g, "Merge"), 1);
    let merge = g.node.iter().find(|n| n.op == "Merge").unwrap();
    assert_eq!(merge.get_attr::<i64>("N").unwrap(), 2);
    // Constants inside a branch hang off the branch's pivot by a control input.
    assert!(g
        .node
        .iter()
        .any(|n| n.op == "Const" && n.input.iter().any(|i| i.starts_with("^cond/switch"))));
    Graph::from_graph_def(&g, OpRegistry::global()).unwrap();
}

/// The `tf.function` call is inlined (the body runs between Identities, see
/// `graph::import::inline`), the same from the binary and the text file, and
/// the call's `config_proto` (a serialised proto, not UTF-8) goes with the call.
#[test]
fn library_functions_are_inlined() {
    let opts = ImportOptions::default();
    let g = load_graph_def(&fixture("functions.pb"), &opts).unwrap();
    assert_eq!(
        load_graph_def(&fixture("functions.pbtxt"), &opts).unwrap(),
        g
    );
    assert_eq!(g.find("PartitionedCall/mul").unwrap().op, "Mul");
    assert_eq!(g.find("PartitionedCall").unwrap().op, "IdentityN");
    assert_eq!(
        g.find("out").unwrap().input,
        ["Func/PartitionedCall/output/_0"]
    );
    let unvalidated = ImportOptions::default().with_validate(false);
    assert_eq!(
        load_graph_def(&fixture("functions.pb"), &unvalidated).unwrap(),
        g
    );
}

#[test]
fn unsupported_dtypes_are_unimplemented() {
    for ext in ["pb", "pbtxt"] {
        let e = load_graph_def(
            &fixture(&format!("complex.{ext}")),
            &ImportOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e}");
        assert!(e.message().contains("node 'c' (op Const)"), "{e}");
        assert!(e.message().contains("DT_COMPLEX64"), "{e}");
        assert!(!e.message().contains("'fine'"), "{e}");
    }
}

const GOOD: [&str; 4] = ["basic", "dtypes", "variables", "cond"];

#[test]
fn import_export_import_is_identity() {
    let opts = ImportOptions::default();
    for name in GOOD {
        let g = load(name);
        let bytes = graph_def_to_tf_bytes(&g).unwrap();
        assert_eq!(
            graph_def_from_tf_bytes(&bytes, &opts).unwrap(),
            g,
            "{name} (binary)"
        );
        let text = graph_def_to_tf_text(&g);
        assert_eq!(
            graph_def_from_tf_text(&text, &opts).unwrap(),
            g,
            "{name} (text)"
        );
        let json = g.to_json().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for ext in ["pb", "pbtxt", "json"] {
            let path = dir.join(format!("{name}.{ext}"));
            save_graph_def(&path, &g).unwrap();
            assert_eq!(load_graph_def(&path, &opts).unwrap(), g, "{name}.{ext}");
        }
        assert_eq!(GraphDef::from_json(&json).unwrap(), g);
    }
}

#[test]
fn exported_text_matches_tensorflow_layout() {
    // TensorFlow's own text for the basic graph, re-written by actorflow, differs
    // only where actorflow stores constants differently (never for these).
    let g = load("basic");
    let ours = graph_def_to_tf_text(&g);
    let theirs = std::fs::read_to_string(fixture("basic.pbtxt")).unwrap();
    assert_eq!(ours, theirs);
}

/// A graph built with actorflow's builder, for the TensorFlow export check.
fn built_graph() -> GraphDef {
    let s = builder::Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(2)])).unwrap();
    let w = ops::constant(
        &s,
        Tensor::new(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap(),
    )
    .unwrap();
    let y = ops::mat_mul(&s, &x, &w, false, true).unwrap();
    let b = ops::constant(&s, Tensor::vector(&[0.5f32, 0.5])).unwrap();
    let z = ops::add(&s, &y, &b).unwrap();
    let p = ops::placeholder(&s, DType::Bool, Shape::scalar()).unwrap();
    let c = builder::cond(
        &s,
        &p,
        |t| Ok(vec![ops::mul(t, &z, &z)?]),
        |f| Ok(vec![ops::identity(f, &z)?]),
    )
    .unwrap();
    ops::identity(&s.with_name_scope("out"), &c[0]).unwrap();
    let mut g = s.graph_def();
    g.versions.producer = 27;
    g
}

#[test]
fn builder_graphs_export_and_reimport() {
    let g = built_graph();
    assert!(g
        .node
        .iter()
        .any(|n| n.attr.values().any(|a| matches!(a, AttrValue::Tensor(_)))));
    let bytes = graph_def_to_tf_bytes(&g).unwrap();
    assert_eq!(
        graph_def_from_tf_bytes(&bytes, &ImportOptions::default()).unwrap(),
        g
    );
    if let Some(dir) = std::env::var_os("ACTORFLOW_TF_EXPORT_DIR") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        save_graph_def(&dir.join("built.pb"), &g).unwrap();
        save_graph_def(&dir.join("built.pbtxt"), &g).unwrap();
        for name in GOOD {
            let g = load(name);
            save_graph_def(&dir.join(format!("{name}.pb")), &g).unwrap();
            save_graph_def(&dir.join(format!("{name}.pbtxt")), &g).unwrap();
        }
    }
}
