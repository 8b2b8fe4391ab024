//! tract-onnx, an independent ONNX engine, is the numeric oracle: every node
//! case it runs must give the same outputs from diamond's re-exported file as
//! from the original, and the stored outputs within tolerance.
//!
//! Each case is classified by what tract does with the original model (runs and
//! matches, cannot load, cannot run, disagrees with the stored outputs, ...).
//! The classification of every case is a snapshot in
//! `fixtures/tract-status.txt`: a case that changes class fails the test
//! (refresh with `UPDATE_EXPECT=1` after a tract upgrade, and read the diff).
//! Independently of the snapshot, the re-exported model must behave exactly as
//! the original: same class, and bit-identical outputs where tract runs it —
//! both the plain re-export and what `diamond convert` writes, with the
//! inferred types in `value_info` (which tract reads as shape facts).

mod common;

use diamond_infer::graph::{annotate, check_model, CheckOptions};
use std::fmt::Write;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use tract_onnx::pb::TensorProto;
use tract_onnx::prelude::*;

/// Relative tolerance on floating-point outputs (onnx's backend tests use 1e-3).
const RTOL: f64 = 1e-3;
/// Absolute tolerance on floating-point outputs.
const ATOL: f64 = 1e-5;

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Ran and every output matched the stored one.
    Pass(Vec<Tensor>),
    /// The test data uses sequences/optionals, which tract has no tensors for.
    NonTensorData,
    /// A stored tensor could not be read by tract.
    DataUnsupported(String),
    /// tract could not load or type the model.
    LoadFailed(String),
    /// tract loaded the model but failed to run it.
    RunFailed(String),
    /// tract ran the model and disagreed with the stored outputs.
    Mismatch(String),
    /// tract panicked.
    Panicked,
}

impl Outcome {
    fn class(&self) -> &'static str {
        match self {
            Outcome::Pass(_) => "pass",
            Outcome::NonTensorData => "non-tensor-data",
            Outcome::DataUnsupported(_) => "data-unsupported",
            Outcome::LoadFailed(_) => "load-failed",
            Outcome::RunFailed(_) => "run-failed",
            Outcome::Mismatch(_) => "mismatch",
            Outcome::Panicked => "panicked",
        }
    }

    /// The first line of the reason, shortened: the snapshot's second column.
    fn reason(&self) -> String {
        let text = match self {
            Outcome::DataUnsupported(r) | Outcome::LoadFailed(r) | Outcome::RunFailed(r) | Outcome::Mismatch(r) => r,
            _ => return String::new(),
        };
        let line = text.lines().next().unwrap_or("");
        let short: String = line.chars().take(120).collect();
        format!(" {short}")
    }
}

fn load_pb(path: &Path) -> Result<Tensor, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let proto: TensorProto = prost::Message::decode(&bytes[..]).map_err(|e| e.to_string())?;
    let resolver = tract_onnx::data_resolver::MmapDataResolver;
    tract_onnx::tensor::load_tensor(&resolver, &proto, None).map_err(|e| format!("{e:#}"))
}

fn run(model_bytes: &[u8], inputs: &[Tensor]) -> Result<Vec<Tensor>, Outcome> {
    let mut model =
        tract_onnx::onnx().model_for_read(&mut &model_bytes[..]).map_err(|e| Outcome::LoadFailed(format!("{e:#}")))?;
    for (i, t) in inputs.iter().enumerate() {
        model
            .set_input_fact(i, InferenceFact::dt_shape(t.datum_type(), t.shape()))
            .map_err(|e| Outcome::LoadFailed(format!("{e:#}")))?;
    }
    let plan =
        model.into_optimized().and_then(|m| m.into_runnable()).map_err(|e| Outcome::LoadFailed(format!("{e:#}")))?;
    let values: TVec<TValue> = inputs.iter().map(|t| t.clone().into_tvalue()).collect();
    let outputs = plan.run(values).map_err(|e| Outcome::RunFailed(format!("{e:#}")))?;
    Ok(outputs.into_iter().map(|v| v.into_tensor()).collect())
}

fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?}, stored {:?}", got.shape(), want.shape()));
    }
    if got.datum_type() != want.datum_type() {
        return Err(format!("type {:?}, stored {:?}", got.datum_type(), want.datum_type()));
    }
    if !got.datum_type().is_float() {
        return if got == want { Ok(()) } else { Err("values differ".to_string()) };
    }
    let (g, w) = (got.cast_to::<f64>().map_err(|e| e.to_string())?, want.cast_to::<f64>().map_err(|e| e.to_string())?);
    let (g, w) = (g.to_plain_array_view::<f64>().unwrap(), w.to_plain_array_view::<f64>().unwrap());
    for (i, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= ATOL + RTOL * b.abs();
        if !ok {
            // Five decimals: tract's wrong values differ in the last digits
            // between its AVX2 and AVX-512 kernels, and the snapshot below
            // holds this text.
            return Err(format!("element {i}: {a:.5}, stored {b:.5}"));
        }
    }
    Ok(())
}

