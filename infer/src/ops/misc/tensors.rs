//! `TensorScatter`: writes `update` into `past_cache` along the sequence
//! `axis` (default -2); the result is shaped and typed like `past_cache`,
//! and `update` matches it on every other axis.

use super::{shaped_like, unknown_shape};
use crate::rule::{Defer, OpCtx};

/// `TensorScatter`: see the module documentation.
pub(super) fn tensor_scatter(ctx: &mut OpCtx) -> Result<(), Defer> {
    let cache = ctx.need_dims(0)?;
    let update = ctx.need_dims(1)?;
    let t = ctx.same_dtype(&[0, 1]);
    if cache.len() != update.len() {
        ctx.rank_conflict(
            1,
            format!("update (input 1) has rank {} but past_cache (input 0) rank {}", update.len(), cache.len()),
        );
        unknown_shape(ctx, 0, t);
        return Ok(());
    }
    let axis = ctx.attr_int("axis").unwrap_or(-2);
    let Some(axis) = ctx.axis(axis, cache.len(), "axis") else {
        unknown_shape(ctx, 0, t);
        return Ok(());
    };
    for (i, (c, u)) in cache.into_iter().zip(update).enumerate() {
        if i != axis {
            ctx.eq_dims_at(u, c, "input 1", i, format!("update matches past_cache on axis {i}"));
        }
    }
    shaped_like(ctx, 0, 0, t);
    Ok(())
}
