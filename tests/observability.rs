//! Observability end to end: the `tracing` spans and events of real steps, the
//! Chrome trace of traced steps on two devices (tracks, one slice per executed
//! node, Send→Recv flow arrows, loops), and DOT rendering of placed, partitioned
//! and looping graphs (checked with Graphviz when it is installed).

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use actorflow::graph::builder::{while_loop, WhileOptions};
use actorflow::ops::{self, QueueOptions};
use actorflow::trace::{ChromeTrace, NODE_CATEGORY, PARTITION_CATEGORY};
use actorflow::{
    dot, Code, DType, Output, RunArgs, RunMetadata, RunOptions, Scope, Session, SessionOptions,
    Shape, Tensor, TraceLevel,
};
use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// A span opened or an event emitted, with its fields as text.
#[derive(Clone, Debug)]
struct Record {
    span: bool,
    name: String,
    fields: HashMap<String, String>,
    /// For a span: its id and its parent span's id.
    id: Option<u64>,
    parent: Option<u64>,
    /// A span closing (its id in `id`).
    close: bool,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// A layer that keeps every span and event.
struct Capture(Arc<Mutex<Vec<Record>>>);

impl<S> Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::Id,
        ctx: Context<'_, S>,
    ) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let name = attrs.metadata().name().to_owned();
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => ctx.current_span().id().map(|p| p.into_u64()),
            None => None,
        };
        self.0.lock().unwrap().push(Record {
            span: true,
            name,
            fields,
            id: Some(id.into_u64()),
            parent,
            close: false,
        });
    }
    fn on_close(&self, id: tracing::Id, _: Context<'_, S>) {
        self.0.lock().unwrap().push(Record {
            span: false,
            name: String::new(),
            fields: HashMap::new(),
            id: Some(id.into_u64()),
            parent: None,
            close: true,
        });
    }
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let name = fields.get("message").cloned().unwrap_or_default();
        self.0.lock().unwrap().push(Record {
            span: false,
            name,
            fields,
            id: None,
            parent: None,
            close: false,
        });
    }
}

/// The records of this test binary, captured by a global subscriber (device
/// threads log too, so a thread-local one would miss them).
fn records() -> Arc<Mutex<Vec<Record>>> {
    static RECORDS: OnceLock<Arc<Mutex<Vec<Record>>>> = OnceLock::new();
    Arc::clone(RECORDS.get_or_init(|| {
        let r = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(Arc::clone(&r)));
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        r
    }))
}

fn two_devices(s: &Scope) -> Session {
    Session::new(
        &s.graph_def(),
        SessionOptions::default().with_cpu_devices(2),
    )
    .unwrap()
}

fn traced() -> RunOptions {
    RunOptions::default().with_trace_level(TraceLevel::FullTrace)
}

/// x (fed, CPU:0) → y = 2x (CPU:0) → z = y + 1 (CPU:1) → w = z·z (CPU:0): two
/// transfers.
struct PingPong {
    s: Scope,
    x: Output,
    w: Output,
}

fn ping_pong() -> PingPong {
    let s = Scope::new();
    let d0 = s.with_device("/device:CPU:0");
    let d1 = s.with_device("/device:CPU:1");
    let x = ops::placeholder(&d0, DType::F32, Shape::known(&[2])).unwrap();
    let y = ops::mul(&d0, &x, &ops::scalar(&d0, 2.0f32).unwrap()).unwrap();
    let z = ops::add(&d1, &y, &ops::scalar(&d1, 1.0f32).unwrap()).unwrap();
    let w = ops::mul(&d0, &z, &z).unwrap();
    PingPong { s, x, w }
}

