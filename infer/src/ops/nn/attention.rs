//! Attention (opset 23/24: the 3-D `[B, S, heads·size]` and 4-D
//! `[B, heads, S, size]` forms, grouped key/value heads, the past and present
//! key/value caches, `qk_matmul_output`) and `RotaryEmbedding`.

use super::{divided_dim, dtype_from, scaled_dim, settle};
use crate::constraint::{Constraint, SizeSum};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Attention", 23, attention);
    t.add(ONNX, "RotaryEmbedding", 23, rotary_embedding);
}

/// `RotaryEmbedding`: the input's shape and type.
fn rotary_embedding(ctx: &mut OpCtx) -> Result<(), Defer> {
    crate::ops::common::pass_through(ctx)
}

/// `Attention`: Y and qk_matmul_output have Q's type, present_key K's, present_value V's.
fn attention(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let q = ctx.need_dims(0)?;
    dtype_from(ctx, 1, 1);
    dtype_from(ctx, 2, 2);
    dtype_from(ctx, 3, 0);
    let stated = attention_shapes(ctx, &q).is_some();
    settle(ctx, stated)
}

/// One of K or V seen per head: `[B, kv_heads, S, size]`.
struct Heads {
    batch: DimTerm,
    heads: DimTerm,
    seq: DimTerm,
    size: DimTerm,
}

/// The query's `(batch, heads, seq)` and the number of kv heads from the attributes.
struct Query {
    batch: DimTerm,
    heads: DimTerm,
    seq: DimTerm,
    q_heads: Option<i64>,
    kv_heads: Option<i64>,
}

/// States every output's shape.
fn attention_shapes(ctx: &mut OpCtx, q: &[DimTerm]) -> Option<()> {
    let query = match q.len() {
        4 => Query { batch: q[0].clone(), heads: q[1].clone(), seq: q[2].clone(), q_heads: None, kv_heads: None },
        3 => {
            let (Some(qh), Some(kvh)) = (ctx.attr_int("q_num_heads"), ctx.attr_int("kv_num_heads")) else {
                ctx.invalid("3-D inputs need the q_num_heads and kv_num_heads attributes");
                return None;
            };
            if qh < 1 || kvh < 1 {
                ctx.invalid(format!("q_num_heads {qh} and kv_num_heads {kvh} must be at least 1"));
                return None;
            }
            let heads = ctx.known(qh as u64);
            Query { batch: q[0].clone(), heads, seq: q[1].clone(), q_heads: Some(qh), kv_heads: Some(kvh) }
        }
        r => {
            ctx.rank_conflict(0, format!("Q has rank {r}; it must be 3 or 4"));
            return None;
        }
    };
    let key = per_head(ctx, 1, q.len(), query.kv_heads)?;
    let value = per_head(ctx, 2, q.len(), query.kv_heads)?;
    if q.len() == 4 {
        if let Some(k) = ctx.dims(1).filter(|k| k.len() == 4) {
            ctx.eq_dims_at(k[3].clone(), q[3].clone(), "input 1", 3, "K's head size is Q's (axis 3)");
        }
    }
    let y = match (q.len(), query.q_heads, query.kv_heads) {
        (4, _, _) => vec![q[0].clone(), q[1].clone(), q[2].clone(), value.size.clone()],
        (_, Some(qh), Some(kvh)) if qh == kvh => {
            let v = ctx.dims(2).filter(|v| v.len() == 3).map(|v| v[2].clone());
            let last = v.unwrap_or_else(|| ctx.unknown_dim());
            vec![q[0].clone(), q[1].clone(), last]
        }
        (_, Some(qh), _) => {
            let last = scaled_dim(ctx, &value.size, qh);
            vec![q[0].clone(), q[1].clone(), last]
        }
        _ => return None,
    };
    let present_key = present(ctx, 4, &key);
    let present_value = present(ctx, 5, &value);
    let total = present_key.seq.clone();
    ctx.set_dims(0, y);
    ctx.set_dims(1, vec![present_key.batch, present_key.heads, present_key.seq, present_key.size]);
    ctx.set_dims(2, vec![present_value.batch, present_value.heads, present_value.seq, present_value.size]);
    ctx.set_dims(3, vec![query.batch, query.heads, query.seq, total]);
    Some(())
}

/// Input `i` (K or V) per head; 3-D inputs split their last axis into `kv_heads`.
fn per_head(ctx: &mut OpCtx, i: usize, rank: usize, kv_heads: Option<i64>) -> Option<Heads> {
    let Some(d) = ctx.dims(i) else {
        return Some(Heads {
            batch: ctx.unknown_dim(),
            heads: match kv_heads {
                Some(h) => ctx.known(h as u64),
                None => ctx.unknown_dim(),
            },
            seq: ctx.unknown_dim(),
            size: ctx.unknown_dim(),
        });
    };
    if d.len() != rank {
        ctx.rank_conflict(i, format!("input {i} has rank {} but Q has rank {rank}; they must match", d.len()));
        return None;
    }
    Some(match (rank, kv_heads) {
        (3, Some(h)) => {
            let size = divided_dim(ctx, &d[2], h);
            Heads { batch: d[0].clone(), heads: ctx.known(h as u64), seq: d[1].clone(), size }
        }
        _ => Heads { batch: d[0].clone(), heads: d[1].clone(), seq: d[2].clone(), size: d[3].clone() },
    })
}

/// The present cache: the past one (input `past`) with the new sequence appended.
fn present(ctx: &mut OpCtx, past: usize, new: &Heads) -> Heads {
    let Some(p) = ctx.has_input(past).then(|| ctx.dims(past)).flatten() else {
        if ctx.has_input(past) {
            let (b, h, s, z) = (ctx.unknown_dim(), ctx.unknown_dim(), ctx.unknown_dim(), ctx.unknown_dim());
            return Heads { batch: b, heads: h, seq: s, size: z };
        }
        return Heads {
            batch: new.batch.clone(),
            heads: new.heads.clone(),
            seq: new.seq.clone(),
            size: new.size.clone(),
        };
    };
    if p.len() != 4 {
        let (b, h, s, z) = (ctx.unknown_dim(), ctx.unknown_dim(), ctx.unknown_dim(), ctx.unknown_dim());
        return Heads { batch: b, heads: h, seq: s, size: z };
    }
    let total = ctx.fresh_dim();
    let cause = ctx.cause(&format!("input {past}"), "the present cache is the past one followed by the new sequence");
    ctx.constrain(Constraint::Sum(Box::new(SizeSum {
        total: total.clone(),
        parts: vec![p[2].clone(), new.seq.clone()],
        cause,
    })));
    Heads { batch: p[0].clone(), heads: p[1].clone(), seq: total, size: p[3].clone() }
}
