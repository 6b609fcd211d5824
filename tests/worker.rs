//! The worker role on its own, as a master drives it through `WorkerInterface`:
//! a piece with client-terminated `_Recv`/`_Send` nodes gets its feeds and gives
//! its fetches by rendezvous key (TensorFlow's `RunGraphRequest.send`/`recv_key`),
//! is partitioned over the worker's devices, and runs as often as asked; steps
//! are aborted from outside; unknown handles and devices are clear errors.

use std::sync::Arc;
use std::time::Duration;

use actorflow::actors::worker::{
    LocalWorker, RegisterGraphRequest, RunGraphRequest, WorkerInterface,
};
use actorflow::{Code, DType, GraphDef, NodeDef, Runtime, RuntimeOptions, Tensor};

const CLIENT: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const INCARNATION: u64 = 0x1234_5678_9abc;

fn dev(i: usize) -> String {
    format!("/job:localhost/replica:0/task:0/device:CPU:{i}")
}

/// A client-terminated `_Recv` of `tensor` on `device`.
fn feed(name: &str, tensor: &str, device: &str) -> NodeDef {
    NodeDef::new(name, "_Recv")
        .with_attr("tensor_type", DType::F32)
        .with_attr("tensor_name", tensor)
        .with_attr("send_device", CLIENT)
        .with_attr("send_device_incarnation", INCARNATION as i64)
        .with_attr("recv_device", device)
        .with_attr("client_terminated", true)
        .with_device(device)
}

/// A client-terminated `_Send` of `input` from `device`.
fn fetch(name: &str, input: &str, tensor: &str, device: &str) -> NodeDef {
    NodeDef::new(name, "_Send")
        .with_input(input)
        .with_attr("T", DType::F32)
        .with_attr("tensor_name", tensor)
        .with_attr("send_device", device)
        .with_attr("send_device_incarnation", 1i64)
        .with_attr("recv_device", CLIENT)
        .with_attr("client_terminated", true)
        .with_device(device)
}

fn key(src: &str, inc: u64, dst: &str, tensor: &str) -> String {
    format!("{src};{inc:x};{dst};{tensor};0:0")
}

/// `y = x * x` on CPU:1, `z = y + x` on CPU:0; `x` fed on CPU:0, `z` fetched.
fn piece() -> GraphDef {
    GraphDef {
        node: vec![
            feed("x", "x:0", &dev(0)),
            NodeDef::new("y", "Mul")
                .with_input("x")
                .with_input("x")
                .with_attr("T", DType::F32)
                .with_device(dev(1)),
            NodeDef::new("z", "AddV2")
                .with_input("y")
                .with_input("x")
                .with_attr("T", DType::F32)
                .with_device(dev(0)),
            fetch("send_z", "z", "z:0", &dev(0)),
        ],
        ..Default::default()
    }
}

fn worker(rt: &Runtime) -> Arc<dyn WorkerInterface> {
    Arc::new(LocalWorker::new(rt, Arc::from("w"), None))
}

#[test]
fn feeds_and_fetches_travel_by_rendezvous_key() {
    let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).unwrap();
    let w = worker(&rt);
    let reg = w
        .register_graph(RegisterGraphRequest {
            graph: piece().into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(reg.partitions.len(), 2, "the worker partitions by device");
    assert_eq!(reg.transfers, 2, "x to CPU:1 and y back");
    let x_key = key(CLIENT, INCARNATION, &dev(0), "x:0");
    let z_key = key(&dev(0), 1, CLIENT, "z:0");
    for (step_id, x) in [(11, 3.0f32), (12, -2.0)] {
        let r = w
            .run_graph(RunGraphRequest {
                handle: Arc::clone(&reg.handle),
                step_id,
                sends: vec![(x_key.clone(), Tensor::scalar(x))],
                recv_keys: vec![z_key.clone()],
                ..Default::default()
            })
            .unwrap()
            .wait()
            .unwrap();
        r.status.unwrap();
        assert_eq!(
            r.recvs,
            vec![(z_key.clone(), Some(Tensor::scalar(x * x + x)))]
        );
    }

    // A key the step never sends under fails the run, naming it.
    let missing = key(&dev(0), 1, CLIENT, "nothing:0");
    let r = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 13,
            sends: vec![(x_key.clone(), Tensor::scalar(1.0f32))],
            recv_keys: vec![missing.clone()],
            ..Default::default()
        })
        .unwrap()
        .wait()
        .unwrap();
    let e = r.status.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains(&missing), "{e}");

    // A malformed key is refused before anything runs.
    let e = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 14,
            sends: vec![("not a key".into(), Tensor::scalar(1.0f32))],
            ..Default::default()
        })
        .err()
        .expect("refused");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    rt.shutdown();
}

