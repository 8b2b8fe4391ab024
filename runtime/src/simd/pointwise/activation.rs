//! Activation functions over a slice of `f32` (the fused epilogues of the
//! contractions), written branch-free so that the compiler vectorizes them,
//! with the transcendental functions of [`super::math`]. Each loop is
//! compiled three times — for AVX-512, for AVX2+FMA (both with [`Fused`]
//! multiply-adds) and for the baseline target ([`Split`]) — and [`apply`]
//! picks one by [`cpu::avx512`](super::cpu::avx512) and
//! [`cpu::avx2_fma`](super::cpu::avx2_fma). NaN inputs stay NaN.

use super::cpu;
use super::epilogue::Activation;
use super::math::{clamp, gelu_in, sigmoid_in, tanh_in, Arith, Fused, Split};

/// Applies `act` to every element of `xs` in place.
pub fn apply(act: &Activation, xs: &mut [f32]) {
    // SAFETY: one row, the whole of `xs`, borrowed mutably.
    unsafe { apply_rows(act, Rows { first: xs.as_mut_ptr(), count: 1, len: xs.len(), stride: 0 }) }
}

/// Rows of a matrix: `count` runs of `len` elements, `stride` apart, from `first`.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    /// The first row's first element.
    pub first: *mut f32,
    /// How many rows.
    pub count: usize,
    /// Elements per row.
    pub len: usize,
    /// Elements from one row's start to the next's.
    pub stride: usize,
}

impl Rows {
    /// Row `r`.
    ///
    /// # Safety
    /// As for [`apply_rows`]; `r < self.count`.
    #[inline(always)]
    unsafe fn row<'a>(&self, r: usize) -> &'a mut [f32] {
        std::slice::from_raw_parts_mut(self.first.add(r * self.stride), self.len)
    }
}

/// Applies `act` in place to every element of `rows`, choosing the
/// instruction set once for all of them (a convolution's tile over several
/// threads is many short rows: ShuffleNet's ran 10,000 calls a run, whose
/// dispatch cost more than the activation).
///
/// # Safety
/// Every row lies in memory the caller borrows mutably, and no two overlap.
pub unsafe fn apply_rows(act: &Activation, rows: Rows) {
    add_then_apply(act, rows, None)
}

/// Adds `addend` (laid out as `rows`: row `r` at `addend + r·stride`) to
/// `rows`, then applies `act`, row by row in one pass (an epilogue's
/// residual and the activation after it).
///
/// # Safety
/// As for [`apply_rows`]; `addend`, if any, holds `rows`' layout and does not overlap it.
pub unsafe fn add_then_apply(act: &Activation, rows: Rows, addend: Option<*const f32>) {
    if matches!(act, Activation::None) && addend.is_none() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx512() {
        // SAFETY: the processor has AVX-512 F, AVX2 and FMA (checked by `avx512`).
        return apply_avx512(act, rows, addend);
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA (checked by `avx2_fma`).
        return apply_avx2(act, rows, addend);
    }
    for r in 0..rows.count {
        let xs = rows.row(r);
        add_row(xs, addend, r * rows.stride);
        apply_body::<Split>(act, xs);
    }
}

