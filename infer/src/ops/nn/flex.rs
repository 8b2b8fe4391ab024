//! `FlexAttention` (domain `ai.onnx.preview`): attention over 4-D
//! `Q [B, Hq, L, E]`, `K [B, Hkv, S, E]`, `V [B, Hkv, S, Ev]` giving
//! `Y [B, Hq, L, Ev]`, with grouped-query heads (`Hq` a multiple of `Hkv`).
//! The score/probability modifier subgraphs do not change the shape.

use super::{check_rank, dtype_from, settle};
use crate::ops::{OpTable, PREVIEW};
use crate::rule::{Defer, OpCtx};

pub(super) fn register(t: &mut OpTable) {
    t.add(PREVIEW, "FlexAttention", 1, flex_attention);
}

/// `FlexAttention`: see the module documentation.
fn flex_attention(ctx: &mut OpCtx) -> Result<(), Defer> {
    let (q, k, v) = (ctx.need_dims(0)?, ctx.need_dims(1)?, ctx.need_dims(2)?);
    dtype_from(ctx, 0, 0);
    ctx.same_dtype(&[0, 1, 2]);
    let ranks_ok = check_rank(ctx, 0, q.len(), 4, "Q")
        && check_rank(ctx, 1, k.len(), 4, "K")
        && check_rank(ctx, 2, v.len(), 4, "V");
    if !ranks_ok {
        return settle(ctx, false);
    }
    ctx.eq_dims_at(k[0].clone(), q[0].clone(), "input 1", 0, "K's batch equals Q's");
    ctx.eq_dims_at(v[0].clone(), k[0].clone(), "input 2", 0, "V's batch equals K's");
    ctx.eq_dims_at(k[3].clone(), q[3].clone(), "input 1", 3, "K's head size equals Q's");
    ctx.eq_dims_at(v[1].clone(), k[1].clone(), "input 2", 1, "V's head count equals K's");
    ctx.eq_dims_at(v[2].clone(), k[2].clone(), "input 2", 2, "V's sequence length equals K's");
    if let (Some(hq), Some(hkv)) = (ctx.size_of(&q[1]), ctx.size_of(&k[1])) {
        if hkv == 0 || hq % hkv != 0 {
            ctx.invalid(format!("Q has {hq} heads, not a multiple of K's {hkv}"));
            return settle(ctx, false);
        }
    }
    ctx.set_dims(0, vec![q[0].clone(), q[1].clone(), q[2].clone(), v[3].clone()]);
    Ok(())
}
