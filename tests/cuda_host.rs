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

use diamond_runtime::cuda::contraction::{self, ContractionKernel};
use diamond_runtime::cuda::{self, host::HostProgram, tensors, CudaKernel};
use diamond_runtime::exec::{DumpSet, RunOptions};
use diamond_runtime::kernel::{Contraction, Program, Step};
use diamond_runtime::{Fed, Plan, Tensor, Value};
use simd::{agree, export_inputs, random_inputs, read};
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

    /// A contraction step's kernel, shared like the programs' (its name
    /// appears in its epilogue function too: every occurrence is renamed).
    fn add_contraction(
        &mut self,
        c: &Contraction,
        graph: &diamond_ir::Graph,
    ) -> Result<(usize, ContractionKernel), String> {
        const NAME: &str = "dm_contraction_kernel";
        let own = contraction::generate(c, &graph.nodes[c.node], NAME)?;
        let body = own.kernel.source.replace(NAME, "@");
        if let Some(&i) = self.by_source.get(&body) {
            return Ok((i, own));
        }
        let i = self.kernels.len();
        let mut k = own.kernel.clone();
        k.source = body.replace('@', &format!("k{i}"));
        k.name = format!("k{i}");
        self.kernels.push(k);
        self.by_source.insert(body, i);
        Ok((i, own))
    }
}

/// The most shared-memory rounds (tiles × K steps) a contraction step may
/// take on the host shim (each round two block-wide barriers across 256
/// emulated threads): a guard against a fixture added later that would
/// take minutes. Every step of today's fixtures fits (the light models'
/// large and grouped convolutions take up to tens of thousands of rounds).
const EMULATION_BUDGET: u64 = 65536;

/// One launch's expectations: what it is, how many of its buffers are
/// inputs, each output's type, shape and value name, and the tolerance.
struct Want {
    name: String,
    n_in: usize,
    outs: Vec<(diamond_ir::ElemType, Vec<usize>)>,
    out_names: Vec<String>,
    rtol: f64,
    atol: f64,
    /// The contracted size, for a contraction.
    depth: Option<u64>,
}

/// The largest absolute and relative differences of `got` from `want`.
fn differences(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let (a, b) = (got.to_f64s().unwrap_or_default(), want.to_f64s().unwrap_or_default());
    a.iter().zip(&b).filter(|(x, y)| x.is_finite() && y.is_finite()).fold((0.0, 0.0), |(abs, rel), (x, y)| {
        let d = (x - y).abs();
        (f64::max(abs, d), f64::max(rel, d / y.abs().max(1e-3)))
    })
}

/// What checking one model's kernels on the host found.
#[derive(Default)]
struct Tally {
    programs_checked: usize,
    contractions_checked: usize,
    failures: Vec<String>,
    uncovered: Vec<String>,
    unfused: usize,
    over_budget: usize,
    /// Contractions' largest absolute and relative differences, and K.
    worst: (f64, f64, u64),
}

