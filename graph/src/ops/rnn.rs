//! Recurrent networks as TensorFlow 1.x's Python builds them (`rnn.py`,
//! `rnn_cell_impl.py`): [`dynamic_rnn`] runs a cell over the time dimension in a
//! `while_loop`, reading each step's input from a [`TensorArray`] and writing
//! each step's output into another, and [`bidirectional_dynamic_rnn`] runs a
//! second cell over the sequences reversed. The cells are [`LstmCell`] and
//! [`GruCell`] with TensorFlow's weight layouts (`LSTMCell`'s `[i, j, f, o]` gates
//! over `concat([input, h])`, `GRUCell`'s gates and candidate), so TensorFlow's
//! trained weights give TensorFlow's answers. Gradients are those of the loop and
//! the arrays.

use crate::builder::{while_loop, Output, Scope, WhileOptions};
use crate::ops::{self, TensorArray, TensorArrayOptions, Variable};
use crate::{DType, Result, Shape, Status};

/// A recurrent cell: one time step of a recurrent network.
pub trait RnnCell {
    /// The width of each state tensor (`[batch, width]` each).
    fn state_size(&self) -> Vec<usize>;
    /// The width of the output (`[batch, width]`).
    fn output_size(&self) -> usize;
    /// One step: the output and the new state from the input and the state.
    fn call(&self, s: &Scope, input: &Output, state: &[Output]) -> Result<(Output, Vec<Output>)>;
    /// The all-zeros initial state for `batch_size` (an `int32` scalar).
    fn zero_state(&self, s: &Scope, batch_size: &Output, dtype: DType) -> Result<Vec<Output>> {
        let s = s.with_name_scope("zero_state");
        self.state_size()
            .into_iter()
            .map(|w| zeros(&s, batch_size, w, dtype))
            .collect()
    }
}

/// `zeros([batch, width])`.
fn zeros(s: &Scope, batch: &Output, width: usize, dtype: DType) -> Result<Output> {
    let dims = ops::pack(s, &[batch.clone(), ops::scalar(s, width as i32)?], 0)?;
    let zero = ops::cast(s, &ops::scalar(s, 0f32)?, dtype)?;
    ops::fill(s, &dims, &zero)
}

/// A `VariableV2` of `shape` initialised uniformly in `±sqrt(6 / (fan_in +
/// fan_out))` (Glorot uniform, TensorFlow's default for these weights).
fn glorot(s: &Scope, name: &str, shape: [usize; 2], dtype: DType, seed: i64) -> Result<Variable> {
    let limit = (6.0 / (shape[0] + shape[1]) as f64).sqrt();
    let is = s.with_name_scope(&format!("{name}/Initializer"));
    let dims = ops::constant(
        &is,
        crate::Tensor::vector(&[shape[0] as i32, shape[1] as i32]),
    )?;
    let (seed, seed2) = ops::get_seed(Some(seed));
    let u = ops::random_uniform(&is, &dims, dtype, seed, seed2)?;
    let scale = ops::cast(&is, &ops::scalar(&is, 2.0 * limit)?, dtype)?;
    let shift = ops::cast(&is, &ops::scalar(&is, limit)?, dtype)?;
    let init = ops::sub(&is, &ops::mul(&is, &u, &scale)?, &shift)?;
    Variable::new(s, name, &init, true)
}

/// A vector variable of `width` elements, all `value`.
fn constant_vector(
    s: &Scope,
    name: &str,
    width: usize,
    value: f32,
    dtype: DType,
) -> Result<Variable> {
    let is = s.with_name_scope(&format!("{name}/Initializer"));
    let v = ops::cast(
        &is,
        &ops::constant(&is, crate::Tensor::vector(&vec![value; width]))?,
        dtype,
    )?;
    Variable::new(s, name, &v, true)
}

