//! The `diamond` command line, over the `diamond` library (`src/`).
//!
//! Subcommands: `inspect` (what a model declares), `check` (infer and audit shapes and types), `convert` (import and
//! re-export), `optimize`, `run` and `bench` (execute on the SIMD backend or the reference executor), `lower` (kernel
//! programs) and `solve` (a `.rows` constraint system). Exit codes are the project's contract: 0 clean (warnings
//! allowed), 1 errors found in the model, 2 the input could not be read or the
//! command line is wrong. Every failure prints one `error:` line naming the
//! file and the problem.

mod bench;
mod bench_profile;
#[cfg(feature = "tract")]
mod bench_tract;
mod bind;
mod check_json;
mod check_report;
mod commands;
mod convert;
mod latency;
mod lower_cmd;
mod optimize_cmd;
mod render;
mod run;
mod value_io;

use clap::{Parser, Subcommand};

/// mimalloc: checking a large graph makes millions of small allocations
/// (rows, facts, size expressions); glibc's allocator spent a third of the
/// time in them (measured with perf on a 180k-node model). Its version 2
/// (the `v2` feature), not 3: on the 42k-node GPT-2 v3's arena left freed
/// 2 MiB huge pages resident between live ones (83 MB of anonymous memory
/// for ~55 MB live) where v2 fills its segments densely (66 MB), at 0.93x
/// the CPU (README, issue 19).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::path::PathBuf;
use std::process::ExitCode;

