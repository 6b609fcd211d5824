//! Expensive kernels of independent branches run beside each other on the
//! device's pool (TensorFlow's inter-op pool); one inter-op thread runs them one
//! at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use graph::Node;
use kernels::{CpuThreads, OpKernel};

use super::*;

/// Counts the kernels computing at once; each waits (up to 10 s) until `want`
/// of them arrived, then stays a few milliseconds, then forwards its input.
struct Meet {
    want: usize,
    arrived: AtomicUsize,
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Meet {
    fn new(want: usize) -> Arc<Meet> {
        Arc::new(Meet {
            want,
            arrived: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        })
    }
}

impl OpKernel for Meet {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let t0 = Instant::now();
        while self.arrived.load(Ordering::SeqCst) < self.want {
            if t0.elapsed() > Duration::from_secs(10) {
                self.running.fetch_sub(1, Ordering::SeqCst);
                return Err(Status::deadline_exceeded("the other branch never ran"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        self.running.fetch_sub(1, Ordering::SeqCst);
        let x = ctx.input(0)?.clone();
        ctx.set_output(0, x)
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

/// Gives the nodes it names the kernels it holds.
struct Inject(HashMap<&'static str, Arc<dyn OpKernel>>);

impl KernelCache for Inject {
    fn get_or_create(
        &self,
        node: &Node,
        create: &mut dyn FnMut() -> Result<Arc<dyn OpKernel>>,
    ) -> Result<Arc<dyn OpKernel>> {
        match self.0.get(node.name()) {
            Some(k) => Ok(Arc::clone(k)),
            None => create(),
        }
    }
}

/// `c` feeding two branches `a` and `b` (both `meet`), each fetched.
fn two_branches(meet: &Arc<Meet>, threads: CpuThreads) -> Result<Vec<Option<Tensor>>> {
    let f = DType::F32;
    let ident = |n: &str| {
        NodeDef::new(n, "Identity")
            .with_input("c")
            .with_attr("T", f)
    };
    let nodes = vec![
        konst("c", Tensor::scalar(2.0f32)),
        ident("a"),
        ident("b"),
        retval("r0", "a", 0, f),
        retval("r1", "b", 1, f),
    ];
    let k: Arc<dyn OpKernel> = Arc::clone(meet) as Arc<dyn OpKernel>;
    let cache = Inject(HashMap::from([("a", Arc::clone(&k)), ("b", k)]));
    let dev = Arc::new(device().view_with_threads(threads));
    let plan = Arc::new(ExecutorPlan::build_from_nodes(&nodes, &dev, &cache)?);
    let st = step(&dev, 2);
    let mut ex = ExecutorState::new(plan, Arc::clone(&st), None);
    drive(&mut ex, &mut QueueHost::new())?;
    Ok(st.call_frame.take_retvals())
}

#[test]
fn independent_expensive_kernels_run_at_once() {
    let meet = Meet::new(2);
    let r = two_branches(&meet, CpuThreads::default()).unwrap();
    assert_eq!(r, vec![Some(Tensor::scalar(2.0f32)); 2]);
    assert_eq!(meet.most.load(Ordering::SeqCst), 2);
}

#[test]
fn one_inter_op_thread_runs_them_one_at_a_time() {
    let meet = Meet::new(1);
    let threads = CpuThreads::from_config(1, 0).unwrap();
    let r = two_branches(&meet, threads).unwrap();
    assert_eq!(r, vec![Some(Tensor::scalar(2.0f32)); 2]);
    assert_eq!(meet.most.load(Ordering::SeqCst), 1);
}

/// An expensive kernel that fails.
struct Fail;

impl OpKernel for Fail {
    fn compute(&self, _ctx: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::invalid_argument("this branch fails"))
    }

    fn is_expensive(&self) -> bool {
        true
    }
}

#[test]
fn a_failing_branch_off_the_executor_thread_fails_the_step_naming_its_node() {
    let f = DType::F32;
    let ident = |n: &str| {
        NodeDef::new(n, "Identity")
            .with_input("c")
            .with_attr("T", f)
    };
    let nodes = vec![
        konst("c", Tensor::scalar(2.0f32)),
        ident("a"),
        ident("b"),
        retval("r0", "a", 0, f),
        retval("r1", "b", 1, f),
    ];
    // Whichever branch the ready queue gives first goes to the pool: both fail.
    let cache = Inject(HashMap::from([
        ("a", Arc::new(Fail) as Arc<dyn OpKernel>),
        ("b", Arc::new(Fail) as Arc<dyn OpKernel>),
    ]));
    let dev = device();
    let plan = Arc::new(ExecutorPlan::build_from_nodes(&nodes, &dev, &cache).unwrap());
    let mut ex = ExecutorState::new(plan, step(&dev, 2), None);
    let err = drive(&mut ex, &mut QueueHost::new()).unwrap_err();
    assert_eq!(err.code(), graph::Code::InvalidArgument);
    assert!(err.message().contains("this branch fails"), "{err}");
    assert!(matches!(err.node(), Some("a" | "b")), "{err:?}");
}

#[test]
fn thread_settings_are_checked() {
    let err = CpuThreads::from_config(0, -1).unwrap_err();
    assert_eq!(err.code(), graph::Code::InvalidArgument);
    let t = CpuThreads::from_config(-1, 3).unwrap();
    assert!(!t.inter_op);
    assert_eq!(t.intra_op.map(|p| p.current_num_threads()), Some(3));
}
