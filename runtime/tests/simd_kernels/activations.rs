//! The epilogue's activations ([`diamond_runtime::simd::activation`]) on
//! the instruction set the machine has, element for element against their
//! definitions in scalar `f32`: the piecewise-linear ones exactly (NaN stays
//! NaN, the infinities and zeros of either sign included), the
//! transcendental ones to a few ulps; every length from 0 to 70, so that
//! both the vector body and the scalar tail run, and several rows at a
//! stride with [`apply_rows`] (the gaps between rows left alone).

use diamond_runtime::simd::activation::{apply, apply_rows, Rows};
use diamond_runtime::simd::epilogue::Activation;

/// Special values first, then a spread of ordinary ones.
fn inputs(len: usize) -> Vec<f32> {
    let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e30, -1e30, 3.0, -3.0, 6.0, -6.0];
    (0..len)
        .map(|i| if i < special.len() { special[(i * 7 + len) % special.len()] } else { (i as f32 - 35.0) * 0.37 })
        .collect()
}

fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let x = if x < lo { lo } else { x };
    if x > hi {
        hi
    } else {
        x
    }
}

/// The definition, and whether it is exact (else within a relative 1e-5).
fn definition(act: Activation, x: f32) -> (f32, bool) {
    let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
    match act {
        Activation::Relu => (if x < 0.0 { 0.0 } else { x }, true),
        Activation::LeakyRelu(a) => (if x < 0.0 { x * a } else { x }, true),
        Activation::Clip { min, max } => (clamp(x, min, max), true),
        Activation::HardSigmoid { alpha, beta } => (clamp(alpha * x + beta, 0.0, 1.0), true),
        Activation::HardSwish => (x * clamp(x / 6.0 + 0.5, 0.0, 1.0), true),
        Activation::Sigmoid => (sigmoid(x), false),
        Activation::Silu => (x * sigmoid(x), false),
        Activation::Tanh => (x.tanh(), false),
        _ => (x, true),
    }
}

fn agrees(act: Activation, x: f32, got: f32) -> bool {
    let (want, exact) = definition(act, x);
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    // zeros compare equal whatever their sign
    got == want || (!exact && (got - want).abs() <= 1e-5 * want.abs().max(1e-30) + 1e-7)
}

const ACTIVATIONS: [Activation; 8] = [
    Activation::Relu,
    Activation::LeakyRelu(0.1),
    Activation::Clip { min: 0.0, max: 6.0 },
    Activation::HardSigmoid { alpha: 0.2, beta: 0.5 },
    Activation::HardSwish,
    Activation::Sigmoid,
    Activation::Silu,
    Activation::Tanh,
];

#[test]
fn activations_follow_their_definitions_at_every_length() {
    for act in ACTIVATIONS {
        for len in 0..=70 {
            let x = inputs(len);
            let mut y = x.clone();
            apply(&act, &mut y);
            for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
                assert!(agrees(act, xi, yi), "{act:?}, length {len}, element {i}: f({xi}) gave {yi}");
            }
        }
    }
}

#[test]
fn rows_at_a_stride_are_each_applied_and_the_gaps_kept() {
    let (count, len, stride) = (5, 37, 41);
    for act in ACTIVATIONS {
        let x = inputs(count * stride);
        let mut y = x.clone();
        // SAFETY: the rows lie inside `y`, borrowed mutably, and do not overlap.
        unsafe { apply_rows(&act, Rows { first: y.as_mut_ptr(), count, len, stride }) };
        for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
            if i % stride < len {
                assert!(agrees(act, xi, yi), "{act:?}, element {i}: f({xi}) gave {yi}");
            } else {
                assert!(xi.to_bits() == yi.to_bits(), "{act:?}: element {i} between rows was changed");
            }
        }
    }
}
