//! Reading one tensor from a file: a serialized ONNX `TensorProto` (`.pb`, as
//! in the ONNX backend test data) or a NumPy `.npy` array. This is what
//! `--bind` reads; the kind is chosen by the `.npy` extension.
//!
//! A sequence of tensors (what `diamond run` feeds a sequence-typed input)
//! is read from a serialized `SequenceProto` (`.pb`, as the backend test
//! data stores sequence inputs) or from a directory of tensor files, one
//! tensor each, in the order of their names. A map (`ai.onnx.ml`'s inputs
//! and `ZipMap`'s outputs) is read from a serialized `MapProto`, a sequence
//! of maps from a `SequenceProto` of them.

use crate::error::ImportError;
use crate::value_file::{read_value_file, Kind, StoredValue};
use bytes::Bytes;
use diamond_ir::Tensor;
use prost::Message;
use std::path::{Path, PathBuf};

/// Reads the tensor in `path`; external data of a `.pb` tensor resolves
/// against the file's directory.
pub fn read_tensor_file(path: &Path) -> Result<Tensor, ImportError> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return crate::npy::read_npy(path);
    }
    let bytes = crate::onnx::read_file(path)?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    crate::onnx::decode_tensor(bytes, path, &base_dir)
}

/// The fields of ONNX's `SequenceProto` this reader uses (diamond's schema
/// leaves the message out): the name, the element kind and the tensors,
/// kept as bytes to be decoded as `TensorProto`s.
#[derive(Clone, PartialEq, Message)]
struct SequenceProto {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    elem_type: Option<i32>,
    #[prost(bytes = "bytes", repeated, tag = "3")]
    tensor_values: Vec<Bytes>,
}

/// `SequenceProto.DataType.TENSOR`.
const SEQUENCE_OF_TENSORS: i32 = 1;

/// The keys of a stored map.
#[derive(Clone, Debug, PartialEq)]
pub enum MapKeys {
    /// int64 keys.
    Ints(Vec<i64>),
    /// String keys (bytes).
    Strings(Vec<Vec<u8>>),
}

/// A map read from a `.pb` `MapProto`: its keys and one value per key (as
/// the `ai.onnx.ml` operators use maps, each value a scalar tensor).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMap {
    /// The stored name, if any.
    pub name: Option<String>,
    /// The keys.
    pub keys: MapKeys,
    /// The values, one per key.
    pub values: Vec<Tensor>,
}

/// Reads the `MapProto` in `path` (through [`crate::value_file`], which
/// checks its key type and counts).
pub fn read_map(path: &Path) -> Result<TensorMap, ImportError> {
    let stored = read_value_file(path, Kind::Map)?;
    map_from_stored(stored.name, stored.value, path)
}

/// Reads a `SequenceProto` of `MapProto`s (what a `ZipMap` output is stored as).
pub fn read_map_sequence(path: &Path) -> Result<Vec<TensorMap>, ImportError> {
    match read_value_file(path, Kind::Sequence)?.value {
        StoredValue::Sequence(items) => items.into_iter().map(|m| map_from_stored(None, m, path)).collect(),
        _ => Err(map_error(path, "the SequenceProto does not hold maps".into())),
    }
}

fn map_error(path: &Path, problem: String) -> ImportError {
    ImportError::InvalidTensor { path: path.to_path_buf(), problem }
}

fn map_from_stored(name: Option<String>, value: StoredValue, path: &Path) -> Result<TensorMap, ImportError> {
    let StoredValue::Map { keys, values } = value else {
        return Err(map_error(path, format!("a {} where a map was expected", value.kind())));
    };
    let keys = if keys.elem_type() == diamond_ir::ElemType::String {
        MapKeys::Strings(keys.data.strings.iter().map(|k| k.to_vec()).collect())
    } else {
        MapKeys::Ints(keys.data.int64s)
    };
    let values = values
        .into_iter()
        .map(|v| match v {
            StoredValue::Tensor(t) => Ok(t),
            other => Err(map_error(path, format!("a map value is a {}, only tensors are read", other.kind()))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorMap { name, keys, values })
}

/// A sequence of tensors read from a file or a directory.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSequence {
    /// The stored name (a `SequenceProto`'s), if any.
    pub name: Option<String>,
    /// The tensors, in order.
    pub tensors: Vec<Tensor>,
}

/// Reads a sequence of tensors: a directory's `.npy`/`.pb` tensor files
/// sorted by name, or a `.pb` file holding a `SequenceProto` of tensors.
pub fn read_sequence(path: &Path) -> Result<TensorSequence, ImportError> {
    let fail = |problem: String| ImportError::InvalidTensor { path: path.to_path_buf(), problem };
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|source| ImportError::Io { path: path.to_path_buf(), source })?;
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "npy" || x == "pb"))
            .collect();
        files.sort();
        let tensors = files.iter().map(|f| read_tensor_file(f)).collect::<Result<Vec<_>, _>>()?;
        return Ok(TensorSequence { name: None, tensors });
    }
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return Err(fail(
            "one .npy file is one tensor; a sequence is a directory of tensor files or a .pb SequenceProto".into(),
        ));
    }
    let bytes = crate::onnx::read_file(path)?;
    if bytes.is_empty() {
        return Err(fail("the file is empty".into()));
    }
    let proto = SequenceProto::decode(bytes).map_err(|e| fail(format!("SequenceProto decoding failed: {e}")))?;
    match proto.elem_type {
        Some(SEQUENCE_OF_TENSORS) => {}
        None if !proto.tensor_values.is_empty() => {}
        other => {
            return Err(fail(format!(
                "the SequenceProto holds elements of kind {} (only tensors are read)",
                other.unwrap_or(0)
            )))
        }
    }
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let tensors = proto
        .tensor_values
        .into_iter()
        .map(|b| crate::onnx::decode_tensor(b, path, &base_dir))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorSequence { name: proto.name, tensors })
}
