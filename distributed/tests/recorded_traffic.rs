//! TensorFlow's wire traffic, recorded, for tests that never need TensorFlow.
//!
//! `fixtures/tf_traffic.json` holds every gRPC call of a TensorFlow 2.21 client
//! and two-task cluster (written by `tests/tf_interop/record_traffic.py`, which
//! says how to regenerate it): a session created, extended, run and closed; a
//! step its kernel fails; a partial run; a callable made, run and released.
//! Here:
//! - every request and response decodes with actorflow's message definitions
//!   and re-encodes to the same message (`RecvTensor` responses also through the
//!   streaming decoder actorflow's workers use, for TensorFlow's field order);
//! - the client's calls to the master, replayed against an actorflow cluster,
//!   give the values TensorFlow's master answered (and the errors where it
//!   failed), and those are the values the client printed;
//! - the graph pieces TensorFlow's master registered on task 1 register with an
//!   actorflow worker.

use std::collections::HashMap;

mod common;
use common::Cluster;

use base64::Engine;
use bytes::Bytes;
use graph::Tensor;
use prost::Message;
use proto::tensorflow as pb;
use proto::tensorflow::master_service_client::MasterServiceClient;
use proto::tensorflow::worker_service_client::WorkerServiceClient;
use serde_json::Value;

struct Call {
    service: String,
    method: String,
    request: Vec<u8>,
    response: Option<Vec<u8>>,
    code: i64,
}

fn recorded() -> (Vec<Call>, Value) {
    let text = include_str!("fixtures/tf_traffic.json");
    let v: Value = serde_json::from_str(text).unwrap();
    let b64 = |x: &Value| {
        base64::engine::general_purpose::STANDARD
            .decode(x.as_str().unwrap())
            .unwrap()
    };
    let calls = v["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Call {
            service: c["service"].as_str().unwrap().to_owned(),
            method: c["method"].as_str().unwrap().to_owned(),
            request: b64(&c["request"]),
            response: (!c["response"].is_null()).then(|| b64(&c["response"])),
            code: c["code"].as_i64().unwrap(),
        })
        .collect();
    (calls, v["client"].clone())
}