/// `tf.compat.v1.nn.rnn_cell.LSTMCell` (no peepholes, no projection): state
/// `[c, h]`, output `h`.
#[derive(Clone, Debug)]
pub struct LstmCell {
    /// Units (the width of `c` and `h`).
    pub num_units: usize,
    /// Added to the forget gate's pre-activation (TensorFlow's default: 1).
    pub forget_bias: f32,
    /// `[input_depth + num_units, 4 * num_units]`.
    pub kernel: Output,
    /// `[4 * num_units]`.
    pub bias: Output,
}

impl LstmCell {
    /// A cell over given weights (TensorFlow's `lstm_cell/kernel` and `bias`).
    pub fn with_weights(kernel: &Output, bias: &Output, num_units: usize) -> Result<LstmCell> {
        check_weight(kernel, None, 4 * num_units, "kernel")?;
        check_weight(bias, None, 4 * num_units, "bias")?;
        Ok(LstmCell {
            num_units,
            forget_bias: 1.0,
            kernel: kernel.clone(),
            bias: bias.clone(),
        })
    }

    /// A cell with new trainable variables `lstm_cell/kernel` (Glorot uniform,
    /// seeded) and `lstm_cell/bias` (zeros).
    pub fn new(
        s: &Scope,
        input_depth: usize,
        num_units: usize,
        dtype: DType,
        seed: i64,
    ) -> Result<LstmCell> {
        let vs = s.with_name_scope("lstm_cell");
        let kernel = glorot(
            &vs,
            "kernel",
            [input_depth + num_units, 4 * num_units],
            dtype,
            seed,
        )?;
        let bias = constant_vector(&vs, "bias", 4 * num_units, 0.0, dtype)?;
        LstmCell::with_weights(&kernel.value, &bias.value, num_units)
    }
}

impl RnnCell for LstmCell {
    fn state_size(&self) -> Vec<usize> {
        vec![self.num_units, self.num_units]
    }

    fn output_size(&self) -> usize {
        self.num_units
    }

    fn call(&self, s: &Scope, input: &Output, state: &[Output]) -> Result<(Output, Vec<Output>)> {
        let [c, h] = state else {
            return Err(Status::invalid_argument(format!(
                "an LSTM cell's state is [c, h], got {} tensors",
                state.len()
            )));
        };
        let s = s.with_name_scope("lstm_cell");
        let one = ops::scalar(&s, 1i32)?;
        let x = ops::concat(&s, &[input.clone(), h.clone()], &one)?;
        let m = ops::mat_mul(&s, &x, &self.kernel, false, false)?;
        let m = ops::bias_add(&s, &m, &self.bias, "NHWC")?;
        let gates = ops::split(&s, &one, &m, 4)?;
        let (i, j, f, o) = (&gates[0], &gates[1], &gates[2], &gates[3]);
        let fb = ops::cast(&s, &ops::scalar(&s, self.forget_bias)?, m.dtype())?;
        let keep = ops::mul(&s, c, &ops::sigmoid(&s, &ops::add(&s, f, &fb)?)?)?;
        let write = ops::mul(&s, &ops::sigmoid(&s, i)?, &ops::tanh(&s, j)?)?;
        let c = ops::add(&s, &keep, &write)?;
        let h = ops::mul(&s, &ops::tanh(&s, &c)?, &ops::sigmoid(&s, o)?)?;
        Ok((h.clone(), vec![c, h]))
    }
}

/// `tf.compat.v1.nn.rnn_cell.GRUCell`: state and output `h`.
#[derive(Clone, Debug)]
pub struct GruCell {
    /// Units (the width of `h`).
    pub num_units: usize,
    /// `gates/kernel`: `[input_depth + num_units, 2 * num_units]` (reset, update).
    pub gate_kernel: Output,
    /// `gates/bias`: `[2 * num_units]`.
    pub gate_bias: Output,
    /// `candidate/kernel`: `[input_depth + num_units, num_units]`.
    pub candidate_kernel: Output,
    /// `candidate/bias`: `[num_units]`.
    pub candidate_bias: Output,
}

