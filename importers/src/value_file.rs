//! Reading one stored value of any ONNX kind: a tensor, a sequence, a map
//! or an optional, from the `.pb` messages the ONNX backend test data uses
//! (`TensorProto`, `SequenceProto`, `MapProto`, `OptionalProto`), from
//! `.npy` tensors, or from a directory of such files (a sequence, its
//! elements in the order of their names).
//!
//! Protobuf does not say which message a file holds, so the reader is told
//! the kind the value is declared as ([`Kind`]). When a file does not decode
//! as that kind, the other kinds are tried only to word the error ("the file
//! holds a MapProto, the input is a tensor"). Nesting is bounded by prost's
//! recursion limit; every element type and key type is checked.

use crate::error::ImportError;
use bytes::Bytes;
use diamond_ir::{ElemType, Tensor};
use prost::Message;
use std::path::{Path, PathBuf};

/// `SequenceProto` and `OptionalProto`'s `DataType`.
mod kind_code {
    pub const TENSOR: i32 = 1;
    pub const SPARSE_TENSOR: i32 = 2;
    pub const SEQUENCE: i32 = 3;
    pub const MAP: i32 = 4;
    pub const OPTIONAL: i32 = 5;
}

/// ONNX's `SequenceProto`, tensors kept as bytes to be decoded as
/// `TensorProto`s with the reader's own checks.
#[derive(Clone, PartialEq, Message)]
struct SequenceProto {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    elem_type: Option<i32>,
    #[prost(bytes = "bytes", repeated, tag = "3")]
    tensor_values: Vec<Bytes>,
    #[prost(bytes = "bytes", repeated, tag = "4")]
    sparse_tensor_values: Vec<Bytes>,
    #[prost(message, repeated, tag = "5")]
    sequence_values: Vec<SequenceProto>,
    #[prost(message, repeated, tag = "6")]
    map_values: Vec<MapProto>,
    #[prost(message, repeated, tag = "7")]
    optional_values: Vec<OptionalProto>,
}

/// ONNX's `MapProto`.
#[derive(Clone, PartialEq, Message)]
struct MapProto {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    key_type: Option<i32>,
    #[prost(int64, repeated, tag = "3")]
    keys: Vec<i64>,
    #[prost(bytes = "bytes", repeated, tag = "4")]
    string_keys: Vec<Bytes>,
    #[prost(message, optional, boxed, tag = "5")]
    values: Option<Box<SequenceProto>>,
}

/// ONNX's `OptionalProto`.
#[derive(Clone, PartialEq, Message)]
struct OptionalProto {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    elem_type: Option<i32>,
    #[prost(bytes = "bytes", optional, tag = "3")]
    tensor_value: Option<Bytes>,
    #[prost(bytes = "bytes", optional, tag = "4")]
    sparse_tensor_value: Option<Bytes>,
    #[prost(message, optional, boxed, tag = "5")]
    sequence_value: Option<Box<SequenceProto>>,
    #[prost(message, optional, boxed, tag = "6")]
    map_value: Option<Box<MapProto>>,
    #[prost(message, optional, boxed, tag = "7")]
    optional_value: Option<Box<OptionalProto>>,
}

/// The kind of value a file is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A dense tensor (`TensorProto` or `.npy`).
    Tensor,
    /// A sequence (`SequenceProto`, or a directory of element files).
    Sequence,
    /// A map (`MapProto`).
    Map,
    /// An optional (`OptionalProto`; a file of the held kind is read as a
    /// present value).
    Optional,
}

impl Kind {
    /// The message that stores this kind.
    pub fn message(self) -> &'static str {
        match self {
            Kind::Tensor => "TensorProto",
            Kind::Sequence => "SequenceProto",
            Kind::Map => "MapProto",
            Kind::Optional => "OptionalProto",
        }
    }
}

/// A value read from a file.
#[derive(Clone, Debug, PartialEq)]
pub enum StoredValue {
    /// A dense tensor.
    Tensor(Tensor),
    /// A sequence; all elements are of one kind (and, for tensors, one
    /// element type).
    Sequence(Vec<StoredValue>),
    /// A map: its keys (a 1-D tensor of int64 — any integer key type read
    /// widened — or strings) and its
    /// values (a sequence with one element per key).
    Map {
        /// The keys.
        keys: Tensor,
        /// The values, one per key.
        values: Vec<StoredValue>,
    },
    /// An optional: `None` when empty.
    Optional(Option<Box<StoredValue>>),
}

impl StoredValue {
    /// `tensor`, `sequence`, `map` or `optional`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoredValue::Tensor(_) => "tensor",
            StoredValue::Sequence(_) => "sequence",
            StoredValue::Map { .. } => "map",
            StoredValue::Optional(_) => "optional",
        }
    }
}