/// Decodes `bytes` as `M`, checks that re-encoding gives the same message.
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8], what: &str) -> M {
    let m = M::decode(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    let again = M::decode(m.encode_to_vec().as_slice()).unwrap();
    assert_eq!(m, again, "{what}");
    m
}

macro_rules! check_pair {
    ($call:expr, $req:ty, $resp:ty) => {{
        let what = format!("{}/{}", $call.service, $call.method);
        round_trip::<$req>(&$call.request, &what);
        if let Some(r) = &$call.response {
            round_trip::<$resp>(r, &format!("{what} response"));
        }
    }};
}

#[test]
fn every_recorded_message_decodes_and_round_trips() {
    let (calls, _) = recorded();
    assert!(calls.len() > 30, "{} calls", calls.len());
    let mut methods = std::collections::BTreeSet::new();
    for c in &calls {
        methods.insert(c.method.clone());
        match c.method.as_str() {
            "CreateSession" => check_pair!(c, pb::CreateSessionRequest, pb::CreateSessionResponse),
            "ExtendSession" => check_pair!(c, pb::ExtendSessionRequest, pb::ExtendSessionResponse),
            "RunStep" => check_pair!(c, pb::RunStepRequest, pb::RunStepResponse),
            "PartialRunSetup" => {
                check_pair!(c, pb::PartialRunSetupRequest, pb::PartialRunSetupResponse)
            }
            "CloseSession" => check_pair!(c, pb::CloseSessionRequest, pb::CloseSessionResponse),
            "MakeCallable" => check_pair!(c, pb::MakeCallableRequest, pb::MakeCallableResponse),
            "RunCallable" => check_pair!(c, pb::RunCallableRequest, pb::RunCallableResponse),
            "ReleaseCallable" => {
                check_pair!(c, pb::ReleaseCallableRequest, pb::ReleaseCallableResponse)
            }
            "GetStatus" => check_pair!(c, pb::GetStatusRequest, pb::GetStatusResponse),
            "CreateWorkerSession" => check_pair!(
                c,
                pb::CreateWorkerSessionRequest,
                pb::CreateWorkerSessionResponse
            ),
            "DeleteWorkerSession" => check_pair!(
                c,
                pb::DeleteWorkerSessionRequest,
                pb::DeleteWorkerSessionResponse
            ),
            "RegisterGraph" => check_pair!(c, pb::RegisterGraphRequest, pb::RegisterGraphResponse),
            "RunGraph" => check_pair!(c, pb::RunGraphRequest, pb::RunGraphResponse),
            "CleanupGraph" => check_pair!(c, pb::CleanupGraphRequest, pb::CleanupGraphResponse),
            "RecvTensor" => {
                check_pair!(c, pb::RecvTensorRequest, pb::RecvTensorResponse);
                if let Some(r) = &c.response {
                    // The streaming decoder gives the message's tensor.
                    let plain = pb::RecvTensorResponse::decode(r.as_slice()).unwrap();
                    let want =
                        graph::import::tensor_from_proto(plain.tensor.as_ref().unwrap()).unwrap();
                    let mut framed = vec![0u8];
                    framed.extend((r.len() as u32).to_be_bytes());
                    framed.extend_from_slice(r);
                    let mut d = actorflow_distributed::tensor_coding::ResponseDecoder::new();
                    d.push(Bytes::from(framed)).unwrap();
                    assert_eq!(d.finish().unwrap(), Some(want));
                }
            }
            other => panic!("a call this test does not know: {other}"),
        }
    }
    // The recording holds the calls the issue names.
    for m in [
        "CreateSession",
        "ExtendSession",
        "RunStep",
        "PartialRunSetup",
        "MakeCallable",
        "RunCallable",
        "ReleaseCallable",
        "CloseSession",
        "GetStatus",
        "CreateWorkerSession",
        "RegisterGraph",
        "RunGraph",
        "RecvTensor",
        "CleanupGraph",
        "DeleteWorkerSession",
    ] {
        assert!(methods.contains(m), "no {m} in the recording");
    }
}

fn tensors(t: &[pb::TensorProto]) -> Vec<Tensor> {
    t.iter()
        .map(|p| graph::import::tensor_from_proto(p).unwrap())
        .collect()
}

fn named(t: &[pb::NamedTensorProto]) -> Vec<(String, Tensor)> {
    t.iter()
        .map(|n| {
            let v = graph::import::tensor_from_proto(n.tensor.as_ref().unwrap()).unwrap();
            (n.name.clone(), v)
        })
        .collect()
}

/// The client's printed values, flattened (nested lists of numbers).
fn flatten(v: &Value, out: &mut Vec<f32>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| flatten(x, out)),
        Value::Number(n) => out.push(n.as_f64().unwrap() as f32),
        _ => {}
    }
}

