//! Normalizations: `BatchNormalization` (with its training-mode statistics
//! outputs), `InstanceNormalization`, `LayerNormalization` (with `Mean` and
//! `InvStdDev` of the reduced shape and the `stash_type` element type),
//! `GroupNormalization`, `RMSNormalization`, `LRN`,
//! `MeanVarianceNormalization` and `LpNormalization`, and `com.microsoft`'s
//! `SkipLayerNormalization`. Each output `Y` has the input's shape.
//!
//! Parameters are checked against what they scale, each named in the
//! operand (`input 1 (scale)`) so a clash says which one: per-channel ones
//! (`BatchNormalization`'s scale, B, mean and var, `InstanceNormalization`'s
//! scale and B, `GroupNormalization`'s scale and bias from opset 21) have
//! shape `[C]`, C being X's axis 1; `GroupNormalization` before opset 21
//! takes `[num_groups]`; `LayerNormalization`'s Scale and B and
//! `RMSNormalization`'s scale broadcast unidirectionally to the normalized
//! shape `X.shape[axis:]`; `SkipLayerNormalization`'s gamma, beta and bias
//! are `[hidden]` and its skip has the input's shape (or `[1, S, H]`,
//! `[S, H]`).

use super::{axis_ok, dtype_attr, same_shape, set_dtype_opt};
use crate::constraint::Constraint;
use crate::ops::{OpTable, MICROSOFT, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "BatchNormalization", 1, batch_norm);
    t.add(ONNX, "InstanceNormalization", 1, instance_norm);
    t.add(ONNX, "LayerNormalization", 17, layer_norm);
    t.add(ONNX, "GroupNormalization", 18, group_norm);
    t.add(ONNX, "RMSNormalization", 23, rms_norm);
    t.add(ONNX, "LRN", 1, lrn);
    t.add(ONNX, "MeanVarianceNormalization", 9, mean_variance_norm);
    t.add(ONNX, "LpNormalization", 1, lp_norm);
    t.add(MICROSOFT, "SkipLayerNormalization", 1, skip_layer_norm);
}

/// Output 0 has input 0's shape and type.
fn same_as_x(ctx: &mut OpCtx) {
    same_shape(ctx, 0, 0);
    let t = ctx.dtype(0);
    set_dtype_opt(ctx, 0, t);
}

/// Each given input among `params` (index, name) has shape `[C]`, C being
/// input 0's axis 1 (when input 0's rank is known and at least 2).
fn per_channel(ctx: &mut OpCtx, params: &[(usize, &str)]) {
    let Some(dims) = ctx.dims(0) else { return };
    let Some(c) = dims.get(1).filter(|_| dims.len() >= 2).cloned() else { return };
    for &(i, name) in params {
        vector_of(ctx, i, name, c.clone(), &format!("{name} has shape [C], C = X's axis 1 (the channels)"));
    }
}

/// Input `i` (named `name`), when given, is the vector `[len]`: a wrong
/// rank is a `rank-conflict`, a wrong length a `dim-mismatch` at its axis 0,
/// both naming the operand (`input 1 (scale)`).
fn vector_of(ctx: &mut OpCtx, i: usize, name: &str, len: DimTerm, why: &str) {
    if !ctx.has_input(i) {
        return;
    }
    let operand = format!("input {i} ({name})");
    match ctx.dims(i) {
        Some(d) if d.len() == 1 => ctx.eq_dims_at(d[0].clone(), len, &operand, 0, why.to_string()),
        Some(d) => {
            let shape = shape_text(ctx, &[len]);
            ctx.rank_conflict(i, format!("{name} (input {i}) has rank {}; it must be the vector {shape}", d.len()));
        }
        None => {
            if let Some(row) = ctx.in_row(i) {
                ctx.eq_rows(row, RowTerm::closed(vec![len]), &operand, why.to_string());
            }
        }
    }
}

