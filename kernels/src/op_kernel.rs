//! The kernel interface: [`OpKernel`] (synchronous `compute`), [`AsyncOpKernel`]
//! (may finish later through an [`AsyncDone`]), what a kernel sees when it is built
//! ([`OpKernelConstruction`]) and when it runs ([`OpKernelContext`]), and the
//! per-step services behind the latter ([`StepContext`], [`CallFrame`]).
//!
//! A kernel is built once per partition (stateful kernels once per session) and
//! computes many times, possibly concurrently from several steps, so `compute`
//! takes `&self`. Inputs arrive as [`Entry`]s the kernel may take (to reuse a
//! uniquely held buffer); outputs it does not set are dead, which only `Switch`
//! and `Recv`-like kernels may leave.

use std::sync::Arc;

use graph::tensor::memory::MemoryCounter;
use graph::{
    DType, DataType, FromAttr, NodeDef, OpDef, Result, Status, Tensor, TensorShape, TensorType,
};
use rendezvous::sync::Mutex;
use rendezvous::{CancellationManager, FrameIter, Rendezvous};
use smallvec::SmallVec;

use crate::allocator::{default_max_allocation_bytes, Allocator};
use crate::cpu::types::ScalarElem;
use crate::entry::Entry;
use crate::resource::{ResourceMgr, Var};

/// A node's outputs as the executor passes them along.
pub type Outputs = SmallVec<[Entry; 2]>;

/// A device as its kernels see it.
pub struct DeviceContext {
    /// Full name (`/job:localhost/replica:0/task:0/device:CPU:0`).
    pub name: String,
    /// Type (`CPU`).
    pub device_type: String,
    /// Changes each time the device is created; part of rendezvous keys.
    pub incarnation: u64,
    /// The device's resources.
    pub resources: Arc<ResourceMgr>,
    /// The most bytes one tensor a kernel allocates may take here; larger ones
    /// are `ResourceExhausted` (see [`crate::allocator`]).
    pub max_allocation_bytes: usize,
    /// The tensor bytes held on this device (shared by every view of it): the
    /// executor charges every buffer its kernels allocate here (see
    /// [`graph::tensor::memory`]).
    pub memory: Arc<MemoryCounter>,
    /// Whether kernels may write their output into an input buffer nothing else
    /// holds (TensorFlow's `forward_input_or_allocate_output`); off only to
    /// measure what forwarding saves.
    pub forward_buffers: bool,
    /// How the device's kernels use the machine's cores.
    pub threads: CpuThreads,
}

/// How a device's kernels use the machine's cores (TensorFlow's
/// `ConfigProto.inter_op_parallelism_threads` and `intra_op_parallelism_threads`).
///
/// A kernel that reports [`OpKernel::is_expensive`] and is taken from the ready
/// queue while other nodes are ready runs on a thread of [`Self::intra_op`]'s
/// pool, so independent branches of a step run at once (TensorFlow's inter-op
/// pool); the last ready node always runs on the executor's own thread, which
/// would otherwise only wait. A kernel splits its own work over the same pool.
#[derive(Clone, Debug)]
pub struct CpuThreads {
    /// Whether expensive kernels may leave the executor's thread; false for a
    /// single inter-op thread, which runs every node of a step one after another.
    pub inter_op: bool,
    /// The pool kernels run on and split their work over; `None`: rayon's global
    /// pool, one thread per core.
    pub intra_op: Option<Arc<rayon::ThreadPool>>,
}

impl Default for CpuThreads {
    fn default() -> CpuThreads {
        CpuThreads {
            inter_op: true,
            intra_op: None,
        }
    }
}

impl CpuThreads {
    /// The threads of TensorFlow's `ConfigProto` settings: `inter_op` 1 (or
    /// negative: the caller's thread) runs a step's nodes one at a time, 0 or
    /// more lets expensive ones run beside each other; `intra_op` 0 uses every
    /// core, `n` a pool of `n` threads of its own.
    pub fn from_config(inter_op: i32, intra_op: i32) -> Result<CpuThreads> {
        let intra_op = match usize::try_from(intra_op) {
            Ok(0) => None,
            Ok(n) => Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("actorflow-intra-op-{i}"))
                    .build()
                    .map_err(|e| {
                        Status::resource_exhausted(format!(
                            "cannot start {n} intra-op threads: {e}"
                        ))
                    })?,
            )),
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "intra_op_parallelism_threads must be 0 or more, not {intra_op}"
                )))
            }
        };
        Ok(CpuThreads {
            inter_op: !(inter_op == 1 || inter_op < 0),
            intra_op,
        })
    }
}