/// A value and the name stored with it.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedValue {
    /// The stored name, if any.
    pub name: Option<String>,
    /// The value.
    pub value: StoredValue,
}

/// Reads `path` as a value of `kind`. A directory is a sequence of its
/// `.pb`/`.npy` files in name order (or, as an optional, a present
/// sequence); a `.npy` file is a tensor.
pub fn read_value_file(path: &Path, kind: Kind) -> Result<NamedValue, ImportError> {
    let fail = |problem: String| ImportError::InvalidTensor { path: path.to_path_buf(), problem };
    if path.is_dir() {
        return match kind {
            Kind::Sequence | Kind::Optional => {
                let items = directory_files(path)?
                    .iter()
                    .map(|f| crate::tensor_file::read_tensor_file(f).map(StoredValue::Tensor))
                    .collect::<Result<Vec<_>, _>>()?;
                check_sequence(&items).map_err(fail)?;
                let seq = StoredValue::Sequence(items);
                let value = if kind == Kind::Optional { StoredValue::Optional(Some(Box::new(seq))) } else { seq };
                Ok(NamedValue { name: None, value })
            }
            _ => Err(fail(format!("a directory holds a sequence, the value is {}", with_article(kind)))),
        };
    }
    let npy = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if npy {
        let tensor = crate::npy::read_npy(path)?;
        return match kind {
            Kind::Tensor => Ok(NamedValue { name: None, value: StoredValue::Tensor(tensor) }),
            Kind::Optional => {
                Ok(NamedValue { name: None, value: StoredValue::Optional(Some(Box::new(StoredValue::Tensor(tensor)))) })
            }
            _ => Err(fail(format!(
                "one .npy file is one tensor, the value is {}; a sequence is a directory of tensor files or a .pb \
                 SequenceProto",
                with_article(kind)
            ))),
        };
    }
    let bytes = crate::onnx::read_file(path)?;
    if bytes.is_empty() {
        return Err(fail("the file is empty".into()));
    }
    let reader = Reader { path, base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default() };
    match reader.decode(bytes.clone(), kind) {
        Ok(v) => Ok(v),
        // A file that is the declared message, with a problem inside, keeps its own error.
        Err(e) if reader.is_message(bytes.clone(), kind) => Err(e),
        Err(e) => {
            // Word the error by what the file does hold, when that is clear.
            let other = [Kind::Map, Kind::Sequence, Kind::Optional, Kind::Tensor]
                .into_iter()
                .filter(|&k| k != kind && !(kind == Kind::Optional && k != Kind::Optional))
                .find(|&k| reader.holds(bytes.clone(), k));
            match other {
                Some(k) => Err(fail(format!(
                    "the file holds {} {} ({}), but the value is declared {}",
                    if k == Kind::Optional { "an" } else { "a" },
                    k.message(),
                    with_article(k),
                    with_article(kind)
                ))),
                None => Err(e),
            }
        }
    }
}

/// The name stored in a `.pb` file of any of the four messages (the first
/// that decodes cleanly and carries one).
pub fn stored_name(path: &Path) -> Option<String> {
    if path.is_dir() || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return None;
    }
    let bytes = crate::onnx::read_file(path).ok()?;
    let reader = Reader { path, base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default() };
    [Kind::Tensor, Kind::Sequence, Kind::Map, Kind::Optional]
        .into_iter()
        .find_map(|k| reader.decode(bytes.clone(), k).ok().and_then(|v| v.name))
}

fn with_article(kind: Kind) -> String {
    let word = kind_word(kind);
    format!("{} {word}", if word.starts_with('o') { "an" } else { "a" })
}

fn kind_word(kind: Kind) -> &'static str {
    match kind {
        Kind::Tensor => "tensor",
        Kind::Sequence => "sequence",
        Kind::Map => "map",
        Kind::Optional => "optional",
    }
}

/// A directory's `.pb`/`.npy` files in name order.
fn directory_files(path: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let entries = std::fs::read_dir(path).map_err(|source| ImportError::Io { path: path.to_path_buf(), source })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "npy" || x == "pb"))
        .collect();
    files.sort();
    Ok(files)
}

/// One kind for all elements, one element type for tensors.
fn check_sequence(items: &[StoredValue]) -> Result<(), String> {
    let Some(first) = items.first() else { return Ok(()) };
    for (i, item) in items.iter().enumerate() {
        if item.kind() != first.kind() {
            return Err(format!(
                "the sequence mixes a {} (element 0) and a {} (element {i})",
                first.kind(),
                item.kind()
            ));
        }
        if let (StoredValue::Tensor(a), StoredValue::Tensor(b)) = (first, item) {
            if a.elem_type() != b.elem_type() {
                return Err(format!(
                    "the sequence mixes {} (element 0) and {} (element {i}) tensors",
                    a.elem_type(),
                    b.elem_type()
                ));
            }
        }
    }
    Ok(())
}

