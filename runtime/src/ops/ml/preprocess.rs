//! Preprocessing, element by element or row by row: `Scaler`
//! (`(x - offset) · scale`, one value or one per feature), `Normalizer`
//! (each row divided by its MAX, L1 or L2 norm), `Binarizer` (1 above the
//! threshold, else 0) and `Imputer` (a marker value, or NaN, replaced by
//! one value or one per feature). The float outputs are `f32`, computed
//! through `f64`.

use super::Rows;
use crate::error::Result;
use crate::ops::elementwise::from_f64s;
use crate::ops::{one, NodeCtx, Outs};
use crate::tensor::{Data, Tensor};

/// The value of a per-feature list (or a single value) at element `i` of rows of `f`.
fn per_feature(list: &[f32], i: usize, f: usize, default: f64) -> f64 {
    match list.len() {
        0 => default,
        1 => f64::from(list[0]),
        _ => list.get(i % f.max(1)).map_or(default, |&v| f64::from(v)),
    }
}

fn float_tensor(shape: Vec<usize>, values: &[f64]) -> Tensor {
    Tensor { shape, data: Data::F32(values.iter().map(|&v| v as f32).collect()) }
}

/// `Scaler`.
pub(super) fn scaler(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let rows = super::rows(ctx, 0)?;
    let offset = ctx.attr_floats("offset").unwrap_or_default();
    let scale = ctx.attr_floats("scale").unwrap_or_default();
    for (name, list) in [("offset", &offset), ("scale", &scale)] {
        if list.len() > 1 && list.len() != rows.f {
            return Err(ctx.err(format!(
                "{name} has {} values for {} features; give 1 or one per feature",
                list.len(),
                rows.f
            )));
        }
    }
    let out: Vec<f64> = rows
        .x
        .iter()
        .enumerate()
        .map(|(i, &v)| (v - per_feature(&offset, i, rows.f, 0.0)) * per_feature(&scale, i, rows.f, 1.0))
        .collect();
    one(float_tensor(ctx.input(0)?.shape.clone(), &out))
}

/// `Normalizer`: a row whose norm is 0 is kept.
pub(super) fn normalizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let norm = ctx.attr_s("norm").unwrap_or_else(|| "MAX".into());
    let Rows { n, f, x } = super::rows(ctx, 0)?;
    let mut out = x.clone();
    for r in 0..n {
        let row = &mut out[r * f..(r + 1) * f];
        let d = match norm.as_str() {
            "MAX" => row.iter().fold(f64::MIN, |m, &v| m.max(v)),
            "L1" => row.iter().map(|v| v.abs()).sum(),
            "L2" => row.iter().map(|v| v * v).sum::<f64>().sqrt(),
            other => return Err(ctx.err(format!("norm '{other}' is not one of MAX, L1, L2"))),
        };
        if d != 0.0 {
            row.iter_mut().for_each(|v| *v /= d);
        }
    }
    one(float_tensor(ctx.input(0)?.shape.clone(), &out))
}

/// `Binarizer`: the input's type.
pub(super) fn binarizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let t = f64::from(ctx.attr_f("threshold", 0.0));
    let v = x.to_f64s().ok_or_else(|| ctx.err("numeric input required"))?;
    let out: Vec<f64> = v.iter().map(|&a| if a > t { 1.0 } else { 0.0 }).collect();
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

/// `Imputer`: the input's type.
pub(super) fn imputer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let f = if x.rank() >= 2 { x.len() / x.shape[0].max(1) } else { x.len() };
    match &x.data {
        Data::I64(v) => {
            let with = ctx.attr_ints("imputed_value_int64s").unwrap_or_default();
            if with.is_empty() || (with.len() > 1 && with.len() != f) {
                return Err(ctx.err(format!("imputed_value_int64s has {} values for {f} features", with.len())));
            }
            let marker = ctx.attr_i("replaced_value_int64", 0);
            let out = v
                .iter()
                .enumerate()
                .map(|(i, &a)| if a == marker { with[if with.len() == 1 { 0 } else { i % f }] } else { a })
                .collect();
            one(Tensor { shape: x.shape.clone(), data: Data::I64(out) })
        }
        _ if x.is_float() => {
            let with = ctx.attr_floats("imputed_value_floats").unwrap_or_default();
            if with.is_empty() || (with.len() > 1 && with.len() != f) {
                return Err(ctx.err(format!("imputed_value_floats has {} values for {f} features", with.len())));
            }
            let marker = f64::from(ctx.attr_f("replaced_value_float", 0.0));
            let v = x.to_f64s().unwrap_or_default();
            let out: Vec<f64> = v
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let hit = if marker.is_nan() { a.is_nan() } else { a == marker };
                    if hit {
                        per_feature(&with, i, f, 0.0)
                    } else {
                        a
                    }
                })
                .collect();
            one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
        }
        _ => Err(ctx.err(format!("input 0 is {}; Imputer takes float, double or int64", x.elem()))),
    }
}
