//! Gradients of the convolution ops (TensorFlow's `nn_grad.py`: `_Conv2DGrad`,
//! `_Conv2DBackpropInputGrad`, `_Conv2DBackpropFilterGrad`,
//! `_DepthwiseConv2dNativeGrad` and the depthwise backprop gradients). Each op of a
//! family is linear in each of its tensor inputs, so every gradient is one of the
//! other two ops of the family, built with the node's window attributes
//! ([`ConvOptions::from_node`]); the size inputs (`input_sizes`, `filter_sizes`)
//! get none.

use crate::builder::Output;
use crate::gradients::{GradContext, GradientRegistry};
use crate::ops::{self, ConvOptions};
use crate::Result;

type Grads = Result<Vec<Option<Output>>>;

/// The ops of one family: the forward convolution and its two gradients.
#[derive(Clone, Copy)]
struct Family {
    forward: &'static str,
    backprop_input: &'static str,
    backprop_filter: &'static str,
}

const CONV2D: Family = Family {
    forward: "Conv2D",
    backprop_input: "Conv2DBackpropInput",
    backprop_filter: "Conv2DBackpropFilter",
};

const DEPTHWISE: Family = Family {
    forward: "DepthwiseConv2dNative",
    backprop_input: "DepthwiseConv2dNativeBackpropInput",
    backprop_filter: "DepthwiseConv2dNativeBackpropFilter",
};

impl Family {
    /// `op(a, b, c)` of this family with the options of the node `c` differentiates.
    fn build(&self, c: &GradContext<'_>, op: &str, inputs: &[&Output]) -> Result<Output> {
        let o = ConvOptions::from_node(c.node)?;
        let mut b = c.scope.op(op);
        for i in inputs {
            b = b.input(*i);
        }
        b = b
            .attr("strides", o.strides)
            .attr("padding", o.padding.as_str())
            .attr("explicit_paddings", o.explicit_paddings)
            .attr("data_format", o.data_format.as_str())
            .attr("dilations", o.dilations);
        if self.forward == "Conv2D" {
            let cudnn: bool = c.node.get_attr_or("use_cudnn_on_gpu", true)?;
            b = b.attr("use_cudnn_on_gpu", cudnn);
        }
        b.build1()
    }

    /// `op(x, w)`: input gradient `BackpropInput(shape(x), w, g)`, filter gradient
    /// `BackpropFilter(x, shape(w), g)`.
    fn forward_grad(&self, c: &GradContext<'_>) -> Grads {
        let s = c.scope;
        let (x, w, g) = (c.input(0)?, c.input(1)?, c.grad(0)?);
        let shapes = ops::shape_n(s, &[x.clone(), w.clone()])?;
        let dx = self.build(c, self.backprop_input, &[&shapes[0], &w, &g])?;
        let dw = self.build(c, self.backprop_filter, &[&x, &shapes[1], &g])?;
        Ok(vec![Some(dx), Some(dw)])
    }

    /// `BackpropInput(sizes, w, dy)`: filter gradient `BackpropFilter(g, shape(w),
    /// dy)`, `dy` gradient `op(g, w)`.
    fn backprop_input_grad(&self, c: &GradContext<'_>) -> Grads {
        let s = c.scope;
        let (w, dy, g) = (c.input(1)?, c.input(2)?, c.grad(0)?);
        let w_shape = ops::shape(s, &w)?;
        let dw = self.build(c, self.backprop_filter, &[&g, &w_shape, &dy])?;
        let ddy = self.build(c, self.forward, &[&g, &w])?;
        Ok(vec![None, Some(dw), Some(ddy)])
    }

    /// `BackpropFilter(x, sizes, dy)`: input gradient `BackpropInput(shape(x), g,
    /// dy)`, `dy` gradient `op(x, g)`.
    fn backprop_filter_grad(&self, c: &GradContext<'_>) -> Grads {
        let s = c.scope;
        let (x, dy, g) = (c.input(0)?, c.input(2)?, c.grad(0)?);
        let x_shape = ops::shape(s, &x)?;
        let dx = self.build(c, self.backprop_input, &[&x_shape, &g, &dy])?;
        let ddy = self.build(c, self.forward, &[&x, &g])?;
        Ok(vec![Some(dx), None, Some(ddy)])
    }
}

fn conv2d_grad(c: &GradContext<'_>) -> Grads {
    CONV2D.forward_grad(c)
}
fn conv2d_backprop_input_grad(c: &GradContext<'_>) -> Grads {
    CONV2D.backprop_input_grad(c)
}
fn conv2d_backprop_filter_grad(c: &GradContext<'_>) -> Grads {
    CONV2D.backprop_filter_grad(c)
}
fn depthwise_grad(c: &GradContext<'_>) -> Grads {
    DEPTHWISE.forward_grad(c)
}
fn depthwise_backprop_input_grad(c: &GradContext<'_>) -> Grads {
    DEPTHWISE.backprop_input_grad(c)
}
fn depthwise_backprop_filter_grad(c: &GradContext<'_>) -> Grads {
    DEPTHWISE.backprop_filter_grad(c)
}

/// Registers the convolution gradients.
pub fn register_all_gradients(r: &GradientRegistry) {
    r.register("Conv2D", conv2d_grad);
    r.register("Conv2DBackpropInput", conv2d_backprop_input_grad);
    r.register("Conv2DBackpropFilter", conv2d_backprop_filter_grad);
    r.register("DepthwiseConv2dNative", depthwise_grad);
    r.register(
        "DepthwiseConv2dNativeBackpropInput",
        depthwise_backprop_input_grad,
    );
    r.register(
        "DepthwiseConv2dNativeBackpropFilter",
        depthwise_backprop_filter_grad,
    );
}
