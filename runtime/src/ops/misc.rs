//! The rest: quantization, signal windows, `CenterCropPad`, `BitCast`,
//! `Unique` and the string operators.

use super::elementwise::{floats, from_f64s};
use super::shape_ops::each_index;
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{strides, Data, Tensor, Value};
use diamond_ir::ElemType;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "QuantizeLinear" => quantize(ctx),
        "DequantizeLinear" => dequantize(ctx),
        "DynamicQuantizeLinear" => dynamic_quantize(ctx),
        "HannWindow" => window(ctx, &[0.5, -0.5, 0.0]),
        "HammingWindow" => window(ctx, &[25.0 / 46.0, -(1.0 - 25.0 / 46.0), 0.0]),
        "BlackmanWindow" => window(ctx, &[0.42, -0.5, 0.08]),
        "CenterCropPad" => center_crop_pad(ctx),
        "Unique" => unique(ctx),
        "StringConcat" => string_concat(ctx),
        "StringNormalizer" => string_normalizer(ctx),
        _ => return None,
    })
}

fn is_quantized_int(e: ElemType) -> bool {
    matches!(e, ElemType::Int8 | ElemType::Uint8 | ElemType::Int16 | ElemType::Uint16 | ElemType::Int32)
}

/// For each element of `x`, the index of its scale/zero point: one for all
/// (a scalar), one per slice of `axis` (1-D), or one per block of
/// `block_size` along `axis` (same rank as `x`).
fn param_index(ctx: &NodeCtx<'_>, x: &Tensor, param: &Tensor) -> Result<Vec<usize>> {
    if param.len() == 1 && param.rank() <= 1 {
        return Ok(vec![0; x.len()]);
    }
    let axis = ctx.axis(ctx.attr_i("axis", 1), x.rank())?;
    let block = ctx.attr_i("block_size", 0);
    if param.rank() == 1 && block == 0 {
        if param.len() != x.shape[axis] {
            return Err(ctx.err(format!("{} scales for axis {axis} of size {}", param.len(), x.shape[axis])));
        }
        let inner: usize = x.shape[axis + 1..].iter().product();
        return Ok((0..x.len()).map(|k| (k / inner.max(1)) % x.shape[axis]).collect());
    }
    if block > 0 && param.rank() == x.rank() {
        let b = block as usize;
        let ok = (0..x.rank()).all(|a| if a == axis { param.shape[a] == x.shape[a].div_ceil(b) } else { param.shape[a] == x.shape[a] });
        if !ok {
            return Err(ctx.err(format!("blocked scales {:?} do not fit {:?} in blocks of {b}", param.shape, x.shape)));
        }
        let st = strides(&param.shape);
        let mut idx = Vec::with_capacity(x.len());
        each_index(&x.shape, |m| {
            idx.push(m.iter().enumerate().map(|(a, &i)| if a == axis { i / b } else { i } * st[a]).sum());
        });
        return Ok(idx);
    }
    Err(ctx.err(format!("scale shape {:?} does not fit input {:?}", param.shape, x.shape)))
}

fn quantize(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    let zp = ctx.opt_input(2)?;
    let out_elem = match (zp, ctx.attr_opt_i("output_dtype")) {
        (Some(z), _) => z.elem(),
        (None, Some(c)) if c != 0 => ElemType::from_code(c as i32),
        _ => ElemType::Uint8,
    };
    if !is_quantized_int(out_elem) {
        return Err(ctx.unsupported(format!("quantizing to {out_elem}")));
    }
    let xv = floats(ctx, x)?;
    let sv = floats(ctx, scale)?;
    let zv = match zp {
        Some(z) => z.to_f64s().ok_or_else(|| ctx.err("zero point"))?,
        None => vec![0.0; sv.len()],
    };
    let idx = param_index(ctx, x, scale)?;
    // x / scale is rounded to x's type before rounding to an integer, as
    // the reference computes it
    let single = matches!(x.elem(), ElemType::Float | ElemType::Float16 | ElemType::Bfloat16);
    let quotient = |v: f64, s: f64| if single { f64::from(v as f32 / s as f32) } else { v / s };
    let out: Vec<f64> = xv.iter().zip(&idx).map(|(&v, &i)| quotient(v, sv[i]).round_ties_even() + zv[i]).collect();
    // the integer conversion saturates to the type's range
    one(from_f64s(ctx, out_elem, x.shape.clone(), &out)?)
}

