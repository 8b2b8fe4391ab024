//! `diamond bench`: latency of a model on one backend, and of the same
//! model in tract in the same process.
//!
//! Inputs are read as `diamond run` reads them (`--input`), the rest
//! generated at random (`--input-shape` for symbolic sizes). The model runs
//! `--warmup` times unmeasured, then `--runs` times, on a rayon pool of
//! `--threads` threads (the kernels take their threads from it); the report
//! gives the median, 90th percentile and minimum latency, the throughput at
//! the median, and the executor's peak of live bytes. tract runs the same
//! inputs, optimized (`into_optimized`, inputs fixed to the fed shapes),
//! single-threaded; when it cannot load or run the model its latency is
//! `null` and the reason is given.
//!
//! On the simd backend every step of the measured runs is timed (a clock
//! read per step), so the report always says which steps fell back to the
//! reference kernels and why, and the share of the time spent there;
//! `--strict` makes a float step of a fused group that falls back an
//! error (exit 1) naming the step.

#[cfg(feature = "tract")]
use crate::bench_tract;
use crate::latency::Latency;
use crate::run::{gather_inputs, Backend};
use crate::Failure;
use diamond::session::{Fallback, StepTime};
use diamond::InputShape;
use std::path::PathBuf;
use std::time::Instant;

/// The options of `diamond bench`.
pub struct Args {
    /// The model.
    pub model: PathBuf,
    /// The backend measured.
    pub backend: Backend,
    /// Optimize the model before the simd backend lowers it.
    pub optimize: bool,
    /// Threads of the pool the backend runs on (default: the machine's cores).
    pub threads: Option<usize>,
    /// Measured runs.
    pub runs: usize,
    /// Unmeasured runs first.
    pub warmup: usize,
    /// `--input` arguments, as for `run`.
    pub inputs: Vec<String>,
    /// Shapes of the generated inputs.
    pub input_shape: Vec<InputShape>,
    /// Seed of the generated inputs.
    pub seed: u64,
    /// Print JSON.
    pub json: bool,
    /// Print the backend's per-kernel time breakdown.
    pub profile: bool,
    /// Fail (exit 1) when a float step of a fused group falls back to the reference kernels.
    pub strict: bool,
    /// Measure tract beside diamond.
    pub tract: bool,
}

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// What one measured run of the backend returns.
struct Measured {
    peak_bytes: u64,
    /// The executor that actually ran.
    executor: &'static str,
}

