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
        "StringSplit" => string_split(ctx),
        "RegexFullMatch" => regex_full_match(ctx),
        "DFT" => dft(ctx),
        "STFT" => stft(ctx),
        "MelWeightMatrix" => mel_weight_matrix(ctx),
        "TfIdfVectorizer" => tfidf(ctx),
        "StringNormalizer" => string_normalizer(ctx),
        "BitCast" => bitcast(ctx),
        "MatMulInteger" => matmul_integer(ctx),
        "NonMaxSuppression" => non_max_suppression(ctx),
        "QLinearMatMul" => qlinear_matmul(ctx),
        "ConvInteger" => conv_integer(ctx),
        "QLinearConv" => qlinear_conv(ctx),
        _ => return None,
    })
}

fn is_quantized_int(e: ElemType) -> bool {
    matches!(
        e,
        ElemType::Int8
            | ElemType::Uint8
            | ElemType::Int16
            | ElemType::Uint16
            | ElemType::Int32
            | ElemType::Int4
            | ElemType::Uint4
            | ElemType::Int2
            | ElemType::Uint2
    )
}

fn is_small_float(e: ElemType) -> bool {
    matches!(
        e,
        ElemType::Float8e4m3fn
            | ElemType::Float8e4m3fnuz
            | ElemType::Float8e5m2
            | ElemType::Float8e5m2fnuz
            | ElemType::Float4e2m1
    )
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
        let ok = (0..x.rank()).all(|a| {
            if a == axis {
                param.shape[a] == x.shape[a].div_ceil(b)
            } else {
                param.shape[a] == x.shape[a]
            }
        });
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
    let small_float = is_small_float(out_elem);
    if !is_quantized_int(out_elem) && !small_float {
        return Err(ctx.unsupported(format!("quantizing to {out_elem}")));
    }
    if small_float && ctx.attr_i("saturate", 1) == 0 {
        return Err(ctx.unsupported("saturate = 0"));
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
    // integers round to nearest even; 8-bit floats round when encoded
    let round = |q: f64| if small_float { q } else { q.round_ties_even() };
    // quantization saturates to the integer type's range
    let (lo, hi) = match out_elem {
        ElemType::Int4 => (-8.0, 7.0),
        ElemType::Uint4 => (0.0, 15.0),
        ElemType::Int2 => (-2.0, 1.0),
        ElemType::Uint2 => (0.0, 3.0),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    let out: Vec<f64> = xv.iter().zip(&idx).map(|(&v, &i)| (round(quotient(v, sv[i])) + zv[i]).clamp(lo, hi)).collect();
    // the integer conversion saturates to the type's range
    one(from_f64s(ctx, out_elem, x.shape.clone(), &out)?)
}

fn dequantize(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    if !is_quantized_int(x.elem()) && !is_small_float(x.elem()) {
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
    let elem =
        ctx.attr_opt_i("output_dtype").filter(|&c| c != 0).map_or(scale.elem(), |c| ElemType::from_code(c as i32));
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
    ctx.check_size(&[size])?;
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
    ctx.check_size(&shape)?;
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
    let stop: Vec<String> = ctx
        .attr_strings("stopwords")
        .unwrap_or_default()
        .iter()
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
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

fn bitcast(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let to = ElemType::from_code(ctx.attr_opt_i("to").ok_or_else(|| ctx.err("attribute 'to' is required"))? as i32);
    let (from_bits, to_bits) = (x.elem().bit_width(), to.bit_width());
    if from_bits != to_bits || from_bits.is_none_or(|b| b % 8 != 0) {
        return Err(ctx.unsupported(format!("bit cast from {} to {to}", x.elem())));
    }
    let bytes = x.data.to_le_bytes().ok_or_else(|| ctx.unsupported(format!("bit cast from {}", x.elem())))?;
    let data = Data::from_le_bytes(to, &bytes, x.len()).map_err(|e| ctx.unsupported(e))?;
    one(Tensor { shape: x.shape.clone(), data })
}

/// `t`'s values less its zero point (operand `zp`), the zero point read
/// per row (`row_axis`: a 1-D zero point of A in a matrix product holds one
/// value per row, so it broadcasts as a column) or by NumPy broadcasting.
fn centered(ctx: &NodeCtx<'_>, t: &Tensor, zp: Option<&Tensor>, per_row: bool) -> Result<Vec<f64>> {
    let mut v = t.to_f64s().ok_or_else(|| ctx.err("numeric operands required"))?;
    if let Some(z) = zp {
        let zv = z.to_f64s().ok_or_else(|| ctx.err("zero point"))?;
        let idx = scale_index(ctx, t, z, per_row)?;
        for (a, &i) in v.iter_mut().zip(&idx) {
            *a -= zv[i];
        }
    }
    Ok(v)
}

/// For each element of `t`, the element of the per-tensor, per-row or
/// broadcast parameter `p` it uses.
fn scale_index(ctx: &NodeCtx<'_>, t: &Tensor, p: &Tensor, per_row: bool) -> Result<Vec<usize>> {
    if p.len() == 1 {
        return Ok(vec![0; t.len()]);
    }
    let shape: Vec<usize> = if per_row && p.rank() == 1 { vec![p.len(), 1] } else { p.shape.clone() };
    if super::broadcast_shape(&[&t.shape, &shape]).as_deref() != Some(&t.shape[..]) {
        return Err(ctx.err(format!("parameter {:?} does not fit operand {:?}", p.shape, t.shape)));
    }
    Ok(super::broadcast_index(&t.shape, &shape))
}

fn matmul_integer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let av = centered(ctx, a, ctx.opt_input(2)?, true)?;
    let bv = centered(ctx, b, ctx.opt_input(3)?, false)?;
    let (out, shape) = super::reduce_linalg::matmul(ctx, a, b, &av, &bv)?;
    one(from_f64s(ctx, ElemType::Int32, shape, &out)?)
}

/// `real / scale + zero point`, rounded to nearest even and saturated to
/// the zero point's type.
fn requantize(
    ctx: &NodeCtx<'_>,
    real: &[f64],
    shape: Vec<usize>,
    scale: &Tensor,
    zp: Option<&Tensor>,
) -> Result<Tensor> {
    let s = floats(ctx, scale)?;
    let (z, elem) = match zp {
        Some(z) => (z.to_f64s().ok_or_else(|| ctx.err("zero point"))?, z.elem()),
        None => (vec![0.0], ElemType::Uint8),
    };
    if s.len() != 1 || z.len() != 1 {
        return Err(ctx.unsupported("per-axis output scales"));
    }
    let q: Vec<f64> = real.iter().map(|&r| (r / s[0]).round_ties_even() + z[0]).collect();
    from_f64s(ctx, elem, shape, &q)
}

fn qlinear_matmul(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, a_scale, b, b_scale, y_scale) = (ctx.input(0)?, ctx.input(1)?, ctx.input(3)?, ctx.input(4)?, ctx.input(6)?);
    let mut av = centered(ctx, a, ctx.opt_input(2)?, true)?;
    let mut bv = centered(ctx, b, ctx.opt_input(5)?, false)?;
    let (asv, bsv) = (floats(ctx, a_scale)?, floats(ctx, b_scale)?);
    for (x, &i) in av.iter_mut().zip(&scale_index(ctx, a, a_scale, true)?) {
        *x *= asv[i];
    }
    for (x, &i) in bv.iter_mut().zip(&scale_index(ctx, b, b_scale, false)?) {
        *x *= bsv[i];
    }
    let (real, shape) = super::reduce_linalg::matmul(ctx, a, b, &av, &bv)?;
    one(requantize(ctx, &real, shape, y_scale, ctx.opt_input(7)?)?)
}

/// A convolution weight's zero point or scale: one value, or one per output channel.
fn per_output_channel(ctx: &NodeCtx<'_>, w: &Tensor, p: &Tensor) -> Result<Vec<usize>> {
    let m = w.shape.first().copied().unwrap_or(0);
    let inner = w.len() / m.max(1);
    match p.len() {
        1 => Ok(vec![0; w.len()]),
        n if n == m => Ok((0..w.len()).map(|k| k / inner.max(1)).collect()),
        _ => Err(ctx.err(format!("{} values for {m} output channels", p.len()))),
    }
}

fn conv_integer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    let xv = centered(ctx, x, ctx.opt_input(2)?, false)?;
    let mut wv = w.to_f64s().ok_or_else(|| ctx.err("numeric weights required"))?;
    if let Some(z) = ctx.opt_input(3)? {
        let zv = z.to_f64s().ok_or_else(|| ctx.err("zero point"))?;
        for (a, &i) in wv.iter_mut().zip(&per_output_channel(ctx, w, z)?) {
            *a -= zv[i];
        }
    }
    let (out, shape) = super::nn::conv_core(ctx, &x.shape, &xv, &w.shape, &wv)?;
    one(from_f64s(ctx, ElemType::Int32, shape, &out)?)
}

fn qlinear_conv(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, x_scale, w, w_scale, y_scale) = (ctx.input(0)?, ctx.input(1)?, ctx.input(3)?, ctx.input(4)?, ctx.input(6)?);
    let xs = floats(ctx, x_scale)?;
    if xs.len() != 1 {
        return Err(ctx.err("x_scale must be one value"));
    }
    let xv: Vec<f64> = centered(ctx, x, ctx.opt_input(2)?, false)?.iter().map(|v| v * xs[0]).collect();
    let mut wv = w.to_f64s().ok_or_else(|| ctx.err("numeric weights required"))?;
    if let Some(z) = ctx.opt_input(5)? {
        let zv = z.to_f64s().ok_or_else(|| ctx.err("zero point"))?;
        for (a, &i) in wv.iter_mut().zip(&per_output_channel(ctx, w, z)?) {
            *a -= zv[i];
        }
    }
    let ws = floats(ctx, w_scale)?;
    for (a, &i) in wv.iter_mut().zip(&per_output_channel(ctx, w, w_scale)?) {
        *a *= ws[i];
    }
    let (mut real, shape) = super::nn::conv_core(ctx, &x.shape, &xv, &w.shape, &wv)?;
    if let Some(b) = ctx.opt_input(8)? {
        let bv = b.to_f64s().ok_or_else(|| ctx.err("bias"))?;
        let m = shape[1];
        let scaled: Vec<f64> =
            (0..m).map(|c| bv.get(c).copied().unwrap_or(0.0) * xs[0] * ws[if ws.len() == 1 { 0 } else { c }]).collect();
        super::nn::add_channel_bias(ctx, &mut real, &shape, &scaled)?;
    }
    one(requantize(ctx, &real, shape, y_scale, ctx.opt_input(7)?)?)
}

