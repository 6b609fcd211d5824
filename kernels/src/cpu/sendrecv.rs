//! `_Send`/`_Recv` (and the `_Host*` forms): the halves of a cross-device edge. The
//! rendezvous key is parsed from the attributes once, when the kernel is built;
//! each run adds its frame and iteration. A Send whose input is dead sends a dead
//! value, so deadness crosses devices.

use graph::{Result, Status};
use rendezvous::ParsedKey;

use crate::entry::Entry;
use crate::op_kernel::{
    AsyncOpKernel, AsyncStatus, OpKernel, OpKernelConstruction, OpKernelContext,
};
use crate::registry::{KernelDef, KernelRegistry};

fn parse_key(c: &OpKernelConstruction<'_>) -> Result<ParsedKey> {
    let name: String = c.attr("tensor_name")?;
    let src: String = c.attr("send_device")?;
    let inc: i64 = c.attr("send_device_incarnation")?;
    let dst: String = c.attr("recv_device")?;
    ParsedKey::new(&src, inc as u64, &dst, &name)
}

/// `_Send`.
pub struct SendKernel {
    key: ParsedKey,
}

impl OpKernel for SendKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let value = if ctx.is_input_dead() {
            None
        } else {
            match ctx.input_entry(0).map(Entry::take) {
                Some(Entry::Value(t)) => Some(t),
                Some(Entry::Ref(v)) => Some(v.read()?),
                _ => return Err(Status::internal("Send has no input")),
            }
        };
        let (k, fi, dead) = (&self.key, ctx.frame_iter(), value.is_none());
        let (tensor, from, to) = (&k.edge_name, &k.src_device, &k.dst_device);
        tracing::trace!(%tensor, %from, %to, frame_iter = %fi, dead, "send");
        ctx.step()
            .rendezvous
            .send(&self.key, ctx.frame_iter(), value)
    }
    fn is_transfer(&self) -> bool {
        true
    }
}

/// `_Recv`.
pub struct RecvKernel {
    key: ParsedKey,
}

impl OpKernel for RecvKernel {
    fn compute(&self, _ctx: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::internal("Recv is asynchronous"))
    }
    fn is_transfer(&self) -> bool {
        true
    }
    fn as_async(&self) -> Option<&dyn AsyncOpKernel> {
        Some(self)
    }
}

impl AsyncOpKernel for RecvKernel {
    fn compute_async(&self, ctx: &mut OpKernelContext<'_>) -> Result<AsyncStatus> {
        let (k, fi) = (&self.key, ctx.frame_iter());
        let (tensor, from, to) = (&k.edge_name, &k.src_device, &k.dst_device);
        tracing::trace!(%tensor, %from, %to, frame_iter = %fi, "recv");
        ctx.recv_from_rendezvous(&self.key)
    }
}

/// Registers the transfer kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    for op in ["_Send", "_HostSend"] {
        r.register(KernelDef::cpu(op, |c| {
            Ok(Box::new(SendKernel { key: parse_key(c)? }))
        }));
    }
    for op in ["_Recv", "_HostRecv"] {
        r.register(KernelDef::cpu(op, |c| {
            Ok(Box::new(RecvKernel { key: parse_key(c)? }))
        }));
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::{run_node_in, test_device, test_step};
    use crate::Entry;
    use graph::{DType, NodeDef, Tensor};

    fn node(op: &str) -> NodeDef {
        let n = NodeDef::new(op, op)
            .with_attr("tensor_name", "x:0")
            .with_attr("send_device", "/device:CPU:0")
            .with_attr("send_device_incarnation", 1i64)
            .with_attr("recv_device", "/device:CPU:1");
        if op == "_Send" {
            n.with_input("x").with_attr("T", DType::F32)
        } else {
            n.with_attr("tensor_type", DType::F32)
        }
    }

    #[test]
    fn send_then_recv_and_recv_then_send() {
        let dev = test_device();
        let step = test_step(&dev);
        run_node_in(
            &step,
            node("_Send"),
            vec![Entry::Value(Tensor::scalar(3.0f32))],
        )
        .unwrap();
        let out = run_node_in(&step, node("_Recv"), vec![]).unwrap();
        assert_eq!(out[0].to_tensor().unwrap(), Tensor::scalar(3.0f32));

        let step = std::sync::Arc::new(test_step(&dev));
        let s2 = step.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            run_node_in(
                &s2,
                node("_Send"),
                vec![Entry::Value(Tensor::scalar(4.0f32))],
            )
            .unwrap();
        });
        let out = run_node_in(&step, node("_Recv"), vec![]).unwrap();
        assert_eq!(out[0].to_tensor().unwrap(), Tensor::scalar(4.0f32));
        sender.join().unwrap();
    }
}
