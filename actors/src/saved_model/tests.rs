use super::*;
use graph::proto::tf::meta_graph_def::MetaInfoDef;
use graph::Code;

fn tagged(tags: &[&str]) -> MetaGraphDef {
    MetaGraphDef {
        meta_info_def: Some(MetaInfoDef {
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn meta_graphs_are_found_by_their_set_of_tags() {
    let sm = SavedModelProto {
        saved_model_schema_version: 1,
        meta_graphs: vec![tagged(&["serve"]), tagged(&["train", "serve"])],
    };
    let dir = Path::new("/m");
    let mg = find_meta_graph(sm.clone(), &["serve", "train"], dir).unwrap();
    assert_eq!(mg.meta_info_def.unwrap().tags, ["train", "serve"]);
    let e = find_meta_graph(sm, &["gpu"], dir).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains("{ gpu }") && e.message().contains("{ serve }, { serve train }"),
        "{e}"
    );
}

#[test]
fn tensor_and_control_names_give_their_node() {
    assert_eq!(node_name("a/b:0"), "a/b");
    assert_eq!(node_name("^init"), "init");
    assert_eq!(node_name("NoOp"), "NoOp");
    assert_eq!(node_name("x:y"), "x:y");
}

#[test]
fn init_op_comes_from_the_signature_then_the_collections() {
    let dir = Path::new("/m");
    let mut mg = tagged(&["serve"]);
    assert_eq!(init_op(&mg, dir).unwrap(), None);
    mg.collection_def
        .insert(LEGACY_INIT_OP_KEY.into(), builder_node_list(&["legacy"]));
    assert_eq!(init_op(&mg, dir).unwrap().as_deref(), Some("legacy"));
    mg.collection_def
        .insert(MAIN_OP_KEY.into(), builder_node_list(&["main:0"]));
    assert_eq!(init_op(&mg, dir).unwrap().as_deref(), Some("main"));
    let sig = Signature::new("").output(
        INIT_OP_SIGNATURE_KEY,
        TensorSpec::new("NoOp", graph::DType::F32, graph::Shape::unknown()),
    );
    mg.signature_def
        .insert(INIT_OP_SIGNATURE_KEY.into(), sig.to_proto());
    assert_eq!(init_op(&mg, dir).unwrap().as_deref(), Some("NoOp"));
    mg.signature_def.clear();
    mg.collection_def
        .insert(MAIN_OP_KEY.into(), builder_node_list(&["a", "b"]));
    assert_eq!(
        init_op(&mg, dir).unwrap_err().code(),
        Code::FailedPrecondition
    );
}

fn builder_node_list(names: &[&str]) -> graph::proto::tf::CollectionDef {
    graph::proto::tf::CollectionDef {
        kind: Some(collection_def::Kind::NodeList(collection_def::NodeList {
            value: names.iter().map(|n| (*n).to_owned()).collect(),
        })),
    }
}

#[test]
fn a_missing_or_damaged_saved_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = SavedModel::load(dir.path(), &["serve"]).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(
        e.message().contains("SavedModel file does not exist"),
        "{e}"
    );
    std::fs::write(dir.path().join(SAVED_MODEL_FILENAME_PB), b"\xff\xff\xff").unwrap();
    let e = SavedModel::load(dir.path(), &["serve"]).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains("saved_model.pb"), "{e}");
}

#[test]
fn a_text_saved_model_is_read_too() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"saved_model_schema_version: 1
meta_graphs {
  meta_info_def { tags: "serve" }
  graph_def { node { name: "c" op: "Const"
    attr { key: "dtype" value { type: DT_FLOAT } }
    attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2.5 } } } } }
  signature_def { key: "serving_default" value {
    outputs { key: "c" value { name: "c:0" dtype: DT_FLOAT tensor_shape { } } }
    method_name: "tensorflow/serving/predict" } }
  signature_def { key: "sparse" value {
    outputs { key: "s" value { coo_sparse { values_tensor_name: "c:0" } dtype: DT_FLOAT } } } }
}
"#;
    std::fs::write(dir.path().join(SAVED_MODEL_FILENAME_PBTXT), text).unwrap();
    let m = SavedModel::load(dir.path(), &["serve"]).unwrap();
    let out = m.run("serving_default", &[]).unwrap();
    assert_eq!(out["c"], Tensor::scalar(2.5f32));
    // a sparse signature is left out; the others serve
    assert_eq!(m.signature("sparse").unwrap_err().code(), Code::NotFound);
    std::fs::write(dir.path().join(SAVED_MODEL_FILENAME_PBTXT), "meta_graphs {").unwrap();
    let e = SavedModel::load(dir.path(), &["serve"]).unwrap_err();
    assert_eq!(e.code(), Code::DataLoss);
    assert!(e.message().contains("saved_model.pbtxt"), "{e}");
}
