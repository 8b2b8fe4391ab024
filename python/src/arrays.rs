//! NumPy arrays into the reference executor's values and back.
//!
//! In: an array of a NumPy type ONNX has (float16/32/64, int8-64,
//! uint8-64, bool; bytes/str/object arrays as strings) becomes a tensor of
//! that element type — one copy, since the executor owns its elements;
//! strided arrays are read in C order. Out: each tensor's element vector is
//! handed to NumPy as the array's buffer, without copying. Types NumPy lacks
//! (bfloat16, float8, float4, 4- and 2-bit integers) come out widened
//! exactly, as `diamond run -o` writes them (`diamond::values::npy`).

use crate::errors::bad_argument;
use diamond::values::{Data, MapValue, Tensor, Value};
use half::f16;
use numpy::{
    Element, PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

/// The elements of `obj` (an array of element type `T`) in C order.
fn elements<T: Element + Copy>(obj: &Bound<'_, PyAny>) -> PyResult<Vec<T>> {
    let typed = obj.cast::<PyArrayDyn<T>>()?;
    let view = typed.readonly();
    // `as_slice` also accepts Fortran order, whose memory is not C order.
    match view.as_slice() {
        Ok(contiguous) if typed.is_c_contiguous() => Ok(contiguous.to_vec()),
        _ => Ok(view.as_array().iter().copied().collect()),
    }
}

/// The strings of a bytes, str or object array, in C order, as ONNX stores them (UTF-8 bytes).
fn strings(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let items = obj.call_method0("ravel")?.call_method0("tolist")?;
    let mut out = Vec::new();
    for item in items.cast::<PyList>()?.iter() {
        if let Ok(b) = item.cast::<PyBytes>() {
            out.push(b.as_bytes().to_vec());
        } else if let Ok(s) = item.cast::<PyString>() {
            out.push(s.to_cow()?.as_bytes().to_vec());
        } else {
            return Err(bad_argument(format!("input '{name}': a string tensor holds only bytes or str")));
        }
    }
    Ok(out)
}

/// The tensor `obj` (a NumPy array) holds, fed as input `name`.
pub fn tensor_from_array(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = obj.py();
    let array =
        obj.cast::<PyUntypedArray>().map_err(|_| bad_argument(format!("input '{name}': expected a numpy.ndarray")))?;
    let shape = array.shape().to_vec();
    let dtype = array.dtype();
    macro_rules! numeric {
        ($($t:ty => $variant:ident),* $(,)?) => {
            $(if dtype.is_equiv_to(&numpy::dtype::<$t>(py)) {
                Some(Data::$variant(elements::<$t>(obj)?))
            } else)* {
                None
            }
        };
    }
    let data = numeric!(
        f32 => F32, f64 => F64, f16 => F16,
        i8 => I8, i16 => I16, i32 => I32, i64 => I64,
        u8 => U8, u16 => U16, u32 => U32, u64 => U64,
        bool => Bool,
    );
    let data = match data {
        Some(data) => data,
        None if matches!(dtype.kind(), b'S' | b'U' | b'O') => Data::Str(strings(name, obj)?),
        None => {
            return Err(bad_argument(format!("input '{name}': NumPy type {} has no ONNX element type", dtype.str()?)))
        }
    };
    Tensor::new(shape, data).ok_or_else(|| bad_argument(format!("input '{name}': the shape does not fit the data")))
}

/// A NumPy array holding `tensor`'s elements (their buffer, not a copy).
pub fn array_from_tensor(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let Tensor { shape, data } = tensor;
    macro_rules! handed_over {
        ($v:expr) => {
            Ok(PyArray1::from_vec(py, $v).reshape(shape)?.into_any())
        };
    }
    match data {
        Data::F32(v) => handed_over!(v),
        Data::F64(v) => handed_over!(v),
        Data::F16(v) => handed_over!(v),
        Data::I8(v) => handed_over!(v),
        Data::I16(v) => handed_over!(v),
        Data::I32(v) => handed_over!(v),
        Data::I64(v) => handed_over!(v),
        Data::U8(v) => handed_over!(v),
        Data::U16(v) => handed_over!(v),
        Data::U32(v) => handed_over!(v),
        Data::U64(v) => handed_over!(v),
        Data::Bool(v) => handed_over!(v),
        Data::Str(v) => {
            let items = PyList::new(py, v.iter().map(|s| PyBytes::new(py, s)))?;
            let numpy = py.import("numpy")?;
            let object = numpy.getattr("object_")?;
            let kwargs = pyo3::types::PyDict::new(py);
            kwargs.set_item("dtype", object)?;
            let flat = numpy.call_method("array", (items,), Some(&kwargs))?;
            flat.call_method1("reshape", (shape,))
        }
        other => {
            let elem = other.elem();
            let widened = diamond::values::npy::npy_elem(elem)
                .and_then(|to| Data::from_f64s(to, &other.to_f64s()?))
                .ok_or_else(|| bad_argument(format!("{elem} tensors have no NumPy type")))?;
            array_from_tensor(py, Tensor { shape, data: widened })
        }
    }
}

/// A scalar element of `data` as a Python int, float or str.
fn element<'py>(py: Python<'py>, data: &Data, i: usize) -> PyResult<Bound<'py, PyAny>> {
    Ok(match data {
        Data::I64(v) => v[i].into_pyobject(py)?.into_any(),
        Data::Str(v) => PyString::new(py, &String::from_utf8_lossy(&v[i])).into_any(),
        other => match other.to_f64s() {
            Some(v) => v[i].into_pyobject(py)?.into_any(),
            None => return Err(bad_argument(format!("map values of {} cannot be returned", other.elem()))),
        },
    })
}

/// A map as a `dict` from its keys (int or str) to its values.
fn dict_from_map<'py>(py: Python<'py>, map: &MapValue) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    for i in 0..map.len() {
        dict.set_item(element(py, &map.keys, i)?, element(py, &map.values, i)?)?;
    }
    Ok(dict.into_any())
}

/// `value` as Python: an array, a list of arrays (a sequence), a `dict` (a
/// map), a list of dicts (`ZipMap`'s sequence of maps), or `None` (an empty
/// optional).
pub fn value_to_python(py: Python<'_>, value: Value) -> PyResult<Bound<'_, PyAny>> {
    match value {
        Value::Tensor(t) => array_from_tensor(py, t),
        Value::Sequence(_, tensors) => {
            let arrays = tensors.into_iter().map(|t| array_from_tensor(py, t)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, arrays)?.into_any())
        }
        Value::Optional(None) => Ok(py.None().into_bound(py)),
        Value::Optional(Some(inner)) => value_to_python(py, *inner),
        Value::Map(map) => dict_from_map(py, &map),
        Value::MapSequence(maps) => {
            let dicts = maps.iter().map(|m| dict_from_map(py, m)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, dicts)?.into_any())
        }
    }
}
