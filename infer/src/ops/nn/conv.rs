//! Convolutions: `Conv`, `ConvInteger`, `QLinearConv`, `DeformConv` (output
//! sizes as sliding windows, channel checks against the weight) and
//! `ConvTranspose` (output sizes from the transposed-window formula, or
//! `output_shape`).

use super::{
    check_min_rank, divided_dim, expr_dim, int_dim, kernel_shape_attr, read_auto_pad, read_pads, read_window,
    scaled_dim, settle, size_expr, AutoPad,
};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm, SizeExpr};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Conv", 1, conv);
    t.add(ONNX, "ConvInteger", 10, conv_integer);
    t.add(ONNX, "QLinearConv", 10, qlinear_conv);
    t.add(ONNX, "DeformConv", 19, deform_conv);
    t.add(ONNX, "ConvTranspose", 1, conv_transpose);
}

/// Where a convolution's operands sit among the node's inputs.
struct Operands {
    x: usize,
    w: usize,
    bias: Option<usize>,
}

/// `Conv`: `[N, M, out…]` of the type shared by X, W and B.
fn conv(ctx: &mut OpCtx) -> Result<(), Defer> {
    // the type holds whatever X's rank turns out to be
    if let Some(t) = ctx.same_dtype(&[0, 1, 2]) {
        ctx.set_dtype(0, t);
    }
    let x = ctx.need_dims(0)?;
    let w = ctx.dims(1);
    let stated = conv_shape(ctx, &Operands { x: 0, w: 1, bias: Some(2) }, x, w, true).is_some();
    settle(ctx, stated)
}

/// `ConvInteger`: like `Conv` without bias, an int32 output.
fn conv_integer(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.set_dtype(0, ElemType::Int32);
    let x = ctx.need_dims(0)?;
    let w = ctx.dims(1);
    let stated = conv_shape(ctx, &Operands { x: 0, w: 1, bias: None }, x, w, true).is_some();
    settle(ctx, stated)
}

/// `QLinearConv`: x is input 0, w input 3, the bias input 8; the output has
/// the type of `y_zero_point`.
fn qlinear_conv(ctx: &mut OpCtx) -> Result<(), Defer> {
    let x = ctx.need_dims(0)?;
    let w = ctx.dims(3);
    let stated = conv_shape(ctx, &Operands { x: 0, w: 3, bias: Some(8) }, x, w, true).is_some();
    ctx.same_dtype(&[0, 2]);
    ctx.same_dtype(&[3, 5]);
    if let Some(t) = ctx.dtype(7) {
        ctx.set_dtype(0, t);
    }
    settle(ctx, stated)
}

/// `DeformConv`: the window sizes, which the offset's spatial axes repeat.
fn deform_conv(ctx: &mut OpCtx) -> Result<(), Defer> {
    let x = ctx.need_dims(0)?;
    let w = ctx.dims(1);
    let dims = conv_shape(ctx, &Operands { x: 0, w: 1, bias: Some(3) }, x, w, false);
    let stated = dims.is_some();
    if let Some(dims) = dims {
        if let Some(offset) = ctx.dims(2) {
            if offset.len() == dims.len() {
                for (i, (o, d)) in offset.iter().zip(&dims).enumerate().skip(2) {
                    let why = format!("axis {i} of the offset is the output's spatial size");
                    ctx.eq_dims(o.clone(), d.clone(), "input 2", why);
                }
            }
        }
    }
    if let Some(t) = ctx.same_dtype(&[0, 1, 2, 3, 4]) {
        ctx.set_dtype(0, t);
    }
    settle(ctx, stated)
}

