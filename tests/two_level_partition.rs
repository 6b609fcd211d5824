//! Two-level partitioning end to end, as a master and its workers do it: a graph is
//! placed on four CPUs, devices {0, 1} form location 0 and {2, 3} location 1 (two
//! tasks), the master splits it by location (`partition_by_location`), and each
//! location's piece is registered with a worker, which splits it by device again
//! from the node `device` names. Both pieces run under one step id, meeting in the
//! manager's per-step table; feeds and fetches travel as client-terminated
//! `_Recv`/`_Send` nodes keyed as TensorFlow keys them. Every value must equal a
//! plain one-device session's.

use std::sync::Arc;
use std::time::Duration;

use actorflow::actors::worker::{
    LocalWorker, RegisterGraphRequest, RunGraphRequest, WorkerInterface,
};
use actorflow::graph::builder::{cond, while_loop, WhileOptions};
use actorflow::graph::passes::partition::{partition_by_location, PartitionDevice, Partitions};
use actorflow::graph::passes::place::{place, KernelSupport, PlacementOptions};
use actorflow::graph::{Graph, OpRegistry};
use actorflow::rendezvous::{FrameIter, ParsedKey, RendezvousMgr, StepTables};
use actorflow::{
    ops, DType, GraphDef, NodeDef, Output, Runtime, RuntimeOptions, Scope, Session, SessionOptions,
    Shape, Tensor,
};

const CLIENT: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const CLIENT_INCARNATION: u64 = 0xc11e;
/// Devices 0 and 1 are location 0, devices 2 and 3 location 1.
const LOCATION: [usize; 4] = [0, 0, 1, 1];

fn cpu(i: usize) -> String {
    format!("/device:CPU:{i}")
}

struct AllKernels;

impl KernelSupport for AllKernels {
    fn supports(&self, _: &NodeDef, _: &str) -> bool {
        true
    }
}

/// The answers of a one-device session, devices stripped.
fn reference(s: &Scope, feeds: &[(&Output, Tensor)], fetches: &[&Output]) -> Vec<Tensor> {
    let mut gd = s.graph_def();
    gd.node.iter_mut().for_each(|n| n.device.clear());
    let sess = Session::new(&gd, SessionOptions::default().with_cpu_devices(1)).unwrap();
    let names: Vec<String> = feeds.iter().map(|(o, _)| o.name()).collect();
    let feeds: Vec<(&str, Tensor)> = names
        .iter()
        .zip(feeds)
        .map(|(n, (_, t))| (n.as_str(), t.clone()))
        .collect();
    let fetches: Vec<String> = fetches.iter().map(|o| o.name()).collect();
    let fetches: Vec<&str> = fetches.iter().map(String::as_str).collect();
    sess.run(&feeds, &fetches, &[]).unwrap()
}

/// A registered piece: its handle, and the feeds and fetches it holds (by index
/// into the test's lists) with their rendezvous keys.
struct Piece {
    handle: Arc<str>,
    feeds: Vec<(usize, String)>,
    fetches: Vec<(usize, String)>,
}

/// A graph split over two locations and registered, one piece per location.
struct TwoLevel {
    rt: Runtime,
    mgr: Arc<RendezvousMgr>,
    worker: LocalWorker,
    /// The pieces, by location.
    pieces: Vec<Piece>,
    /// The first level's output.
    partitions: Partitions,
}