fn run_ping_pong() -> (Session, RunMetadata) {
    let p = ping_pong();
    let sess = two_devices(&p.s);
    let out = sess
        .run_with(
            &RunArgs::new()
                .feed(&p.x, Tensor::vector(&[1.0f32, -2.0]))
                .fetch(&p.w)
                .options(traced()),
        )
        .unwrap();
    // (2x + 1)^2
    assert_eq!(out.outputs[0], Tensor::vector(&[9.0f32, 9.0]));
    (sess, out.metadata.expect("a traced step has metadata"))
}

#[test]
fn spans_and_events_of_a_run() {
    let rec = records();
    let (_sess, _) = run_ping_pong();

    // A dequeue from an empty queue waits, then the step times out and aborts.
    let s = Scope::new();
    let q = ops::fifo_queue(&s, &[DType::I32], &QueueOptions::default()).unwrap();
    let deq = ops::queue_dequeue(&s, &q, &[DType::I32]).unwrap().remove(0);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let opts = RunOptions::default().with_timeout(Duration::from_millis(50));
    let e = sess
        .run_with(&RunArgs::new().fetch(&deq).options(opts.clone()))
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded);

    let r = rec.lock().unwrap().clone();
    let span = |name: &str, pred: &dyn Fn(&HashMap<String, String>) -> bool| {
        r.iter()
            .any(|x| x.span && x.name == name && pred(&x.fields))
    };
    let event = |msg: &str, pred: &dyn Fn(&HashMap<String, String>) -> bool| {
        r.iter()
            .any(|x| !x.span && x.name == msg && pred(&x.fields))
    };
    let has = |f: &HashMap<String, String>, k: &str, needle: &str| {
        f.get(k).is_some_and(|v| v.contains(needle))
    };
    assert!(span("session_create", &|f| f.contains_key("session")));
    assert!(span("build_step", &|f| f.contains_key("fetches")));
    assert!(span("step", &|f| f.contains_key("step_id")));
    assert!(span("partition", &|f| f.contains_key("step")
        && has(f, "device", "CPU:1")));
    assert!(span("node", &|f| has(f, "op", "AddV2")
        && has(f, "device", "CPU:1")));
    assert!(span("node", &|f| has(f, "op", "_Recv")
        && has(f, "device", "CPU:0")));
    assert!(event("placed", &|f| f.contains_key("node")
        && f.contains_key("device")));
    assert!(event("step placed and partitioned", &|f| has(
        f,
        "transfers",
        "2"
    )));
    assert!(event("send", &|f| f.contains_key("tensor")
        && has(f, "to", "CPU:1")));
    assert!(event("recv", &|f| f.contains_key("tensor")
        && has(f, "to", "CPU:0")));
    assert!(event("dequeue waits for elements", &|f| f.contains_key("queue")));
    assert!(event("step aborted", &|f| has(
        f,
        "error",
        "DEADLINE_EXCEEDED"
    )));

    // Every partition span is a child of its step's span, and the step span closes
    // only after its partitions (it covers the whole step, not just its launch).
    // Span ids are reused after a close, so each lookup is positional.
    let opened_before = |id: u64, at: usize| {
        r[..at]
            .iter()
            .rposition(|x| x.span && x.id == Some(id))
            .expect("the parent span was opened before its child")
    };
    let closed_after = |id: u64, at: usize| {
        r[at..]
            .iter()
            .position(|x| x.close && x.id == Some(id))
            .map(|i| i + at)
    };
    // The subscriber is global and installed by this test, so a step another test
    // began before it was installed has no recorded step span (and its
    // partitions no recorded parent): only steps whose span was recorded count.
    let recorded_steps: HashSet<&String> = r
        .iter()
        .filter(|x| x.span && x.name == "step")
        .filter_map(|x| x.fields.get("step_id"))
        .collect();
    let mut partitions = 0;
    for (i, p) in r.iter().enumerate() {
        if !(p.span
            && p.name == "partition"
            && p.fields
                .get("step")
                .is_some_and(|s| recorded_steps.contains(s)))
        {
            continue;
        }
        let pid = p.parent.expect("a partition span has a parent span");
        let at = opened_before(pid, i);
        let step = &r[at];
        assert_eq!(step.name, "step");
        assert_eq!(step.fields.get("step_id"), p.fields.get("step"));
        let (pc, sc) = (closed_after(p.id.unwrap(), i), closed_after(pid, at));
        if let (Some(pc), Some(sc)) = (pc, sc) {
            assert!(
                pc < sc,
                "step {:?} closed before its partition",
                p.fields.get("step")
            );
        }
        partitions += 1;
    }
    assert!(partitions >= 3);
}