/// States a forward convolution's output shape `[N, M, out…]` and checks
/// channels and bias; returns the output dims (`None` when invalid).
fn conv_shape(
    ctx: &mut OpCtx,
    ops: &Operands,
    x: Vec<DimTerm>,
    w: Option<Vec<DimTerm>>,
    auto_pad: bool,
) -> Option<Vec<DimTerm>> {
    if !check_min_rank(ctx, ops.x, x.len(), 2, "X") {
        return None;
    }
    let n = x.len() - 2;
    if let Some(wd) = &w {
        if wd.len() != x.len() {
            ctx.rank_conflict(
                1,
                format!(
                    "the weight (input {}) has rank {} but the input has rank {}; they must match",
                    ops.w,
                    wd.len(),
                    x.len()
                ),
            );
            return None;
        }
    }
    let group = group_attr(ctx)?;
    let kernel = kernel_of(ctx, ops.w, n, w.as_deref())?;
    if !auto_pad && ctx.attr("auto_pad").is_some() {
        ctx.invalid("DeformConv has no auto_pad attribute");
        return None;
    }
    let mut dims = vec![x[0].clone()];
    match &w {
        Some(wd) => {
            check_conv_channels(ctx, &x[1], &wd[1], group, ops.w);
            dims.push(wd[0].clone());
            if let Some(b) = ops.bias.filter(|&b| ctx.has_input(b)) {
                let row = ctx.in_row(b)?;
                let why = "the bias holds one value per output channel (axis 0 of the weight)";
                ctx.eq_rows(row, RowTerm::closed(vec![wd[0].clone()]), &format!("input {b}"), why);
            }
        }
        None => dims.push(ctx.unknown_dim()),
    }
    match kernel {
        Some(k) => {
            let window = read_window(ctx, k, false)?;
            for (i, input) in x[2..].iter().enumerate() {
                dims.push(window.out_dim(ctx, i, input));
            }
        }
        None => {
            for _ in 0..n {
                dims.push(ctx.unknown_dim());
            }
        }
    }
    ctx.set_dims(0, dims.clone());
    Some(dims)
}

/// The `group` attribute (default 1, at least 1).
fn group_attr(ctx: &mut OpCtx) -> Option<i64> {
    let group = ctx.attr_int("group").unwrap_or(1);
    if group < 1 {
        ctx.invalid(format!("attribute group is {group}; it must be at least 1"));
        return None;
    }
    Some(group)
}

/// The kernel sizes: `kernel_shape`, tied to the weight's spatial axes when
/// both are known; `Some(None)` when neither says.
fn kernel_of(ctx: &mut OpCtx, w_input: usize, n: usize, w: Option<&[DimTerm]>) -> Option<Option<Vec<DimTerm>>> {
    let attr = kernel_shape_attr(ctx, n)?;
    Some(match (attr, w) {
        (Some(k), Some(wd)) => {
            for (i, (a, b)) in k.iter().zip(&wd[2..]).enumerate() {
                let why = format!("axis {} of the weight is kernel_shape[{i}]", i + 2);
                ctx.eq_dims(b.clone(), a.clone(), &format!("input {w_input}"), why);
            }
            Some(k)
        }
        (Some(k), None) => Some(k),
        (None, Some(wd)) => Some(wd[2..].to_vec()),
        (None, None) => None,
    })
}

/// Input channels = weight channels × group.
fn check_conv_channels(ctx: &mut OpCtx, c: &DimTerm, wc: &DimTerm, group: i64, w_input: usize) {
    let operand = format!("input {w_input}");
    if group == 1 {
        ctx.eq_dims_at(wc.clone(), c.clone(), &operand, 1, "the weight's axis 1 equals the input's channels (axis 1)");
        return;
    }
    let why = format!("the weight's axis 1 times group {group} equals the input's channels (axis 1)");
    if size_expr(ctx, wc).is_some() {
        let total = scaled_dim(ctx, wc, group);
        ctx.eq_dims(total, c.clone(), &operand, why);
    } else if let Some(e) = size_expr(ctx, c) {
        if e.div_exact(&SizeExpr::constant(group)).is_some() {
            let part = divided_dim(ctx, c, group);
            ctx.eq_dims_at(wc.clone(), part, &operand, 1, why);
        } else if let Some(n) = e.as_constant() {
            ctx.invalid(format!("the input has {n} channels, which group {group} does not divide"));
        }
    }
}

/// `ConvTranspose`: `[N, W₁·group, out…]` with `out = stride·(in − 1) +
/// output_padding + dilation·(k − 1) + 1 − pads`, or `output_shape`, or
/// `in·stride` for SAME padding.
fn conv_transpose(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(t) = ctx.same_dtype(&[0, 1, 2]) {
        ctx.set_dtype(0, t);
    }
    let x = ctx.need_dims(0)?;
    let w = ctx.dims(1);
    let dims = conv_transpose_dims(ctx, &x, w.as_deref());
    let stated = dims.is_some();
    if let Some(dims) = dims {
        ctx.set_dims(0, dims);
    }
    settle(ctx, stated)
}