fn dequantize(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    if !is_quantized_int(x.elem()) {
        return Err(ctx.unsupported(format!("dequantizing {}", x.elem())));
    }
    let xv = x.to_f64s().ok_or_else(|| ctx.err("input"))?;
    let sv = floats(ctx, scale)?;
    let zv = match ctx.opt_input(2)? {
        Some(z) => z.to_f64s().ok_or_else(|| ctx.err("zero point"))?,
        None => vec![0.0; sv.len()],
    };
    let idx = param_index(ctx, x, scale)?;
    let out: Vec<f64> = xv.iter().zip(&idx).map(|(&v, &i)| (v - zv[i]) * sv[i]).collect();
    let elem = ctx.attr_opt_i("output_dtype").filter(|&c| c != 0).map_or(scale.elem(), |c| ElemType::from_code(c as i32));
    one(from_f64s(ctx, elem, x.shape.clone(), &out)?)
}

fn dynamic_quantize(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let v = floats(ctx, x)?;
    let max = v.iter().copied().fold(0.0f64, f64::max);
    let min = v.iter().copied().fold(0.0f64, f64::min);
    // the reference computes in float32
    let scale = f64::from(((max - min) as f32) / 255.0f32);
    let zp = if scale == 0.0 { 0.0 } else { (-min / scale).round_ties_even().clamp(0.0, 255.0) };
    let q: Vec<f64> = v
        .iter()
        .map(|&a| if scale == 0.0 { zp } else { ((a as f32 / scale as f32) as f64).round_ties_even() + zp })
        .collect();
    Ok(vec![
        Some(Value::Tensor(from_f64s(ctx, ElemType::Uint8, x.shape.clone(), &q)?)),
        Some(Value::Tensor(Tensor::scalar(Data::F32(vec![scale as f32])))),
        Some(Value::Tensor(Tensor::scalar(Data::U8(vec![zp as u8])))),
    ])
}

/// A generalized cosine window `a0 + a1·cos(2πn/N) + a2·cos(4πn/N)`.
fn window(ctx: &NodeCtx<'_>, a: &[f64; 3]) -> Result<Outs> {
    let size = ctx.opt_ints(0)?.and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("size is required"))?;
    let size = usize::try_from(size).map_err(|_| ctx.err("negative size"))?;
    let periodic = ctx.attr_i("periodic", 1) != 0;
    let n = if periodic { size as f64 } else { size as f64 - 1.0 };
    let tau = 2.0 * std::f64::consts::PI;
    let w: Vec<f64> =
        (0..size).map(|k| a[0] + a[1] * (tau * k as f64 / n).cos() + a[2] * (2.0 * tau * k as f64 / n).cos()).collect();
    let elem = ElemType::from_code(ctx.attr_i("output_datatype", 1) as i32);
    one(from_f64s(ctx, elem, vec![size], &w)?)
}

fn center_crop_pad(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let target = ctx.opt_ints(1)?.ok_or_else(|| ctx.err("shape is required"))?;
    let axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) => a.iter().map(|&a| ctx.axis(a, x.rank())).collect::<Result<_>>()?,
        None => (0..x.rank()).collect(),
    };
    if axes.len() != target.len() {
        return Err(ctx.err("shape and axes differ in length"));
    }
    let mut shape = x.shape.clone();
    // output coordinate = input coordinate + shift
    let mut shift = vec![0i64; x.rank()];
    for (&a, &t) in axes.iter().zip(&target) {
        let t = usize::try_from(t).map_err(|_| ctx.err("negative size"))?;
        let d = x.shape[a];
        shift[a] = if t >= d { ((t - d) / 2) as i64 } else { -(((d - t) / 2) as i64) };
        shape[a] = t;
    }
    let st = strides(&x.shape);
    let n = x.len();
    let mut idx = Vec::new();
    each_index(&shape, |m| {
        let mut off = 0usize;
        for a in 0..m.len() {
            let i = m[a] as i64 - shift[a];
            if i < 0 || i >= x.shape[a] as i64 {
                off = n;
                break;
            }
            off += i as usize * st[a];
        }
        idx.push(off);
    });
    let zero = Data::from_f64s(x.elem(), &[0.0]).unwrap_or(Data::Str(vec![Vec::new()]));
    let all = Data::concat(&[&x.data, &zero]).ok_or_else(|| ctx.err("type"))?;
    one(Tensor { shape, data: all.take(&idx) })
}

