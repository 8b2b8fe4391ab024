//! The exceptions the native functions raise, defined in Python
//! (`diamond/_errors.py`) so that users catch one class hierarchy: a model
//! that cannot be read is a `ReadError`; a model with errors a `ModelError`,
//! raised with the `Checked` report as its second argument, which the
//! Python class wraps into a `Report`.

use pyo3::PyErr;

pyo3::import_exception!(diamond._errors, ReadError);
pyo3::import_exception!(diamond._errors, ModelError);

/// A `diamond.ReadError` saying `message`.
pub fn unreadable(message: impl std::fmt::Display) -> PyErr {
    ReadError::new_err(message.to_string())
}

/// A `diamond.ModelError` without a report (a problem found while running,
/// not by the check), saying `message`.
pub fn model_error(message: impl std::fmt::Display) -> PyErr {
    ModelError::new_err(message.to_string())
}

/// A `ValueError` (a bad argument) saying `message`.
pub fn bad_argument(message: impl std::fmt::Display) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(message.to_string())
}

/// A `diamond.ModelError` saying `message` and carrying the check report
/// (the Python class wraps the `Checked` into a `Report`).
pub fn model_errors(py: pyo3::Python<'_>, message: String, checked: crate::checking::Checked) -> PyErr {
    match pyo3::Py::new(py, checked) {
        Ok(report) => ModelError::new_err((message, report)),
        Err(e) => e,
    }
}
