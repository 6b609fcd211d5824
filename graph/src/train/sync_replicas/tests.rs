//! The graph `SyncReplicasOptimizer` builds: names, wiring, devices and errors.
//! (Its values are checked end to end in the root crate's
//! `tests/sync_replicas.rs`.)

use crate::builder::Scope;
use crate::ops::{self, Variable};
use crate::train::*;
use crate::{Code, DType, GraphDef, Tensor};

fn node<'a>(g: &'a GraphDef, name: &str) -> &'a crate::NodeDef {
    g.find(name).unwrap_or_else(|| panic!("no node {name}"))
}

struct Built {
    s: Scope,
    opt: SyncReplicasOptimizer<GradientDescentOptimizer>,
    train_op: crate::builder::Operation,
}

/// `w` and `b` on a PS task, a loss on the worker, wrapped gradient descent.
fn build(replicas_to_aggregate: usize, total: Option<usize>) -> Built {
    let root = Scope::new();
    let s = with_replica_device_setter(
        &root,
        &ReplicaDeviceSetter {
            ps_tasks: 2,
            worker_device: "/job:worker/task:0".into(),
            ..Default::default()
        },
    )
    .unwrap();
    let w0 = ops::constant(&s, Tensor::vector(&[1.0f32, 2.0])).unwrap();
    let w = Variable::new(&s, "w", &w0, true).unwrap();
    let b = Variable::new(&s, "b", &ops::scalar(&s, 0.5f32).unwrap(), true).unwrap();
    let step = get_or_create_global_step(&s).unwrap();
    let y = ops::add(
        &s,
        &ops::sum_axes(&s, &w.value, &[0], false).unwrap(),
        &b.value,
    )
    .unwrap();
    let loss = ops::mul(&s, &y, &y).unwrap();
    let opt = SyncReplicasOptimizer::new(
        GradientDescentOptimizer::new(0.1),
        replicas_to_aggregate,
        total,
    );
    let train_op = opt.minimize(&s, &loss, Some(&step), None).unwrap();
    Built {
        s: root,
        opt,
        train_op,
    }
}

#[test]
fn builds_tensorflows_layout() {
    let Built { s, opt, train_op } = build(2, Some(3));
    let g = s.graph_def();
    // variables round-robin over the PS tasks; the worker's ops on the worker
    assert_eq!(node(&g, "w").device, "/job:ps/task:0");
    assert_eq!(node(&g, "b").device, "/job:ps/task:1");
    assert_eq!(node(&g, "global_step").device, "/job:ps/task:0");
    // the local step: a local variable colocated with a NoOp on the worker
    assert_eq!(node(&g, "NoOp").device, "/job:worker/task:0");
    let ls = node(&g, "sync_rep_local_step");
    assert_eq!(ls.op, "VariableV2");
    assert_eq!(ls.get_attr::<Vec<String>>("_class").unwrap(), ["loc:@NoOp"]);
    assert_eq!(ls.get_attr::<DType>("dtype").unwrap(), DType::I64);
    assert_eq!(opt.local_step().unwrap().name(), "sync_rep_local_step");
    assert_eq!(
        local_variables(&s)
            .unwrap()
            .iter()
            .map(|v| v.name().to_owned())
            .collect::<Vec<_>>(),
        ["sync_rep_local_step"]
    );
    assert!(!global_variables(&s)
        .unwrap()
        .iter()
        .any(|v| v.name() == "sync_rep_local_step"));
    // one accumulator per variable, with it, shared as `<var>:0/grad_accum`
    let accs = opt.accumulators().unwrap();
    assert_eq!(accs.len(), 2);
    for (acc, var, device) in [
        (&accs[0].0, "w", "/job:ps/task:0"),
        (&accs[1].0, "b", "/job:ps/task:1"),
    ] {
        let n = node(&g, acc.handle.op().name());
        assert!(n.name.starts_with("sync_replicas/conditional_accumulator"));
        assert_eq!(n.op, "ConditionalAccumulator");
        assert_eq!(n.device, device);
        assert_eq!(
            n.get_attr::<Vec<String>>("_class").unwrap(),
            [format!("loc:@{var}")]
        );
        assert_eq!(
            n.get_attr::<String>("shared_name").unwrap(),
            format!("{var}:0/grad_accum")
        );
    }
    let apply = node(&g, "sync_replicas/AccumulatorApplyGradient");
    assert_eq!(apply.input[0], "sync_replicas/conditional_accumulator");
    assert_eq!(apply.input[1], "sync_rep_local_step/read");
    let take = node(&g, "sync_replicas/AccumulatorTakeGradient");
    assert_eq!(node(&g, &take.input[1]).op, "Const");
    // the wrapped update takes the averaged gradients, in the root name scope
    let upd = node(&g, "GradientDescent/update_w/ApplyGradientDescent");
    assert_eq!(upd.input[2], "sync_replicas/AccumulatorTakeGradient");
    // the token queue and its ops on the global step's device
    let q = node(&g, "sync_token_q");
    assert_eq!(q.op, "FIFOQueueV2");
    assert_eq!(q.device, "/job:ps/task:0");
    assert_eq!(q.get_attr::<String>("shared_name").unwrap(), "sync_token_q");
    assert_eq!(opt.sync_token_queue().unwrap().op().name(), "sync_token_q");
    // the train op: after both applies, dequeue a token into the local step
    assert_eq!(train_op.op_type(), "Assign");
    let t = node(&g, train_op.name());
    assert_eq!(t.input[0], "sync_rep_local_step");
    assert_eq!(t.input[1], "sync_token_q_Dequeue");
    let deq = node(&g, "sync_token_q_Dequeue");
    assert!(deq
        .input
        .contains(&"^sync_replicas/AccumulatorApplyGradient".to_owned()));
    assert!(deq
        .input
        .contains(&"^sync_replicas/AccumulatorApplyGradient_1".to_owned()));
    // the sync op: three tokens of the step read after the update
    let r = opt.chief_queue_runner().unwrap();
    assert_eq!(r.enqueue_ops, ["sync_token_q_EnqueueMany"]);
    assert_eq!(r.queue_name, "dummy_queue");
    assert_eq!(node(&g, &r.close_op).op, "QueueCloseV2");
    assert!(node(&g, &r.cancel_op)
        .get_attr::<bool>("cancel_pending_enqueues")
        .unwrap());
    let enq = node(&g, "sync_token_q_EnqueueMany");
    assert!(enq
        .input
        .contains(&"^GradientDescent/increment_global_step".to_owned()));
    let fill = node(&g, &enq.input[1]);
    assert_eq!(fill.op, "Fill");
    let dims = node(&g, &fill.input[0])
        .get_attr::<Tensor>("value")
        .unwrap();
    assert_eq!(dims.to_f64_vec().unwrap(), [3.0]);
    let read = node(&g, &fill.input[1]);
    assert_eq!(read.input[0], "global_step");
    assert!(read
        .input
        .contains(&"^GradientDescent/increment_global_step".to_owned()));
    assert!(!ops::QueueRunnerSpec::all_in(&s)
        .unwrap()
        .iter()
        .any(|q| q.queue_name == "dummy_queue"));
    // the local inits
    let init = opt.local_step_init_op().unwrap();
    assert_eq!(init.name(), "Assign");
    let chief = node(&g, opt.chief_init_op().unwrap().name());
    assert_eq!(chief.name, "sync_replicas/group_deps");
    assert!(chief.input.contains(&"^Assign".to_owned()));
    assert!(chief
        .input
        .contains(&"^sync_replicas/SetGlobalStep".to_owned()));
    assert!(chief
        .input
        .contains(&"^sync_replicas/SetGlobalStep_1".to_owned()));
    let ready = opt.ready_for_local_init_op().unwrap();
    assert!(ready
        .op()
        .name()
        .starts_with("report_uninitialized_variables/"));
    assert_eq!(ready.dtype(), DType::String);
    // slots and names delegate to the wrapped optimizer
    assert_eq!(opt.name(), "sync_replicas");
    assert!(opt.get_slot_names().is_empty());
}