/// The output dims of a `ConvTranspose` (`None` when an attribute is invalid).
fn conv_transpose_dims(ctx: &mut OpCtx, x: &[DimTerm], w: Option<&[DimTerm]>) -> Option<Vec<DimTerm>> {
    if !check_min_rank(ctx, 0, x.len(), 2, "X") {
        return None;
    }
    let n = x.len() - 2;
    if let Some(wd) = w {
        if wd.len() != x.len() {
            ctx.rank_conflict(
                1,
                format!("the weight has rank {} but the input has rank {}; they must match", wd.len(), x.len()),
            );
            return None;
        }
    }
    let group = group_attr(ctx)?;
    let kernel = kernel_of(ctx, 1, n, w)?;
    let strides = super::positive_ints(ctx, "strides", n, 1)?;
    let dilations = super::positive_ints(ctx, "dilations", n, 1)?;
    let pads = read_pads(ctx, n)?;
    let auto_pad = read_auto_pad(ctx)?;
    let output_padding = ctx.attr_ints("output_padding").unwrap_or_else(|| vec![0; n]);
    if output_padding.len() != n {
        ctx.invalid(format!("attribute output_padding has {} values for {n} spatial axes", output_padding.len()));
        return None;
    }
    let output_shape = ctx.attr_ints("output_shape");
    if let Some(s) = &output_shape {
        if s.len() != n {
            ctx.invalid(format!("attribute output_shape has {} values for {n} spatial axes", s.len()));
            return None;
        }
    }
    let mut dims = vec![x[0].clone()];
    match w {
        Some(wd) => {
            ctx.eq_dims_at(
                wd[0].clone(),
                x[1].clone(),
                "input 1",
                0,
                "the weight's axis 0 equals the input's channels",
            );
            let m = scaled_dim(ctx, &wd[1], group);
            dims.push(m.clone());
            if ctx.has_input(2) {
                let row = ctx.in_row(2)?;
                let why = "the bias holds one value per output channel";
                ctx.eq_rows(row, RowTerm::closed(vec![m]), "input 2", why);
            }
        }
        None => dims.push(ctx.unknown_dim()),
    }
    for i in 0..n {
        let d = match (&output_shape, auto_pad) {
            (Some(s), _) => int_dim(ctx, s[i]),
            (None, AutoPad::SameUpper | AutoPad::SameLower) if output_padding[i] == 0 => {
                scaled_dim(ctx, &x[2 + i], strides[i] as i64)
            }
            (None, AutoPad::SameUpper | AutoPad::SameLower) => ctx.unknown_dim(),
            (None, AutoPad::NotSet | AutoPad::Valid) => {
                let total_pads = if auto_pad == AutoPad::Valid { 0 } else { pads[i] + pads[i + n] };
                let k = kernel.as_ref().map(|k| k[i].clone());
                let extra = output_padding[i] - total_pads;
                transposed_size(ctx, &x[2 + i], k.as_ref(), strides[i], dilations[i], extra)
            }
        };
        dims.push(d);
    }
    Some(dims)
}

/// `stride·(in − 1) + dilation·(k − 1) + 1 + extra`, an unknown unless `in` and `k` are sizes.
pub(super) fn transposed_size(
    ctx: &mut OpCtx,
    input: &DimTerm,
    kernel: Option<&DimTerm>,
    stride: u64,
    dilation: u64,
    extra: i64,
) -> DimTerm {
    let value = (|| {
        let i = size_expr(ctx, input)?;
        let k = size_expr(ctx, kernel?)?;
        let s = SizeExpr::constant(i64::try_from(stride).ok()?);
        let d = SizeExpr::constant(i64::try_from(dilation).ok()?);
        let body = i.add(&SizeExpr::constant(-1))?.mul(&s)?;
        let span = k.add(&SizeExpr::constant(-1))?.mul(&d)?;
        body.add(&span)?.add(&SizeExpr::constant(extra.checked_add(1)?))
    })();
    match value.and_then(|v| expr_dim(ctx, v)) {
        Some(d) => d,
        None => ctx.unknown_dim(),
    }
}
