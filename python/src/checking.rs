//! `check`: the model's every value typed and shaped, and what is wrong with
//! it — the report `diamond check` gives, kept with the model so the Python
//! `Report` can also write the HTML page.

use crate::errors::unreadable;
use crate::source::{input_shapes, load_detached, Source};
use diamond::check::{Code, Severity};
use diamond::{CheckOptions, Model, Report as CheckReport};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A checked model: its check report, and the model for the HTML page.
#[pyclass(module = "diamond._native", frozen)]
pub struct Checked {
    model: Model,
    report: CheckReport,
    label: String,
}

impl Checked {
    /// Checks `model` as `diamond check` does (the ones-vector notes included).
    pub fn new(model: Model, options: &CheckOptions, label: String) -> Checked {
        let report = model.check(options);
        Checked { model, report, label }
    }

    /// A model checked elsewhere (`convert` checks as `diamond convert` does).
    pub fn from_report(model: Model, report: CheckReport, label: String) -> Checked {
        Checked { model, report, label }
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The report.
    pub fn report(&self) -> &CheckReport {
        &self.report
    }

    /// The first error as `diamond convert` words it: `N error(s); first: error[code] at Op 'node': message`.
    pub fn errors_summary(&self) -> Option<String> {
        let first = self.report.diagnostics.iter().find(|d| d.severity == Severity::Error)?;
        let place = match (&first.node, &first.op) {
            (Some(node), Some(op)) => format!("at {op} '{node}': "),
            _ => String::new(),
        };
        Some(format!(
            "{}: {} error(s) in the model; first: error[{}] {place}{}",
            self.label,
            self.report.errors(),
            first.code.as_str(),
            first.message
        ))
    }

    fn document_value(&self) -> serde_json::Value {
        diamond::check::json::check_json(&self.report, &self.label)
    }
}

#[pymethods]
impl Checked {
    /// The `diamond check --json` document as Python objects (dicts, lists, str, int, None).
    fn document<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = self.document_value();
        Ok(pythonize::pythonize(py, &value)?)
    }

    /// The `diamond check --json` document as text, exactly as the command prints it.
    fn json_text(&self, py: Python<'_>) -> PyResult<String> {
        let value = py.detach(|| self.document_value());
        serde_json::to_string_pretty(&value).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
    }

    /// Writes the `diamond check --html` page to `path`, atomically.
    fn write_html(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| diamond::check::html::write_report(&path, self.model.ir(), &self.report, Path::new(&self.label)))
            .map_err(pyo3::exceptions::PyOSError::new_err)
    }

    /// The indices of the diagnostics that record an assumption the check went on under.
    fn assumption_indices(&self) -> Vec<usize> {
        let all = self.report.diagnostics.iter().enumerate();
        all.filter(|(_, d)| d.code.is_assumption()).map(|(i, _)| i).collect()
    }

    /// Errors found.
    #[getter]
    fn errors(&self) -> usize {
        self.report.errors()
    }

    /// Warnings found.
    #[getter]
    fn warnings(&self) -> usize {
        self.report.warnings()
    }

    /// The model as reports name it (its path, or `<bytes>`).
    #[getter]
    fn label(&self) -> String {
        self.label.clone()
    }
}

/// Why the graph is malformed (a cycle, a dangling name, a value produced
/// twice): bad input, like an unreadable file, as `diamond check` says (exit 2).
pub fn malformed(report: &CheckReport, label: &str) -> Option<String> {
    let all: Vec<&str> =
        report.diagnostics.iter().filter(|d| d.code == Code::InvalidGraph).map(|d| d.message.as_str()).collect();
    let first = all.first()?;
    let more = if all.len() > 1 { format!(" (and {} more)", all.len() - 1) } else { String::new() };
    Some(format!("{label}: the graph is malformed: {first}{more}"))
}

/// Decodes the `bind` tensors, given as `.npy` bytes by name.
fn bound_tensors(bind: Option<Vec<(String, Vec<u8>)>>) -> PyResult<HashMap<String, diamond::ir::Tensor>> {
    let mut out = HashMap::new();
    for (name, npy) in bind.unwrap_or_default() {
        let label = PathBuf::from(format!("bind['{name}']"));
        let tensor = diamond::values::decode_npy(bytes::Bytes::from(npy), &label).map_err(unreadable)?;
        out.insert(name, tensor);
    }
    Ok(out)
}

/// Checks `model` (a path or ONNX bytes). `bind` holds graph inputs bound to
/// constants as `.npy` bytes; `input_shapes` the TorchScript input shapes as
/// `NAME=D0,D1,...`. Raises `ReadError` when the model cannot be read or its
/// graph is malformed.
#[pyfunction]
#[pyo3(signature = (model, bind=None, input_shapes=None, strict_units=false))]
pub fn check(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    bind: Option<Vec<(String, Vec<u8>)>>,
    input_shapes: Option<Vec<String>>,
    strict_units: bool,
) -> PyResult<Checked> {
    let source = Source::from_py(model)?;
    let shapes = self::input_shapes(input_shapes)?;
    let bind = bound_tensors(bind)?;
    let loaded = load_detached(py, &source, &shapes)?;
    let label = source.label();
    let bound: Vec<String> = bind.keys().cloned().collect();
    let options = CheckOptions { bind, strict_units, skip_inferred_types: false };
    let checked = py.detach(|| Checked::new(loaded, &options, label));
    if let Some(why) = malformed(&checked.report, &checked.label) {
        return Err(unreadable(why));
    }
    let inputs = &checked.report.inputs;
    if let Some(name) = bound.iter().find(|n| !inputs.contains(n)) {
        return Err(crate::errors::bad_argument(format!(
            "bind: the model has no input '{name}' (inputs: {})",
            inputs.join(", ")
        )));
    }
    Ok(checked)
}