fn non_max_suppression(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["center_point_box"])?;
    let (boxes, scores) = (ctx.input(0)?, ctx.input(1)?);
    if boxes.rank() != 3
        || boxes.shape[2] != 4
        || scores.rank() != 3
        || scores.shape[0] != boxes.shape[0]
        || scores.shape[2] != boxes.shape[1]
    {
        return Err(ctx.err(format!("boxes {:?} and scores {:?} do not fit", boxes.shape, scores.shape)));
    }
    let first = |i: usize| -> Result<Option<f64>> {
        Ok(ctx.opt_input(i)?.and_then(|t| t.to_f64s()).and_then(|v| v.first().copied()))
    };
    let max_out = first(2)?.unwrap_or(0.0).max(0.0) as usize;
    let iou_threshold = first(3)?.unwrap_or(0.0);
    let score_threshold = first(4)?;
    let center = ctx.attr_i("center_point_box", 0) != 0;
    let bv = floats(ctx, boxes)?;
    let sv = floats(ctx, scores)?;
    let (nb, nc, n) = (scores.shape[0], scores.shape[1], scores.shape[2]);
    // corners (y1, x1, y2, x2) with y1 <= y2, x1 <= x2
    let corners = |b: usize, i: usize| -> [f64; 4] {
        let v = &bv[(b * n + i) * 4..][..4];
        if center {
            let (xc, yc, w, h) = (v[0], v[1], v[2], v[3]);
            [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
        } else {
            [v[0].min(v[2]), v[1].min(v[3]), v[0].max(v[2]), v[1].max(v[3])]
        }
    };
    // the intersection over union of two boxes given as (corners, area)
    let iou = |(a, area_a): &([f64; 4], f64), (c, area_c): &([f64; 4], f64)| -> f64 {
        let ih = (a[2].min(c[2]) - a[0].max(c[0])).max(0.0);
        let iw = (a[3].min(c[3]) - a[1].max(c[1])).max(0.0);
        let inter = ih * iw;
        let union = area_a + area_c - inter;
        if union <= 0.0 {
            0.0
        } else {
            inter / union
        }
    };
    let mut selected: Vec<i64> = Vec::new();
    for b in 0..nb {
        // each box's corners and area, once for every class (the kept ones held beside)
        let geometry: Vec<([f64; 4], f64)> = (0..n)
            .map(|i| {
                let k = corners(b, i);
                (k, (k[2] - k[0]) * (k[3] - k[1]))
            })
            .collect();
        for c in 0..nc {
            let score = |i: usize| sv[(b * nc + c) * n + i];
            let mut order: Vec<usize> = (0..n).filter(|&i| score_threshold.is_none_or(|t| score(i) > t)).collect();
            // by score, ties by index: a total order, so the unstable sort gives one result
            order.sort_unstable_by(|&p, &q| score(q).total_cmp(&score(p)).then(p.cmp(&q)));
            let mut kept = Kept::default();
            for i in order {
                if kept.len() >= max_out {
                    break;
                }
                let box_i = &geometry[i];
                if kept.overlapping(box_i, iou_threshold < 0.0).all(|k| iou(k, box_i) <= iou_threshold) {
                    kept.push(*box_i);
                    selected.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    let count = selected.len() / 3;
    one(Tensor { shape: vec![count, 3], data: Data::I64(selected) })
}

/// The boxes NonMaxSuppression has kept for one class, ordered by their
/// left edge, so that a candidate is held against the kept boxes whose
/// columns can meet its own: a box that does not meet it has an IoU of 0,
/// which suppresses nothing at a threshold of 0 or more. Detection exports
/// run one NMS over every class with each class's boxes shifted apart
/// (torchvision's `batched_nms`): tens of thousands of kept boxes, of which
/// a candidate meets a handful.
#[derive(Default)]
struct Kept {
    /// (left edge, box) by left edge.
    boxes: Vec<(f64, ([f64; 4], f64))>,
    /// The widest kept box's width.
    widest: f64,
    /// Whether a kept box has an edge that is not finite (then every kept
    /// box is a candidate's neighbour: NaN has no place in the order).
    unordered: bool,
}

impl Kept {
    fn len(&self) -> usize {
        self.boxes.len()
    }

    fn push(&mut self, b: ([f64; 4], f64)) {
        let left = b.0[1];
        self.unordered |= !left.is_finite() || !b.0[3].is_finite();
        let at = self.boxes.partition_point(|(l, _)| *l <= left);
        self.boxes.insert(at, (left, b));
        self.widest = self.widest.max(b.0[3] - b.0[1]);
    }

    /// The kept boxes that may meet `b` (all of them when `every`: a
    /// negative threshold, which boxes that do not meet exceed).
    fn overlapping<'k>(&'k self, b: &([f64; 4], f64), every: bool) -> impl Iterator<Item = &'k ([f64; 4], f64)> + 'k {
        let (from, to) =
            if every || self.unordered || !self.widest.is_finite() || !b.0[1].is_finite() || !b.0[3].is_finite() {
                (0, self.boxes.len())
            } else {
                // a kept box meets b's columns only if left < b.right and left + widest > b.left
                let (low, high) = (b.0[1] - self.widest, b.0[3]);
                (self.boxes.partition_point(|(l, _)| *l < low), self.boxes.partition_point(|(l, _)| *l <= high))
            };
        self.boxes[from..to.max(from)].iter().map(|(_, k)| k)
    }
}

/// `StringSplit`: Python's `str.split(delimiter, maxsplit)`; no delimiter
/// (or an empty one) splits at runs of whitespace. Rows are padded with
/// empty strings to the longest; the counts are the second output.
fn string_split(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["delimiter", "maxsplit"])?;
    let x = ctx.input(0)?;
    let Data::Str(v) = &x.data else { return Err(ctx.err("string input required")) };
    let delimiter = ctx.attr_s("delimiter").filter(|d| !d.is_empty());
    let maxsplit = ctx.attr_opt_i("maxsplit").filter(|&m| m >= 0).map(|m| m as usize);
    let parts: Vec<Vec<String>> = v
        .iter()
        .map(|s| {
            let s = String::from_utf8_lossy(s).into_owned();
            match &delimiter {
                Some(d) => match maxsplit {
                    Some(m) => s.splitn(m + 1, d.as_str()).map(str::to_string).collect(),
                    None => s.split(d.as_str()).map(str::to_string).collect(),
                },
                None => {
                    let mut out: Vec<String> = Vec::new();
                    let mut rest = s.trim_start();
                    while !rest.is_empty() {
                        if maxsplit.is_some_and(|m| out.len() == m) {
                            out.push(rest.trim_end().to_string());
                            break;
                        }
                        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                        out.push(rest[..end].to_string());
                        rest = rest[end..].trim_start();
                    }
                    out
                }
            }
        })
        .collect();
    let width = parts.iter().map(Vec::len).max().unwrap_or(0);
    let mut y = Vec::with_capacity(parts.len() * width);
    for p in &parts {
        for k in 0..width {
            y.push(p.get(k).cloned().unwrap_or_default().into_bytes());
        }
    }
    let mut shape = x.shape.clone();
    shape.push(width);
    let counts = parts.iter().map(|p| p.len() as i64).collect();
    Ok(vec![
        Some(Value::Tensor(Tensor { shape, data: Data::Str(y) })),
        Some(Value::Tensor(Tensor { shape: x.shape.clone(), data: Data::I64(counts) })),
    ])
}

/// `DFT`: the discrete Fourier transform along one axis of a real
/// (`..., 1`) or complex (`..., 2`) signal, computed by its definition.
fn dft(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["inverse", "onesided", "axis"])?;
    let x = ctx.input(0)?;
    let r = x.rank();
    if r < 2 || !(x.shape[r - 1] == 1 || x.shape[r - 1] == 2) {
        return Err(ctx.err("the last axis must hold 1 (real) or 2 (complex) values"));
    }
    let axis = if ctx.opset >= 20 {
        let a = ctx.opt_ints(2)?.and_then(|v| v.first().copied()).unwrap_or(-2);
        ctx.axis(a, r)?
    } else {
        ctx.axis(ctx.attr_i("axis", 1), r)?
    };
    if axis == r - 1 {
        return Err(ctx.err("the axis cannot be the complex axis"));
    }
    let inverse = ctx.attr_i("inverse", 0) != 0;
    let onesided = ctx.attr_i("onesided", 0) != 0;

    let v = floats(ctx, x)?;
    let comps = x.shape[r - 1];
    let len = x.shape[axis];
    let n = match ctx.opt_ints(1)? {
        Some(l) if !l.is_empty() => usize::try_from(l[0]).map_err(|_| ctx.err("negative dft_length"))?,
        _ => len,
    };
    if inverse && onesided {
        return irfft(ctx, x, &floats(ctx, x)?, axis, ctx.opt_ints(1)?.and_then(|l| l.first().copied()));
    }
    let m = if onesided { n / 2 + 1 } else { n };
    ctx.check_size(&[x.len() / len.max(1), m, 2])?;
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..r - 1].iter().product();
    let mut out = vec![0.0; outer * m * inner * 2];
    let sign = if inverse { 1.0 } else { -1.0 };
    let tau = 2.0 * std::f64::consts::PI;
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| ((o * len + j) * inner + i) * comps;
            for k in 0..m {
                let (mut re, mut im) = (0.0, 0.0);
                for j in 0..n.min(len) {
                    let (a, b) = (v[at(j)], if comps == 2 { v[at(j) + 1] } else { 0.0 });
                    let angle = sign * tau * ((j * k) % n.max(1)) as f64 / n as f64;
                    let (c, s) = (angle.cos(), angle.sin());
                    re += a * c - b * s;
                    im += a * s + b * c;
                }
                if inverse {
                    re /= n as f64;
                    im /= n as f64;
                }
                let p = ((o * m + k) * inner + i) * 2;
                out[p] = re;
                out[p + 1] = im;
            }
        }
    }
    let mut shape = x.shape.clone();
    shape[axis] = m;
    shape[r - 1] = 2;
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

