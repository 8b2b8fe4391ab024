//! `convert` and `optimize`: a model re-exported as ONNX with its inferred
//! types, or simplified by the optimizer's passes — returned as bytes or
//! written to a file (with its external data) — and `convert_file`, one
//! model of `convert_many`'s batch, which reports instead of raising.

use crate::checking::{malformed, Checked};
use crate::errors::{bad_argument, model_error, model_errors, unreadable};
use crate::source::{input_shapes, Source};
use diamond::OptimizeError;
use diamond_importers::torch::lower::InputShape;
use diamond_ir::Model;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::{Path, PathBuf};

/// Why a model was not converted.
enum Refusal {
    /// It could not be read, or its graph is malformed.
    Unreadable(String),
    /// Checking found errors.
    Errors(String, Box<Checked>),
    /// It could not be written.
    Unwritable(String),
}

/// Reads, checks and (with `value_info`) annotates the model, as `diamond
/// convert` does; the model to write and its check.
fn converted(source: &Source, shapes: &[InputShape], value_info: bool) -> Result<(Model, Checked), Refusal> {
    let label = source.label();
    let model = source.load(shapes).map_err(Refusal::Unreadable)?;
    if model.main_graph().is_none() {
        return Err(Refusal::Unreadable(format!("{label}: the model has no graph")));
    }
    let report = diamond_infer::check_model(&model, &diamond_infer::CheckOptions::default());
    if let Some(why) = malformed(&report, &label) {
        return Err(Refusal::Unreadable(why));
    }
    let checked = Checked::from_report(model, report, label);
    if let Some(summary) = checked.errors_summary() {
        return Err(Refusal::Errors(format!("{summary}; not converted"), Box::new(checked)));
    }
    let model = if value_info {
        let options = diamond_infer::graph::AnnotateOptions { output_dims: false };
        diamond_infer::graph::annotate_with(checked.model(), &checked.report().inferred, options)
    } else {
        checked.model().clone()
    };
    Ok((model, checked))
}

/// Writes `model` to `output` (its external data beside it), or encodes it.
fn emit(model: &Model, output: Option<&Path>) -> Result<Option<Vec<u8>>, Refusal> {
    match output {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Refusal::Unwritable(format!("cannot create {}: {e}", dir.display())))?;
            }
            diamond_exporters::onnx::write_model(model, path)
                .map_err(|e| Refusal::Unwritable(format!("cannot write {}: {e}", path.display())))?;
            Ok(None)
        }
        None => diamond_exporters::onnx::encode_model(model).map(Some).map_err(|e| {
            Refusal::Unwritable(format!("cannot encode the model: {e} (give `output=` to write it with external data)"))
        }),
    }
}

/// The Python exception for a refusal.
fn raise(py: Python<'_>, refusal: Refusal) -> PyErr {
    match refusal {
        Refusal::Unreadable(why) => unreadable(why),
        Refusal::Errors(why, checked) => model_errors(py, why, *checked),
        Refusal::Unwritable(why) => pyo3::exceptions::PyOSError::new_err(why),
    }
}

fn to_python(py: Python<'_>, bytes: Option<Vec<u8>>) -> Option<Py<PyBytes>> {
    bytes.map(|b| PyBytes::new(py, &b).unbind())
}

/// Re-exports `model` with every inferred type in `value_info` (none with
/// `value_info=False`): returns the ONNX bytes, or writes them to `output`
/// and returns `None`. Raises `ReadError` (unreadable, malformed) or
/// `ModelError` (checking found errors; it carries the report).
#[pyfunction]
#[pyo3(signature = (model, value_info=true, input_shapes=None, output=None))]
pub fn convert(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    value_info: bool,
    input_shapes: Option<Vec<String>>,
    output: Option<PathBuf>,
) -> PyResult<Option<Py<PyBytes>>> {
    let source = Source::from_py(model)?;
    let shapes = self::input_shapes(input_shapes)?;
    let done = py.detach(|| {
        let (model, _checked) = converted(&source, &shapes, value_info)?;
        emit(&model, output.as_deref())
    });
    done.map(|bytes| to_python(py, bytes)).map_err(|r| raise(py, r))
}

/// Converts the file `input` to `output` as `convert` does, and says how it
/// went instead of raising: `(status, message)` with status `converted`,
/// `errors`, `unreadable` or `failed` (not writable, or a diamond bug: a
/// panic is caught and named). The report comes back for `errors`.
#[pyfunction]
#[pyo3(signature = (input, output, value_info=true))]
pub fn convert_file(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    value_info: bool,
) -> (String, Option<String>, Option<Py<Checked>>) {
    let outcome = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let source = Source::Path(input.clone());
            let (model, _checked) = converted(&source, &[], value_info)?;
            emit(&model, Some(&output))
        }))
    });
    match outcome {
        Ok(Ok(_)) => ("converted".into(), None, None),
        Ok(Err(Refusal::Unreadable(why))) => ("unreadable".into(), Some(why), None),
        Ok(Err(Refusal::Errors(why, checked))) => ("errors".into(), Some(why), Py::new(py, *checked).ok()),
        Ok(Err(Refusal::Unwritable(why))) => ("failed".into(), Some(why), None),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            ("failed".into(), Some(format!("diamond panicked on this model (a bug, please report it): {what}")), None)
        }
    }
}

/// Runs the optimizer's passes (`passes`, in order; default all) on `model`
/// and, with `verify`, refuses a result that computes something else on the
/// reference executor. Returns the ONNX bytes, or writes them to `output`
/// and returns `None`. Raises `ReadError`, `ModelError` (checking found
/// errors, with the report; or verification failed) or `ValueError` (an
/// unknown pass).
#[pyfunction]
#[pyo3(signature = (model, verify=true, passes=None, input_shapes=None, output=None))]
pub fn optimize(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    verify: bool,
    passes: Option<Vec<String>>,
    input_shapes: Option<Vec<String>>,
    output: Option<PathBuf>,
) -> PyResult<Option<Py<PyBytes>>> {
    let source = Source::from_py(model)?;
    let shapes = self::input_shapes(input_shapes)?;
    let loaded = py.detach(|| source.model(&shapes)).map_err(unreadable)?;
    let label = source.label();
    let mut options = diamond::OptimizeOptions { verify, ..diamond::OptimizeOptions::default() };
    if let Some(passes) = passes {
        options.passes = passes;
    }
    let result = py.detach(|| loaded.optimize(&options));
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(OptimizeError::ModelErrors(n)) => {
            let ir = loaded.into_ir();
            let checked = py.detach(|| Checked::new(ir, &diamond_infer::CheckOptions::default(), label.clone()));
            if let Some(why) = malformed(checked.report(), &label) {
                return Err(unreadable(why));
            }
            return Err(model_errors(py, format!("{label}: {n} error(s) in the model; not optimized"), checked));
        }
        Err(e @ OptimizeError::Verification { .. }) => return Err(model_error(format!("{label}: {e}; not optimized"))),
        Err(e @ (OptimizeError::UnknownPass(_) | OptimizeError::Upgrade(_))) => return Err(bad_argument(e)),
        Err(e @ OptimizeError::NoGraph) => return Err(unreadable(format!("{label}: {e}"))),
    };
    let bytes = py.detach(|| emit(outcome.model.ir(), output.as_deref())).map_err(|r| raise(py, r))?;
    Ok(to_python(py, bytes))
}