/// Dimensions as text (`[768]`, `[?]` for a size not known yet).
fn shape_text(ctx: &mut OpCtx, dims: &[DimTerm]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match ctx.resolve(d) {
            DimTerm::Dim(d) => d.size.to_string(),
            DimTerm::Var(_) => "?".to_string(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Each given input among `params` (index, name) broadcasts
/// unidirectionally to the normalized shape `X.shape[axis:]` (when X's
/// rank is known and `axis` in range): a clash is a `broadcast-conflict`
/// (or `rank-conflict`) at the parameter's own axis.
fn to_normalized(ctx: &mut OpCtx, axis: i64, params: &[(usize, &str)]) {
    let Some(dims) = ctx.dims(0) else { return };
    let r = dims.len() as i64;
    if axis < -r || axis >= r {
        return;
    }
    let a = (if axis < 0 { axis + r } else { axis }) as usize;
    let normalized = dims[a..].to_vec();
    let shape = shape_text(ctx, &normalized);
    for &(i, name) in params {
        let Some(row) = ctx.in_row(i) else { continue };
        let operand = format!("input {i} ({name})");
        let why = format!("{name} broadcasts to the normalized shape X.shape[{a}:] = {shape}");
        let cause = ctx.cause(&operand, why);
        ctx.constrain(Constraint::RowLe(row, RowTerm::closed(normalized.clone()), cause));
    }
}

/// `BatchNormalization`: Y has X's shape and type; scale, bias, mean and
/// variance have shape `[C]` (from opset 9, or with `spatial=1`). The
/// statistics outputs (opset 14+: only in training mode) have the shape and
/// type of the input mean and variance.
fn batch_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_as_x(ctx);
    if ctx.version() >= 9 || ctx.attr_int("spatial").unwrap_or(1) == 1 {
        per_channel(ctx, &[(1, "scale"), (2, "B"), (3, "mean"), (4, "var")]);
    }
    if ctx.version() >= 14 {
        if ctx.attr_int("training_mode").unwrap_or(0) != 0 {
            for (j, i) in [(1, 3), (2, 4)] {
                same_shape(ctx, i, j);
                let t = ctx.dtype(i);
                set_dtype_opt(ctx, j, t);
            }
        }
        return Ok(());
    }
    let t = ctx.dtype(0);
    for (j, i) in [(1, 3), (2, 4), (3, 3), (4, 4)] {
        if ctx.has_output(j) {
            same_shape(ctx, i, j);
            set_dtype_opt(ctx, j, t);
        }
    }
    Ok(())
}

/// `InstanceNormalization`: same shape and type; scale and bias have shape `[C]`.
fn instance_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_as_x(ctx);
    per_channel(ctx, &[(1, "scale"), (2, "B")]);
    Ok(())
}

/// `GroupNormalization`: same shape and type. `num_groups` must be positive
/// and divide C; scale and bias have shape `[num_groups]` (opset 18) or
/// `[C]` (opset 21).
fn group_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let groups = match ctx.attr_int("num_groups") {
        Some(g) if g > 0 => g as u64,
        other => {
            ctx.invalid(format!("attribute num_groups must be a positive integer, got {other:?}"));
            return Ok(());
        }
    };
    let channels = ctx.dims(0).and_then(|d| d.get(1).cloned()).and_then(|c| ctx.size_of(&c));
    if let Some(c) = channels.filter(|c| c % groups != 0) {
        ctx.invalid(format!("num_groups {groups} does not divide the {c} channels"));
        return Ok(());
    }
    same_as_x(ctx);
    if ctx.version() >= 21 {
        per_channel(ctx, &[(1, "scale"), (2, "bias")]);
    } else {
        for (i, name) in [(1, "scale"), (2, "bias")] {
            let g = ctx.known(groups);
            vector_of(ctx, i, name, g, &format!("{name} has shape [num_groups] before opset 21"));
        }
    }
    Ok(())
}

/// The shape of `LayerNormalization`'s `Mean`/`InvStdDev`: X's shape with
/// every axis from `axis` on made 1. `Ok(None)` after reporting an
/// out-of-range axis. Without X's rank, a negative axis still gives it (the
/// last `-axis` axes become 1); a non-negative one defers.
fn reduced_row(ctx: &mut OpCtx, axis: i64) -> Result<Option<RowTerm>, Defer> {
    if let Some(dims) = ctx.dims(0) {
        let Some(a) = ctx.axis(axis, dims.len(), "axis") else { return Ok(None) };
        let mut out = dims[..a].to_vec();
        out.extend((a..dims.len()).map(|_| ctx.known(1)));
        return Ok(Some(RowTerm::closed(out)));
    }
    if !(-64..0).contains(&axis) {
        return Err(Defer);
    }
    let k = axis.unsigned_abs() as usize;
    let rest = ctx.unknown_row();
    let tail: Vec<_> = (0..k).map(|_| ctx.unknown_dim()).collect();
    let pattern = RowTerm { leading: Vec::new(), var: rest.var, trailing: tail };
    if let Some(x) = ctx.in_row(0) {
        ctx.eq_rows(x, pattern, "input 0", "has at least -axis axes");
    }
    let ones = (0..k).map(|_| ctx.known(1)).collect();
    Ok(Some(RowTerm { leading: Vec::new(), var: rest.var, trailing: ones }))
}

