//! Values of every kind in and out of files, for `run` and `bench`.
//!
//! In: a file read by `importers::value_file` as the kind the graph input
//! is declared as (a `.pb` `TensorProto`, `SequenceProto`, `MapProto` or
//! `OptionalProto`, a `.npy` tensor, a directory as a sequence) becomes a
//! runtime [`Value`]. Out (`-o DIR`): a tensor is `NAME.npy` (strings as
//! NumPy `str` arrays, no pickle), a sequence the directory `NAME/` with
//! one file per element (`0000.npy`, …), a map `NAME.json` (an object from
//! key to value), an optional the value it holds or nothing, with a note.
//! Every file is encoded before any is written; each file is written
//! atomically and a sequence's directory is filled beside its place and
//! renamed into it, so no partial output is left behind.

use crate::Failure;
use diamond::ir::{ElemType, TypeValue};
use diamond::values::{read_value_file, Kind, StoredValue};
use diamond::values::{Data, MapValue, Tensor, Value};
use std::path::{Path, PathBuf};

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// The kind a declared type is read as (undeclared: a tensor).
pub fn kind_of(ty: Option<&TypeValue>) -> Kind {
    match ty {
        Some(TypeValue::Sequence(_)) => Kind::Sequence,
        Some(TypeValue::Map { .. }) => Kind::Map,
        Some(TypeValue::Optional(_)) => Kind::Optional,
        _ => Kind::Tensor,
    }
}

/// The kind a computed value is compared as.
fn kind_of_value(v: &Value) -> Kind {
    match v {
        Value::Tensor(_) => Kind::Tensor,
        Value::Sequence(..) => Kind::Sequence,
        Value::Optional(_) => Kind::Optional,
        Value::Map(_) => Kind::Map,
        Value::MapSequence(_) => Kind::Sequence,
    }
}

/// The element type a declared sequence (or optional sequence) holds.
fn declared_elem(ty: Option<&TypeValue>) -> Option<ElemType> {
    match ty? {
        TypeValue::Tensor { elem, .. } => *elem,
        TypeValue::Sequence(inner) | TypeValue::Optional(inner) => {
            declared_elem(inner.as_deref().and_then(|t| t.value.as_ref()))
        }
        _ => None,
    }
}

/// Reads `path` as the value graph input `name` of declared type `ty` takes.
pub fn read_input(name: &str, ty: Option<&TypeValue>, path: &Path) -> Result<Value, Failure> {
    let stored = read_value_file(path, kind_of(ty)).map_err(|e| bad(format!("input '{name}': {e}")))?;
    to_value(&stored.value, declared_elem(ty)).map_err(|e| bad(format!("input '{name}': {}: {e}", path.display())))
}