#[test]
fn a_step_is_aborted_from_outside_or_by_its_deadline() {
    let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).unwrap();
    let w = worker(&rt);
    let reg = w
        .register_graph(RegisterGraphRequest {
            graph: piece().into(),
            ..Default::default()
        })
        .unwrap();
    // Nothing is sent for x: the step waits until it is aborted.
    let rx = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 21,
            ..Default::default()
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    w.abort_step(21, actorflow::Status::aborted("another worker failed"));
    let e = rx.wait().unwrap().status.unwrap_err();
    assert_eq!(e.code(), Code::Aborted, "{e}");
    assert!(e.message().contains("another worker failed"), "{e}");
    // Aborting a step that is over (or unknown) does nothing.
    w.abort_step(21, actorflow::Status::aborted("late"));

    let rx = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 22,
            timeout: Some(Duration::from_millis(30)),
            ..Default::default()
        })
        .unwrap();
    let e = rx.wait().unwrap().status.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e}");
    rt.shutdown();
}

#[test]
fn unknown_handles_and_foreign_devices_are_clear_errors() {
    let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(2)).unwrap();
    let w = worker(&rt);
    let mut g = piece();
    g.node[1].device = "/job:ps/replica:0/task:3/device:CPU:0".into();
    let e = w
        .register_graph(RegisterGraphRequest {
            graph: g.into(),
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(e.node(), Some("y"), "{e}");

    let reg = w
        .register_graph(RegisterGraphRequest {
            graph: piece().into(),
            ..Default::default()
        })
        .unwrap();
    w.deregister_graph(&reg.handle).unwrap();
    let e = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 31,
            ..Default::default()
        })
        .err()
        .expect("refused");
    assert_eq!(e.code(), Code::Aborted, "{e}");
    let e = w.deregister_graph(&reg.handle).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    rt.shutdown();
}

/// On a cluster worker a step's table is created by whichever comes first: here a
/// peer's receive of a value the piece sends to another task waits before the step
/// runs, gets it when it does, and the step's cleanup leaves nothing behind.
#[test]
fn a_peer_receive_may_come_before_the_step_runs() {
    use actorflow::rendezvous::{FrameIter, ParsedKey, RendezvousMgr};
    let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(1)).unwrap();
    let mgr = Arc::new(RendezvousMgr::new());
    let w = LocalWorker::new(&rt, Arc::from("w"), None)
        .with_step_tables(Arc::clone(&mgr) as Arc<dyn rendezvous::StepTables>);
    let peer = "/job:worker/replica:0/task:1/device:CPU:0";
    let incarnation = rt.devices()[0].ctx.incarnation;
    let graph = GraphDef {
        node: vec![
            feed("x", "x:0", &dev(0)),
            NodeDef::new("y", "Neg")
                .with_input("x")
                .with_attr("T", DType::F32)
                .with_device(dev(0)),
            NodeDef::new("to_peer", "_Send")
                .with_input("y")
                .with_attr("T", DType::F32)
                .with_attr("tensor_name", "y:0")
                .with_attr("send_device", dev(0))
                .with_attr("send_device_incarnation", incarnation as i64)
                .with_attr("recv_device", peer)
                .with_device(dev(0)),
        ],
        ..Default::default()
    };
    let reg = w
        .register_graph(RegisterGraphRequest {
            graph: graph.into(),
            ..Default::default()
        })
        .unwrap();
    let y_key = ParsedKey::new(&dev(0), incarnation, peer, "y:0").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = mgr
        .find_or_create(51)
        .unwrap()
        .recv(&y_key, FrameIter::ROOT, || {
            Box::new(move |v| tx.send(v).unwrap())
        });
    assert!(waiting.is_none(), "the peer waits for the step");
    let r = w
        .run_graph(RunGraphRequest {
            handle: Arc::clone(&reg.handle),
            step_id: 51,
            sends: vec![(
                key(CLIENT, INCARNATION, &dev(0), "x:0"),
                Tensor::scalar(4.0f32),
            )],
            ..Default::default()
        })
        .unwrap()
        .wait()
        .unwrap();
    r.status.unwrap();
    assert_eq!(rx.recv().unwrap().unwrap(), Some(Tensor::scalar(-4.0f32)));
    w.cleanup_step(51);
    assert!(mgr.is_empty());
    let e = mgr.find_or_create(51).err().expect("refused after cleanup");
    assert_eq!(e.code(), Code::Aborted, "{e}");
    rt.shutdown();
}