impl TwoLevel {
    /// Places `s`'s graph on four CPUs (fed placeholders become client-terminated
    /// `_Recv`s, each fetch gets a client-terminated `_Send` beside it), partitions
    /// it by location and registers each piece.
    fn new(s: &Scope, feeds: &[&Output], fetches: &[&Output]) -> TwoLevel {
        let rt = Runtime::new(RuntimeOptions::default().with_cpu_devices(4)).unwrap();
        let names: Vec<_> = rt.devices().iter().map(|d| d.name.clone()).collect();
        let pdevs: Vec<PartitionDevice> = rt
            .devices()
            .iter()
            .map(|d| PartitionDevice {
                name: d.name.to_string(),
                incarnation: d.ctx.incarnation,
            })
            .collect();
        let mut gd = s.graph_def();
        for n in gd.node.iter_mut() {
            if let Some(i) = feeds.iter().position(|f| f.op().name() == n.name) {
                let dtype: DType = n.get_attr("dtype").unwrap();
                *n = NodeDef::new(n.name.clone(), "_Recv")
                    .with_attr("tensor_type", dtype)
                    .with_attr("tensor_name", format!("feed{i}"))
                    .with_attr("send_device", CLIENT)
                    .with_attr("send_device_incarnation", CLIENT_INCARNATION as i64)
                    .with_attr("recv_device", "")
                    .with_attr("client_terminated", true)
                    .with_device(n.device.clone());
            }
        }
        let g = Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
        let mut assign = place(&g, &names, &AllKernels, &PlacementOptions::default()).unwrap();
        let mut gd = g.to_graph_def();
        for (n, &d) in gd.node.iter_mut().zip(&assign) {
            n.device = pdevs[d].name.clone();
            if n.op == "_Recv" {
                n.attr.insert("recv_device".into(), n.device.clone().into());
            }
        }
        for (i, f) in fetches.iter().enumerate() {
            let d = assign[g.find(f.op().name()).unwrap()];
            gd.node.push(
                NodeDef::new(format!("fetch{i}"), "_Send")
                    .with_input(f.name())
                    .with_attr("T", f.dtype())
                    .with_attr("tensor_name", format!("fetch{i}"))
                    .with_attr("send_device", pdevs[d].name.clone())
                    .with_attr("send_device_incarnation", pdevs[d].incarnation as i64)
                    .with_attr("recv_device", CLIENT)
                    .with_attr("client_terminated", true)
                    .with_device(pdevs[d].name.clone()),
            );
            assign.push(d);
        }
        let g = Graph::from_graph_def(&gd, OpRegistry::global()).unwrap();
        let partitions = partition_by_location(&g, &assign, &pdevs, &LOCATION).unwrap();

        let mgr = Arc::new(RendezvousMgr::new());
        let worker = LocalWorker::new(&rt, Arc::from("w"), None)
            .with_step_tables(Arc::clone(&mgr) as Arc<dyn StepTables>);
        let mut pieces = Vec::new();
        for nodes in partitions.per_device.values() {
            let mut piece_feeds = Vec::new();
            let mut piece_fetches = Vec::new();
            for n in nodes
                .iter()
                .filter(|n| n.get_attr::<bool>("client_terminated").unwrap_or(false))
            {
                let tensor: String = n.get_attr("tensor_name").unwrap();
                let (src, inc, dst): (String, i64, String) = (
                    n.get_attr("send_device").unwrap(),
                    n.get_attr("send_device_incarnation").unwrap(),
                    n.get_attr("recv_device").unwrap(),
                );
                let key = ParsedKey::new(&src, inc as u64, &dst, &tensor)
                    .unwrap()
                    .full_key(FrameIter::ROOT);
                match tensor.strip_prefix("feed") {
                    Some(i) => piece_feeds.push((i.parse().unwrap(), key)),
                    None => {
                        let i = tensor.strip_prefix("fetch").unwrap();
                        piece_fetches.push((i.parse().unwrap(), key));
                    }
                }
            }
            let reg = worker
                .register_graph(RegisterGraphRequest {
                    graph: GraphDef {
                        node: nodes.clone(),
                        ..Default::default()
                    }
                    .into(),
                    ..Default::default()
                })
                .unwrap();
            pieces.push(Piece {
                handle: reg.handle,
                feeds: piece_feeds,
                fetches: piece_fetches,
            });
        }
        TwoLevel {
            rt,
            mgr,
            worker,
            pieces,
            partitions,
        }
    }

    /// Runs every piece under `step_id` and returns the fetches in order.
    fn run(&self, step_id: u64, feeds: &[Tensor], num_fetches: usize) -> Vec<Tensor> {
        let runs: Vec<_> = self
            .pieces
            .iter()
            .map(|piece| {
                let rx = self
                    .worker
                    .run_graph(RunGraphRequest {
                        handle: Arc::clone(&piece.handle),
                        step_id,
                        sends: piece
                            .feeds
                            .iter()
                            .map(|(i, k)| (k.clone(), feeds[*i].clone()))
                            .collect(),
                        recv_keys: piece.fetches.iter().map(|(_, k)| k.clone()).collect(),
                        timeout: Some(Duration::from_secs(30)),
                        ..Default::default()
                    })
                    .unwrap();
                (rx, &piece.fetches)
            })
            .collect();
        let mut out: Vec<Option<Tensor>> = vec![None; num_fetches];
        for (rx, fetches) in runs {
            let r = rx.wait().unwrap();
            r.status.unwrap();
            assert_eq!(r.recvs.len(), fetches.len());
            for ((i, key), (got_key, v)) in fetches.iter().zip(r.recvs) {
                assert_eq!(key, &got_key);
                out[*i] = Some(v.expect("a fetch was produced"));
            }
        }
        self.mgr.cleanup(step_id);
        assert!(self.mgr.is_empty());
        out.into_iter().map(|t| t.expect("fetched")).collect()
    }

