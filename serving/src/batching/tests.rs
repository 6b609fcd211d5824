//! The batcher's tests: task validation, the state machine driven with
//! explicit `now`s, merging and splitting through a `BatchProcessor`, and the
//! batch threads end to end.

use super::queue::QUEUE_FULL;
use super::*;

use std::sync::atomic::AtomicUsize;

use crate::metrics::Metrics;
use graph::{Code, DType};

const HOUR: Duration = Duration::from_secs(3600);

/// A runner from a closure.
struct FnRunner<F>(F);

impl<F> BatchRunner for FnRunner<F>
where
    F: Fn(Vec<(String, Tensor)>) -> Result<Outputs> + Send + Sync + 'static,
{
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Outputs> {
        (self.0)(inputs)
    }
}

fn runner<F>(f: F) -> Arc<dyn BatchRunner>
where
    F: Fn(Vec<(String, Tensor)>) -> Result<Outputs> + Send + Sync + 'static,
{
    Arc::new(FnRunner(f))
}

/// Returns its inputs as its outputs.
fn identity() -> Arc<dyn BatchRunner> {
    runner(|inputs| Ok(inputs.into_iter().collect()))
}

fn options(
    max_batch_size: usize,
    timeout: Duration,
    max_enqueued: usize,
    threads: usize,
) -> BatchingOptions {
    BatchingOptions {
        max_batch_size,
        batch_timeout: timeout,
        max_enqueued_batches: max_enqueued,
        num_batch_threads: threads,
        allowed_batch_sizes: Vec::new(),
        pad_variable_length_inputs: false,
    }
}

fn queue(max_batch_size: usize, timeout: Duration, max_enqueued: usize) -> BatchQueue {
    BatchQueue::new(QueueOptions::from(&options(
        max_batch_size,
        timeout,
        max_enqueued,
        1,
    )))
}

/// `base, base + 1, …` in a float tensor of shape `dims`.
fn iota(dims: &[usize], base: f32) -> Tensor {
    let n = dims.iter().product::<usize>();
    Tensor::new(dims, (0..n).map(|i| base + i as f32).collect()).unwrap()
}

fn task(inputs: Vec<(&str, Tensor)>) -> (Task, oneshot::Receiver<Result<Outputs>>) {
    let (tx, rx) = oneshot::channel();
    let inputs = inputs.into_iter().map(|(k, t)| (k.to_owned(), t)).collect();
    (Task::new(inputs, tx).unwrap(), rx)
}

/// A task of `rows` rows of one input `x` (nobody waits for its answer).
fn rows(rows: usize) -> Task {
    task(vec![("x", iota(&[rows, 1], 0.0))]).0
}

fn taken(t: Take) -> Option<Vec<usize>> {
    match t {
        Take::Run(tasks) => Some(tasks.iter().map(|t| t.rows).collect()),
        _ => None,
    }
}

fn answer(rx: &mut oneshot::Receiver<Result<Outputs>>) -> Result<Outputs> {
    rx.try_recv().expect("the task was answered")
}

fn processor(runner: Arc<dyn BatchRunner>, allowed: &[usize], pad: bool) -> BatchProcessor {
    BatchProcessor {
        runner,
        allowed_batch_sizes: allowed.to_vec(),
        pad_variable_length_inputs: pad,
        metrics: None,
        runs: AtomicU64::new(0),
    }
}

fn floats(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

// --- Task validation -------------------------------------------------

#[test]
fn tasks_need_inputs_of_rank_one_and_one_batch_size() {
    let new = |inputs: Vec<(&str, Tensor)>| {
        let (tx, _rx) = oneshot::channel();
        Task::new(
            inputs.into_iter().map(|(k, t)| (k.to_owned(), t)).collect(),
            tx,
        )
    };
    let e = new(vec![]).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Batching Run() must have at least one input tensor"
    );
    let e = new(vec![("x", Tensor::scalar(1.0f32))]).err().unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Batching Run() input tensors must have at least one dimension"
    );
    let e = new(vec![("x", iota(&[2, 1], 0.0)), ("y", iota(&[3], 0.0))])
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Batching Run() input tensors must have equal 0th-dimension size"
    );
    let e = new(vec![("x", iota(&[2], 0.0)), ("x", iota(&[2], 0.0))])
        .err()
        .unwrap();
    assert_eq!(e.code(), Code::InvalidArgument);
    let t = new(vec![("y", iota(&[3], 0.0)), ("x", iota(&[3, 2], 0.0))]).unwrap();
    assert_eq!(t.keys, ["x", "y"]);
    assert_eq!(t.inputs[0].dims(), &[3, 2]);
    assert_eq!(t.rows, 3);
}

