//! `diamond run`: execute a model on a library [`diamond::Session`] (the SIMD
//! backend by default) or, with `--backend reference` or dumps, the reference
//! executor.
//!
//! Inputs come from `--input NAME=PATH` or `--input PATH` (files matched to
//! inputs as `--bind` matches them): tensors from `.pb` TensorProto or
//! `.npy`, sequence inputs from a directory of tensor files (sorted by name)
//! or a `.pb` SequenceProto. Inputs not fed are generated with `--random`
//! (seeded; symbolic sizes from `--input-shape`, else from the fed inputs,
//! else 1). Before anything runs, an execution plan binds the inputs'
//! symbols: a fed shape that contradicts the model exits 2 naming the
//! input, the axis and the rule; the plan predicts the peak of live bytes,
//! reported beside the measured one. Each output is summarized (type,
//! shape, min/max/mean, NaN count); `-o DIR` writes them as `.npy`, each
//! file atomically and only once every output has been encoded (types NumPy
//! lacks, such as bfloat16, widened exactly to float32, with a note);
//! `--compare PATH` holds them to stored outputs (a directory with
//! `output_N.pb` or `NAME.npy` files, or one file for the first output) and
//! exits 1 on a mismatch, printing the worst element.

use crate::value_io::{file_name, Written};
use crate::Failure;
use diamond::ir::{DimValue, ElemType, Graph, TypeValue};
use diamond::session::{Dump, Fallback, Plan, RunResult};
use diamond::values::{Data, Tensor, Value};
use diamond::{DimSpec, InputShape};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Relative tolerance of `--compare` (the ONNX backend tests' value), the
/// default of `--rtol`.
pub const RTOL: f64 = 1e-3;
/// Absolute tolerance of `--compare`, the default of `--atol`.
pub const ATOL: f64 = 1e-7;

/// Which executor `diamond run` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// Fused kernel programs on the SIMD CPU backend.
    Simd,
    /// The reference executor.
    Reference,
    /// Fused kernel programs as CUDA kernels on an NVIDIA GPU.
    Cuda,
}

impl Backend {
    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        self.library().name()
    }

    /// The library's backend of that name.
    pub fn library(self) -> diamond::Backend {
        match self {
            Backend::Simd => diamond::Backend::Simd,
            Backend::Reference => diamond::Backend::Reference,
            Backend::Cuda => diamond::Backend::Cuda,
        }
    }
}