#[test]
fn init_tokens() {
    let Built { s, opt, .. } = build(3, Some(2));
    let op = opt.get_init_tokens_op(-1).unwrap();
    assert_eq!(op.op_type(), "QueueEnqueueManyV2");
    let g = s.graph_def();
    let fill = node(&g, &node(&g, op.name()).input[1]);
    let dims = node(&g, &fill.input[0])
        .get_attr::<Tensor>("value")
        .unwrap();
    assert_eq!(dims.to_f64_vec().unwrap(), [3.0]);
    // one worker short of the aggregate: at least one token is needed
    let e = opt.get_init_tokens_op(0).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("Too few tokens"), "{e}");
    assert_eq!(
        opt.get_init_tokens_op(1).unwrap().op_type(),
        "QueueEnqueueManyV2"
    );
    let Built { opt, .. } = build(2, None);
    let none = opt.get_init_tokens_op(0).unwrap();
    assert_eq!((none.name(), none.op_type()), ("no_init_tokens", "NoOp"));
}

#[test]
fn errors() {
    let s = Scope::new();
    let w = Variable::new(&s, "w", &ops::scalar(&s, 1.0f32).unwrap(), true).unwrap();
    let loss = ops::mul(&s, &w.value, &w.value).unwrap();
    let opt = SyncReplicasOptimizer::new(GradientDescentOptimizer::new(0.1), 2, None);
    assert_eq!(
        opt.chief_queue_runner().unwrap_err().code(),
        Code::FailedPrecondition
    );
    assert_eq!(
        opt.get_init_tokens_op(-1).unwrap_err().code(),
        Code::FailedPrecondition
    );
    let e = opt.minimize(&s, &loss, None, None).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("Global step is required"), "{e}");
    let step = get_or_create_global_step(&s).unwrap();
    let e = opt.apply_gradients(&s, &[], Some(&step)).unwrap_err();
    assert!(e.message().contains("at least one variable"), "{e}");
    // two workers' optimizers in one graph share accumulators and queue by name
    let other = SyncReplicasOptimizer::new(GradientDescentOptimizer::new(0.1), 2, None);
    opt.minimize(&s, &loss, Some(&step), None).unwrap();
    other
        .minimize(&s.with_name_scope("replica_1"), &loss, Some(&step), None)
        .unwrap();
    let g = s.graph_def();
    assert_eq!(
        other.local_step().unwrap().name(),
        "replica_1/sync_rep_local_step"
    );
    let q2 = other.sync_token_queue().unwrap();
    assert_eq!(q2.op().name(), "sync_token_q_1");
    assert_eq!(
        node(&g, q2.op().name())
            .get_attr::<String>("shared_name")
            .unwrap(),
        "sync_token_q"
    );
    let a2 = &other.accumulators().unwrap()[0].0;
    assert_eq!(
        node(&g, a2.handle.op().name())
            .get_attr::<String>("shared_name")
            .unwrap(),
        "w:0/grad_accum"
    );
}
