//! Parsing kernels: `DecodeCSV` (and its keyed form, [`csv`]), `DecodeRaw` and
//! `StringToNumber`, with TensorFlow's number syntax ([`numbers`]), and the
//! `tf.Example` parsers `ParseExample`, `ParseExampleV2` and `ParseSingleExample`
//! ([`example`]).
//!
//! Every malformed input is an `InvalidArgument` naming the offending string; no
//! input can make a kernel panic.

pub mod csv;
pub mod example;
pub mod numbers;

use std::marker::PhantomData;

use bytes::Bytes;
use graph::{DType, Result, Status, Tensor, TensorShape};

use crate::op_kernel::{OpKernel, OpKernelConstruction, OpKernelContext};
use crate::registry::{KernelDef, KernelRegistry};

/// How a string shows in an error message: quoted, escaped and cut to 200 bytes.
pub(crate) fn quote_bytes(b: &[u8]) -> String {
    const MAX: usize = 200;
    let shown = &b[..b.len().min(MAX)];
    let mut s = format!("{:?}", String::from_utf8_lossy(shown));
    if b.len() > MAX {
        s.push_str(&format!("... ({} bytes)", b.len()));
    }
    s
}

struct DecodeRawKernel {
    dtype: DType,
    little_endian: bool,
}

impl OpKernel for DecodeRawKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let strings = input.as_strings()?;
        let size = self.dtype.size();
        let mut str_size: Option<usize> = None;
        for (i, s) in strings.iter().enumerate() {
            match str_size {
                None => str_size = Some(s.len()),
                Some(n) if n != s.len() => {
                    return Err(Status::invalid_argument(format!(
                        "DecodeRaw requires input strings to all be the same size, but element {i} has size {n} != {}",
                        s.len()
                    )))
                }
                Some(_) => {}
            }
        }
        let mut dims = input.dims().to_vec();
        let str_size = str_size.unwrap_or(0);
        if str_size == 0 {
            dims.push(0);
            let out = ctx.allocate(self.dtype, TensorShape::new(&dims))?;
            return ctx.set_output(0, out);
        }
        if size == 0 || !str_size.is_multiple_of(size) {
            return Err(Status::invalid_argument(format!(
                "Input to DecodeRaw has length {str_size} that is not a multiple of {size}, the size of {}",
                self.dtype
            )));
        }
        dims.push(str_size / size);
        let mut raw = Vec::with_capacity(str_size.saturating_mul(strings.len()));
        for s in strings {
            raw.extend_from_slice(s);
        }
        if !self.little_endian && size > 1 {
            raw.chunks_exact_mut(size).for_each(<[u8]>::reverse);
        }
        let out = Tensor::from_raw_bytes(self.dtype, &dims, &raw)?;
        ctx.set_output(0, out)
    }
}

/// An element type `StringToNumber` produces.
trait Parse: graph::TensorType {
    fn parse(s: &[u8]) -> Option<Self>;
}

macro_rules! parse_impl {
    ($($t:ty => $f:path),* $(,)?) => {$(
        impl Parse for $t {
            fn parse(s: &[u8]) -> Option<Self> {
                $f(s)
            }
        }
    )*};
}

parse_impl! {
    f32 => numbers::parse_f32,
    f64 => numbers::parse_f64,
    i32 => numbers::parse_i32,
    i64 => numbers::parse_i64,
    u32 => numbers::parse_u32,
    u64 => numbers::parse_u64,
}

struct StringToNumberKernel<T>(PhantomData<fn(T)>);

impl<T: Parse> OpKernel for StringToNumberKernel<T> {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0)?;
        let values = input
            .as_strings()?
            .iter()
            .map(|s: &Bytes| {
                T::parse(s).ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "StringToNumberOp could not correctly convert string: {}",
                        String::from_utf8_lossy(s)
                    ))
                })
            })
            .collect::<Result<Vec<T>>>()?;
        let out = Tensor::new(input.dims(), values)?;
        ctx.set_output(0, out)
    }
}

fn make_string_to_number(c: &OpKernelConstruction<'_>) -> Result<Box<dyn OpKernel>> {
    let t: DType = c.attr("out_type")?;
    Ok(match t {
        DType::F32 => Box::new(StringToNumberKernel::<f32>(PhantomData)),
        DType::F64 => Box::new(StringToNumberKernel::<f64>(PhantomData)),
        DType::I32 => Box::new(StringToNumberKernel::<i32>(PhantomData)),
        DType::I64 => Box::new(StringToNumberKernel::<i64>(PhantomData)),
        DType::U32 => Box::new(StringToNumberKernel::<u32>(PhantomData)),
        DType::U64 => Box::new(StringToNumberKernel::<u64>(PhantomData)),
        other => {
            return Err(Status::invalid_argument(format!(
                "StringToNumber cannot produce {other}"
            )))
        }
    })
}

/// Registers the parsing kernels.
pub fn register_all_kernels(r: &mut KernelRegistry) {
    csv::register_all_kernels(r);
    example::register_all_kernels(r);
    r.register(KernelDef::cpu("DecodeRaw", |c| {
        let dtype: DType = c.attr("out_type")?;
        if !dtype.is_pod() {
            return Err(Status::invalid_argument(format!(
                "DecodeRaw cannot produce {dtype}"
            )));
        }
        Ok(Box::new(DecodeRawKernel {
            dtype,
            little_endian: c.attr("little_endian")?,
        }))
    }));
    r.register(KernelDef::cpu("StringToNumber", make_string_to_number));
}

#[cfg(test)]
mod tests;
