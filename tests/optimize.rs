//! `diamond optimize`: each pass alone on its fixture (`fixtures/optimize/`,
//! `gen_optimize.py`) gives exactly the expected graph, in the optimizer's
//! text form, and computes what the original computes (tract, random inputs,
//! the symbols at sizes other than 1); the whole pipeline on the real exports
//! shrinks every transformer and keeps torch's outputs.

mod common;

use diamond_optimize::{optimize, text::graph_text, Options};
use expect_test::{expect, Expect};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    common::root().join("fixtures/optimize").join(name)
}

fn load(path: &Path) -> diamond_ir::Model {
    diamond_importers::onnx::load_model(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs one pass on a fixture: the rewritten graph, and a check that tract
/// computes the same outputs from both models at the given input shapes.
fn pass_on(name: &str, pass: &str, shapes: &[&[usize]], expected: Expect) {
    let model = load(&fixture(name));
    let options = Options { passes: vec![pass.to_string()], max_rounds: 4 };
    let outcome = optimize(&model, &options).unwrap();
    expected.assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, shapes);
}

/// Runs both models under tract on the same random float inputs and compares every output.
fn same_outputs(a: &diamond_ir::Model, b: &diamond_ir::Model, shapes: &[&[usize]]) {
    same_outputs_within(a, b, shapes, 0.0)
}

/// [`same_outputs`] up to `tolerance` (absolute).
fn same_outputs_within(a: &diamond_ir::Model, b: &diamond_ir::Model, shapes: &[&[usize]], tolerance: f32) {
    use tract_onnx::prelude::*;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let inputs: Vec<Tensor> = shapes
        .iter()
        .map(|s| {
            let n: usize = s.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    (seed % 2000) as f32 / 1000.0 - 1.0
                })
                .collect();
            tract_ndarray::ArrayD::from_shape_vec(s.to_vec(), v).unwrap().into_tensor()
        })
        .collect();
    let run = |m: &diamond_ir::Model| {
        let bytes = diamond_exporters::onnx::encode_model(m).unwrap();
        let mut tm = tract_onnx::onnx().model_for_read(&mut bytes.as_slice()).unwrap();
        for (i, x) in inputs.iter().enumerate() {
            tm = tm.with_input_fact(i, InferenceFact::dt_shape(f32::datum_type(), x.shape())).unwrap();
        }
        let plan = tm.into_optimized().unwrap().into_runnable().unwrap();
        plan.run(inputs.iter().cloned().map(|t| t.into_tvalue()).collect()).unwrap()
    };
    let (x, y) = (run(a), run(b));
    assert_eq!(x.len(), y.len());
    for (p, q) in x.iter().zip(&y) {
        assert_eq!(p.shape(), q.shape());
        let (p, q) = (p.cast_to::<f32>().unwrap().into_owned(), q.cast_to::<f32>().unwrap().into_owned());
        let (p, q) = (p.to_plain_array_view::<f32>().unwrap(), q.to_plain_array_view::<f32>().unwrap());
        let worst = p.iter().zip(q.iter()).map(|(u, v)| (u - v).abs()).fold(0.0f32, f32::max);
        assert!(worst <= tolerance, "outputs differ by {worst}");
    }
}

