//! The `ai.onnx.ml` operators against onnxruntime: every case of
//! `fixtures/ml/` (scikit-learn, LightGBM and XGBoost models converted to
//! ONNX, and hand-built graphs; `fixtures/ml/gen_ml.py`) runs on its
//! stored inputs, on the reference executor and through the SIMD session,
//! and must give onnxruntime's stored outputs: labels, integers and strings
//! exactly, scores and probabilities within `TOL` (absolute plus relative).
//! Maps compare by key, in any order.
//!
//! A tree ensemble whose attribute lists disagree, or whose ids point
//! nowhere or loop, must be refused with an error naming the attribute.

use diamond_importers::tensor_file::{read_map, read_map_sequence, MapKeys, TensorMap};
use diamond_ir::{Attribute, Model, TypeValue};
use diamond_runtime::simd::{Options, Session};
use diamond_runtime::{run_model, Data, Fed, MapValue, RunOptions, Tensor, Value};
use std::path::{Path, PathBuf};

/// Absolute and relative tolerance of float outputs.
const TOL: f64 = 1e-5;

/// The fixtures there must be at least (a guard against an empty folder).
const CASES: usize = 35;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/ml")
}

fn cases() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    all.sort();
    all
}

fn map_value(m: TensorMap) -> Result<MapValue, String> {
    let keys = match m.keys {
        MapKeys::Ints(k) => Data::I64(k),
        MapKeys::Strings(k) => Data::Str(k),
    };
    MapValue::from_stored(keys, &m.values)
}

/// The stored value of declared type `ty` in `path`.
fn read_value(path: &Path, ty: Option<&TypeValue>) -> Result<Value, String> {
    match ty {
        Some(TypeValue::Map { .. }) => map_value(read_map(path).map_err(|e| e.to_string())?).map(Value::Map),
        Some(TypeValue::Sequence(Some(inner))) if matches!(inner.value, Some(TypeValue::Map { .. })) => {
            let maps = read_map_sequence(path).map_err(|e| e.to_string())?;
            maps.into_iter().map(map_value).collect::<Result<_, _>>().map(Value::MapSequence)
        }
        _ => {
            let t = diamond_importers::tensor_file::read_tensor_file(path).map_err(|e| e.to_string())?;
            Tensor::from_ir(&t).map(Value::Tensor)
        }
    }
}

struct Case {
    name: String,
    model: Model,
    inputs: Vec<(String, Value)>,
    outputs: Vec<(String, Value)>,
}

fn load(dir: &Path) -> Result<Case, String> {
    let model = diamond_importers::onnx::load_model(&dir.join("model.onnx")).map_err(|e| e.to_string())?;
    let graph = model.main_graph().ok_or("no graph")?;
    let data = dir.join("test_data_set_0");
    let mut inputs = Vec::new();
    for (i, info) in graph.required_inputs().into_iter().enumerate() {
        let name = graph.value_name(info.value.ok_or("an unnamed input")?).to_string();
        let ty = info.ty.as_ref().and_then(|t| t.value.as_ref());
        inputs.push((name, read_value(&data.join(format!("input_{i}.pb")), ty)?));
    }
    let mut outputs = Vec::new();
    for (i, info) in graph.outputs.iter().enumerate() {
        let name = info.value.map(|v| graph.value_name(v).to_string()).unwrap_or_default();
        let ty = info.ty.as_ref().and_then(|t| t.value.as_ref());
        outputs.push((name, read_value(&data.join(format!("output_{i}.pb")), ty)?));
    }
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    Ok(Case { name, model, inputs, outputs })
}

/// The largest absolute difference of float elements, or why they disagree.
fn compare_data(got: &Data, want: &Data) -> Result<f64, String> {
    if got.elem() != want.elem() || got.len() != want.len() {
        return Err(format!("{} × {}, stored {} × {}", got.elem(), got.len(), want.elem(), want.len()));
    }
    if !matches!(want, Data::F32(_) | Data::F64(_)) {
        return if got == want { Ok(0.0) } else { Err(format!("{got:?}, stored {want:?}")) };
    }
    let (a, b) = (got.to_f64s().unwrap(), want.to_f64s().unwrap());
    let mut worst: f64 = 0.0;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let d = (x - y).abs();
        if !(x.is_nan() && y.is_nan()) && !(d <= TOL + TOL * y.abs()) {
            return Err(format!("element {i}: {x}, stored {y}"));
        }
        if d.is_finite() {
            worst = worst.max(d);
        }
    }
    Ok(worst)
}

fn compare_maps(got: &MapValue, want: &MapValue) -> Result<f64, String> {
    let (g, w) = (got.sorted(), want.sorted());
    if g.keys != w.keys {
        return Err(format!("keys {:?}, stored {:?}", g.keys, w.keys));
    }
    compare_data(&g.values, &w.values)
}

