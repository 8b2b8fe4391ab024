//! Numerical verification of a rewrite: the original and the result run on
//! the SIMD backend (the reference executor where it refuses a model) on the
//! same random inputs, at several values of the input symbols, and every
//! output must agree within a tolerance that follows the element type.
//!
//! Symbols take the values 1, then 3, then 2 for the first symbol and 7 for
//! the others: one size that hides broadcasting bugs, and sizes that differ
//! from each other (a model without symbols runs once); when none of those
//! runs (a model that needs a longer sequence), 16, 64, 256, 512 and 1024 are
//! tried. An input axis the file leaves unset is a symbol too. A boolean
//! input of one element also takes both values, and an integer one each
//! constant the graph compares it with, so that each branch they pick runs.
//! Floats (f16 and bf16 rounded from them) are drawn from [-1, 1); integers
//! from {0, 1} (they are often token ids or indices, which must stay in
//! range); booleans at random. A model the executor refuses as it is (an operator it lacks) is
//! not verified, and the outcome says why.

use diamond_ir::{DimValue, ElemType, Model, TypeValue};
use diamond_runtime::simd::{Decoded, Options, Session};
use diamond_runtime::{run_model, Data, Fed, RunError, RunOptions, Tensor, Value};
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
    let usual = settings.len();
    // A model that needs its symbols larger (a window over a sequence) gets
    // larger sizes, tried only when none of the usual ones runs.
    if !symbols.is_empty() {
        for n in [16, 64, 256, 512, 1024] {
            settings.push(symbols.iter().map(|s| (s.clone(), n)).collect());
        }
    }
    let mut widened = crate::widen::Widened::default();
    let wide_original = crate::widen::compute_in_f32_sharing(original, &mut widened);
    let wide_result = crate::widen::compute_in_f32_sharing(result, &mut widened);
    drop(widened);
    // The original runs every case first, then gives its decoded weights to
    // the result, which runs the same cases: one decoded copy of the shared
    // weights at a time instead of two.
    let mut original_runner = Runner::new(original, wide_original.as_ref());
    let mut cases: Vec<Case> = Vec::new();
    let mut refused: Option<String> = None;
    for (k, sizes) in settings.iter().enumerate() {
        if k >= usual && !cases.is_empty() {
            break;
        }
        let Some(inputs) = random_inputs(graph, sizes, seed.wrapping_add(k as u64)) else {
            return Verdict::Skipped("an input's type or shape is not stated".into());
        };
        match original_runner.execute(&inputs) {
            Ok(want) => cases.push(Case { inputs, want, sizes: k, decided_by: None }),
            Err(e @ (RunError::Input { .. } | RunError::Binding { .. } | RunError::Kernel { .. })) => {
                refused.get_or_insert(format!("the executor cannot run the original: {e}"));
            }
            Err(e) => return Verdict::Skipped(format!("the executor cannot run the original: {e}")),
        }
    }
    let Some(k) = cases.first().map(|c| c.sizes) else {
        return Verdict::Skipped(refused.unwrap_or_else(|| "no input setting ran".into()));
    };
    // An integer input the graph compares with constants (a sample rate
    // picking a branch) also takes each of those values, so that every
    // branch it decides runs.
    for (input, value) in decisive_values(original) {
        let Some(mut inputs) = random_inputs(graph, &settings[k], seed.wrapping_add(k as u64)) else { break };
        let Some(slot) = inputs.iter_mut().find(|(n, _)| *n == input) else { continue };
        let Value::Tensor(t) = &slot.1 else { continue };
        let data = match &t.data {
            Data::I64(v) => Data::I64(vec![value; v.len()]),
            Data::I32(v) => match i32::try_from(value) {
                Ok(x) => Data::I32(vec![x; v.len()]),
                Err(_) => continue,
            },
            Data::Bool(v) => Data::Bool(vec![value != 0; v.len()]),
            _ => continue,
        };
        let Some(t) = Tensor::new(t.shape.clone(), data) else { continue };
        slot.1 = Value::Tensor(t);
        if let Ok(want) = original_runner.execute(&inputs) {
            cases.push(Case { inputs, want, sizes: k, decided_by: Some((input, value)) });
        }
    }
    let mut result_runner = Runner::new(result, wide_result.as_ref());
    result_runner.decoded = original_runner.into_decoded();
    for case in &cases {
        let at = show(&settings[case.sizes]);
        let decided =
            case.decided_by.as_ref().map_or_else(String::new, |(input, value)| format!(" ({input} = {value})"));
        let got = match result_runner.execute(&case.inputs) {
            Ok(outputs) => outputs,
            Err(e) => return Verdict::Differs(format!("at {at}: the result fails: {e}{decided}")),
        };
        for ((name, w), (_, g)) in case.want.iter().zip(&got) {
            if let Some(why) = differ(w, g) {
                return Verdict::Differs(format!("at {at}: output '{name}' {why}{decided}"));
            }
        }
    }
    Verdict::Agrees(cases.len())
}