/// A stored value as a runtime value; `elem` names an empty sequence's
/// element type.
pub fn to_value(stored: &StoredValue, elem: Option<ElemType>) -> Result<Value, String> {
    Ok(match stored {
        StoredValue::Tensor(t) => Value::Tensor(Tensor::from_ir(t)?),
        StoredValue::Sequence(items) if items.iter().any(|i| matches!(i, StoredValue::Map { .. })) => {
            Value::MapSequence(items.iter().map(to_map).collect::<Result<Vec<_>, _>>()?)
        }
        StoredValue::Sequence(items) => {
            let tensors = items
                .iter()
                .map(|item| match item {
                    StoredValue::Tensor(t) => Tensor::from_ir(t),
                    other => Err(format!("sequences of {}s are not supported (only of tensors)", other.kind())),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let elem = tensors.first().map(Tensor::elem).or(elem).unwrap_or(ElemType::Float);
            Value::Sequence(elem, tensors)
        }
        StoredValue::Map { .. } => Value::Map(to_map(stored)?),
        StoredValue::Optional(held) => match held {
            None => Value::Optional(None),
            Some(v) => Value::Optional(Some(Box::new(to_value(v, elem)?))),
        },
    })
}

/// A stored map (scalar values) as a runtime map.
fn to_map(stored: &StoredValue) -> Result<MapValue, String> {
    let StoredValue::Map { keys, values } = stored else {
        return Err(format!("a sequence of maps holds a {}", stored.kind()));
    };
    let keys = Tensor::from_ir(keys)?.data;
    let values = values
        .iter()
        .map(|v| match v {
            StoredValue::Tensor(t) => Ok(t.clone()),
            other => Err(format!("map values that are {}s are not supported (only scalars)", other.kind())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    MapValue::from_stored(keys, &values)
}

/// Reads the stored value `got` is compared with.
pub fn read_stored(file: &Path, got: &Value) -> Result<Value, Failure> {
    let stored = read_value_file(file, kind_of_value(got)).map_err(bad)?;
    let elem = match got {
        Value::Sequence(elem, _) => Some(*elem),
        _ => None,
    };
    to_value(&stored.value, elem).map_err(|e| bad(format!("{}: {e}", file.display())))
}

/// `None` when `got` matches `want` (tensors by `compare_tensor`);
/// otherwise where and how they differ.
pub fn compare_values(
    got: &Value,
    want: &Value,
    compare_tensor: &dyn Fn(&Tensor, &Tensor) -> Option<String>,
) -> Option<String> {
    match (got, want) {
        (Value::Tensor(a), Value::Tensor(b)) => compare_tensor(a, b),
        (Value::Sequence(_, a), Value::Sequence(_, b)) => {
            if a.len() != b.len() {
                return Some(format!("a sequence of {} tensor(s), stored {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| compare_tensor(x, y).map(|p| format!("element {i}: {p}")))
        }
        (Value::Map(a), Value::Map(b)) => compare_maps(a, b, compare_tensor),
        (Value::MapSequence(a), Value::MapSequence(b)) => {
            if a.len() != b.len() {
                return Some(format!("a sequence of {} map(s), stored {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| compare_maps(x, y, compare_tensor).map(|p| format!("map {i}: {p}")))
        }
        (Value::Optional(a), Value::Optional(b)) => match (a, b) {
            (None, None) => None,
            (Some(x), Some(y)) => compare_values(x, y, compare_tensor),
            (None, Some(_)) => Some("empty, the stored optional holds a value".into()),
            (Some(_), None) => Some("holds a value, the stored optional is empty".into()),
        },
        (a, b) => Some(format!("a {} was computed, the stored value is a {}", a.kind(), b.kind())),
    }
}

/// Two maps compared key by key (in key order), values as tensors.
fn compare_maps(
    got: &MapValue,
    want: &MapValue,
    compare_tensor: &dyn Fn(&Tensor, &Tensor) -> Option<String>,
) -> Option<String> {
    let (a, b) = (got.sorted(), want.sorted());
    if a.keys != b.keys {
        return Some(format!("keys {}, stored {}", keys_text(&a.keys), keys_text(&b.keys)));
    }
    let tensor = |d: &Data| Tensor { shape: vec![d.len()], data: d.clone() };
    compare_tensor(&tensor(&a.values), &tensor(&b.values)).map(|p| format!("values (in key order): {p}"))
}

fn keys_text(keys: &Data) -> String {
    match keys {
        Data::Str(k) => format!("{:?}", k.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>()),
        other => format!("{:?}", other.to_f64s().unwrap_or_default()),
    }
}

/// A map as a JSON object from key (as text: JSON's keys are strings) to
/// value (a number, `"NaN"`/`"inf"` where JSON has none, or a string).
pub fn map_json(m: &MapValue) -> serde_json::Value {
    let keys: Vec<String> = match &m.keys {
        Data::Str(k) => k.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect(),
        other => other.to_f64s().unwrap_or_default().iter().map(|k| (*k as i64).to_string()).collect(),
    };
    let values: Vec<serde_json::Value> = match &m.values {
        Data::Str(v) => v.iter().map(|s| String::from_utf8_lossy(s).into_owned().into()).collect(),
        Data::I64(v) => v.iter().map(|&x| x.into()).collect(),
        other => other
            .to_f64s()
            .unwrap_or_default()
            .into_iter()
            .map(|x| if x.is_finite() { serde_json::json!(x) } else { serde_json::json!(x.to_string()) })
            .collect(),
    };
    serde_json::Value::Object(keys.into_iter().zip(values).collect())
}

fn map_bytes(m: &MapValue) -> Vec<u8> {
    let mut text = serde_json::to_string_pretty(&map_json(m)).unwrap_or_default();
    text.push('\n');
    text.into_bytes()
}

/// A value name as a file name: path separators and odd characters become `_`.
pub fn file_name(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// One output written with `-o`: a file, or a sequence's directory.
pub struct Written {
    /// The value's name.
    pub name: String,
    /// The file or directory.
    pub path: PathBuf,
    /// `tensor`, `sequence`, `map` or `optional`.
    pub kind: &'static str,
    /// The element type of the tensor(s) written, where there are any.
    pub elem: Option<ElemType>,
    /// The element type the files hold (a wider one where NumPy lacks `elem`).
    pub file_elem: Option<ElemType>,
    /// What a reader should know: a widened type, an empty optional.
    pub note: Option<String>,
}

/// The bytes of one file of an output, relative to the output directory.
struct Encoded {
    relative: PathBuf,
    bytes: Vec<u8>,
}

/// An output encoded: where it goes and its files (several for a sequence).
struct Planned {
    written: Written,
    /// The directory a sequence fills (`None`: one file).
    directory: Option<PathBuf>,
    files: Vec<Encoded>,
}

fn encode_tensor(name: &str, t: &Tensor) -> Result<(Vec<u8>, Option<ElemType>), Failure> {
    let bytes = diamond::values::npy::encode_npy(t).map_err(|e| bad(format!("-o: '{name}': {e}")))?;
    Ok((bytes, diamond::values::npy::npy_elem(t.elem())))
}

fn widened_note(path: &Path, elem: ElemType, file_elem: Option<ElemType>) -> Option<String> {
    let file_elem = file_elem?;
    (elem != file_elem).then(|| {
        format!(
            "{} holds {}: NumPy has no {} (each value widens exactly)",
            path.display(),
            diamond::values::dtype_name(file_elem),
            elem.name()
        )
    })
}

fn plan_output(dir: &Path, name: &str, value: &Value, optional: bool) -> Result<Option<Planned>, Failure> {
    let safe = file_name(name);
    Ok(Some(match value {
        Value::Tensor(t) => {
            let (bytes, file_elem) = encode_tensor(name, t)?;
            let path = dir.join(format!("{safe}.npy"));
            let note = widened_note(&path, t.elem(), file_elem);
            Planned {
                written: Written {
                    name: name.to_string(),
                    path,
                    kind: if optional { "optional" } else { "tensor" },
                    elem: Some(t.elem()),
                    file_elem: file_elem.or(Some(t.elem())),
                    note,
                },
                directory: None,
                files: vec![Encoded { relative: PathBuf::from(format!("{safe}.npy")), bytes }],
            }
        }
        Value::Sequence(elem, items) => {
            let mut files = Vec::with_capacity(items.len());
            let mut file_elem = diamond::values::npy::npy_elem(*elem).or(Some(*elem));
            for (i, t) in items.iter().enumerate() {
                let (bytes, widened) = encode_tensor(&format!("{name}[{i}]"), t)?;
                file_elem = widened.or(Some(t.elem()));
                files.push(Encoded { relative: PathBuf::from(format!("{i:04}.npy")), bytes });
            }
            let path = dir.join(&safe);
            let note = widened_note(&path, *elem, file_elem);
            Planned {
                written: Written {
                    name: name.to_string(),
                    path: path.clone(),
                    kind: if optional { "optional" } else { "sequence" },
                    elem: Some(*elem),
                    file_elem,
                    note,
                },
                directory: Some(path),
                files,
            }
        }
        Value::Map(m) => {
            let path = dir.join(format!("{safe}.json"));
            Planned {
                written: Written {
                    name: name.to_string(),
                    path,
                    kind: if optional { "optional" } else { "map" },
                    elem: None,
                    file_elem: None,
                    note: None,
                },
                directory: None,
                files: vec![Encoded { relative: PathBuf::from(format!("{safe}.json")), bytes: map_bytes(m) }],
            }
        }
        Value::MapSequence(maps) => {
            let path = dir.join(&safe);
            let files = maps
                .iter()
                .enumerate()
                .map(|(i, m)| Encoded { relative: PathBuf::from(format!("{i:04}.json")), bytes: map_bytes(m) })
                .collect();
            Planned {
                written: Written {
                    name: name.to_string(),
                    path: path.clone(),
                    kind: if optional { "optional" } else { "sequence of maps" },
                    elem: None,
                    file_elem: None,
                    note: None,
                },
                directory: Some(path),
                files,
            }
        }
        Value::Optional(None) => return Ok(None),
        Value::Optional(Some(inner)) => return plan_output(dir, name, inner, true),
    }))
}

/// Encodes every value first, then writes them: each file atomically, a
/// sequence's directory filled under a temporary name and renamed into
/// place. An empty optional writes nothing and is reported with a note.
pub fn write_outputs(dir: &Path, values: &[(&String, &Value)]) -> Result<Vec<Written>, Failure> {
    let mut planned = Vec::new();
    let mut empty = Vec::new();
    for (name, v) in values {
        match plan_output(dir, name, v, false)? {
            Some(p) => planned.push(p),
            None => empty.push(Written {
                name: name.to_string(),
                path: PathBuf::new(),
                kind: "optional",
                elem: None,
                file_elem: None,
                note: Some(format!("'{name}' is an empty optional: nothing was written for it")),
            }),
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = Vec::new();
    for p in planned {
        match &p.directory {
            None => {
                for f in &p.files {
                    let path = dir.join(&f.relative);
                    diamond::io::write_bytes(&path, &f.bytes)
                        .map_err(|e| bad(format!("cannot write {}: {e}", path.display())))?;
                }
            }
            Some(target) => write_directory(target, &p.files)?,
        }
        written.push(p.written);
    }
    written.extend(empty);
    Ok(written)
}

/// Fills a fresh directory beside `target` with `files`, then puts it in
/// `target`'s place (a previous run's directory there is replaced).
fn write_directory(target: &Path, files: &[Encoded]) -> Result<(), Failure> {
    let parent = target.parent().unwrap_or(Path::new("."));
    let leaf = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = parent.join(format!(".{leaf}.partial-{}", std::process::id()));
    let cleanup = |e: String| {
        let _ = std::fs::remove_dir_all(&staging);
        bad(e)
    };
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging).map_err(|e| bad(format!("cannot create {}: {e}", staging.display())))?;
    for f in files {
        let path = staging.join(&f.relative);
        std::fs::write(&path, &f.bytes).map_err(|e| cleanup(format!("cannot write {}: {e}", path.display())))?;
    }
    if target.is_dir() {
        std::fs::remove_dir_all(target).map_err(|e| cleanup(format!("cannot replace {}: {e}", target.display())))?;
    } else if target.exists() {
        return Err(cleanup(format!("cannot write the sequence {}: a file is in the way", target.display())));
    }
    std::fs::rename(&staging, target).map_err(|e| cleanup(format!("cannot write {}: {e}", target.display())))
}
