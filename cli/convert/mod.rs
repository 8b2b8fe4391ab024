//! `diamond convert`: a model to a file, or many models into a directory.
//!
//! Each model is read, checked, given its inferred types (`value_info`) and
//! written atomically ([`one`]). With more than one input, a directory or a
//! glob, or an output directory, it is a batch: the inputs expand to a
//! sorted list of models ([`inputs`]), `--shard K/N` keeps a stable share,
//! and `-j N` rayon workers convert them, each model isolated from the
//! others — one that fails is recorded and the rest go on. Progress and the
//! summary are in [`progress`]; `--report` writes one JSON line per model.
//!
//! Exit codes: 0 every model converted (or skipped), 1 some had errors, 2
//! some could not be read or written, 130 interrupted. The first Ctrl-C
//! stops starting new models and lets those in flight finish; a second one
//! removes the temporary files being written and exits at once.

pub mod progress;

use crate::Failure;
use diamond::batch::{self, BatchOptions, Outcome, Settings, Shard, Status};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Batch options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// What each conversion does.
    pub settings: Settings,
    /// Workers (default: the number of cores).
    pub jobs: Option<usize>,
    /// `--shard K/N`.
    pub shard: Option<Shard>,
    /// `--report FILE.jsonl`.
    pub report: Option<PathBuf>,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// `diamond convert IN... -o OUT`.
pub fn run(inputs: &[PathBuf], output: &Path, options: &Options) -> Result<(), Failure> {
    let single = matches!(inputs, [input] if !input.is_dir() && !batch::is_pattern(input))
        && !output.is_dir()
        && !output.as_os_str().to_string_lossy().ends_with(std::path::MAIN_SEPARATOR)
        && options.shard.is_none()
        && options.report.is_none();
    if single {
        return convert_one(&inputs[0], output, &options.settings);
    }
    batch(inputs, output, options)
}

/// One file to one file: the message and exit code of that model.
fn convert_one(input: &Path, output: &Path, settings: &Settings) -> Result<(), Failure> {
    let outcome = batch::convert_file(input, output, settings);
    let name = input.display();
    match outcome.status {
        Status::Converted => {
            let mut line = format!("wrote {} ({} values typed", output.display(), outcome.typed_values);
            if outcome.warnings > 0 {
                line += &format!(", {} warning(s)", outcome.warnings);
            }
            eprintln!("{line})");
            match outcome.message {
                Some(m) => Err(Failure { code: 1, message: format!("{name}: {m}") }),
                None => Ok(()),
            }
        }
        Status::Skipped => {
            eprintln!("skipped {}: it exists (--skip-existing)", output.display());
            Ok(())
        }
        Status::Errors => Err(Failure { code: 1, message: format!("{name}: {}", outcome.message.unwrap_or_default()) }),
        Status::Unreadable | Status::Failed => {
            // Import errors already name the file.
            let message = outcome.message.unwrap_or_default();
            let shown = input.display().to_string();
            let message = if message.starts_with(&shown) { message } else { format!("{shown}: {message}") };
            Err(Failure { code: 2, message })
        }
    }
}

fn batch(args: &[PathBuf], out_dir: &Path, options: &Options) -> Result<(), Failure> {
    install_interrupt_handler();
    let progress = progress::Progress::default();
    let batch_options = BatchOptions { settings: options.settings.clone(), jobs: options.jobs, shard: options.shard };
    let done = diamond::convert_batch(args, out_dir, &batch_options, &progress, &INTERRUPTED)
        .map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
    progress.close();
    eprint!("{}", progress::summary(&done.outcomes, done.seconds, done.workers, done.not_run));
    if let Some(report) = &options.report {
        write_report(report, &done.outcomes)?;
    }
    exit_status(&done.outcomes, done.not_run, done.total)
}

fn exit_status(outcomes: &[Outcome], not_run: usize, total: usize) -> Result<(), Failure> {
    let count = |s: Status| outcomes.iter().filter(|o| o.status == s).count();
    if not_run > 0 {
        return Err(Failure {
            code: 130,
            message: format!("interrupted: {not_run} of {total} model(s) not converted"),
        });
    }
    let unreadable = count(Status::Unreadable) + count(Status::Failed);
    if unreadable > 0 {
        return Err(Failure {
            code: 2,
            message: format!("{unreadable} of {total} model(s) could not be read or written"),
        });
    }
    if count(Status::Errors) > 0 {
        return Err(Failure {
            code: 1,
            message: format!("{} of {total} model(s) have errors and were not written", count(Status::Errors)),
        });
    }
    if total == 0 {
        return Err(Failure { code: 2, message: "no model to convert".into() });
    }
    Ok(())
}

/// Writes the JSONL report atomically, one object per model.
fn write_report(path: &Path, outcomes: &[Outcome]) -> Result<(), Failure> {
    let mut text = String::new();
    for o in outcomes {
        let line = serde_json::to_string(o).map_err(|e| Failure { code: 2, message: e.to_string() })?;
        text += &line;
        text.push('\n');
    }
    diamond::io::write_bytes(path, text.as_bytes())
        .map_err(|e| Failure { code: 2, message: format!("cannot write the report {}: {e}", path.display()) })
}

fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        if INTERRUPTED.swap(true, Ordering::SeqCst) {
            let removed = diamond::io::remove_pending();
            eprintln!("\ninterrupted again: removed {removed} partial file(s); exiting");
            std::process::exit(130);
        }
        eprintln!("\ninterrupted: finishing the models in flight (Ctrl-C again to stop now)");
    });
}
