//! `convert` and `optimize`: a model re-exported as ONNX with its inferred
//! types, or simplified by the optimizer's passes — returned as bytes or
//! written to a file (with its external data) — and `convert_file`, one
//! model of `convert_many`'s batch, which reports instead of raising.

use crate::checking::{malformed, Checked};
use crate::errors::{bad_argument, model_error, model_errors, unreadable};
use crate::source::{input_shapes, Source};
use diamond::{InputShape, Model, OptimizeError};
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
    let model = source.model(shapes).map_err(Refusal::Unreadable)?;
    let report = model.infer(&diamond::CheckOptions::default());
    if let Some(why) = malformed(&report, &label) {
        return Err(Refusal::Unreadable(why));
    }
    let checked = Checked::from_report(model, report, label);
    if let Some(summary) = checked.errors_summary() {
        return Err(Refusal::Errors(format!("{summary}; not converted"), Box::new(checked)));
    }
    let model = if value_info { checked.model().with_types(checked.report(), false) } else { checked.model().clone() };
    Ok((model, checked))
}

/// Writes `model` to `output` (its external data beside it), or encodes it.
fn emit(model: &Model, output: Option<&Path>) -> Result<Option<Vec<u8>>, Refusal> {
    match output {
        Some(path) => model.write(path).map(|()| None).map_err(|e| Refusal::Unwritable(e.to_string())),
        None => model
            .to_bytes()
            .map(Some)
            .map_err(|e| Refusal::Unwritable(format!("{e} (give `output=` to write it with external data)"))),
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

/// Converts the file `input` to `output` as `diamond convert` does (the
/// library's [`diamond::batch::convert_file`]), and says how it went instead
/// of raising: `(status, message)` with status `converted`, `errors`,
/// `unreadable` or `failed` (not writable, or a diamond bug: a panic is
/// caught and named). The report comes back for `errors`.
#[pyfunction]
#[pyo3(signature = (input, output, value_info=true))]
pub fn convert_file(
    py: Python<'_>,
    input: PathBuf,
    output: PathBuf,
    value_info: bool,
) -> (String, Option<String>, Option<Py<Checked>>) {
    let settings = diamond::batch::Settings { no_value_info: !value_info, ..Default::default() };
    let (outcome, checked) = py.detach(|| {
        let outcome = diamond::batch::convert_file(&input, &output, &settings);
        // The report of a model with errors, for `ConvertResult.report`: read and checked again.
        let checked = (outcome.status == diamond::batch::Status::Errors)
            .then(|| diamond::Model::open(&input).ok())
            .flatten()
            .map(|model| {
                let label = model.label().to_string();
                Checked::new(model, &diamond::CheckOptions::default(), label)
            });
        (outcome, checked)
    });
    let checked = checked.and_then(|c| Py::new(py, c).ok());
    (outcome.status.as_str().to_string(), outcome.message, checked)
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
            let checked = py.detach(|| Checked::new(loaded, &diamond::CheckOptions::default(), label.clone()));
            if let Some(why) = malformed(checked.report(), &label) {
                return Err(unreadable(why));
            }
            return Err(model_errors(py, format!("{label}: {n} error(s) in the model; not optimized"), checked));
        }
        Err(e @ OptimizeError::Verification { .. }) => return Err(model_error(format!("{label}: {e}; not optimized"))),
        Err(e @ (OptimizeError::UnknownPass(_) | OptimizeError::Upgrade(_))) => return Err(bad_argument(e)),
        Err(e @ OptimizeError::NoGraph) => return Err(unreadable(format!("{label}: {e}"))),
    };
    let bytes = py.detach(|| emit(&outcome.model, output.as_deref())).map_err(|r| raise(py, r))?;
    Ok(to_python(py, bytes))
}
