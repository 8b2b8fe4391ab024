//! What the fuzz targets share: a scratch directory for the readers that
//! only take a path, and the check → annotate → export pipeline that
//! `diamond convert` runs on every model it reads.

use diamond_infer::{CheckOptions, Code, Severity};
use diamond_ir::Model;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A directory private to this fuzzing process, in the system temp directory
/// (`$TMPDIR`). It is left behind when the process ends: `run.sh` points
/// `TMPDIR` at `fuzz/scratch/` and empties that afterwards.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| tempfile::Builder::new().prefix("diamond-fuzz-").tempdir().expect("a scratch directory").keep())
}

/// Writes `data` to the scratch file `name` (overwriting the previous run's)
/// and returns its path.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let path = scratch_dir().join(name);
    std::fs::write(&path, data).expect("writing the scratch file");
    path
}

/// Checks `model`, then does what `diamond convert` does with the result:
/// a malformed graph stops there; a model with errors is encoded as read
/// (`--allow-errors`); a consistent one is annotated with the inferred types
/// and encoded.
pub fn check_and_export(model: &Model) {
    let report = diamond_infer::check_model(model, &CheckOptions::default());
    if report.diagnostics.iter().any(|d| d.code == Code::InvalidGraph) {
        return;
    }
    let encoded = if report.diagnostics.iter().any(|d| d.severity == Severity::Error) {
        diamond_exporters::onnx::encode_model(model)
    } else {
        let annotated = diamond_infer::graph::annotate(model, &report.inferred);
        diamond_exporters::onnx::encode_model(&annotated)
    };
    let _ = encoded;
}
