//! Random generators: `RandomNormal`/`RandomUniform` (shape from the
//! `shape` attribute), `RandomNormalLike`/`RandomUniformLike` and
//! `Bernoulli` (the input's shape), and `Multinomial` (`[batch,
//! sample_size]`). The element type is the `dtype` attribute's, with each
//! operator's default.

use super::{dtype_attr, same_shape, set_dtype_opt};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::RowTerm;
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add_all(ONNX, &["RandomNormal", "RandomUniform"], 1, random_of_shape);
    t.add_all(ONNX, &["RandomNormalLike", "RandomUniformLike"], 1, random_like);
    t.add(ONNX, "Bernoulli", 15, random_like);
    t.add(ONNX, "Multinomial", 7, multinomial);
}

/// `RandomNormal`/`RandomUniform`: the shape `shape` gives (required, no
/// negative size), type `dtype` (default float).
fn random_of_shape(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(t) = dtype_attr(ctx, "dtype") else { return Ok(()) };
    let Some(shape) = ctx.attr_ints("shape") else {
        ctx.invalid("attribute shape is required");
        return Ok(());
    };
    let Some(sizes) = shape.iter().map(|&n| u64::try_from(n).ok()).collect::<Option<Vec<u64>>>() else {
        ctx.invalid(format!("attribute shape has a negative size: {shape:?}"));
        return Ok(());
    };
    ctx.set_sizes(0, &sizes);
    ctx.set_dtype(0, t.unwrap_or(ElemType::Float));
    Ok(())
}

/// `RandomNormalLike`/`RandomUniformLike`/`Bernoulli`: the input's shape,
/// type `dtype` (default: the input's).
fn random_like(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(t) = dtype_attr(ctx, "dtype") else { return Ok(()) };
    same_shape(ctx, 0, 0);
    let t = t.or(ctx.dtype(0));
    set_dtype_opt(ctx, 0, t);
    Ok(())
}

/// `Multinomial`: input `[batch, class_size]`, output `[batch,
/// sample_size]` of type `dtype` (int32 or int64, default int32).
fn multinomial(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Ok(t) = dtype_attr(ctx, "dtype") else { return Ok(()) };
    let t = t.unwrap_or(ElemType::Int32);
    if t != ElemType::Int32 && t != ElemType::Int64 {
        ctx.invalid(format!("attribute dtype must be int32 or int64, got {t}"));
        return Ok(());
    }
    let samples = ctx.attr_int("sample_size").unwrap_or(1);
    let Ok(samples) = u64::try_from(samples) else {
        ctx.invalid(format!("attribute sample_size must not be negative, got {samples}"));
        return Ok(());
    };
    let batch = ctx.unknown_dim();
    if let Some(x) = ctx.in_row(0) {
        let classes = ctx.unknown_dim();
        ctx.eq_rows(x, RowTerm::closed(vec![batch.clone(), classes]), "input 0", "is [batch, class_size]");
    }
    let s = ctx.known(samples);
    ctx.set_dims(0, vec![batch, s]);
    ctx.set_dtype(0, t);
    Ok(())
}
