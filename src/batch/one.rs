//! Converting one model: read, check, annotate with the inferred types,
//! write atomically — and an [`Outcome`] saying how it went.

use crate::check::{Code, Severity};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `convert` does beyond reading and writing.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Graph-input shapes for TorchScript inputs (`--input-shape`).
    pub shapes: Vec<crate::InputShape>,
    /// Write the model even when checking finds errors (without inferred types).
    pub allow_errors: bool,
    /// Re-export only: no inferred `value_info`.
    pub no_value_info: bool,
    /// Replace exporter-invented dim names in the graph outputs too.
    pub output_dims: bool,
    /// Run the optimizer's passes before writing (`--optimize`).
    pub optimize: bool,
    /// Leave an existing output as it is.
    pub skip_existing: bool,
}

/// How one model's conversion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Written.
    Converted,
    /// Its output exists and `--skip-existing` was given.
    Skipped,
    /// Checking found errors; not written (unless `--allow-errors`).
    Errors,
    /// Could not be read: not ONNX, truncated, malformed graph.
    Unreadable,
    /// Read, but the output could not be written (or diamond failed on it).
    Failed,
}

impl Status {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Converted => "converted",
            Status::Skipped => "skipped",
            Status::Errors => "errors",
            Status::Unreadable => "unreadable",
            Status::Failed => "failed",
        }
    }
}

/// One model's line of the `--report` JSONL.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The model file.
    pub input: PathBuf,
    /// Where it was (or would have been) written.
    pub output: PathBuf,
    /// How it ended.
    pub status: Status,
    /// Wall time spent on it.
    pub seconds: f64,
    /// Nodes in its main graph, once read.
    pub nodes: Option<usize>,
    /// Nodes in the written main graph, when `--optimize` changed the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_written: Option<usize>,
    /// Errors checking found.
    pub errors: usize,
    /// Warnings checking found.
    pub warnings: usize,
    /// Values given an inferred type in the written model.
    pub typed_values: usize,
    /// Why it was not converted (or what was written despite errors).
    pub message: Option<String>,
}

impl Outcome {
    /// The outcome of an input argument that names nothing to convert.
    pub fn rejected(bad: &super::BadInput, out_dir: &Path) -> Outcome {
        let mut outcome = Outcome::new(&bad.input, out_dir, Status::Unreadable);
        outcome.message = Some(bad.message.clone());
        outcome
    }

    /// An outcome of `input` to `output` that says `status` and nothing else yet.
    fn new(input: &Path, output: &Path, status: Status) -> Outcome {
        Outcome {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
            status,
            seconds: 0.0,
            nodes: None,
            nodes_written: None,
            errors: 0,
            warnings: 0,
            typed_values: 0,
            message: None,
        }
    }
}

/// Converts `input` to `output`. Never panics outward: a panic inside is
/// caught and reported as a `failed` model naming it as a diamond bug.
pub fn convert(input: &Path, output: &Path, settings: &Settings) -> Outcome {
    let start = Instant::now();
    let mut outcome = Outcome::new(input, output, Status::Failed);
    if settings.skip_existing && output.exists() {
        outcome.status = Status::Skipped;
        return outcome;
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(input, output, settings, &mut outcome)));
    if let Err(panic) = result {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        outcome.status = Status::Failed;
        outcome.message = Some(format!("diamond panicked on this model (a bug, please report it): {what}"));
    }
    outcome.seconds = start.elapsed().as_secs_f64();
    outcome
}

fn run(input: &Path, output: &Path, settings: &Settings, outcome: &mut Outcome) {
    let load = crate::LoadOptions { input_shapes: settings.shapes.clone() };
    let model = match crate::Model::open_with(input, &load) {
        Ok(model) => model,
        Err(e) => {
            outcome.status = Status::Unreadable;
            outcome.message = Some(e.to_string());
            return;
        }
    };
    outcome.nodes = Some(model.graph().nodes.len());
    let report = model.infer(&crate::CheckOptions::default());
    outcome.errors = report.errors();
    outcome.warnings = report.warnings();
    let malformed = report.diagnostics.iter().filter(|d| d.code == Code::InvalidGraph).collect::<Vec<_>>();
    if let Some(first) = malformed.first() {
        outcome.status = Status::Unreadable;
        outcome.message = Some(format!("the graph is malformed: {}", first.message));
        return;
    }
    let first_error = report.diagnostics.iter().find(|d| d.severity == Severity::Error);
    if let Some(e) = first_error.filter(|_| !settings.allow_errors) {
        outcome.status = Status::Errors;
        outcome.message = Some(format!(
            "{} error(s), not written (--allow-errors writes it anyway); first: error[{}] {}",
            report.errors(),
            e.code.as_str(),
            located(e)
        ));
        return;
    }
    let has_errors = first_error.is_some();
    // The optimizer's passes, on a model checking found consistent.
    let (model, report) = if settings.optimize && !has_errors {
        let options = crate::OptimizeOptions { verify: true, ..crate::OptimizeOptions::default() };
        match model.optimize(&options) {
            Ok(done) => {
                outcome.nodes_written = Some(done.model.graph().nodes.len());
                let report = done.model.infer(&crate::CheckOptions::default());
                (done.model, report)
            }
            Err(e) => {
                // A result that does not verify is not written: the model has a problem only the optimizer saw.
                outcome.status = Status::Errors;
                outcome.message = Some(format!("not optimized: {e}"));
                return;
            }
        }
    } else {
        (model, report)
    };
    // Inferred types only where checking found the model consistent.
    let annotated;
    let to_write = if settings.no_value_info || has_errors {
        &model
    } else {
        annotated = model.with_types(&report, settings.output_dims);
        outcome.typed_values = report.inferred.len();
        &annotated
    };
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Err(e) = std::fs::create_dir_all(dir) {
            outcome.message = Some(format!("cannot create {}: {e}", dir.display()));
            return;
        }
    }
    match diamond_exporters::onnx::write_model(to_write.ir(), output) {
        Ok(_) => {
            outcome.status = Status::Converted;
            if has_errors {
                outcome.message = Some(format!("written despite {} error(s), without inferred types", report.errors()));
            }
        }
        Err(e) => outcome.message = Some(e.to_string()),
    }
}

/// `node 'fc2' (MatMul): message`, or the message alone.
fn located(d: &crate::check::Diagnostic) -> String {
    match (&d.node, &d.op) {
        (Some(node), Some(op)) => format!("at {op} '{node}': {}", d.message),
        _ => d.message.clone(),
    }
}
