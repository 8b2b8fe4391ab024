//! Fused sequence-model operators of the default domain: `SwiGLU` (opset
//! 28: two inputs of one shape, no broadcasting), `CausalConvWithState`
//! (opset 27: a depthwise causal 1-D convolution over `[B, C, L]` with a
//! `[B, C, k-1]` carry state) and `LinearAttention` (opset 27: packed
//! `[B, T, H·d]` queries, keys and values with a `[B, H_kv, d_k, d_v]`
//! recurrent state).

use super::{check_choice, check_dtype, divided_dim, scaled_dim, set_tensor};
use crate::constraint::{Constraint, SizeSum};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

/// The element types the fused operators take.
const FLOATS: [ElemType; 3] = [ElemType::Float, ElemType::Float16, ElemType::Bfloat16];

/// `SwiGLU`: `Y = Swish(A) * B`; A and B have one shape, which Y has.
pub(super) fn swiglu(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = ctx.same_dtype(&[0, 1]);
    check_dtype(ctx, 0, &[ElemType::Float, ElemType::Float16, ElemType::Bfloat16, ElemType::Double]);
    if let (Some(a), Some(b)) = (ctx.in_row(0), ctx.in_row(1)) {
        ctx.eq_rows(a.clone(), b, "input 1", "SwiGLU's inputs have identical shapes (no broadcasting)");
        ctx.set_row(0, a);
    }
    if let Some(t) = t {
        ctx.set_dtype(0, t);
    }
    Ok(())
}

/// Input `i`'s dimensions when it is given and has rank `rank`; reports
/// `invalid-attribute` for another rank.
fn dims_of_rank(ctx: &mut OpCtx, i: usize, rank: usize, what: &str) -> Option<Vec<DimTerm>> {
    let dims = ctx.dims(i)?;
    if dims.len() != rank {
        ctx.rank_conflict(i, format!("{what} (input {i}) has rank {}; it must have rank {rank}", dims.len()));
        return None;
    }
    Some(dims)
}

/// `CausalConvWithState`: output is shaped like the input `[B, C, L]`,
/// present_state is `[B, C, k-1]` for the weight `[C, 1, k]`.
pub(super) fn causal_conv_with_state(ctx: &mut OpCtx) -> Result<(), Defer> {
    let x = ctx.need_dims(0)?;
    let w = ctx.need_dims(1)?;
    let t = ctx.same_dtype(&[0, 1, 2, 3]);
    check_dtype(ctx, 0, &FLOATS);
    check_choice(ctx, "activation", "none", &["none", "silu", "swish"]);
    if x.len() != 3 || w.len() != 3 {
        ctx.rank_conflict(
            0,
            format!(
                "input has rank {} and weight rank {}; both must have rank 3 ([B, C, L] and [C, 1, k])",
                x.len(),
                w.len()
            ),
        );
        super::unknown_shape(ctx, 0, t);
        super::unknown_shape(ctx, 1, t);
        return Ok(());
    }
    if let Some(m) = ctx.size_of(&w[1]).filter(|&m| m != 1) {
        ctx.invalid(format!("weight axis 1 is {m}; a depthwise kernel [C, 1, k] has 1 there"));
    }
    ctx.eq_dims_at(w[0].clone(), x[1].clone(), "input 1", 0, "the weight has one kernel per channel");
    if ctx.has_input(2) {
        if let Some(b) = dims_of_rank(ctx, 2, 1, "bias") {
            ctx.eq_dims_at(b[0].clone(), x[1].clone(), "input 2", 0, "the bias has one value per channel");
        }
    }
    let carry = carry_length(ctx, &w[2]);
    if ctx.has_input(3) {
        if let Some(p) = dims_of_rank(ctx, 3, 3, "past_state") {
            ctx.eq_dims_at(p[0].clone(), x[0].clone(), "input 3", 0, "past_state has the input's batch");
            ctx.eq_dims_at(p[1].clone(), x[1].clone(), "input 3", 1, "past_state has the input's channels");
            ctx.eq_dims_at(p[2].clone(), carry.clone(), "input 3", 2, "past_state holds the last k-1 positions");
        }
    }
    set_tensor(ctx, 0, x.clone(), t);
    set_tensor(ctx, 1, vec![x[0].clone(), x[1].clone(), carry], t);
    Ok(())
}

