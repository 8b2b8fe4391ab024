//! Conformance of `diamond check` on the ONNX node suite.
//!
//! For every `fixtures/onnx-node` case, every stated shape except the graph
//! inputs' is stripped (value_info removed, output types removed), the model
//! is checked, and each tensor graph output's inferred element type and shape
//! are compared with the stored expected output, in two modes: the model
//! alone, and with the test inputs bound as constants (`--bind`). Each
//! output is *exact* (type and every dim right), *partial* (rank right and
//! every known dim and type right), *unknown* (rank unknown, nothing wrong)
//! or *wrong*. Any wrong output fails the test; the counts are printed.
//!
//! The same comparison runs over `fixtures/ops-extra` (the operators the
//! node suite lacks: `ai.onnx.ml`, `Gradient`, more fused-operator
//! variants; see `fixtures/ops-extra/gen_ops_extra.py`), counted on their
//! own line; there, a case with an error diagnostic fails the test too.
//!
//! `DIAMOND_CONFORMANCE_FILTER=conv` restricts to cases whose name contains
//! the string; `DIAMOND_CONFORMANCE_VERBOSE=1` prints every output that is
//! not exact, with the reason.

use diamond_infer::graph::{check_model, CheckOptions, DimReport};
use diamond_ir::Model;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The case directories (those holding a `model.onnx`) under `fixtures/<dir>`, sorted.
fn fixture_cases(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures").join(dir);
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|_| panic!("fixtures/{dir} exists"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    cases
}

fn node_cases() -> Vec<PathBuf> {
    let cases = fixture_cases("onnx-node");
    assert!(cases.len() > 1800, "expected the whole node suite, found {} cases", cases.len());
    cases
}

fn ops_extra_cases() -> Vec<PathBuf> {
    let cases = fixture_cases("ops-extra");
    assert!(cases.len() >= 30, "expected the ops-extra cases, found {} cases", cases.len());
    cases
}

fn data_files(case: &Path, prefix: &str) -> Vec<PathBuf> {
    let dir = case.join("test_data_set_0");
    (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.is_file()).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    Exact,
    Partial,
    Unknown,
    Wrong,
}

#[derive(Default)]
struct Counts {
    by_class: BTreeMap<&'static str, usize>,
    wrong: Vec<String>,
    not_exact: Vec<String>,
    cases_with_errors: Vec<String>,
}

fn strip_declarations(model: &mut Model) {
    let graph_ids: Vec<_> = model.graphs.iter().map(|(id, _)| id).collect();
    for g in graph_ids {
        let graph = &mut model.graphs[g];
        graph.value_info.clear();
        for out in &mut graph.outputs {
            out.ty = None;
        }
    }
}

fn classify(expected: &diamond_ir::Tensor, got: Option<&diamond_infer::graph::ValueReport>) -> (Class, String) {
    let want: Vec<u64> = expected.dims.iter().map(|&d| d as u64).collect();
    let want_t = expected.elem_type();
    let Some(got) = got else { return (Class::Unknown, "no value reported".into()) };
    let dtype_ok = match got.dtype {
        Some(t) if t != want_t => return (Class::Wrong, format!("dtype {t} but expected {want_t}")),
        Some(_) => true,
        None => false,
    };
    let Some(shape) = &got.shape else {
        return (Class::Unknown, format!("rank unknown (expected {want:?})"));
    };
    if shape.len() != want.len() {
        return (Class::Wrong, format!("shape {} but expected {want:?}", got.shape_text()));
    }
    let mut complete = dtype_ok;
    for (d, &w) in shape.iter().zip(&want) {
        match d {
            DimReport::Known(n) if *n == w => {}
            DimReport::Known(_) => return (Class::Wrong, format!("shape {} but expected {want:?}", got.shape_text())),
            DimReport::Symbolic(_) | DimReport::Unknown => complete = false,
        }
    }
    if complete {
        (Class::Exact, String::new())
    } else {
        (
            Class::Partial,
            format!(
                "{} {} (expected {want_t} {want:?})",
                got.dtype.map_or("?".into(), |t| t.to_string()),
                got.shape_text()
            ),
        )
    }
}

/// Whether a declared type is a plain tensor (sequence, optional and map
/// values are stored as other messages, which a TensorProto reader misreads).
fn is_tensor(vi: &diamond_ir::ValueInfo) -> bool {
    matches!(vi.ty.as_ref().and_then(|t| t.value.as_ref()), Some(diamond_ir::TypeValue::Tensor { .. }))
}

fn run_mode(cases: &[PathBuf], bound: bool, filter: &str) -> Counts {
    let mut counts = Counts::default();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if !name.contains(filter) {
            continue;
        }
        let mut model = diamond_importers::onnx::load_model(&case.join("model.onnx")).expect("fixture loads");
        let tensor_outputs: Vec<bool> = model.main_graph().expect("main graph").outputs.iter().map(is_tensor).collect();
        strip_declarations(&mut model);
        let mut options = CheckOptions::default();
        let graph = model.main_graph().expect("main graph");
        if bound {
            for (i, path) in data_files(case, "input").iter().enumerate() {
                let Some(vi) = graph.inputs.get(i).filter(|vi| is_tensor(vi)) else { continue };
                let Some(id) = vi.value else { continue };
                if let Ok(t) = diamond_importers::tensor_file::read_tensor_file(path) {
                    options.bind.insert(graph.value_name(id).to_string(), t);
                }
            }
        }
        let report = check_model(&model, &options);
        if report.errors() > 0 {
            let first = report.diagnostics.iter().find(|d| d.severity == diamond_infer::Severity::Error).unwrap();
            counts.cases_with_errors.push(format!("{name}: {}", first.message));
        }
        let outputs: Vec<String> =
            graph.outputs.iter().filter_map(|o| o.value.map(|v| graph.value_name(v).to_string())).collect();
        for (i, path) in data_files(case, "output").iter().enumerate() {
            if !tensor_outputs.get(i).copied().unwrap_or(false) {
                continue;
            }
            let Ok(expected) = diamond_importers::tensor_file::read_tensor_file(path) else { continue };
            let Some(out) = outputs.get(i) else { continue };
            let (class, why) = classify(&expected, report.value(out));
            let label = match class {
                Class::Exact => "exact",
                Class::Partial => "partial",
                Class::Unknown => "unknown",
                Class::Wrong => "wrong",
            };
            *counts.by_class.entry(label).or_default() += 1;
            if class == Class::Wrong {
                counts.wrong.push(format!("{name} output {i} '{out}': {why}"));
            }
            if class != Class::Exact {
                counts.not_exact.push(format!("{name} output {i} '{out}' [{label}]: {why}"));
            }
        }
    }
    counts
}