/// The options of `diamond run`.
pub struct Args {
    /// The executor.
    pub backend: Backend,
    /// Optimize the model before the simd backend lowers it.
    pub optimize: bool,
    /// The model.
    pub model: PathBuf,
    /// `NAME=FILE` pairs.
    pub inputs: Vec<String>,
    /// Where to write the outputs as `.npy`.
    pub output_dir: Option<PathBuf>,
    /// Print JSON.
    pub json: bool,
    /// Stored outputs to compare with.
    pub compare: Option<PathBuf>,
    /// The random generator's seed.
    pub seed: u64,
    /// Generate inputs that were not fed.
    pub random: bool,
    /// Shapes of generated inputs.
    pub input_shape: Vec<InputShape>,
    /// Intermediate values to write (with `-o`).
    pub dump: Vec<String>,
    /// Write every intermediate value (with `-o`).
    pub dump_all: bool,
    /// `--compare`'s relative and absolute tolerances.
    pub tolerance: (f64, f64),
}

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// `diamond run MODEL [--input NAME=FILE]... [-o DIR] [--json] [--compare PATH] [--seed N] [--random]`.
pub fn run(args: &Args) -> Result<(), Failure> {
    let path = &args.model;
    let loaded = diamond::Model::open_with(path, &diamond::LoadOptions { input_shapes: args.input_shape.clone() })
        .map_err(bad)?;
    let model = loaded.ir();
    let graph = model.main_graph().ok_or_else(|| bad(format!("{}: the model has no graph", path.display())))?;
    let fed = gather_inputs(graph, &args.inputs, &args.input_shape, args.random.then_some(args.seed))?;
    let dump = if args.dump_all {
        Some(Dump::All)
    } else if !args.dump.is_empty() {
        Some(Dump::Names(args.dump.iter().flat_map(|d| d.split(',')).map(str::to_string).collect()))
    } else {
        None
    };
    if dump.is_some() && args.output_dir.is_none() {
        return Err(bad("--dump and --dump-all write .npy files: give -o DIR"));
    }
    let plan = loaded.plan(&fed).map_err(bad)?;
    // Dumps name intermediate values, which fused programs do not hold: they come from the reference executor.
    let backend = if dump.is_some() { Backend::Reference } else { args.backend };
    // Steps of the simd backend that fell back to the reference kernels, with why,
    // and the share of the run's step time on the reference kernels.
    let mut fallbacks = Vec::new();
    let mut reference_share = None;
    let result = match backend {
        Backend::Reference => loaded.run_planned(&plan, fed, dump).map_err(bad)?,
        Backend::Simd | Backend::Cuda => {
            let options =
                diamond::SessionOptions { backend: backend.library(), optimize: args.optimize, ..Default::default() };
            let mut session = diamond::Session::new(&loaded, &options).map_err(bad)?;
            session.start_profiling();
            let run = session.run(fed).map_err(bad)?;
            fallbacks = session.fallbacks();
            reference_share = Some(crate::bench_profile::Profile::of(&session.profile(), 1).reference_share());
            RunResult { peak_bytes: run.peak_bytes(), outputs: run.into_vec(), dumped: Vec::new() }
        }
    };
    let comparison = match &args.compare {
        Some(stored) => Some(compare_all(&result.outputs, stored, args.tolerance)?),
        None => None,
    };
    let written = match &args.output_dir {
        Some(dir) => write_outputs(dir, &result.outputs, &result.dumped)?,
        None => Vec::new(),
    };
    report(args, backend, &result, &plan, comparison.as_deref(), &written, (&fallbacks, reference_share));
    if let Some(mismatches) = comparison {
        let bad: Vec<&Mismatch> = mismatches.iter().filter(|m| m.problem.is_some()).collect();
        if let Some(first) = bad.first() {
            return Err(Failure {
                code: 1,
                message: format!(
                    "{}: {} output(s) differ from the stored ones; output '{}': {}",
                    path.display(),
                    bad.len(),
                    first.name,
                    first.problem.as_deref().unwrap_or("")
                ),
            });
        }
    }
    Ok(())
}

/// The values to feed: the `--input` arguments read, then (with a seed) the
/// declared inputs nothing fed generated at random (shapes from `shapes`).
pub(crate) fn gather_inputs(
    graph: &Graph,
    inputs: &[String],
    shapes: &[InputShape],
    random_seed: Option<u64>,
) -> Result<Vec<(String, Value)>, Failure> {
    let declared: Vec<&str> =
        graph.required_inputs().iter().filter_map(|i| i.value).map(|v| graph.value_name(v)).collect();
    let mut fed = read_inputs(graph, &declared, inputs)?;
    if let Some(seed) = random_seed {
        generate(graph, &declared, &mut fed, shapes, seed)?;
    }
    Ok(fed)
}

/// Reads the `--input` arguments. `NAME=PATH` feeds graph input NAME; a
/// bare PATH (a tensor file, or a directory such as a node test's
/// `test_data_set_0`) feeds the inputs its files match by `--bind`'s rules
/// (stored name, file stem, `input_N`). Each file is read as the input's
/// declared type asks: a tensor from `.npy` or `.pb`; a sequence from a
/// directory of tensor files (sorted by name) or a `.pb` `SequenceProto`;
/// an optional as the value it holds.
fn read_inputs(graph: &Graph, declared: &[&str], args: &[String]) -> Result<Vec<(String, Value)>, Failure> {
    let names = crate::bind::input_names(graph);
    let mut fed = Vec::new();
    for arg in args {
        match arg.split_once('=') {
            Some((name, file)) if declared.contains(&name) || !Path::new(arg).exists() => {
                if !declared.contains(&name) {
                    return Err(bad(format!(
                        "--input {name}: the model has no input '{name}' (inputs: {})",
                        if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
                    )));
                }
                fed.push((name.to_string(), read_value(graph, name, Path::new(file))?));
            }
            _ => {
                let path = Path::new(arg);
                if !path.exists() {
                    return Err(bad(format!(
                        "--input '{arg}': no such file or directory (give NAME=FILE, or a file or directory \
                         whose files match inputs by name or as input_N)"
                    )));
                }
                for file in crate::bind::tensor_files(path)? {
                    let name =
                        crate::bind::input_for(&file, stored_name(&file).as_deref(), &names).ok_or_else(|| {
                            bad(format!(
                                "--input {}: no graph input matches (inputs: {})",
                                file.display(),
                                if names.is_empty() { "none".to_string() } else { names.join(", ") }
                            ))
                        })?;
                    let value = read_value(graph, &name, &file)?;
                    fed.push((name, value));
                }
            }
        }
    }
    Ok(fed)
}

