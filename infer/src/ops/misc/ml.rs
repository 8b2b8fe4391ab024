//! Operators of the `ai.onnx.ml` domain found in the node suite:
//! `ArrayFeatureExtractor` (the last axis becomes the number of indices; a
//! vector becomes one row), `Binarizer` (same shape and type),
//! `LabelEncoder` (same shape; the type of the values it maps to) and
//! `TreeEnsemble` (`[N, F]` to `[N, n_targets]`).

use super::{set_tensor, shaped_like, unknown_shape};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

/// Output 0 is shaped and typed like input 0.
pub(super) fn same_as_input(ctx: &mut OpCtx) -> Result<(), Defer> {
    shaped_like(ctx, 0, 0, None);
    Ok(())
}

/// The number of elements of input `i` as a dimension: the axis itself for
/// a vector, the product when every axis is known, otherwise unknown.
fn element_count(ctx: &mut OpCtx, i: usize) -> DimTerm {
    let Some(dims) = ctx.dims(i) else { return ctx.unknown_dim() };
    if let [d] = dims.as_slice() {
        return d.clone();
    }
    let mut n: u64 = 1;
    for d in &dims {
        match ctx.size_of(d).and_then(|s| n.checked_mul(s)) {
            Some(m) => n = m,
            None => return ctx.unknown_dim(),
        }
    }
    ctx.known(n)
}

/// `ArrayFeatureExtractor`: `X[..., indices]`, a vector `X` read as one row.
pub(super) fn array_feature_extractor(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    let count = element_count(ctx, 1);
    let out = match dims.as_slice() {
        [] => {
            ctx.rank_conflict(0, "X (input 0) is a scalar; ArrayFeatureExtractor needs rank at least 1");
            unknown_shape(ctx, 0, t);
            return Ok(());
        }
        [_] => vec![ctx.known(1), count],
        [outer @ .., _] => outer.iter().cloned().chain(std::iter::once(count)).collect(),
    };
    set_tensor(ctx, 0, out, t);
    Ok(())
}

/// The element type a `LabelEncoder` maps to, from the attribute holding its values.
fn label_encoder_output_type(ctx: &OpCtx) -> Option<ElemType> {
    if ctx.version() < 2 {
        return match ctx.dtype(0)? {
            ElemType::String => Some(ElemType::Int64),
            ElemType::Int64 => Some(ElemType::String),
            _ => None,
        };
    }
    if let Some(tensor) = ctx.attr_tensor("values_tensor") {
        return Some(tensor.elem_type());
    }
    if ctx.attr("values_strings").is_some() {
        Some(ElemType::String)
    } else if ctx.attr("values_int64s").is_some() {
        Some(ElemType::Int64)
    } else if ctx.attr("values_floats").is_some() {
        Some(ElemType::Float)
    } else {
        None
    }
}

/// `LabelEncoder`: see the module documentation.
pub(super) fn label_encoder(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = label_encoder_output_type(ctx);
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    match t {
        Some(t) => ctx.set_dtype(0, t),
        None if ctx.version() >= 2 => {
            ctx.invalid("LabelEncoder names no values (values_strings, values_int64s, values_floats, values_tensor)")
        }
        None => {}
    }
    Ok(())
}

/// `TreeEnsemble`: `[N, F]` to `[N, n_targets]`, the input's type.
pub(super) fn tree_ensemble(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    let targets = ctx.attr_int("n_targets").filter(|&n| n > 0);
    match (dims.as_slice(), targets) {
        ([n, _], Some(k)) => {
            let out = vec![n.clone(), ctx.known(k as u64)];
            set_tensor(ctx, 0, out, t);
        }
        (_, None) => {
            ctx.invalid("n_targets must be a positive integer");
            unknown_shape(ctx, 0, t);
        }
        _ => {
            ctx.rank_conflict(0, format!("X (input 0) has rank {}; TreeEnsemble takes [N, F]", dims.len()));
            unknown_shape(ctx, 0, t);
        }
    }
    Ok(())
}
