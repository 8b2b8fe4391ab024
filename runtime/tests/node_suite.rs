//! The reference executor against the ONNX backend node suite
//! (`fixtures/onnx-node/*`): every case is run on its stored inputs and its
//! outputs compared with the stored ones (rtol 1e-3, atol 1e-7, NaNs equal,
//! integers, bools and strings exactly).
//!
//! Each case is a pass, a refusal (the executor says what it lacks, or the
//! stored data is not a tensor it can read), or wrong (it ran and disagreed).
//! Each case is also planned ([`Plan`]): a plan that refuses inputs the run
//! accepts, a predicted size the run does not produce, or a predicted peak
//! the run does not measure is a wrong case too.
//!
//! The test demands no wrong case and at least [`PASS_RATCHET`] passes; raise
//! the ratchet when more pass. The refusal reasons, grouped, go to stderr;
//! with `DIAMOND_UPDATE_RUN_STATUS=1` the per-case classification and the
//! grouped summary are written to `fixtures/onnx-node-run-status.txt`.

use diamond_ir::{ElemType, TypeInfo, TypeValue};
use diamond_runtime::exec::DumpSet;
use diamond_runtime::plan::Size;
use diamond_runtime::{run_model, run_planned, Fed, Plan, RunOptions, Tensor, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Cases that must pass; raise it as the executor grows.
const PASS_RATCHET: usize = 1875;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;

/// Cases whose stored outputs hold float32 round-off above `ATOL` where the
/// exact value is 0 (the reference's inverse FFT leaves ~2e-7 where the
/// definition gives 0): compared with an absolute tolerance of 1e-6 instead.
const FLOAT32_NOISE: &[&str] = &["test_dft_inverse", "test_dft_inverse_opset19"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

enum Outcome {
    /// It ran and agreed; `predicted`: the plan predicted its peak (else
    /// some size was data-dependent, and the plan said so).
    Pass {
        predicted: bool,
    },
    Refused(String),
    Wrong(String),
}

fn data_files(case: &Path, prefix: &str) -> Vec<PathBuf> {
    let dir = case.join("test_data_set_0");
    (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.is_file()).collect()
}

fn read(path: &Path) -> Result<Tensor, String> {
    let t = diamond_importers::tensor_file::read_tensor_file(path).map_err(|e| format!("stored data: {e}"))?;
    Tensor::from_ir(&t).map_err(|e| format!("stored data: {e}"))
}

/// `SequenceProto` and `OptionalProto`, which diamond's schema leaves out:
/// only the fields the node suite uses, nested tensors kept as bytes.
#[derive(Clone, PartialEq, prost::Message)]
struct SequenceProto {
    #[prost(int32, optional, tag = "2")]
    elem_type: Option<i32>,
    #[prost(bytes = "bytes", repeated, tag = "3")]
    tensor_values: Vec<bytes::Bytes>,
    #[prost(bytes = "bytes", repeated, tag = "5")]
    sequence_values: Vec<bytes::Bytes>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionalProto {
    #[prost(int32, optional, tag = "2")]
    elem_type: Option<i32>,
    #[prost(bytes = "bytes", optional, tag = "3")]
    tensor_value: Option<bytes::Bytes>,
    #[prost(bytes = "bytes", optional, tag = "5")]
    sequence_value: Option<bytes::Bytes>,
}

fn tensor_from_bytes(bytes: bytes::Bytes, path: &Path) -> Result<Tensor, String> {
    let t =
        diamond_importers::onnx::decode_tensor(bytes, path, Path::new(".")).map_err(|e| format!("stored data: {e}"))?;
    Tensor::from_ir(&t).map_err(|e| format!("stored data: {e}"))
}

fn sequence_from_bytes(bytes: bytes::Bytes, path: &Path, declared: Option<&TypeInfo>) -> Result<Value, String> {
    let seq = <SequenceProto as prost::Message>::decode(bytes).map_err(|e| format!("stored sequence: {e}"))?;
    if seq.elem_type.unwrap_or(1) != 1 || !seq.sequence_values.is_empty() {
        return Err("stored data: sequences of non-tensors".into());
    }
    let items = seq.tensor_values.into_iter().map(|b| tensor_from_bytes(b, path)).collect::<Result<Vec<_>, _>>()?;
    let elem = items.first().map(Tensor::elem).or_else(|| declared.and_then(sequence_elem)).unwrap_or(ElemType::Float);
    Ok(Value::Sequence(elem, items))
}

fn sequence_elem(t: &TypeInfo) -> Option<ElemType> {
    match &t.value {
        Some(TypeValue::Sequence(Some(inner))) => inner.as_tensor().and_then(|(e, _)| e),
        Some(TypeValue::Optional(Some(inner))) => sequence_elem(inner),
        _ => None,
    }
}

/// A stored value of the declared type: a tensor, a sequence or an optional.
fn read_value(path: &Path, declared: Option<&TypeInfo>) -> Result<Value, String> {
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(|e| e.to_string())?);
    match declared.and_then(|t| t.value.as_ref()) {
        Some(TypeValue::Sequence(_)) => sequence_from_bytes(bytes, path, declared),
        Some(TypeValue::Optional(_)) => {
            let opt = <OptionalProto as prost::Message>::decode(bytes).map_err(|e| format!("stored optional: {e}"))?;
            let inner = match (opt.elem_type.unwrap_or(0), opt.tensor_value, opt.sequence_value) {
                (0, _, _) => None,
                (1, Some(t), _) => Some(Value::Tensor(tensor_from_bytes(t, path)?)),
                (3, _, Some(s)) => Some(sequence_from_bytes(s, path, declared)?),
                _ => return Err("stored data: an optional of another kind".into()),
            };
            Ok(Value::Optional(inner.map(Box::new)))
        }
        _ => read(path).map(Value::Tensor),
    }
}

/// Cases whose stored outputs are NumPy's random draws: no runtime
/// reproduces them, so the run is held to the shape, the element type and
/// what the distribution allows, not to the values.
const RANDOM_CASES: &[&str] = &["test_bernoulli", "test_training_dropout"];

/// The checks of a random case: every output has the stored one's shape
/// and type; Bernoulli draws are 0 or 1, and 0 where p is 0, 1 where p is
/// 1; a training Dropout keeps an element scaled by `1/(1−ratio)` exactly
/// where its mask is set and writes 0 elsewhere.
fn compare_random(case: &str, inputs: &[(String, Value)], got: &[&Value], want: &[Value]) -> Result<(), String> {
    let tensor = |v: &Value| match v {
        Value::Tensor(t) => Ok(t.clone()),
        other => Err(format!("a {} where a tensor was stored", other.kind())),
    };
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (tensor(g)?, tensor(w)?);
        if g.shape != w.shape || g.elem() != w.elem() {
            return Err(format!("output {k}: {}{:?} where {}{:?} was stored", g.elem(), g.shape, w.elem(), w.shape));
        }
    }
    let first = tensor(inputs.first().map(|(_, v)| v).ok_or("no input")?)?;
    let x = first.to_f64s().ok_or("the input is not numeric")?;
    let out = tensor(got[0])?.to_f64s().ok_or("the output is not numeric")?;
    if case.starts_with("test_bernoulli") {
        for (i, (&p, &b)) in x.iter().zip(&out).enumerate() {
            let allowed = (b == 0.0 || b == 1.0) && !(p == 0.0 && b != 0.0) && !(p == 1.0 && b != 1.0);
            if !allowed {
                return Err(format!("element {i}: drew {b} with p = {p}"));
            }
        }
        return Ok(());
    }
    let ratio = match inputs.get(1) {
        Some((_, v)) => tensor(v)?.to_f64s().and_then(|r| r.first().copied()).ok_or("ratio")?,
        None => 0.5,
    };
    let mask: Option<Vec<f64>> = got.get(1).map(|m| tensor(m).ok().and_then(|t| t.to_f64s())).flatten();
    let scale = 1.0 / (1.0 - ratio);
    for (i, (&v, &o)) in x.iter().zip(&out).enumerate() {
        let kept = (o - v * scale).abs() <= 1e-5 * (v * scale).abs().max(1.0);
        let dropped = o == 0.0;
        let agrees = match mask.as_ref().map(|m| m[i] != 0.0) {
            Some(true) => kept,
            Some(false) => dropped,
            None => kept || dropped,
        };
        if !agrees {
            return Err(format!("element {i}: {o} from {v} at ratio {ratio}"));
        }
    }
    Ok(())
}

fn compare_values(got: &Value, want: &Value, atol: f64) -> Result<(), String> {
    match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) => compare_with(g, w, atol),
        (Value::Sequence(_, g), Value::Sequence(_, w)) => {
            if g.len() != w.len() {
                return Err(format!("{} items, stored {}", g.len(), w.len()));
            }
            g.iter().zip(w).enumerate().try_for_each(|(i, (a, b))| compare(a, b).map_err(|e| format!("item {i}: {e}")))
        }
        (Value::Optional(g), Value::Optional(w)) => match (g, w) {
            (None, None) => Ok(()),
            (Some(a), Some(b)) => compare_values(a, b, atol),
            _ => Err(format!(
                "optional {}, stored {}",
                if g.is_some() { "present" } else { "empty" },
                if w.is_some() { "present" } else { "empty" }
            )),
        },
        (g, w) => Err(format!("a {}, stored a {}", g.kind(), w.kind())),
    }
}