/// One set of inputs the original ran, and what it gave.
struct Case {
    inputs: Vec<(String, Value)>,
    want: Vec<(String, Value)>,
    /// Which symbol setting the inputs follow.
    sizes: usize,
    /// The one-element input set to a value that picks a branch, if any.
    decided_by: Option<(String, i64)>,
}

/// Runs one model on the SIMD backend (lowered as it is, its `If` branches
/// likewise), or on the reference executor where the SIMD backend refuses
/// it: verification costs what a run costs, not what the reference kernels
/// cost, and each backend is held to the reference executor by its own
/// tests. The model is lowered once, and its session is kept from one
/// setting to the next and prepared again for new shapes
/// ([`Session::replan`]): the weights are decoded once per model, not once
/// per run.
struct Runner<'m> {
    model: &'m Model,
    /// The model the SIMD backend runs: half-precision work widened to `f32`.
    simd_model: &'m Model,
    /// Its lowering; `None` where it does not lower (the reference runs it).
    lowered: Option<diamond_runtime::kernel::LoweredModel>,
    session: Option<Session<'m>>,
    options: Options,
    /// Weights another runner decoded, for this one's session to take.
    decoded: Decoded,
}

impl<'m> Runner<'m> {
    fn new(model: &'m Model, wide: Option<&'m Model>) -> Runner<'m> {
        let simd_model = wide.unwrap_or(model);
        let mut options = Options::from_env();
        options.prepare_body = Some(std::sync::Arc::new(|body: &Model| {
            let wide = crate::widen::compute_in_f32(body).unwrap_or_else(|| body.clone());
            let lowered = crate::lower::lower(&wide)?;
            Some((wide, lowered))
        }));
        Runner {
            model,
            simd_model,
            lowered: crate::lower::lower(simd_model),
            session: None,
            options,
            decoded: Decoded::default(),
        }
    }

    fn execute(&mut self, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, RunError> {
        if let Some(outputs) = self.on_simd(inputs) {
            return Ok(outputs);
        }
        run_model(self.model, inputs.to_vec(), &RunOptions::default()).map(|r| r.outputs)
    }

    fn on_simd(&mut self, inputs: &[(String, Value)]) -> Option<Vec<(String, Value)>> {
        let lowered = self.lowered.as_ref()?;
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let session = match self.session.take() {
            Some(s) if s.fed() == fed.as_slice() => s,
            Some(s) => s.replan(lowered, &fed).ok()?,
            None => Session::new_reusing(self.simd_model, lowered, &fed, &self.options, &mut self.decoded).ok()?,
        };
        let session = self.session.insert(session);
        session.run(inputs.to_vec()).ok().map(|r| r.outputs)
    }

    /// The weights its session decoded (none where it ran on the reference).
    fn into_decoded(self) -> Decoded {
        self.session.map(Session::into_decoded).unwrap_or_default()
    }
}

