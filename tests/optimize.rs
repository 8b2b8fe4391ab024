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
    pass_on_within(name, pass, shapes, 0.0, expected)
}

/// [`pass_on`] for a rewrite that rounds differently: outputs within `tolerance`.
fn pass_on_within(name: &str, pass: &str, shapes: &[&[usize]], tolerance: f32, expected: Expect) {
    let model = load(&fixture(name));
    let outcome = run_passes(&model, &[pass]);
    expected.assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs_within(&model, &outcome.model, shapes, tolerance);
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
        let plan = tm.into_optimized().map_err(|e| format!("{e:?}")).unwrap().into_runnable().unwrap();
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

#[test]
fn fuse_conv_affine_folds_per_channel_scale_and_shift_into_the_conv() {
    let model = load(&fixture("conv_affine.onnx"));
    let outcome = run_passes(&model, &["fuse-conv-affine", "dead-code"]);
    expect![[r#"
        input x: float [batch, 3, 8, 8]
        init w2: float [4, 3, 1, 1]
        init pixels: float [8, 8]
        init y_fused_bias: float [4]
        init y_fused_weight: float [4, 3, 3, 3]
        Conv(x, y_fused_weight, y_fused_bias) {pads=[1, 1, 1, 1]} -> y
        Conv(x, w2) -> c2
        Sub(c2, pixels) -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs_within(&model, &outcome.model, &[&[2, 3, 8, 8]], 1e-5);
}

#[test]
fn fuse_gemm_turns_a_matrix_product_plus_bias_into_gemm() {
    let model = load(&fixture("matmul_add.onnx"));
    let outcome = run_passes(&model, &["fuse-gemm", "dead-code"]);
    expect![[r#"
        input x: float [n, 8]
        input t: float [batch, seq, 8]
        init w: float [8, 5]
        init bias: float [5]
        Gemm(x, w, bias) -> y
        MatMul(t, w) -> q
        Add(q, bias) -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs_within(&model, &outcome.model, &[&[3, 8], &[2, 4, 8]], 1e-5);
}

#[test]
fn reshape_targets_store_symbolic_targets_as_copies() {
    let model = load(&fixture("reshape_targets.onnx"));
    let outcome = run_passes(&model, &["reshape-targets", "dead-code"]);
    expect![[r#"
        input x: float [batch, seq, 8]
        init h_target: int64 [4]
        init y_target: int64 [3]
        Reshape(x, h_target) -> h
        Relu(h) -> r
        Reshape(r, y_target) -> y
        output y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    let stored = |name: &str| {
        let g = outcome.model.main_graph().unwrap();
        let t = g.initializers.iter().find(|t| t.name.as_deref() == Some(name)).unwrap();
        t.data.raw.as_ref().unwrap().chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>()
    };
    // batch and seq are copied from the data (0); with allowzero dropped, 0 means copy.
    assert_eq!(stored("h_target"), [0, 0, 2, 4]);
    assert_eq!(stored("y_target"), [0, 0, 8]);
    let split = outcome.model.main_graph().unwrap().nodes.iter().find(|(_, n)| n.op_type() == "Reshape").unwrap().1;
    assert!(split.attribute("allowzero").is_none());
    same_outputs(&model, &outcome.model, &[&[2, 5, 8]]);
    same_outputs(&model, &outcome.model, &[&[3, 1, 8]]);
}

#[test]
fn merge_slices_joins_slices_over_different_axes() {
    let model = load(&fixture("merge_slices.onnx"));
    let outcome = run_passes(&model, &["merge-slices", "dead-code"]);
    expect![[r#"
        input x: float [batch, 4, 6, 3]
        init one_: int64 [1]
        init big: int64 [1]
        init one: int64 [1]
        init a_starts: int64 [2]
        init a_ends: int64 [2]
        init a_axes: int64 [2]
        init a_steps: int64 [2]
        init b_starts: int64 [2]
        init b_ends: int64 [2]
        init b_axes: int64 [2]
        init b_steps: int64 [2]
        init c_starts: int64 [2]
        init c_ends: int64 [2]
        init c_axes: int64 [2]
        init c_steps: int64 [2]
        init d_starts: int64 [2]
        init d_ends: int64 [2]
        init d_axes: int64 [2]
        init d_steps: int64 [2]
        Slice(x, a_starts, a_ends, a_axes, a_steps) -> a
        Slice(x, b_starts, b_ends, b_axes, b_steps) -> b
        Slice(x, c_starts, c_ends, c_axes, c_steps) -> c
        Slice(x, d_starts, d_ends, d_axes, d_steps) -> d
        Concat(a, b, c, d) {axis=-1} -> y
        Slice(x, one_, big, one) -> s1
        Slice(s1, one_, big, one) -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, &[&[2, 4, 6, 3]]);
}

#[test]
fn merge_reshapes_reads_through_a_transpose_of_unit_axes() {
    let model = load(&fixture("reshape_through_transpose.onnx"));
    let outcome = run_passes(&model, &["merge-reshapes", "dead-code"]);
    expect![[r#"
        input x: float [batch, 4, 4, 8]
        init tokens: int64 [3]
        Reshape(x, tokens) -> y
        output y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, &[&[3, 4, 4, 8]]);
}

#[test]
fn inspect_says_what_optimize_would_remove() {
    let path = common::root().join("fixtures/exports/bert.legacy.onnx");
    let o = diamond(&["inspect", "--json", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (before, after) =
        (report["optimize"]["nodes_before"].as_u64().unwrap(), report["optimize"]["nodes_after"].as_u64().unwrap());
    assert_eq!(before, report["main_graph_nodes"].as_u64().unwrap());
    // The estimate is what `optimize` then writes.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bert.onnx");
    let o = diamond(&["optimize", path.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json", "--no-verify"]);
    let written: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(written["nodes_after"].as_u64().unwrap(), after);
    assert!(after * 2 < before, "{before} -> {after}");
    let text = diamond(&["inspect", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("optimize: would remove {} of {before}", before - after)), "{text}");
}

#[test]
fn fuse_gelu_finds_the_exact_and_tanh_forms() {
    let model = load(&fixture("gelu.onnx"));
    // Verified on the reference executor at several batch sizes (tract has no opset-20 Gelu).
    let outcome = run_passes(&model, &["fuse-gelu", "dead-code"]);
    expect![[r#"
        input x: float [batch, 16]
        init sqrt2: float []
        init one: float []
        init not_half: float []
        Gelu(x) -> y
        Gelu(x) {approximate="tanh"} -> z
        Div(x, sqrt2) -> c0
        Erf(c0) -> c1
        Add(c1, one) -> c2
        Mul(x, c2) -> c3
        Mul(c3, not_half) -> w
        output y
        output z
        output w
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
}

#[test]
fn fuse_rms_norm_finds_llama_and_t5_spellings() {
    let model = load(&fixture("rms_norm.onnx"));
    let outcome = run_passes(&model, &["fuse-rms-norm", "dead-code"]);
    expect![[r#"
        input x: float [batch, seq, 8]
        init weight: float [8]
        init z_scale: float [8]
        RMSNormalization(x, weight) {axis=-1, epsilon=0.000001} -> y
        RMSNormalization(x, z_scale) {axis=-1, epsilon=0.000001} -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
}

#[test]
fn fuse_attention_finds_the_exported_spellings_and_keeps_an_unguarded_input_mask() {
    let model = load(&fixture("attention.onnx"));
    let outcome = run_passes(&model, &["fuse-attention", "dead-code"]);
    expect![[r#"
        input a_q: float [batch, 2, seq, 4]
        input a_k: float [batch, seq, 2, 4]
        input a_v: float [batch, 2, seq, 4]
        input keep: bool [batch, 1, 1, seq]
        input b_q: float [batch, 2, seq, 4]
        input b_k: float [batch, 2, seq, 4]
        input b_v: float [batch, 2, seq, 4]
        input c_q: float [2, 2, 3, 4]
        input c_k: float [2, 2, 3, 4]
        input c_v: float [2, 2, 3, 4]
        input d_q: float [batch, 2, seq, 4]
        input d_kt: float [batch, 2, 4, seq]
        input d_v: float [batch, 2, seq, 4]
        input d_mask: float [batch, 1, seq, seq]
        init zero: float []
        init minus_inf: float []
        init lowest: float []
        init c_keep: bool [1, 3]
        Where(keep, zero, minus_inf) -> a_mask
        Attention(b_q, b_k, b_v) {scale=0.5} -> b_y
        Where(c_keep, zero, lowest) -> c_mask
        Attention(c_q, c_k, c_v, c_mask) {scale=0.5} -> c_y
        MatMul(d_q, d_kt) -> d_qk
        Add(d_qk, d_mask) -> d_logits
        Softmax(d_logits) {axis=-1} -> d_p
        MatMul(d_p, d_v) -> d_y
        Transpose(a_k) {perm=[0, 2, 1, 3]} -> a_y_key
        Attention(a_q, a_y_key, a_v, a_mask) {scale=0.49999997} -> a_y
        output a_y
        output b_y
        output c_y
        output d_y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
}

#[test]
fn target_opset_moves_reduce_axes_to_inputs_and_gives_split_its_count() {
    let model = load(&fixture("upgrade.onnx"));
    let options =
        Options { passes: vec!["dead-code".into()], verify: true, target_opset: Some(23), ..Default::default() };
    let outcome = optimize(&model, &options).unwrap();
    assert_eq!(outcome.model.opset_version(""), Some(23));
    assert!(outcome.model.ir_version >= Some(11));
    expect![[r#"
        input x: float [batch, 4]
        init m_axes: int64 [1]
        ReduceMean(x, m_axes) {keepdims=1} -> m
        Sub(x, m) -> d
        Split(d) {axis=1, num_outputs=2} -> y, z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
}

#[test]
fn target_opset_refuses_an_upgrade_that_changes_meaning() {
    let model = load(&fixture("group_norm_18.onnx"));
    let options = Options { target_opset: Some(21), ..Default::default() };
    let err = optimize(&model, &options).err().expect("refused");
    assert!(err.to_string().contains("GroupNormalization 'gn'"), "{err}");
    // Up to 20 nothing changes meaning; below the model's opset is a downgrade.
    assert!(optimize(&model, &Options { target_opset: Some(20), ..Default::default() }).is_ok());
    let err = optimize(&model, &Options { target_opset: Some(17), ..Default::default() }).err().unwrap();
    assert!(err.to_string().contains("downgrade"), "{err}");
    // The CLI says so with exit 2 and writes nothing.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.onnx");
    let path = fixture("group_norm_18.onnx");
    let o = diamond(&["optimize", path.to_str().unwrap(), "-o", out.to_str().unwrap(), "--target-opset", "21"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.exists());
}

#[test]
fn contiguous_gather_becomes_a_reshape() {
    let model = load(&fixture("contiguous_gather.onnx"));
    let outcome = run_passes(&model, &["contiguous-gather", "dead-code"]);
    expect![[r#"
        input x: float [batch, 4]
        init flat_shape: int64 [1]
        init zero_s: int64 []
        init one_s: int64 []
        init four: int64 []
        init axis1: int64 [1]
        init not_offsets: int64 [1, 4]
        init y_shape: int64 [2]
        Reshape(x, flat_shape) -> flat
        Shape(x) {end=1, start=0} -> n1
        Squeeze(n1) -> n
        Range(zero_s, n, one_s) -> r
        Mul(r, four) -> r4
        Unsqueeze(r4, axis1) -> r4u
        Reshape(flat, y_shape) -> y
        Add(r4u, not_offsets) -> idx2
        Gather(flat, idx2) {axis=0} -> z
        output y
        output z
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs(&model, &outcome.model, &[&[3, 4]]);
}

#[test]
fn fuse_pad_moves_zero_spatial_padding_into_conv_and_pool() {
    let model = load(&fixture("pad_conv.onnx"));
    let outcome = run_passes(&model, &["fuse-pad", "dead-code"]);
    expect![[r#"
        input x: float [batch, 3, 6, 6]
        init w: float [4, 3, 3, 3]
        init w5: float [4, 5, 3, 3]
        init spatial: int64 [8]
        init channels: int64 [8]
        Conv(x, w) {pads=[2, 3, 2, 3]} -> y
        AveragePool(x) {count_include_pad=1, kernel_shape=[2, 2], pads=[1, 2, 1, 2]} -> z
        Pad(x, spatial) {mode="reflect"} -> r
        Conv(r, w) -> u
        Pad(x, channels) -> c
        Conv(c, w5) -> v
        output y
        output z
        output u
        output v
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs_within(&model, &outcome.model, &[&[2, 3, 6, 6]], 1e-5);
}

#[test]
fn fuse_layer_norm_finds_the_decomposed_forms() {
    let model = load(&fixture("layer_norm.onnx"));
    let outcome = run_passes(&model, &["fuse-layer-norm", "dead-code"]);
    expect![[r#"
        input x: float [batch, seq, 8]
        init two: float []
        init eps: float []
        init weight: float [8]
        init bias: float [8]
        init z_scale: float [8]
        LayerNormalization(x, weight, bias) {axis=-1, epsilon=0.00001} -> y
        LayerNormalization(x, z_scale, bias) {axis=-1, epsilon=0.00001} -> z
        ReduceMean(x) {axes=[0]} -> c_mean
        Sub(x, c_mean) -> c_d
        Pow(c_d, two) -> c_sq
        ReduceMean(c_sq) {axes=[0]} -> c_var
        Add(c_var, eps) -> c_ve
        Sqrt(c_ve) -> c_sd
        Div(c_d, c_sd) -> w_out
        output y
        output z
        output w_out
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs_within(&model, &outcome.model, &[&[2, 5, 8]], 1e-5);
}

#[test]
fn merge_parallel_matmuls_joins_projections_of_one_input() {
    let model = load(&fixture("parallel_matmuls.onnx"));
    let outcome = run_passes(&model, &["merge-parallel-matmuls", "dead-code"]);
    expect![[r#"
        input x: float [batch, seq, 8]
        input t: float [n, 8]
        input fed: float [8, 3]
        init wk: float [8, 4]
        init wv: float [8, 6]
        init x_joined_weight: float [8, 14]
        init x_split_sizes: int64 [3]
        init x_joined_bias: float [14]
        MatMul(x, x_joined_weight) -> x_joined_product
        Add(x_joined_product, x_joined_bias) -> x_joined_sum
        Split(x_joined_sum, x_split_sizes) {axis=-1} -> q, k, v
        MatMul(t, wk) -> a
        MatMul(t, wv) -> b
        MatMul(x, fed) -> c
        output q
        output k
        output v
        output a
        output b
        output c
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs_within(&model, &outcome.model, &[&[2, 3, 8], &[4, 8], &[8, 3]], 1e-5);
}

#[test]
fn noop_keeps_a_value_two_readers_share_after_a_removal() {
    // `same_shape` goes first, sending both the graph-output Identity and the
    // Neg to `t`: `swap` must keep writing `t`, and `y` comes from the Identity.
    let model = load(&fixture("noop_shared_output.onnx"));
    let outcome = run_passes(&model, &["noop", "dead-code"]);
    expect![[r#"
        input x: float [batch, 3, 5]
        Transpose(x) {perm=[0, 2, 1]} -> t
        Identity(t) -> y
        Neg(t) -> z
        output z
        output y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    same_outputs(&model, &outcome.model, &[&[2, 3, 5]]);
}

#[test]
fn noop_drops_reductions_over_unit_axes() {
    let model = load(&fixture("noop_reduce.onnx"));
    let outcome = run_passes(&model, &["noop", "dead-code"]);
    expect![[r#"
        input x: float [batch, 4, 1, 1]
        init hw: int64 [2]
        init c: int64 [1]
        Relu(x) -> y
        ReduceMean(x, c) {keepdims=1} -> z
        ReduceL2(x, hw) {keepdims=1} -> w
        output y
        output z
        output w
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    same_outputs(&model, &outcome.model, &[&[3, 4, 1, 1]]);
}

/// OnnxSlim's node count for `stem`, recorded by `fixtures/optimize/measure_peers.py`.
fn onnxslim_nodes(stem: &str) -> u64 {
    let text = std::fs::read_to_string(fixture("peers.json")).unwrap();
    let peers: serde_json::Value = serde_json::from_str(&text).unwrap();
    let row = peers["models"].as_array().unwrap().iter().find(|r| r["model"] == stem);
    row.unwrap_or_else(|| panic!("{stem} is not in peers.json"))["onnxslim"]["nodes"].as_u64().unwrap()
}

#[test]
fn light_models_optimized_run_in_tract_to_their_stored_outputs_and_match_onnxslim_at_its_fold_policy() {
    use tract_onnx::prelude::*;
    // The light models compute their weights with ConstantOfShape, so the
    // stored output does not depend on the input: any input reproduces it.
    let (mut ours, mut theirs) = (0, 0);
    for path in common::light_models() {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let model = load(&path);
        // The default keeps ConstantOfShape weights over the 1 MiB fold budget as nodes.
        let optimized = optimize(&model, &Options::default()).unwrap().model;
        let bytes = diamond_exporters::onnx::encode_model(&optimized).unwrap();
        let plan = tract_onnx::onnx()
            .model_for_read(&mut bytes.as_slice())
            .unwrap()
            .into_optimized()
            .unwrap_or_else(|e| panic!("{stem}: tract cannot optimize the result: {e:?}"))
            .into_runnable()
            .unwrap();
        let inputs: TVec<TValue> = (0..plan.model().inputs.len())
            .map(|i| {
                let fact = plan.model().input_fact(i).unwrap();
                let shape: Vec<usize> = fact.shape.as_concrete().unwrap().to_vec();
                Tensor::zero_dt(fact.datum_type, &shape).unwrap().into_tvalue()
            })
            .collect();
        let got = plan.run(inputs).unwrap_or_else(|e| panic!("{stem}: tract cannot run the result: {e:?}"));
        let stored = path.with_file_name(format!("{stem}_output_0.pb"));
        let want = diamond_importers::tensor_file::read_tensor_file(&stored).unwrap();
        let want = diamond_runtime::Tensor::from_ir(&want).unwrap().to_f64s().unwrap();
        let got = got[0].cast_to::<f32>().unwrap();
        let got: Vec<f32> = got.to_plain_array_view::<f32>().unwrap().iter().copied().collect();
        assert_eq!(got.len(), want.len(), "{stem}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!((*g as f64 - w).abs() <= 1e-4 + 1e-3 * w.abs(), "{stem}: element {i}: {g} vs stored {w}");
        }
        // At OnnxSlim's own policy — fold every constant whatever its size
        // (it writes 575 MB for vgg19) — no model has more nodes than its result.
        let fold_all = Options { fold_limit: u64::MAX, ..Default::default() };
        let nodes = optimize(&model, &fold_all).unwrap().model.main_graph().unwrap().nodes.len() as u64;
        let slim = onnxslim_nodes(&stem);
        assert!(nodes <= slim, "{stem}: {nodes} nodes with --fold-limit none, OnnxSlim leaves {slim}");
        (ours, theirs) = (ours + nodes, theirs + slim);
    }
    assert!(ours <= theirs, "{ours} nodes in all, OnnxSlim {theirs}");
}

/// Runs one pass on a control-flow fixture: the rewritten model (bodies
/// included), verified on the reference executor at every setting tried.
fn pass_on_bodies(name: &str, passes: &[&str], expected: Expect) -> diamond_optimize::Outcome {
    let model = load(&fixture(name));
    let outcome = run_passes(&model, passes);
    expected.assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{:?}", outcome.verdict);
    outcome
}

#[test]
fn fold_if_inlines_the_branch_the_shapes_choose() {
    // x is [batch, 4]: `Shape(x)[1] == 4` holds whatever the batch.
    pass_on_bodies(
        "if_decided.onnx",
        &["fold-if", "dead-code"],
        expect![[r#"
            input x: float [batch, 4]
            init two: float []
            Relu(x) -> t_relu
            Mul(t_relu, two) -> t_out
            Identity(t_out) -> y
            output y
        "#]],
    );
}

#[test]
fn bodies_are_optimized_and_keep_reading_outer_values() {
    // Both branches lose what the passes remove; the then-branch reads `r`,
    // whose producer `noop` rewires in the main graph, and still finds it.
    let outcome = pass_on_bodies(
        "if_branches.onnx",
        &["constants", "noop", "dead-code"],
        expect![[r#"
            input x: float [batch, 4]
            input flag: bool []
            Relu(x) -> r
            If(flag) {else_branch=<graph>, then_branch=<graph>} -> y
              else_branch:
                Neg(x) -> e_out
                output e_out
              then_branch:
                Sigmoid(r) -> t_out
                output t_out
            output y
        "#]],
    );
    // Verification ran both branches: the flag false and true, at each symbol setting.
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(n)) if n >= 4), "{:?}", outcome.verdict);
    assert!(outcome.runs.iter().any(|r| r.graph == "if/then_branch" && r.pass == "constants"), "{:?}", outcome.runs);
    assert_eq!(outcome.before.values().sum::<usize>(), 10, "nodes are counted in bodies too");
    assert_eq!(outcome.after.values().sum::<usize>(), 4);
}

#[test]
fn verification_runs_both_branches_a_flag_picks() {
    // One branch computes something else: whichever it is, a run takes it
    // (verification gives a one-element flag both values).
    let model = load(&fixture("if_branches.onnx"));
    for (op, other) in [("Sigmoid", "Tanh"), ("Neg", "Relu")] {
        let mut tampered = model.clone();
        let node = tampered.graphs.values_mut().flat_map(|g| g.nodes.values_mut()).find(|n| n.op_type() == op).unwrap();
        node.op_type = Some(other.into());
        assert!(matches!(verify(&model, &tampered, 7), Verdict::Differs(_)), "{op} -> {other} not caught");
    }
}

#[test]
fn hoist_invariants_moves_what_every_iteration_recomputes() {
    pass_on_bodies(
        "loop_invariant.onnx",
        &["hoist-invariants"],
        expect![[r#"
            input x: float [batch, 4]
            input w: float [4]
            init trips: int64 []
            init two: float []
            Mul(w, two) -> w2
            Exp(w2) -> w2_exp
            Loop(trips, , x) {body=<graph>} -> y
              body:
                input i: int64 []
                input cond_in: bool []
                input acc_in: float [batch, 4]
                Add(acc_in, w2_exp) -> acc_out
                Identity(cond_in) -> cond_out
                output cond_out
                output acc_out
            output y
        "#]],
    );
}

#[test]
fn inline_functions_puts_a_call_s_nodes_in_its_place() {
    // The call's alpha reaches the Constant the body takes it through; the
    // function, called nowhere else, is gone, and its nodes are optimized
    // with the graph's own.
    let outcome = pass_on_bodies(
        "function_call.onnx",
        &["inline-functions", "constants", "noop", "dead-code"],
        expect![[r#"
            input x: float [batch, 4]
            init call/scale: float []
            Relu(x) -> call/r
            Mul(call/r, call/scale) -> y
            output y
        "#]],
    );
    assert!(outcome.model.functions.is_empty());
    assert_eq!(outcome.before.values().sum::<usize>(), 5, "the function's nodes are counted");
}

#[test]
fn fuse_hard_swish_finds_paddle_s_spelling() {
    // Opset 12 has no HardSwish: x · HardSigmoid(x); the second activation is a HardSigmoid alone.
    // (x + 3) / 6 and x / 6 + 0.5 round differently: within 1e-6.
    pass_on_within(
        "hard_swish_12.onnx",
        "fuse-hard-swish",
        &[&[3, 8]],
        1e-6,
        expect![[r#"
            input x: float [batch, 8]
            init three: float []
            init zero: float []
            init six: float []
            HardSigmoid(x) {alpha=0.16666667, beta=0.5} -> x_hard_sigmoid
            Mul(x, x_hard_sigmoid) -> hs
            HardSigmoid(hs) {alpha=0.16666667, beta=0.5} -> y
            output y
        "#]],
    );
    pass_on_within(
        "hard_swish_14.onnx",
        "fuse-hard-swish",
        &[&[3, 8]],
        1e-6,
        expect![[r#"
            input x: float [batch, 8]
            init three: float []
            init zero: float []
            init six: float []
            HardSwish(x) -> hs
            HardSigmoid(hs) {alpha=0.16666667, beta=0.5} -> y
            output y
        "#]],
    );
}

#[test]
fn fuse_linear_bn_folds_batch_norm_after_linear_layers() {
    // LeViT's Flatten(MatMul) normalized and reshaped back; a Gemm with transB and beta 0.5; a rank-2 MatMul.
    pass_on_within(
        "linear_bn.onnx",
        "fuse-linear-bn",
        &[&[3, 5, 8], &[3, 8], &[3, 8]],
        1e-5,
        expect![[r#"
            input x: float [batch, 5, 8]
            input h: float [batch, 8]
            input z: float [batch, 8]
            init w1: float [8, 6]
            init w2: float [6, 8]
            init c2: float [6]
            init w3: float [8, 6]
            init back: int64 [3]
            init scale0: float [6]
            init shift0: float [6]
            init mean0: float [6]
            init var0: float [6]
            init scale1: float [6]
            init shift1: float [6]
            init mean1: float [6]
            init var1: float [6]
            init scale2: float [6]
            init shift2: float [6]
            init mean2: float [6]
            init var2: float [6]
            init n1_fused_weight: float [8, 6]
            init n1_fused_bias: float [6]
            init y2_fused_weight: float [6, 8]
            init y2_fused_bias: float [6]
            init y3_fused_weight: float [8, 6]
            init y3_fused_bias: float [6]
            MatMul(x, n1_fused_weight) -> n1_unbiased
            Add(n1_unbiased, n1_fused_bias) -> m1
            Flatten(m1) {axis=2} -> n1
            Reshape(n1, back) -> y1
            Gemm(h, y2_fused_weight, y2_fused_bias) {transB=1, beta=1} -> y2
            MatMul(z, y3_fused_weight) -> y3_unbiased
            Add(y3_unbiased, y3_fused_bias) -> y3
            output y1
            output y2
            output y3
        "#]],
    );
}

#[test]
fn unflatten_linear_makes_gpt2_s_conv1d_a_matmul() {
    // The first Gemm (transB, alpha 0.5, beta 2) gets a new weight and bias; the second keeps its weight.
    pass_on_within(
        "unflatten_linear.onnx",
        "unflatten-linear",
        &[&[2, 3, 8]],
        1e-5,
        expect![[r#"
        input x: float [batch, seq, 8]
        init w1: float [6, 8]
        init c1: float [6]
        init w2: float [6, 4]
        init flat8: int64 [2]
        init flat6: int64 [2]
        init zero: int64 []
        init one: int64 []
        init axes0: int64 [1]
        init n6: int64 [1]
        init n4: int64 [1]
        init h_weight: float [8, 6]
        init h_bias: float [6]
        Shape(x) -> s
        Gather(s, zero) {axis=0} -> b
        Gather(s, one) {axis=0} -> t
        Unsqueeze(b, axes0) -> b1
        Unsqueeze(t, axes0) -> t1
        Concat(b1, t1, n6) {axis=0} -> target6
        Concat(b1, t1, n4) {axis=0} -> target4
        MatMul(x, h_weight) -> h_product
        Add(h_product, h_bias) -> h
        MatMul(h, w2) -> y
        output y
    "#]],
    );
}

#[test]
fn casts_to_float_after_unranked_lstm_and_squeeze_are_dropped() {
    // The inputs have no shape: the check still knows LSTM, Squeeze and Transpose keep float.
    let model = load(&fixture("unranked_casts.onnx"));
    let outcome = run_passes(&model, &["noop"]);
    expect![[r#"
        input x: float ?
        input z: float ?
        init w: float [1, 16, 3]
        init r: float [1, 16, 4]
        LSTM(x, w, r) {hidden_size=4} -> , h
        Squeeze(h) -> y
        Transpose(z) -> u
        output y
        output u
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    // verification needs stated input shapes; tract runs both at chosen ones
    assert!(
        matches!(&outcome.verdict, Some(Verdict::Skipped(why)) if why.contains("not stated")),
        "{:?}",
        outcome.verdict
    );
    same_outputs(&model, &outcome.model, &[&[5, 2, 3], &[2, 3]]);
}

#[test]
fn merge_parallel_convs_reparameterizes_repvgg_blocks() {
    // 3x3 + 1x1 + identity BatchNormalization, dense then depthwise: one 3x3 Conv each (sums reassociate: 1e-5).
    pass_on_within(
        "parallel_convs.onnx",
        "merge-parallel-convs",
        &[&[2, 4, 6, 6]],
        1e-5,
        expect![[r#"
        input x: float [batch, 4, 6, 6]
        init w3: float [4, 4, 3, 3]
        init b3: float [4]
        init w1: float [4, 4, 1, 1]
        init b1: float [4]
        init d3: float [4, 1, 3, 3]
        init e3: float [4]
        init d1: float [4, 1, 1, 1]
        init scale0: float [4]
        init shift0: float [4]
        init mean0: float [4]
        init var0: float [4]
        init scale1: float [4]
        init shift1: float [4]
        init mean1: float [4]
        init var1: float [4]
        init s2_merged_weight: float [4, 4, 3, 3]
        init s2_merged_bias: float [4]
        init y_merged_weight: float [4, 1, 3, 3]
        init y_merged_bias: float [4]
        Conv(x, s2_merged_weight, s2_merged_bias) {pads=[1, 1, 1, 1], kernel_shape=[3, 3]} -> s2
        Relu(s2) -> r
        Conv(r, y_merged_weight, y_merged_bias) {group=4, pads=[1, 1, 1, 1], kernel_shape=[3, 3]} -> y
        output y
    "#]],
    );
}

/// A deliberately wrong pass: every Relu of the graph it runs on becomes a Sigmoid.
struct ReluToSigmoid;

impl diamond_optimize::Pass for ReluToSigmoid {
    fn name(&self) -> &'static str {
        "relu-to-sigmoid"
    }

    fn run(&self, model: &mut diamond_ir::Model, a: &diamond_optimize::Analysis) -> usize {
        let graph = &mut model.graphs[a.main];
        let mut changed = 0;
        for n in graph.nodes.values_mut() {
            if n.op_type() == "Relu" {
                n.op_type = Some("Sigmoid".into());
                changed += 1;
            }
        }
        changed
    }
}

static RELU_TO_SIGMOID: ReluToSigmoid = ReluToSigmoid;

#[test]
fn bisect_names_the_pass_and_the_body_where_the_result_first_differs() {
    // if_decided's taken branch holds the only Relu: the wrong pass changes nothing in the main graph.
    let model = load(&fixture("if_decided.onnx"));
    let options = diamond_optimize::Options { verify: true, bisect: true, ..Default::default() };
    let err = diamond_optimize::optimize_with(&model, &options, &[&RELU_TO_SIGMOID]).unwrap_err();
    match err {
        diamond_optimize::OptimizeError::Verification { pass, why } => {
            assert_eq!(pass.as_deref(), Some("relu-to-sigmoid on if/then_branch"), "{why}");
        }
        other => panic!("expected a verification failure, got {other}"),
    }
}