/// Whether `got` equals `want` within the tolerances; the first bad element otherwise.
pub fn compare(got: &Tensor, want: &Tensor) -> Result<(), String> {
    compare_with(got, want, ATOL)
}

fn compare_with(got: &Tensor, want: &Tensor, atol: f64) -> Result<(), String> {
    if got.elem() != want.elem() {
        return Err(format!("type {}, stored {}", got.elem(), want.elem()));
    }
    if got.shape != want.shape {
        return Err(format!("shape {:?}, stored {:?}", got.shape, want.shape));
    }
    if got.is_float() {
        // rtol 1e-3 is finer than one unit in the last place (ulp) of the
        // 16-bit types (bfloat16 keeps 8 significant bits, float16 11):
        // there two ulps of the stored value are allowed too, since rounding
        // intermediates in another order is not an error.
        let mantissa = match got.elem() {
            diamond_ir::ElemType::Bfloat16 => Some(7),
            diamond_ir::ElemType::Float16 => Some(10),
            _ => None,
        };
        let (g, w) = (got.to_f64s().unwrap_or_default(), want.to_f64s().unwrap_or_default());
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let mut tol = atol + RTOL * b.abs();
            if let Some(m) = mantissa.filter(|_| b != 0.0 && b.is_finite()) {
                tol = tol.max(2.0 * 2f64.powi(b.abs().log2().floor() as i32 - m));
            }
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol;
            if !ok {
                return Err(format!("element {i}: {a}, stored {b}"));
            }
        }
        return Ok(());
    }
    if got.data != want.data {
        return Err("values differ".into());
    }
    Ok(())
}

