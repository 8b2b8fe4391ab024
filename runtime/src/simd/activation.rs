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
    if matches!(act, Activation::None) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx512() {
        // SAFETY: the processor has AVX-512 F, AVX2 and FMA (checked by `avx512`).
        unsafe { apply_avx512(act, xs) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA (checked by `avx2_fma`).
        unsafe { apply_avx2(act, xs) };
        return;
    }
    apply_body::<Split>(act, xs);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn apply_avx2(act: &Activation, xs: &mut [f32]) {
    apply_body::<Fused>(act, xs);
}

/// The same loops in 16-lane registers: the transcendental activations
/// (sigmoid, SiLU, GELU) are bound by arithmetic, twice as fast as the AVX2
/// instance here.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn apply_avx512(act: &Activation, xs: &mut [f32]) {
    apply_body::<Fused>(act, xs);
}

/// One loop per activation, so that each is a straight map the compiler vectorizes.
#[inline(always)]
fn apply_body<A: Arith>(act: &Activation, xs: &mut [f32]) {
    match *act {
        Activation::None => {}
        Activation::Relu => xs.iter_mut().for_each(|x| *x = if *x < 0.0 { 0.0 } else { *x }),
        Activation::LeakyRelu(a) => xs.iter_mut().for_each(|x| *x = if *x < 0.0 { *x * a } else { *x }),
        Activation::Clip { min, max } => xs.iter_mut().for_each(|x| *x = clamp(*x, min, max)),
        Activation::Sigmoid => xs.iter_mut().for_each(|x| *x = sigmoid_in::<A>(*x)),
        Activation::Tanh => xs.iter_mut().for_each(|x| *x = tanh_in::<A>(*x)),
        Activation::HardSigmoid { alpha, beta } => xs.iter_mut().for_each(|x| *x = clamp(alpha * *x + beta, 0.0, 1.0)),
        Activation::Gelu => xs.iter_mut().for_each(|x| *x = gelu_in::<A>(*x)),
        Activation::GeluTanh => xs.iter_mut().for_each(|x| {
            let v = *x;
            *x = 0.5 * v * (1.0 + tanh_in::<A>(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)))
        }),
        Activation::Silu => xs.iter_mut().for_each(|x| *x *= sigmoid_in::<A>(*x)),
        Activation::HardSwish => xs.iter_mut().for_each(|x| *x *= clamp(*x / 6.0 + 0.5, 0.0, 1.0)),
    }
}

/// √(2/π), the tanh form of GELU's scale.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;