impl DeviceContext {
    /// A device context with a fresh resource manager and the default allocation
    /// limit ([`default_max_allocation_bytes`]: the machine's memory).
    pub fn new(name: &str, device_type: &str, incarnation: u64) -> DeviceContext {
        DeviceContext {
            name: name.to_owned(),
            device_type: device_type.to_owned(),
            incarnation,
            resources: Arc::new(ResourceMgr::new()),
            max_allocation_bytes: default_max_allocation_bytes(),
            memory: Arc::new(MemoryCounter::new()),
            forward_buffers: true,
            threads: CpuThreads::default(),
        }
    }

    /// The same device refusing single allocations above `max_bytes`.
    pub fn with_max_allocation_bytes(mut self, max_bytes: usize) -> DeviceContext {
        self.max_allocation_bytes = max_bytes;
        self
    }

    /// This device as one session sees it: the same name, incarnation, resources
    /// and memory counter (shared with every other view), under the session's own
    /// allocation limit.
    pub fn view_with_max_allocation_bytes(&self, max_bytes: usize) -> DeviceContext {
        DeviceContext {
            max_allocation_bytes: max_bytes,
            ..self.view()
        }
    }

    /// This device as one session sees it, its kernels never forwarding an input
    /// buffer to an output (see [`Self::forward_buffers`]).
    pub fn view_without_forwarding(&self) -> DeviceContext {
        DeviceContext {
            forward_buffers: false,
            ..self.view()
        }
    }

    /// This device as one session sees it, its kernels using `threads`.
    pub fn view_with_threads(&self, threads: CpuThreads) -> DeviceContext {
        DeviceContext {
            threads,
            ..self.view()
        }
    }

    fn view(&self) -> DeviceContext {
        DeviceContext {
            name: self.name.clone(),
            device_type: self.device_type.clone(),
            incarnation: self.incarnation,
            resources: Arc::clone(&self.resources),
            max_allocation_bytes: self.max_allocation_bytes,
            memory: Arc::clone(&self.memory),
            forward_buffers: self.forward_buffers,
            threads: self.threads.clone(),
        }
    }

    /// The device's allocator.
    pub fn allocator(&self) -> Allocator<'_> {
        Allocator::new(&self.name, self.max_allocation_bytes)
    }
}

/// The feeds and fetches of one step: `_Arg` reads `args[index]`, `_Retval` writes
/// `retvals[index]` (each exactly once).
pub struct CallFrame {
    args: Vec<Tensor>,
    retvals: Mutex<Vec<Option<Tensor>>>,
}

impl CallFrame {
    /// A frame with these arguments and room for `num_retvals` results.
    pub fn new(args: Vec<Tensor>, num_retvals: usize) -> CallFrame {
        CallFrame {
            args,
            retvals: Mutex::new(vec![None; num_retvals]),
        }
    }

    /// Argument `i`.
    pub fn arg(&self, i: usize) -> Result<&Tensor> {
        self.args
            .get(i)
            .ok_or_else(|| Status::internal(format!("call frame has no argument {i}")))
    }

    /// Sets result `i`.
    pub fn set_retval(&self, i: usize, t: Tensor) -> Result<()> {
        let mut r = self.retvals.lock();
        let n = r.len();
        let slot = r.get_mut(i).ok_or_else(|| {
            Status::internal(format!("call frame has {n} results, got index {i}"))
        })?;
        *slot = Some(t);
        Ok(())
    }

    /// Takes the results.
    pub fn take_retvals(&self) -> Vec<Option<Tensor>> {
        std::mem::take(&mut *self.retvals.lock())
    }
}

/// What every kernel of one step on one device shares.
pub struct StepContext {
    /// The step's id.
    pub step_id: u64,
    /// The device.
    pub device: Arc<DeviceContext>,
    /// The step's rendezvous (shared by every device of the step).
    pub rendezvous: Arc<dyn Rendezvous>,
    /// The step's feeds and fetches.
    pub call_frame: Arc<CallFrame>,
    /// The container used when a stateful op names none (private to the session).
    pub default_container: Arc<str>,
    /// The container of per-step resources (stacks), dropped when the step ends.
    pub step_container: Arc<str>,
    /// Cancelled when the step is aborted; waiting kernels register here.
    pub cancellation: Arc<CancellationManager>,
    /// Runs callbacks after a delay (per-op timeouts).
    pub timer: Arc<dyn Timer>,
}