fn evaluate(case: &Path) -> Outcome {
    let model = match diamond_importers::onnx::load_model(&case.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return Outcome::Refused(format!("import: {e}")),
    };
    let graph = model.main_graph().expect("node cases have a main graph");
    let initialized: std::collections::HashSet<&str> =
        graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let declared: Vec<(String, Option<&TypeInfo>)> = graph
        .inputs
        .iter()
        .filter_map(|i| i.value.map(|v| (graph.value_name(v).to_string(), i.ty.as_ref())))
        .filter(|(n, _)| !initialized.contains(n.as_str()))
        .collect();
    let mut inputs = Vec::new();
    for (i, path) in data_files(case, "input").iter().enumerate() {
        let (name, ty) = declared.get(i).cloned().unwrap_or_default();
        match read_value(path, ty) {
            Ok(v) => inputs.push((name, v)),
            Err(e) => return Outcome::Refused(e),
        }
    }
    let mut expected = Vec::new();
    for (i, path) in data_files(case, "output").iter().enumerate() {
        let ty = graph.outputs.get(i).and_then(|o| o.ty.as_ref());
        match read_value(path, ty) {
            Ok(v) => expected.push(v),
            Err(e) => return Outcome::Refused(e),
        }
    }
    // Every case is planned too: the plan must accept what the run accepts,
    // and every size it predicts (and its peak, when it predicts one) must
    // be what the run measures.
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let plan = Plan::new(&model, &fed);
    let options = RunOptions { dump: Some(DumpSet::All) };
    let case_name = case.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let random = RANDOM_CASES.iter().any(|p| case_name.starts_with(p));
    let fed_values = if random { inputs.clone() } else { Vec::new() };
    let run = match &plan {
        Ok(plan) => run_planned(&model, plan, inputs, &options),
        Err(_) => run_model(&model, inputs, &options),
    };
    let result = match run {
        Ok(r) => r,
        Err(e) if e.is_refusal() => return Outcome::Refused(e.group()),
        Err(e) => return Outcome::Refused(format!("error: {}", e.group())),
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => return Outcome::Wrong(format!("the plan refuses inputs the run accepts: {e}")),
    };
    for (name, value) in &result.dumped {
        match plan.values().iter().find(|v| v.name == *name).map(|v| &v.size) {
            Some(Size::Bytes(b)) if *b != value.byte_size() => {
                return Outcome::Wrong(format!(
                    "plan: '{name}' predicted {b} bytes, the run made {}",
                    value.byte_size()
                ));
            }
            Some(_) => {}
            None => return Outcome::Wrong(format!("plan: '{name}' was computed but the plan does not hold it")),
        }
    }
    if let Some(p) = plan.predicted_peak_bytes() {
        if p != result.peak_bytes {
            return Outcome::Wrong(format!("plan: predicted peak {p} bytes, measured {}", result.peak_bytes));
        }
    }
    let predicted = plan.predicted_peak_bytes().is_some();
    if result.outputs.len() != expected.len() {
        return Outcome::Wrong(format!("{} outputs, stored {}", result.outputs.len(), expected.len()));
    }
    if random {
        let got: Vec<&Value> = result.outputs.iter().map(|(_, v)| v).collect();
        return match compare_random(&case_name, &fed_values, &got, &expected) {
            Ok(()) => Outcome::Pass { predicted },
            Err(e) => Outcome::Wrong(format!("random outputs: {e}")),
        };
    }
    for (k, ((_, got), want)) in result.outputs.iter().zip(&expected).enumerate() {
        let name = case.file_name().unwrap_or_default().to_string_lossy();
        let atol = if FLOAT32_NOISE.contains(&name.as_ref()) { 1e-6 } else { ATOL };
        if let Err(e) = compare_values(got, want, atol) {
            return Outcome::Wrong(format!("output {k}: {e}"));
        }
    }
    Outcome::Pass { predicted }
}

