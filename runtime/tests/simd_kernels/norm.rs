//! The SIMD backend's LRN and inference BatchNormalization kernels
//! ([`diamond_runtime::simd::norm`]) against the reference executor's
//! operators: random shapes (size-1 axes included), odd and even LRN
//! window sizes, the exponents with their own arithmetic (0.75, 0.5, 1)
//! and another, and scales large enough that the window's sum of squares
//! moves the result; one thread and several (planes, or rows of short
//! planes, in parallel).

use super::oracle::{float, int, Net};
use super::{on_threads, values};
use diamond_ir::{Attribute, Node};
use diamond_runtime::simd::norm;
use diamond_runtime::{Data, Tensor};
use proptest::prelude::*;

fn node(attributes: Vec<Attribute>) -> Node {
    Node { attributes, ..Node::default() }
}

fn tensor(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), Data::F32(data.to_vec())).expect("shape and data agree")
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        Data::F32(v) => v,
        _ => panic!("f32 output expected"),
    }
}

/// `|got − want| ≤ tol·(1 + |want|)` element by element.
#[track_caller]
fn assert_near(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= tol * (1.0 + w.abs()), "{what}: element {i}: {g} vs {w} (error {err:e})");
    }
}

fn check_lrn(shape: &[usize], size: usize, alpha: f32, beta: f32, bias: f32, seed: u64) {
    let len: usize = shape.iter().product();
    let x: Vec<f32> = values(seed, len).iter().map(|v| v * 3.0).collect();
    let attributes = vec![int("size", size as i64), float("alpha", alpha), float("beta", beta), float("bias", bias)];
    let mut net = Net::new();
    let input = net.input(shape, &x);
    let out = net.node("LRN", &[&input], attributes.clone());
    let want = net.run(&out);
    let xt = tensor(shape, &x);
    let got = norm::lrn(&node(attributes), &[Some(&xt)], &mut Vec::with_capacity).expect("the kernel covers LRN");
    assert_eq!(got.shape, shape);
    let what = format!("LRN {shape:?} size {size} alpha {alpha} beta {beta} bias {bias}");
    assert_near(f32s(&got), &want, 4e-7 * (size as f64 + 8.0), &what);
}

fn check_batch_norm(shape: &[usize], epsilon: Option<f32>, seed: u64) {
    let c = shape[1];
    let len: usize = shape.iter().product();
    let x = values(seed, len);
    let gamma: Vec<f32> = values(seed ^ 1, c).iter().map(|v| v * 2.0).collect();
    let beta: Vec<f32> = values(seed ^ 2, c);
    let mean: Vec<f32> = values(seed ^ 3, c).iter().map(|v| v * 0.5).collect();
    let var: Vec<f32> = values(seed ^ 4, c).iter().map(|v| 1.125 + v * 0.875).collect();
    let attributes: Vec<Attribute> = epsilon.map(|e| float("epsilon", e)).into_iter().collect();
    let mut net = Net::new();
    let names: Vec<String> = [(shape, &x[..]), (&[c][..], &gamma[..]), (&[c], &beta), (&[c], &mean), (&[c], &var)]
        .iter()
        .map(|(s, d)| net.input(s, d))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let out = net.node("BatchNormalization", &refs, attributes.clone());
    let want = net.run(&out);
    let ts = [tensor(shape, &x), tensor(&[c], &gamma), tensor(&[c], &beta), tensor(&[c], &mean), tensor(&[c], &var)];
    let inputs: Vec<Option<&Tensor>> = ts.iter().map(Some).collect();
    let got = norm::batch_norm(&node(attributes), &inputs, &mut Vec::with_capacity).expect("the kernel covers it");
    assert_eq!(got.shape, shape);
    assert_near(f32s(&got), &want, 3.2e-6, &format!("BatchNormalization {shape:?} epsilon {epsilon:?}"));
}

fn spatial() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..8, 1..=2)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn lrn_matches_the_reference(
        n in 1usize..3,
        c in 1usize..10,
        rest in spatial(),
        size in 1usize..7,
        alpha in prop_oneof![Just(1e-4f32), Just(0.3f32), Just(2.0f32)],
        beta in prop_oneof![Just(0.75f32), Just(0.5f32), Just(1.0f32), Just(0.6f32)],
        bias in prop_oneof![Just(1.0f32), Just(0.5f32), Just(2.0f32)],
        seed in any::<u64>(),
    ) {
        let shape = [vec![n, c], rest].concat();
        check_lrn(&shape, size, alpha, beta, bias, seed);
    }

    #[test]
    fn batch_norm_matches_the_reference(
        n in 1usize..3,
        c in 1usize..10,
        rest in prop::collection::vec(1usize..8, 0..=2),
        epsilon in prop_oneof![Just(None), Just(Some(1e-3f32)), Just(Some(0.5f32))],
        seed in any::<u64>(),
    ) {
        let shape = [vec![n, c], rest].concat();
        check_batch_norm(&shape, epsilon, seed);
    }
}

#[test]
fn large_normalizations_match_the_reference_on_one_and_several_threads() {
    for threads in [1, 3] {
        on_threads(threads, || {
            check_lrn(&[2, 16, 40, 40], 5, 0.5, 0.75, 1.0, 21);
            check_lrn(&[1, 24, 37, 45], 4, 2.0, 0.6, 2.0, 22);
            check_batch_norm(&[2, 16, 40, 40], None, 23);
            // short planes go by rows, these in parallel chunks: a token-major
            // [tokens, channels] input (planes of one) and planes of 3×5
            check_batch_norm(&[300, 256], Some(1e-3), 24);
            check_batch_norm(&[7, 1000, 3, 5], None, 25);
        });
    }
}

#[test]
fn training_mode_and_other_types_are_left_to_the_reference() {
    let x = Tensor::new(vec![1, 2, 2], Data::F64(vec![1.0; 4])).expect("a tensor");
    assert!(norm::lrn(&node(vec![int("size", 3)]), &[Some(&x)], &mut Vec::with_capacity).is_none());
    let c = tensor(&[2], &[1.0, 1.0]);
    let xf = tensor(&[1, 2, 2], &[1.0; 4]);
    let inputs = [Some(&xf), Some(&c), Some(&c), Some(&c), Some(&c)];
    let training = node(vec![int("training_mode", 1)]);
    assert!(norm::batch_norm(&training, &inputs, &mut Vec::with_capacity).is_none());
    assert!(norm::batch_norm(&node(vec![]), &inputs, &mut Vec::with_capacity).is_some());
}
