//! Queue kernels: the `*QueueV2` ops create (or find, by container and shared
//! name) a [`Queue`] resource; enqueue and dequeue are asynchronous kernels that
//! complete at once when they can and otherwise wait in the queue, registered with
//! the step's cancellation (an aborted step gives up its waits) and, with
//! `timeout_ms > 0`, failing with `DeadlineExceeded` after that long.

use std::sync::Arc;
use std::time::Duration;

use graph::{DType, ResourceHandle, Result, Shape, Status, Tensor};

use crate::entry::Entry;
use crate::op_kernel::{
    AsyncOpKernel, AsyncStatus, OpKernel, OpKernelConstruction, OpKernelContext, Outputs,
};
use crate::queue::{DequeueMode, Queue, QueueKind, QueueSpec, Responder, Tuple};
use crate::registry::{KernelDef, KernelRegistry};

struct CreateQueue {
    spec: QueueSpec,
    container: String,
    shared_name: String,
}

impl OpKernel for CreateQueue {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let step = ctx.step();
        let container = step.container(&self.container).to_owned();
        let q = step
            .device
            .resources
            .lookup_or_create(&container, &self.shared_name, || {
                Ok(Queue::new(QueueSpec {
                    name: self.shared_name.clone(),
                    ..self.spec.clone()
                }))
            })?;
        let mut mine = self.spec.clone();
        mine.name = self.shared_name.clone();
        if q.spec() != &mine {
            return Err(Status::invalid_argument(format!(
                "Shared queue '{}' exists with a different definition: {:?} vs requested {:?}",
                self.shared_name,
                q.spec(),
                mine
            )));
        }
        let h = ResourceHandle {
            device: step.device.name.clone(),
            container,
            name: self.shared_name.clone(),
            type_name: "Queue".into(),
        };
        ctx.set_output(0, Tensor::resource_scalar(h))
    }
}