// --- The state machine ------------------------------------------------

#[test]
fn a_batch_closes_when_it_reaches_max_batch_size() {
    let mut q = queue(4, HOUR, 10);
    let t0 = Instant::now();
    assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
    assert_eq!(q.enqueue(rows(2), t0).unwrap(), Enqueued::Joined);
    assert!(matches!(q.take_batch(t0), Take::WaitUntil(d) if d == t0 + HOUR));
    assert_eq!(q.queued(), 2);
    assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
    assert_eq!(taken(q.take_batch(t0)), Some(vec![1, 2, 1]));
    assert!(matches!(q.take_batch(t0), Take::Idle));
    assert_eq!((q.queued(), q.batches()), (0, 0));
    // A task of exactly max_batch_size rows is a closed batch at once.
    assert_eq!(q.enqueue(rows(4), t0).unwrap(), Enqueued::Wake(1));
    assert_eq!(taken(q.take_batch(t0)), Some(vec![4]));
}

#[test]
fn a_task_that_does_not_fit_closes_the_batch_and_opens_the_next() {
    let mut q = queue(4, HOUR, 10);
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(5);
    let _ = q.enqueue(rows(3), t0).unwrap();
    assert_eq!(q.enqueue(rows(2), t1).unwrap(), Enqueued::Wake(2));
    assert_eq!(q.batches(), 2);
    assert_eq!(taken(q.take_batch(t1)), Some(vec![3]));
    // The new batch's timeout runs from its own first task.
    assert!(matches!(q.take_batch(t1), Take::WaitUntil(d) if d == t1 + HOUR));
    assert_eq!(taken(q.take_batch(t1 + HOUR)), Some(vec![2]));
}

#[test]
fn an_open_batch_closes_on_its_timeout() {
    let timeout = Duration::from_millis(10);
    let mut q = queue(100, timeout, 10);
    let t0 = Instant::now();
    let _ = q.enqueue(rows(1), t0).unwrap();
    let _ = q.enqueue(rows(1), t0 + Duration::from_millis(9)).unwrap();
    assert!(
        matches!(q.take_batch(t0 + Duration::from_millis(5)), Take::WaitUntil(d) if d == t0 + timeout)
    );
    assert_eq!(taken(q.take_batch(t0 + timeout)), Some(vec![1, 1]));
    // A zero timeout: the batch is due as soon as a thread asks, with
    // whatever arrived until then.
    let mut q = queue(100, Duration::ZERO, 10);
    let _ = q.enqueue(rows(1), t0).unwrap();
    let _ = q.enqueue(rows(2), t0).unwrap();
    assert_eq!(taken(q.take_batch(t0)), Some(vec![1, 2]));
}

#[test]
fn a_full_queue_refuses_tasks_with_unavailable() {
    let mut q = queue(2, HOUR, 2);
    let t0 = Instant::now();
    let _ = q.enqueue(rows(2), t0).unwrap();
    let _ = q.enqueue(rows(1), t0).unwrap();
    // One closed and one open batch: a task that needs a third is refused,
    // one that joins the open batch is not.
    let e = q.enqueue(rows(2), t0).unwrap_err();
    assert_eq!(e.code(), Code::Unavailable);
    assert_eq!(e.message(), QUEUE_FULL);
    assert_eq!(q.enqueue(rows(1), t0).unwrap(), Enqueued::Wake(1));
    assert_eq!(
        q.enqueue(rows(1), t0).unwrap_err().code(),
        Code::Unavailable
    );
    // Another key set counts against the same bound.
    let other = task(vec![("y", iota(&[1], 0.0))]).0;
    assert_eq!(q.enqueue(other, t0).unwrap_err().code(), Code::Unavailable);
    assert_eq!((q.queued(), q.batches()), (3, 2));
    // Taking a batch makes room.
    assert_eq!(taken(q.take_batch(t0)), Some(vec![2]));
    let _ = q.enqueue(rows(1), t0).unwrap();
    assert_eq!(q.batches(), 2);
}