/// Values for one-element inputs that pick branches: each boolean input
/// false and true, and each integer input that an `Equal`, `Greater` or
/// `Less` compares (through `Reshape`, `Squeeze`, `Gather`, `Cast` and the
/// like) with a constant, each such constant (at most eight of those).
fn decisive_values(model: &Model) -> Vec<(String, i64)> {
    use diamond_ir::AttrValue;
    let Some(g) = model.main_graph() else { return Vec::new() };
    let mut one_element_ints: HashMap<&str, ()> = HashMap::new();
    let mut flags: Vec<(String, i64)> = Vec::new();
    for vi in &g.inputs {
        let Some(v) = vi.value else { continue };
        let Some(TypeValue::Tensor { elem: Some(elem), shape: Some(shape) }) =
            vi.ty.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        if !shape.dims.iter().all(|d| matches!(d.value, Some(DimValue::Known(1)))) {
            continue;
        }
        match elem {
            ElemType::Int64 | ElemType::Int32 => {
                one_element_ints.insert(g.value_name(v), ());
            }
            // A flag takes both values: each branch it picks runs.
            ElemType::Bool => flags.extend([(g.value_name(v).to_string(), 0), (g.value_name(v).to_string(), 1)]),
            _ => {}
        }
    }
    if one_element_ints.is_empty() {
        return flags;
    }
    // Where each value comes from, following one-element reshapes back to an input.
    let mut source: HashMap<&str, &str> = one_element_ints.keys().map(|&n| (n, n)).collect();
    let mut constants: HashMap<&str, i64> = HashMap::new();
    for t in &g.initializers {
        if let (Some(name), Some(v)) = (t.name.as_deref(), diamond_infer::graph::decode::decode(t)) {
            if let Some([x]) = v.as_i64s().as_deref() {
                constants.insert(name, *x);
            }
        }
    }
    let mut out: Vec<(String, i64)> = flags;
    for (_, n) in g.nodes.iter() {
        let name = |i: usize| n.inputs.get(i).map(|&v| g.value_name(v));
        let first_output = n.outputs.first().map(|&v| g.value_name(v));
        match n.op_type() {
            "Constant" => {
                if let (Some(o), Some(AttrValue::Tensor(t))) =
                    (first_output, n.attribute("value").and_then(|a| a.value()))
                {
                    if let Some(v) = diamond_infer::graph::decode::decode(t) {
                        if let Some([x]) = v.as_i64s().as_deref() {
                            constants.insert(o, *x);
                        }
                    }
                }
            }
            "Reshape" | "Squeeze" | "Unsqueeze" | "Gather" | "Cast" | "Identity" | "Flatten" => {
                if let (Some(i), Some(o)) = (name(0).and_then(|i| source.get(i).copied()), first_output) {
                    source.insert(o, i);
                }
            }
            "Equal" | "Greater" | "Less" | "GreaterOrEqual" | "LessOrEqual" => {
                for (x, c) in [(0, 1), (1, 0)] {
                    if let (Some(input), Some(&value)) =
                        (name(x).and_then(|i| source.get(i)), name(c).and_then(|c| constants.get(c)))
                    {
                        if !out.iter().any(|(n, v)| n == input && *v == value) && out.len() < 8 {
                            out.push((input.to_string(), value));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn show(sizes: &HashMap<String, usize>) -> String {
    if sizes.is_empty() {
        return "the stated sizes".into();
    }
    let mut parts: Vec<String> = sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.sort();
    parts.join(", ")
}

/// The symbol an input axis the file leaves unset stands for, named as the
/// check names it (`input.1`): it takes the settings' sizes like the others.
fn unset_axis(input: &str, axis: usize) -> String {
    format!("{input}.{axis}")
}

/// The inputs' symbols (unset axes included), in first-appearance order.
fn symbols_in_order(model: &Model) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(g) = model.main_graph() else { return out };
    let initialized: std::collections::HashSet<&str> =
        g.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    for vi in &g.inputs {
        let Some(v) = vi.value else { continue };
        if initialized.contains(g.value_name(v)) {
            continue;
        }
        if let Some(TypeValue::Tensor { shape: Some(s), .. }) = vi.ty.as_ref().and_then(|t| t.value.as_ref()) {
            for (axis, d) in s.dims.iter().enumerate() {
                let symbol = match &d.value {
                    Some(DimValue::Param(p)) if !p.is_empty() => p.clone(),
                    // A negative size (paddle's -1) is an unset axis.
                    Some(DimValue::Known(n)) if *n >= 0 => continue,
                    _ => unset_axis(g.value_name(v), axis),
                };
                if !out.contains(&symbol) {
                    out.push(symbol);
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
            .enumerate()
            .map(|(axis, d)| match &d.value {
                Some(DimValue::Known(n)) if *n >= 0 => usize::try_from(*n).ok(),
                Some(DimValue::Param(p)) if !p.is_empty() => sizes.get(p).copied(),
                _ => Some(sizes.get(&unset_axis(name, axis)).copied().unwrap_or(1)),
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