/// `TfIdfVectorizer`: counts the pool's n-grams (with up to
/// `max_skip_count` items skipped between consecutive members) per row.
fn tfidf(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let items: Vec<Vec<u8>> = match &x.data {
        Data::Str(v) => v.clone(),
        other => other.to_i128s().ok_or_else(|| ctx.err("input"))?.iter().map(|i| i.to_string().into_bytes()).collect(),
    };
    let pool: Vec<Vec<u8>> = match (ctx.attr_ints("pool_int64s"), ctx.attr_strings("pool_strings")) {
        (Some(p), _) => p.iter().map(|i| i.to_string().into_bytes()).collect(),
        (None, Some(p)) => p,
        _ => return Err(ctx.err("a pool is required")),
    };
    let counts = ctx.attr_ints("ngram_counts").ok_or_else(|| ctx.err("ngram_counts is required"))?;
    let indexes = ctx.attr_ints("ngram_indexes").ok_or_else(|| ctx.err("ngram_indexes is required"))?;
    let (min_n, max_n) = (ctx.attr_i("min_gram_length", 1) as usize, ctx.attr_i("max_gram_length", 1) as usize);
    let max_skip = ctx.attr_i("max_skip_count", 0).max(0) as usize;
    let mode = ctx.attr_s("mode").unwrap_or_else(|| "TF".into());
    let weights = ctx.attr_floats("weights");
    // every pool n-gram: (its items, its output column)
    let mut grams: Vec<(Vec<&[u8]>, usize)> = Vec::new();
    let mut g = 0usize;
    for (level, &start) in counts.iter().enumerate() {
        let n = level + 1;
        let end = counts.get(level + 1).map_or(pool.len(), |&e| e as usize);
        let mut p = start as usize;
        while p + n <= end {
            let col = *indexes.get(g).ok_or_else(|| ctx.err("ngram_indexes is shorter than the pool"))?;
            grams.push((pool[p..p + n].iter().map(Vec::as_slice).collect(), col as usize));
            g += 1;
            p += n;
        }
    }
    let width = indexes.iter().copied().max().map_or(0, |m| m as usize + 1);
    let (rows, cols) = match x.rank() {
        1 => (1, x.shape[0]),
        2 => (x.shape[0], x.shape[1]),
        _ => return Err(ctx.err("input must have rank 1 or 2")),
    };
    let mut out = vec![0.0f64; rows * width];
    for r in 0..rows {
        let row = &items[r * cols..(r + 1) * cols];
        for start in 0..cols {
            for n in min_n.max(1)..=max_n {
                let skips = if n == 1 { 0 } else { max_skip };
                for skip in 0..=skips {
                    let step = skip + 1;
                    if start + (n - 1) * step >= cols {
                        continue;
                    }
                    let gram: Vec<&[u8]> = (0..n).map(|k| row[start + k * step].as_slice()).collect();
                    if let Some((_, col)) = grams.iter().find(|(p, _)| *p == gram) {
                        out[r * width + col] += 1.0;
                    }
                }
            }
        }
    }
    for (k, v) in out.iter_mut().enumerate() {
        let w = weights.as_ref().and_then(|w| {
            let col = k % width.max(1);
            grams.iter().position(|(_, c)| *c == col).and_then(|i| w.get(i)).map(|&f| f64::from(f))
        });
        let w = w.unwrap_or(1.0);
        *v = match mode.as_str() {
            "TF" => *v,
            "IDF" => f64::min(*v, 1.0) * w,
            "TFIDF" => *v * w,
            other => return Err(ctx.err(format!("mode '{other}'"))),
        };
    }
    let shape = if x.rank() == 1 { vec![width] } else { vec![rows, width] };
    one(from_f64s(ctx, ElemType::Float, shape, &out)?)
}

