//! `diamond check` on real architectures: the nine light models (static
//! shapes) and the exported-style transformer and CNN with dynamic axes
//! (`fixtures/check/exported_*.onnx`). Every value must come out complete —
//! an element type and every dim a number or an expression over the input
//! symbols — with no error, and no warning but the transformer's one
//! assumption (its sequence fits its position table).

mod common;

use diamond_infer::graph::{check_model, CheckOptions, DimReport};
use std::path::Path;

fn incomplete(path: &Path) -> (Vec<String>, Vec<String>) {
    let model = diamond_importers::onnx::load_model(path).expect("fixture loads");
    let report = check_model(&model, &CheckOptions::default());
    let diagnostics = report.diagnostics.iter().map(|d| d.to_string()).collect();
    let holes = report
        .values
        .iter()
        .filter(|v| v.dtype.is_none() || v.shape.as_ref().is_none_or(|s| s.contains(&DimReport::Unknown)))
        .map(|v| format!("{}: {:?} {}", v.name, v.dtype, v.shape_text()))
        .collect();
    (diagnostics, holes)
}

#[test]
fn light_models_check_complete_and_clean() {
    for path in common::light_models() {
        let (diagnostics, holes) = incomplete(&path);
        assert!(diagnostics.is_empty(), "{}: {diagnostics:#?}", path.display());
        assert!(holes.is_empty(), "{}: incomplete values {holes:#?}", path.display());
    }
}

#[test]
fn exported_models_with_dynamic_axes_are_symbolically_complete() {
    for name in ["exported_transformer.onnx", "exported_cnn.onnx"] {
        let path = common::root().join("fixtures/check").join(name);
        let (diagnostics, holes) = incomplete(&path);
        // The transformer's learned positions are `Gather(table[512], Range(0, seq))`:
        // valid only while seq ≤ 512, the one assumption it makes. No error, nothing else.
        let expected = usize::from(name == "exported_transformer.onnx");
        assert_eq!(diagnostics.len(), expected, "{name}: {diagnostics:#?}");
        for d in &diagnostics {
            assert!(d.starts_with("warning[implied-bound]") && d.contains("seq ≤ 512"), "{name}: {d}");
        }
        assert!(holes.is_empty(), "{name}: incomplete values {holes:#?}");
    }
}
