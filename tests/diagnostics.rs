//! One model per diagnostic code with one injected bug, and its clean twin
//! (`fixtures/diagnostics/`, made by `gen_diagnostics.py`): each bug is found
//! exactly once, with the expected code, at the expected node; no twin gets
//! any diagnostic.

mod common;

use diamond_infer::graph::{check_model, CheckOptions};
use diamond_infer::Diagnostic;

fn diagnostics(stem: &str) -> Vec<Diagnostic> {
    let path = common::root().join("fixtures/diagnostics").join(format!("{stem}.onnx"));
    let model = diamond_importers::onnx::load_model(&path).expect("fixture loads");
    check_model(&model, &CheckOptions::default()).diagnostics
}

/// Each buggy model: its stem, the code, the node, and the operand axis the
/// diagnostic must name (`None` for `-`).
fn expected() -> Vec<(String, String, String, Option<usize>)> {
    let text = std::fs::read_to_string(common::root().join("fixtures/diagnostics/expected.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let parts: Vec<&str> = l.split_whitespace().collect();
            let axis = parts.get(3).and_then(|a| a.parse().ok());
            (parts[0].to_string(), parts[1].to_string(), parts[2].to_string(), axis)
        })
        .collect()
}

#[test]
fn each_injected_bug_is_found_once_at_its_node() {
    let cases = expected();
    assert!(cases.len() >= 12, "one case per code: {cases:?}");
    for (stem, code, node, axis) in cases {
        let found = diagnostics(&stem);
        assert_eq!(found.len(), 1, "{stem}: exactly one diagnostic, got {found:#?}");
        let d = &found[0];
        assert_eq!(d.code.as_str(), code, "{stem}: {d}");
        assert_eq!(d.node.as_deref(), Some(node.as_str()), "{stem}: {d}");
        assert!(d.node_index.is_some() && d.op.is_some(), "{stem}: located at a node: {d:?}");
        assert_eq!(d.axis, axis, "{stem}: the operand axis: {d}");
    }
}

#[test]
fn clean_twins_give_no_diagnostic() {
    for (stem, ..) in expected() {
        let found = diagnostics(&format!("{stem}.clean"));
        assert!(found.is_empty(), "{stem}.clean: {found:#?}");
    }
}

#[test]
fn a_bug_inside_a_subgraph_names_the_subgraph() {
    let found = diagnostics("dim-mismatch-in-subgraph");
    assert_eq!(found[0].graph.as_deref(), Some("branch/then_branch/"), "{:?}", found[0]);
}

#[test]
fn each_clashing_size_is_traced_back_to_where_it_was_stated() {
    let found = diagnostics("dim-mismatch");
    let notes = &found[0].notes;
    assert!(notes.iter().any(|n| n == "48 comes from initializer 'w2' axis 0"), "{notes:#?}");
    assert!(
        notes.iter().any(|n| n == "64 comes from initializer 'w1' axis 1, via MatMul 'fc1' → Relu 'act'"),
        "{notes:#?}"
    );
    let conv = diagnostics("dim-mismatch-conv-weight");
    assert!(
        conv[0].notes.iter().any(|n| n == "8 comes from initializer 'w1' axis 0, via Conv 'conv1' → Relu 'relu1'"),
        "{:#?}",
        conv[0].notes
    );
}

// ---- audit precision (issue 13, item 4) ----

#[test]
fn a_conflict_in_a_loop_body_is_reported_once_however_often_the_body_is_lowered() {
    let found = diagnostics("loop-body-conflict");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].graph.as_deref(), Some("loop/body/"), "{:?}", found[0]);
    assert_eq!(found[0].operand.as_deref(), Some("input 1"), "{:?}", found[0]);
}

