//! The model argument of every function: a path (any ONNX or TorchScript
//! file `diamond` reads, by its first bytes) or ONNX bytes, with the
//! TorchScript input shapes given as `NAME=D0,D1,...` texts.

use crate::errors::{bad_argument, unreadable};
use diamond::{InputShape, Model};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::path::PathBuf;

/// Where a model comes from.
pub enum Source {
    /// A file, read as `diamond` reads files (memory-mapped, external data beside it).
    Path(PathBuf),
    /// Serialized ONNX; external data is looked up relative to the current directory.
    Bytes(bytes::Bytes),
}

impl Source {
    /// Reads `obj`: `bytes`/`bytearray` as ONNX, `str` or `os.PathLike` as a path.
    pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Source::Bytes(bytes::Bytes::copy_from_slice(b.as_bytes())));
        }
        if let Ok(b) = obj.cast::<PyByteArray>() {
            return Ok(Source::Bytes(bytes::Bytes::from(b.to_vec())));
        }
        match obj.extract::<PathBuf>() {
            Ok(path) => Ok(Source::Path(path)),
            Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "a model is a path, bytes or an onnx.ModelProto, not {}",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "this".into())
            ))),
        }
    }

    /// How reports name the model: the path as given, or `<bytes>`.
    pub fn label(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::Bytes(_) => "<bytes>".into(),
        }
    }

    /// Reads the model into the library's [`diamond::Model`] (no GIL
    /// needed). An unreadable model, or one without a graph, is the message.
    pub fn model(&self, shapes: &[InputShape]) -> Result<Model, String> {
        let model = match self {
            Source::Path(p) => diamond::Model::open_with(p, &diamond::LoadOptions { input_shapes: shapes.to_vec() }),
            Source::Bytes(b) => diamond::Model::from_bytes(b.clone()),
        };
        model.map_err(|e| e.to_string())
    }
}

/// Parses the `input_shapes` the Python layer gives as `NAME=D0,D1,...` texts.
pub fn input_shapes(texts: Option<Vec<String>>) -> PyResult<Vec<InputShape>> {
    texts
        .unwrap_or_default()
        .iter()
        .map(|t| t.parse::<InputShape>().map_err(|e| bad_argument(format!("input_shapes: {e}"))))
        .collect()
}

/// Loads `source` with the GIL released.
pub fn load_detached(py: Python<'_>, source: &Source, shapes: &[InputShape]) -> PyResult<Model> {
    py.detach(|| source.model(shapes)).map_err(unreadable)
}