/// The optimizers of `ai.onnx.preview.training`: `Adagrad`, `Momentum` and
/// `Adam`, one update step for each of several tensors.
pub(super) fn training(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    let groups = match ctx.op() {
        "Adagrad" | "Momentum" => 3,
        "Adam" => 4,
        _ => return None,
    };
    Some(optimizer(ctx, groups))
}

fn optimizer(ctx: &NodeCtx<'_>, groups: usize) -> Result<Outs> {
    let scalar = |i: usize| -> Result<f64> {
        ctx.input(i)?
            .to_f64s()
            .and_then(|v| v.first().copied())
            .ok_or_else(|| ctx.err(format!("operand {i} must be a scalar")))
    };
    let (r, t) = (scalar(0)?, scalar(1)?);
    let rest = ctx
        .n_inputs()
        .checked_sub(2)
        .filter(|n| n % groups == 0)
        .ok_or_else(|| ctx.err("operands do not come in groups"))?;
    let n = rest / groups;
    let norm = f64::from(ctx.attr_f("norm_coefficient", 0.0));
    // per tensor: (updated X, updated states)
    let mut results: Vec<(Tensor, Vec<Tensor>)> = Vec::new();
    for k in 0..n {
        let x = ctx.input(2 + k)?;
        let xv = floats(ctx, x)?;
        let g = floats(ctx, ctx.input(2 + n + k)?)?;
        let states: Vec<Vec<f64>> =
            (2..groups).map(|s| floats(ctx, ctx.input(2 + s * n + k)?)).collect::<Result<_>>()?;
        if g.len() != xv.len() || states.iter().any(|s| s.len() != xv.len()) {
            return Err(ctx.err("X, G and the states differ in size"));
        }
        let greg: Vec<f64> = xv.iter().zip(&g).map(|(a, b)| norm * a + b).collect();
        let (new_x, new_states): (Vec<f64>, Vec<Vec<f64>>) = match ctx.op() {
            "Adagrad" => {
                let decay = f64::from(ctx.attr_f("decay_factor", 0.0));
                let eps = f64::from(ctx.attr_f("epsilon", 0.0));
                let rate = r / (1.0 + t * decay);
                let h: Vec<f64> = states[0].iter().zip(&greg).map(|(h, g)| h + g * g).collect();
                let nx = (0..xv.len()).map(|i| xv[i] - rate * greg[i] / (h[i].sqrt() + eps)).collect();
                (nx, vec![h])
            }
            "Momentum" => {
                let alpha = f64::from(ctx.attr_f("alpha", 0.0));
                let beta = f64::from(ctx.attr_f("beta", 0.0));
                let beta = if t > 0.0 { beta } else { 1.0 };
                let v: Vec<f64> = states[0].iter().zip(&greg).map(|(v, g)| alpha * v + beta * g).collect();
                let nesterov = match ctx.attr_s("mode").as_deref().unwrap_or("standard") {
                    "standard" => false,
                    "nesterov" => true,
                    other => return Err(ctx.err(format!("mode '{other}'"))),
                };
                let nx = (0..xv.len())
                    .map(|i| if nesterov { xv[i] - r * (greg[i] + alpha * v[i]) } else { xv[i] - r * v[i] })
                    .collect();
                (nx, vec![v])
            }
            _ => {
                let alpha = f64::from(ctx.attr_f("alpha", 0.9));
                let beta = f64::from(ctx.attr_f("beta", 0.999));
                let eps = f64::from(ctx.attr_f("epsilon", 1e-6));
                let post = f64::from(ctx.attr_f("norm_coefficient_post", 0.0));
                let v: Vec<f64> = states[0].iter().zip(&greg).map(|(v, g)| alpha * v + (1.0 - alpha) * g).collect();
                let h: Vec<f64> = states[1].iter().zip(&greg).map(|(h, g)| beta * h + (1.0 - beta) * g * g).collect();
                let rate = if t > 0.0 { r * (1.0 - beta.powf(t)).sqrt() / (1.0 - alpha.powf(t)) } else { r };
                let nx = (0..xv.len()).map(|i| (1.0 - post) * (xv[i] - rate * v[i] / (h[i].sqrt() + eps))).collect();
                (nx, vec![v, h])
            }
        };
        let tensor = |v: &[f64]| from_f64s(ctx, x.elem(), x.shape.clone(), v);
        let states = new_states.iter().map(|s| tensor(s)).collect::<Result<_>>()?;
        results.push((tensor(&new_x)?, states));
    }
    // outputs: every X, then every first state, then every second state
    let mut outs: Outs = results.iter().map(|(x, _)| Some(Value::Tensor(x.clone()))).collect();
    for s in 0..groups - 2 {
        outs.extend(results.iter().map(|(_, st)| Some(Value::Tensor(st[s].clone()))));
    }
    Ok(outs)
}

