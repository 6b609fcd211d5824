//! Wire-level checks: hand-computed protobuf bytes of the key messages decode to
//! the expected fields (a wrong field number or type in a `.proto` file fails
//! here), messages round-trip, and the services have TensorFlow's method paths.

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
