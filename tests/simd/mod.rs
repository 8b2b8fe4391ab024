//! Running a model on the SIMD backend and on the reference executor, and
//! comparing: shared by the SIMD tests.
#![allow(dead_code)]

use diamond_ir::{DimValue, ElemType, Model, TypeValue};
use diamond_runtime::simd::{Options, Session};
use diamond_runtime::{run_model, Data, Fed, RunOptions, SplitMix64, Tensor, Value};
use std::collections::HashMap;

/// Both portable and AVX2 code paths (the latter only where the processor has it).
pub fn modes() -> [Options; 2] {
    [Options { simd: true, ..Options::default() }, Options { simd: false, ..Options::default() }]
}

/// The model's outputs on the SIMD backend.
pub fn run_simd(model: &Model, inputs: &[(String, Value)], options: &Options) -> Result<Vec<(String, Value)>, String> {
    run_simd_counted(model, inputs, options, false).map(|(outs, _)| outs)
}

/// The model's outputs on the SIMD backend, with how many of its nodes ran
/// in programs; with `twice`, the session runs again on its pooled buffers
/// and must give the same values.
pub fn run_simd_counted(
    model: &Model,
    inputs: &[(String, Value)],
    options: &Options,
    twice: bool,
) -> Result<(Vec<(String, Value)>, usize), String> {
    let lowered = diamond_optimize::lower::lower(model).ok_or("no main graph")?;
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let mut session = Session::new(model, &lowered, &fed, options).map_err(|e| e.to_string())?;
    let first = session.run(inputs.to_vec()).map_err(|e| e.to_string())?;
    if twice {
        let second = session.run(inputs.to_vec()).map_err(|e| e.to_string())?;
        for ((_, a), (_, b)) in first.outputs.iter().zip(&second.outputs) {
            agree(a, b, 0.0, 0.0).map_err(|e| format!("a second run of the session differs from the first: {e}"))?;
        }
    }
    Ok((first.outputs, session.coverage().fused_nodes))
}

/// The model's outputs on the reference executor.
pub fn run_reference(model: &Model, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, String> {
    run_model(model, inputs.to_vec(), &RunOptions::default()).map(|r| r.outputs).map_err(|e| e.to_string())
}

/// Whether `got` agrees with `want`: integers, bools and strings exactly,
/// floats within `rtol * |want| + atol` (NaN equal to NaN).
pub fn agree(got: &Value, want: &Value, rtol: f64, atol: f64) -> Result<(), String> {
    match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) => {
            if g.elem() != w.elem() || g.shape != w.shape {
                return Err(format!("{}{:?}, expected {}{:?}", g.elem(), g.shape, w.elem(), w.shape));
            }
            if !g.is_float() {
                return if g.data == w.data { Ok(()) } else { Err("values differ".into()) };
            }
            let (a, b) = (g.to_f64s().unwrap_or_default(), w.to_f64s().unwrap_or_default());
            for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
                let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs();
                if !ok {
                    return Err(format!("element {i}: {x}, expected {y}"));
                }
            }
            Ok(())
        }
        (g, w) if g == w => Ok(()),
        (g, w) => Err(format!("a {}, expected a {}", g.kind(), w.kind())),
    }
}

/// Random inputs for every declared tensor input without an initializer:
/// floats in [-1, 1), integers in [0, 10), symbols bound to 2 and
/// unknown sizes to 1.
pub fn random_inputs(model: &Model, seed: u64) -> Option<Vec<(String, Value)>> {
    random_inputs_sized(model, seed, 2)
}

/// As [`random_inputs`], every symbol of the input shapes taking `size`.
pub fn random_inputs_sized(model: &Model, seed: u64, size: usize) -> Option<Vec<(String, Value)>> {
    let graph = model.main_graph()?;
    let mut rng = SplitMix64(seed);
    let mut symbols: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for info in graph.required_inputs() {
        let Some(v) = info.value else { continue };
        let name = graph.value_name(v);
        let Some(TypeValue::Tensor { elem: Some(elem), shape: Some(shape) }) =
            info.ty.as_ref().and_then(|t| t.value.as_ref())
        else {
            return None;
        };
        let dims: Vec<usize> = shape
            .dims
            .iter()
            .map(|d| match &d.value {
                Some(DimValue::Known(n)) => *n as usize,
                Some(DimValue::Param(p)) => *symbols.entry(p.clone()).or_insert(size),
                None => 1,
            })
            .collect();
        let n: usize = dims.iter().product();
        let data = match elem {
            ElemType::Float => Data::F32((0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect()),
            ElemType::Int64 => Data::I64((0..n).map(|_| (rng.next_u64() % 10) as i64).collect()),
            ElemType::Int32 => Data::I32((0..n).map(|_| (rng.next_u64() % 10) as i32).collect()),
            ElemType::Bool => Data::Bool((0..n).map(|_| rng.next_u64() % 2 == 0).collect()),
            _ => return None,
        };
        out.push((name.to_string(), Value::Tensor(Tensor { shape: dims, data })));
    }
    Some(out)
}

/// A stored tensor (`.pb` or `.npy`) as a runtime tensor.
pub fn read(path: &std::path::Path) -> Result<Tensor, String> {
    let t = diamond_importers::tensor_file::read_tensor_file(path).map_err(|e| e.to_string())?;
    Tensor::from_ir(&t)
}

/// The stored inputs of an export (`<stem>.input_<i>.npy` for the i-th declared input).
pub fn export_inputs(model: &Model, path: &std::path::Path) -> Option<Vec<(String, Value)>> {
    let graph = model.main_graph()?;
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    let names: Vec<&str> =
        graph.required_inputs().iter().filter_map(|i| i.value).map(|v| graph.value_name(v)).collect();
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let file = path.with_file_name(format!("{stem}.input_{i}.npy"));
        out.push((name.to_string(), Value::Tensor(read(&file).ok()?)));
    }
    Some(out)
}