/// Runs a callback after a delay, for per-op timeouts (`timeout_ms`). The runtime
/// provides it; a callback may run after the work it guards finished, so it must
/// tolerate that.
pub trait Timer: Send + Sync {
    /// Runs `f` after `after`.
    fn schedule(&self, after: std::time::Duration, f: Box<dyn FnOnce() + Send>);
}

/// A [`Timer`] that sleeps on a fresh thread per callback (tests and tools).
pub struct ThreadTimer;

impl Timer for ThreadTimer {
    fn schedule(&self, after: std::time::Duration, f: Box<dyn FnOnce() + Send>) {
        std::thread::spawn(move || {
            std::thread::sleep(after);
            f();
        });
    }
}

impl StepContext {
    /// `container` or, when empty, the session's default container.
    pub fn container<'a>(&'a self, container: &'a str) -> &'a str {
        if container.is_empty() {
            &self.default_container
        } else {
            container
        }
    }
}

/// Completes a pending asynchronous kernel with its outputs (or error).
pub struct AsyncDone(Box<dyn FnOnce(Result<Outputs>) + Send>);

impl AsyncDone {
    /// Wraps the executor's completion callback.
    pub fn new(f: impl FnOnce(Result<Outputs>) + Send + 'static) -> AsyncDone {
        AsyncDone(Box::new(f))
    }

    /// Completes the kernel.
    pub fn done(self, r: Result<Outputs>) {
        (self.0)(r)
    }
}

/// Whether an asynchronous kernel finished inside `compute_async`.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
#[must_use]
pub enum AsyncStatus {
    /// Finished; its outputs are in the context.
    Ready,
    /// It took an [`AsyncDone`] (from [`OpKernelContext::defer`]) and will call it
    /// exactly once.
    Pending,
}

/// A synchronous kernel.
pub trait OpKernel: Send + Sync {
    /// Computes the outputs from the inputs.
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()>;

    /// True when the kernel is costly enough to run off the executor's thread:
    /// while other nodes are ready, the executor runs it on the device's pool
    /// (see [`CpuThreads`]). Such a kernel may split its work over rayon, but must
    /// not hold a lock that another kernel waits for across that work (the
    /// waiting kernel may occupy the very pool threads the work needs), as
    /// TensorFlow's kernels must not across their Eigen thread pool.
    fn is_expensive(&self) -> bool {
        false
    }

    /// True for the halves of a cross-device edge (`_Send`, `_Recv`): the executor
    /// runs them even for a dead input, so deadness crosses devices, and a receive
    /// may produce a dead output.
    fn is_transfer(&self) -> bool {
        false
    }

    /// The asynchronous form, for kernels that may wait (Recv, queue ops).
    fn as_async(&self) -> Option<&dyn AsyncOpKernel> {
        None
    }

    /// For `Const`: the value, which the executor forwards without calling
    /// `compute` (TensorFlow's `const_tensor` fast path).
    fn const_value(&self) -> Option<&Tensor> {
        None
    }

    /// For a kernel that only routes values (`Identity`, `Enter`, `Exit`,
    /// `NextIteration`, `LoopCond`, `Switch`, `Merge`, …): how. The executor then
    /// runs [`Route::apply`] on the node's slots itself, without a context or a
    /// virtual call (TensorFlow's executor special-cases these ops too).
    fn route(&self) -> Option<Route> {
        None
    }
}

/// How a routing kernel moves its inputs to its outputs; see [`OpKernel::route`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Input `i` to output `i`, values or references as they are.
    Forward,
    /// Input 0 to output 1 when the scalar bool input 1 is true, else to output 0
    /// (the other output stays empty: dead).
    Switch,
    /// The first live input to output 0, its index (`int32`) to output 1.
    Merge,
}