impl GruCell {
    /// A cell over given weights (TensorFlow's `gru_cell/gates/kernel`, …).
    pub fn with_weights(
        gate_kernel: &Output,
        gate_bias: &Output,
        candidate_kernel: &Output,
        candidate_bias: &Output,
        num_units: usize,
    ) -> Result<GruCell> {
        check_weight(gate_kernel, None, 2 * num_units, "gates/kernel")?;
        check_weight(gate_bias, None, 2 * num_units, "gates/bias")?;
        check_weight(candidate_kernel, None, num_units, "candidate/kernel")?;
        check_weight(candidate_bias, None, num_units, "candidate/bias")?;
        Ok(GruCell {
            num_units,
            gate_kernel: gate_kernel.clone(),
            gate_bias: gate_bias.clone(),
            candidate_kernel: candidate_kernel.clone(),
            candidate_bias: candidate_bias.clone(),
        })
    }

    /// A cell with new trainable variables under `gru_cell/`: Glorot-uniform
    /// kernels (seeded), gate biases of ones and candidate biases of zeros, as
    /// TensorFlow's defaults.
    pub fn new(
        s: &Scope,
        input_depth: usize,
        num_units: usize,
        dtype: DType,
        seed: i64,
    ) -> Result<GruCell> {
        let vs = s.with_name_scope("gru_cell");
        let fan_in = input_depth + num_units;
        let gs = vs.with_name_scope("gates");
        let gk = glorot(&gs, "kernel", [fan_in, 2 * num_units], dtype, seed)?;
        let gb = constant_vector(&gs, "bias", 2 * num_units, 1.0, dtype)?;
        let cs = vs.with_name_scope("candidate");
        let ck = glorot(
            &cs,
            "kernel",
            [fan_in, num_units],
            dtype,
            seed.wrapping_add(1),
        )?;
        let cb = constant_vector(&cs, "bias", num_units, 0.0, dtype)?;
        GruCell::with_weights(&gk.value, &gb.value, &ck.value, &cb.value, num_units)
    }
}

impl RnnCell for GruCell {
    fn state_size(&self) -> Vec<usize> {
        vec![self.num_units]
    }

    fn output_size(&self) -> usize {
        self.num_units
    }

    fn call(&self, s: &Scope, input: &Output, state: &[Output]) -> Result<(Output, Vec<Output>)> {
        let [h] = state else {
            return Err(Status::invalid_argument(format!(
                "a GRU cell's state is [h], got {} tensors",
                state.len()
            )));
        };
        let s = s.with_name_scope("gru_cell");
        let one = ops::scalar(&s, 1i32)?;
        let x = ops::concat(&s, &[input.clone(), h.clone()], &one)?;
        let g = ops::mat_mul(&s, &x, &self.gate_kernel, false, false)?;
        let g = ops::sigmoid(&s, &ops::bias_add(&s, &g, &self.gate_bias, "NHWC")?)?;
        let ru = ops::split(&s, &one, &g, 2)?;
        let (r, u) = (&ru[0], &ru[1]);
        let rh = ops::mul(&s, r, h)?;
        let xc = ops::concat(&s, &[input.clone(), rh], &one)?;
        let c = ops::mat_mul(&s, &xc, &self.candidate_kernel, false, false)?;
        let c = ops::tanh(&s, &ops::bias_add(&s, &c, &self.candidate_bias, "NHWC")?)?;
        let one_f = ops::cast(&s, &ops::scalar(&s, 1f32)?, g.dtype())?;
        let keep = ops::mul(&s, u, h)?;
        let fresh = ops::mul(&s, &ops::sub(&s, &one_f, u)?, &c)?;
        let h = ops::add(&s, &keep, &fresh)?;
        Ok((h.clone(), vec![h]))
    }
}

fn check_weight(w: &Output, rows: Option<usize>, cols: usize, what: &str) -> Result<()> {
    let ok = match w.shape().dims() {
        None => true,
        Some([c]) => c.is_none_or(|c| c == cols),
        Some([r, c]) => {
            c.is_none_or(|c| c == cols) && rows.is_none_or(|rows| r.is_none_or(|r| r == rows))
        }
        Some(_) => false,
    };
    if !ok {
        return Err(Status::invalid_argument(format!(
            "{what} {} has shape {}, expected last dimension {cols}",
            w.name(),
            w.shape()
        )));
    }
    Ok(())
}