#[test]
fn a_task_larger_than_max_batch_size_is_invalid() {
    let mut q = queue(4, HOUR, 10);
    let e = q.enqueue(rows(5), Instant::now()).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Task size 5 is larger than maximum batch size 4"
    );
    assert_eq!(q.queued(), 0);
}

#[test]
fn tasks_with_different_input_keys_batch_apart() {
    let mut q = queue(10, HOUR, 10);
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_millis(1);
    let _ = q.enqueue(rows(1), t0).unwrap();
    let xy = || task(vec![("x", iota(&[2, 1], 0.0)), ("y", iota(&[2], 0.0))]).0;
    assert_eq!(q.enqueue(xy(), t1).unwrap(), Enqueued::Wake(1));
    assert_eq!(q.enqueue(xy(), t1).unwrap(), Enqueued::Joined);
    let _ = q.enqueue(rows(3), t1).unwrap();
    assert_eq!(q.batches(), 2);
    // The earliest deadline goes first.
    match q.take_batch(t1 + HOUR) {
        Take::Run(tasks) => {
            assert_eq!(tasks.iter().map(|t| t.rows).collect::<Vec<_>>(), [1, 3]);
            assert!(tasks.iter().all(|t| t.keys == ["x"]));
        }
        _ => panic!("a batch is due"),
    }
    match q.take_batch(t1 + HOUR) {
        Take::Run(tasks) => assert!(tasks.iter().all(|t| t.keys == ["x", "y"] && t.rows == 2)),
        _ => panic!("a batch is due"),
    }
}

#[test]
fn tasks_whose_shapes_differ_are_refused_unless_padding() {
    let t0 = Instant::now();
    let mut q = queue(10, HOUR, 10);
    let _ = q
        .enqueue(task(vec![("x", iota(&[1, 3], 0.0))]).0, t0)
        .unwrap();
    let e = q
        .enqueue(task(vec![("x", iota(&[2, 4], 0.0))]).0, t0)
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("Tensors with name 'x' from different tasks have different shapes and padding is turned off."), "{e}");
    let e = q
        .enqueue(
            task(vec![("x", Tensor::new(&[1, 3], vec![1i32, 2, 3]).unwrap())]).0,
            t0,
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("different dtypes"), "{e}");
    assert_eq!(q.queued(), 1);

    let mut o = options(10, HOUR, 10, 1);
    o.pad_variable_length_inputs = true;
    let mut q = BatchQueue::new(QueueOptions::from(&o));
    let _ = q
        .enqueue(task(vec![("x", iota(&[1, 3], 0.0))]).0, t0)
        .unwrap();
    assert_eq!(
        q.enqueue(task(vec![("x", iota(&[2, 4], 0.0))]).0, t0)
            .unwrap(),
        Enqueued::Joined
    );
    let e = q
        .enqueue(task(vec![("x", iota(&[1, 3, 1], 0.0))]).0, t0)
        .unwrap_err();
    assert!(e.message().contains("different ranks"), "{e}");
}

#[test]
fn draining_makes_open_batches_due_then_exits() {
    let mut q = queue(10, HOUR, 10);
    let t0 = Instant::now();
    let _ = q.enqueue(rows(1), t0).unwrap();
    q.drain();
    assert_eq!(
        q.enqueue(rows(1), t0).unwrap_err().code(),
        Code::Unavailable
    );
    assert_eq!(taken(q.take_batch(t0)), Some(vec![1]));
    assert!(matches!(q.take_batch(t0), Take::Exit));
}

// --- Merging, running, splitting ---------------------------------------

