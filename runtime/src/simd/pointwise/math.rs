//! Branch-free f32 versions of the transcendental functions the hot
//! activations need (exp, tanh, sigmoid, erf), written as straight-line code so
//! that a loop over a tile compiles to vector instructions; within 2 ulp of
//! the correctly rounded result over the ranges that matter, with
//! overflow, underflow and NaN handled by the arithmetic itself (clamps
//! written in the operand order that is one `max`/`min` instruction and lets
//! NaN through, scales that overflow to infinity and round to subnormals).
//! The rarer functions go through `f64` per element (`map_f64` in the tile
//! evaluator), like the reference kernels.
//!
//! Each function is generic over [`Arith`], the way `a·b + c` is computed:
//! [`Fused`] (one rounding, `mul_add`) in code compiled for FMA, where it is
//! one instruction, and [`Split`] (two roundings) in the portable code, where
//! `mul_add` would be a library call per element.

// The polynomial coefficients are written as published (Cephes), some with
// more digits than an f32 holds.
#![allow(clippy::excessive_precision)]

/// How `a·b + c` is computed.
pub trait Arith: Copy {
    /// `a·b + c`.
    fn mul_add(a: f32, b: f32, c: f32) -> f32;
}

/// `a·b + c` rounded once: for code compiled with FMA.
#[derive(Clone, Copy, Debug)]
pub struct Fused;

/// `a·b + c` rounded twice: for the portable code.
#[derive(Clone, Copy, Debug)]
pub struct Split;

impl Arith for Fused {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
}

impl Arith for Split {
    #[inline(always)]
    fn mul_add(a: f32, b: f32, c: f32) -> f32 {
        a * b + c
    }
}

/// `x` limited to `[lo, hi]`, NaN passing through: each comparison is one
/// `max`/`min` instruction with the operands in this order.
#[inline(always)]
pub fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if x > hi {
        hi
    } else {
        x
    }
}

/// `e^x`. The argument is reduced to `n·ln2 + r`, |r| <= ln2/2, with `n`
/// rounded through the bits (the 1.5·2^23 trick, which vectorizes on every
/// x86 level); `e^r` is `1 + r + r²·P(r)` with Cephes' degree-5 `P`; `2^n`
/// is applied in two normal halves, so that n from -150 to 128 rounds to a
/// subnormal or overflows to infinity exactly where `e^x` does. The clamp
/// to [-104, 89] keeps `n` in that range and lets NaN through.
#[inline(always)]
pub fn exp_in<A: Arith>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0;
    let xc = clamp(x, -104.0, 89.0);
    let v = A::mul_add(xc, LOG2E, MAGIC);
    let n = v - MAGIC;
    let ni = (v.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = A::mul_add(n, -LN2_HI, xc);
    let r = A::mul_add(n, -LN2_LO, r);
    let mut p = 1.987_569_1e-4;
    p = A::mul_add(p, r, 1.398_199_9e-3);
    p = A::mul_add(p, r, 8.333_452e-3);
    p = A::mul_add(p, r, 4.166_579_6e-2);
    p = A::mul_add(p, r, 1.666_666_5e-1);
    p = A::mul_add(p, r, 5.000_000_1e-1);
    let e = A::mul_add(p, r * r, r) + 1.0;
    let h = ni >> 1;
    let s1 = f32::from_bits((h.wrapping_add(127) as u32) << 23);
    let s2 = f32::from_bits((ni.wrapping_sub(h).wrapping_add(127) as u32) << 23);
    e * s1 * s2
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid_in<A: Arith>(x: f32) -> f32 {
    1.0 / (1.0 + exp_in::<A>(-x))
}

/// `tanh x`: Cephes' odd polynomial for |x| < 0.625, `1 - 2/(e^2|x| + 1)`
/// with the sign of `x` elsewhere.
#[inline(always)]
pub fn tanh_in<A: Arith>(x: f32) -> f32 {
    let z = x * x;
    let mut p = -5.704_988_7e-3;
    p = A::mul_add(p, z, 2.063_908_9e-2);
    p = A::mul_add(p, z, -5.373_971_6e-2);
    p = A::mul_add(p, z, 1.333_144_2e-1);
    p = A::mul_add(p, z, -3.333_328_2e-1);
    let small = A::mul_add(x * z, p, x);
    let a = x.abs();
    let big = 1.0 - 2.0 / (exp_in::<A>(2.0 * a) + 1.0);
    let big = f32::from_bits(big.to_bits() | (x.to_bits() & 0x8000_0000));
    if a < 0.625 {
        small
    } else {
        big
    }
}

/// GELU with the tanh approximation, as `x * sigmoid(2z)` (which equals
/// `x/2 * (1 + tanh z)` without its cancellation for negative `x`).
#[inline(always)]
pub fn gelu_tanh_in<A: Arith>(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2/pi)
    let z = C * A::mul_add(0.044_715 * x, x * x, x);
    x * sigmoid_in::<A>(2.0 * z)
}

/// GELU with erf, `x/2 · (1 + erf(x/√2))`.
#[inline(always)]
pub fn gelu_in<A: Arith>(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_in::<A>(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function. For |x| < 1 its Maclaurin series to x^23 (the next
/// term is below 1e-10), which keeps the relative accuracy near 0 that the
/// ONNX tests compare at; for 1 <= |x| < 3.9 a degree-14 polynomial in
/// `|x| − 2.5` (fitted to erf on [1, 4], absolute error under 1e-7 in f32
/// arithmetic; no exp, no division); beyond, ±1 (erf(3.9) is 1 to f32).
/// Both are computed and one selected, so a loop over a tile vectorizes.
#[inline(always)]
pub fn erf_in<A: Arith>(x: f32) -> f32 {
    const TWO_OVER_SQRT_PI: f32 = std::f32::consts::FRAC_2_SQRT_PI;
    let z = x * x;
    // (-1)^n / (n! (2n+1)), n = 11 down to 1.
    let mut s = -1.0 / 918_086_400.0;
    s = A::mul_add(s, z, 1.0 / 76_204_800.0);
    s = A::mul_add(s, z, -1.0 / 6_894_720.0);
    s = A::mul_add(s, z, 1.0 / 685_440.0);
    s = A::mul_add(s, z, -1.0 / 75_600.0);
    s = A::mul_add(s, z, 1.0 / 9360.0);
    s = A::mul_add(s, z, -1.0 / 1320.0);
    s = A::mul_add(s, z, 1.0 / 216.0);
    s = A::mul_add(s, z, -1.0 / 42.0);
    s = A::mul_add(s, z, 1.0 / 10.0);
    s = A::mul_add(s, z, -1.0 / 3.0);
    s = A::mul_add(s, z, 1.0);
    let near = TWO_OVER_SQRT_PI * x * s;
    let a = x.abs();
    let u = clamp(a, 1.0, 4.0) - 2.5;
    let mut p = 8.961_245e-7;
    for c in [
        5.093_170_3e-7,
        -1.576_790_6e-5,
        1.768_185e-5,
        8.125_632e-5,
        -2.703_984_8e-4,
        2.584_812e-4,
        5.600_647_4e-4,
        -2.797_349_4e-3,
        6.109_302_4e-3,
        -8.622_685e-3,
        8.351_716e-3,
        -5.445_676_4e-3,
        2.178_188_9e-3,
        9.995_930_2e-1,
    ] {
        p = A::mul_add(p, u, c);
    }
    let far = if a >= 3.9 { 1.0 } else { p };
    let far = f32::from_bits(far.to_bits() | (x.to_bits() & 0x8000_0000));
    if a < 1.0 {
        near
    } else {
        far
    }
}
