//! Wire-level checks: hand-computed protobuf bytes of the key messages decode to
//! the expected fields (a wrong field number or type in a `.proto` file fails
//! here), messages round-trip, and the services have TensorFlow's method paths;
//! TensorFlow Serving's messages encode to the bytes its Python package writes,
//! and its configuration files parse.

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;

use crate::tensorflow::attr_value::{ListValue, Value as AttrKind};
use crate::tensorflow::error::Code;
use crate::tensorflow::tensor_shape_proto::Dim;
use crate::tensorflow::*;

fn attr(v: AttrKind) -> AttrValue {
    AttrValue { value: Some(v) }
}

#[test]
fn graph_def_round_trips() {
    let tensor = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(TensorShapeProto {
            dim: vec![Dim {
                size: 2,
                name: String::new(),
            }],
            unknown_rank: false,
        }),
        tensor_content: Bytes::from_static(&[0, 0, 128, 63, 0, 0, 0, 64]),
        ..Default::default()
    };
    let g = GraphDef {
        node: vec![
            NodeDef {
                name: "c".into(),
                op: "Const".into(),
                device: "/job:worker/task:0/device:CPU:0".into(),
                attr: BTreeMap::from([
                    (
                        "dtype".into(),
                        attr(AttrKind::Type(DataType::DtFloat as i32)),
                    ),
                    ("value".into(), attr(AttrKind::Tensor(Box::new(tensor)))),
                ]),
                ..Default::default()
            },
            NodeDef {
                name: "y".into(),
                op: "Identity".into(),
                input: vec!["c".into(), "^c".into()],
                attr: BTreeMap::from([(
                    "l".into(),
                    attr(AttrKind::List(ListValue {
                        i: vec![1, -2],
                        r#type: vec![3],
                        ..Default::default()
                    })),
                )]),
                ..Default::default()
            },
        ],
        versions: Some(VersionDef {
            producer: 27,
            min_consumer: 0,
            bad_consumers: vec![3],
        }),
        version: 0,
        library: Some(FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpDef {
                    name: "f".into(),
                    ..Default::default()
                }),
                node_def: vec![],
                ..Default::default()
            }],
            gradient: vec![GradientDef {
                function_name: "f".into(),
                gradient_func: "g".into(),
            }],
            ..Default::default()
        }),
    };
    let bytes = g.encode_to_vec();
    assert_eq!(GraphDef::decode(bytes.as_slice()).unwrap(), g);
    // Encoding is deterministic: maps are sorted by key.
    assert_eq!(g.clone().encode_to_vec(), bytes);
}

#[test]
fn node_def_field_numbers() {
    let bytes = [
        0x0a, 1, b'a', // name (1)
        0x12, 5, b'C', b'o', b'n', b's', b't', // op (2)
        0x1a, 1, b'x', // input (3)
        0x22, 2, b'/', b'c', // device (4)
        // attr (5): an entry with key (1) "T" and value (2) AttrValue { type (6): 1 }
        0x2a, 7, 0x0a, 1, b'T', 0x12, 2, 0x30, 1,
    ];
    let n = NodeDef::decode(&bytes[..]).unwrap();
    assert_eq!((n.name.as_str(), n.op.as_str()), ("a", "Const"));
    assert_eq!(
        (n.input, n.device),
        (vec!["x".to_string()], "/c".to_string())
    );
    assert_eq!(n.attr["T"], attr(AttrKind::Type(DataType::DtFloat as i32)));
    // GraphDef: node (1), versions (4) with producer (1).
    let g = GraphDef::decode(&[0x0a, 3, 0x0a, 1, b'a', 0x22, 2, 0x08, 27][..]).unwrap();
    assert_eq!(g.node[0].name, "a");
    assert_eq!(g.versions.unwrap().producer, 27);
}