#[test]
fn batches_merge_in_task_order_and_each_task_gets_its_rows() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let p = processor(
        runner(move |inputs| {
            s2.lock().unwrap().push(inputs.clone());
            let x = &inputs.iter().find(|(k, _)| k == "x").unwrap().1;
            let y = x.as_slice::<f32>()?.iter().map(|v| v * 10.0).collect();
            let s = inputs.iter().find(|(k, _)| k == "s").unwrap().1.clone();
            Ok(Outputs::from([
                ("y".to_owned(), Tensor::new(x.dims(), y)?),
                ("s".to_owned(), s),
            ]))
        }),
        &[],
        false,
    );
    let mut rxs = Vec::new();
    let mut tasks = Vec::new();
    for (r, base) in [(1, 0.0), (2, 100.0), (3, 200.0)] {
        let names: Vec<String> = (0..r).map(|i| format!("t{r}r{i}")).collect();
        let (t, rx) = task(vec![
            ("s", Tensor::from_strings(&[r], names).unwrap()),
            ("x", iota(&[r, 2], base)),
        ]);
        tasks.push(t);
        rxs.push(rx);
    }
    p.process(tasks);
    assert_eq!(p.runs.load(Ordering::Relaxed), 1);
    let seen = seen.lock().unwrap();
    let merged = &seen[0];
    assert_eq!(merged[0].0, "s");
    assert_eq!(merged[1].1.dims(), &[6, 2]);
    assert_eq!(
        floats(&merged[1].1)[..6],
        [0.0, 1.0, 100.0, 101.0, 102.0, 103.0]
    );
    for ((r, base), rx) in [(1, 0.0), (2, 100.0), (3, 200.0)].into_iter().zip(&mut rxs) {
        let out = answer(rx).unwrap();
        let want: Vec<f32> = (0..r * 2).map(|i| (base + i as f32) * 10.0).collect();
        assert_eq!(out["y"].dims(), &[r, 2]);
        assert_eq!(floats(&out["y"]), want);
        let names = out["s"].as_strings().unwrap();
        assert_eq!(names.len(), r);
        assert_eq!(names[r - 1], format!("t{r}r{}", r - 1).as_bytes());
    }
}

#[test]
fn batches_pad_to_allowed_sizes_with_the_last_tasks_first_row() {
    let metrics = Metrics::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let mut p = processor(
        runner(move |inputs| {
            s2.lock().unwrap().push(inputs[0].1.clone());
            Ok(inputs.into_iter().collect())
        }),
        &[2, 4, 8],
        false,
    );
    p.metrics = Some(metrics.batch_hook("m", "serving_default"));
    let (a, mut ra) = task(vec![("x", iota(&[1, 2], 0.0))]);
    let (b, mut rb) = task(vec![("x", iota(&[2, 2], 10.0))]);
    p.process(vec![a, b]);
    let x = seen.lock().unwrap()[0].clone();
    assert_eq!(x.dims(), &[4, 2]);
    assert_eq!(floats(&x), [0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 10.0, 11.0]);
    assert_eq!(floats(&answer(&mut ra).unwrap()["x"]), [0.0, 1.0]);
    let b_out = answer(&mut rb).unwrap();
    assert_eq!(b_out["x"].dims(), &[2, 2]);
    assert_eq!(floats(&b_out["x"]), [10.0, 11.0, 12.0, 13.0]);
    let text = metrics.encode();
    assert!(
        text.contains(
            "processed_batch_size_sum{model_name=\"m\",signature=\"serving_default\"} 4.0"
        ),
        "{text}"
    );
    assert!(
        text.contains("padding_size_sum{model_name=\"m\",signature=\"serving_default\"} 1.0"),
        "{text}"
    );
}

#[test]
fn variable_length_inputs_pad_with_each_tasks_first_element() {
    let p = processor(identity(), &[], true);
    let (a, mut ra) = task(vec![
        ("v", Tensor::new(&[1, 2], vec![1i64, 2]).unwrap()),
        ("m", iota(&[1, 1, 2], 5.0)),
        ("s", Tensor::from_strings(&[1, 1], vec!["a"]).unwrap()),
    ]);
    let (b, mut rb) = task(vec![
        (
            "v",
            Tensor::new(&[2, 3], vec![10i64, 11, 12, 13, 14, 15]).unwrap(),
        ),
        ("m", iota(&[2, 2, 1], 7.0)),
        (
            "s",
            Tensor::from_strings(&[2, 2], vec!["b", "c", "d", "e"]).unwrap(),
        ),
    ]);
    p.process(vec![a, b]);
    let a_out = answer(&mut ra).unwrap();
    let b_out = answer(&mut rb).unwrap();
    assert_eq!(a_out["v"].as_slice::<i64>().unwrap(), [1, 2, 1]);
    assert_eq!(
        b_out["v"].as_slice::<i64>().unwrap(),
        [10, 11, 12, 13, 14, 15]
    );
    assert_eq!(a_out["m"].dims(), &[1, 2, 2]);
    assert_eq!(floats(&a_out["m"]), [5.0, 6.0, 5.0, 5.0]);
    assert_eq!(b_out["m"].dims(), &[2, 2, 2]);
    assert_eq!(
        floats(&b_out["m"]),
        [7.0, 7.0, 8.0, 7.0, 9.0, 7.0, 10.0, 7.0]
    );
    assert_eq!(a_out["s"].as_strings().unwrap(), ["a", "a"]);
    assert_eq!(b_out["s"].as_strings().unwrap(), ["b", "c", "d", "e"]);
}

