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