#[test]
fn dead_code_drops_what_no_output_needs() {
    pass_on("dead_code.onnx", "dead-code", &[&[3, 3]], expect![[r#"
        input x: float [batch, 3]
        Relu(x) -> y
        output y
    "#]]);
}

#[test]
fn noop_removes_nodes_that_pass_their_input_through() {
    pass_on("noop.onnx", "noop", &[&[3, 5, 8]], expect![[r#"
        input x: float [batch, seq, 8]
        init same_shape: int64 [3]
        init one: float []
        init zero: float [1, 8]
        init starts: int64 [1]
        init ends: int64 [1]
        init axes: int64 [1]
        init ones_wide: float [2, 1, 1, 8]
        Relu(x) -> y
        Mul(x, ones_wide) -> wide
        output y
        output wide
    "#]]);
}

#[test]
fn cse_merges_identical_nodes_and_initializers() {
    pass_on("cse.onnx", "cse", &[&[3, 4]], expect![[r#"
        input x: float [batch, 4]
        init b1: float [4]
        init b2: float [4]
        Relu(x) -> r1
        Add(r1, b1) -> s1
        Mul(s1, s1) -> y
        output y
    "#]]);
}

#[test]
fn fold_shapes_turns_known_shape_arithmetic_into_constants() {
    pass_on("fold_shapes.onnx", "fold-shapes", &[&[2, 3, 4]], expect![[r#"
        input x: float [2, 3, 4]
        init one: int64 [1]
        init three: int64 [1]
        init minus_one: int64 [1]
        init target: int64 [3]
        Reshape(x, target) -> y
        output y
    "#]]);
}

#[test]
fn fuse_conv_bn_folds_the_normalization_into_the_weights() {
    let model = load(&fixture("conv_bn.onnx"));
    let options = Options { passes: vec!["fuse-conv-bn".into(), "dead-code".into()], max_rounds: 4 };
    let outcome = optimize(&model, &options).unwrap();
    expect![[r#"
        input x: float [batch, 3, 8, 8]
        init y_fused_weight: float [4, 3, 3, 3]
        init y_fused_bias: float [4]
        Conv(x, y_fused_weight, y_fused_bias) {pads=[1, 1, 1, 1]} -> y
        output y
    "#]].assert_eq(&graph_text(&outcome.model));
    // The folded weights are rounded to f32 once: the outputs agree to float precision.
    same_outputs_within(&model, &outcome.model, &[&[2, 3, 8, 8]], 1e-5);
}

#[test]
fn constants_become_initializers() {
    pass_on("constants.onnx", "constants", &[&[3, 4]], expect![[r#"
        input x: float [batch, 4]
        init c_tensor: float [4]
        init c_float: float []
        init c_ints: int64 [2]
        Add(x, c_tensor) -> a
        Mul(a, c_float) -> m
        Reshape(m, c_ints) -> y
        output y
    "#]]);
}

#[test]
fn merge_reshapes_collapses_layout_chains() {
    let model = load(&fixture("merge_reshapes.onnx"));
    let options = Options { passes: vec!["merge-reshapes".into(), "dead-code".into()], max_rounds: 4 };
    let outcome = optimize(&model, &options).unwrap();
    expect![[r#"
        input x: float [batch]
        input z: float [batch, 2, 3]
        init target: int64 [2]
        init y_axes: int64 [3]
        Unsqueeze(x, y_axes) -> y
        Reshape(z, target) -> w
        output y
        output w
    "#]].assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, &[&[3], &[3, 2, 3]]);
}

fn diamond(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

#[test]
fn bad_inputs_exit_with_their_code_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let out_s = out.to_str().unwrap();
    // A model with errors is not optimized: exit 1.
    let broken = common::root().join("fixtures/check/broadcast_conflict.onnx");
    let o = diamond(&["optimize", broken.to_str().unwrap(), "-o", out_s]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error(s)"));
    // Unreadable input, unknown pass: exit 2.
    let garbage = dir.path().join("garbage.onnx");
    std::fs::write(&garbage, b"not a model").unwrap();
    assert_eq!(diamond(&["optimize", garbage.to_str().unwrap(), "-o", out_s]).status.code(), Some(2));
    let good = fixture("noop.onnx");
    let o = diamond(&["optimize", good.to_str().unwrap(), "-o", out_s, "--passes", "noop,frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown pass 'frobnicate'"));
    assert!(!out.exists(), "nothing is written on failure");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    // A good run writes the model and reports the counts.
    let o = diamond(&["optimize", good.to_str().unwrap(), "-o", out_s, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["nodes_before"], 10);
    assert_eq!(v["nodes_after"], 2);
    assert!(out.exists());
}
