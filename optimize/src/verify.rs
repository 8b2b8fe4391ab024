//! Numerical verification of a rewrite: the original and the result run on
//! the reference executor (`diamond-runtime`) on the same random inputs, at
//! several values of the input symbols, and every output must agree within a
//! tolerance that follows the element type.
//!
//! Symbols take the values 1, then 3, then 2 for the first symbol and 7 for
//! the others: one size that hides broadcasting bugs, and sizes that differ
//! from each other (a model without symbols runs once). Floats (f16 and
//! bf16 rounded from them) are drawn from [-1, 1); integers from {0, 1}
//! (they are often token ids or indices, which must stay in range); booleans
//! at random. A model the executor refuses as it is (an operator it lacks) is
//! not verified, and the outcome says why.

use diamond_ir::{DimValue, ElemType, Model, TypeValue};
use diamond_runtime::{run_model, Data, RunError, RunOptions, Tensor, Value};
use std::collections::HashMap;

/// How a verification went.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every output agreed at every symbol setting tried (their count).
    Agrees(usize),
    /// The executor cannot run the original; nothing was compared.
    Skipped(String),
    /// The result differs from the original (or fails where it ran).
    Differs(String),
}

/// Compares `original` and `result` on random inputs at several symbol values.
pub fn verify(original: &Model, result: &Model, seed: u64) -> Verdict {
    let Some(graph) = original.main_graph() else { return Verdict::Skipped("no graph".into()) };
    // Random draws follow each node's seed or name: equal values would prove nothing, different ones nothing wrong.
    let random = |m: &Model| -> Option<String> {
        m.graphs.iter().flat_map(|(_, g)| g.nodes.iter()).find_map(|(_, n)| {
            let training_dropout = n.op_type() == "Dropout" && n.inputs.len() > 2;
            let draws = crate::passes::NONDETERMINISTIC.contains(&n.op_type()) || training_dropout;
            (n.domain().is_empty() && draws).then(|| n.op_type().to_string())
        })
    };
    if let Some(op) = random(original).or_else(|| random(result)) {
        return Verdict::Skipped(format!("the model draws random numbers ({op})"));
    }
    let symbols = symbols_in_order(original);
    let mut settings: Vec<HashMap<String, usize>> = vec![
        symbols.iter().map(|s| (s.clone(), 1)).collect(),
        symbols.iter().map(|s| (s.clone(), 3)).collect(),
        symbols.iter().enumerate().map(|(i, s)| (s.clone(), if i == 0 { 2 } else { 7 })).collect(),
    ];
    // Without symbols the three settings are one.
    settings.dedup();
    let mut compared = 0;
    for (k, sizes) in settings.iter().enumerate() {
        let Some(inputs) = random_inputs(graph, sizes, seed.wrapping_add(k as u64)) else {
            return Verdict::Skipped("an input's type or shape is not stated".into());
        };
        let want = match run_model(original, inputs.clone(), &RunOptions::default()) {
            Ok(r) => r.outputs,
            // An input setting the model cannot take (a symbol it needs larger) is not a verdict.
            Err(RunError::Input { .. } | RunError::Binding { .. } | RunError::Kernel { .. }) if compared > 0 => {
                continue
            }
            Err(e) => return Verdict::Skipped(format!("the executor cannot run the original: {e}")),
        };
        let got = match run_model(result, inputs, &RunOptions::default()) {
            Ok(r) => r.outputs,
            Err(e) => return Verdict::Differs(format!("at {}: the result fails: {e}", show(sizes))),
        };
        for ((name, w), (_, g)) in want.iter().zip(&got) {
            if let Some(why) = differ(w, g) {
                return Verdict::Differs(format!("at {}: output '{name}' {why}", show(sizes)));
            }
        }
        compared += 1;
    }
    Verdict::Agrees(compared)
}

fn show(sizes: &HashMap<String, usize>) -> String {
    if sizes.is_empty() {
        return "the stated sizes".into();
    }
    let mut parts: Vec<String> = sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.sort();
    parts.join(", ")
}

/// The inputs' symbols, in first-appearance order.
fn symbols_in_order(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(g) = model.main_graph() else { return out };
    for vi in &g.inputs {
        if let Some(TypeValue::Tensor { shape: Some(s), .. }) = vi.ty.as_ref().and_then(|t| t.value.as_ref()) {
            for d in &s.dims {
                if let Some(DimValue::Param(p)) = &d.value {
                    if !out.contains(p) {
                        out.push(p.clone());
                    }
                }
            }
        }
    }
    out
}

/// A random value for each graph input that no initializer gives (xorshift, reproducible).
fn random_inputs(graph: &diamond_ir::Graph, sizes: &HashMap<String, usize>, seed: u64) -> Option<Vec<(String, Value)>> {
    let initialized: std::collections::HashSet<&str> =
        graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::new();
    for vi in &graph.inputs {
        let name = graph.value_name(vi.value?);
        if initialized.contains(name) {
            continue;
        }
        let Some(TypeValue::Tensor { elem: Some(elem), shape: Some(shape) }) =
            vi.ty.as_ref().and_then(|t| t.value.as_ref())
        else {
            return None;
        };
        let dims: Vec<usize> = shape
            .dims
            .iter()
            .map(|d| match &d.value {
                Some(DimValue::Known(n)) => usize::try_from(*n).ok(),
                Some(DimValue::Param(p)) => sizes.get(p).copied(),
                None => Some(1),
            })
            .collect::<Option<_>>()?;
        let n: usize = dims.iter().product();
        let data = match elem {
            ElemType::Float => Data::F32((0..n).map(|_| (next() % 2000) as f32 / 1000.0 - 1.0).collect()),
            ElemType::Double => Data::F64((0..n).map(|_| (next() % 2000) as f64 / 1000.0 - 1.0).collect()),
            ElemType::Float16 | ElemType::Bfloat16 => {
                let values: Vec<f64> = (0..n).map(|_| (next() % 2000) as f64 / 1000.0 - 1.0).collect();
                Data::from_f64s(*elem, &values)?
            }
            ElemType::Int64 => Data::I64((0..n).map(|_| (next() % 2) as i64).collect()),
            ElemType::Int32 => Data::I32((0..n).map(|_| (next() % 2) as i32).collect()),
            ElemType::Bool => Data::Bool((0..n).map(|_| next() % 2 == 0).collect()),
            _ => return None,
        };
        out.push((name.to_string(), Value::Tensor(Tensor::new(dims, data)?)));
    }
    Some(out)
}

/// Why two outputs differ, or `None` when they agree: same shape, and every
/// element within `atol + rtol·|want|` for the element type (exact for
/// integers and booleans; NaNs equal).
fn differ(want: &Value, got: &Value) -> Option<String> {
    let (Value::Tensor(w), Value::Tensor(g)) = (want, got) else {
        return (want != got).then(|| "differs (a non-tensor value)".to_string());
    };
    if w.shape != g.shape {
        return Some(format!("has shape {:?} where the original has {:?}", g.shape, w.shape));
    }
    let (rtol, atol) = match w.elem() {
        ElemType::Float => (1e-4, 1e-5),
        ElemType::Double => (1e-9, 1e-12),
        ElemType::Float16 | ElemType::Bfloat16 => (1e-2, 1e-3),
        _ => (0.0, 0.0),
    };
    let (wv, gv) = (w.data.to_f64s()?, g.data.to_f64s()?);
    for (i, (a, b)) in wv.iter().zip(&gv).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + rtol * a.abs();
        if !same {
            return Some(format!("element {i} is {b} where the original has {a}"));
        }
    }
    None
}
