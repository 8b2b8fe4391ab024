//! `diamond optimize`: each pass alone on its fixture (`fixtures/optimize/`,
//! `gen_optimize.py`) gives exactly the expected graph, in the optimizer's
//! text form, and computes what the original computes (tract, random inputs,
//! the symbols at sizes other than 1); the whole pipeline on the real exports
//! shrinks every transformer and keeps torch's outputs.

mod common;
#[path = "optimize/ones.rs"]
mod ones;

use diamond_optimize::verify::{verify, Verdict};
use diamond_optimize::{optimize, text::graph_text, Options};
use expect_test::{expect, Expect};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    common::root().join("fixtures/optimize").join(name)
}

fn load(path: &Path) -> diamond_ir::Model {
    diamond_importers::onnx::load_model(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `passes` in order (up to 4 rounds) with verification on.
fn run_passes(model: &diamond_ir::Model, passes: &[&str]) -> diamond_optimize::Outcome {
    let options = Options {
        passes: passes.iter().map(|p| p.to_string()).collect(),
        max_rounds: 4,
        verify: true,
        ..Default::default()
    };
    optimize(model, &options).unwrap()
}

/// Runs one pass on a fixture: the rewritten graph, and a check that tract
/// computes the same outputs from both models at the given input shapes.
fn pass_on(name: &str, pass: &str, shapes: &[&[usize]], expected: Expect) {
    let model = load(&fixture(name));
    let outcome = run_passes(&model, &[pass]);
    expected.assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
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
    let graph = a.main_graph().unwrap();
    let inputs: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n: usize = s.iter().product();
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed % 2000
            };
            let elem = match graph.inputs[i].ty.as_ref().and_then(|t| t.value.as_ref()) {
                Some(diamond_ir::TypeValue::Tensor { elem: Some(e), .. }) => *e,
                _ => diamond_ir::ElemType::Float,
            };
            let ints: Vec<i64> = (0..n).map(|_| next() as i64 - 1000).collect();
            let ints = tract_ndarray::ArrayD::from_shape_vec(s.to_vec(), ints).unwrap().into_tensor();
            let floats: Vec<f32> = (0..n).map(|_| next() as f32 / 1000.0 - 1.0).collect();
            let floats = tract_ndarray::ArrayD::from_shape_vec(s.to_vec(), floats).unwrap().into_tensor();
            match elem {
                diamond_ir::ElemType::Int64 => ints,
                diamond_ir::ElemType::Int32 => ints.cast_to::<i32>().unwrap().into_owned(),
                diamond_ir::ElemType::Float16 => floats.cast_to::<f16>().unwrap().into_owned(),
                _ => floats,
            }
        })
        .collect();
    let run = |m: &diamond_ir::Model| {
        let bytes = diamond_exporters::onnx::encode_model(m).unwrap();
        let mut tm = tract_onnx::onnx().model_for_read(&mut bytes.as_slice()).unwrap();
        for (i, x) in inputs.iter().enumerate() {
            tm = tm.with_input_fact(i, InferenceFact::dt_shape(x.datum_type(), x.shape())).unwrap();
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
    pass_on(
        "dead_code.onnx",
        "dead-code",
        &[&[3, 3]],
        expect![[r#"
        input x: float [batch, 3]
        Relu(x) -> y
        output y
    "#]],
    );
}

#[test]
fn noop_removes_nodes_that_pass_their_input_through() {
    pass_on(
        "noop.onnx",
        "noop",
        &[&[3, 5, 8]],
        expect![[r#"
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
    "#]],
    );
}

#[test]
fn cse_merges_identical_nodes_and_initializers() {
    pass_on(
        "cse.onnx",
        "cse",
        &[&[3, 4]],
        expect![[r#"
        input x: float [batch, 4]
        init b1: float [4]
        init b2: float [4]
        Relu(x) -> r1
        Add(r1, b1) -> s1
        Mul(s1, s1) -> y
        output y
    "#]],
    );
}

#[test]
fn fold_shapes_turns_known_shape_arithmetic_into_constants() {
    pass_on(
        "fold_shapes.onnx",
        "fold-shapes",
        &[&[2, 3, 4]],
        expect![[r#"
        input x: float [2, 3, 4]
        init one: int64 [1]
        init three: int64 [1]
        init minus_one: int64 [1]
        init target: int64 [3]
        Reshape(x, target) -> y
        output y
    "#]],
    );
}

#[test]
fn fuse_conv_bn_folds_the_normalization_into_the_weights() {
    let model = load(&fixture("conv_bn.onnx"));
    let outcome = run_passes(&model, &["fuse-conv-bn", "dead-code"]);
    expect![[r#"
        input x: float [batch, 3, 8, 8]
        init y_fused_weight: float [4, 3, 3, 3]
        init y_fused_bias: float [4]
        Conv(x, y_fused_weight, y_fused_bias) {pads=[1, 1, 1, 1]} -> y
        output y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    // The folded weights are rounded to f32 once: the outputs agree to float precision.
    same_outputs_within(&model, &outcome.model, &[&[2, 3, 8, 8]], 1e-5);
}

#[test]
fn constants_become_initializers() {
    pass_on(
        "constants.onnx",
        "constants",
        &[&[3, 4]],
        expect![[r#"
        input x: float [batch, 4]
        init c_tensor: float [4]
        init c_float: float []
        init c_ints: int64 [2]
        Add(x, c_tensor) -> a
        Mul(a, c_float) -> m
        Reshape(m, c_ints) -> y
        output y
    "#]],
    );
}

#[test]
fn merge_reshapes_collapses_layout_chains() {
    let model = load(&fixture("merge_reshapes.onnx"));
    let outcome = run_passes(&model, &["merge-reshapes", "dead-code"]);
    expect![[r#"
        input x: float [batch]
        input z: float [batch, 2, 3]
        init target: int64 [2]
        init y_axes: int64 [3]
        Unsqueeze(x, y_axes) -> y
        Reshape(z, target) -> w
        output y
        output w
    "#]]
    .assert_eq(&graph_text(&outcome.model));
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

#[test]
fn merge_transposes_composes_permutations() {
    let model = load(&fixture("merge_transposes.onnx"));
    let outcome = run_passes(&model, &["merge-transposes", "noop", "dead-code"]);
    expect![[r#"
        input x: float [batch, 2, 3, 4]
        Transpose(x) {perm=[0, 2, 3, 1]} -> y
        Relu(x) -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, &[&[2, 2, 3, 4]]);
}

#[test]
fn convert_optimize_writes_optimized_models_in_batch() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.jsonl");
    let exports = common::root().join("fixtures/exports");
    let o = diamond(&[
        "convert",
        exports.to_str().unwrap(),
        "-o",
        dir.path().join("out").to_str().unwrap(),
        "--optimize",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&report).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 32);
    let (before, after): (u64, u64) = lines.iter().fold((0, 0), |(b, a), l| {
        (
            b + l["nodes"].as_u64().unwrap(),
            a + l["nodes_written"].as_u64().unwrap_or_else(|| l["nodes"].as_u64().unwrap()),
        )
    });
    assert!(after * 10 < before * 6, "{before} -> {after}");
    // What was written is the optimized model, with its inferred value_info.
    let bert = load(&dir.path().join("out/bert.legacy.onnx"));
    assert!(bert.main_graph().unwrap().nodes.len() < 150);
    assert!(!bert.main_graph().unwrap().value_info.is_empty());
}

#[test]
fn verification_catches_a_model_that_computes_something_else() {
    let model = load(&fixture("cse.onnx"));
    assert_eq!(verify(&model, &model, 7), Verdict::Agrees(3));
    // The same graph with one bias element changed.
    let mut tampered = model.clone();
    let g = tampered.graph.unwrap();
    let t = tampered.graphs[g].initializers.iter_mut().find(|t| t.name.as_deref() == Some("b2")).unwrap();
    let mut raw = t.data.raw.clone().unwrap().to_vec();
    raw[0..4].copy_from_slice(&0.75f32.to_le_bytes());
    t.data.raw = Some(bytes::Bytes::from(raw));
    match verify(&model, &tampered, 7) {
        Verdict::Differs(why) => assert!(why.starts_with("at batch=1: output 'y' element 0 is"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A model the executor cannot run is not verified, and says why.
    let custom = common::root().join("fixtures/check/custom_op.onnx");
    let custom = load(&custom);
    assert!(matches!(verify(&custom, &custom, 7), Verdict::Skipped(_)));
}

#[test]
fn fold_constants_computes_float_arithmetic_on_stored_tensors_once() {
    pass_on(
        "fold_constants.onnx",
        "fold-constants",
        &[&[3, 4]],
        expect![[r#"
        input x: float [batch, 4]
        init w: float [4]
        init one_f: float []
        init scale: float [4]
        Mul(x, scale) -> y
        output y
    "#]],
    );
}