fn events(trace: &ChromeTrace) -> Vec<Value> {
    let text = trace.to_json_string();
    let v: Value = serde_json::from_str(&text).expect("the trace is valid JSON");
    v["traceEvents"].as_array().expect("traceEvents").clone()
}

fn num(e: &Value, k: &str) -> f64 {
    e[k].as_f64().unwrap_or_else(|| panic!("{k} in {e}"))
}

/// Whether `e` lies within an `X` slice of (pid, tid) that `pick` accepts.
fn inside(evs: &[Value], e: &Value, pick: &dyn Fn(&Value) -> bool) -> bool {
    evs.iter().any(|x| {
        x["ph"] == "X"
            && x["pid"] == e["pid"]
            && x["tid"] == e["tid"]
            && pick(x)
            && num(x, "ts") <= num(e, "ts")
            && num(e, "ts") <= num(x, "ts") + num(x, "dur")
    })
}

#[test]
fn chrome_trace_of_a_two_device_step() {
    let (_sess, meta) = run_ping_pong();
    assert_eq!(meta.step_stats.len(), 2);
    let executed: Vec<(String, String)> = meta
        .step_stats
        .iter()
        .flat_map(|c| {
            c.nodes
                .iter()
                .map(|n| (n.node.to_string(), n.op.to_string()))
        })
        .collect();
    for op in ["_Send", "_Recv", "AddV2", "Mul", "_Arg", "_Retval"] {
        assert!(
            executed.iter().any(|(_, o)| o == op),
            "{op} in {executed:?}"
        );
    }
    let mut trace = ChromeTrace::new();
    trace.add_step("step 0", &meta);
    let evs = events(&trace);

    // One process for the session's task, named after it, with each device's
    // tracks named after the device, and a name for every track used.
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with("task:0"), "{names:?}");
    let threads: Vec<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(
        threads.iter().any(|t| t.starts_with("CPU:0 "))
            && threads.iter().any(|t| t.starts_with("CPU:1 ")),
        "{threads:?}"
    );
    let tracks: HashSet<(i64, i64)> = evs
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap()))
        .collect();
    for e in evs.iter().filter(|e| e["ph"] != "M") {
        assert!(
            tracks.contains(&(e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap())),
            "{e}"
        );
    }

    // Slices on one track are disjoint or nested (what Perfetto's importer needs).
    let slices: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
    for (i, a) in slices.iter().enumerate() {
        for b in &slices[i + 1..] {
            if a["pid"] != b["pid"] || a["tid"] != b["tid"] {
                continue;
            }
            let (a0, a1) = (num(a, "ts"), num(a, "ts") + num(a, "dur"));
            let (b0, b1) = (num(b, "ts"), num(b, "ts") + num(b, "dur"));
            let ok = a1 <= b0 || b1 <= a0 || (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
            assert!(ok, "overlapping slices on one track: {a} {b}");
        }
    }

    // One slice per executed node, with its op, within its partition's time on
    // its device.
    let nodes: Vec<&Value> = evs.iter().filter(|e| e["cat"] == NODE_CATEGORY).collect();
    assert_eq!(nodes.len(), executed.len());
    assert_eq!(trace.node_events(), executed.len());
    let mut seen: Vec<(String, String)> = nodes
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                e["args"]["op"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut want = executed.clone();
    seen.sort();
    want.sort();
    assert_eq!(seen, want);
    for n in &nodes {
        assert_eq!(n["ph"], "X");
        assert!(num(n, "dur") > 0.0, "{n}");
        let (t0, t1) = (num(n, "ts"), num(n, "ts") + num(n, "dur"));
        assert!(
            evs.iter().any(|p| p["cat"] == PARTITION_CATEGORY
                && p["pid"] == n["pid"]
                && num(p, "ts") <= t0
                && t1 <= num(p, "ts") + num(p, "dur") + 0.002),
            "{n}"
        );
    }
    let partitions = evs
        .iter()
        .filter(|e| e["cat"] == PARTITION_CATEGORY)
        .count();
    assert_eq!(partitions, 2);

    // Two Send→Recv arrows, each from a Send slice on one device to a Recv slice
    // on the other.
    let starts: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "s").collect();
    let finishes: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "f").collect();
    assert_eq!((starts.len(), finishes.len()), (2, 2));
    assert_eq!(trace.flows(), 2);
    for s in &starts {
        let f = finishes
            .iter()
            .find(|f| f["id"] == s["id"])
            .expect("a matching finish");
        assert_eq!(f["bp"], "e");
        assert_ne!((&s["pid"], &s["tid"]), (&f["pid"], &f["tid"]));
        assert_eq!(s["name"], f["name"]);
        assert!(inside(&evs, s, &|x| x["args"]["op"] == "_Send"), "{s}");
        assert!(inside(&evs, f, &|x| x["args"]["op"] == "_Recv"), "{f}");
    }
}

