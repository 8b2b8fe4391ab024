//! The SIMD backend's vectorizable transcendental functions against `f64`:
//! within a few ulps over the range that matters, exact at the edges
//! (infinities, NaN, overflow and underflow). Each function is checked in
//! both of its instances: multiply-adds rounded twice (the portable code)
//! and fused (the code compiled for FMA).

use diamond_runtime::simd::math::{erf_in, exp_in, gelu_tanh_in, sigmoid_in, tanh_in, Arith, Fused, Split};

/// `|got - want|` in units of `want`'s last place (f32), with a floor at
/// the smallest normal.
fn ulps(got: f32, want: f64) -> f64 {
    let w = want as f32;
    let ulp = (f32::from_bits(w.abs().to_bits() + 1) - w.abs()).max(f32::MIN_POSITIVE) as f64;
    (f64::from(got) - want).abs() / ulp
}

fn sweep(lo: f32, hi: f32) -> impl Iterator<Item = f32> {
    (0..=20_000).map(move |i| lo + (hi - lo) * i as f32 / 20_000.0)
}

#[test]
fn exp_is_within_two_ulps_and_exact_at_the_edges() {
    exp_edges::<Split>();
    exp_edges::<Fused>();
}

fn exp_edges<A: Arith>() {
    let exp = exp_in::<A>;
    for x in sweep(-87.3, 88.72) {
        let u = ulps(exp(x), f64::from(x).exp());
        assert!(u <= 2.0, "exp({x}) = {} vs {}: {u} ulps", exp(x), f64::from(x).exp());
    }
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(100.0), f32::INFINITY);
    assert_eq!(exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp(-200.0), 0.0);
    assert!(exp(f32::NAN).is_nan());
    for x in [-87.2f32, -90.0, -100.0, -103.0] {
        let want = f64::from(x).exp();
        assert!((f64::from(exp(x)) - want).abs() <= 2e-45 + 1e-6 * want, "exp({x}) = {} vs {want}", exp(x));
    }
}

#[test]
fn tanh_sigmoid_and_gelu_follow_their_definitions() {
    definitions::<Split>();
    definitions::<Fused>();
}

fn definitions<A: Arith>() {
    let (tanh, sigmoid, gelu_tanh) = (tanh_in::<A>, sigmoid_in::<A>, gelu_tanh_in::<A>);
    for x in sweep(-20.0, 20.0) {
        let t = f64::from(x).tanh();
        assert!((f64::from(tanh(x)) - t).abs() <= 3e-7 * t.abs().max(1e-3), "tanh({x}) = {} vs {t}", tanh(x));
        let s = 1.0 / (1.0 + (-f64::from(x)).exp());
        assert!(ulps(sigmoid(x), s) <= 4.0, "sigmoid({x}) = {} vs {s}", sigmoid(x));
        let xd = f64::from(x);
        let g = 0.5 * xd * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd * xd * xd)).tanh());
        assert!(
            (f64::from(gelu_tanh(x)) - g).abs() <= 1e-5 * g.abs().max(1e-6),
            "gelu_tanh({x}) = {} vs {g}",
            gelu_tanh(x)
        );
    }
    assert_eq!(tanh(0.0), 0.0);
    assert_eq!(tanh(f32::INFINITY), 1.0);
    assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    assert!(tanh(f32::NAN).is_nan());
    assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
    assert_eq!(sigmoid(f32::INFINITY), 1.0);
}

#[test]
fn erf_keeps_relative_accuracy_near_zero_and_absolute_beyond() {
    erf_accuracy::<Split>();
    erf_accuracy::<Fused>();
}

fn erf_accuracy<A: Arith>() {
    let erf = erf_in::<A>;
    for x in sweep(-6.0, 6.0).chain(sweep(-1e-3, 1e-3)).chain([1e-30, -1e-20, 0.999_999_9, 1.0, -1.0]) {
        let want = libm::erf(f64::from(x));
        let err = (f64::from(erf(x)) - want).abs();
        if x.abs() < 1.0 {
            assert!(err <= 3e-7 * want.abs(), "erf({x}) = {} vs {want}", erf(x));
        } else {
            assert!(err <= 2e-7, "erf({x}) = {} vs {want}", erf(x));
        }
    }
    assert_eq!(erf(0.0), 0.0);
    assert_eq!(erf(f32::INFINITY), 1.0);
    assert_eq!(erf(f32::NEG_INFINITY), -1.0);
    assert!(erf(f32::NAN).is_nan());
}
