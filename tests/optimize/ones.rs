//! `inline-ones` on the ones fixtures (`fixtures/optimize/gen_ones.py`):
//! each rewritten graph as text, with no uniform tensor of more than one
//! element left, no more nodes than before, and the original's outputs on
//! the reference executor (at three settings of the symbols) and under
//! tract (where it runs the operators) at several input shapes; the
//! controls come out unchanged; `check` notes each ones-vector the pass
//! folds, and `optimize --stats` counts them.

use super::{diamond, fixture, load, run_passes, same_outputs_within};
use diamond_optimize::text::graph_text;
use diamond_optimize::verify::Verdict;
use diamond_optimize::{optimize, Options};
use expect_test::{expect, Expect};

/// `inline-ones` (then `dead-code`) on a ones fixture: the rewritten graph,
/// no uniform tensor of more than one element left, no more nodes than
/// before, and the original's outputs under tract at each set of shapes.
fn inline_ones(name: &str, shape_sets: &[&[&[usize]]], expected: Expect) {
    inline_ones_within(name, shape_sets, 1e-4, expected)
}

/// [`inline_ones`], tract's outputs compared up to `tolerance` (float16 sums round).
fn inline_ones_within(name: &str, shape_sets: &[&[&[usize]]], tolerance: f32, expected: Expect) {
    let model = load(&fixture(name));
    let outcome = run_passes(&model, &["inline-ones", "dead-code"]);
    expected.assert_eq(&graph_text(&outcome.model));
    assert!(matches!(outcome.verdict, Some(Verdict::Agrees(_))), "{name}: {:?}", outcome.verdict);
    let g = outcome.model.main_graph().unwrap();
    assert!(g.nodes.len() <= model.main_graph().unwrap().nodes.len(), "{name}: the node count grew");
    let a = diamond_optimize::Analysis::new(&outcome.model).unwrap();
    for (_, v) in
        g.values.iter().enumerate().map(|(i, _)| ((), <diamond_ir::ValueId as diamond_ir::entity::EntityId>::new(i)))
    {
        let many = a
            .shape(&outcome.model, v)
            .is_some_and(|s| s.iter().any(|d| *d != diamond_infer::graph::DimReport::Known(1)));
        if many && !a.inputs.contains(&v) {
            assert!(
                diamond_optimize::uniform::uniform(&outcome.model, &a, v).is_none(),
                "{name}: {} is still uniform",
                g.value_name(v)
            );
        }
    }
    for shapes in shape_sets {
        same_outputs_within(&model, &outcome.model, shapes, tolerance);
    }
}

/// `inline-ones` alone leaves the fixture as it is: no rewrite at all.
fn left_alone(name: &str) {
    let model = load(&fixture(name));
    let outcome = run_passes(&model, &["inline-ones"]);
    assert!(outcome.runs.is_empty(), "{name}: {:?}", outcome.runs);
    assert_eq!(graph_text(&outcome.model), graph_text(&model), "{name}");
}