#[test]
fn an_empty_tensor_that_needs_padding_is_refused_alone() {
    let p = processor(identity(), &[], true);
    let (a, mut ra) = task(vec![("x", iota(&[1, 0], 0.0))]);
    let (b, mut rb) = task(vec![("x", iota(&[1, 2], 3.0))]);
    p.process(vec![a, b]);
    let e = answer(&mut ra).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.message(),
        "Got empty tensor in batch of non-empty tensors."
    );
    assert_eq!(floats(&answer(&mut rb).unwrap()["x"]), [3.0, 4.0]);
    assert_eq!(p.runs.load(Ordering::Relaxed), 1);
}

#[test]
fn a_runner_error_reaches_every_task() {
    let p = processor(
        runner(|_| Err(Status::resource_exhausted("no memory"))),
        &[],
        false,
    );
    let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
    let (b, mut rb) = task(vec![("x", iota(&[2], 0.0))]);
    p.process(vec![a, b]);
    for rx in [&mut ra, &mut rb] {
        let e = answer(rx).unwrap_err();
        assert_eq!(
            (e.code(), e.message()),
            (Code::ResourceExhausted, "no memory")
        );
    }
    let p = processor(runner(|_| panic!("kernel exploded")), &[], false);
    let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
    p.process(vec![a]);
    let e = answer(&mut ra).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("kernel exploded"), "{e}");
}

#[test]
fn outputs_without_the_batch_size_are_internal_for_every_task() {
    let p = processor(
        runner(|_| Ok(Outputs::from([("y".to_owned(), iota(&[5, 1], 0.0))]))),
        &[],
        false,
    );
    let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
    let (b, mut rb) = task(vec![("x", iota(&[2], 0.0))]);
    p.process(vec![a, b]);
    for rx in [&mut ra, &mut rb] {
        let e = answer(rx).unwrap_err();
        assert_eq!(e.code(), Code::Internal);
        assert_eq!(
            e.message(),
            "Batched output tensor's 0th dimension does not equal the sum of the 0th \
                 dimension sizes of the input tensors"
        );
    }
    let p = processor(
        runner(|_| Ok(Outputs::from([("y".to_owned(), Tensor::scalar(1.0f32))]))),
        &[],
        false,
    );
    let (a, mut ra) = task(vec![("x", iota(&[1], 0.0))]);
    p.process(vec![a]);
    assert_eq!(
        answer(&mut ra).unwrap_err().message(),
        "Batched output tensor has 0 dimensions"
    );
}

#[test]
fn callers_that_went_away_do_not_break_the_batch() {
    let seen_rows = Arc::new(AtomicUsize::new(0));
    let s2 = Arc::clone(&seen_rows);
    let p = processor(
        runner(move |inputs| {
            s2.store(inputs[0].1.dims()[0], Ordering::Relaxed);
            Ok(inputs.into_iter().collect())
        }),
        &[],
        false,
    );
    let (a, ra) = task(vec![("x", iota(&[2], 0.0))]);
    let (b, mut rb) = task(vec![("x", iota(&[1], 9.0))]);
    drop(ra);
    p.process(vec![a, b]);
    assert_eq!(floats(&answer(&mut rb).unwrap()["x"]), [9.0]);
    assert_eq!(seen_rows.load(Ordering::Relaxed), 1);
    // Nobody waits for any task: the batch does not run.
    p.process(vec![rows(1), rows(2)]);
    assert_eq!(p.runs.load(Ordering::Relaxed), 1);
}

// --- The batcher's threads -------------------------------------------

/// Polls `cond` until it holds (at most 10 s).
async fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `y = 2x + (row-wise sum of x)` through an actorflow session.
struct SessionRunner {
    session: actors::Session,
    x: String,
    y: String,
}