#[test]
fn attr_value_oneof_numbers() {
    let cases: [(AttrKind, u8); 8] = [
        (AttrKind::List(ListValue::default()), 0x0a),
        (AttrKind::S(b"x".to_vec()), 0x12),
        (AttrKind::I(1), 0x18),
        (AttrKind::F(1.0), 0x25),
        (AttrKind::B(true), 0x28),
        (AttrKind::Type(1), 0x30),
        (AttrKind::Placeholder("p".into()), 0x4a),
        (AttrKind::Func(NameAttrList::default()), 0x52),
    ];
    for (v, key) in cases {
        let a = attr(v);
        let b = a.encode_to_vec();
        assert_eq!(b[0], key, "{a:?}");
        assert_eq!(AttrValue::decode(b.as_slice()).unwrap(), a);
    }
    // list(type) is packed: field 6, length 2.
    let l = ListValue {
        r#type: vec![1, 3],
        ..Default::default()
    };
    assert_eq!(l.encode_to_vec(), [0x32, 2, 1, 3]);
}

#[test]
fn tensor_proto_field_numbers() {
    let bytes = [
        0x08, 3, // dtype (1): DT_INT32
        0x12, 4, 0x12, 2, 0x08, 2, // tensor_shape (2) { dim (2) { size (1): 2 } }
        0x22, 8, 1, 0, 0, 0, 2, 0, 0, 0, // tensor_content (4)
        0x6a, 2, 0x80, 0x78, // half_val (13), packed: 0x3c00 as a varint
        0x42, 1, b's', // string_val (8)
    ];
    let t = TensorProto::decode(&bytes[..]).unwrap();
    assert_eq!(t.dtype(), DataType::DtInt32);
    assert_eq!(t.tensor_shape.unwrap().dim[0].size, 2);
    assert_eq!(&t.tensor_content[..], &[1, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(t.half_val, [0x3c00]);
    assert_eq!(t.string_val, [Bytes::from_static(b"s")]);
    // A DT_FLOAT scalar 1.0 as TensorFlow writes it: float_val (5) packed.
    let one = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(TensorShapeProto::default()),
        float_val: vec![1.0],
        ..Default::default()
    };
    assert_eq!(
        one.encode_to_vec(),
        [0x08, 1, 0x12, 0, 0x2a, 4, 0, 0, 0x80, 0x3f]
    );
    // Unpacked repeated values decode too.
    let unpacked = [0x2d, 0, 0, 0x80, 0x3f, 0x2d, 0, 0, 0, 0x40];
    assert_eq!(
        TensorProto::decode(&unpacked[..]).unwrap().float_val,
        [1.0, 2.0]
    );
}

#[test]
fn tensor_content_shares_the_decoded_buffer() {
    let t = TensorProto {
        dtype: DataType::DtUint8 as i32,
        tensor_content: Bytes::from(vec![7u8; 4096]),
        ..Default::default()
    };
    let wire = Bytes::from(t.encode_to_vec());
    let back = TensorProto::decode(wire.clone()).unwrap();
    assert_eq!(back, t);
    let range = wire.as_ptr_range();
    assert!(range.contains(&back.tensor_content.as_ptr()), "copied");
}

#[test]
fn run_graph_field_numbers() {
    let bytes = [
        0x0a, 1, b'g', // graph_handle (1)
        0x10, 5, // step_id (2)
        0x1a, 7, 0x0a, 1, b'k', 0x12, 2, 0x08, 1, // send (3) { name, tensor { dtype } }
        0x22, 1, b'r', // recv_key (4)
        0x2a, 2, 0x18, 1, // exec_opts (5) { record_timeline (3) }
        0x30, 1, // is_partial (6)
        0x38, 1, // is_last_partial_run (7)
        0x42, 1, b's', // session_handle (8)
        0x48, 1, // store_errors_in_response_body (9)
        0x50, 1, // create_worker_session_called (10)
        0x58, 9, // request_id (11)
    ];
    let r = RunGraphRequest::decode(&bytes[..]).unwrap();
    let want = RunGraphRequest {
        session_handle: "s".into(),
        create_worker_session_called: true,
        graph_handle: "g".into(),
        step_id: 5,
        exec_opts: Some(ExecutorOpts {
            record_timeline: true,
            ..Default::default()
        }),
        send: vec![NamedTensorProto {
            name: "k".into(),
            tensor: Some(TensorProto {
                dtype: DataType::DtFloat as i32,
                ..Default::default()
            }),
        }],
        recv_key: vec!["r".into()],
        is_partial: true,
        is_last_partial_run: true,
        store_errors_in_response_body: true,
        request_id: 9,
    };
    assert_eq!(r, want);
    // RunGraphResponse: status_code (5), status_error_message (6).
    let resp = RunGraphResponse::decode(&[0x28, 15, 0x32, 1, b'e'][..]).unwrap();
    assert_eq!(resp.status_code(), Code::DataLoss);
    assert_eq!(resp.status_error_message, "e");
}

#[test]
fn recv_tensor_field_numbers() {
    let bytes = [
        0x08, 7, // step_id (1)
        0x12, 1, b'k', // rendezvous_key (2)
        0x18, 1, // dma_ok (3)
        0x32, 6, 0x0a, 1, b't', 0x12, 1, b'v', // transport_options (6): Any
        0x38, 3, // request_id (7)
    ];
    let r = RecvTensorRequest::decode(&bytes[..]).unwrap();
    assert_eq!((r.step_id, r.rendezvous_key.as_str()), (7, "k"));
    assert!(r.dma_ok);
    assert_eq!(r.request_id, 3);
    let any = r.transport_options.unwrap();
    assert_eq!(
        (any.type_url.as_str(), any.value.as_slice()),
        ("t", &b"v"[..])
    );
    let bytes = [
        0x0a, 2, 0x08, 1, // tensor (1) { dtype: DT_FLOAT }
        0x10, 1, // is_dead (2)
        0x18, 4, // send_start_micros (3)
        0x28, 1, // require_ack (5)
    ];
    let r = RecvTensorResponse::decode(&bytes[..]).unwrap();
    assert_eq!(r.tensor.unwrap().dtype(), DataType::DtFloat);
    assert!(r.is_dead && r.require_ack);
    assert_eq!(r.send_start_micros, 4);
}

#[test]
fn master_field_numbers() {
    // RunStepRequest: session_handle (1), feed (2), fetch (3), target (4),
    // options (5) { timeout_in_ms (2) }, partial_run_handle (6),
    // store_errors_in_response_body (7), request_id (8).
    let bytes = [
        0x0a, 1, b's', 0x12, 3, 0x0a, 1, b'x', 0x1a, 1, b'y', 0x22, 1, b't', 0x2a, 2, 0x10, 100,
        0x32, 1, b'p', 0x38, 1, 0x40, 2,
    ];
    let r = RunStepRequest::decode(&bytes[..]).unwrap();
    assert_eq!(r.session_handle, "s");
    assert_eq!(r.feed[0].name, "x");
    assert_eq!((r.fetch, r.target), (vec!["y".into()], vec!["t".into()]));
    assert_eq!(r.options.unwrap().timeout_in_ms, 100);
    assert_eq!(r.partial_run_handle, "p");
    assert!(r.store_errors_in_response_body);
    assert_eq!(r.request_id, 2);
    // RunStepResponse: status_code (3), status_error_message (4).
    let resp = RunStepResponse::decode(&[0x18, 3, 0x22, 1, b'e'][..]).unwrap();
    assert_eq!(resp.status_code(), Code::InvalidArgument);
    // ConfigProto: device_count (1) map, allow_soft_placement (7),
    // operation_timeout_in_ms (11), isolate_session_state (15).
    let bytes = [
        0x0a, 7, 0x0a, 3, b'C', b'P', b'U', 0x10, 2, 0x38, 1, 0x58, 10, 0x78, 1,
    ];
    let c = ConfigProto::decode(&bytes[..]).unwrap();
    assert_eq!(c.device_count["CPU"], 2);
    assert!(c.allow_soft_placement && c.isolate_session_state);
    assert_eq!(c.operation_timeout_in_ms, 10);
}

#[test]
fn error_codes_are_grpcs() {
    assert_eq!(Code::Ok as i32, 0);
    assert_eq!(Code::DeadlineExceeded as i32, 4);
    assert_eq!(Code::Unauthenticated as i32, 16);
    assert_eq!(Code::DataLoss as i32, 15);
    assert_eq!(Code::from_str_name("UNAVAILABLE"), Some(Code::Unavailable));
}

#[test]
fn service_paths_are_tensorflows() {
    assert_eq!(
        master_service_server::SERVICE_NAME,
        "tensorflow.MasterService"
    );
    assert_eq!(
        worker_service_server::SERVICE_NAME,
        "tensorflow.WorkerService"
    );
    // The clients' request paths, in the generated source.
    let code = include_str!(concat!(env!("OUT_DIR"), "/tensorflow.rs"));
    for path in [
        "\"/tensorflow.MasterService/CreateSession\"",
        "\"/tensorflow.MasterService/RunStep\"",
        "\"/tensorflow.MasterService/RunCallable\"",
        "\"/tensorflow.WorkerService/RegisterGraph\"",
        "\"/tensorflow.WorkerService/RunGraph\"",
        "\"/tensorflow.WorkerService/RecvTensor\"",
    ] {
        assert!(code.contains(path), "no {path} in the generated clients");
    }
    assert!(!code.contains("tensorflow.grpc."));
}

// TensorFlow Serving (package tensorflow.serving).

/// A model config file as TensorFlow Serving reads it (--model_config_file).
/// tests/tf_interop/make_serving_proto_bytes.py has the same text.
const SERVING_MODEL_CONFIG: &str = "\
# Two models, as in TensorFlow Serving's model config files.
model_config_list {
  config {
    name: 'resnet'
    base_path: '/models/resnet'
    model_platform: 'tensorflow'
    model_version_policy {
      specific {
        versions: 1
        versions: 2
      }
    }
    version_labels {
      key: 'stable'
      value: 1
    }
    version_labels {
      key: 'canary'
      value: 2
    }
  }
  config {
    name: 'half_plus_two'
    base_path: '/models/half_plus_two'
    model_platform: \"tensorflow\"
    model_version_policy {
      latest {
        num_versions: 2
      }
    }
  }
}
";

/// What TensorFlow Serving's Python messages (tensorflow-serving-api 2.21)
/// serialize, printed by tests/tf_interop/make_serving_proto_bytes.py: the
/// `PredictRequest` of [`serving_predict_request_bytes_are_tf_servings`] and
/// [`SERVING_MODEL_CONFIG`] parsed by protobuf's Python text_format.
const PREDICT_REQUEST_HEX: &str = "0a180a016d120208031a0f73657276696e675f64656661756c74\
    121b0a0178121608011208120208011202080222080000803f00000040";
const MODEL_SERVER_CONFIG_HEX: &str = "0a82010a450a067265736e6574120e2f6d6f64656c732f72657\
    36e6574220a74656e736f72666c6f773a07b206040a020102420a0a0663616e6172791002420a0a0673\
    7461626c6510010a390a0d68616c665f706c75735f74776f12152f6d6f64656c732f68616c665f706c7\
    5735f74776f220a74656e736f72666c6f773a05a206020802";

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn serving_model_config_parses_tf_servings_text() {
    use serving::file_system_storage_path_source_config::servable_version_policy::{
        Latest, PolicyChoice, Specific,
    };
    use serving::model_server_config::Config;

    let c: serving::ModelServerConfig = crate::text::from_text(SERVING_MODEL_CONFIG).unwrap();
    let Some(Config::ModelConfigList(list)) = &c.config else {
        panic!("no model_config_list: {c:?}");
    };
    let [resnet, hpt] = &list.config[..] else {
        panic!("not two models: {list:?}");
    };
    assert_eq!(resnet.name, "resnet");
    assert_eq!(resnet.base_path, "/models/resnet");
    assert_eq!(resnet.model_platform, "tensorflow");
    assert_eq!(
        resnet.model_version_policy.as_ref().unwrap().policy_choice,
        Some(PolicyChoice::Specific(Specific {
            versions: vec![1, 2]
        }))
    );
    assert_eq!(
        resnet.version_labels,
        BTreeMap::from([("canary".to_string(), 2), ("stable".to_string(), 1)])
    );
    assert_eq!(resnet.logging_config, None);
    assert_eq!(hpt.name, "half_plus_two");
    assert_eq!(hpt.base_path, "/models/half_plus_two");
    assert_eq!(hpt.model_platform, "tensorflow");
    assert_eq!(
        hpt.model_version_policy.as_ref().unwrap().policy_choice,
        Some(PolicyChoice::Latest(Latest { num_versions: 2 }))
    );
    assert!(hpt.version_labels.is_empty());
    // The bytes of TensorFlow Serving's own parse of the same text.
    assert_eq!(c.encode_to_vec(), unhex(MODEL_SERVER_CONFIG_HEX));
    // And back through the text format.
    let text = crate::text::to_text(&c);
    assert_eq!(
        crate::text::from_text::<serving::ModelServerConfig>(&text).unwrap(),
        c
    );
    // `all {}`, and a field TF Serving does not declare, which it refuses too.
    let all: serving::ModelServerConfig = crate::text::from_text(
        "model_config_list { config { name: 'a' model_version_policy { all {} } } }",
    )
    .unwrap();
    let Some(Config::ModelConfigList(list)) = all.config else {
        panic!("no model_config_list");
    };
    assert!(matches!(
        list.config[0]
            .model_version_policy
            .as_ref()
            .unwrap()
            .policy_choice,
        Some(PolicyChoice::All(_))
    ));
    assert!(crate::text::from_text::<serving::ModelServerConfig>(
        "model_config_list { config { name: 'a' version: 1 } }"
    )
    .is_err());
}

#[test]
fn serving_batching_parameters_parse_tf_servings_text() {
    let p: serving::BatchingParameters = crate::text::from_text(
        "max_batch_size { value: 32 }\n\
         batch_timeout_micros { value: 1000 }\n\
         max_enqueued_batches { value: 100 }\n\
         num_batch_threads { value: 4 }\n\
         thread_pool_name { value: 'batch_threads' }\n\
         allowed_batch_sizes: 8\n\
         allowed_batch_sizes: 32\n\
         pad_variable_length_inputs: true\n",
    )
    .unwrap();
    assert_eq!(p.max_batch_size, Some(32));
    assert_eq!(p.batch_timeout_micros, Some(1000));
    assert_eq!(p.max_enqueued_batches, Some(100));
    assert_eq!(p.num_batch_threads, Some(4));
    assert_eq!(p.thread_pool_name.as_deref(), Some("batch_threads"));
    assert_eq!(p.allowed_batch_sizes, [8, 32]);
    assert!(p.pad_variable_length_inputs);
    // Unset wrappers are None, not zero; set to zero, they are Some(0).
    assert_eq!(p.enable_large_batch_splitting, None);
    assert_eq!(p.max_execution_batch_size, None);
    let zero: serving::BatchingParameters = crate::text::from_text("max_batch_size { }").unwrap();
    assert_eq!(zero.max_batch_size, Some(0));
    // Wire: max_batch_size (1) as an Int64Value { value (1) }, and the
    // allowed_batch_sizes (6) packed.
    let wire = serving::BatchingParameters {
        max_batch_size: Some(32),
        allowed_batch_sizes: vec![8, 32],
        ..Default::default()
    }
    .encode_to_vec();
    assert_eq!(wire, [0x0a, 2, 0x08, 32, 0x32, 2, 8, 32]);
}

#[test]
fn serving_predict_request_bytes_are_tf_servings() {
    use serving::model_spec::VersionChoice;

    // What the Python client sends: tf.make_tensor_proto([[1.0, 2.0]]).
    let x = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: Some(TensorShapeProto {
            dim: [1, 2]
                .map(|size| Dim {
                    size,
                    name: String::new(),
                })
                .to_vec(),
            unknown_rank: false,
        }),
        tensor_content: Bytes::from_static(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]),
        ..Default::default()
    };
    let request = serving::PredictRequest {
        model_spec: Some(serving::ModelSpec {
            name: "m".into(),
            version_choice: Some(VersionChoice::Version(3)),
            signature_name: "serving_default".into(),
        }),
        inputs: BTreeMap::from([("x".to_string(), x)]),
        output_filter: vec![],
    };
    let expected = unhex(PREDICT_REQUEST_HEX);
    assert_eq!(request.encode_to_vec(), expected);
    assert_eq!(
        serving::PredictRequest::decode(expected.as_slice()).unwrap(),
        request
    );
    // Version 0 is sent (an empty Int64Value), not dropped.
    let v0 = serving::ModelSpec {
        version_choice: Some(VersionChoice::Version(0)),
        ..Default::default()
    };
    assert_eq!(v0.encode_to_vec(), [0x12, 0]);
    assert_eq!(serving::ModelSpec::decode(&[0x12, 0][..]).unwrap(), v0);
}