/// `STFT`: the DFT of each frame of `frame_length` samples taken every
/// `frame_step`, multiplied by the window when given.
fn stft(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["onesided"])?;
    let x = ctx.input(0)?;
    if x.rank() != 3 || !(x.shape[2] == 1 || x.shape[2] == 2) {
        return Err(ctx.err("the signal must be (batch, length, 1 or 2)"));
    }
    let step = ctx.opt_ints(1)?.and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("frame_step is required"))?;
    let window = match ctx.opt_input(2)? {
        Some(w) => Some(floats(ctx, w)?),
        None => None,
    };
    let fl = match (ctx.opt_ints(3)?.and_then(|v| v.first().copied()), &window) {
        (Some(l), _) => l,
        (None, Some(w)) => w.len() as i64,
        (None, None) => return Err(ctx.err("frame_length or a window is required")),
    };
    let (b, len, comps) = (x.shape[0], x.shape[1], x.shape[2]);
    if step <= 0 || fl <= 0 || fl as usize > len || window.as_ref().is_some_and(|w| w.len() != fl as usize) {
        return Err(ctx.err("frame_step, frame_length and the window do not fit the signal"));
    }
    let (step, fl) = (step as usize, fl as usize);
    let frames = (len - fl) / step + 1;
    let onesided = ctx.attr_i("onesided", 1) != 0;
    let bins = if onesided { fl / 2 + 1 } else { fl };
    ctx.check_size(&[b, frames, bins, 2])?;
    let v = floats(ctx, x)?;
    let tau = 2.0 * std::f64::consts::PI;
    let mut out = vec![0.0; b * frames * bins * 2];
    for bi in 0..b {
        for f in 0..frames {
            for k in 0..bins {
                let (mut re, mut im) = (0.0, 0.0);
                for j in 0..fl {
                    let at = (bi * len + f * step + j) * comps;
                    let w = window.as_ref().map_or(1.0, |w| w[j]);
                    let (a, c) = (v[at] * w, if comps == 2 { v[at + 1] * w } else { 0.0 });
                    let angle = -tau * ((j * k) % fl) as f64 / fl as f64;
                    re += a * angle.cos() - c * angle.sin();
                    im += a * angle.sin() + c * angle.cos();
                }
                let p = ((bi * frames + f) * bins + k) * 2;
                out[p] = re;
                out[p + 1] = im;
            }
        }
    }
    one(from_f64s(ctx, x.elem(), vec![b, frames, bins, 2], &out)?)
}

