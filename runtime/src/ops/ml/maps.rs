//! The operators on maps: `DictVectorizer` (a map to the `[1, V]` tensor
//! of its values at the vocabulary's keys, 0 where a key is absent),
//! `ZipMap` (each row of `[N, C]` scores to a map from the class labels,
//! the sequence of `N` maps) and `CastMap` (an int64-keyed map's values in
//! key order as `[1, n]`, or at their keys' positions of `[1, max_map]`,
//! cast to float, string or int64).

use crate::error::Result;
use crate::ops::{one, NodeCtx, Outs};
use crate::tensor::{Data, MapValue, Tensor, Value};
use std::collections::HashMap;

/// Input `i`, which must be a map.
fn map_input<'a>(ctx: &NodeCtx<'a>, i: usize) -> Result<&'a MapValue> {
    match ctx.value(i) {
        Some(Value::Map(m)) => Ok(m),
        Some(other) => Err(ctx.err(format!("operand {i} is a {}, a map was expected", other.kind()))),
        None => Err(ctx.err(format!("operand {i} is required"))),
    }
}

/// `DictVectorizer`.
pub(super) fn dict_vectorizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let map = map_input(ctx, 0)?;
    let vocabulary = match (ctx.attr_strings("string_vocabulary"), ctx.attr_ints("int64_vocabulary")) {
        (Some(s), _) if !s.is_empty() => Data::Str(s),
        (_, Some(i)) if !i.is_empty() => Data::I64(i),
        _ => return Err(ctx.err("string_vocabulary or int64_vocabulary is required")),
    };
    if vocabulary.elem() != map.keys.elem() {
        return Err(ctx.err(format!(
            "the map's keys are {} but the vocabulary holds {}",
            map.keys.elem(),
            vocabulary.elem()
        )));
    }
    let n = map.len();
    let idx: Vec<usize> = match (&vocabulary, &map.keys) {
        (Data::Str(v), Data::Str(k)) => {
            let at: HashMap<&[u8], usize> = k.iter().enumerate().map(|(i, s)| (&s[..], i)).collect();
            v.iter().map(|s| at.get(&s[..]).copied().unwrap_or(n)).collect()
        }
        (Data::I64(v), Data::I64(k)) => {
            let at: HashMap<i64, usize> = k.iter().enumerate().map(|(i, &s)| (s, i)).collect();
            v.iter().map(|s| at.get(s).copied().unwrap_or(n)).collect()
        }
        _ => return Err(ctx.err("map keys must be int64 or strings")),
    };
    let zero = match &map.values {
        Data::Str(_) => Data::Str(vec![Vec::new()]),
        other => Data::from_f64s(other.elem(), &[0.0]).ok_or_else(|| ctx.err("unsupported map values"))?,
    };
    let all = Data::concat(&[&map.values, &zero]).ok_or_else(|| ctx.err("unsupported map values"))?;
    one(Tensor { shape: vec![1, idx.len()], data: all.take(&idx) })
}

/// `ZipMap`.
pub(super) fn zip_map(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let keys = match (ctx.attr_strings("classlabels_strings"), ctx.attr_ints("classlabels_int64s")) {
        (Some(s), _) if !s.is_empty() => Data::Str(s),
        (_, Some(i)) if !i.is_empty() => Data::I64(i),
        _ => return Err(ctx.err("classlabels_strings or classlabels_int64s is required")),
    };
    let Data::F32(v) = &x.data else { return Err(ctx.err(format!("input 0 is {}; ZipMap takes float", x.elem()))) };
    let c = keys.len();
    let cols = if x.rank() == 0 { 1 } else { x.shape[x.rank() - 1] };
    if cols != c || x.rank() > 2 {
        return Err(ctx.err(format!("input 0 has shape {:?} for {c} class labels", x.shape)));
    }
    let maps = v.chunks(c.max(1)).map(|row| MapValue { keys: keys.clone(), values: Data::F32(row.to_vec()) }).collect();
    Ok(vec![Some(Value::MapSequence(maps))])
}

/// `CastMap`.
pub(super) fn cast_map(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let map = map_input(ctx, 0)?.sorted();
    let Data::I64(keys) = &map.keys else { return Err(ctx.err("CastMap takes a map with int64 keys")) };
    let to = ctx.attr_s("cast_to").unwrap_or_else(|| "TO_FLOAT".into());
    let values: Data = match (to.as_str(), &map.values) {
        ("TO_FLOAT", Data::Str(s)) => Data::F32(s.iter().map(|b| parse(b) as f32).collect()),
        ("TO_FLOAT", d) => Data::F32(d.to_f64s().unwrap_or_default().iter().map(|&v| v as f32).collect()),
        ("TO_INT64", Data::Str(s)) => Data::I64(s.iter().map(|b| parse(b) as i64).collect()),
        ("TO_INT64", d) => Data::I64(d.to_f64s().unwrap_or_default().iter().map(|&v| v as i64).collect()),
        ("TO_STRING", Data::Str(s)) => Data::Str(s.clone()),
        ("TO_STRING", d) => {
            Data::Str(d.to_f64s().unwrap_or_default().iter().map(|v| format!("{v:.6}").into_bytes()).collect())
        }
        (other, _) => return Err(ctx.err(format!("cast_to '{other}' is not one of TO_FLOAT, TO_STRING, TO_INT64"))),
    };
    match ctx.attr_s("map_form").unwrap_or_else(|| "DENSE".into()).as_str() {
        "DENSE" => one(Tensor { shape: vec![1, values.len()], data: values }),
        "SPARSE" => {
            let max = usize::try_from(ctx.attr_i("max_map", 1))
                .ok()
                .filter(|&m| m >= 1)
                .ok_or_else(|| ctx.err("max_map must be positive"))?;
            let n = values.len();
            let pad = match &values {
                Data::Str(_) => Data::Str(vec![b"0".to_vec()]),
                other => Data::from_f64s(other.elem(), &[0.0]).ok_or_else(|| ctx.err("unsupported values"))?,
            };
            let mut idx = vec![n; max];
            for (i, &k) in keys.iter().enumerate() {
                if let Some(slot) = usize::try_from(k).ok().and_then(|k| idx.get_mut(k)) {
                    *slot = i;
                }
            }
            let all = Data::concat(&[&values, &pad]).ok_or_else(|| ctx.err("unsupported values"))?;
            one(Tensor { shape: vec![1, max], data: all.take(&idx) })
        }
        other => Err(ctx.err(format!("map_form '{other}' is not DENSE or SPARSE"))),
    }
}

fn parse(bytes: &[u8]) -> f64 {
    std::str::from_utf8(bytes).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0.0)
}