/// `LayerNormalization`: Y has X's shape and type; `Mean` and `InvStdDev`
/// have X's shape with the normalized axes made 1, of type `stash_type`
/// (default float).
fn layer_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(stash) = dtype_attr(ctx, "stash_type") else { return Ok(()) };
    let axis = ctx.attr_int("axis").unwrap_or(-1);
    let Some(stats) = reduced_row(ctx, axis)? else { return Ok(()) };
    same_as_x(ctx);
    to_normalized(ctx, axis, &[(1, "Scale"), (2, "B")]);
    for j in [1, 2] {
        if ctx.has_output(j) {
            ctx.set_row(j, stats.clone());
            ctx.set_dtype(j, stash.unwrap_or(ElemType::Float));
        }
    }
    Ok(())
}

/// `RMSNormalization`: Y has X's shape. Its type is stated only when X and
/// scale agree (the type constraints name scale's type, the reference
/// implementation X's).
fn rms_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    if !axis_ok(ctx, -1) || dtype_attr(ctx, "stash_type").is_err() {
        return Ok(());
    }
    same_shape(ctx, 0, 0);
    let axis = ctx.attr_int("axis").unwrap_or(-1);
    to_normalized(ctx, axis, &[(1, "scale")]);
    if let (Some(x), Some(s)) = (ctx.dtype(0), ctx.dtype(1)) {
        if x == s {
            ctx.set_dtype(0, x);
        }
    }
    Ok(())
}

/// `LRN`: same shape and type; `size` must be positive.
fn lrn(ctx: &mut OpCtx) -> Result<(), Defer> {
    match ctx.attr_int("size") {
        Some(s) if s > 0 => {}
        other => {
            ctx.invalid(format!("attribute size must be a positive integer, got {other:?}"));
            return Ok(());
        }
    }
    same_as_x(ctx);
    Ok(())
}

/// `MeanVarianceNormalization`: same shape and type; `axes` (default
/// `[0, 2, 3]`) must be in range.
fn mean_variance_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let axes = ctx.attr_ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    if let Some(rank) = ctx.rank(0) {
        for a in axes {
            if ctx.axis(a, rank, "axes entry").is_none() {
                return Ok(());
            }
        }
    }
    same_as_x(ctx);
    Ok(())
}

/// `LpNormalization`: same shape and type; `p` is 1 or 2, `axis` in range.
fn lp_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let p = ctx.attr_int("p").unwrap_or(2);
    if p != 1 && p != 2 {
        ctx.invalid(format!("attribute p must be 1 or 2, got {p}"));
        return Ok(());
    }
    if !axis_ok(ctx, -1) {
        return Ok(());
    }
    same_as_x(ctx);
    Ok(())
}

/// `com.microsoft` `SkipLayerNormalization`: `input` is `[B, S, H]` (or
/// `[tokens, H]`); `skip` has its shape, or `[1, S, H]`, or `[S, H]`;
/// gamma, beta and bias are `[H]`. `output` and `input_skip_bias_sum`
/// (output 3) have the input's shape and type; `mean` and `inv_std_var`
/// are left unknown.
fn skip_layer_norm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let x = ctx.need_dims(0)?;
    let t = ctx.same_dtype(&[0, 1, 2, 3, 4]);
    if !(2..=3).contains(&x.len()) {
        ctx.rank_conflict(0, format!("input has rank {}; it must be [B, S, H] or [tokens, H]", x.len()));
        return Ok(());
    }
    let hidden = x[x.len() - 1].clone();
    if let Some(s) = ctx.dims(1) {
        if s.len() < 2 || s.len() > x.len() {
            let message = format!("skip (input 1) has rank {} but the input has rank {}", s.len(), x.len());
            ctx.rank_conflict(1, format!("{message}; skip must be [B, S, H], [1, S, H] or [S, H]"));
        } else {
            let offset = x.len() - s.len();
            for (k, d) in s.iter().enumerate() {
                let why = "skip has the input's shape (its batch may be 1)";
                if offset == 0 && k == 0 && x.len() == 3 {
                    ctx.le_dims_at(d.clone(), x[0].clone(), "input 1 (skip)", 0, why);
                } else {
                    ctx.eq_dims_at(d.clone(), x[offset + k].clone(), "input 1 (skip)", k, why);
                }
            }
        }
    }
    for (i, name) in [(2, "gamma"), (3, "beta"), (4, "bias")] {
        vector_of(ctx, i, name, hidden.clone(), &format!("{name} has shape [hidden], hidden = input's last axis"));
    }
    for j in [0, 3] {
        if ctx.has_output(j) {
            same_shape(ctx, 0, j);
            set_dtype_opt(ctx, j, t);
        }
    }
    Ok(())
}
