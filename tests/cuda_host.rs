//! The CUDA backend without a GPU: every kernel program the lowering makes
//! of every fixture model (exports, runtime and optimize fixtures, and the
//! light models whose reference run is quick) becomes CUDA C; a model's kernels, as one translation unit with
//! the host shim, are compiled by g++ and run on the CPU, each on the very
//! tensors the reference executor computed for its operands, and write what
//! the reference executor computed for its outputs (within the rounding of
//! `f32` arithmetic and of FMA contraction). The same translation units
//! (every distinct kernel of every fixture, one translation unit) compile with
//! NVRTC and assemble with ptxas for sm_80 and sm_90 with no
//! spills (that test fails when `REQUIRE_NVRTC=1` and NVRTC is missing, and
//! is skipped with a message otherwise).

mod common;
mod simd;

use diamond_runtime::cuda::{self, host::HostProgram, tensors, CudaKernel};
use diamond_runtime::exec::{DumpSet, RunOptions};
use diamond_runtime::kernel::Program;
use diamond_runtime::{Fed, Plan, Tensor, Value};
use simd::{agree, export_inputs, random_inputs};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The light models whose reference run (every value kept) is quick: the
/// others' convolutions take the reference kernels tens of seconds.
const LIGHT: [&str; 3] = ["light_squeezenet", "light_shufflenet", "light_inception_v1"];

fn models() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for dir in ["fixtures/light", "fixtures/exports", "fixtures/runtime", "fixtures/optimize"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(common::root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
            .filter(|p| !dir.ends_with("light") || LIGHT.iter().any(|l| p.file_stem().is_some_and(|s| s == *l)))
            .collect();
        v.sort();
        all.extend(v);
    }
    all
}

fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-cache")
}

/// The stored inputs of an export, else random ones.
fn inputs_of(model: &diamond_ir::Model, path: &Path) -> Option<Vec<(String, Value)>> {
    if path.to_string_lossy().contains("exports") {
        return export_inputs(model, path);
    }
    random_inputs(model, 7)
}

/// Each distinct kernel once: programs of the same shape and body share
/// one (named by position), so a network's repeated layers compile once.
/// Two programs may share a source while naming different symbols (its
/// `S0, S1, ...` are each program's own symbols in order), so each job
/// takes the symbol values of its own program's kernel.
struct Kernels {
    kernels: Vec<CudaKernel>,
    by_source: HashMap<String, usize>,
}

impl Kernels {
    fn add(&mut self, p: &Program) -> Result<(usize, CudaKernel), String> {
        let own = cuda::generate(p)?;
        let body = own.source.replacen(&own.name, "@", 1);
        if let Some(&i) = self.by_source.get(&body) {
            return Ok((i, own));
        }
        let i = self.kernels.len();
        let mut k = own.clone();
        k.source = body.replacen('@', &format!("k{i}"), 1);
        k.name = format!("k{i}");
        self.kernels.push(k);
        self.by_source.insert(body, i);
        Ok((i, own))
    }
}