impl BatchRunner for SessionRunner {
    fn run(&self, inputs: Vec<(String, Tensor)>) -> Result<Outputs> {
        let x = inputs
            .into_iter()
            .find(|(k, _)| k == "x")
            .ok_or_else(|| Status::invalid_argument("no x"))?
            .1;
        let mut out = self.session.run(&[(&self.x, x)], &[&self.y], &[])?;
        Ok(Outputs::from([("y".to_owned(), out.remove(0))]))
    }
}

fn session_runner() -> SessionRunner {
    use graph::builder::Scope;
    use graph::{ops, Shape};
    let s = Scope::new();
    let x = ops::placeholder(&s, DType::F32, Shape::from_dims(&[None, Some(3)])).unwrap();
    let two = ops::scalar(&s, 2.0f32).unwrap();
    let doubled = ops::mul(&s, &x, &two).unwrap();
    let row_sums = ops::sum_axes(&s, &x, &[1], true).unwrap();
    let y = ops::add(&s, &doubled, &row_sums).unwrap();
    let session = actors::Session::new(&s.graph_def(), actors::SessionOptions::default()).unwrap();
    SessionRunner {
        session,
        x: x.name(),
        y: y.name(),
    }
}

#[tokio::test]
async fn concurrent_requests_merge_into_one_session_run() {
    // 1 + 2 + … + 6 = 21 rows fill one batch exactly.
    let b = Arc::new(Batcher::new(
        options(21, HOUR, 10, 2),
        Arc::new(session_runner()),
        None,
    ));
    let mut set = tokio::task::JoinSet::new();
    for r in 1..=6usize {
        let b = Arc::clone(&b);
        set.spawn(async move {
            let x = iota(&[r, 3], 100.0 * r as f32);
            (r, x.clone(), b.submit(vec![("x".to_owned(), x)]).await)
        });
    }
    while let Some(done) = set.join_next().await {
        let (r, x, out) = done.unwrap();
        let y = out.unwrap().remove("y").unwrap();
        assert_eq!(y.dims(), &[r, 3]);
        let x = floats(&x);
        let want: Vec<f32> = x
            .chunks(3)
            .flat_map(|row| {
                let sum: f32 = row.iter().sum();
                row.iter().map(move |v| 2.0 * v + sum).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(floats(&y), want);
    }
    assert_eq!(b.runs(), 1);
    assert_eq!(b.queued(), 0);
}

#[tokio::test]
async fn sixteen_single_row_requests_share_one_run_on_batch_threads() {
    let names = Arc::new(Mutex::new(Vec::new()));
    let n2 = Arc::clone(&names);
    let r = runner(move |inputs| {
        n2.lock()
            .unwrap()
            .push(std::thread::current().name().map(str::to_owned));
        Ok(inputs.into_iter().collect())
    });
    let b = Arc::new(Batcher::new(options(16, HOUR, 10, 4), r, None));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..16 {
        let b = Arc::clone(&b);
        set.spawn(async move {
            (
                i,
                b.submit(vec![("x".to_owned(), iota(&[1], i as f32))]).await,
            )
        });
    }
    while let Some(done) = set.join_next().await {
        let (i, out) = done.unwrap();
        assert_eq!(floats(&out.unwrap()["x"]), [i as f32]);
    }
    assert_eq!(b.runs(), 1);
    let names = names.lock().unwrap();
    let name = names[0].as_deref().unwrap_or("");
    assert!(name.starts_with(BATCH_THREAD_NAME_PREFIX), "{name}");
}

#[tokio::test]
async fn a_partial_batch_runs_after_its_timeout() {
    let timeout = Duration::from_millis(30);
    let b = Batcher::new(options(100, timeout, 10, 1), identity(), None);
    let start = Instant::now();
    let out = b
        .submit(vec![("x".to_owned(), iota(&[2], 1.0))])
        .await
        .unwrap();
    assert!(start.elapsed() >= timeout);
    assert_eq!(floats(&out["x"]), [1.0, 2.0]);
    assert_eq!(b.runs(), 1);
}

#[tokio::test]
async fn a_full_queue_refuses_at_once_and_never_grows() {
    let (entered_tx, entered) = crossbeam::channel::unbounded();
    let (release, release_rx) = crossbeam::channel::unbounded::<()>();
    let r = runner(move |inputs| {
        let _ = entered_tx.send(());
        release_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Status::deadline_exceeded("not released"))?;
        Ok(inputs.into_iter().collect())
    });
    let b = Arc::new(Batcher::new(options(1, Duration::ZERO, 2, 1), r, None));
    let submit = |v: f32| {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.submit(vec![("x".to_owned(), iota(&[1], v))]).await })
    };
    let a = submit(1.0);
    wait_for("the runner to start", || !entered.is_empty()).await;
    let (c, d) = (submit(2.0), submit(3.0));
    wait_for("two queued batches", || b.queued() == 2).await;
    for _ in 0..3 {
        let e = b
            .submit(vec![("x".to_owned(), iota(&[1], 4.0))])
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unavailable);
        assert_eq!(e.message(), QUEUE_FULL);
        assert_eq!((b.queued(), b.enqueued_batches()), (2, 2));
    }
    for _ in 0..3 {
        release.send(()).unwrap();
    }
    for (h, v) in [(a, 1.0), (c, 2.0), (d, 3.0)] {
        assert_eq!(floats(&h.await.unwrap().unwrap()["x"]), [v]);
    }
    assert_eq!(b.runs(), 3);
}