/// Shape and type inference, auditing, optimization and re-export for ONNX graphs.
#[derive(Parser)]
#[command(name = "diamond", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simplify a model into smaller standard ONNX: fold shape arithmetic, drop no-ops and dead code, merge
    /// common subexpressions. Inputs, outputs and their dim names are kept.
    Optimize {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// Where to write the optimized ONNX model.
        #[arg(short, long)]
        output: PathBuf,
        /// The passes to run, comma-separated, in order (default: every pass; `--stats` lists them).
        #[arg(long, value_name = "LIST")]
        passes: Option<String>,
        /// Fold a constant only when its result holds at most this many bytes or no more than its inputs
        /// (e.g. 1MiB, 64KiB, 2GB, 0, or `none` for no limit). Default: 1MiB.
        #[arg(long = "fold-limit", value_name = "SIZE", value_parser = optimize_cmd::parse_size)]
        fold_limit: Option<u64>,
        /// Upgrade the model to this default-domain opset first (13 and later, up to 23; exact upgrades only),
        /// so that fusions into newer operators (Gelu, RMSNormalization) apply.
        #[arg(long = "target-opset", value_name = "N")]
        target_opset: Option<i64>,
        /// Print node counts per operator before and after, and each pass's rewrites.
        #[arg(long)]
        stats: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Skip running original and result on the reference executor (random inputs, several symbol values).
        #[arg(long)]
        no_verify: bool,
        /// When verification fails, name the first pass whose result differs.
        #[arg(long)]
        bisect: bool,
        /// The shape of a TorchScript input: NAME=D0,D1,... (sizes or symbols).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
    },
    /// Summarize a model: versions, opsets, operators, inputs/outputs, weights.
    Inspect {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Explain a diagnostic code: what it means, a model that shows it, how to fix it
    /// (without CODE: every code, one line each).
    Explain {
        /// The code, as diagnostics print it (`divisibility`, `broadcast-conflict`).
        code: Option<String>,
    },
    /// Solve a `.rows` constraint system: principal and closed shapes, diagnostics.
    Solve {
        /// The `.rows` file.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Infer every value's shape and element type and report what is wrong.
    Check {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Bind graph inputs to constant tensors: `.pb` TensorProto or `.npy` files, or directories of them.
        #[arg(long, num_args = 1..)]
        bind: Vec<PathBuf>,
        /// Treat stated size-1 axes as claims: report every place broadcasting widens one (`unit-axis-widened`).
        #[arg(long)]
        strict_units: bool,
        /// The shape of a TorchScript input: NAME=D0,D1,... (sizes or symbols, e.g. x=batch,3,224,224).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
        /// Also write the diagnostics as SARIF 2.1.0 to this file.
        #[arg(long, value_name = "FILE")]
        sarif: Option<PathBuf>,
        /// Treat warnings as errors: any warning makes the exit code 1.
        #[arg(long)]
        deny_warnings: bool,
        /// Render at most N diagnostics in the text report (--json and --sarif carry all).
        #[arg(long, value_name = "N")]
        max_diagnostics: Option<usize>,
        /// Colour the text report: auto (a terminal, NO_COLOR unset), always, never.
        #[arg(long, value_enum, default_value_t = render::ColorChoice::Auto)]
        color: render::ColorChoice,
        /// Also write a self-contained HTML report (values, diagnostics, a picture around each one's node) to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Re-export models as ONNX with their inferred shapes and types in `value_info`: one model to a file, or
    /// files, directories (recursive) and globs into a directory mirroring the input tree.
    Convert {
        /// Model files, directories (searched recursively for *.onnx) or glob patterns.
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
        /// The output file (one model) or directory (a batch).
        #[arg(short, long)]
        output: PathBuf,
        /// Workers converting in parallel (default: the number of cores).
        #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// Convert only the K-th of N stable shares of the inputs (K from 0), for job arrays across machines.
        #[arg(long, value_name = "K/N")]
        shard: Option<diamond::batch::Shard>,
        /// Write one JSON object per model (input, output, status, seconds, nodes, diagnostics) to FILE.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Leave outputs that already exist (resume an interrupted batch).
        #[arg(long)]
        skip_existing: bool,
        /// Write models whose check finds errors anyway (re-exported as read, without inferred types).
        #[arg(long)]
        allow_errors: bool,
        /// Re-export only: do not add the inferred types.
        #[arg(long)]
        no_value_info: bool,
        /// Also write inferred sizes over the dim names an exporter invented in the graph outputs
        /// (`unk__3` → `batch`); by default outputs keep the file's names.
        #[arg(long)]
        output_dims: bool,
        /// Optimize each model (the passes of `diamond optimize`) before writing it.
        #[arg(long)]
        optimize: bool,
        /// The shape of a TorchScript input: NAME=D0,D1,... (sizes or symbols, e.g. x=batch,3,224,224).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
    },
    /// Execute a model (on the SIMD backend by default, or the reference executor): print each output's type, shape and summary, and the peak
    /// of live bytes beside the plan's prediction; write them (-o) or compare them with stored outputs
    /// (--compare). Exit 1 on a mismatch, 2 on bad input (a fed shape that contradicts the model included).
    Run {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// An input: NAME=FILE (.npy or .pb TensorProto). A sequence input takes a directory of .npy/.pb
        /// tensor files (in name order) or a .pb SequenceProto, a map input a .pb MapProto, an optional
        /// input a .pb OptionalProto or what it holds. A bare FILE or DIR is matched to inputs as --bind
        /// does (stored name, file stem, input_N).
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Feed the inputs these files or directories hold, matched to inputs as check's --bind matches
        /// them (the same directory works with both).
        #[arg(long, num_args = 1.., value_name = "DIR|FILE")]
        bind: Vec<PathBuf>,
        /// Write every output under DIR: a tensor as NAME.npy (strings as NumPy str arrays; bfloat16,
        /// float8 and float4 as float32, 4- and 2-bit integers as int8/uint8: NumPy lacks them, and each
        /// value widens exactly), a sequence as the directory NAME/ (0000.npy, ...), a map as NAME.json,
        /// an optional as the value it holds (nothing, with a note, when empty). Files appear whole.
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Compare with stored outputs: a directory of output_N.pb / NAME.npy (.pb of any value kind; a
        /// sequence also as a directory NAME/), or one file for the first output.
        #[arg(long, value_name = "PATH")]
        compare: Option<PathBuf>,
        /// --compare's relative tolerance: an element passes within RTOL·|stored| + ATOL.
        #[arg(long, default_value_t = run::RTOL, value_name = "RTOL")]
        rtol: f64,
        /// --compare's absolute tolerance.
        #[arg(long, default_value_t = run::ATOL, value_name = "ATOL")]
        atol: f64,
        /// Seed of --random.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Generate the inputs not given with --input (floats in [-1, 1), integers in [0, 10)).
        #[arg(long)]
        random: bool,
        /// The shape of a generated input: NAME=D0,D1,... (unstated symbolic sizes default to 1).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
        /// Also write these intermediate values (comma-separated names) into the -o directory.
        #[arg(long, value_name = "NAME,...")]
        dump: Vec<String>,
        /// Also write every intermediate value into the -o directory.
        #[arg(long)]
        dump_all: bool,
        /// The executor: `simd` (fused kernel programs, AVX-512 or AVX2+FMA when the processor has them;
        /// DIAMOND_SIMD=off forces the portable code, DIAMOND_SIMD=avx2 the AVX2 code) or `reference` (the plain kernels; also what --dump and --dump-all use).
        #[arg(long, value_enum, default_value_t = run::Backend::Simd)]
        backend: run::Backend,
        /// Run the model as it is: by default the simd backend first applies `diamond optimize`'s passes
        /// (as onnxruntime and tract optimize a model they load); the reference backend never does.
        #[arg(long)]
        no_optimize: bool,
    },
    /// Lower a model to kernel programs (fusion groups) and print them: `--emit kernels`.
    Lower {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// What to print: `kernels` (the programs in text form, with the nodes left to the reference kernels).
        #[arg(long, value_name = "WHAT", default_value = "kernels")]
        emit: String,
        /// The target: `cpu` (kernel programs as text) or `cuda` (with -o DIR: the optimized model, each
        /// kernel's CUDA C, PTX and sm_80/sm_90 CUBINs, and manifest.json; needs NVRTC and ptxas).
        #[arg(long, default_value = "cpu")]
        target: String,
        /// Write each program as DIR/NAME.txt instead of printing.
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// The shape of a TorchScript input: NAME=D0,D1,... (sizes or symbols).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
    },
    /// Measure a model's latency (median, p90, min over --runs after --warmup), throughput and peak of live
    /// bytes on a backend, on a pool of --threads threads, beside the same model in tract (optimized,
    /// single-threaded) in the same process. Inputs as for run; those not given are random (--input-shape).
    Bench {
        /// The model: ONNX, a TorchScript archive (.pt) or TorchScript IR text.
        model: PathBuf,
        /// The backend measured.
        #[arg(long, value_enum, default_value_t = run::Backend::Simd)]
        backend: run::Backend,
        /// Threads the backend runs on (default: the machine's cores; tract runs on one).
        #[arg(long)]
        threads: Option<usize>,
        /// Measured runs.
        #[arg(long, default_value_t = 10)]
        runs: usize,
        /// Unmeasured runs before them.
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        /// An input: NAME=FILE or a bare FILE/DIR, as for run.
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Feed the inputs these files or directories hold, as for run and check.
        #[arg(long, num_args = 1.., value_name = "DIR|FILE")]
        bind: Vec<PathBuf>,
        /// The shape of a generated input: NAME=D0,D1,... (unstated symbolic sizes default to 1).
        #[arg(long = "input-shape", value_name = "NAME=DIMS")]
        input_shape: Vec<diamond::InputShape>,
        /// Seed of the generated inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Print the backend's time per kernel group.
        #[arg(long)]
        profile: bool,
        /// Exit 1, naming the step, when a float step of a fused group falls back to the reference kernels
        /// (the report lists every fallback and why either way).
        #[arg(long)]
        strict: bool,
        /// Run the model as it is: by default the simd backend first applies `diamond optimize`'s passes
        /// (as onnxruntime and tract optimize a model they load); the reference backend never does.
        #[arg(long)]
        no_optimize: bool,
        /// Measure diamond alone, without tract beside it (for profiling many runs of a model tract is slow on)
        #[arg(long)]
        no_tract: bool,
    },
}

/// A failure and the exit code it maps to.
pub struct Failure {
    /// 1: errors found in the model; 2: input unreadable or usage.
    pub code: u8,
    /// The message, naming the file and the problem.
    pub message: String,
}

/// Writes a command's report to stdout. A closed pipe (`diamond check m.onnx | head`) is not an error.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // `check` runs once per commit in CI and over whole zoos: it ends at once.
    let exits_at_once = matches!(cli.command, Command::Check { .. });
    let result = match cli.command {
        Command::Inspect { model, json } => commands::inspect(&model, json),
        Command::Explain { code } => commands::explain(code.as_deref()),
        Command::Convert {
            inputs,
            output,
            jobs,
            shard,
            report,
            skip_existing,
            allow_errors,
            no_value_info,
            output_dims,
            optimize,
            input_shape,
        } => {
            let settings = diamond::batch::Settings {
                shapes: input_shape,
                allow_errors,
                no_value_info,
                output_dims,
                optimize,
                skip_existing,
            };
            let options = convert::Options { settings, jobs: jobs.map(usize::from), shard, report };
            convert::run(&inputs, &output, &options)
        }
        Command::Solve { file, json } => commands::solve(&file, json),
        Command::Optimize {
            model,
            output,
            passes,
            fold_limit,
            target_opset,
            stats,
            json,
            no_verify,
            bisect,
            input_shape,
        } => optimize_cmd::run(&optimize_cmd::Request {
            input: &model,
            output: &output,
            passes: passes.as_deref(),
            fold_limit,
            target_opset,
            stats,
            json,
            shapes: &input_shape,
            verify: !no_verify,
            bisect,
        }),
        Command::Lower { model, emit, target, output, input_shape } => {
            lower_cmd::run(&model, &emit, &target, output.as_deref(), &input_shape)
        }
        Command::Run {
            model,
            inputs,
            bind,
            output,
            json,
            compare,
            rtol,
            atol,
            seed,
            random,
            input_shape,
            dump,
            dump_all,
            backend,
            no_optimize,
        } => run::run(&run::Args {
            tolerance: (rtol, atol),
            inputs: with_bound(inputs, &bind),
            backend,
            optimize: !no_optimize,
            model,
            output_dir: output,
            json,
            compare,
            seed,
            random,
            input_shape,
            dump,
            dump_all,
        }),
        Command::Bench {
            model,
            backend,
            threads,
            runs,
            warmup,
            inputs,
            bind,
            input_shape,
            seed,
            json,
            profile,
            strict,
            no_optimize,
            no_tract,
        } => bench::run(&bench::Args {
            inputs: with_bound(inputs, &bind),
            model,
            backend,
            optimize: !no_optimize,
            threads,
            runs,
            warmup,
            input_shape,
            seed,
            json,
            profile,
            strict,
            tract: !no_tract,
        }),
        Command::Check {
            model,
            json,
            bind,
            strict_units,
            input_shape,
            html,
            sarif,
            deny_warnings,
            max_diagnostics,
            color,
        } => {
            let render = render::Options { color, max_diagnostics, sarif, deny_warnings };
            commands::check(&model, json, &bind, strict_units, &input_shape, html.as_deref(), &render)
        }
    };
    let code = match result {
        Ok(()) => 0,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            failure.code
        }
    };
    if exits_at_once {
        exit_now(code);
    }
    ExitCode::from(code)
}

/// Ends the process with `code` once the standard streams are flushed,
/// leaving what it allocated to the kernel: the allocator's exit-time sweep
/// of its pages was ~4% of the CPU of a 42k-node `check`.
fn exit_now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process and nothing after it runs; every
    // stream diamond buffers was flushed above or closed by its writer.
    unsafe { libc::_exit(i32::from(code)) }
}

/// `--input` arguments with `--bind`'s paths added as bare paths, which
/// `run` matches to inputs by `--bind`'s rules.
fn with_bound(mut inputs: Vec<String>, bind: &[PathBuf]) -> Vec<String> {
    inputs.extend(bind.iter().map(|p| p.display().to_string()));
    inputs
}
