//! Quantization: `QuantizeLinear`, `DequantizeLinear` (per-tensor,
//! per-axis and blocked, with `output_dtype`) and `DynamicQuantizeLinear`.
//! The quantized or dequantized output has the input's shape; its element
//! type comes from the zero point, the scale or `output_dtype`.

use super::{same_shape, set_dtype_opt};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "QuantizeLinear", 10, quantize);
    t.add(ONNX, "DequantizeLinear", 10, dequantize);
    t.add(ONNX, "DynamicQuantizeLinear", 11, dynamic_quantize);
}

/// The `output_dtype` attribute (0 or absent: not given), which exists from
/// opset `since` on. `Err(())` after reporting a negative or oversized code.
fn output_dtype(ctx: &mut OpCtx, since: i64) -> Result<Option<ElemType>, ()> {
    if ctx.version() < since {
        return Ok(None);
    }
    let code = ctx.attr_int("output_dtype").unwrap_or(0);
    match i32::try_from(code) {
        Ok(0) => Ok(None),
        Ok(c) if c > 0 => Ok(Some(ElemType::from_code(c))),
        _ => {
            ctx.invalid(format!("attribute output_dtype must be a data type code, got {code}"));
            Err(())
        }
    }
}

/// Checks the quantization parameters (input 1, the scale) against the
/// input: per-axis scales (rank 1, a known size above 1) have the input's
/// `axis` size; blocked ones (`block_size > 0`) have the input's rank.
/// A rank-1 input is quantized per tensor whatever `axis` says. Returns
/// false after reporting an invalid attribute.
fn params_ok(ctx: &mut OpCtx) -> bool {
    let block = ctx.attr_int("block_size").unwrap_or(0);
    if block < 0 {
        ctx.invalid(format!("attribute block_size must not be negative, got {block}"));
        return false;
    }
    let (Some(x), Some(scale)) = (ctx.dims(0), ctx.dims(1)) else { return true };
    if scale.is_empty() || x.len() < 2 {
        return true;
    }
    let axis = ctx.attr_int("axis").unwrap_or(1);
    if block > 0 {
        if scale.len() != x.len() {
            ctx.rank_conflict(
                1,
                format!("blocked quantization needs a scale of the input's rank {}, got rank {}", x.len(), scale.len()),
            );
            return false;
        }
        return ctx.axis(axis, x.len(), "axis").is_some();
    }
    let per_axis = scale.len() == 1 && ctx.size_of(&scale[0]).is_some_and(|n| n > 1);
    if !per_axis {
        return true;
    }
    let Some(a) = ctx.axis(axis, x.len(), "axis") else { return false };
    ctx.eq_dims_at(scale[0].clone(), x[a].clone(), "input 1", 0, "a per-axis scale has the size of the input's axis");
    true
}

/// `QuantizeLinear`: the input's shape; the type of `output_dtype` (opset
/// 21+), else the zero point's, else uint8.
fn quantize(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(attr) = output_dtype(ctx, 21) else { return Ok(()) };
    if !params_ok(ctx) {
        return Ok(());
    }
    same_shape(ctx, 0, 0);
    let zero_point = ctx.has_input(2).then(|| ctx.dtype(2));
    let t = match (attr, zero_point) {
        (Some(t), Some(Some(z))) if t != z => {
            ctx.dtype_mismatch(format!("output_dtype is {t} but the zero point is {z}"));
            Some(t)
        }
        (Some(t), _) => Some(t),
        (None, Some(z)) => z,
        (None, None) => Some(ElemType::Uint8),
    };
    set_dtype_opt(ctx, 0, t);
    Ok(())
}

/// `DequantizeLinear`: the input's shape; float before opset 19, then the
/// scale's type (or `output_dtype`, from opset 23).
fn dequantize(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(attr) = output_dtype(ctx, 23) else { return Ok(()) };
    if !params_ok(ctx) {
        return Ok(());
    }
    same_shape(ctx, 0, 0);
    if ctx.has_input(2) {
        ctx.same_dtype(&[0, 2]);
    }
    let t = if ctx.version() < 19 { Some(ElemType::Float) } else { attr.or(ctx.dtype(1)) };
    set_dtype_opt(ctx, 0, t);
    Ok(())
}

/// `DynamicQuantizeLinear`: y (uint8) has x's shape; the scale (float) and
/// zero point (uint8) are scalars.
fn dynamic_quantize(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    ctx.set_dtype(0, ElemType::Uint8);
    for (j, t) in [(1, ElemType::Float), (2, ElemType::Uint8)] {
        if ctx.has_output(j) {
            ctx.set_dims(j, Vec::new());
            ctx.set_dtype(j, t);
        }
    }
    Ok(())
}