#[test]
fn every_fixture_kernel_runs_on_the_host_shim_to_the_reference_values() {
    let (mut programs_checked, mut failures) = (0, Vec::new());
    for path in models() {
        if std::env::var("CUDA_HOST_ONLY").is_ok_and(|only| !path.to_string_lossy().contains(&only)) {
            continue;
        }
        let Ok(model) = diamond_importers::onnx::load_model(&path) else { continue };
        let Some(lowered) = diamond_optimize::lower::lower(&model) else { continue };
        let programs: Vec<&Program> = lowered.programs().collect();
        if programs.is_empty() {
            continue;
        }
        let Some(inputs) = inputs_of(&model, &path) else { continue };
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let Ok(plan) = Plan::new(&model, &fed) else { continue };
        let symbols: HashMap<String, i64> = plan.bindings().iter().map(|b| (b.symbol.clone(), b.size as i64)).collect();
        let options = RunOptions { dump: Some(DumpSet::All) };
        let Ok(run) = diamond_runtime::run_model(&model, inputs.clone(), &options) else { continue };
        let mut values: HashMap<String, Tensor> = HashMap::new();
        for (name, v) in inputs.iter().chain(&run.dumped) {
            if let Value::Tensor(t) = v {
                values.insert(name.clone(), t.clone());
            }
        }
        let graph = model.main_graph().unwrap();
        for t in &graph.initializers {
            if let (Some(name), Ok(v)) = (t.name.as_deref(), Tensor::from_ir(t)) {
                values.entry(name.to_string()).or_insert(v);
            }
        }
        let value_of = |s: &str| symbols.get(s).copied();
        let mut kernels = Kernels { kernels: Vec::new(), by_source: HashMap::new() };
        let mut jobs = Vec::new();
        let mut jobs_kernel = Vec::new();
        let mut wants = Vec::new();
        for p in programs {
            let (index, own) = match kernels.add(p) {
                Ok(added) => added,
                Err(e) => {
                    failures.push(format!("{}: {}: no kernel: {e}", path.display(), p.name));
                    continue;
                }
            };
            let operands: Option<Vec<&Tensor>> = p.operands.iter().map(|v| values.get(&v.value)).collect();
            let Some(operands) = operands else {
                failures.push(format!("{}: {}: an operand the reference did not compute", path.display(), p.name));
                continue;
            };
            match tensors::job(p, &own, index, &operands, &value_of) {
                Ok((mut job, outs)) => {
                    // The grid-stride loops cover any grid: a few blocks keep
                    // the emulation (one OS thread per CUDA thread) quick.
                    job.grid = job.grid.min(8);
                    jobs_kernel.push(index);
                    jobs.push(job);
                    wants.push((
                        p.name.clone(),
                        p.operands.len(),
                        outs,
                        p.outputs.iter().map(|o| o.view.value.clone()).collect::<Vec<_>>(),
                    ));
                }
                Err(e) => failures.push(format!("{}: {}: {e}", path.display(), p.name)),
            }
        }
        let host = HostProgram::build(&kernels.kernels, &cache()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let results = match host.run(jobs) {
            Ok(r) => r,
            Err(e) => {
                if let Some(j) =
                    e.split("job ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse::<usize>().ok())
                {
                    if let Some(p) = lowered.programs().find(|p| p.name == wants[j].0) {
                        eprintln!("{}", diamond_runtime::kernel::print::program(p, &|n| format!("{n:?}")));
                        eprintln!("{}", kernels.kernels[jobs_kernel[j]].source);
                    }
                }
                failures.push(format!("{}: {e}: {:?}", path.display(), wants.iter().map(|w| &w.0).collect::<Vec<_>>()));
                continue;
            }
        };
        for ((name, n_in, outs, out_names), buffers) in wants.into_iter().zip(results) {
            programs_checked += 1;
            for (k, ((elem, shape), value)) in outs.into_iter().zip(out_names).enumerate() {
                let Some(want) = values.get(&value) else { continue };
                let got = tensors::from_bytes(elem, shape, &buffers[n_in + k]).unwrap();
                if let Err(e) = agree(&Value::Tensor(got), &Value::Tensor(want.clone()), 1e-4, 1e-5) {
                    failures.push(format!("{}: {name} output '{value}': {e}", path.display()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    if std::env::var("CUDA_HOST_ONLY").is_err() {
        assert!(programs_checked >= 500, "only {programs_checked} programs checked");
    }
}

#[test]
fn every_fixture_kernel_compiles_with_nvrtc_and_assembles_for_sm_80_and_sm_90_without_spills() {
    if !cuda::nvrtc::available() {
        assert!(std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"), "{}", cuda::nvrtc::MISSING);
        eprintln!("skipped: {}", cuda::nvrtc::MISSING);
        return;
    }
    // Every distinct kernel of every fixture model, as one translation unit.
    let mut kernels = Kernels { kernels: Vec::new(), by_source: HashMap::new() };
    let mut programs = 0;
    for path in models() {
        let Ok(model) = diamond_importers::onnx::load_model(&path) else { continue };
        let Some(lowered) = diamond_optimize::lower::lower(&model) else { continue };
        for p in lowered.programs() {
            kernels.add(p).unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), p.name));
            programs += 1;
        }
    }
    let built = cuda::artifact::build(&kernels.kernels, Some(&cache())).unwrap_or_else(|e| panic!("{e}"));
    for arch in cuda::artifact::ARCHS {
        for k in &kernels.kernels {
            let u = built.usage.iter().find(|u| u.kernel == k.name && u.arch == arch);
            let u = u.unwrap_or_else(|| panic!("ptxas reported nothing for {} on {arch}", k.name));
            assert!(u.spill_stores == 0 && u.spill_loads == 0, "{} spills on {arch}: {u:?}\n{}", k.name, k.source);
        }
    }
    let most = built.usage.iter().map(|u| u.registers).max().unwrap_or(0);
    eprintln!("{programs} programs, {} distinct kernels; at most {most} registers a thread", kernels.kernels.len());
    assert!(kernels.kernels.len() >= 100, "only {} distinct kernels", kernels.kernels.len());
}