/// Options of [`dynamic_rnn`] (Python's arguments).
#[derive(Clone, Debug)]
pub struct RnnOptions {
    /// Per batch entry, the number of valid steps (`int32`/`int64` vector): past
    /// it the output is zero and the state is carried through unchanged.
    pub sequence_length: Option<Output>,
    /// The initial state (default: the cell's zero state).
    pub initial_state: Option<Vec<Output>>,
    /// Steps that may run at once (TensorFlow's default here: 32).
    pub parallel_iterations: i64,
    /// Inputs and outputs are `[time, batch, depth]` rather than `[batch, time,
    /// depth]`.
    pub time_major: bool,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions {
            sequence_length: None,
            initial_state: None,
            parallel_iterations: 32,
            time_major: false,
        }
    }
}

/// Swaps the first two dimensions of a rank-`rank` tensor.
fn swap_batch_time(s: &Scope, x: &Output, rank: usize) -> Result<Output> {
    let mut perm: Vec<i64> = vec![1, 0];
    perm.extend(2..rank as i64);
    ops::transpose_perm(s, x, &perm)
}

/// `tf.compat.v1.nn.dynamic_rnn`: `cell` over the time dimension of `inputs`
/// (`[batch, time, depth]`, or `[time, batch, depth]` when `time_major`). Returns
/// the outputs (same layout as the inputs, width `cell.output_size()`) and the
/// final state (of each entry's last valid step when `sequence_length` is given).
pub fn dynamic_rnn(
    s: &Scope,
    cell: &dyn RnnCell,
    inputs: &Output,
    dtype: DType,
    options: &RnnOptions,
) -> Result<(Output, Vec<Output>)> {
    let s = s.with_name_scope("rnn");
    let rank = inputs.shape().rank().ok_or_else(|| {
        Status::invalid_argument(format!(
            "dynamic_rnn needs inputs of known rank (at least 3), {} has none",
            inputs.name()
        ))
    })?;
    if rank < 3 {
        return Err(Status::invalid_argument(format!(
            "dynamic_rnn needs inputs of rank 3 or more, {} is {}",
            inputs.name(),
            inputs.shape()
        )));
    }
    let x = if options.time_major {
        inputs.clone()
    } else {
        swap_batch_time(&s, inputs, rank)?
    };
    let seq = match &options.sequence_length {
        Some(l) => {
            let l = if l.dtype() == DType::I32 {
                l.clone()
            } else {
                ops::cast(&s, l, DType::I32)?
            };
            Some(
                s.op("Identity")
                    .name("sequence_length")
                    .input(&l)
                    .build1()?,
            )
        }
        None => None,
    };
    let batch = ops::dim_size(&s, &x, 1)?;
    let state = match &options.initial_state {
        Some(st) => st.clone(),
        None => cell.zero_state(&s, &batch, dtype)?,
    };
    if state.len() != cell.state_size().len() {
        return Err(Status::invalid_argument(format!(
            "the initial state has {} tensors, the cell's state {}",
            state.len(),
            cell.state_size().len()
        )));
    }
    let ds = s.with_name_scope("dynamic_rnn");
    let time_steps = ops::dim_size(&ds, &x, 0)?;
    let (const_time, const_batch) = (x.shape().dim(0), x.shape().dim(1));
    let width = cell.output_size();
    let zero_output = zeros(&ds, &batch, width, dtype)?;
    let input_shape = match x.shape().dims() {
        Some(d) => Shape::from_dims(&d[1..]),
        None => Shape::unknown(),
    };
    let input_ta = TensorArray::new(
        &ds,
        x.dtype(),
        &time_steps,
        &TensorArrayOptions {
            element_shape: input_shape.clone(),
            ..Default::default()
        },
    )?
    .unstack(&ds, &x)?;
    let output_ta = TensorArray::new(
        &ds,
        dtype,
        &time_steps,
        &TensorArrayOptions {
            element_shape: Shape::from_dims(&[const_batch, Some(width)]),
            ..Default::default()
        },
    )?;
    let loop_bound = match &seq {
        Some(l) => {
            let max = ops::reduce_max_axes(&ds, l, &[0], false)?;
            let at_least_one = ops::maximum(&ds, &ops::scalar(&ds, 1i32)?, &max)?;
            ops::minimum(&ds, &time_steps, &at_least_one)?
        }
        None => time_steps.clone(),
    };
    let k = state.len();
    let mut vars = vec![ds
        .op("Const")
        .name("time")
        .attr("dtype", DType::I32)
        .attr("value", crate::Tensor::scalar(0i32))
        .build1()?];
    vars.push(output_ta.flow().clone());
    vars.extend(state.iter().cloned());
    let outs = while_loop(
        &ds,
        |b, v| ops::less(b, &v[0], &loop_bound),
        |b, v| {
            let time = &v[0];
            let input_t = input_ta.read(b, time)?;
            let state_t = &v[2..];
            let (mut output, mut new_state) = cell.call(b, &input_t, state_t)?;
            if new_state.len() != k {
                return Err(Status::invalid_argument(format!(
                    "the cell returned {} state tensors, expected {k}",
                    new_state.len()
                )));
            }
            if let Some(l) = &seq {
                // Past an entry's length: zero output, state carried through.
                let done = ops::greater_equal(b, time, l)?;
                output = ops::select(b, &done, &zero_output, &output)?;
                new_state = state_t
                    .iter()
                    .zip(&new_state)
                    .map(|(old, new)| ops::select(b, &done, old, new))
                    .collect::<Result<_>>()?;
            }
            let flow = output_ta.with_flow(&v[1]).write(b, time, &output)?;
            let mut next = vec![ops::add(b, time, &ops::scalar(b, 1i32)?)?];
            next.push(flow.flow().clone());
            next.extend(new_state);
            Ok(next)
        },
        &vars,
        &WhileOptions {
            parallel_iterations: options.parallel_iterations,
            shape_invariants: None,
        },
    )?;
    let stacked = output_ta.with_flow(&outs[1]).stack(&ds)?;
    let stacked = ds
        .set_output_shape(
            stacked.op(),
            0,
            Shape::from_dims(&[const_time, const_batch, Some(width)]),
        )
        .output(0)?;
    let outputs = if options.time_major {
        stacked
    } else {
        swap_batch_time(&s, &stacked, 3)?
    };
    Ok((outputs, outs[2..].to_vec()))
}