#[test]
fn serving_warmup_record_decodes() {
    use serving::prediction_log::LogType;

    // PredictionLog { predict_log (6) { request (1) { model_spec (1) {
    // name (1): "m" } output_filter (3): "y" } } }
    let bytes = [0x32, 10, 0x0a, 8, 0x0a, 3, 0x0a, 1, b'm', 0x1a, 1, b'y'];
    let log = serving::PredictionLog::decode(&bytes[..]).unwrap();
    let Some(LogType::PredictLog(p)) = log.log_type else {
        panic!("not a predict_log: {log:?}");
    };
    let request = p.request.unwrap();
    assert_eq!(request.model_spec.unwrap().name, "m");
    assert_eq!(request.output_filter, ["y"]);
    // The other members' numbers.
    for (member, tag) in [
        (LogType::ClassifyLog(Default::default()), 0x12),
        (LogType::RegressLog(Default::default()), 0x1a),
        (LogType::MultiInferenceLog(Default::default()), 0x22),
        (LogType::SessionRunLog(Default::default()), 0x2a),
        (LogType::PredictStreamedLog(Default::default()), 0x3a),
    ] {
        let log = serving::PredictionLog {
            log_metadata: None,
            log_type: Some(member),
        };
        assert_eq!(log.encode_to_vec(), [tag, 0]);
    }
}

