//! Converting many models: the inputs (files, directories walked for
//! models, glob patterns) expanded into jobs, each written under an output
//! directory at the path that mirrors its input tree, converted on a pool
//! of workers, each model isolated from the others — one that fails is
//! recorded and the rest go on. Files:
//! - `inputs.rs` — the arguments expanded into [`Job`]s, and the stable
//!   [`Shard`] of them a machine of a job array takes;
//! - `one.rs` — one model converted ([`convert_file`]): read, check,
//!   annotate, optionally optimize, write atomically, an [`Outcome`].
//!
//! [`convert_batch`] reports each model's start and end to a [`Progress`]
//! (the command line's bars implement it) and stops starting models once
//! its `stop` flag is set.

mod inputs;
mod one;

pub use inputs::{is_pattern, BadInput, Job, Shard};
pub use one::{convert as convert_file, Outcome, Settings, Status};

use crate::error::{Error, Result};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How a batch runs.
#[derive(Clone, Debug, Default)]
pub struct BatchOptions {
    /// What each conversion does.
    pub settings: Settings,
    /// Workers converting at once (default: one per core).
    pub jobs: Option<usize>,
    /// Convert only this share of the jobs (`--shard K/N`).
    pub shard: Option<Shard>,
}

/// Told about a batch as it runs, from the workers' threads.
pub trait Progress: Sync {
    /// What [`Progress::started`] hands to [`Progress::finished`].
    type Flight;
    /// Called once the jobs are known, before any starts: how many.
    fn planned(&self, _jobs: &[Job]) {}
    /// An input argument that names nothing to convert (reported before
    /// the jobs start).
    fn rejected(&self, _bad: &BadInput) {}
    /// Job `key` started.
    fn started(&self, key: &str) -> Self::Flight;
    /// Job `key` ended as `outcome`.
    fn finished(&self, flight: Self::Flight, outcome: &Outcome, key: &str);
}

/// A [`Progress`] that reports nothing.
pub struct Silent;

impl Progress for Silent {
    type Flight = ();
    fn started(&self, _key: &str) {}
    fn finished(&self, _flight: (), _outcome: &Outcome, _key: &str) {}
}

/// How a batch went.
#[derive(Clone, Debug)]
pub struct Batch {
    /// Every model's outcome: the rejected arguments first, then the jobs
    /// run, in the order they were listed.
    pub outcomes: Vec<Outcome>,
    /// Jobs not started because `stop` was set.
    pub not_run: usize,
    /// Jobs listed plus arguments rejected.
    pub total: usize,
    /// Workers the batch ran on.
    pub workers: usize,
    /// Wall time of the jobs.
    pub seconds: f64,
}

/// Converts every model `inputs` name into `out_dir` (see the module
/// documentation). An output that is a file, or inputs that name nothing
/// at all, are [`Error::Input`]; a model that fails is an outcome, not an
/// error.
pub fn convert_batch(
    inputs: &[PathBuf],
    out_dir: &Path,
    options: &BatchOptions,
    progress: &impl Progress,
    stop: &AtomicBool,
) -> Result<Batch> {
    if out_dir.is_file() {
        return Err(Error::Input(format!("output {} is a file; a batch writes into a directory", out_dir.display())));
    }
    let (mut jobs, bad) = inputs::expand(inputs);
    if jobs.is_empty() && !bad.is_empty() {
        let why: Vec<String> = bad.iter().map(|b| format!("{}: {}", b.input.display(), b.message)).collect();
        return Err(Error::Input(why.join("; ")));
    }
    if let Some(shard) = options.shard {
        jobs.retain(|j| shard.holds(&j.key));
    }
    let mut outcomes: Vec<Outcome> = bad.iter().map(|b| Outcome::rejected(b, out_dir)).collect();
    bad.iter().for_each(|b| progress.rejected(b));
    let workers = options.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .map_err(|e| Error::Input(format!("cannot start {workers} workers: {e}")))?;
    progress.planned(&jobs);
    let start = Instant::now();
    let settings = &options.settings;
    let converted: Vec<Option<Outcome>> = pool.install(|| {
        jobs.par_iter()
            .map(|job| {
                if stop.load(Ordering::SeqCst) {
                    return None;
                }
                let flight = progress.started(&job.key);
                let outcome = one::convert(&job.input, &output_path(out_dir, job), settings);
                progress.finished(flight, &outcome, &job.key);
                Some(outcome)
            })
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let not_run = converted.iter().filter(|o| o.is_none()).count();
    outcomes.extend(converted.into_iter().flatten());
    Ok(Batch { outcomes, not_run, total: jobs.len() + bad.len(), workers, seconds })
}

/// Where a job's model is written: its key under the output directory, a
/// TorchScript file (`.pt`, `.txt`) becoming `.onnx`.
pub fn output_path(out_dir: &Path, job: &Job) -> PathBuf {
    let path = job.key.split('/').fold(out_dir.to_path_buf(), |p, part| p.join(part));
    match path.extension().and_then(|e| e.to_str()) {
        Some("onnx") | None => path,
        Some(_) => path.with_extension("onnx"),
    }
}