fn compare(got: &Value, want: &Value) -> Result<f64, String> {
    match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) if g.shape != w.shape => {
            Err(format!("shape {:?}, stored {:?}", g.shape, w.shape))
        }
        (Value::Tensor(g), Value::Tensor(w)) => compare_data(&g.data, &w.data),
        (Value::Map(g), Value::Map(w)) => compare_maps(g, w),
        (Value::MapSequence(g), Value::MapSequence(w)) if g.len() != w.len() => {
            Err(format!("{} maps, stored {}", g.len(), w.len()))
        }
        (Value::MapSequence(g), Value::MapSequence(w)) => {
            g.iter().zip(w).enumerate().try_fold(0.0f64, |m, (i, (a, b))| {
                compare_maps(a, b).map(|d| m.max(d)).map_err(|e| format!("map {i}: {e}"))
            })
        }
        (g, w) => Err(format!("a {}, stored a {}", g.kind(), w.kind())),
    }
}

fn compare_all(case: &Case, got: &[(String, Value)], how: &str) -> Result<f64, String> {
    let mut worst: f64 = 0.0;
    for ((name, want), (_, g)) in case.outputs.iter().zip(got) {
        worst = worst.max(compare(g, want).map_err(|e| format!("{}: {how}: output '{name}': {e}", case.name))?);
    }
    Ok(worst)
}

fn run_simd(case: &Case) -> Result<Vec<(String, Value)>, String> {
    let lowered = diamond_optimize::lower::lower(&case.model).ok_or("no main graph")?;
    let fed: Vec<(String, Fed)> = case.inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let mut session = Session::new(&case.model, &lowered, &fed, &Options { simd: true, ..Options::default() })
        .map_err(|e| e.to_string())?;
    session.run(case.inputs.clone()).map(|r| r.outputs).map_err(|e| e.to_string())
}

#[test]
fn every_fixture_matches_onnxruntime_on_both_executors() {
    let dirs = cases();
    assert!(dirs.len() >= CASES, "{} fixtures in {}, expected at least {CASES}", dirs.len(), root().display());
    let mut failures = Vec::new();
    let mut worst: (f64, String) = (0.0, String::new());
    for dir in &dirs {
        let outcome = load(dir).and_then(|case| {
            let reference = run_model(&case.model, case.inputs.clone(), &RunOptions::default())
                .map_err(|e| format!("{}: reference: {e}", case.name))?;
            let a = compare_all(&case, &reference.outputs, "reference")?;
            let simd = run_simd(&case).map_err(|e| format!("{}: simd: {e}", case.name))?;
            let b = compare_all(&case, &simd, "simd")?;
            Ok((case.name, a.max(b)))
        });
        match outcome {
            Ok((name, d)) if d > worst.0 => worst = (d, name),
            Ok(_) => {}
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{} ML fixtures; the largest float difference from onnxruntime: {:e} ({})", dirs.len(), worst.0, worst.1);
    assert!(failures.is_empty(), "{} of {} fixtures differ:\n{}", failures.len(), dirs.len(), failures.join("\n"));
}

/// A tree regressor fixture with one attribute replaced.
fn broken_tree(edit: impl Fn(&mut Attribute)) -> (Model, Vec<(String, Value)>) {
    let case = load(&root().join("tree_regressor_average")).unwrap();
    let mut model = case.model;
    let graph = model.graph.unwrap();
    let node = model.graphs[graph].nodes.values_mut().next().unwrap();
    for a in node.attributes.iter_mut() {
        edit(a);
    }
    (model, case.inputs)
}

fn refusal(model: &Model, inputs: Vec<(String, Value)>) -> String {
    match run_model(model, inputs, &RunOptions::default()) {
        Ok(_) => "it ran".into(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_tree_ensemble_with_bad_node_lists_is_refused_by_name() {
    let shorten = |name: &'static str| {
        move |a: &mut Attribute| {
            if a.name() == name {
                a.ints.pop();
            }
        }
    };
    let (model, inputs) = broken_tree(shorten("nodes_falsenodeids"));
    let e = refusal(&model, inputs);
    assert!(e.contains("nodes_falsenodeids has 11 entries"), "{e}");
    let (model, inputs) = broken_tree(shorten("target_ids"));
    let e = refusal(&model, inputs);
    assert!(e.contains("target_ids has 8 entries"), "{e}");
    let set = |name: &'static str, at: usize, to: i64| {
        move |a: &mut Attribute| {
            if a.name() == name {
                a.ints[at] = to;
            }
        }
    };
    // node 1 of tree 0 goes to node 9, which does not exist
    let e = refusal(&broken_tree(set("nodes_truenodeids", 1, 9)).0, broken_tree(|_| {}).1);
    assert!(e.contains("nodes_truenodeids") && e.contains("node 9"), "{e}");
    // node 1 of tree 0 goes back to the root: a cycle
    let e = refusal(&broken_tree(set("nodes_falsenodeids", 1, 0)).0, broken_tree(|_| {}).1);
    assert!(e.contains("cycle"), "{e}");
    let e = refusal(&broken_tree(set("nodes_featureids", 0, 7)).0, broken_tree(|_| {}).1);
    assert!(e.contains("nodes_featureids") && e.contains("feature 7 of 3"), "{e}");
    let e = refusal(&broken_tree(set("target_ids", 0, 2)).0, broken_tree(|_| {}).1);
    assert!(e.contains("target_ids holds 2"), "{e}");
}
