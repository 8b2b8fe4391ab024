//! `Session` and `run`: a model prepared once for a backend (`simd` by
//! default, `reference` on request) through the library's
//! [`diamond::Session`], run on NumPy inputs with the GIL released; `run`
//! is a session used once.

use crate::arrays::{tensor_from_array, value_to_python};
use crate::errors::{bad_argument, model_error, unreadable};
use crate::source::{input_shapes, Source};
use diamond::ir::{ElemType, TypeValue};
use diamond::Value;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Mutex;

/// What `obj` feeds an input declared as `ty`: an array is a tensor
/// (inside an optional when the input is one), a list of arrays a sequence,
/// `None` an empty optional.
fn fed_value(name: &str, ty: Option<&TypeValue>, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Optional(None));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let tensors = list.iter().map(|a| tensor_from_array(name, &a)).collect::<PyResult<Vec<_>>>()?;
        let declared_elem = match ty {
            Some(TypeValue::Sequence(Some(inner))) => inner.as_tensor().and_then(|(e, _)| e),
            _ => None,
        };
        let elem = tensors.first().map(|t| t.elem()).or(declared_elem).unwrap_or(ElemType::Float);
        if let Some(t) = tensors.iter().find(|t| t.elem() != elem) {
            return Err(bad_argument(format!("input '{name}': the sequence mixes {elem} and {} tensors", t.elem())));
        }
        return Ok(Value::Sequence(elem, tensors));
    }
    let tensor = Value::Tensor(tensor_from_array(name, obj)?);
    Ok(match ty {
        Some(TypeValue::Optional(_)) => Value::Optional(Some(Box::new(tensor))),
        _ => tensor,
    })
}

/// The library's error as the Python exception the package documents.
fn raised(error: diamond::Error) -> PyErr {
    match error {
        diamond::Error::Read(m) => unreadable(m),
        diamond::Error::Input(m) => bad_argument(m),
        diamond::Error::Unsupported(m) | diamond::Error::Unavailable(m) => {
            pyo3::exceptions::PyNotImplementedError::new_err(m)
        }
        diamond::Error::Model(m) => model_error(m),
        diamond::Error::Write(m) => pyo3::exceptions::PyOSError::new_err(m),
    }
}

/// One input or output: `(name, element type name or None, shape)`, each
/// axis a size, a symbol or `None`.
type Described = (String, Option<String>, Option<Vec<Option<DimOut>>>);

/// An axis as Python sees it.
#[derive(IntoPyObject)]
enum DimOut {
    Size(u64),
    Symbol(String),
}

fn describe(info: &diamond::ValueInfo) -> Described {
    let dims = info.shape.as_ref().map(|dims| {
        dims.iter()
            .map(|d| match d {
                diamond::Dim::Known(n) => Some(DimOut::Size(*n)),
                diamond::Dim::Symbol(s) => Some(DimOut::Symbol(s.clone())),
                diamond::Dim::Unknown => None,
            })
            .collect()
    });
    (info.name.clone(), info.elem.map(|e| diamond::values::dtype_name(e).to_string()), dims)
}

/// A model prepared once for a backend and run many times.
#[pyclass(module = "diamond._native")]
pub struct Session {
    session: Mutex<diamond::Session>,
    /// Each graph input's declared type, by name (how a fed object is read).
    declared: Vec<(String, Option<TypeValue>)>,
    label: String,
}

#[pymethods]
impl Session {
    /// Reads `model` and prepares it for `backend` (`simd` or `reference`)
    /// on `threads` threads (`None`: one per core), optimized unless
    /// `optimize` is false.
    #[new]
    #[pyo3(signature = (model, backend="simd", threads=None, input_shapes=None, optimize=true))]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        backend: &str,
        threads: Option<usize>,
        input_shapes: Option<Vec<String>>,
        optimize: bool,
    ) -> PyResult<Session> {
        let source = Source::from_py(model)?;
        let shapes = self::input_shapes(input_shapes)?;
        let backend: diamond::Backend = backend.parse().map_err(|e: diamond::Error| bad_argument(e))?;
        let options = diamond::SessionOptions { backend, threads, optimize };
        let (session, declared, label) = py
            .detach(|| {
                let model = match &source {
                    Source::Path(path) => {
                        diamond::Model::open_with(path, &diamond::LoadOptions { input_shapes: shapes })
                    }
                    Source::Bytes(bytes) => diamond::Model::from_bytes(bytes.clone()),
                }?;
                let graph = model.ir().main_graph().expect("a Model has a main graph");
                let declared = graph
                    .inputs
                    .iter()
                    .filter_map(|i| {
                        let ty = i.ty.as_ref().and_then(|t| t.value.clone());
                        Some((graph.value_name(i.value?).to_string(), ty))
                    })
                    .collect();
                let session = diamond::Session::new(&model, &options)?;
                Ok((session, declared, model.label().to_string()))
            })
            .map_err(raised)?;
        Ok(Session { session: Mutex::new(session), declared, label })
    }

    /// Runs on `inputs` (name → array, a list of arrays for a sequence,
    /// `None` for an empty optional); the outputs by name, in the graph's order.
    fn run<'py>(&self, py: Python<'py>, inputs: Vec<(String, Bound<'py, PyAny>)>) -> PyResult<Bound<'py, PyDict>> {
        let mut fed = Vec::with_capacity(inputs.len());
        for (name, obj) in &inputs {
            let ty = self.declared.iter().find(|(n, _)| n == name).and_then(|(_, t)| t.as_ref());
            fed.push((name.clone(), fed_value(name, ty, obj)?));
        }
        let outputs = py
            .detach(|| {
                let mut session = self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                session.run(fed)
            })
            .map_err(raised)?;
        let dict = PyDict::new(py);
        for (name, value) in outputs.into_vec() {
            dict.set_item(name, value_to_python(py, value)?)?;
        }
        Ok(dict)
    }

    /// The inputs a run feeds: `(name, dtype, shape)` each.
    fn inputs(&self, py: Python<'_>) -> Vec<Described> {
        py.detach(|| self.lock().inputs().iter().map(describe).collect())
    }

    /// The outputs a run returns: `(name, dtype, shape)` each.
    fn outputs(&self, py: Python<'_>) -> Vec<Described> {
        py.detach(|| self.lock().outputs().iter().map(describe).collect())
    }

    /// The backend's name.
    #[getter]
    fn backend(&self) -> &'static str {
        self.lock().backend().name()
    }

    /// The SIMD backend's steps that run on the reference kernels, as text
    /// lines naming the step and why (empty before the first run): programs
    /// the fast kernels refused, with the condition, then every step on the
    /// reference kernels with its reason.
    fn fallbacks(&self) -> Vec<String> {
        let mut session = self.lock();
        let mut lines: Vec<String> = session.fallbacks().iter().map(|f| f.to_string()).collect();
        lines.extend(session.reference_steps());
        lines
    }

    /// How the model is named in messages.
    #[getter]
    fn label(&self) -> &str {
        &self.label
    }
}

impl Session {
    fn lock(&self) -> std::sync::MutexGuard<'_, diamond::Session> {
        self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs `model` once on `inputs` on `backend`, as a `Session` would.
#[pyfunction]
#[pyo3(signature = (model, inputs, input_shapes=None, backend="simd"))]
pub fn run<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    inputs: Vec<(String, Bound<'py, PyAny>)>,
    input_shapes: Option<Vec<String>>,
    backend: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let session = Session::new(py, model, backend, None, input_shapes, true)?;
    session.run(py, inputs)
}