impl Route {
    /// Routes `inputs` (taken) into `outputs` (empty on entry). Inlined into the
    /// executor's loop: a routing node is little more than this.
    #[inline(always)]
    pub fn apply(self, inputs: &mut [Entry], outputs: &mut [Entry]) -> Result<()> {
        match self {
            Route::Forward => {
                if inputs.len() != outputs.len() {
                    return Err(Status::internal(format!(
                        "forwarding {} inputs to {} outputs",
                        inputs.len(),
                        outputs.len()
                    )));
                }
                for (o, i) in outputs.iter_mut().zip(inputs.iter_mut()) {
                    o.move_from(i);
                }
                Ok(())
            }
            Route::Switch => {
                let taken = match inputs.get(1) {
                    Some(Entry::Value(p)) => match bool::read_inline(p) {
                        Some(b) => b as usize,
                        None => switch_predicate(p)?,
                    },
                    Some(p) => switch_predicate(&p.to_tensor()?)?,
                    None => return Err(Status::internal("Switch without a predicate")),
                };
                match (outputs.get_mut(taken), inputs.first_mut()) {
                    (Some(o), Some(data)) => {
                        o.move_from(data);
                        Ok(())
                    }
                    // no data input: the taken output stays empty (dead)
                    (Some(_), None) => Ok(()),
                    (None, _) => Err(Status::internal("Switch with fewer than 2 outputs")),
                }
            }
            Route::Merge => {
                let Some(i) = inputs.iter().position(|e| !e.is_empty()) else {
                    return Err(Status::internal("Merge ran without a live input"));
                };
                match outputs {
                    [value, index] => {
                        value.move_from(&mut inputs[i]);
                        merge_index(i, index);
                        Ok(())
                    }
                    _ => Err(Status::internal("Merge without 2 outputs")),
                }
            }
        }
    }
}

/// The error for a kernel setting output `i` of `n`.
#[cold]
#[inline(never)]
fn no_output(i: usize, n: usize) -> Status {
    Status::internal(format!("kernel set output {i} of {n}"))
}

/// Which output a `Switch` routes to: its predicate `pred` must be a scalar bool.
#[inline(never)]
fn switch_predicate(pred: &Tensor) -> Result<usize> {
    if pred.rank() != 0 {
        return Err(Status::invalid_argument(format!(
            "The second input must be a scalar, but it has shape {}",
            pred.shape()
        )));
    }
    Ok(pred.scalar_value::<bool>()? as usize)
}

/// Sets `out` to `Merge`'s `value_index` output for input `i` (the usual 0 and 1
/// are built once).
#[inline]
fn merge_index(i: usize, out: &mut Entry) {
    static FIRST_TWO: std::sync::LazyLock<[Entry; 2]> = std::sync::LazyLock::new(|| {
        [
            Entry::Value(Tensor::scalar(0i32)),
            Entry::Value(Tensor::scalar(1i32)),
        ]
    });
    match FIRST_TWO.get(i) {
        Some(e) => e.clone_to(out),
        None => *out = Entry::Value(Tensor::scalar(i as i32)),
    }
}

/// A kernel that may finish later.
pub trait AsyncOpKernel: Send + Sync {
    /// Starts the computation; see [`AsyncStatus`].
    fn compute_async(&self, ctx: &mut OpKernelContext<'_>) -> Result<AsyncStatus>;
}

/// What a kernel sees while it is built.
pub struct OpKernelConstruction<'a> {
    /// The node, attribute defaults filled in.
    pub node: &'a NodeDef,
    /// The op's definition.
    pub op_def: &'a OpDef,
    /// Resolved input types.
    pub input_types: &'a [DataType],
    /// Resolved output types.
    pub output_types: &'a [DataType],
    /// The device the kernel runs on.
    pub device: &'a Arc<DeviceContext>,
}

impl OpKernelConstruction<'_> {
    /// Reads an attribute; errors name the node.
    pub fn attr<T: FromAttr>(&self, name: &str) -> Result<T> {
        self.node.get_attr(name)
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.node.name
    }

    /// The dtype of input `i`.
    pub fn input_dtype(&self, i: usize) -> Result<DType> {
        self.input_types
            .get(i)
            .map(|t| t.dtype)
            .ok_or_else(|| Status::internal(format!("no input {i}")))
    }

    /// The dtype of output `i`.
    pub fn output_dtype(&self, i: usize) -> Result<DType> {
        self.output_types
            .get(i)
            .map(|t| t.dtype)
            .ok_or_else(|| Status::internal(format!("no output {i}")))
    }
}

/// What a kernel sees while it runs.
pub struct OpKernelContext<'a> {
    inputs: &'a mut [Entry],
    outputs: &'a mut [Entry],
    step: &'a StepContext,
    frame_iter: FrameIter,
    input_dead: bool,
    defer: Option<&'a mut dyn FnMut() -> AsyncDone>,
}