/// `xs[i] += addend[at + i]`, when there is an addend.
///
/// # Safety
/// `addend + at` holds `xs.len()` values.
#[inline(always)]
unsafe fn add_row(xs: &mut [f32], addend: Option<*const f32>, at: usize) {
    if let Some(a) = addend {
        let a = std::slice::from_raw_parts(a.add(at), xs.len());
        xs.iter_mut().zip(a).for_each(|(y, x)| *y += x);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(act: &Activation, rows: Rows, addend: Option<*const f32>) {
    use std::arch::x86_64::*;
    rows_through!(
        act,
        rows,
        addend,
        8,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_set1_ps,
        _mm256_max_ps,
        _mm256_min_ps,
        _mm256_mul_ps,
        _mm256_add_ps,
        _mm256_div_ps
    )
}

/// The same loops in 16-lane registers: the transcendental activations
/// (sigmoid, SiLU, GELU) are bound by arithmetic, twice as fast as the AVX2
/// instance here.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn apply_avx512(act: &Activation, rows: Rows, addend: Option<*const f32>) {
    use std::arch::x86_64::*;
    rows_through!(
        act,
        rows,
        addend,
        16,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_set1_ps,
        _mm512_max_ps,
        _mm512_min_ps,
        _mm512_mul_ps,
        _mm512_add_ps,
        _mm512_div_ps
    )
}

/// The piecewise-linear activations (Relu, LeakyRelu, Clip, HardSigmoid,
/// HardSwish) in vector instructions, `true` when `act` is one of them:
/// `max(c, x)` is `c > x ? c : x` and `min(c, x)` is `c < x ? c : x`, each
/// `x` where `x` is NaN, as the selects of [`apply_body`] that the last
/// `xs.len() % lanes` elements go through. Written as plain selects over
/// the slice, the compiler stored only the lanes that change, with masked
/// stores that cost more than the convolution the Relu followed
/// (ShuffleNet, two threads).
///
/// `rows_through!` is an instance's whole body: per row, the addend, then
/// the activation (the others through [`apply_body`]).
#[cfg(target_arch = "x86_64")]
macro_rules! rows_through {
    ($act:expr, $rows:expr, $addend:expr, $lanes:expr, $($intrinsic:ident),+) => {{
        let rows: Rows = $rows;
        for r in 0..rows.count {
            let xs = rows.row(r);
            add_row(xs, $addend, r * rows.stride);
            if !piecewise!($act, xs, $lanes, $($intrinsic),+) {
                apply_body::<Fused>($act, xs);
            }
        }
    }};
}
#[cfg(target_arch = "x86_64")]
use rows_through;

#[cfg(target_arch = "x86_64")]
macro_rules! piecewise {
    ($act:expr, $xs:expr, $lanes:expr, $load:ident, $store:ident, $splat:ident,
     $max:ident, $min:ident, $mul:ident, $add:ident, $div:ident) => {{
        let xs: &mut [f32] = $xs;
        let (zero, one) = ($splat(0.0), $splat(1.0));
        let body = xs.len() / $lanes * $lanes;
        let (head, tail) = xs.split_at_mut(body);
        let p = head.as_mut_ptr();
        let known = match *$act {
            Activation::Relu => {
                for i in (0..body).step_by($lanes) {
                    $store(p.add(i), $max(zero, $load(p.add(i))));
                }
                true
            }
            Activation::LeakyRelu(a) => {
                // max(0, x) + a·min(0, x): x, or a·x below 0 (0 + y is y exactly)
                let a = $splat(a);
                for i in (0..body).step_by($lanes) {
                    let x = $load(p.add(i));
                    $store(p.add(i), $add($max(zero, x), $mul(a, $min(zero, x))));
                }
                true
            }
            Activation::Clip { min, max } => {
                let (lo, hi) = ($splat(min), $splat(max));
                for i in (0..body).step_by($lanes) {
                    $store(p.add(i), $min(hi, $max(lo, $load(p.add(i)))));
                }
                true
            }
            Activation::HardSigmoid { alpha, beta } => {
                let (a, b) = ($splat(alpha), $splat(beta));
                for i in (0..body).step_by($lanes) {
                    let y = $add($mul(a, $load(p.add(i))), b);
                    $store(p.add(i), $min(one, $max(zero, y)));
                }
                true
            }
            Activation::HardSwish => {
                let (six, half) = ($splat(6.0), $splat(0.5));
                for i in (0..body).step_by($lanes) {
                    let x = $load(p.add(i));
                    let s = $min(one, $max(zero, $add($div(x, six), half)));
                    $store(p.add(i), $mul(x, s));
                }
                true
            }
            _ => false,
        };
        if known {
            apply_body::<Fused>($act, tail);
        }
        known
    }};
}
#[cfg(target_arch = "x86_64")]
use piecewise;

/// One loop per activation, so that each is a straight map the compiler vectorizes.
#[inline(always)]
fn apply_body<A: Arith>(act: &Activation, xs: &mut [f32]) {
    match *act {
        Activation::None => {}
        Activation::Relu => map(xs, |x| if x < 0.0 { 0.0 } else { x }),
        Activation::LeakyRelu(a) => map(xs, |x| if x < 0.0 { x * a } else { x }),
        Activation::Clip { min, max } => map(xs, |x| clamp(x, min, max)),
        Activation::Sigmoid => map(xs, sigmoid_in::<A>),
        Activation::Tanh => map(xs, tanh_in::<A>),
        Activation::HardSigmoid { alpha, beta } => map(xs, |x| clamp(alpha * x + beta, 0.0, 1.0)),
        Activation::Gelu => map(xs, gelu_in::<A>),
        Activation::GeluTanh => {
            map(xs, |v| 0.5 * v * (1.0 + tanh_in::<A>(SQRT_2_OVER_PI * (v + 0.044_715 * v * v * v))))
        }
        Activation::Silu => map(xs, |x| x * sigmoid_in::<A>(x)),
        Activation::HardSwish => map(xs, |x| x * clamp(x / 6.0 + 0.5, 0.0, 1.0)),
    }
}

/// `x = f(x)` over `xs`, sixteen at a time through a local array: every
/// element is stored. Mapped in place one by one, a select that keeps `x`
/// on one side (Relu, LeakyRelu, the clamps) compiled to masked stores
/// (`vmaskmovps`, or `vmovups` under a mask register), which cost more
/// than the convolution they followed in ShuffleNet's two-thread run.
#[inline(always)]
fn map(xs: &mut [f32], f: impl Fn(f32) -> f32 + Copy) {
    let mut chunks = xs.chunks_exact_mut(16);
    for chunk in &mut chunks {
        let mut v = [0f32; 16];
        v.copy_from_slice(chunk);
        for x in &mut v {
            *x = f(*x);
        }
        chunk.copy_from_slice(&v);
    }
    for x in chunks.into_remainder() {
        *x = f(*x);
    }
}

/// √(2/π), the tanh form of GELU's scale.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