/// The name stored in a `.pb` file (any of ONNX's value messages).
fn stored_name(file: &Path) -> Option<String> {
    diamond::values::stored_name(file)
}

/// Reads `path` as the value graph input `name` takes.
fn read_value(graph: &Graph, name: &str, path: &Path) -> Result<Value, Failure> {
    crate::value_io::read_input(name, graph.declared_input(name), path)
}

/// Random tensors for the declared inputs nothing fed.
fn generate(
    graph: &Graph,
    declared: &[&str],
    fed: &mut Vec<(String, Value)>,
    shapes: &[InputShape],
    seed: u64,
) -> Result<(), Failure> {
    // symbols already bound by fed inputs
    let mut symbols: HashMap<String, usize> = HashMap::new();
    for info in &graph.inputs {
        let Some(v) = info.value else { continue };
        let name = graph.value_name(v);
        let Some(Value::Tensor(t)) = fed.iter().find(|(n, _)| n == name).map(|(_, v)| v) else { continue };
        if let Some(TypeValue::Tensor { shape: Some(s), .. }) = info.ty.as_ref().and_then(|t| t.value.as_ref()) {
            for (d, &size) in s.dims.iter().zip(&t.shape) {
                if let Some(DimValue::Param(p)) = &d.value {
                    symbols.entry(p.clone()).or_insert(size);
                }
            }
        }
    }
    // symbols bound by --input-shape (where the declared rank agrees)
    for info in &graph.inputs {
        let Some(v) = info.value else { continue };
        let name = graph.value_name(v);
        let (Some(given), Some(TypeValue::Tensor { shape: Some(s), .. })) =
            (shapes.iter().find(|s| s.name == name), info.ty.as_ref().and_then(|t| t.value.as_ref()))
        else {
            continue;
        };
        if given.dims.len() != s.dims.len() {
            continue;
        }
        for (d, g) in s.dims.iter().zip(&given.dims) {
            if let (Some(DimValue::Param(p)), DimSpec::Known(n)) = (&d.value, g) {
                symbols.entry(p.clone()).or_insert(*n as usize);
            }
        }
    }
    let mut rng = diamond::values::SplitMix64(seed);
    for info in &graph.inputs {
        let Some(v) = info.value else { continue };
        let name = graph.value_name(v);
        if !declared.contains(&name) || fed.iter().any(|(n, _)| n == name) {
            continue;
        }
        let Some(TypeValue::Tensor { elem, shape }) = info.ty.as_ref().and_then(|t| t.value.as_ref()) else {
            return Err(bad(format!("input '{name}': --random makes tensors only, and it is not declared as one")));
        };
        let elem = elem.ok_or_else(|| bad(format!("input '{name}': --random needs a declared element type")))?;
        let dims: Vec<usize> = match shapes.iter().find(|s| s.name == name) {
            Some(s) => s
                .dims
                .iter()
                .map(|d| match d {
                    DimSpec::Known(n) => Ok(*n as usize),
                    DimSpec::Symbol(sym) => symbols
                        .get(sym)
                        .copied()
                        .ok_or_else(|| bad(format!("--input-shape {name}: '{sym}' is not a size"))),
                })
                .collect::<Result<_, _>>()?,
            None => shape
                .as_ref()
                .map(|s| {
                    s.dims
                        .iter()
                        .map(|d| match &d.value {
                            Some(DimValue::Known(n)) if *n >= 0 => *n as usize,
                            Some(DimValue::Param(p)) => *symbols.entry(p.clone()).or_insert(1),
                            _ => 1,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let count: usize = dims.iter().product();
        let data = match elem {
            ElemType::Bool => Data::Bool((0..count).map(|_| rng.next_u64() & 1 == 1).collect()),
            ElemType::String => {
                Data::Str((0..count).map(|_| format!("s{}", rng.next_u64() % 100).into_bytes()).collect())
            }
            e if matches!(e, ElemType::Float | ElemType::Double | ElemType::Float16 | ElemType::Bfloat16) => {
                let v: Vec<f64> = (0..count).map(|_| rng.unit() * 2.0 - 1.0).collect();
                Data::from_f64s(e, &v).ok_or_else(|| bad(format!("input '{name}': cannot generate {e}")))?
            }
            e => {
                let v: Vec<f64> = (0..count).map(|_| (rng.next_u64() % 10) as f64).collect();
                Data::from_f64s(e, &v).ok_or_else(|| bad(format!("input '{name}': cannot generate {e}")))?
            }
        };
        fed.push((name.to_string(), Value::Tensor(Tensor { shape: dims, data })));
    }
    Ok(())
}

/// min, max, mean and NaN count of a numeric tensor.
fn summary(t: &Tensor) -> Option<(f64, f64, f64, usize)> {
    let v = t.to_f64s()?;
    let finite: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    let nan = v.len() - finite.len();
    if finite.is_empty() {
        return Some((f64::NAN, f64::NAN, f64::NAN, nan));
    }
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
    Some((min, max, mean, nan))
}

fn shape_text(t: &Tensor) -> String {
    format!("[{}]", t.shape.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
}

/// The longest list of reasons a partial prediction prints.
const MAX_REASONS: usize = 10;

fn report(
    args: &Args,
    backend: Backend,
    result: &RunResult,
    plan: &Plan,
    comparison: Option<&[Mismatch]>,
    written: &[Written],
    (fallbacks, reference_share): (&[Fallback], Option<f64>),
) {
    let status = |name: &str| comparison.and_then(|c| c.iter().find(|m| m.name == name));
    let peak = result.peak_bytes;
    let predicted = plan.predicted_peak_bytes();
    if args.json {
        let outs: Vec<serde_json::Value> = result
            .outputs
            .iter()
            .map(|(name, v)| {
                let mut o = serde_json::json!({ "name": name, "kind": v.kind() });
                if let Value::Sequence(elem, items) = v {
                    o["dtype"] = elem.name().into();
                    o["length"] = items.len().into();
                    o["shapes"] = items.iter().map(|t| t.shape.clone()).collect::<Vec<_>>().into();
                }
                if let Value::Tensor(t) = v {
                    o["dtype"] = t.elem().name().into();
                    o["shape"] = t.shape.clone().into();
                    if let Some((min, max, mean, nan)) = summary(t) {
                        let num = |x: f64| {
                            if x.is_finite() {
                                serde_json::json!(x)
                            } else {
                                serde_json::json!(x.to_string())
                            }
                        };
                        o["min"] = num(min);
                        o["max"] = num(max);
                        o["mean"] = num(mean);
                        o["nan"] = nan.into();
                    }
                }
                if let Some(m) = status(name) {
                    o["compare"] = match &m.problem {
                        None => "match".into(),
                        Some(p) => serde_json::json!({ "mismatch": p }),
                    };
                }
                o
            })
            .collect();
        let files: Vec<serde_json::Value> = written
            .iter()
            .map(|w| {
                let mut f = serde_json::json!({ "name": w.name, "kind": w.kind });
                if !w.path.as_os_str().is_empty() {
                    f["file"] = w.path.display().to_string().into();
                }
                if let (Some(elem), Some(file_elem)) = (w.elem, w.file_elem) {
                    f["dtype"] = elem.name().into();
                    f["file_dtype"] = file_elem.name().into();
                }
                if let Some(note) = &w.note {
                    f["note"] = note.as_str().into();
                }
                f
            })
            .collect();
        let bindings: serde_json::Map<String, serde_json::Value> =
            plan.bindings().iter().map(|b| (b.symbol.clone(), b.size.into())).collect();
        let partial = plan.partial();
        let mut doc = serde_json::json!({
            "model": args.model.display().to_string(),
            "backend": backend.name(),
            "outputs": outs,
            "peak_bytes": peak,
            "predicted_peak_bytes": predicted,
            "bindings": bindings,
            "prediction_partial": partial.iter().take(MAX_REASONS).collect::<Vec<_>>(),
        });
        if partial.len() > MAX_REASONS {
            doc["prediction_partial_more"] = (partial.len() - MAX_REASONS).into();
        }
        if !written.is_empty() {
            doc["written"] = files.into();
        }
        if matches!(backend, Backend::Simd) {
            doc["fallbacks"] = fallbacks.iter().map(Fallback::json).collect::<Vec<_>>().into();
            doc["reference_share"] = reference_share.into();
        }
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default()));
        return;
    }
    let mut text = String::new();
    for (name, v) in &result.outputs {
        match v {
            Value::Tensor(t) => {
                text.push_str(&format!("{name}: {}{}", t.elem(), shape_text(t)));
                if let Some((min, max, mean, nan)) = summary(t) {
                    text.push_str(&format!("  min {min:.6} max {max:.6} mean {mean:.6} nan {nan}"));
                }
            }
            Value::Sequence(elem, items) => {
                let shapes: Vec<String> = items.iter().map(shape_text).collect();
                text.push_str(&format!("{name}: sequence of {} {elem} tensor(s) {}", items.len(), shapes.join(" ")));
            }
            other => text.push_str(&format!("{name}: {}", other.kind())),
        }
        if let Some(m) = status(name) {
            match &m.problem {
                None => text.push_str("  (matches stored)"),
                Some(p) => text.push_str(&format!("  MISMATCH: {p}")),
            }
        }
        text.push('\n');
    }
    for note in written.iter().filter_map(|w| w.note.as_ref()) {
        text.push_str(&format!("note: {note}\n"));
    }
    text.push_str(&fallback_note(fallbacks));
    match predicted {
        Some(p) if matches!(backend, Backend::Reference) => {
            text.push_str(&format!("peak live bytes: {peak} (predicted {p})\n"))
        }
        // The plan replays the reference executor; the other backends keep
        // other buffers (initializers between runs, outputs in place).
        Some(p) => text.push_str(&format!("peak live bytes: {peak} (the reference executor's, predicted: {p})\n")),
        None => {
            let reasons = plan.partial();
            let more = if reasons.len() > 1 { format!("; and {} more", reasons.len() - 1) } else { String::new() };
            let first = reasons.first().map_or("", String::as_str);
            text.push_str(&format!("peak live bytes: {peak} (not predicted: {first}{more})\n"));
        }
    }
    crate::emit(&text);
}

/// The lines saying which steps of the simd backend fell back to the
/// reference kernels, and why (none: no line).
pub fn fallback_note(fallbacks: &[Fallback]) -> String {
    const SHOWN: usize = 5;
    let mut text = String::new();
    if fallbacks.is_empty() {
        return text;
    }
    text.push_str(&format!("note: {} step(s) of the simd backend ran on the reference kernels:\n", fallbacks.len()));
    for f in fallbacks.iter().take(SHOWN) {
        text.push_str(&format!("  {f}\n"));
    }
    if fallbacks.len() > SHOWN {
        text.push_str(&format!("  and {} more (--json lists them all)\n", fallbacks.len() - SHOWN));
    }
    text
}

/// One output's comparison.
struct Mismatch {
    name: String,
    problem: Option<String>,
}

fn stored_for(stored: &Path, index: usize, name: &str) -> Option<PathBuf> {
    if stored.exists() && !stored.is_dir() {
        return (index == 0).then(|| stored.to_path_buf());
    }
    let safe = file_name(name);
    let files =
        [format!("output_{index}.pb"), format!("{safe}.npy"), format!("output_{index}.npy"), format!("{safe}.pb")];
    files.iter().map(|f| stored.join(f)).find(|p| p.is_file()).or_else(|| {
        // a sequence that `-o` wrote: a directory of element files
        [safe, format!("output_{index}")].iter().map(|d| stored.join(d)).find(|p| p.is_dir())
    })
}

fn compare_all(outputs: &[(String, Value)], stored: &Path, tolerance: (f64, f64)) -> Result<Vec<Mismatch>, Failure> {
    if !stored.exists() {
        return Err(bad(format!("--compare {}: no such file or directory", stored.display())));
    }
    let mut result = Vec::new();
    for (i, (name, v)) in outputs.iter().enumerate() {
        let Some(file) = stored_for(stored, i, name) else {
            if !stored.is_dir() {
                continue;
            }
            if matches!(v, Value::Optional(None)) {
                // `-o` writes nothing for an empty optional
                result.push(Mismatch { name: name.clone(), problem: None });
                continue;
            }
            return Err(bad(format!(
                "--compare {}: no stored value for output {i} '{name}' (output_{i}.pb or {}.npy)",
                stored.display(),
                file_name(name)
            )));
        };
        let want = crate::value_io::read_stored(&file, v)?;
        let problem = crate::value_io::compare_values(v, &want, &|a, b| compare(a, b, tolerance));
        result.push(Mismatch { name: name.clone(), problem });
    }
    Ok(result)
}

/// `None` when `got` matches `want` (within `rtol`·|stored| + `atol`, NaNs
/// equal; a 16-bit float also within two units in the last place of the
/// stored value, which rtol 1e-3 is finer than: rounding intermediates in
/// another order is not an error); otherwise the worst element.
fn compare(got: &Tensor, want: &Tensor, (rtol, atol): (f64, f64)) -> Option<String> {
    // A stored file may hold the widening `-o` writes for a type NumPy lacks.
    let widened = diamond::values::npy::npy_elem(got.elem()) == Some(want.elem());
    if got.elem() != want.elem() && !widened {
        return Some(format!("element type {}, stored {}", got.elem(), want.elem()));
    }
    if got.shape != want.shape {
        return Some(format!("shape {}, stored {}", shape_text(got), shape_text(want)));
    }
    if let (Data::Str(a), Data::Str(b)) = (&got.data, &want.data) {
        let i = a.iter().zip(b).position(|(x, y)| x != y)?;
        return Some(format!(
            "element {i}: '{}', stored '{}'",
            String::from_utf8_lossy(&a[i]),
            String::from_utf8_lossy(&b[i])
        ));
    }
    let (g, w) = (got.to_f64s()?, want.to_f64s()?);
    let exact = !got.is_float();
    let mantissa = match got.elem() {
        ElemType::Bfloat16 => Some(7),
        ElemType::Float16 => Some(10),
        _ => None,
    };
    let mut worst: Option<(usize, f64)> = None;
    let mut count = 0;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        if (a.is_nan() && b.is_nan()) || a == b {
            continue;
        }
        let excess = if exact || a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
            f64::INFINITY
        } else {
            let mut tol = atol + rtol * b.abs();
            if let Some(m) = mantissa.filter(|_| b != 0.0) {
                tol = tol.max(2.0 * 2f64.powi(b.abs().log2().floor() as i32 - m));
            }
            (a - b).abs() - tol
        };
        if excess > 0.0 {
            count += 1;
            if worst.is_none_or(|(_, e)| excess > e) {
                worst = Some((i, excess));
            }
        }
    }
    let (i, _) = worst?;
    let index = unravel(i, &got.shape);
    Some(format!(
        "{count} element(s) differ; worst at {index:?}: {}, stored {} (|diff| {:e})",
        g[i],
        w[i],
        (g[i] - w[i]).abs()
    ))
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for a in (0..shape.len()).rev() {
        if shape[a] > 0 {
            idx[a] = i % shape[a];
            i /= shape[a];
        }
    }
    idx
}

/// Writes the outputs and the dumped values under `dir` (`value_io`'s layout).
fn write_outputs(dir: &Path, outputs: &[(String, Value)], dumped: &[(String, Value)]) -> Result<Vec<Written>, Failure> {
    let all: Vec<(&String, &Value)> = outputs.iter().chain(dumped).map(|(n, v)| (n, v)).collect();
    crate::value_io::write_outputs(dir, &all)
}