    /// The op names of location `l`'s piece.
    fn ops(&self, l: usize) -> Vec<&str> {
        self.partitions.per_device[&l]
            .iter()
            .map(|n| n.op.as_str())
            .collect()
    }

    /// The location of the node named `name` in the first level's output.
    fn location_of(&self, name: &str) -> usize {
        *self
            .partitions
            .per_device
            .iter()
            .find(|(_, nodes)| nodes.iter().any(|n| n.name == name))
            .unwrap_or_else(|| panic!("{name} not partitioned"))
            .0
    }
}

impl Drop for TwoLevel {
    fn drop(&mut self) {
        self.rt.shutdown();
    }
}

#[test]
fn fan_out_and_control_edges_across_locations() {
    let s = Scope::new();
    let on = |i: usize| s.with_device(&cpu(i));
    let x = ops::placeholder(&on(0), DType::F32, Shape::known(&[3])).unwrap();
    let a = ops::mul(&on(1), &x, &x).unwrap();
    // a is read on both devices of location 1: one pair at the first level
    let b = ops::add(&on(2), &a, &x).unwrap();
    let c = ops::sub(&on(3), &a, &ops::scalar(&on(3), 1.0f32).unwrap()).unwrap();
    let gate = ops::no_op(&on(3).with_control_dependencies(&[b.op()])).unwrap();
    let d = ops::mul(&on(0).with_control_dependencies(&[&gate]), &b, &c).unwrap();
    let e = ops::add(&on(2).with_control_dependencies(&[d.op()]), &c, &x).unwrap();
    let t = TwoLevel::new(&s, &[&x], &[&d, &e, &a]);
    let a_transfers = t.partitions.per_device[&1]
        .iter()
        .filter(|n| n.op == "_Recv" && n.name.starts_with(&format!("{}/", a.op().name())))
        .count();
    assert_eq!(a_transfers, 1, "one Recv of a in location 1");
    assert_eq!(
        (t.location_of(d.op().name()), t.location_of(gate.name())),
        (0, 1)
    );
    for (step, xv) in [(1u64, [1.0f32, -2.0, 0.5]), (2, [3.0, 0.0, -1.5])] {
        let xv = Tensor::vector(&xv);
        let want = reference(&s, &[(&x, xv.clone())], &[&d, &e, &a]);
        assert_eq!(t.run(step, &[xv], 3), want, "step {step}");
    }
}

#[test]
fn a_cond_whose_branches_run_in_the_other_location() {
    let s = Scope::new();
    let on = |i: usize| s.with_device(&cpu(i));
    let p = ops::placeholder(&on(0), DType::Bool, Shape::scalar()).unwrap();
    let x = ops::placeholder(&on(1), DType::F32, Shape::scalar()).unwrap();
    let out = cond(
        &on(0),
        &p,
        // constants in the branches wait on the branch pivots across locations
        |b| {
            let b3 = b.with_device(&cpu(3));
            Ok(vec![ops::mul(&b3, &x, &ops::scalar(&b3, 10.0f32)?)?])
        },
        |b| {
            let (b1, b2) = (b.with_device(&cpu(1)), b.with_device(&cpu(2)));
            let y = ops::sub(&b2, &x, &ops::scalar(&b2, 1.0f32)?)?;
            Ok(vec![ops::add(&b1, &y, &ops::scalar(&b1, 0.5f32)?)?])
        },
    )
    .unwrap();
    let z = ops::mul(&on(2), &out[0], &x).unwrap();
    let t = TwoLevel::new(&s, &[&p, &x], &[&out[0], &z]);
    for (step, pv, xv) in [(1u64, true, 2.0f32), (2, false, 2.0), (3, true, -4.0)] {
        let feeds = [Tensor::scalar(pv), Tensor::scalar(xv)];
        let want = reference(
            &s,
            &[(&p, feeds[0].clone()), (&x, feeds[1].clone())],
            &[&out[0], &z],
        );
        assert_eq!(t.run(step, &feeds, 2), want, "step {step}");
    }
}