fn print(title: &str, mode: &str, counts: &Counts) {
    let total: usize = counts.by_class.values().sum();
    let get = |k| counts.by_class.get(k).copied().unwrap_or(0);
    println!(
        "{title} ({mode}): {total} tensor outputs: {} exact, {} partial, {} unknown, {} wrong; {} cases with errors",
        get("exact"),
        get("partial"),
        get("unknown"),
        get("wrong"),
        counts.cases_with_errors.len()
    );
    if std::env::var_os("DIAMOND_CONFORMANCE_VERBOSE").is_some() {
        for line in &counts.not_exact {
            println!("  {line}");
        }
        for line in &counts.cases_with_errors {
            println!("  error in {line}");
        }
    }
}

#[test]
fn node_suite_conformance() {
    let filter = std::env::var("DIAMOND_CONFORMANCE_FILTER").unwrap_or_default();
    let cases = node_cases();
    let alone = run_mode(&cases, false, &filter);
    print("conformance", "model alone", &alone);
    let bound = run_mode(&cases, true, &filter);
    print("conformance", "inputs bound", &bound);
    let wrong: Vec<&String> = alone.wrong.iter().chain(&bound.wrong).collect();
    assert!(
        wrong.is_empty(),
        "{} wrong outputs:\n{}",
        wrong.len(),
        wrong.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
    if filter.is_empty() {
        // The figures recorded in docs/testing.md: a drop is a regression.
        let exact = |c: &Counts| c.by_class.get("exact").copied().unwrap_or(0);
        assert!(exact(&alone) >= 1961, "model alone: {} exact, docs/testing.md records 1,961", exact(&alone));
        assert!(exact(&bound) >= 2292, "inputs bound: {} exact, docs/testing.md records 2,292", exact(&bound));
    }
}

#[test]
fn ops_extra_conformance() {
    let filter = std::env::var("DIAMOND_CONFORMANCE_FILTER").unwrap_or_default();
    let cases = ops_extra_cases();
    let alone = run_mode(&cases, false, &filter);
    print("conformance ops-extra", "model alone", &alone);
    let bound = run_mode(&cases, true, &filter);
    print("conformance ops-extra", "inputs bound", &bound);
    let failures: Vec<&String> = alone
        .wrong
        .iter()
        .chain(&bound.wrong)
        .chain(&alone.cases_with_errors)
        .chain(&bound.cases_with_errors)
        .collect();
    assert!(
        failures.is_empty(),
        "{} wrong outputs or cases with errors:\n{}",
        failures.len(),
        failures.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}
