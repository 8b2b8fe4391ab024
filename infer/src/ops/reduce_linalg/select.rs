//! `TopK` (the axis becomes `k`: an attribute before opset 10, an input
//! after; values keep the input's type, indices are int64) and the scans
//! `CumSum` and `CumProd` (the input's shape and type).

use super::{set_tensor, unknown_shape};
use crate::rule::{Defer, Elem, OpCtx};
use diamond_ir::ElemType;

/// The `k` of a `TopK` node: the attribute before opset 10, the one-element input after.
fn top_k_count(ctx: &mut OpCtx) -> Option<Elem> {
    if ctx.version() < 10 {
        return ctx.attr_int("k").map(Elem::Int);
    }
    match ctx.elems(1)?.as_slice() {
        [k] => Some(k.clone()),
        _ => None,
    }
}

/// `TopK`: see the module documentation.
pub(super) fn top_k(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    let axis = ctx.attr_int("axis").unwrap_or(-1);
    let Some(axis) = ctx.axis(axis, dims.len(), "axis") else {
        unknown_shape(ctx, 0, t);
        unknown_shape(ctx, 1, Some(ElemType::Int64));
        return Ok(());
    };
    let k = match top_k_count(ctx) {
        Some(Elem::Int(k)) if k < 0 => {
            ctx.invalid(format!("k is {k}; it must not be negative"));
            unknown_shape(ctx, 0, t);
            unknown_shape(ctx, 1, Some(ElemType::Int64));
            return Ok(());
        }
        Some(k) => ctx.dim_of_elem(&k),
        None => ctx.unknown_dim(),
    };
    let mut out = dims;
    out[axis] = k;
    set_tensor(ctx, 0, out.clone(), t);
    set_tensor(ctx, 1, out, Some(ElemType::Int64));
    Ok(())
}

/// `CumSum`/`CumProd`: the input's shape and type; the axis (input 1) must be a scalar in range.
pub(super) fn cumulative(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let (Some(rank), Some([axis])) = (ctx.rank(0), ctx.ints(1).as_deref()) {
        if ctx.axis(*axis, rank, "axis").is_none() {
            let t = ctx.dtype(0);
            unknown_shape(ctx, 0, t);
            return Ok(());
        }
    }
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    if let Some(t) = ctx.dtype(0) {
        ctx.set_dtype(0, t);
    }
    Ok(())
}
