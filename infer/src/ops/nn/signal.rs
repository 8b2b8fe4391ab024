//! Signal operators: `DFT` (opset 17: `axis` an attribute; opset 20: an
//! input), `STFT`, the `HannWindow`/`HammingWindow`/`BlackmanWindow`
//! generators and `MelWeightMatrix`.

use super::{affine, attr_dtype, dtype_from, expr_dim, scalar_elem, scalar_int, settle, size_expr};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, SizeExpr};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "DFT", 17, dft);
    t.add(ONNX, "STFT", 17, stft);
    t.add_all(ONNX, &["HannWindow", "HammingWindow", "BlackmanWindow"], 17, window);
    t.add(ONNX, "MelWeightMatrix", 17, mel_weight_matrix);
}

/// `⌊d / 2⌋ + 1`, the one-sided spectrum's length (an unknown unless `d` is a size).
fn half_spectrum(ctx: &mut OpCtx, d: &DimTerm) -> DimTerm {
    let e = size_expr(ctx, d).and_then(|e| e.floor_div(2)).and_then(|e| e.add(&SizeExpr::constant(1)));
    match e.and_then(|e| expr_dim(ctx, e)) {
        Some(d) => d,
        None => ctx.unknown_dim(),
    }
}

/// `DFT`: the input's shape with the transformed axis resized and the last
/// axis 2 (complex), or 1 for the inverse one-sided transform (IRFFT).
fn dft(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = dft_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `DFT`'s output shape.
fn dft_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    let r = x.len();
    if r < 2 {
        ctx.rank_conflict(0, format!("the input has rank {r}; it needs a signal axis and the complex axis"));
        return None;
    }
    let inverse = ctx.attr_int("inverse").unwrap_or(0) != 0;
    let onesided = ctx.attr_int("onesided").unwrap_or(0) != 0;
    let raw_axis = if ctx.version() >= 20 {
        if ctx.has_input(2) {
            scalar_int(ctx, 2)
        } else {
            Some(-2)
        }
    } else {
        Some(ctx.attr_int("axis").unwrap_or(1))
    };
    let last = ctx.known(if onesided && inverse { 1 } else { 2 });
    let Some(raw_axis) = raw_axis else {
        let mut dims: Vec<DimTerm> = (0..r - 1).map(|_| ctx.unknown_dim()).collect();
        dims.push(last);
        ctx.set_dims(0, dims);
        return Some(());
    };
    let axis = if raw_axis < 0 { raw_axis + r as i64 } else { raw_axis };
    if axis < 0 || axis > r as i64 - 2 {
        ctx.invalid(format!("axis {raw_axis} is out of range for rank {r}: the last axis holds the complex parts"));
        return None;
    }
    let axis = axis as usize;
    let length = if ctx.has_input(1) {
        match scalar_elem(ctx, 1) {
            Some(e) if e.as_int().is_some_and(|n| n < 1) => {
                ctx.invalid(format!("dft_length is {}; it must be positive", e.as_int().unwrap_or(0)));
                return None;
            }
            Some(e) => ctx.dim_of_elem(&e),
            None => ctx.unknown_dim(),
        }
    } else if onesided && inverse {
        let e = size_expr(ctx, &x[axis]).and_then(|e| e.add(&SizeExpr::constant(-1))?.mul(&SizeExpr::constant(2)));
        match e.and_then(|e| expr_dim(ctx, e)) {
            Some(d) => d,
            None => ctx.unknown_dim(),
        }
    } else {
        x[axis].clone()
    };
    let mut dims = x.to_vec();
    dims[axis] = if onesided && !inverse { half_spectrum(ctx, &length) } else { length };
    dims[r - 1] = last;
    ctx.set_dims(0, dims);
    Some(())
}

/// `STFT`: `[batch, frames, bins, 2]` with `frames = ⌊(len − frame_length) / step⌋ + 1`.
fn stft(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = stft_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `STFT`'s output shape.
fn stft_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if x.len() != 3 {
        ctx.rank_conflict(0, format!("the signal has rank {}; it must be [batch, length, 1 or 2]", x.len()));
        return None;
    }
    let onesided = ctx.attr_int("onesided").unwrap_or(1) != 0;
    let window_len = if ctx.has_input(2) {
        match ctx.dims(2).as_deref() {
            Some([d]) => Some(d.clone()),
            Some(d) => {
                ctx.rank_conflict(2, format!("the window has rank {}; it must be a vector", d.len()));
                return None;
            }
            None => None,
        }
    } else {
        None
    };
    let frame_length = if ctx.has_input(3) {
        let d = match scalar_elem(ctx, 3) {
            Some(e) => ctx.dim_of_elem(&e),
            None => ctx.unknown_dim(),
        };
        if let Some(w) = &window_len {
            ctx.eq_dims(w.clone(), d.clone(), "input 2", "the window's length is frame_length");
        }
        d
    } else {
        match window_len {
            Some(w) => w,
            None if ctx.has_input(2) => ctx.unknown_dim(),
            None => x[1].clone(),
        }
    };
    let frames = match scalar_int(ctx, 1) {
        Some(step) if step >= 1 => affine(ctx, 1, &x[1], frame_length.clone(), 0, step as u64, 1, false),
        Some(step) => {
            ctx.invalid(format!("frame_step is {step}; it must be positive"));
            return None;
        }
        None => ctx.unknown_dim(),
    };
    let bins = if onesided { half_spectrum(ctx, &frame_length) } else { frame_length };
    let two = ctx.known(2);
    ctx.set_dims(0, vec![x[0].clone(), frames, bins, two]);
    Some(())
}

/// A window generator: `[size]` of `output_datatype` (default float).
fn window(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(t) = attr_dtype(ctx, "output_datatype", ElemType::Float) else { return settle(ctx, false) };
    ctx.set_dtype(0, t);
    let size = match scalar_elem(ctx, 0) {
        Some(e) => ctx.dim_of_elem(&e),
        None => ctx.unknown_dim(),
    };
    ctx.set_dims(0, vec![size]);
    Ok(())
}

/// `MelWeightMatrix`: `[⌊dft_length / 2⌋ + 1, num_mel_bins]` of `output_datatype`.
fn mel_weight_matrix(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(t) = attr_dtype(ctx, "output_datatype", ElemType::Float) else { return settle(ctx, false) };
    ctx.set_dtype(0, t);
    let bins = match scalar_elem(ctx, 0) {
        Some(e) => ctx.dim_of_elem(&e),
        None => ctx.unknown_dim(),
    };
    let length = match scalar_elem(ctx, 1) {
        Some(e) => ctx.dim_of_elem(&e),
        None => ctx.unknown_dim(),
    };
    let spectrum = half_spectrum(ctx, &length);
    ctx.set_dims(0, vec![spectrum, bins]);
    Ok(())
}