#[tokio::test]
async fn dropping_the_batcher_joins_its_threads_promptly() {
    let r = identity();
    let b = Arc::new(Batcher::new(options(10, HOUR, 10, 3), Arc::clone(&r), None));
    assert_eq!(Arc::strong_count(&r), 2);
    // A request whose caller goes away while its batch waits.
    let b2 = Arc::clone(&b);
    let h = tokio::spawn(async move { b2.submit(vec![("x".to_owned(), iota(&[1], 0.0))]).await });
    wait_for("the request to queue", || b.queued() == 1).await;
    h.abort();
    assert!(h.await.unwrap_err().is_cancelled());
    let b = Arc::into_inner(b).expect("the only handle");
    let start = Instant::now();
    drop(b);
    assert!(start.elapsed() < Duration::from_secs(5));
    // Every thread has been joined: none holds the runner any more, and the
    // abandoned batch did not run.
    assert_eq!(Arc::strong_count(&r), 1);
}

#[tokio::test]
async fn a_runner_may_drop_the_last_handle_to_its_batcher() {
    let (entered_tx, entered) = crossbeam::channel::unbounded();
    let (release, release_rx) = crossbeam::channel::unbounded::<()>();
    let (dropped_tx, dropped) = crossbeam::channel::unbounded();
    let slot: Arc<Mutex<Option<Arc<Batcher>>>> = Arc::new(Mutex::new(None));
    let s2 = Arc::clone(&slot);
    let r = runner(move |inputs| {
        let _ = entered_tx.send(());
        let _ = release_rx.recv_timeout(Duration::from_secs(10));
        let start = Instant::now();
        drop(s2.lock().unwrap().take());
        let _ = dropped_tx.send(start.elapsed());
        Ok(inputs.into_iter().collect())
    });
    let b = Arc::new(Batcher::new(options(1, Duration::ZERO, 10, 2), r, None));
    *slot.lock().unwrap() = Some(Arc::clone(&b));
    let b2 = Arc::clone(&b);
    let h = tokio::spawn(async move { b2.submit(vec![("x".to_owned(), iota(&[1], 0.0))]).await });
    wait_for("the runner to start", || !entered.is_empty()).await;
    // The caller goes away and the test lets go: the runner holds the last
    // handle, and drops it on a batch thread.
    h.abort();
    assert!(h.await.unwrap_err().is_cancelled());
    drop(b);
    release.send(()).unwrap();
    let took = dropped.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn a_batcher_needs_no_ambient_runtime() {
    let b = Batcher::new(options(4, Duration::ZERO, 10, 1), identity(), None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = rt
        .block_on(b.submit(vec![("x".to_owned(), iota(&[3], 0.0))]))
        .unwrap();
    assert_eq!(floats(&out["x"]), [0.0, 1.0, 2.0]);
    assert_eq!(b.runs(), 1);
    let e = rt
        .block_on(b.submit(vec![("x".to_owned(), Tensor::scalar(1.0f32))]))
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    drop(b);
}