/// `k - 1` for the kernel length `k`: computed when `k` is known, else a
/// size tied to `k` by `k = (k-1) + 1`.
fn carry_length(ctx: &mut OpCtx, k: &DimTerm) -> DimTerm {
    match ctx.size_of(k) {
        Some(0) => {
            ctx.invalid("the kernel length k (weight axis 2) is 0; it must be at least 1");
            ctx.unknown_dim()
        }
        Some(n) => ctx.known(n - 1),
        None => {
            let carry = ctx.unknown_dim();
            let one = ctx.known(1);
            let cause = ctx.cause("output 1", "the carry state holds k-1 positions");
            ctx.constrain(Constraint::Sum(Box::new(SizeSum {
                total: k.clone(),
                parts: vec![carry.clone(), one],
                cause,
            })));
            carry
        }
    }
}

/// The validated head counts of `LinearAttention`: `(q_num_heads, kv_num_heads)`.
fn head_counts(ctx: &mut OpCtx) -> Option<(i64, i64)> {
    let (Some(hq), Some(hkv)) = (ctx.attr_int("q_num_heads"), ctx.attr_int("kv_num_heads")) else {
        ctx.invalid("q_num_heads and kv_num_heads are required");
        return None;
    };
    if hq < 1 || hkv < 1 || hq % hkv != 0 {
        ctx.invalid(format!("q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}"));
        return None;
    }
    Some((hq, hkv))
}

/// Checks that the optional `decay` and `beta` inputs are given exactly
/// when the update rule uses them.
fn check_gates(ctx: &mut OpCtx, rule: &str) {
    let gated = matches!(rule, "gated" | "gated_delta");
    let delta = matches!(rule, "delta" | "gated_delta");
    for (i, name, needed) in [(4, "decay", gated), (5, "beta", delta)] {
        match (ctx.has_input(i), needed) {
            (false, true) => ctx.invalid(format!("update_rule '{rule}' needs the {name} input (input {i})")),
            (true, false) => ctx.invalid(format!("update_rule '{rule}' takes no {name} input (input {i})")),
            _ => {}
        }
    }
}

/// `LinearAttention`: output `[B, T, H_q·d_v]` of the query's type,
/// present_state `[B, H_kv, d_k, d_v]` of past_state's type (the query's
/// without one).
pub(super) fn linear_attention(ctx: &mut OpCtx) -> Result<(), Defer> {
    let q = ctx.need_dims(0)?;
    let t = ctx.same_dtype(&[0, 1, 2, 4, 5]);
    check_dtype(ctx, 0, &FLOATS);
    let s = if ctx.has_input(3) { ctx.dtype(3) } else { t };
    let rule = check_choice(ctx, "update_rule", "gated_delta", &["linear", "gated", "delta", "gated_delta"]);
    if let Some(rule) = rule {
        check_gates(ctx, &rule);
    }
    let heads = head_counts(ctx);
    let stated = match (heads, q.len()) {
        (Some((hq, hkv)), 3) => linear_attention_shapes(ctx, &q, hq, hkv, t, s),
        (Some(_), r) => {
            ctx.rank_conflict(0, format!("query has rank {r}; it must be [B, T, H_q * d_k]"));
            false
        }
        (None, _) => false,
    };
    if !stated {
        super::unknown_shape(ctx, 0, t);
        super::unknown_shape(ctx, 1, s);
    }
    Ok(())
}

