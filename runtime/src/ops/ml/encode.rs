//! Encoders between categories and numbers: `OneHotEncoder` (an axis of
//! one slot per category appended; an unknown category is all zeros unless
//! `zeros` is 0), `LabelEncoder` (keys to values by table lookup, a default
//! for the rest; opset 1's `classes_strings` maps strings to their index
//! and back) and `CategoryMapper` (strings to int64 and back through two
//! parallel lists).

use crate::error::Result;
use crate::ops::{one, NodeCtx, Outs};
use crate::tensor::{Data, Tensor};
use diamond_ir::ElemType;
use std::collections::HashMap;

/// `OneHotEncoder`: float `[..., categories]`.
pub(super) fn one_hot_encoder(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let zeros = ctx.attr_i("zeros", 1) != 0;
    let slots: Vec<Option<usize>> = match (&x.data, ctx.attr_strings("cats_strings"), ctx.attr_ints("cats_int64s")) {
        (Data::Str(v), Some(cats), _) => {
            let at: HashMap<&[u8], usize> = cats.iter().enumerate().map(|(i, c)| (&c[..], i)).collect();
            v.iter().map(|s| at.get(&s[..]).copied()).collect()
        }
        (_, _, Some(cats)) if !x.data.elem().eq(&ElemType::String) => {
            let at: HashMap<i64, usize> = cats.iter().enumerate().map(|(i, &c)| (c, i)).collect();
            let keys = x.to_f64s().ok_or_else(|| ctx.err("numeric input required"))?;
            keys.iter().map(|&k| at.get(&(k as i64)).copied()).collect()
        }
        _ => return Err(ctx.err(format!("input 0 is {}; the categories must be of its kind", x.elem()))),
    };
    let width = ctx.attr_strings("cats_strings").map(|c| c.len()).or(ctx.attr_ints("cats_int64s").map(|c| c.len()));
    let width = width.unwrap_or(0);
    let mut out = vec![0.0f32; slots.len() * width];
    for (i, slot) in slots.iter().enumerate() {
        match slot {
            Some(s) => out[i * width + s] = 1.0,
            None if !zeros => return Err(ctx.err(format!("element {i} is no category and zeros is 0"))),
            None => {}
        }
    }
    let mut shape = x.shape.clone();
    shape.push(width);
    one(Tensor { shape, data: Data::F32(out) })
}

/// A list of keys or values: from `<name>_strings`, `_int64s`, `_floats`
/// or `<name>_tensor`.
fn table(ctx: &NodeCtx<'_>, name: &str) -> Result<Option<Data>> {
    if let Some(v) = ctx.attr_strings(&format!("{name}_strings")) {
        return Ok(Some(Data::Str(v)));
    }
    if let Some(v) = ctx.attr_ints(&format!("{name}_int64s")) {
        return Ok(Some(Data::I64(v)));
    }
    if let Some(v) = ctx.attr_floats(&format!("{name}_floats")) {
        return Ok(Some(Data::F32(v)));
    }
    Ok(ctx.attr_tensor(&format!("{name}_tensor"))?.map(|t| t.data))
}

/// Looks every element of `x` up in `keys` and takes the value at the same
/// position of `values`, `default` (one element) where there is none.
fn lookup(ctx: &NodeCtx<'_>, x: &Tensor, keys: &Data, values: &Data, default: Data) -> Result<Outs> {
    if keys.elem() != x.elem() {
        return Err(ctx.err(format!("keys are {}, the input {}", keys.elem(), x.elem())));
    }
    let n = values.len();
    let idx: Vec<usize> = match (keys, &x.data) {
        (Data::Str(k), Data::Str(v)) => {
            let at: HashMap<&[u8], usize> = k.iter().enumerate().rev().map(|(i, s)| (&s[..], i)).collect();
            v.iter().map(|s| at.get(&s[..]).copied().unwrap_or(n)).collect()
        }
        _ => {
            // match by value as f64 bits (NaN keys match NaN)
            let kv = keys.to_f64s().ok_or_else(|| ctx.err("numeric keys required"))?;
            let bits = |v: f64| if v.is_nan() { f64::NAN.to_bits() } else { (v + 0.0).to_bits() };
            let at: HashMap<u64, usize> = kv.iter().enumerate().rev().map(|(i, &k)| (bits(k), i)).collect();
            let xv = x.to_f64s().ok_or_else(|| ctx.err("numeric input required"))?;
            xv.iter().map(|&v| at.get(&bits(v)).copied().unwrap_or(n)).collect()
        }
    };
    let all =
        Data::concat(&[values, &default]).ok_or_else(|| ctx.err("the default's type differs from the values'"))?;
    one(Tensor { shape: x.shape.clone(), data: all.take(&idx) })
}