fn evaluate(case: &Path, model_bytes: &[u8], non_tensor: bool) -> Outcome {
    if non_tensor {
        return Outcome::NonTensorData;
    }
    let load_all = |prefix| common::data_files(case, prefix).iter().map(|p| load_pb(p)).collect::<Result<Vec<_>, _>>();
    let (inputs, expected) = match (load_all("input"), load_all("output")) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return Outcome::DataUnsupported(e),
    };
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| run(model_bytes, &inputs)));
    let outputs = match result {
        Err(_) => return Outcome::Panicked,
        Ok(Err(outcome)) => return outcome,
        Ok(Ok(outputs)) => outputs,
    };
    if outputs.len() != expected.len() {
        return Outcome::Mismatch(format!("{} outputs, stored {}", outputs.len(), expected.len()));
    }
    for (i, (got, want)) in outputs.iter().zip(&expected).enumerate() {
        if let Err(e) = close(got, want) {
            return Outcome::Mismatch(format!("output {i}: {e}"));
        }
    }
    Outcome::Pass(outputs)
}

/// tract's one known deviation that declared types expose: it types the
/// output of a `ConstantOfShape` without a `value` attribute as f64, where the
/// ONNX spec (and onnxruntime, and onnx's shape inference) say float32, so
/// the correct float32 declaration of it or of anything computed from it
/// fails tract's analysis with this message.
fn tract_reads_constant_of_shape_as_f64(model: &diamond_ir::Model, outcome: &Outcome) -> bool {
    let untyped_fill = model
        .graphs
        .values()
        .any(|g| g.nodes.values().any(|n| n.op_type() == "ConstantOfShape" && n.attribute("value").is_none()));
    untyped_fill && matches!(outcome, Outcome::LoadFailed(m) if m.contains("Impossible to unify F32 with F64"))
}

/// Whether a case's graph has a non-tensor input or output (sequence, optional, map).
fn uses_non_tensor_values(model: &diamond_ir::Model) -> bool {
    let graph = model.main_graph().unwrap();
    graph.inputs.iter().chain(&graph.outputs).any(|info| {
        !matches!(info.ty.as_ref().and_then(|t| t.value.as_ref()), Some(diamond_ir::TypeValue::Tensor { .. }))
    })
}

fn bit_identical(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.shape() == y.shape() && x.datum_type() == y.datum_type() && (x == y || x.as_bytes() == y.as_bytes())
        })
}

#[test]
fn reexported_node_cases_give_tract_the_same_results() {
    // tract reports its failures through panics in a few places; keep the log quiet.
    std::panic::set_hook(Box::new(|_| {}));
    let mut snapshot = String::new();
    let mut divergent = Vec::new();
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    let mut typed_cases = 0;
    let mut tract_f64_cases = Vec::new();
    for case in common::node_cases() {
        let name = common::case_name(&case);
        let path = case.join("model.onnx");
        let original = std::fs::read(&path).unwrap();
        let model = diamond_importers::onnx::load_model(&path).unwrap();
        let reexported = diamond_exporters::onnx::encode_model(&model).unwrap();
        // What `diamond convert` writes: the inferred types in value_info
        // (tract reads them as shape facts), unless checking finds errors.
        let report = check_model(&model, &CheckOptions::default());
        let typed = (report.errors() == 0)
            .then(|| diamond_exporters::onnx::encode_model(&annotate(&model, &report.inferred)).unwrap());
        let non_tensor = uses_non_tensor_values(&model);
        let before = evaluate(&case, &original, non_tensor);
        let same_as_before = |after: &Outcome| match (&before, after) {
            (Outcome::Pass(a), Outcome::Pass(b)) => bit_identical(a, b),
            (a, b) => a.class() == b.class(),
        };
        let after = evaluate(&case, &reexported, non_tensor);
        if !same_as_before(&after) {
            divergent.push(format!("{name}: original {:?} / re-exported {:?}", before.class(), after.class()));
        }
        if let Some(typed) = typed {
            let after = evaluate(&case, &typed, non_tensor);
            if tract_reads_constant_of_shape_as_f64(&model, &after) {
                tract_f64_cases.push(name.clone());
            } else if !same_as_before(&after) {
                divergent.push(format!(
                    "{name}: original {:?} / with inferred value_info {:?}{}",
                    before.class(),
                    after.class(),
                    after.reason()
                ));
            }
            typed_cases += 1;
        }
        *counts.entry(before.class()).or_default() += 1;
        let _ = writeln!(snapshot, "{name} {}{}", before.class(), before.reason());
    }
    let _ = std::panic::take_hook();
    let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    eprintln!("tract on the node suite: {}; {typed_cases} also with inferred value_info", summary.join(", "));
    eprintln!(
        "{} typed cases not compared: tract types a ConstantOfShape without `value` as f64 (ONNX: float32) \
         and refuses the declared float32: {}",
        tract_f64_cases.len(),
        tract_f64_cases.join(" ")
    );
    assert!(tract_f64_cases.len() < 80, "the tract exception stays narrow: {}", tract_f64_cases.len());
    assert!(typed_cases > 1500, "most node cases check clean and are run typed: {typed_cases}");
    assert!(divergent.is_empty(), "re-export changed tract's results:\n{}", divergent.join("\n"));

    let snapshot_path = common::root().join("fixtures/tract-status.txt");
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(&snapshot_path, &snapshot).unwrap();
    }
    let expected = std::fs::read_to_string(&snapshot_path).unwrap_or_default();
    let changed: Vec<String> = expected
        .lines()
        .zip(snapshot.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("expected `{a}`, got `{b}`"))
        .collect();
    assert!(
        changed.is_empty() && expected.lines().count() == snapshot.lines().count(),
        "tract's classification of the node cases changed ({} lines differ; UPDATE_EXPECT=1 to accept):\n{}",
        changed.len(),
        changed.join("\n")
    );
}