fn loop_across_devices(iterations: i32) -> (Scope, Output) {
    let s = Scope::new();
    let d0 = s.with_device("/device:CPU:0");
    let int = |b: &Scope, v: i32| ops::scalar(b, v);
    let outs = while_loop(
        &d0,
        |b, v| ops::less(b, &v[0], &int(b, iterations)?),
        |b, v| {
            let on1 = b.with_device("/device:CPU:1");
            let x = ops::add(&on1, &v[1], &ops::scalar(&on1, 0.5f64)?)?;
            Ok(vec![ops::add(b, &v[0], &int(b, 1)?)?, x])
        },
        &[int(&d0, 0).unwrap(), ops::scalar(&d0, 1.0f64).unwrap()],
        &WhileOptions::default(),
    )
    .unwrap();
    (s, outs[1].clone())
}

#[test]
fn chrome_trace_of_a_loop_across_devices_pairs_every_iteration() {
    let (s, out) = loop_across_devices(10);
    let sess = two_devices(&s);
    let mut trace = ChromeTrace::new();
    for step in 0..2 {
        let r = sess
            .run_with(&RunArgs::new().fetch(&out).options(traced()))
            .unwrap();
        assert_eq!(r.outputs[0], Tensor::scalar(6.0f64));
        trace.add_step(&format!("step {step}"), r.metadata.as_ref().unwrap());
    }
    let evs = events(&trace);
    let sends = evs
        .iter()
        .filter(|e| e["cat"] == NODE_CATEGORY && e["args"]["op"] == "_Send")
        .count();
    let recvs = evs
        .iter()
        .filter(|e| e["cat"] == NODE_CATEGORY && e["args"]["op"] == "_Recv")
        .count();
    // Per step: the loop state goes to CPU:1 and back each iteration, plus the
    // control-flow skeleton's transfers.
    assert!(sends >= 2 * 20, "{sends} sends");
    assert_eq!(sends, recvs);
    assert_eq!(
        trace.flows() as usize,
        sends,
        "every Send is paired with its Recv"
    );
    let iters: HashSet<i64> = evs
        .iter()
        .filter(|e| e["args"]["op"] == "_Send")
        .map(|e| e["args"]["iter"].as_i64().unwrap())
        .collect();
    assert!(iters.len() >= 10, "{iters:?}");
}