/// `diamond bench MODEL [--backend B] [--threads N] [--runs N] [--warmup N] [--input-shape ...] [--json]`.
pub fn run(args: &Args) -> Result<(), Failure> {
    let path = &args.model;
    if args.runs == 0 {
        return Err(bad("--runs must be at least 1"));
    }
    let threads = match args.threads {
        Some(0) => return Err(bad("--threads must be at least 1")),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    let model = diamond::Model::open_with(path, &diamond::LoadOptions { input_shapes: args.input_shape.clone() })
        .map_err(bad)?;
    let graph = model.ir().main_graph().ok_or_else(|| bad(format!("{}: the model has no graph", path.display())))?;
    let fed = gather_inputs(graph, &args.inputs, &args.input_shape, Some(args.seed))?;
    let refused = |e: diamond::Error| Failure { code: e.exit_code(), message: e.to_string() };
    let options =
        diamond::SessionOptions { backend: args.backend.library(), threads: Some(threads), optimize: args.optimize };
    let mut session = diamond::Session::new(&model, &options).map_err(refused)?;
    session.prepare(&fed).map_err(refused)?;
    let executor = session.backend().name();
    // The pool's other threads spin for the whole loop, between runs too
    // (as onnxruntime's spin between its parallel sections).
    let (latency, last) = session
        .hot(|session| {
            let mut times = Vec::with_capacity(args.runs);
            let mut last = None;
            for i in 0..args.warmup + args.runs {
                if i == args.warmup {
                    session.start_profiling();
                }
                let inputs = fed.clone();
                let start = Instant::now();
                let outputs = session.run(inputs)?;
                if i >= args.warmup {
                    times.push(start.elapsed());
                }
                last = Some(Measured { peak_bytes: outputs.peak_bytes(), executor });
            }
            Ok::<_, diamond::Error>((Latency::of(times), last.expect("at least one run")))
        })
        .map_err(refused)?;
    #[cfg(feature = "tract")]
    let tract = match args.tract {
        true => bench_tract::measure(path, &fed, args.warmup, args.runs),
        false => Err("--no-tract".to_string()),
    };
    #[cfg(not(feature = "tract"))]
    let tract: Result<Latency, String> = {
        let _ = &fed;
        Err("this diamond was built without the `tract` feature".to_string())
    };
    let (profile, fallbacks) = match session.backend() {
        diamond::Backend::Simd => (Some(session.profile()), session.fallbacks()),
        _ => (None, Vec::new()),
    };
    report(args, threads, &latency, &last, &tract, profile.as_deref(), &fallbacks);
    match fallbacks.iter().find(|f| f.float) {
        Some(first) if args.strict => Err(Failure {
            code: 1,
            message: format!(
                "{}: --strict: {} float step(s) fell back to the reference kernels; {first}",
                path.display(),
                fallbacks.iter().filter(|f| f.float).count()
            ),
        }),
        _ => Ok(()),
    }
}

fn report(
    args: &Args,
    threads: usize,
    latency: &Latency,
    last: &Measured,
    tract: &Result<Latency, String>,
    profile: Option<&[StepTime]>,
    fallbacks: &[Fallback],
) {
    let throughput = 1.0 / latency.median.as_secs_f64().max(1e-12);
    let profile = profile.map(|steps| crate::bench_profile::Profile::of(steps, args.runs));
    if args.json {
        let value = serde_json::json!({
            "model": args.model.display().to_string(),
            "backend": args.backend.name(),
            "executor": last.executor,
            "threads": threads,
            "runs": args.runs,
            "warmup": args.warmup,
            "latency_ms": latency.json(),
            "throughput_per_s": throughput,
            "peak_bytes": last.peak_bytes,
            "tract_threads": 1,
            "tract_latency_ms": tract.as_ref().ok().map(Latency::json),
            "tract_error": tract.as_ref().err(),
            "reference_share": profile.as_ref().map(|p| p.reference_share()),
            "fallbacks": fallbacks.iter().map(Fallback::json).collect::<Vec<_>>(),
            "profile_ms": profile.as_ref().filter(|_| args.profile).map(|p| p.json()),
        });
        crate::emit(&format!("{value:#}\n"));
        return;
    }
    let mut text = format!(
        "{}\n  {} ({} executor), {threads} thread(s), {} runs after {} warm-up\n  latency: {}\n  throughput: {throughput:.2} runs/s\n  peak live bytes: {}\n",
        args.model.display(),
        args.backend.name(),
        last.executor,
        args.runs,
        args.warmup,
        latency.text(),
        last.peak_bytes,
    );
    match tract {
        Ok(t) => text.push_str(&format!(
            "  tract (1 thread): {}\n  diamond / tract (median): {:.2}\n",
            t.text(),
            latency.median.as_secs_f64() / t.median.as_secs_f64().max(1e-12)
        )),
        Err(reason) => text.push_str(&format!("  tract: not run: {reason}\n")),
    }
    if let Some(p) = profile.as_ref().filter(|_| !args.profile) {
        text.push_str(&format!("  on the reference kernels: {:.1}% of the step time\n", 100.0 * p.reference_share()));
    }
    for line in crate::run::fallback_note(fallbacks).lines() {
        text.push_str(&format!("  {line}\n"));
    }
    if args.profile {
        match &profile {
            Some(p) => text.push_str(&p.text(latency.median)),
            None => text.push_str(&format!("  profile: the {} executor keeps no per-step times\n", last.executor)),
        }
    }
    crate::emit(&text);
}