#[test]
fn inline_ones_turns_a_matmul_by_ones_into_a_row_sum() {
    inline_ones(
        "ones_matmul.onnx",
        &[&[&[1, 1, 8]], &[&[3, 7, 8]]],
        expect![[r#"
        input x: float [batch, seq, 8]
        init rowsum_axes: int64 [1]
        ReduceSum(x, rowsum_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_scales_a_uniform_vector() {
    inline_ones(
        "ones_matmul_scaled.onnx",
        &[&[&[1, 8]], &[&[5, 8]], &[&[2, 3]]],
        expect![[r#"
        input x: float [batch, k]
        init halfsum_axes: int64 [1]
        init halfsum_scale: float []
        ReduceSum(x, halfsum_axes) {keepdims=0} -> halfsum_sum
        Mul(halfsum_sum, halfsum_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_ones_over_n_into_a_mean() {
    inline_ones(
        "ones_matmul_mean.onnx",
        &[&[&[1, 8]], &[&[5, 8]]],
        expect![[r#"
        input x: float [batch, 8]
        init rowmean_axes: int64 [1]
        ReduceMean(x, rowmean_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_repeats_the_sum_when_the_ones_have_columns() {
    inline_ones(
        "ones_matmul_wide.onnx",
        &[&[&[1, 1]], &[&[3, 7]]],
        expect![[r#"
        input x: float [batch, seq]
        init rowsum_axes: int64 [1]
        init rowsum_repeat: int64 [1]
        ReduceSum(x, rowsum_axes) {keepdims=1} -> rowsum_sum
        Expand(rowsum_sum, rowsum_repeat) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_sums_columns_for_ones_on_the_left() {
    inline_ones(
        "ones_matmul_left.onnx",
        &[&[&[1, 6, 5]], &[&[3, 6, 5]]],
        expect![[r#"
        input x: float [batch, 6, 5]
        init colsum_axes: int64 [1]
        ReduceSum(x, colsum_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_sees_ones_sized_by_a_symbolic_axis() {
    inline_ones(
        "ones_symbolic.onnx",
        &[&[&[1, 1]], &[&[3, 7]], &[&[2, 33]]],
        expect![[r#"
        input x: float [batch, seq]
        init rowsum_axes: int64 [1]
        ReduceSum(x, rowsum_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_multiplies_by_a_scalar_instead_of_a_uniform_tensor() {
    inline_ones(
        "ones_mul.onnx",
        &[&[&[1, 8]], &[&[4, 8]]],
        expect![[r#"
        input x: float [batch, 8]
        init twos_scalar: float []
        Mul(x, twos_scalar) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_an_einsum_with_ones_into_a_sum() {
    inline_ones(
        "ones_einsum.onnx",
        &[&[&[1, 4, 6]], &[&[3, 4, 6]]],
        expect![[r#"
        input x: float [batch, 4, 6]
        init einsum_axes: int64 [1]
        ReduceSum(x, einsum_axes) {keepdims=0} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_gemm_with_a_uniform_weight_into_a_scaled_sum() {
    inline_ones(
        "ones_gemm.onnx",
        &[&[&[1, 6]], &[&[4, 6]], &[&[3, 2]]],
        expect![[r#"
        input x: float [batch, k]
        init gemm_axes: int64 [1]
        init gemm_scale: float []
        ReduceSum(x, gemm_axes) {keepdims=1} -> gemm_sum
        Mul(gemm_sum, gemm_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_works_on_integers() {
    // tract cannot run an int64 MatMul: the rewritten model is checked against row sums computed here.
    use tract_onnx::prelude::*;
    let model = load(&fixture("ones_matmul_int64.onnx"));
    let outcome = run_passes(&model, &["inline-ones", "dead-code"]);
    expect![[r#"
        input x: int64 [batch, 5]
        init rowsum_axes: int64 [1]
        ReduceSum(x, rowsum_axes) {keepdims=1} -> y
        output y
    "#]]
    .assert_eq(&graph_text(&outcome.model));
    let x: Vec<i64> = (0..15).map(|i| i * 7 - 40).collect();
    let bytes = diamond_exporters::onnx::encode_model(&outcome.model).unwrap();
    let plan = tract_onnx::onnx()
        .model_for_read(&mut bytes.as_slice())
        .and_then(|m| m.with_input_fact(0, InferenceFact::dt_shape(i64::datum_type(), [3, 5])))
        .and_then(|m| m.into_optimized())
        .and_then(|m| m.into_runnable())
        .unwrap();
    let input = tract_ndarray::ArrayD::from_shape_vec(vec![3, 5], x.clone()).unwrap().into_tensor();
    let got = plan.run(tvec![input.into_tvalue()]).unwrap();
    let want: Vec<i64> = x.chunks(5).map(|r| r.iter().sum()).collect();
    assert_eq!(got[0].to_plain_array_view::<i64>().unwrap().iter().copied().collect::<Vec<_>>(), want);
}

#[test]
fn inline_ones_leaves_ones_that_are_a_graph_input() {
    let model = load(&fixture("ones_input.onnx"));
    let outcome = optimize(&model, &Options::default()).unwrap();
    assert_eq!(graph_text(&outcome.model), graph_text(&model));
}

#[test]
fn check_notes_each_ones_vector_at_its_consumer() {
    let path = fixture("ones_symbolic.onnx");
    let o = diamond(&["check", path.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes: Vec<&serde_json::Value> =
        v["diagnostics"].as_array().unwrap().iter().filter(|d| d["code"] == "ones-vector").collect();
    assert_eq!(notes.len(), 1, "{v:#}");
    assert_eq!(notes[0]["severity"], "info");
    assert_eq!(notes[0]["node"], "rowsum");
    assert_eq!(notes[0]["operand"], "input 1");
    assert_eq!(
        notes[0]["message"],
        "MatMul 'rowsum' multiplies by ones ('ones') only to sum axis 1 of 'x'; `diamond optimize` makes it a ReduceSum"
    );
    // A ones tensor the caller feeds is not constant: no note.
    let o = diamond(&["check", fixture("ones_input.onnx").to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["diagnostics"].as_array().unwrap().iter().all(|d| d["code"] != "ones-vector"));
}

#[test]
fn inline_ones_sums_the_columns_of_a_gemm_with_uniform_a_and_both_transposed() {
    inline_ones(
        "ones_gemm_left.onnx",
        &[&[&[1, 6]], &[&[4, 6]], &[&[2, 3]]],
        expect![[r#"
        input x: float [batch, k]
        init gemm_axes: int64 [1]
        init gemm_repeat: int64 [2]
        ReduceSum(x, gemm_axes) {keepdims=0} -> gemm_sum
        Expand(gemm_sum, gemm_repeat) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_adds_a_gemms_scaled_c_after_the_sum() {
    inline_ones(
        "ones_gemm_bias.onnx",
        &[&[&[1, 6]], &[&[5, 6]], &[&[2, 3]]],
        expect![[r#"
        input x: float [batch, k]
        init gemm_axes: int64 [1]
        init gemm_scale: float []
        init gemm_bias: float [4]
        ReduceSum(x, gemm_axes) {keepdims=1} -> gemm_sum
        Mul(gemm_sum, gemm_scale) -> gemm_scaled
        Add(gemm_scaled, gemm_bias) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_transposes_the_sum_of_a_gemm_with_trans_a() {
    inline_ones(
        "ones_gemm_transa.onnx",
        &[&[&[6, 1]], &[&[6, 4]], &[&[3, 2]]],
        expect![[r#"
        input x: float [k, batch]
        init gemm_axes: int64 [1]
        ReduceSum(x, gemm_axes) {keepdims=1} -> gemm_sum
        Transpose(gemm_sum) {perm=[1, 0]} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_works_on_an_integer_gemm() {
    // tract cannot translate an int32 Gemm with a C: the reference executor alone checks it.
    inline_ones(
        "ones_gemm_int32.onnx",
        &[],
        expect![[r#"
        input x: int32 [batch, k]
        init c: int32 [2]
        init gemm_axes: int64 [1]
        ReduceSum(x, gemm_axes) {keepdims=1} -> gemm_sum
        Add(gemm_sum, c) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_leaves_a_gemm_whose_rewrite_would_add_nodes() {
    left_alone("ones_gemm_stored_bias.onnx");
}

#[test]
fn inline_ones_turns_a_conv_with_a_ones_kernel_into_a_padded_window_sum() {
    inline_ones(
        "ones_conv.onnx",
        &[&[&[1, 4, 1, 1]], &[&[2, 4, 5, 7]], &[&[1, 3, 4, 4]]],
        expect![[r#"
        input x: float [batch, c, h, w]
        init c_axes: int64 [1]
        init c_scale: float []
        init c_bias: float [2, 1, 1]
        ReduceSum(x, c_axes) {keepdims=1} -> c_sum
        AveragePool(c_sum) {kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1} -> c_window
        Mul(c_window, c_scale) -> c_scaled
        Add(c_scaled, c_bias) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_1x1_ones_conv_into_a_channel_sum() {
    inline_ones(
        "ones_conv_1x1.onnx",
        &[&[&[1, 8, 1, 1]], &[&[2, 8, 3, 5]]],
        expect![[r#"
        input x: float [batch, 8, h, w]
        init c_axes: int64 [1]
        ReduceSum(x, c_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_depthwise_conv_of_quarters_into_an_average_pool() {
    inline_ones(
        "ones_conv_depthwise.onnx",
        &[&[&[1, 3, 8, 8]], &[&[2, 3, 8, 8]]],
        expect![[r#"
        input x: float [batch, 3, 8, 8]
        AveragePool(x) {kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 0, 0], count_include_pad=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_works_on_a_float16_conv() {
    inline_ones_within(
        "ones_conv_f16.onnx",
        &[&[&[1, 2, 5, 5]], &[&[3, 4, 5, 5]]],
        0.01,
        expect![[r#"
        input x: float16 [batch, c, 5, 5]
        init c_axes: int64 [1]
        init c_scale: float16 []
        ReduceSum(x, c_axes) {keepdims=1} -> c_sum
        Mul(c_sum, c_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_passes_a_convs_dilations_to_the_average_pool_from_opset_19() {
    inline_ones(
        "ones_conv_dilated.onnx",
        &[&[&[1, 2, 7, 7]], &[&[2, 2, 7, 7]]],
        expect![[r#"
        input x: float [batch, 2, 7, 7]
        AveragePool(x) {kernel_shape=[3, 3], strides=[1, 1], pads=[2, 2, 2, 2], count_include_pad=1, dilations=[2, 2]} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_leaves_convs_it_cannot_repeat_exactly() {
    left_alone("ones_conv_controls.onnx");
}

#[test]
fn inline_ones_sums_x_instead_of_x_times_ones() {
    inline_ones(
        "ones_reduce_mul.onnx",
        &[&[&[1, 1, 8]], &[&[2, 5, 8]]],
        expect![[r#"
        input x: float [batch, seq, 8]
        init sum_axes: int64 [1]
        ReduceSum(x, sum_axes) {keepdims=0} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_scales_and_expands_the_sum_of_x_widened_by_integer_twos() {
    inline_ones(
        "ones_reduce_mul_wide.onnx",
        &[&[&[1, 1, 8]], &[&[3, 1, 8]]],
        expect![[r#"
        input x: int64 [batch, 1, 8]
        init sum_axes: int64 [1]
        init sum_scale: int64 []
        init sum_repeat: int64 [2]
        ReduceSum(x, sum_axes) {keepdims=0} -> sum_sum
        Mul(sum_sum, sum_scale) -> sum_scaled
        Expand(sum_scaled, sum_repeat) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_counts_the_copies_a_uniform_factor_makes_along_a_summed_axis() {
    inline_ones(
        "ones_reduce_sum_widened.onnx",
        &[&[&[1, 1, 8]], &[&[3, 1, 8]]],
        expect![[r#"
        input x: float [batch, 1, 8]
        init sum_scale: float []
        Mul(x, sum_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_counts_the_copies_along_an_axis_the_uniform_factor_adds() {
    inline_ones(
        "ones_reduce_sum_added_axis.onnx",
        &[&[&[1, 8]], &[&[4, 8]]],
        expect![[r#"
        input x: float [batch, 8]
        init sum_scale: float []
        Mul(x, sum_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_float16_mean_over_widened_halves_into_a_scale() {
    inline_ones_within(
        "ones_reduce_mean_f16.onnx",
        &[&[&[1, 1, 8]], &[&[3, 1, 8]]],
        1e-2,
        expect![[r#"
        input x: float16 [batch, 1, 8]
        init mean_scale: float16 []
        Mul(x, mean_scale) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_sum_divided_by_its_symbolic_count_into_a_mean() {
    inline_ones(
        "ones_sum_div.onnx",
        &[&[&[1, 1, 8]], &[&[2, 5, 8]]],
        expect![[r#"
        input x: float [batch, seq, 8]
        init div_axes: int64 [2]
        ReduceMean(x, div_axes) {keepdims=1} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_turns_a_float16_sum_times_one_eighth_into_a_mean() {
    inline_ones_within(
        "ones_sum_scale_f16.onnx",
        &[&[&[1, 8]], &[&[4, 8]]],
        1e-2,
        expect![[r#"
        input x: float16 [batch, 8]
        init scale_axes: int64 [1]
        ReduceMean(x, scale_axes) {keepdims=0} -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_leaves_sums_divided_by_something_else() {
    left_alone("ones_sum_div_controls.onnx");
}

#[test]
fn inline_ones_drops_added_zeros() {
    inline_ones(
        "ones_add_zeros.onnx",
        &[&[&[1, 8]], &[&[3, 8]]],
        expect![[r#"
        input x: float [batch, 8]
        Relu(x) -> y
        Identity(x) -> z
        output y
        output z
    "#]],
    );
}

#[test]
fn inline_ones_subtracts_an_integer_scalar() {
    inline_ones(
        "ones_sub_int32.onnx",
        &[&[&[1, 8]], &[&[3, 8]]],
        expect![[r#"
        input x: int32 [batch, 8]
        init threes_scalar: int32 []
        Sub(x, threes_scalar) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_divides_by_a_float16_scalar() {
    inline_ones_within(
        "ones_div_f16.onnx",
        &[&[&[1, 4]], &[&[3, 4]]],
        0.0,
        expect![[r#"
        input x: float16 [batch, 4]
        init fours_scalar: float16 []
        Div(x, fours_scalar) -> y
        output y
    "#]],
    );
}

#[test]
fn inline_ones_expands_a_scalar_result_to_the_uniform_operands_shape() {
    inline_ones(
        "ones_add_expand.onnx",
        &[&[&[1, 1]], &[&[4, 1]]],
        expect![[r#"
        input x: float [batch, 1]
        init six: int64 [1]
        init u_scalar: float []
        Shape(x) {end=1, start=0} -> batch
        Concat(batch, six) {axis=0} -> u_shape
        Add(x, u_scalar) -> add_narrow
        Expand(add_narrow, u_shape) -> y1
        Expand(x, u_shape) -> y2
        output y1
        output y2
    "#]],
    );
}

#[test]
fn inline_ones_leaves_fed_ones_and_stored_ones_that_widen() {
    left_alone("ones_elementwise_controls.onnx");
}

/// The `ones-vector` notes `check` gives for a fixture, by node name.
fn notes(name: &str) -> Vec<(String, String)> {
    let o = diamond(&["check", fixture(name).to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{name}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["code"] == "ones-vector")
        .map(|d| (d["node"].as_str().unwrap_or("").to_string(), d["message"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn check_names_the_window_gemm_and_reduction_patterns() {
    let found: Vec<String> =
        ["ones_conv.onnx", "ones_conv_depthwise.onnx", "ones_gemm_left.onnx", "ones_reduce_mul.onnx"]
            .iter()
            .flat_map(|f| notes(f))
            .map(|(node, message)| format!("{node}: {message}"))
            .collect();
    expect![[r#"
        [
            "c: Conv 'c' multiplies by ones ('w') only to sum a 3x3 window over c channels of 'x'; `diamond optimize` makes it a ReduceSum, an AveragePool, a Mul and an Add",
            "c: Conv 'c' multiplies by a uniform 0.25 ('quarters') only to sum a 2x2 window of each channel of 'x'; `diamond optimize` makes it an AveragePool",
            "gemm: Gemm 'gemm' multiplies by a uniform 0.5 ('a') only to sum axis 1 of 'x'; `diamond optimize` makes it a ReduceSum and an Expand",
            "sum: ReduceSum 'sum' sums 'x' times ones ('ones') over axis 2; `diamond optimize` makes it a ReduceSum",
        ]
    "#]].assert_debug_eq(&found);
    // Controls: nothing the pass leaves gets a note.
    for control in ["ones_conv_controls.onnx", "ones_gemm_stored_bias.onnx", "ones_elementwise_controls.onnx"] {
        assert!(notes(control).is_empty(), "{control}");
    }
}

#[test]
fn optimize_stats_count_the_ones_vectors_inlined() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.onnx");
    let model = fixture("ones_add_expand.onnx");
    let o = diamond(&["optimize", model.to_str().unwrap(), "-o", out.to_str().unwrap(), "--stats"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("ones-vectors inlined (inline-ones rewrites): 2\n"), "{text}");
    let o = diamond(&["optimize", model.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ones_inlined"], 2);
    // Nothing to inline: 0.
    let plain = fixture("dead_code.onnx");
    let o = diamond(&["optimize", plain.to_str().unwrap(), "-o", out.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ones_inlined"], 0);
}