/// Every kernel of the model at `path` on the host shim against the reference values.
fn check_on_host(path: &Path) -> Tally {
    let mut t = Tally::default();
    let Ok(model) = diamond_importers::onnx::load_model(path) else { return t };
    let Some(lowered) = diamond_optimize::lower::lower(&model) else { return t };
    let programs: Vec<&Program> = lowered.programs().collect();
    let contractions: Vec<&Contraction> =
        lowered.steps.iter().filter_map(|s| if let Step::Contraction(c) = s { Some(c) } else { None }).collect();
    if programs.is_empty() && contractions.is_empty() {
        return t;
    }
    let Some(inputs) = inputs_of(&model, path) else { return t };
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let Ok(plan) = Plan::new(&model, &fed) else { return t };
    let symbols: HashMap<String, i64> = plan.bindings().iter().map(|b| (b.symbol.clone(), b.size as i64)).collect();
    let options = RunOptions { dump: Some(DumpSet::All) };
    let Ok(run) = diamond_runtime::run_model(&model, inputs.clone(), &options) else { return t };
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
                t.failures.push(format!("{}: {}: no kernel: {e}", path.display(), p.name));
                continue;
            }
        };
        let operands: Option<Vec<&Tensor>> = p.operands.iter().map(|v| values.get(&v.value)).collect();
        let Some(operands) = operands else {
            t.failures.push(format!("{}: {}: an operand the reference did not compute", path.display(), p.name));
            continue;
        };
        match tensors::job(p, &own, index, &operands, &value_of) {
            Ok((mut job, outs)) => {
                // The grid-stride loops cover any grid: a few blocks keep
                // the emulation (one OS thread per CUDA thread) quick.
                job.grid = job.grid.min(8);
                jobs_kernel.push(index);
                jobs.push(job);
                wants.push(Want {
                    name: p.name.clone(),
                    n_in: p.operands.len(),
                    outs,
                    out_names: p.outputs.iter().map(|o| o.view.value.clone()).collect(),
                    rtol: 1e-4,
                    atol: 1e-5,
                    depth: None,
                });
            }
            Err(e) => t.failures.push(format!("{}: {}: {e}", path.display(), p.name)),
        }
    }
    for c in &contractions {
        let label = format!("{:?} {}", c.op, graph.nodes[c.node].name());
        if !c.inputs.iter().flatten().all(|d| values.contains_key(&d.value)) {
            t.failures.push(format!("{}: {label}: an input the reference did not compute", path.display()));
            continue;
        }
        let (index, own) = match kernels.add_contraction(c, graph) {
            Ok(added) => added,
            Err(e) => {
                t.uncovered.push(format!("{}: {label}: {e}", path.display()));
                continue;
            }
        };
        match contraction::job::job(&own, index, &|v| values.get(v).cloned(), &value_of) {
            Ok((_, _, work)) if work.tiles * work.depth.div_ceil(16) > EMULATION_BUDGET => {
                t.over_budget += 1;
                continue;
            }
            Ok((job, outs, work)) => {
                let depth = work.depth;
                t.unfused += usize::from(c.epilogue.is_some() && !own.fused);
                jobs_kernel.push(index);
                jobs.push(job);
                // Accumulation order and FMA contraction: the error grows with K.
                let scale = (depth as f64 / 64.0).max(1.0);
                wants.push(Want {
                    name: label,
                    n_in: own.kernel.n_inputs,
                    outs,
                    out_names: own.writes.iter().map(|w| w.value.clone()).collect(),
                    rtol: 1e-4 * scale.sqrt(),
                    atol: 1e-5 * scale,
                    depth: Some(depth),
                });
            }
            Err(e) => t.failures.push(format!("{}: {label}: {e}", path.display())),
        }
    }
    let host = HostProgram::build(&kernels.kernels, &cache()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let results = match host.run(jobs) {
        Ok(r) => r,
        Err(e) => {
            if let Some(j) =
                e.split("job ").nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse::<usize>().ok())
            {
                if let Some(p) = lowered.programs().find(|p| p.name == wants[j].name) {
                    eprintln!("{}", diamond_runtime::kernel::print::program(p, &|n| format!("{n:?}")));
                    eprintln!("{}", kernels.kernels[jobs_kernel[j]].source);
                }
            }
            t.failures.push(format!(
                "{}: {e}: {:?}",
                path.display(),
                wants.iter().map(|w| &w.name).collect::<Vec<_>>()
            ));
            return t;
        }
    };
    for (w, buffers) in wants.into_iter().zip(results) {
        if w.depth.is_some() {
            t.contractions_checked += 1;
        } else {
            t.programs_checked += 1;
        }
        for (k, ((elem, shape), value)) in w.outs.into_iter().zip(w.out_names).enumerate() {
            let Some(want) = values.get(&value) else {
                t.failures.push(format!("{}: {}: the reference has no '{value}'", path.display(), w.name));
                continue;
            };
            let got = tensors::from_bytes(elem, shape, &buffers[w.n_in + k]).unwrap();
            if let Some(depth) = w.depth {
                let (abs, rel) = differences(&got, want);
                t.worst.0 = t.worst.0.max(abs);
                t.worst.1 = t.worst.1.max(rel);
                t.worst.2 = t.worst.2.max(depth);
            }
            if let Err(e) = agree(&Value::Tensor(got), &Value::Tensor(want.clone()), w.rtol, w.atol) {
                t.failures.push(format!("{}: {} output '{value}': {e}", path.display(), w.name));
            }
        }
    }
    t
}

