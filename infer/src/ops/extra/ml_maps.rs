//! Operators of the `ai.onnx.ml` domain on maps: `CastMap` (a map with
//! int64 keys to a `[1, n]` tensor: `n` is the number of entries, or
//! `max_map` for the sparse form), `DictVectorizer` (a map to the 1-D
//! tensor of its values at the vocabulary's keys) and `ZipMap` (the rows of
//! a `[N, C]` score tensor to a sequence of `N` maps from the class labels
//! to floats).

use super::{attr_len, count_dim, set_tensor, unknown_shape};
use crate::rule::{Defer, Facts, OpCtx, ValueKind};
use diamond_ir::term::RowTerm;
use diamond_ir::ElemType;

/// The most sequence items `ZipMap` lists one by one.
const MAX_ITEMS: u64 = 1 << 20;

/// The key type of input `i` when it is a map; reports a `dtype-mismatch`
/// when it is known to be something else. `Some(None)`: a map of unknown
/// key type, or a value of unknown kind.
fn map_key(ctx: &mut OpCtx, i: usize) -> Option<Option<ElemType>> {
    match ctx.kind(i) {
        Some(ValueKind::Map(ElemType::Undefined, _)) | Some(ValueKind::Unknown) | None => Some(None),
        Some(ValueKind::Map(key, _)) => Some(Some(key)),
        Some(other) => {
            ctx.dtype_mismatch(format!("input {i} is a {}; {} takes a map", other.describe(), ctx.op()));
            None
        }
    }
}

/// The element type `CastMap`'s `cast_to` names.
fn cast_map_type(ctx: &mut OpCtx) -> Option<ElemType> {
    let to = ctx.attr_str("cast_to").unwrap_or_else(|| "TO_FLOAT".into());
    match to.as_str() {
        "TO_FLOAT" => Some(ElemType::Float),
        "TO_STRING" => Some(ElemType::String),
        "TO_INT64" => Some(ElemType::Int64),
        _ => {
            ctx.invalid(format!("cast_to is '{to}'; it must be TO_FLOAT, TO_STRING or TO_INT64"));
            None
        }
    }
}

/// `CastMap`: `[1, n]` of the type `cast_to` names.
pub(super) fn cast_map(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = cast_map_type(ctx);
    match map_key(ctx, 0) {
        Some(Some(key)) if key != ElemType::Int64 => {
            ctx.dtype_mismatch(format!("the map's keys are {key}; CastMap takes int64 keys"))
        }
        _ => {}
    }
    if let Some(v) = ctx.facts(0).and_then(|f| f.dtype) {
        if !matches!(v, ElemType::Float | ElemType::String) {
            ctx.dtype_mismatch(format!("the map's values are {v}; CastMap takes float or string values"));
        }
    }
    let form = ctx.attr_str("map_form").unwrap_or_else(|| "DENSE".into());
    let width = match form.as_str() {
        "DENSE" => Some(ctx.unknown_dim()),
        "SPARSE" => match ctx.attr_int("max_map").unwrap_or(1) {
            n if n >= 1 => Some(ctx.known(n as u64)),
            n => {
                ctx.invalid(format!("max_map is {n}; the sparse form needs a positive length"));
                None
            }
        },
        _ => {
            ctx.invalid(format!("map_form is '{form}'; it must be DENSE or SPARSE"));
            None
        }
    };
    match width {
        Some(w) => {
            let one = ctx.known(1);
            set_tensor(ctx, 0, vec![one, w], t)
        }
        None => unknown_shape(ctx, 0, t),
    }
    Ok(())
}

/// `DictVectorizer`: `[V]` for a vocabulary of `V` keys, the map's value type.
pub(super) fn dict_vectorizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    let ints = attr_len(ctx, "int64_vocabulary");
    let strings = attr_len(ctx, "string_vocabulary");
    let (n, key) = match (ints, strings) {
        (n, 0) if n > 0 => (Some(n), ElemType::Int64),
        (0, n) if n > 0 => (Some(n), ElemType::String),
        _ => {
            ctx.invalid("DictVectorizer needs exactly one of int64_vocabulary and string_vocabulary");
            (None, ElemType::Undefined)
        }
    };
    if let (Some(Some(k)), Some(_)) = (map_key(ctx, 0), n) {
        if k != key {
            ctx.dtype_mismatch(format!("the map's keys are {k} but the vocabulary holds {key}"));
        }
    }
    let t = ctx.facts(0).filter(|f| matches!(f.kind, ValueKind::Map(..))).and_then(|f| f.dtype);
    match n {
        Some(n) => {
            let v = count_dim(ctx, n);
            set_tensor(ctx, 0, vec![v], t)
        }
        None => unknown_shape(ctx, 0, t),
    }
    Ok(())
}

/// `ZipMap`: a sequence of maps from the class labels to float, one per row of `[N, C]`.
pub(super) fn zip_map(ctx: &mut OpCtx) -> Result<(), Defer> {
    let ints = attr_len(ctx, "classlabels_int64s");
    let strings = attr_len(ctx, "classlabels_strings");
    let (labels, key) = match (ints, strings) {
        (n, 0) if n > 0 => (n, ElemType::Int64),
        (0, n) if n > 0 => (n, ElemType::String),
        _ => {
            ctx.invalid("ZipMap needs exactly one of classlabels_int64s and classlabels_strings");
            return Ok(());
        }
    };
    if let Some(t) = ctx.dtype(0).filter(|&t| t != ElemType::Float) {
        ctx.dtype_mismatch(format!("input 0 is {t}; ZipMap takes float"));
    }
    let dims = ctx.dims(0);
    if let Some(c) = dims.as_ref().and_then(|d| d.last().cloned()).and_then(|c| ctx.size_of(&c)) {
        if c != labels as u64 {
            ctx.invalid(format!("X has {c} columns but there are {labels} class labels; they must match"));
        }
    }
    let map = ValueKind::Map(key, Box::new(ValueKind::Tensor));
    let entry = || Facts {
        kind: map.clone(),
        row: RowTerm::closed(Vec::new()),
        dtype: Some(ElemType::Float),
        value: None,
        items: None,
        present: None,
    };
    ctx.set_row(0, RowTerm::closed(Vec::new()));
    ctx.set_kind(0, ValueKind::Sequence(Box::new(map.clone())));
    ctx.set_dtype(0, ElemType::Float);
    let rows = match dims.as_deref() {
        Some([n, _]) => ctx.size_of(&n.clone()),
        _ => None,
    };
    if let Some(n) = rows.filter(|&n| n <= MAX_ITEMS) {
        ctx.set_items(0, (0..n).map(|_| entry()).collect());
    }
    Ok(())
}
