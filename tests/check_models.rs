//! `diamond check` on real architectures: the nine light models (static
//! shapes) and the exported-style transformer and CNN with dynamic axes
//! (`fixtures/check/exported_*.onnx`). Every value must come out complete —
//! an element type and every dim a number or an expression over the input
//! symbols — with no diagnostics.

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
        assert!(diagnostics.is_empty(), "{name}: {diagnostics:#?}");
        assert!(holes.is_empty(), "{name}: incomplete values {holes:#?}");
    }
}