/// The inverse of a one-sided spectrum (`onesided` with `inverse`): the
/// missing half is the conjugate mirror of the given one, and the output is
/// the real signal (last axis 1) of length `dft_length`, else 2·(m−1).
fn irfft(ctx: &NodeCtx<'_>, x: &Tensor, v: &[f64], axis: usize, dft_length: Option<i64>) -> Result<Outs> {
    let r = x.rank();
    let comps = x.shape[r - 1];
    let m = x.shape[axis];
    let n = match dft_length {
        Some(l) => usize::try_from(l).map_err(|_| ctx.err("negative dft_length"))?,
        None => 2 * m.saturating_sub(1),
    };
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..r - 1].iter().product();
    let mut shape = x.shape.clone();
    shape[axis] = n;
    shape[r - 1] = 1;
    ctx.check_size(&shape)?;
    let tau = 2.0 * std::f64::consts::PI;
    let mut out = vec![0.0; outer * n * inner];
    for o in 0..outer {
        for i in 0..inner {
            // the spectrum's value at bin k, mirrored past the given half
            let bin = |k: usize| -> (f64, f64) {
                let (kk, conj) = if k < m { (k, false) } else { (n - k, true) };
                if kk >= m {
                    return (0.0, 0.0);
                }
                let at = ((o * m + kk) * inner + i) * comps;
                let im = if comps == 2 { v[at + 1] } else { 0.0 };
                (v[at], if conj { -im } else { im })
            };
            for t in 0..n {
                let mut re = 0.0;
                for k in 0..n {
                    let (a, b) = bin(k);
                    let angle = tau * ((k * t) % n) as f64 / n as f64;
                    re += a * angle.cos() - b * angle.sin();
                }
                out[(o * n + t) * inner + i] = re / n as f64;
            }
        }
    }
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

