//! Reading one tensor from a file: a serialized ONNX `TensorProto` (`.pb`, as
//! in the ONNX backend test data) or a NumPy `.npy` array. This is what
//! `--bind` reads; the kind is chosen by the `.npy` extension.
//!
//! A sequence of tensors (what `diamond run` feeds a sequence-typed input)
//! is read, through [`crate::value_file`], from a serialized `SequenceProto` (`.pb`, as the backend test
//! data stores sequence inputs) or from a directory of tensor files, one
//! tensor each, in the order of their names. A map (`ai.onnx.ml`'s inputs
//! and `ZipMap`'s outputs) is read from a serialized `MapProto`, a sequence
//! of maps from a `SequenceProto` of them.

use crate::error::ImportError;
use crate::value_file::{read_value_file, Kind, StoredValue};
use diamond_ir::Tensor;
use std::path::Path;

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
    let stored = read_value_file(path, Kind::Sequence)?;
    let StoredValue::Sequence(items) = stored.value else {
        return Err(fail(format!("the file holds a {}, not a sequence", stored.value.kind())));
    };
    let tensors = items
        .into_iter()
        .map(|v| match v {
            StoredValue::Tensor(t) => Ok(t),
            other => {
                Err(fail(format!("the SequenceProto holds elements of kind {} (only tensors are read)", other.kind())))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TensorSequence { name: stored.name, tensors })
}
