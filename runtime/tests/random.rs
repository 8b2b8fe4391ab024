//! The random operators draw from the distributions they name, reproducibly:
//! fixtures/runtime/random.onnx (made by gen_random.py) holds RandomNormal,
//! RandomUniform, an unseeded RandomNormalLike, Multinomial and Bernoulli;
//! each output's sample statistics must sit within a few standard errors of
//! the distribution's, and a second run must draw the same values.

use diamond_runtime::{run_model, RunOptions, Value};
use std::path::PathBuf;

fn outputs() -> Vec<(String, Vec<f64>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/runtime/random.onnx");
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let result = run_model(&model, Vec::new(), &RunOptions::default()).unwrap();
    result
        .outputs
        .into_iter()
        .map(|(name, v)| match v {
            Value::Tensor(t) => (name, t.to_f64s().unwrap()),
            other => panic!("{name}: a {}", other.kind()),
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn std_dev(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

#[test]
fn random_operators_draw_their_distributions_reproducibly() {
    let first = outputs();
    let get = |name: &str| &first.iter().find(|(n, _)| n == name).unwrap().1;
    // N(1, 2²) over 40,000 draws: the mean's standard error is 0.01.
    let normal = get("normal");
    assert!((mean(normal) - 1.0).abs() < 0.05, "mean {}", mean(normal));
    assert!((std_dev(normal) - 2.0).abs() < 0.05, "std {}", std_dev(normal));
    // U[-2, 5): inside the interval, mean 1.5 (standard error 0.01).
    let uniform = get("uniform");
    assert!(uniform.iter().all(|&u| (-2.0..5.0).contains(&u)));
    assert!((mean(uniform) - 1.5).abs() < 0.05, "mean {}", mean(uniform));
    // An unseeded node draws its own stream, not the seeded one's.
    let unseeded = get("unseeded");
    assert!((mean(unseeded)).abs() < 0.05 && (std_dev(unseeded) - 1.0).abs() < 0.05);
    assert_ne!(unseeded, normal);
    // Class 1 has probability 3/4: 4,000 draws, standard error 0.007.
    let classes = get("classes");
    assert!(classes.iter().all(|&c| c == 0.0 || c == 1.0));
    assert!((mean(classes) - 0.75).abs() < 0.03, "share of class 1: {}", mean(classes));
    // Bernoulli(0.3) over 40,000 coins: standard error 0.0023.
    let coins = get("coins");
    assert!(coins.iter().all(|&c| c == 0.0 || c == 1.0));
    assert!((mean(coins) - 0.3).abs() < 0.01, "share of ones: {}", mean(coins));
    // The same model draws the same values again.
    assert_eq!(outputs(), first);
}