/// Checks DOT text: with Graphviz when installed, else structurally (balanced
/// braces outside quotes, every edge endpoint declared as a node).
fn check_dot(text: &str) {
    if let Some(svg) = dot::render_svg(text).unwrap() {
        assert!(
            String::from_utf8_lossy(&svg).contains("<svg"),
            "dot produced no SVG"
        );
    }
    let (mut depth, mut quoted, mut escaped) = (0i64, false, false);
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' if !quoted => depth += 1,
            '}' if !quoted => {
                depth -= 1;
                assert!(depth >= 0, "unbalanced braces");
            }
            _ => {}
        }
    }
    assert_eq!((depth, quoted), (0, false), "unbalanced braces or quotes");
    let ids = |line: &str| -> Vec<String> {
        line.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let declared: HashSet<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('"') && !l.contains("->") && l.contains("[shape="))
        .map(|l| ids(l)[0].clone())
        .collect();
    for l in text
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("\" -> \""))
    {
        let i = ids(l);
        assert!(
            declared.contains(&i[0]) && declared.contains(&i[1]),
            "undeclared endpoint in {l}"
        );
    }
}

#[test]
fn dot_of_partitions_placement_and_loops() {
    let (sess, meta) = run_ping_pong();
    let text = dot::partitions_to_dot(&meta.partition_graphs).unwrap();
    check_dot(&text);
    assert_eq!(text.matches("subgraph \"cluster_device").count(), 2);
    assert_eq!(text.matches("[color=red, style=bold").count(), 2, "{text}");
    assert!(text.contains("shape=cds"));

    let p = ping_pong();
    let placement = sess.placement(&[&p.x.name()], &[&p.w.name()], &[]).unwrap();
    let text = dot::graph_to_dot(&p.s.graph_def(), Some(&placement)).unwrap();
    check_dot(&text);
    assert!(text.contains("cluster_legend"));
    assert_eq!(text.matches("\"legend").count(), 2);
    assert!(text.contains("@ CPU:1"));

    // Loops are clusters, nested as the loops nest; partitions keep them.
    let s = Scope::new();
    let int = |b: &Scope, v: i32| ops::scalar(b, v);
    let outer = while_loop(
        &s,
        |b, v| ops::less(b, &v[0], &int(b, 3)?),
        |b, v| {
            let inner = while_loop(
                b,
                |b, w| ops::less(b, &w[0], &int(b, 4)?),
                |b, w| {
                    Ok(vec![
                        ops::add(b, &w[0], &int(b, 1)?)?,
                        ops::add(b, &w[1], &int(b, 1)?)?,
                    ])
                },
                &[int(b, 0)?, v[1].clone()],
                &WhileOptions::default(),
            )?;
            Ok(vec![ops::add(b, &v[0], &int(b, 1)?)?, inner[1].clone()])
        },
        &[int(&s, 0).unwrap(), int(&s, 0).unwrap()],
        &WhileOptions::default(),
    )
    .unwrap();
    let text = dot::graph_to_dot(&s.graph_def(), None).unwrap();
    check_dot(&text);
    let indent_of = |needle: &str| {
        let line = text
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}"));
        line.len() - line.trim_start().len()
    };
    assert!(
        indent_of("\"cluster_frame2\"") > indent_of("\"cluster_frame1\""),
        "{text}"
    );
    assert_eq!(text.matches("label=\"while: ").count(), 2);
    let sess = Session::new(&s.graph_def(), SessionOptions::default()).unwrap();
    let r = sess
        .run_with(&RunArgs::new().fetch(&outer[1]).options(traced()))
        .unwrap();
    assert_eq!(r.outputs[0], Tensor::scalar(12i32));
    let text = dot::partitions_to_dot(&r.metadata.unwrap().partition_graphs).unwrap();
    check_dot(&text);
    assert!(text.contains("cluster_d0/frame2"));
}