/// `LabelEncoder`.
pub(super) fn label_encoder(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if let Some(classes) = ctx.attr_strings("classes_strings") {
        return label_encoder_v1(ctx, x, classes);
    }
    let keys = table(ctx, "keys")?.ok_or_else(|| ctx.err("keys are required"))?;
    let values = table(ctx, "values")?.ok_or_else(|| ctx.err("values are required"))?;
    if keys.len() != values.len() {
        return Err(ctx.err(format!("keys have {} entries but values {}", keys.len(), values.len())));
    }
    let default = match values.elem() {
        ElemType::String => {
            Data::Str(vec![ctx.attr_s("default_string").unwrap_or_else(|| "_Unused".into()).into_bytes()])
        }
        ElemType::Int64 => Data::I64(vec![ctx.attr_i("default_int64", -1)]),
        ElemType::Float => Data::F32(vec![ctx.attr_f("default_float", -0.0)]),
        other => Data::from_f64s(other, &[0.0]).ok_or_else(|| ctx.unsupported(format!("values of {other}")))?,
    };
    let default = match ctx.attr_tensor("default_tensor")? {
        Some(t) if t.elem() == values.elem() && t.len() == 1 => t.data,
        _ => default,
    };
    lookup(ctx, x, &keys, &values, default)
}

/// Opset 1's `LabelEncoder`: strings to their index in `classes_strings`, int64 back.
fn label_encoder_v1(ctx: &NodeCtx<'_>, x: &Tensor, classes: Vec<Vec<u8>>) -> Result<Outs> {
    let indices = Data::I64((0..classes.len() as i64).collect());
    let default_int = Data::I64(vec![ctx.attr_i("default_int64", -1)]);
    let default_str = Data::Str(vec![ctx.attr_s("default_string").unwrap_or_else(|| "_Unused".into()).into_bytes()]);
    match x.elem() {
        ElemType::String => lookup(ctx, x, &Data::Str(classes), &indices, default_int),
        ElemType::Int64 => lookup(ctx, x, &indices, &Data::Str(classes), default_str),
        other => Err(ctx.err(format!("input 0 is {other}; LabelEncoder (opset 1) takes string or int64"))),
    }
}

/// `CategoryMapper`.
pub(super) fn category_mapper(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let strings = Data::Str(ctx.attr_strings("cats_strings").unwrap_or_default());
    let ints = Data::I64(ctx.attr_ints("cats_int64s").unwrap_or_default());
    if strings.len() != ints.len() {
        return Err(ctx.err(format!("cats_strings has {} entries but cats_int64s {}", strings.len(), ints.len())));
    }
    match x.elem() {
        ElemType::String => lookup(ctx, x, &strings, &ints, Data::I64(vec![ctx.attr_i("default_int64", -1)])),
        ElemType::Int64 => {
            let default = ctx.attr_s("default_string").unwrap_or_else(|| "_Unused".into()).into_bytes();
            lookup(ctx, x, &ints, &strings, Data::Str(vec![default]))
        }
        other => Err(ctx.err(format!("input 0 is {other}; CategoryMapper takes string or int64"))),
    }
}
