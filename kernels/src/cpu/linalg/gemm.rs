//! Matrix products through the `gemm` crate, for `f32` and `f64`: [`MatRef`] (a
//! strided matrix view whose every element is checked to lie inside its slice),
//! [`gemm_into`] (the only `unsafe` call of the linalg kernels) and
//! [`batched_gemm`] (one call per output matrix, on rayon when large).

use gemm::Parallelism;
use graph::{Result, Status, TensorType};
use rayon::prelude::*;

use super::plan::Plan;

/// Products of at least this many flops use several threads.
pub const PAR_FLOPS: usize = 1 << 22;

/// A `rows × cols` matrix inside `data`: element `(i, j)` is
/// `data[i * rs + j * cs]`. [`MatRef::new`] checks that every element is in bounds.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a, T: Copy> MatRef<'a, T> {
    /// A view, or `Internal` when some element would lie outside `data` or a stride
    /// does not fit `isize`.
    pub fn new(data: &'a [T], rows: usize, cols: usize, rs: usize, cs: usize) -> Result<Self> {
        let fits = rs <= isize::MAX as usize && cs <= isize::MAX as usize;
        let in_bounds = rows == 0
            || cols == 0
            || (rows - 1)
                .checked_mul(rs)
                .zip((cols - 1).checked_mul(cs))
                .and_then(|(a, b)| a.checked_add(b))
                .is_some_and(|last| last < data.len());
        if !fits || !in_bounds {
            return Err(Status::internal(format!(
                "matrix view {rows}x{cols} with strides ({rs}, {cs}) exceeds its {} elements",
                data.len()
            )));
        }
        Ok(MatRef {
            data,
            rows,
            cols,
            rs,
            cs,
        })
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Element `(i, j)`; `i < rows` and `j < cols`.
    #[inline(always)]
    pub fn at(&self, i: usize, j: usize) -> T {
        self.data[i * self.rs + j * self.cs]
    }

    /// Row `i` as a slice, when rows are contiguous (`cs == 1`).
    #[inline(always)]
    pub fn row(&self, i: usize) -> Option<&'a [T]> {
        if self.cs != 1 {
            return None;
        }
        self.data.get(i * self.rs..i * self.rs + self.cols)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// The element types `gemm` multiplies here (sealed: `f32` and `f64`; `gemm::gemm`
/// panics for types it does not know).
pub trait GemmScalar: TensorType + sealed::Sealed {
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
}

impl GemmScalar for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}

impl GemmScalar for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

/// `c = a · b`, `c` row-major `a.rows × b.cols`, on `threads` rayon threads (1: on
/// this thread). `InvalidArgument`/`Internal` on inconsistent sizes, never UB.
///
/// `gemm` computes a row-major destination as the transposed product
/// `cᵀ = bᵀ · aᵀ`, packing `bᵀ` as its left operand. When `b` is large and `a`
/// has few rows (at least 8 times fewer than `b` has columns: a dense layer on
/// a small batch) that packing costs more than the product, worst when `b` is
/// column-major (`MatMul`'s `transpose_b`, the layer's input gradient:
/// 64 × 1024 · (3136 × 1024)ᵀ took 4.1 ms against 1.2 ms, and 64 × 3136 · 3136 ×
/// 1024 1.55 ms against 1.27, on 2 AVX-512 threads;
/// `examples/gemm_shapes_timing.rs`). There, when the contraction is long
/// enough (`k >= 256`) for the product to pay for transposing its output, the
/// product goes into a column-major buffer (no transposition inside `gemm`),
/// then is transposed into `c`.
pub fn gemm_into<T: GemmScalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    threads: usize,
) -> Result<()> {
    if done_without_product(&a, &b, c)? {
        return Ok(());
    }
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m.saturating_mul(8) <= n && k >= 256 && k.saturating_mul(n) >= 1 << 17 {
        let mut col = vec![T::ZERO; c.len()];
        gemm_into_column_major(a, b, &mut col, threads)?;
        // `col` read as row-major n × m is cᵀ.
        transpose_into(&col, n, m, c);
        return Ok(());
    }
    product(a, b, c, (n, 1), threads);
    Ok(())
}

/// `c = a · b` with `c` column-major (`c[i + j * a.rows]`); as [`gemm_into`]
/// otherwise.
pub fn gemm_into_column_major<T: GemmScalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    threads: usize,
) -> Result<()> {
    if done_without_product(&a, &b, c)? {
        return Ok(());
    }
    let m = a.rows;
    product(a, b, c, (1, m), threads);
    Ok(())
}

