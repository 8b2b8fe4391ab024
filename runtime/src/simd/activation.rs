//! Activation functions over a slice of `f32`, written branch-free so that
//! the compiler vectorizes them: `exp` by range reduction to `2^n · e^r`
//! with Cephes' degree-6 polynomial, `tanh` by Cephes' odd polynomial near
//! zero and `1 − 2/(e^{2x}+1)` elsewhere, `erf` from [`super::math`]
//! (its series near zero, Abramowitz–Stegun 7.1.26 beyond). Each loop is compiled twice — for
//! AVX2+FMA and for the baseline target — and [`apply`] picks one by
//! [`cpu::avx2_fma`](super::cpu::avx2_fma). NaN inputs stay NaN.

use super::cpu;
use super::epilogue::Activation;
use super::math::erf;

/// Applies `act` to every element of `xs` in place.
pub fn apply(act: &Activation, xs: &mut [f32]) {
    if matches!(act, Activation::None) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA (checked by `avx2_fma`).
        unsafe { apply_avx2(act, xs) };
        return;
    }
    apply_body(act, xs);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(act: &Activation, xs: &mut [f32]) {
    apply_body(act, xs);
}

/// One loop per activation, so that each is a straight map the compiler vectorizes.
#[inline(always)]
fn apply_body(act: &Activation, xs: &mut [f32]) {
    match *act {
        Activation::None => {}
        Activation::Relu => xs.iter_mut().for_each(|x| *x = if *x < 0.0 { 0.0 } else { *x }),
        Activation::LeakyRelu(a) => xs.iter_mut().for_each(|x| *x = if *x < 0.0 { *x * a } else { *x }),
        Activation::Clip { min, max } => xs.iter_mut().for_each(|x| *x = clamp(*x, min, max)),
        Activation::Sigmoid => xs.iter_mut().for_each(|x| *x = sigmoid(*x)),
        Activation::Tanh => xs.iter_mut().for_each(|x| *x = tanh(*x)),
        Activation::HardSigmoid { alpha, beta } => xs.iter_mut().for_each(|x| *x = clamp(alpha * *x + beta, 0.0, 1.0)),
        Activation::Gelu => {
            xs.iter_mut().for_each(|x| *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2)))
        }
        Activation::GeluTanh => xs.iter_mut().for_each(|x| {
            let v = *x;
            *x = 0.5 * v * (1.0 + tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))
        }),
        Activation::Silu => xs.iter_mut().for_each(|x| *x *= sigmoid(*x)),
    }
}

/// √(2/π), the tanh form of GELU's scale.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// `x` limited to `[lo, hi]`; NaN stays NaN (comparisons with NaN are false).
#[inline(always)]
fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if x > hi {
        hi
    } else {
        x
    }
}

/// `e^x` in f32, relative error about 2 ulp; the argument is limited to [−87.3, 88] (so the
/// result to about [1.21e-38, 1.65e38]: no infinity, no subnormal).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in a short high part (exact times small integers) and the rest
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2^23: adding it rounds to the nearest integer in the low mantissa bits
    const ROUND: f32 = 12_582_912.0;
    let x = clamp(x, -87.3, 88.0);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let e = p * r * r + r + 1.0;
    // 2^n built in the exponent bits; n is in [-126, 128] after the clamp
    let scale = f32::from_bits(((n as i32).wrapping_add(127).max(0) as u32) << 23);
    e * scale
}

/// `1 / (1 + e^{−x})`.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `tanh x`: Cephes' odd polynomial for |x| < 0.625, else from `e^{2|x|}`.
#[inline(always)]
fn tanh(x: f32) -> f32 {
    let z = x * x;
    let mut p = -5.704_988_7e-3;
    p = p * z + 2.063_908_9e-2;
    p = p * z - 5.373_971_6e-2;
    p = p * z + 1.333_144_2e-1;
    p = p * z - 3.333_328_2e-1;
    let small = x + x * z * p;
    let a = if x < 0.0 { -x } else { x };
    let big = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let big = if x < 0.0 { -big } else { big };
    if a < 0.625 {
        small
    } else {
        big
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_tanh_and_erf_agree_with_the_library_functions() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.01;
            let want = f64::from(x).exp();
            assert!(((f64::from(exp(x)) - want) / want).abs() < 5e-7, "exp({x})");
            let want = f64::from(x).tanh();
            assert!((f64::from(tanh(x)) - want).abs() < 3e-7, "tanh({x}) = {} vs {want}", tanh(x));
            let want = libm::erf(f64::from(x));
            assert!((f64::from(erf(x)) - want).abs() < 3e-7, "erf({x}) = {} vs {want}", erf(x));
        }
        assert!(exp(-100.0) < 1.3e-38 && exp(100.0) > 1.6e38 && exp(100.0).is_finite());
        assert!(exp(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
    }
}