/// `RegexFullMatch`: whether each string matches the RE2 pattern entirely
/// (the `regex` crate implements RE2's syntax).
fn regex_full_match(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["pattern"])?;
    let x = ctx.input(0)?;
    let Data::Str(v) = &x.data else { return Err(ctx.err("string input required")) };
    let pattern = ctx.attr_s("pattern").ok_or_else(|| ctx.err("pattern is required"))?;
    let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| ctx.err(format!("pattern: {e}")))?;
    let out = v.iter().map(|s| re.is_match(&String::from_utf8_lossy(s))).collect();
    one(Tensor { shape: x.shape.clone(), data: Data::Bool(out) })
}

/// `MelWeightMatrix`: triangular filters, evenly spaced on the mel scale
/// between the edge frequencies, over the one-sided DFT bins (the bin edges
/// as the ONNX reference computes them, spacing included).
fn mel_weight_matrix(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["output_datatype"])?;
    let scalar = |i: usize| -> Result<f64> {
        ctx.input(i)?
            .to_f64s()
            .and_then(|v| v.first().copied())
            .ok_or_else(|| ctx.err(format!("operand {i} must be a scalar")))
    };
    let (bins, dft, rate, lo, hi) = (scalar(0)?, scalar(1)?, scalar(2)?, scalar(3)?, scalar(4)?);
    if bins < 0.0 || dft < 0.0 || rate <= 0.0 {
        return Err(ctx.err("num_mel_bins and dft_length must be non-negative, sample_rate positive"));
    }
    let (bins, dft) = (bins as usize, dft as i64);
    let spec_bins = (dft / 2 + 1) as usize;
    ctx.check_size(&[spec_bins, bins])?;
    let mel = |f: f64| 2595.0 * (1.0 + f / 700.0).log10();
    let (lo_mel, hi_mel) = (mel(lo), mel(hi));
    let step = (hi_mel - lo_mel) / (bins + 2) as f64;
    let edges: Vec<i64> = (0..bins + 2)
        .map(|k| {
            let hz = 700.0 * (10f64.powf((k as f64 * step + lo_mel) / 2595.0) - 1.0);
            (((dft + 1) as f64 * hz) / rate).floor() as i64
        })
        .collect();
    let mut out = vec![0.0; spec_bins * bins];
    let mut set = |j: i64, i: usize, v: f64| -> Result<()> {
        let j = usize::try_from(j)
            .ok()
            .filter(|&j| j < spec_bins)
            .ok_or_else(|| ctx.err("a filter edge lies past the spectrum"))?;
        out[j * bins + i] = v;
        Ok(())
    };
    for i in 0..bins {
        let (l, c, h) = (edges[i], edges[i + 1], edges[i + 2]);
        if c == l {
            set(c, i, 1.0)?;
        } else {
            for j in l..=c {
                set(j, i, (j - l) as f64 / (c - l) as f64)?;
            }
        }
        if h > c {
            for j in c..h {
                set(j, i, (h - j) as f64 / (h - c) as f64)?;
            }
        }
    }
    let elem = ElemType::from_code(ctx.attr_i("output_datatype", 1) as i32);
    one(from_f64s(ctx, elem, vec![spec_bins, bins], &out)?)
}