fn make_queue(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let mut types: Vec<DType> = c.attr("component_types")?;
    let mut shapes: Vec<Shape> = c.attr("shapes")?;
    let capacity: i64 = c.attr("capacity")?;
    let kind = match c.node.op.as_str() {
        "FIFOQueueV2" => QueueKind::Fifo,
        "PaddingFIFOQueueV2" => {
            if shapes.len() != types.len() {
                return Err(Status::invalid_argument(
                    "PaddingFIFOQueue requires a shape (possibly partially known) for every component",
                ));
            }
            QueueKind::PaddingFifo
        }
        "PriorityQueueV2" => {
            types.insert(0, DType::I64);
            if !shapes.is_empty() {
                shapes.insert(0, Shape::scalar());
            }
            QueueKind::Priority
        }
        _ => {
            let seed: i64 = c.attr("seed")?;
            let seed2: i64 = c.attr("seed2")?;
            QueueKind::RandomShuffle {
                min_after_dequeue: c.attr::<i64>("min_after_dequeue")?.max(0) as usize,
                seed: (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (seed2 as u64),
            }
        }
    };
    if !shapes.is_empty() && shapes.len() != types.len() {
        return Err(Status::invalid_argument(format!(
            "{} shapes given for {} components",
            shapes.len(),
            types.len()
        )));
    }
    let shared: String = c.attr("shared_name")?;
    Ok(Box::new(CreateQueue {
        spec: QueueSpec {
            name: String::new(),
            kind,
            component_types: types,
            shapes,
            capacity: (capacity >= 0).then_some(capacity as usize),
        },
        container: c.attr("container")?,
        shared_name: if shared.is_empty() {
            c.name().to_owned()
        } else {
            shared
        },
    }))
}

/// The queue behind input 0.
pub fn queue_of(ctx: &OpKernelContext<'_>) -> Result<Arc<Queue>> {
    let t = ctx.input(0)?;
    let h = t
        .as_resource_handles()?
        .first()
        .ok_or_else(|| Status::invalid_argument("empty queue handle"))?;
    ctx.step()
        .device
        .resources
        .lookup::<Queue>(&h.container, &h.name)
}

fn timeout(ms: i64) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

/// Runs one queue request from an asynchronous kernel: registers it with the step's
/// cancellation, submits it with `submit` (which gets the request id and the
/// completion maker), arms the timeout if it waits, and converts the result.
fn run_request<T: Send + 'static>(
    ctx: &mut OpKernelContext<'_>,
    q: Arc<Queue>,
    timeout_after: Option<Duration>,
    submit: impl FnOnce(&Queue, u64, &mut dyn FnMut() -> Responder<T>) -> Option<Result<T>>,
    to_outputs: fn(T) -> Outputs,
) -> Result<AsyncStatus> {
    let id = q.next_id();
    let cancellation = Arc::clone(&ctx.step().cancellation);
    let timer = Arc::clone(&ctx.step().timer);
    let qc = Arc::clone(&q);
    let name = q.spec().name.clone();
    let token = cancellation
        .register(move || {
            qc.cancel(
                id,
                Status::cancelled(format!(
                    "queue operation on '{name}' was cancelled: the step was aborted"
                )),
            )
        })
        .ok_or_else(|| Status::cancelled("the step was cancelled"))?;
    let ready = {
        let cm = Arc::clone(&cancellation);
        let mut make = || -> Responder<T> {
            let done = ctx.defer();
            let cm = Arc::clone(&cm);
            Box::new(move |r: Result<T>| {
                cm.deregister(token);
                if let Ok(done) = done {
                    done.done(r.map(to_outputs));
                }
            })
        };
        submit(&q, id, &mut make)
    };
    match ready {
        Some(r) => {
            cancellation.deregister(token);
            let outs = to_outputs(r?);
            for (i, e) in outs.into_iter().enumerate() {
                ctx.set_output_entry(i, e)?;
            }
            Ok(AsyncStatus::Ready)
        }
        None => {
            if cancellation.is_cancelled() {
                // The step was aborted between the registration and the submit:
                // the cancel may have reached the queue before the request did
                // (and found nothing to cancel); this one arrives after it.
                q.cancel(
                    id,
                    Status::cancelled(format!(
                        "queue operation on '{}' was cancelled: the step was aborted",
                        q.spec().name
                    )),
                );
                return Ok(AsyncStatus::Pending);
            }
            if let Some(d) = timeout_after {
                let name = q.spec().name.clone();
                timer.schedule(
                    d,
                    Box::new(move || {
                        q.cancel(
                            id,
                            Status::deadline_exceeded(format!(
                                "Timed out waiting on queue '{name}' after {d:?}"
                            )),
                        )
                    }),
                );
            }
            Ok(AsyncStatus::Pending)
        }
    }
}

fn no_outputs(_: ()) -> Outputs {
    Outputs::new()
}

fn tuple_outputs(t: Tuple) -> Outputs {
    t.into_iter().map(Entry::Value).collect()
}

struct EnqueueKernel {
    many: bool,
    timeout: Option<Duration>,
}

impl OpKernel for EnqueueKernel {
    fn compute(&self, _ctx: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::internal("queue enqueue is asynchronous"))
    }
    fn as_async(&self) -> Option<&dyn AsyncOpKernel> {
        Some(self)
    }
}

impl AsyncOpKernel for EnqueueKernel {
    fn compute_async(&self, ctx: &mut OpKernelContext<'_>) -> Result<AsyncStatus> {
        let q = queue_of(ctx)?;
        let components = (1..ctx.num_inputs())
            .map(|i| ctx.take_input(i))
            .collect::<Result<Vec<_>>>()?;
        let many = self.many;
        run_request(
            ctx,
            q,
            self.timeout,
            move |q, id, make| q.enqueue(id, components, many, make),
            no_outputs,
        )
    }
}

struct DequeueKernel {
    kind: Option<bool>,
    types: Vec<DType>,
    timeout: Option<Duration>,
}

impl OpKernel for DequeueKernel {
    fn compute(&self, _ctx: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::internal("queue dequeue is asynchronous"))
    }
    fn as_async(&self) -> Option<&dyn AsyncOpKernel> {
        Some(self)
    }
}