#[test]
fn every_fixture_kernel_runs_on_the_host_shim_to_the_reference_values() {
    let paths: Vec<PathBuf> = models()
        .into_iter()
        .filter(|p| std::env::var("CUDA_HOST_ONLY").map_or(true, |only| p.to_string_lossy().contains(&only)))
        .collect();
    // The models side by side, one per core: each compiles its kernels with g++.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, usize::from).min(paths.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = paths.get(i) else { break };
                let tally = check_on_host(path);
                found.lock().unwrap().push(tally);
            });
        }
    });
    let (mut programs_checked, mut failures) = (0, Vec::new());
    let (mut contractions_checked, mut uncovered, mut unfused, mut over_budget) = (0, Vec::new(), 0, 0);
    let mut worst = (0.0f64, 0.0f64, 0u64);
    for t in found.into_inner().unwrap() {
        programs_checked += t.programs_checked;
        contractions_checked += t.contractions_checked;
        failures.extend(t.failures);
        uncovered.extend(t.uncovered);
        unfused += t.unfused;
        over_budget += t.over_budget;
        worst = (worst.0.max(t.worst.0), worst.1.max(t.worst.1), worst.2.max(t.worst.2));
    }
    eprintln!(
        "{programs_checked} programs and {contractions_checked} contraction steps checked; contractions: \
         max abs difference {:.3e}, max relative {:.3e} (K up to {}); {unfused} epilogues not fused; {over_budget} over the emulation budget; {} not covered:\n{}",
        worst.0,
        worst.1,
        worst.2,
        uncovered.len(),
        uncovered.join("\n")
    );
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    if std::env::var("CUDA_HOST_ONLY").is_err() {
        assert!(programs_checked >= 500, "only {programs_checked} programs checked");
        assert!(contractions_checked >= 870, "only {contractions_checked} contraction steps checked");
        assert_eq!(over_budget, 0, "contraction steps over the emulation budget");
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
    let (mut programs, mut contractions, mut tiled) = (0, 0, std::collections::BTreeSet::new());
    for path in models() {
        let Ok(model) = diamond_importers::onnx::load_model(&path) else { continue };
        let Some(lowered) = diamond_optimize::lower::lower(&model) else { continue };
        for p in lowered.programs() {
            kernels.add(p).unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), p.name));
            programs += 1;
        }
        let graph = model.main_graph().unwrap();
        for s in &lowered.steps {
            let Step::Contraction(c) = s else { continue };
            if let Ok((i, _)) = kernels.add_contraction(c, graph) {
                contractions += 1;
                tiled.insert(i);
            }
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
    eprintln!(
        "{programs} programs and {contractions} contraction steps, {} distinct kernels ({} tiled); at most {most} registers a thread",
        kernels.kernels.len(),
        tiled.len()
    );
    for arch in cuda::artifact::ARCHS {
        let of_tiled: Vec<&cuda::ptxas::Usage> = built
            .usage
            .iter()
            .filter(|u| u.arch == arch && tiled.iter().any(|&i| kernels.kernels[i].name == u.kernel))
            .collect();
        let registers = of_tiled.iter().map(|u| u.registers);
        let shared = of_tiled.iter().map(|u| u.shared_bytes);
        eprintln!(
            "tiled kernels on {arch}: registers {}..{}, shared memory {}..{} bytes",
            registers.clone().min().unwrap_or(0),
            registers.max().unwrap_or(0),
            shared.clone().min().unwrap_or(0),
            shared.max().unwrap_or(0)
        );
        // Each block stages one K step of both panels in shared memory.
        let staged = 4 * contraction::tiled::K_STEP * (contraction::tiled::TILE_M + contraction::tiled::TILE_N);
        assert!(of_tiled.iter().all(|u| u.shared_bytes >= staged), "{of_tiled:?}");
    }
    assert!(kernels.kernels.len() >= 100, "only {} distinct kernels", kernels.kernels.len());
    assert!(tiled.len() >= 20, "only {} distinct contraction kernels", tiled.len());
}

#[test]
fn node_suite_matmul_gemm_and_conv_cases_run_on_the_host_shim_to_the_stored_outputs() {
    // The ONNX node suite's MatMul, Gemm and Conv cases cover what the
    // fixtures may not: 1-D operands, batch broadcasting, transA/transB,
    // alpha/beta and every C broadcast, strides, pads, dilations.
    let (mut checked, mut uncovered, mut failures) = (0, Vec::new(), Vec::new());
    for case in common::node_cases() {
        let name = common::case_name(&case);
        if !["test_matmul_", "test_gemm_", "test_conv_"].iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let model = diamond_importers::onnx::load_model(&case.join("model.onnx")).unwrap();
        let graph = model.main_graph().unwrap();
        let lowered = diamond_optimize::lower::lower(&model).unwrap();
        let Some(Step::Contraction(c)) = lowered.steps.iter().find(|s| matches!(s, Step::Contraction(_))) else {
            failures.push(format!("{name}: no contraction step"));
            continue;
        };
        let mut kernels = Kernels { kernels: Vec::new(), by_source: HashMap::new() };
        let own = match kernels.add_contraction(c, graph) {
            Ok((_, own)) => own,
            Err(e) => {
                uncovered.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut values: HashMap<String, Tensor> = HashMap::new();
        let fed = graph.required_inputs().into_iter().filter_map(|i| i.value).map(|v| graph.value_name(v).to_string());
        for (path, value) in common::data_files(&case, "input").iter().zip(fed) {
            values.insert(value, read(path).unwrap());
        }
        for t in &graph.initializers {
            if let (Some(n), Ok(v)) = (t.name.as_deref(), Tensor::from_ir(t)) {
                values.insert(n.to_string(), v);
            }
        }
        let (job, outs, _work) = contraction::job::job(&own, 0, &|v| values.get(v).cloned(), &|_| None)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let host = HostProgram::build(&kernels.kernels, &cache()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let buffers = host.run(vec![job]).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0);
        let want = read(&common::data_files(&case, "output")[0]).unwrap();
        let (elem, shape) = outs[0].clone();
        let got = tensors::from_bytes(elem, shape, &buffers[own.kernel.n_inputs]).unwrap();
        checked += 1;
        if let Err(e) = agree(&Value::Tensor(got), &Value::Tensor(want), 1e-4, 1e-5) {
            failures.push(format!("{name}: {e}"));
        }
    }
    eprintln!("{checked} node-suite contractions checked; not covered: {uncovered:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every MatMul and Gemm case, and the Conv cases without auto_pad.
    assert!(checked >= 20, "only {checked} node-suite contractions checked");
    assert!(uncovered.iter().all(|u| u.contains("auto_pad")), "{uncovered:?}");
}