impl<'a> OpKernelContext<'a> {
    /// The input and output slots themselves (for [`Route::apply`]).
    pub fn slots(&mut self) -> (&mut [Entry], &mut [Entry]) {
        (&mut *self.inputs, &mut *self.outputs)
    }

    /// A context over these input slots and output slots (all empty). `defer`
    /// creates the completion of an asynchronous kernel.
    pub fn new(
        inputs: &'a mut [Entry],
        outputs: &'a mut [Entry],
        step: &'a StepContext,
        frame_iter: FrameIter,
        input_dead: bool,
        defer: Option<&'a mut dyn FnMut() -> AsyncDone>,
    ) -> OpKernelContext<'a> {
        OpKernelContext {
            inputs,
            outputs,
            step,
            frame_iter,
            input_dead,
            defer,
        }
    }

    /// The number of data inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// The number of outputs.
    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Input `i` as a tensor.
    #[inline]
    pub fn input(&self, i: usize) -> Result<&Tensor> {
        match self.inputs.get(i) {
            Some(Entry::Value(t)) => Ok(t),
            Some(Entry::Ref(_)) => Err(Status::internal(format!("input {i} is a reference"))),
            _ => Err(Status::internal(format!("input {i} has no value"))),
        }
    }

    /// Inputs 0 and 1 of a two-input kernel when both are scalars of element type
    /// `T` held in their handles (the scalar fast path); `None` otherwise.
    #[inline(always)]
    pub fn scalar_inputs<T: ScalarElem>(&self) -> Option<(T, T)> {
        match &*self.inputs {
            [Entry::Value(a), Entry::Value(b)] => Some((T::read_inline(a)?, T::read_inline(b)?)),
            _ => None,
        }
    }

    /// Sets output `o` to the scalar `v`, reusing the handle of input `i`, which
    /// must be a scalar of `T`'s dtype held in its handle (as
    /// [`Self::scalar_inputs`] found): the input is moved to the output and its
    /// value overwritten, leaving the input empty as [`Self::take_input`] would.
    /// Same result as `set_output(o, Tensor::scalar(v))`, without building the
    /// tensor through a byte copy.
    #[inline(always)]
    pub fn set_scalar_output_from_input<T: ScalarElem>(
        &mut self,
        i: usize,
        o: usize,
        v: T,
    ) -> Result<()> {
        let (Some(input), Some(slot)) = (self.inputs.get_mut(i), self.outputs.get_mut(o)) else {
            return self.set_output(o, Tensor::scalar(v));
        };
        slot.move_from(input);
        match slot {
            Entry::Value(t) if t.is_inline_scalar() => match t.as_mut_slice::<T>()?.first_mut() {
                Some(x) => {
                    *x = v;
                    Ok(())
                }
                None => self.set_output(o, Tensor::scalar(v)),
            },
            _ => self.set_output(o, Tensor::scalar(v)),
        }
    }

    /// Sets output `o` to the scalar `v`; a bool is copied from a prebuilt tensor.
    #[inline(always)]
    pub fn set_scalar_output<T: TensorType>(&mut self, o: usize, v: T) -> Result<()> {
        if let Some(&b) = (&v as &dyn std::any::Any).downcast_ref::<bool>() {
            if let Some(slot) = self.outputs.get_mut(o) {
                Entry::scalar_bool(b).clone_to(slot);
                return Ok(());
            }
        }
        self.set_output(o, Tensor::scalar(v))
    }

    /// Takes input `i` (to reuse its buffer when uniquely held). On a device that
    /// does not forward buffers the input stays in its slot as well, so that a
    /// write to the taken tensor copies it.
    #[inline]
    pub fn take_input(&mut self, i: usize) -> Result<Tensor> {
        if !self.step.device.forward_buffers {
            return self.input(i).cloned();
        }
        match self.inputs.get_mut(i).map(Entry::take) {
            Some(Entry::Value(t)) => Ok(t),
            Some(other) => {
                let msg = format!("input {i} is not a value: {other:?}");
                self.inputs[i] = other;
                Err(Status::internal(msg))
            }
            None => Err(Status::internal(format!("no input {i}"))),
        }
    }

    /// Input `i` as a variable reference (for `Ref(T)` arguments).
    pub fn input_ref(&self, i: usize) -> Result<&Arc<Var>> {
        match self.inputs.get(i) {
            Some(Entry::Ref(v)) => Ok(v),
            _ => Err(Status::internal(format!("input {i} is not a reference"))),
        }
    }

    /// The raw input entry `i`.
    pub fn input_entry(&mut self, i: usize) -> Option<&mut Entry> {
        self.inputs.get_mut(i)
    }

    /// Sets output `i` to a tensor.
    #[inline]
    pub fn set_output(&mut self, i: usize, t: Tensor) -> Result<()> {
        self.set_output_entry(i, Entry::Value(t))
    }

    /// Sets output `i` to a variable reference.
    pub fn set_output_ref(&mut self, i: usize, v: Arc<Var>) -> Result<()> {
        self.set_output_entry(i, Entry::Ref(v))
    }

    /// Sets output `i` to an entry.
    #[inline(always)]
    pub fn set_output_entry(&mut self, i: usize, e: Entry) -> Result<()> {
        match self.outputs.get_mut(i) {
            Some(slot) => {
                *slot = e;
                Ok(())
            }
            None => Err(no_output(i, self.outputs.len())),
        }
    }

    /// The device's allocator: every tensor sized by the inputs comes from it (see
    /// [`crate::allocator`]). Borrows the step, not the context.
    #[inline]
    pub fn allocator(&self) -> Allocator<'a> {
        let step: &'a StepContext = self.step;
        step.device.allocator()
    }

    /// A fresh zeroed tensor from the device's allocator; `ResourceExhausted` when
    /// it is over the device's limit or cannot be had.
    #[inline]
    pub fn allocate(&self, dtype: DType, shape: impl Into<TensorShape>) -> Result<Tensor> {
        self.allocator().zeros(dtype, shape)
    }

    /// The output buffer for input `i` when it can be reused in place (a uniquely
    /// held tensor of this dtype and shape), else a fresh zeroed tensor from
    /// [`Self::allocate`].
    pub fn forward_input_or_allocate(
        &mut self,
        i: usize,
        dtype: DType,
        shape: &TensorShape,
    ) -> Result<Tensor> {
        if let (true, Some(Entry::Value(t))) =
            (self.step.device.forward_buffers, self.inputs.get_mut(i))
        {
            if t.dtype() == dtype && t.shape() == shape && t.is_unique() {
                if let Entry::Value(t) = std::mem::take(&mut self.inputs[i]) {
                    return Ok(t);
                }
            }
        }
        self.allocate(dtype, shape.clone())
    }

    /// The step's shared services.
    pub fn step(&self) -> &StepContext {
        self.step
    }

    /// The frame and iteration this node runs in.
    pub fn frame_iter(&self) -> FrameIter {
        self.frame_iter
    }

    /// True when the node runs only to propagate a dead input (transfer nodes).
    pub fn is_input_dead(&self) -> bool {
        self.input_dead
    }

    /// Receives output 0 from the step's rendezvous under `key` in this node's frame
    /// and iteration: `Ready` with the output set (dead when the sender's input was
    /// dead) when the value is already there, else `Pending` with the completion
    /// registered as the rendezvous waiter.
    pub fn recv_from_rendezvous(&mut self, key: &rendezvous::ParsedKey) -> Result<AsyncStatus> {
        let step = self.step;
        let fi = self.frame_iter;
        let defer = self
            .defer
            .as_mut()
            .ok_or_else(|| Status::internal("recv outside compute_async"))?;
        let ready = step.rendezvous.recv(key, fi, &mut || {
            let done = defer();
            Box::new(move |r: Result<rendezvous::Value>| {
                done.done(r.map(|v| {
                    let mut o = Outputs::new();
                    o.push(v.map(Entry::Value).unwrap_or_default());
                    o
                }))
            })
        });
        match ready {
            Some(r) => {
                if let Some(t) = r? {
                    self.set_output(0, t)?;
                }
                Ok(AsyncStatus::Ready)
            }
            None => Ok(AsyncStatus::Pending),
        }
    }

    /// The completion of a pending asynchronous kernel; `Internal` outside
    /// `compute_async`.
    pub fn defer(&mut self) -> Result<AsyncDone> {
        match self.defer.as_mut() {
            Some(f) => Ok(f()),
            None => Err(Status::internal("defer() called outside compute_async")),
        }
    }
}
