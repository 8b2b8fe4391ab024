//! `run`: the model executed by the reference executor on NumPy inputs, as
//! `diamond run` does (the execution plan checks the fed shapes against the
//! model first), with the GIL released while it runs.

use crate::arrays::{tensor_from_array, value_to_python};
use crate::errors::{bad_argument, model_error};
use crate::source::{input_shapes, load_detached, Source};
use diamond_ir::{ElemType, Graph, TypeValue};
use diamond_runtime::{run_planned, Fed, Plan, RunError, RunOptions, Value};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The declared type of graph input `name`.
fn declared<'g>(graph: &'g Graph, name: &str) -> Option<&'g TypeValue> {
    graph
        .inputs
        .iter()
        .find(|i| i.value.is_some_and(|v| graph.value_name(v) == name))
        .and_then(|i| i.ty.as_ref())
        .and_then(|t| t.value.as_ref())
}

/// What `obj` feeds input `name`: an array is a tensor (inside an optional
/// when the input is one), a list of arrays a sequence, `None` an empty optional.
fn fed_value(graph: &Graph, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let ty = declared(graph, name);
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

/// Runs `model` on `inputs` (graph input name → NumPy array; a list of
/// arrays for a sequence input, `None` for an empty optional) and returns
/// the outputs by name, in the graph's order. A fed value that does not fit
/// the model is a `ValueError`; an operator the executor lacks a
/// `NotImplementedError`; a fault the model has a `ModelError`.
#[pyfunction]
#[pyo3(signature = (model, inputs, input_shapes=None))]
pub fn run<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyAny>,
    inputs: Vec<(String, Bound<'py, PyAny>)>,
    input_shapes: Option<Vec<String>>,
) -> PyResult<Bound<'py, PyDict>> {
    let source = Source::from_py(model)?;
    let shapes = self::input_shapes(input_shapes)?;
    let loaded = load_detached(py, &source, &shapes)?;
    let label = source.label();
    let graph =
        loaded.main_graph().ok_or_else(|| crate::errors::unreadable(format!("{label}: the model has no graph")))?;
    let mut fed = Vec::with_capacity(inputs.len());
    for (name, obj) in &inputs {
        fed.push((name.clone(), fed_value(graph, name, obj)?));
    }
    let result = py.detach(|| {
        let shapes: Vec<(String, Fed)> = fed.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let plan = Plan::new(&loaded, &shapes)?;
        run_planned(&loaded, &plan, fed, &RunOptions::default())
    });
    let result = result.map_err(|e| match e {
        RunError::Input { .. } | RunError::Binding { .. } => bad_argument(e),
        RunError::Unsupported { .. } => {
            pyo3::exceptions::PyNotImplementedError::new_err(format!("{label}: cannot run: {e}"))
        }
        other => model_error(format!("{label}: cannot run: {other}")),
    })?;
    let outputs = PyDict::new(py);
    for (name, value) in result.outputs {
        outputs.set_item(name, value_to_python(py, value)?)?;
    }
    Ok(outputs)
}