struct Reader<'a> {
    path: &'a Path,
    base_dir: PathBuf,
}

impl Reader<'_> {
    fn fail(&self, problem: String) -> ImportError {
        ImportError::InvalidTensor { path: self.path.to_path_buf(), problem }
    }

    /// Whether `bytes` decode cleanly as `kind`, with its kind field set
    /// (used only to word an error).
    fn holds(&self, bytes: Bytes, kind: Kind) -> bool {
        match kind {
            Kind::Map => MapProto::decode(bytes)
                .ok()
                .is_some_and(|m| m.key_type.is_some() && m.values.is_some() && self.map(m).is_ok()),
            Kind::Sequence => SequenceProto::decode(bytes)
                .ok()
                .is_some_and(|s| s.elem_type.is_some_and(|e| e > 0) && self.sequence(s).is_ok()),
            Kind::Optional => OptionalProto::decode(bytes)
                .ok()
                .is_some_and(|o| o.elem_type.is_some_and(|e| e > 0) && self.optional(o).is_ok()),
            Kind::Tensor => crate::onnx::decode_tensor(bytes, self.path, &self.base_dir).is_ok(),
        }
    }

    /// Whether `bytes` are `kind`'s message on the wire, its kind field set
    /// (a tensor's is always worth a second look: other messages decode as
    /// one).
    fn is_message(&self, bytes: Bytes, kind: Kind) -> bool {
        match kind {
            Kind::Tensor => false,
            Kind::Sequence => SequenceProto::decode(bytes).is_ok_and(|s| s.elem_type.is_some_and(|e| e > 0)),
            Kind::Map => MapProto::decode(bytes).is_ok_and(|m| m.key_type.is_some()),
            Kind::Optional => OptionalProto::decode(bytes).is_ok_and(|o| o.elem_type.is_some_and(|e| e > 0)),
        }
    }

    fn decode(&self, bytes: Bytes, kind: Kind) -> Result<NamedValue, ImportError> {
        let decoding = |what: &str, e: prost::DecodeError| self.fail(format!("{what} decoding failed: {e}"));
        match kind {
            Kind::Tensor => {
                let t = crate::onnx::decode_tensor(bytes, self.path, &self.base_dir)?;
                Ok(NamedValue { name: t.name.clone(), value: StoredValue::Tensor(t) })
            }
            Kind::Sequence => {
                let s = SequenceProto::decode(bytes).map_err(|e| decoding("SequenceProto", e))?;
                Ok(NamedValue { name: s.name.clone(), value: self.sequence(s)? })
            }
            Kind::Map => {
                let m = MapProto::decode(bytes).map_err(|e| decoding("MapProto", e))?;
                Ok(NamedValue { name: m.name.clone(), value: self.map(m)? })
            }
            Kind::Optional => {
                // A file of the held kind itself is a present value.
                match OptionalProto::decode(bytes.clone()) {
                    Ok(o) if o.elem_type.is_some() || o.name.is_some() => {
                        Ok(NamedValue { name: o.name.clone(), value: self.optional(o)? })
                    }
                    _ => {
                        let held = [Kind::Tensor, Kind::Sequence, Kind::Map]
                            .into_iter()
                            .find_map(|k| self.decode(bytes.clone(), k).ok())
                            .ok_or_else(|| {
                                self.fail("no OptionalProto, TensorProto, SequenceProto or MapProto decodes".into())
                            })?;
                        Ok(NamedValue { name: held.name, value: StoredValue::Optional(Some(Box::new(held.value))) })
                    }
                }
            }
        }
    }

    fn tensor(&self, bytes: Bytes) -> Result<StoredValue, ImportError> {
        crate::onnx::decode_tensor(bytes, self.path, &self.base_dir).map(StoredValue::Tensor)
    }

    fn sequence(&self, s: SequenceProto) -> Result<StoredValue, ImportError> {
        let present = [
            (kind_code::TENSOR, s.tensor_values.len()),
            (kind_code::SPARSE_TENSOR, s.sparse_tensor_values.len()),
            (kind_code::SEQUENCE, s.sequence_values.len()),
            (kind_code::MAP, s.map_values.len()),
            (kind_code::OPTIONAL, s.optional_values.len()),
        ];
        let filled: Vec<i32> = present.iter().filter(|(_, n)| *n > 0).map(|(k, _)| *k).collect();
        if filled.len() > 1 {
            return Err(self.fail(format!(
                "the SequenceProto mixes elements of kinds {} (one kind per sequence)",
                filled.iter().map(|k| kind_name(*k)).collect::<Vec<_>>().join(" and ")
            )));
        }
        let declared = s.elem_type.unwrap_or(0);
        if let Some(&k) = filled.first() {
            if declared != 0 && declared != k {
                return Err(self.fail(format!(
                    "the SequenceProto declares {} elements but holds {}",
                    kind_name(declared),
                    kind_name(k)
                )));
            }
        } else if !(0..=kind_code::OPTIONAL).contains(&declared) {
            return Err(self.fail(format!("the SequenceProto's elem_type {declared} is not a kind ONNX defines")));
        }
        if !s.sparse_tensor_values.is_empty() {
            return Err(self.fail("sequences of sparse tensors are not supported".into()));
        }
        let mut items = Vec::new();
        for t in s.tensor_values {
            items.push(self.tensor(t)?);
        }
        for q in s.sequence_values {
            items.push(self.sequence(q)?);
        }
        for m in s.map_values {
            items.push(self.map(m)?);
        }
        for o in s.optional_values {
            items.push(self.optional(o)?);
        }
        check_sequence(&items).map_err(|p| self.fail(p))?;
        Ok(StoredValue::Sequence(items))
    }

    fn map(&self, m: MapProto) -> Result<StoredValue, ImportError> {
        let key_type = m.key_type.unwrap_or(0);
        let keys = match ElemType::from_code(key_type) {
            ElemType::String => {
                if !m.keys.is_empty() {
                    return Err(self.fail("the MapProto has string keys but also integer keys".into()));
                }
                Tensor {
                    dims: vec![m.string_keys.len() as i64],
                    data_type: Some(ElemType::String),
                    data: diamond_ir::TensorData { strings: m.string_keys, ..Default::default() },
                    ..Tensor::default()
                }
            }
            // integer keys of any width are held as int64 (all ONNX ML maps use int64)
            ElemType::Int8
            | ElemType::Int16
            | ElemType::Int32
            | ElemType::Int64
            | ElemType::Uint8
            | ElemType::Uint16
            | ElemType::Uint32
            | ElemType::Uint64 => {
                if !m.string_keys.is_empty() {
                    return Err(self.fail("the MapProto has integer keys but also string keys".into()));
                }
                Tensor {
                    dims: vec![m.keys.len() as i64],
                    data_type: Some(ElemType::Int64),
                    data: diamond_ir::TensorData { int64s: m.keys, ..Default::default() },
                    ..Tensor::default()
                }
            }
            _ => {
                return Err(self.fail(format!(
                    "the MapProto's key_type {key_type} is not an integer or string type (ONNX map keys are)"
                )))
            }
        };
        let count = keys.dims[0] as usize;
        let values = match m.values {
            Some(values) => match self.sequence(*values)? {
                StoredValue::Sequence(items) => items,
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        if values.len() != count {
            return Err(self.fail(format!("the MapProto has {count} keys but {} values", values.len())));
        }
        Ok(StoredValue::Map { keys, values })
    }

    fn optional(&self, o: OptionalProto) -> Result<StoredValue, ImportError> {
        let held = match (o.tensor_value, o.sequence_value, o.map_value, o.optional_value, o.sparse_tensor_value) {
            (None, None, None, None, None) => None,
            (Some(t), None, None, None, None) => Some(self.tensor(t)?),
            (None, Some(s), None, None, None) => Some(self.sequence(*s)?),
            (None, None, Some(m), None, None) => Some(self.map(*m)?),
            (None, None, None, Some(inner), None) => Some(self.optional(*inner)?),
            (None, None, None, None, Some(_)) => {
                return Err(self.fail("optional sparse tensors are not supported".into()))
            }
            _ => return Err(self.fail("the OptionalProto holds more than one value".into())),
        };
        if let (Some(v), Some(code)) = (&held, o.elem_type.filter(|&c| c != 0)) {
            if kind_name(code) != v.kind() {
                return Err(self.fail(format!(
                    "the OptionalProto declares a {} but holds a {}",
                    kind_name(code),
                    v.kind()
                )));
            }
        }
        Ok(StoredValue::Optional(held.map(Box::new)))
    }
}

fn kind_name(code: i32) -> &'static str {
    match code {
        kind_code::TENSOR => "tensor",
        kind_code::SPARSE_TENSOR => "sparse tensor",
        kind_code::SEQUENCE => "sequence",
        kind_code::MAP => "map",
        kind_code::OPTIONAL => "optional",
        _ => "undefined",
    }
}
