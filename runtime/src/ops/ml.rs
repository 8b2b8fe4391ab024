//! The `ai.onnx.ml` operators the node suite uses: `Binarizer`,
//! `ArrayFeatureExtractor` and `LabelEncoder`.

use super::elementwise::from_f64s;
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Tensor};
use diamond_ir::ElemType;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Binarizer" => binarizer(ctx),
        "ArrayFeatureExtractor" => array_feature_extractor(ctx),
        "LabelEncoder" => label_encoder(ctx),
        _ => return None,
    })
}

fn binarizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["threshold"])?;
    let x = ctx.input(0)?;
    let t = f64::from(ctx.attr_f("threshold", 0.0));
    let v = x.to_f64s().ok_or_else(|| ctx.err("numeric input required"))?;
    let out: Vec<f64> = v.iter().map(|&a| if a > t { 1.0 } else { 0.0 }).collect();
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

/// Picks the given positions of the last axis.
fn array_feature_extractor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let last = *x.shape.last().ok_or_else(|| ctx.err("X must have rank ≥ 1"))?;
    let iv = ind.to_i64s().filter(|_| !ind.is_float()).ok_or_else(|| ctx.err("indices must be integers"))?;
    let picks: Vec<usize> = iv
        .iter()
        .map(|&i| {
            usize::try_from(i).ok().filter(|&i| i < last).ok_or_else(|| ctx.err(format!("index {i} is out of range")))
        })
        .collect::<Result<_>>()?;
    let rows = x.len() / last.max(1);
    let idx: Vec<usize> = (0..rows).flat_map(|r| picks.iter().map(move |&p| r * last + p)).collect();
    let mut shape = if x.rank() == 1 { vec![1] } else { x.shape[..x.rank() - 1].to_vec() };
    shape.push(picks.len());
    one(Tensor { shape, data: x.data.take(&idx) })
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

fn label_encoder(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let keys = table(ctx, "keys")?.ok_or_else(|| ctx.err("keys are required"))?;
    let values = table(ctx, "values")?.ok_or_else(|| ctx.err("values are required"))?;
    if keys.len() != values.len() {
        return Err(ctx.err("keys and values differ in length"));
    }
    let default = match values.elem() {
        ElemType::String => {
            Data::Str(vec![ctx.attr_s("default_string").unwrap_or_else(|| "_Unused".into()).into_bytes()])
        }
        ElemType::Int64 => Data::I64(vec![ctx.attr_i("default_int64", -1)]),
        ElemType::Float => Data::F32(vec![ctx.attr_f("default_float", -0.0)]),
        other => match ctx.attr_tensor("default_tensor")? {
            Some(t) if t.elem() == other && t.len() == 1 => t.data,
            _ => Data::from_f64s(other, &[0.0]).ok_or_else(|| ctx.unsupported(format!("values of {other}")))?,
        },
    };
    let default = match ctx.attr_tensor("default_tensor")? {
        Some(t) if t.elem() == values.elem() && t.len() == 1 => t.data,
        _ => default,
    };
    if keys.elem() != x.elem() {
        return Err(ctx.err(format!("keys are {}, the input {}", keys.elem(), x.elem())));
    }
    // match by value: strings by bytes, numbers by f64 (NaN keys match NaN)
    let position = |i: usize| -> Option<usize> {
        match (&keys, &x.data) {
            (Data::Str(k), Data::Str(v)) => k.iter().position(|s| *s == v[i]),
            _ => {
                let kv = keys.to_f64s()?;
                let a = x.data.take(&[i]).to_f64s()?[0];
                kv.iter().position(|&b| b == a || (a.is_nan() && b.is_nan()))
            }
        }
    };
    let all =
        Data::concat(&[&values, &default]).ok_or_else(|| ctx.err("the default's type differs from the values'"))?;
    let n = values.len();
    let idx: Vec<usize> = (0..x.len()).map(|i| position(i).unwrap_or(n)).collect();
    one(Tensor { shape: x.shape.clone(), data: all.take(&idx) })
}