#[test]
fn serving_model_status_numbers() {
    use serving::model_version_status::State;

    assert_eq!(
        [
            State::Unknown,
            State::Start,
            State::Loading,
            State::Available,
            State::Unloading,
            State::End
        ]
        .map(|s| s as i32),
        [0, 10, 20, 30, 40, 50]
    );
    let status = serving::ModelVersionStatus {
        version: 2,
        state: State::Available as i32,
        status: Some(serving::StatusProto {
            error_code: Code::NotFound as i32,
            error_message: "x".into(),
        }),
    };
    // version (1), state (2), status (3) { error_code (1), error_message (2) }
    assert_eq!(
        status.encode_to_vec(),
        [0x08, 2, 0x10, 30, 0x1a, 5, 0x08, 5, 0x12, 1, b'x']
    );
}

#[test]
fn serving_metadata_any_has_tf_servings_type_url() {
    // The Python client unpacks metadata["signature_def"] as a SignatureDefMap,
    // which checks the type URL's message name.
    let map = serving::SignatureDefMap {
        signature_def: BTreeMap::from([("serving_default".to_string(), SignatureDef::default())]),
    };
    let any = prost_types::Any::from_msg(&map).unwrap();
    assert_eq!(
        any.type_url,
        "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    );
    assert_eq!(any.to_msg::<serving::SignatureDefMap>().unwrap(), map);
}

#[test]
fn serving_service_paths_are_tf_servings() {
    assert_eq!(
        serving::prediction_service_server::SERVICE_NAME,
        "tensorflow.serving.PredictionService"
    );
    assert_eq!(
        serving::model_service_server::SERVICE_NAME,
        "tensorflow.serving.ModelService"
    );
    let code = include_str!(concat!(env!("OUT_DIR"), "/tensorflow.serving.rs"));
    for path in [
        "\"/tensorflow.serving.PredictionService/Classify\"",
        "\"/tensorflow.serving.PredictionService/Regress\"",
        "\"/tensorflow.serving.PredictionService/Predict\"",
        "\"/tensorflow.serving.PredictionService/MultiInference\"",
        "\"/tensorflow.serving.PredictionService/GetModelMetadata\"",
        "\"/tensorflow.serving.ModelService/GetModelStatus\"",
        "\"/tensorflow.serving.ModelService/HandleReloadConfigRequest\"",
    ] {
        assert!(code.contains(path), "no {path} in the generated clients");
    }
}