#[test]
fn the_clients_calls_replayed_on_actorflow_give_tensorflows_answers() {
    let (calls, client) = recorded();
    let c = Cluster::start(&[("worker", 2)], 1);
    let (rt, channel) = c.channel(0);
    let mut sessions: HashMap<String, String> = HashMap::new();
    let mut partials: HashMap<String, String> = HashMap::new();
    let mut callables: HashMap<i64, i64> = HashMap::new();
    let mut fetched: Vec<f32> = Vec::new();
    let mut replayed = 0;
    rt.block_on(async {
        let mut m = MasterServiceClient::new(channel);
        for call in calls
            .iter()
            .filter(|c| c.service == "tensorflow.MasterService")
        {
            replayed += 1;
            let tf_ok = call.code == 0;
            let resp = call.response.as_deref().unwrap_or_default();
            match call.method.as_str() {
                "CreateSession" => {
                    let req = pb::CreateSessionRequest::decode(call.request.as_slice()).unwrap();
                    let ours = m.create_session(req).await.unwrap().into_inner();
                    let theirs = pb::CreateSessionResponse::decode(resp).unwrap();
                    sessions.insert(theirs.session_handle, ours.session_handle);
                }
                "ExtendSession" => {
                    let mut req =
                        pb::ExtendSessionRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    m.extend_session(req).await.unwrap();
                }
                "PartialRunSetup" => {
                    let mut req =
                        pb::PartialRunSetupRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    let ours = m.partial_run_setup(req).await.unwrap().into_inner();
                    let theirs = pb::PartialRunSetupResponse::decode(resp).unwrap();
                    partials.insert(theirs.partial_run_handle, ours.partial_run_handle);
                }
                "RunStep" => {
                    let mut req = pb::RunStepRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    if !req.partial_run_handle.is_empty() {
                        req.partial_run_handle = partials[&req.partial_run_handle].clone();
                    }
                    let ours = m.run_step(req).await.unwrap().into_inner();
                    let theirs = pb::RunStepResponse::decode(resp).unwrap();
                    assert_eq!(ours.status_code, theirs.status_code, "{ours:?}");
                    assert_eq!(named(&ours.tensor), named(&theirs.tensor));
                    for (_, t) in named(&theirs.tensor) {
                        fetched.extend(t.as_slice::<f32>().unwrap());
                    }
                }
                "MakeCallable" => {
                    let mut req = pb::MakeCallableRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    let ours = m.make_callable(req).await.unwrap().into_inner();
                    let theirs = pb::MakeCallableResponse::decode(resp).unwrap();
                    callables.insert(theirs.handle, ours.handle);
                }
                "RunCallable" => {
                    let mut req = pb::RunCallableRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    req.handle = callables[&req.handle];
                    let ours = m.run_callable(req).await.unwrap().into_inner();
                    let theirs = pb::RunCallableResponse::decode(resp).unwrap();
                    assert_eq!(tensors(&ours.fetch), tensors(&theirs.fetch));
                    for t in tensors(&theirs.fetch) {
                        fetched.extend(t.as_slice::<f32>().unwrap());
                    }
                }
                "ReleaseCallable" => {
                    let mut req =
                        pb::ReleaseCallableRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    req.handle = callables[&req.handle];
                    m.release_callable(req).await.unwrap();
                }
                "CloseSession" => {
                    let mut req = pb::CloseSessionRequest::decode(call.request.as_slice()).unwrap();
                    req.session_handle = sessions[&req.session_handle].clone();
                    m.close_session(req).await.unwrap();
                }
                other => panic!("a master call this test does not replay: {other}"),
            }
            assert!(tf_ok, "TensorFlow's master failed {}", call.method);
        }
    });
    assert!(replayed >= 12, "{replayed} calls replayed");
    // What TensorFlow's master answered is what its client printed (the
    // error's step answered nothing).
    let mut printed = Vec::new();
    for k in ["run", "extended", "partial", "callable"] {
        flatten(&client[k], &mut printed);
    }
    assert_eq!(fetched, printed);
    assert_eq!(client["error"], "InvalidArgumentError");
}

#[test]
fn the_pieces_tensorflows_master_registered_register_with_an_actorflow_worker() {
    let (calls, _) = recorded();
    let c = Cluster::start(&[("worker", 2)], 1);
    let (rt, channel) = c.channel(1);
    rt.block_on(async {
        let mut w = WorkerServiceClient::new(channel);
        let mut registered = 0;
        for call in calls
            .iter()
            .filter(|c| c.service == "tensorflow.WorkerService")
        {
            match call.method.as_str() {
                "CreateWorkerSession" => {
                    let req =
                        pb::CreateWorkerSessionRequest::decode(call.request.as_slice()).unwrap();
                    w.create_worker_session(req).await.unwrap();
                }
                "RegisterGraph" => {
                    let req = pb::RegisterGraphRequest::decode(call.request.as_slice()).unwrap();
                    let h = w.register_graph(req).await.unwrap().into_inner();
                    assert!(!h.graph_handle.is_empty());
                    registered += 1;
                }
                "DeleteWorkerSession" => {
                    let req =
                        pb::DeleteWorkerSessionRequest::decode(call.request.as_slice()).unwrap();
                    w.delete_worker_session(req).await.unwrap();
                }
                _ => {}
            }
        }
        assert!(registered >= 5, "{registered} pieces");
    });
}