/// States both outputs of `LinearAttention` for a 3-D query; `false` when
/// an input's rank is wrong.
fn linear_attention_shapes(
    ctx: &mut OpCtx,
    q: &[DimTerm],
    hq: i64,
    hkv: i64,
    t: Option<ElemType>,
    s: Option<ElemType>,
) -> bool {
    let (batch, seq) = (q[0].clone(), q[1].clone());
    let mut packed = Vec::new();
    for (i, name) in [(1, "key"), (2, "value")] {
        match ctx.dims(i) {
            Some(d) if d.len() == 3 => {
                ctx.eq_dims_at(d[0].clone(), batch.clone(), &format!("input {i}"), 0, "has the query's batch");
                ctx.eq_dims_at(d[1].clone(), seq.clone(), &format!("input {i}"), 1, "has the query's sequence length");
                packed.push(Some(d[2].clone()));
            }
            Some(d) => {
                ctx.rank_conflict(i, format!("{name} (input {i}) has rank {}; it must be [B, T, H_kv * d]", d.len()));
                return false;
            }
            None => packed.push(None),
        }
    }
    let dk = head_size(ctx, &q[2], hq, "query");
    let dv = match packed.get(1).cloned().flatten() {
        Some(v) => head_size(ctx, &v, hkv, "value"),
        None => None,
    };
    if let (Some(k), Some(dk)) = (packed.first().cloned().flatten(), dk.clone()) {
        let want = scaled_dim(ctx, &dk, hkv);
        ctx.eq_dims(k, want, "input 1", "key packs kv_num_heads heads of the query's head size");
    }
    let (dk, dv) = past_state_sizes(ctx, &batch, hkv, dk, dv);
    let out_last = match &dv {
        Some(dv) => scaled_dim(ctx, dv, hq),
        None => ctx.unknown_dim(),
    };
    let dk = dk.unwrap_or_else(|| ctx.unknown_dim());
    let dv = dv.unwrap_or_else(|| ctx.unknown_dim());
    let kv_heads = ctx.known(hkv as u64);
    set_tensor(ctx, 0, vec![batch.clone(), seq, out_last], t);
    set_tensor(ctx, 1, vec![batch, kv_heads, dk, dv], s);
    true
}

/// The head size of a packed axis of `heads` heads; reports a packed size
/// known not to divide.
fn head_size(ctx: &mut OpCtx, packed: &DimTerm, heads: i64, what: &str) -> Option<DimTerm> {
    let d = divided_dim(ctx, packed, heads);
    if d.is_none() {
        if let Some(n) = ctx.size_of(packed) {
            ctx.invalid(format!("{what}'s last axis {n} does not split into {heads} heads"));
        }
    }
    d
}

/// `(d_k, d_v)`, relating past_state `[B, H_kv, d_k, d_v]` when given: its
/// axes fill in what the packed inputs do not say.
fn past_state_sizes(
    ctx: &mut OpCtx,
    batch: &DimTerm,
    hkv: i64,
    dk: Option<DimTerm>,
    dv: Option<DimTerm>,
) -> (Option<DimTerm>, Option<DimTerm>) {
    if !ctx.has_input(3) {
        return (dk, dv);
    }
    let Some(p) = ctx.dims(3) else { return (dk, dv) };
    if p.len() != 4 {
        ctx.rank_conflict(3, format!("past_state (input 3) has rank {}; it must be [B, H_kv, d_k, d_v]", p.len()));
        return (dk, dv);
    }
    ctx.eq_dims_at(p[0].clone(), batch.clone(), "input 3", 0, "past_state has the query's batch");
    let heads = ctx.known(hkv as u64);
    ctx.eq_dims_at(p[1].clone(), heads, "input 3", 1, "past_state has kv_num_heads heads");
    if let Some(dk) = &dk {
        ctx.eq_dims_at(p[2].clone(), dk.clone(), "input 3", 2, "past_state's axis 2 is the key head size");
    }
    if let Some(dv) = &dv {
        ctx.eq_dims_at(p[3].clone(), dv.clone(), "input 3", 3, "past_state's axis 3 is the value head size");
    }
    (Some(dk.unwrap_or_else(|| p[2].clone())), Some(dv.unwrap_or_else(|| p[3].clone())))
}