#[cfg(test)]
mod tests {
    use super::Kept;

    /// Corners and area of a box at (y, x) of size (h, w).
    fn boxed(y: f64, x: f64, h: f64, w: f64) -> ([f64; 4], f64) {
        ([y, x, y + h, x + w], h * w)
    }

    #[test]
    fn kept_boxes_that_meet_a_candidate_are_all_among_its_neighbours() {
        // clusters of boxes of every width, some classes shifted apart as batched NMS shifts them
        let mut seed = 12_345u64;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut kept = Kept::default();
        let mut all = Vec::new();
        for i in 0..400 {
            let shift = (i % 5) as f64 * 1000.0;
            let b = boxed(
                next() * 300.0,
                shift + next() * 300.0,
                1.0 + next() * 80.0,
                1.0 + next() * if i % 50 == 0 { 400.0 } else { 60.0 },
            );
            let meets: Vec<usize> = (0..all.len())
                .filter(|&j| {
                    let (a, c): (&([f64; 4], f64), &([f64; 4], f64)) = (&all[j], &b);
                    a.0[3].min(c.0[3]) > a.0[1].max(c.0[1]) && a.0[2].min(c.0[2]) > a.0[0].max(c.0[0])
                })
                .collect();
            let near: Vec<[f64; 4]> = kept.overlapping(&b, false).map(|k| k.0).collect();
            for j in meets {
                assert!(near.contains(&all[j].0), "box {i} meets kept box {j} but is not held against it");
            }
            assert_eq!(kept.overlapping(&b, true).count(), all.len(), "a negative threshold holds every box");
            kept.push(b);
            all.push(b);
        }
        // and the neighbourhoods are small: the classes lie apart
        let probe = boxed(100.0, 2100.0, 10.0, 10.0);
        assert!(kept.overlapping(&probe, false).count() < all.len() / 3);
    }
}