/// `while i < n: (i + 1, x * k + i)`: the condition and `i` on CPU:0, `x`'s body on
/// CPU:3 and CPU:0, the invariant `k` from CPU:2, and a cond on the loop variable
/// inside the body in location 1.
#[test]
fn a_while_loop_whose_body_spans_both_locations() {
    let s = Scope::new();
    let on = |i: usize| s.with_device(&cpu(i));
    let n = ops::placeholder(&on(0), DType::I32, Shape::scalar()).unwrap();
    let k = ops::scalar(&on(2), 1.5f32).unwrap();
    let i0 = ops::scalar(&on(0), 0i32).unwrap();
    let x0 = ops::scalar(&on(1), 1.0f32).unwrap();
    let outs = while_loop(
        &on(0),
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let (b0, b2, b3) = (
                b.with_device(&cpu(0)),
                b.with_device(&cpu(2)),
                b.with_device(&cpu(3)),
            );
            let scaled = ops::mul(&b3, &v[1], &k)?;
            let big = ops::greater(&b2, &scaled, &ops::scalar(&b2, 4.0f32)?)?;
            let damped = cond(
                &b2,
                &big,
                |t| {
                    Ok(vec![ops::sub(
                        &t.with_device(&cpu(3)),
                        &scaled,
                        &ops::scalar(t, 2.0f32)?,
                    )?])
                },
                |f| Ok(vec![ops::identity(f, &scaled)?]),
            )?;
            let i_f = ops::cast(&b0, &v[0], DType::F32)?;
            Ok(vec![
                ops::add(&b0, &v[0], &ops::scalar(&b0, 1i32)?)?,
                ops::add(&b0, &damped[0], &i_f)?,
            ])
        },
        &[i0, x0],
        &WhileOptions::default(),
    )
    .unwrap();
    let t = TwoLevel::new(&s, &[&n], &[&outs[0], &outs[1]]);
    assert!(t.ops(0).contains(&"LoopCond"));
    assert!(
        !t.ops(1).contains(&"LoopCond"),
        "location 1 has no LoopCond"
    );
    assert!(
        t.ops(1).contains(&"NextIteration"),
        "location 1 iterates by a control loop"
    );
    for (step, nv) in [(1u64, 0i32), (2, 1), (3, 7)] {
        let feeds = [Tensor::scalar(nv)];
        let want = reference(&s, &[(&n, feeds[0].clone())], &[&outs[0], &outs[1]]);
        assert_eq!(want[0], Tensor::scalar(nv));
        assert_eq!(t.run(step, &feeds, 2), want, "n = {nv}");
    }
}

/// Nested loops: the outer condition in location 0, the inner loop's condition on
/// CPU:1 and its body on CPU:2 and CPU:3, so location 1 needs stacked control loops
/// and its worker finds both frames' pivots among received predicates.
#[test]
fn nested_loops_spread_over_both_locations() {
    let s = Scope::new();
    let on = |i: usize| s.with_device(&cpu(i));
    let n = ops::placeholder(&on(0), DType::I32, Shape::scalar()).unwrap();
    let i0 = ops::scalar(&on(0), 0i32).unwrap();
    let x0 = ops::scalar(&on(0), 1.0f32).unwrap();
    let outs = while_loop(
        &on(0),
        |b, v| ops::less(b, &v[0], &n),
        |b, v| {
            let j0 = ops::scalar(&b.with_device(&cpu(1)), 0i32)?;
            let inner = while_loop(
                &b.with_device(&cpu(1)),
                |c, w| ops::less(c, &w[0], &v[0]),
                |c, w| {
                    let (c2, c3) = (c.with_device(&cpu(2)), c.with_device(&cpu(3)));
                    let y = ops::add(&c2, &w[1], &ops::scalar(&c2, 0.5f32)?)?;
                    Ok(vec![
                        ops::add(c, &w[0], &ops::scalar(c, 1i32)?)?,
                        ops::mul(&c3, &y, &ops::scalar(&c3, 0.75f32)?)?,
                    ])
                },
                &[j0, v[1].clone()],
                &WhileOptions::default(),
            )?;
            let b0 = b.with_device(&cpu(0));
            Ok(vec![
                ops::add(&b0, &v[0], &ops::scalar(&b0, 1i32)?)?,
                ops::mul(&b0, &inner[1], &ops::scalar(&b0, 1.25f32)?)?,
            ])
        },
        &[i0, x0],
        &WhileOptions::default(),
    )
    .unwrap();
    let t = TwoLevel::new(&s, &[&n], &[&outs[0], &outs[1]]);
    assert!(
        !t.ops(1).contains(&"LoopCond"),
        "location 1 has no LoopCond"
    );
    for (step, nv) in [(1u64, 0i32), (2, 1), (3, 4)] {
        let feeds = [Tensor::scalar(nv)];
        let want = reference(&s, &[(&n, feeds[0].clone())], &[&outs[0], &outs[1]]);
        assert_eq!(t.run(step, &feeds, 2), want, "n = {nv}");
    }
}