#[test]
fn normalization_parameters_are_checked_against_what_they_scale() {
    // (stem, operand, the two sizes the message names)
    let cases = [
        ("layernorm-scale", "input 1 (Scale)", ("6", "8")),
        ("rmsnorm-scale", "input 1 (scale)", ("4", "3")),
        ("groupnorm18-scale", "input 1 (scale)", ("6", "2")),
        ("groupnorm21-scale", "input 1 (scale)", ("2", "6")),
        ("instancenorm-bias", "input 2 (B)", ("4", "3")),
        ("batchnorm-var", "input 4 (var)", ("5", "3")),
        ("skiplayernorm-gamma", "input 2 (gamma)", ("6", "8")),
    ];
    for (stem, operand, (a, b)) in cases {
        let found = diagnostics(stem);
        assert_eq!(found.len(), 1, "{stem}: {found:#?}");
        let d = &found[0];
        assert_eq!(d.operand.as_deref(), Some(operand), "{stem}: {d:?}");
        assert_eq!(d.axis, Some(0), "{stem}: {d:?}");
        assert!(d.message.contains(a) && d.message.contains(b), "{stem}: both sizes in {:?}", d.message);
        let name = operand.split('(').nth(1).unwrap().trim_end_matches(')');
        assert!(d.notes.iter().any(|n| n.contains(name)), "{stem}: a note names {name}: {:#?}", d.notes);
    }
}

#[test]
fn a_problem_with_an_input_tensor_is_not_an_invalid_attribute() {
    let expand = diagnostics("expand-shape");
    assert_eq!(expand[0].code.as_str(), "broadcast-conflict", "{:?}", expand[0]);
    assert_eq!(expand[0].operand.as_deref(), Some("shape values (input 1)"), "{:?}", expand[0]);
    let conv = diagnostics("conv-weight-rank");
    assert_eq!(conv[0].code.as_str(), "rank-conflict", "{:?}", conv[0]);
    assert_eq!(conv[0].operand.as_deref(), Some("input 1"), "{:?}", conv[0]);
}

#[test]
fn a_reshape_splitting_symbolic_dims_into_fixed_factors_states_its_divisibility() {
    let found = diagnostics("reshape-divisibility");
    let d = &found[0];
    assert_eq!(d.severity, diamond_infer::Severity::Warning, "{d:?}");
    assert_eq!(d.operand.as_deref(), Some("input 1"), "{d:?}");
    assert!(d.message.ends_with("the reshape holds only when batch*seq is divisible by 2"), "{}", d.message);
}

#[test]
fn one_wrong_attribute_gives_one_error_whose_help_names_the_fix() {
    let gemm = diagnostics("gemm-transb");
    assert_eq!(gemm[0].help.as_deref(), Some("set transB=1 (currently 0): B [4, 3] is [N, K]"), "{:#?}", gemm[0]);
    assert!(
        gemm[0].notes.iter().any(|n| n.starts_with("same cause, also at input 2, axis 0: error[broadcast-conflict]")),
        "the C conflict is a note of the one error: {:#?}",
        gemm[0].notes
    );
    let concat = diagnostics("concat-axis");
    assert_eq!(
        concat[0].help.as_deref(),
        Some("set axis=1 (currently 0): the inputs [2, 3], [2, 5] agree on every axis but 1"),
        "{:#?}",
        concat[0]
    );
    let reduce = diagnostics("reduce-keepdims");
    assert_eq!(
        reduce[0].help.as_deref(),
        Some("set keepdims=1 on ReduceMean 'mean' (currently 0): its output [2, 3, 1] then broadcasts with the other operands"),
        "{:#?}",
        reduce[0]
    );
    assert!(reduce[0].notes.iter().any(|n| n.starts_with("same cause, also at input 1")), "{:#?}", reduce[0].notes);
    let transpose = diagnostics("transpose-perm");
    assert_eq!(
        transpose[0].help.as_deref(),
        Some("set perm=[0, 1, 2] on Transpose 't' (currently [0, 2, 1]): its output [2, 3, 4] then broadcasts with the other operands"),
        "{:#?}",
        transpose[0]
    );
    let gather = diagnostics("gather-axis");
    assert_eq!(
        gather[0].help.as_deref(),
        Some("set axis=0 on Gather 'rows' (currently 1): its output [3, 4] then broadcasts with the other operands"),
        "{:#?}",
        gather[0]
    );
}