impl AsyncOpKernel for DequeueKernel {
    fn compute_async(&self, ctx: &mut OpKernelContext<'_>) -> Result<AsyncStatus> {
        let q = queue_of(ctx)?;
        if q.spec().component_types != self.types {
            return Err(Status::invalid_argument(format!(
                "queue '{}' holds {:?}, the dequeue expects {:?}",
                q.spec().name,
                q.spec().component_types,
                self.types
            )));
        }
        let mode = match self.kind {
            None => DequeueMode::One,
            Some(up_to) => {
                let n = ctx.input(1)?.scalar_value::<i32>()?;
                if n < 0 {
                    return Err(Status::invalid_argument(format!(
                        "Dequeue requested {n} < 0 elements"
                    )));
                }
                if up_to {
                    DequeueMode::UpTo(n as usize)
                } else {
                    DequeueMode::Many(n as usize)
                }
            }
        };
        run_request(
            ctx,
            q,
            self.timeout,
            move |q, id, make| q.dequeue(id, mode, make),
            tuple_outputs,
        )
    }
}

struct CloseKernel {
    cancel_pending_enqueues: bool,
}

impl OpKernel for CloseKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        queue_of(ctx)?.close(self.cancel_pending_enqueues);
        Ok(())
    }
}

struct SizeKernel;

impl OpKernel for SizeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = queue_of(ctx)?.size();
        ctx.set_output(0, Tensor::scalar(n.min(i32::MAX as usize) as i32))
    }
}

struct IsClosedKernel;

impl OpKernel for IsClosedKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let c = queue_of(ctx)?.is_closed();
        ctx.set_output(0, Tensor::scalar(c))
    }
}

/// Registers the queue kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in [
        "FIFOQueueV2",
        "PaddingFIFOQueueV2",
        "RandomShuffleQueueV2",
        "PriorityQueueV2",
    ] {
        r.register(KernelDef::cpu(op, make_queue));
    }
    for (op, many) in [("QueueEnqueueV2", false), ("QueueEnqueueManyV2", true)] {
        r.register(KernelDef::cpu(
            op,
            if many {
                |c: &OpKernelConstruction<'_>| -> Result<Box<dyn OpKernel>> {
                    Ok(Box::new(EnqueueKernel {
                        many: true,
                        timeout: timeout(c.attr("timeout_ms")?),
                    }))
                }
            } else {
                |c: &OpKernelConstruction<'_>| -> Result<Box<dyn OpKernel>> {
                    Ok(Box::new(EnqueueKernel {
                        many: false,
                        timeout: timeout(c.attr("timeout_ms")?),
                    }))
                }
            },
        ));
    }
    r.register(KernelDef::cpu("QueueDequeueV2", |c| {
        Ok(Box::new(DequeueKernel {
            kind: None,
            types: c.attr("component_types")?,
            timeout: timeout(c.attr("timeout_ms")?),
        }))
    }));
    r.register(KernelDef::cpu("QueueDequeueManyV2", |c| {
        Ok(Box::new(DequeueKernel {
            kind: Some(false),
            types: c.attr("component_types")?,
            timeout: timeout(c.attr("timeout_ms")?),
        }))
    }));
    r.register(KernelDef::cpu("QueueDequeueUpToV2", |c| {
        Ok(Box::new(DequeueKernel {
            kind: Some(true),
            types: c.attr("component_types")?,
            timeout: timeout(c.attr("timeout_ms")?),
        }))
    }));
    r.register(KernelDef::cpu("QueueCloseV2", |c| {
        Ok(Box::new(CloseKernel {
            cancel_pending_enqueues: c.attr("cancel_pending_enqueues")?,
        }))
    }));
    r.register(KernelDef::cpu("QueueSizeV2", |_| Ok(Box::new(SizeKernel))));
    r.register(KernelDef::cpu("QueueIsClosedV2", |_| {
        Ok(Box::new(IsClosedKernel))
    }));
}