/// The node-suite case directories, in name order.
fn node_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/onnx-node"))
        .expect("fixtures/onnx-node exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    cases
}

#[test]
fn node_suite_runs_without_wrong_results() {
    std::panic::set_hook(Box::new(|_| {}));
    let cases = node_cases();
    let filter = std::env::var("NODE_FILTER").ok();
    let (mut pass, mut wrong, mut refused, mut predicted) = (0, Vec::new(), 0, 0);
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lines = String::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        match evaluate(case) {
            Outcome::Pass { predicted: p } => {
                pass += 1;
                predicted += usize::from(p);
                writeln!(lines, "{name} pass").unwrap();
            }
            Outcome::Refused(r) => {
                refused += 1;
                let short: String = r.lines().next().unwrap_or("").chars().take(100).collect();
                writeln!(lines, "{name} refused {short}").unwrap();
                reasons.entry(short).or_default().push(name);
            }
            Outcome::Wrong(w) => {
                writeln!(lines, "{name} WRONG {w}").unwrap();
                wrong.push(format!("{name}: {w}"));
            }
        }
    }
    let mut groups: Vec<(&String, &Vec<String>)> = reasons.iter().collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let mut summary = format!(
        "# diamond run on fixtures/onnx-node: {pass} pass, {} wrong, {refused} refused (of {})\n",
        wrong.len(),
        pass + wrong.len() + refused
    );
    writeln!(summary, "# the plan predicts the peak of {predicted} passing cases exactly; the rest are partial")
        .unwrap();
    summary.push_str("# refusals by reason (count, reason, first cases)\n");
    for (reason, names) in &groups {
        let first: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
        writeln!(summary, "# {:4} {reason}  [{}]", names.len(), first.join(", ")).unwrap();
    }
    eprintln!("{summary}");
    for w in &wrong {
        eprintln!("WRONG {w}");
    }
    if std::env::var_os("DIAMOND_UPDATE_RUN_STATUS").is_some() && filter.is_none() {
        let text = format!("{summary}{lines}");
        std::fs::write(root().join("fixtures/onnx-node-run-status.txt"), text).unwrap();
    }
    assert!(wrong.is_empty(), "{} cases ran and disagreed with the stored outputs:\n{}", wrong.len(), wrong.join("\n"));
    if filter.is_none() {
        assert!(pass >= PASS_RATCHET, "{pass} cases pass, fewer than the ratchet {PASS_RATCHET}");
    }
}

/// Every node model on random inputs of its stored inputs' types and
/// shapes: whatever the values, the executor refuses or errs, never panics
/// (a panic inside a kernel is caught and reported as a diamond bug, which
/// this test rejects).
#[test]
fn node_models_never_panic_on_random_inputs() {
    std::panic::set_hook(Box::new(|_| {}));
    let cases = node_cases();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut panics = Vec::new();
    for case in &cases {
        let Ok(model) = diamond_importers::onnx::load_model(&case.join("model.onnx")) else { continue };
        let graph = model.main_graph().expect("node cases have a main graph");
        let initialized: std::collections::HashSet<&str> =
            graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
        let names: Vec<String> = graph
            .inputs
            .iter()
            .filter_map(|i| i.value.map(|v| graph.value_name(v).to_string()))
            .filter(|n| !initialized.contains(n.as_str()))
            .collect();
        let mut inputs = Vec::new();
        for (i, path) in data_files(case, "input").iter().enumerate() {
            let Ok(t) = read(path) else { continue };
            let values: Vec<f64> = (0..t.len())
                .map(|_| if t.is_float() { (next() % 2000) as f64 / 1000.0 - 1.0 } else { (next() % 10) as f64 })
                .collect();
            let data = match diamond_runtime::Data::from_f64s(t.elem(), &values) {
                Some(d) => d,
                None => t.data.clone(),
            };
            inputs.push((
                names.get(i).cloned().unwrap_or_default(),
                Value::Tensor(Tensor { shape: t.shape.clone(), data }),
            ));
        }
        if let Err(e) = run_model(&model, inputs, &RunOptions::default()) {
            if e.to_string().contains("panicked") {
                panics.push(format!("{}: {e}", case.display()));
            }
        }
    }
    assert!(panics.is_empty(), "the executor panicked on random inputs:\n{}", panics.join("\n"));
}