fn unique(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let sorted = ctx.attr_i("sorted", 1) != 0;
    let (axis, flat) = match ctx.attr_opt_i("axis") {
        Some(a) => (ctx.axis(a, x.rank())?, false),
        None => (0, true),
    };
    let shape = if flat { vec![x.len()] } else { x.shape.clone() };
    let dim = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    // each slice along the axis, as element indices
    let slice = |k: usize| -> Vec<usize> {
        let mut v = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            v.extend((o * dim + k) * inner..(o * dim + k + 1) * inner);
        }
        v
    };
    let values: Vec<Vec<f64>> = (0..dim).map(|k| x.data.take(&slice(k)).to_f64s().unwrap_or_default()).collect();
    if matches!(x.data, Data::Str(_)) {
        return Err(ctx.unsupported("string data"));
    }
    let mut firsts: Vec<usize> = Vec::new();
    let mut inverse = vec![0i64; dim];
    let mut counts: Vec<i64> = Vec::new();
    for k in 0..dim {
        match firsts.iter().position(|&f| values[f] == values[k]) {
            Some(p) => {
                inverse[k] = p as i64;
                counts[p] += 1;
            }
            None => {
                inverse[k] = firsts.len() as i64;
                firsts.push(k);
                counts.push(1);
            }
        }
    }
    let mut order: Vec<usize> = (0..firsts.len()).collect();
    if sorted {
        order.sort_by(|&a, &b| {
            values[firsts[a]]
                .iter()
                .zip(&values[firsts[b]])
                .map(|(p, q)| p.total_cmp(q))
                .find(|c| c.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    }
    let mut rank_of = vec![0i64; order.len()];
    for (r, &u) in order.iter().enumerate() {
        rank_of[u] = r as i64;
    }
    let u = order.len();
    let mut idx = Vec::with_capacity(outer * u * inner);
    for o in 0..outer {
        for &q in &order {
            let k = firsts[q];
            idx.extend((o * dim + k) * inner..(o * dim + k + 1) * inner);
        }
    }
    let mut out_shape = shape.clone();
    out_shape[axis] = u;
    let y = Tensor { shape: out_shape, data: x.data.take(&idx) };
    let ints = |v: Vec<i64>| Some(Value::Tensor(Tensor::from_i64s(v)));
    Ok(vec![
        Some(Value::Tensor(y)),
        ints(order.iter().map(|&q| firsts[q] as i64).collect()),
        ints(inverse.iter().map(|&p| rank_of[p as usize]).collect()),
        ints(order.iter().map(|&q| counts[q]).collect()),
    ])
}

fn string_concat(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let (Data::Str(x), Data::Str(y)) = (&a.data, &b.data) else { return Err(ctx.err("string operands required")) };
    let shape = super::broadcast_shape(&[&a.shape, &b.shape]).ok_or_else(|| ctx.err("shapes do not broadcast"))?;
    let (ia, ib) = (super::broadcast_index(&shape, &a.shape), super::broadcast_index(&shape, &b.shape));
    let out = ia.iter().zip(&ib).map(|(&p, &q)| [&x[p][..], &y[q][..]].concat()).collect();
    one(Tensor { shape, data: Data::Str(out) })
}

fn string_normalizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let Data::Str(v) = &x.data else { return Err(ctx.err("string input required")) };
    if ctx.attr_s("locale").is_some_and(|l| !l.is_empty() && l != "en_US") {
        return Err(ctx.unsupported("locales other than en_US"));
    }
    let case_sensitive = ctx.attr_i("is_case_sensitive", 0) != 0;
    let stop: Vec<String> =
        ctx.attr_strings("stopwords").unwrap_or_default().iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    let action = ctx.attr_s("case_change_action").unwrap_or_else(|| "NONE".into());
    let kept: Vec<Vec<u8>> = v
        .iter()
        .filter(|s| {
            let s = String::from_utf8_lossy(s);
            !stop.iter().any(|w| if case_sensitive { *w == s } else { w.to_lowercase() == s.to_lowercase() })
        })
        .map(|s| {
            let s = String::from_utf8_lossy(s);
            match action.as_str() {
                "LOWER" => s.to_lowercase(),
                "UPPER" => s.to_uppercase(),
                _ => s.into_owned(),
            }
            .into_bytes()
        })
        .collect();
    let kept = if kept.is_empty() { vec![Vec::new()] } else { kept };
    let shape = if x.rank() == 2 { vec![1, kept.len()] } else { vec![kept.len()] };
    one(Tensor { shape, data: Data::Str(kept) })
}