/// `tf.compat.v1.nn.bidirectional_dynamic_rnn`: `fw` over the sequences and `bw`
/// over them reversed (each entry's first `sequence_length` steps, or all of
/// them), its outputs reversed back. Returns `((fw outputs, bw outputs), (fw final
/// state, bw final state))`.
#[allow(clippy::type_complexity)]
pub fn bidirectional_dynamic_rnn(
    s: &Scope,
    fw: &dyn RnnCell,
    bw: &dyn RnnCell,
    inputs: &Output,
    dtype: DType,
    options: &RnnOptions,
) -> Result<((Output, Output), (Vec<Output>, Vec<Output>))> {
    let s = s.with_name_scope("bidirectional_rnn");
    let (out_fw, state_fw) = dynamic_rnn(&s.with_name_scope("fw"), fw, inputs, dtype, options)?;
    let (time_axis, batch_axis) = if options.time_major { (0, 1) } else { (1, 0) };
    let reverse = |sc: &Scope, x: &Output| -> Result<Output> {
        match &options.sequence_length {
            Some(l) => ops::reverse_sequence(sc, x, l, time_axis, batch_axis),
            None => ops::reverse_axes(sc, x, &[time_axis]),
        }
    };
    let bs = s.with_name_scope("bw");
    let reversed = reverse(&bs, inputs)?;
    let (tmp, state_bw) = dynamic_rnn(&bs, bw, &reversed, dtype, options)?;
    let out_bw = reverse(&s, &tmp)?;
    Ok(((out_fw, out_bw), (state_fw, state_bw)))
}