/// Checks the sizes of `c = a · b` (`Internal` when inconsistent) and handles
/// the products with nothing to multiply: an empty `c`, or `k = 0` (zeros).
/// `Ok(true)` when `c` is done.
fn done_without_product<T: GemmScalar>(
    a: &MatRef<'_, T>,
    b: &MatRef<'_, T>,
    c: &mut [T],
) -> Result<bool> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k || m.checked_mul(n) != Some(c.len()) {
        return Err(Status::internal(format!(
            "gemm of {m}x{k} by {}x{n} into {} elements",
            b.rows,
            c.len()
        )));
    }
    if m == 0 || n == 0 {
        return Ok(true);
    }
    if k == 0 {
        c.fill(T::ZERO);
        return Ok(true);
    }
    Ok(false)
}

/// `dst` (`cols × rows`, row-major) = `src` (`rows × cols`, row-major)
/// transposed, in blocks of source rows small enough for the L1 cache, so that
/// the writes run along `dst`'s rows and the strided reads hit the cache.
fn transpose_into<T: Copy>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    let block = (4096 / cols.max(1)).clamp(8, 256);
    for i0 in (0..rows).step_by(block) {
        let i1 = (i0 + block).min(rows);
        let src = &src[i0 * cols..i1 * cols];
        for (j, out) in dst.chunks_exact_mut(rows).enumerate() {
            for (o, row) in out[i0..i1].iter_mut().zip(src.chunks_exact(cols)) {
                *o = row[j];
            }
        }
    }
}

/// `c = a · b` through `gemm::gemm`, `c` (`a.rows × b.cols` elements, checked
/// by the callers, as `k > 0` and non-empty `c`) with strides `(rs, cs)`: `(n, 1)`
/// or `(1, m)`.
fn product<T: GemmScalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    c: &mut [T],
    (rs, cs): (usize, usize),
    threads: usize,
) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert!(c.len() == m * n && ((rs, cs) == (n, 1) || (rs, cs) == (1, m)));
    let parallelism = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    // SAFETY:
    // 1. `T` is `f32` or `f64` (sealed `GemmScalar`), types `gemm::gemm` supports.
    // 2. `lhs` reads `a.data[i * a.rs + p * a.cs]` for `i < m`, `p < k`: in bounds, as
    //    `MatRef::new` checked the last such offset against `a.data.len()` with
    //    overflow-checked arithmetic; likewise `rhs` reads `b.data[p * b.rs + j * b.cs]`
    //    for `p < k`, `j < n`.
    // 3. `dst` writes `c[i * rs + j * cs]` for `i < m`, `j < n`, with `(rs, cs)`
    //    `(n, 1)` or `(1, m)`: at most `(m - 1) * n + n - 1` or `m - 1 + (n - 1) * m`,
    //    both `m * n - 1`, in bounds as the callers checked `c.len() == m * n`.
    // 4. Every stride fits `isize` (`MatRef::new` checked `rs`/`cs`; `m, n <=
    //    c.len()`, and a slice never holds more than `isize::MAX` elements), so the
    //    pointer offsets `gemm` forms cannot overflow.
    // 5. `c` is borrowed mutably for the whole call and `a`, `b` immutably, so the
    //    destination aliases neither source and no other thread touches any of them;
    //    `gemm`'s own threads (Rayon) write disjoint blocks of `c` and return before
    //    the call does.
    // 6. `read_dst` is false: `c` is only written (`dst = beta * lhs * rhs`, beta = 1).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            cs as isize,
            rs as isize,
            false,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            T::ZERO,
            T::ONE,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Every product of `plan` into `out` (zeros, `plan.out_shape()` elements): one gemm
/// per output matrix; a large product uses every rayon thread, many small ones run
/// as parallel single-threaded products.
pub fn batched_gemm<T: GemmScalar>(plan: &Plan, x: &[T], y: &[T], out: &mut [T]) -> Result<()> {
    let mn = plan.m() * plan.n();
    if mn == 0 {
        return Ok(());
    }
    let flops = plan.flops_per_product();
    let threads = rayon::current_num_threads();
    if flops >= PAR_FLOPS || plan.batch() == 1 {
        let t = if flops >= PAR_FLOPS { threads } else { 1 };
        for (i, c) in out.chunks_mut(mn).enumerate() {
            let (a, b) = plan.operands(i, x, y)?;
            gemm_into(a, b, c, t)?;
        }
        return Ok(());
    }
    let total = flops.saturating_mul(plan.batch());
    if total >= PAR_FLOPS && threads > 1 {
        let min_len = (PAR_FLOPS / 4 / flops.max(1)).max(1);
        return out
            .par_chunks_mut(mn)
            .enumerate()
            .with_min_len(min_len)
            .try_for_each(|(i, c)| {
                let (a, b) = plan.operands(i, x, y)?;
                gemm_into(a, b, c, 1)
            });
    }
    for (i, c) in out.chunks_mut(mn).enumerate() {
        let (a, b) = plan.operands(i, x, y)?;
        gemm_into(a, b, c, 1)?;
    }
    Ok(())
}
