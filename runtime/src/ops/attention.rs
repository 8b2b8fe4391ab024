//! `RotaryEmbedding`, and `Attention` (opset 23/24): scaled dot-product attention with masks,
//! causal masking, a KV cache, padded KV lengths, grouped query heads and
//! softcapping, as the ONNX reference computes it.

use super::elementwise::{floats, from_f64s};
use super::{broadcast_index, broadcast_shape, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Tensor, Value};

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Attention" => attention(ctx),
        "RotaryEmbedding" => rotary_embedding(ctx),
        "LinearAttention" => linear_attention(ctx),
        _ => return None,
    })
}

/// A 4-D (B, H, S, D) view of Q/K/V: 3-D inputs (B, S, H·D) are split into
/// `heads` heads.
fn to_4d(ctx: &NodeCtx<'_>, t: &Tensor, heads: Option<i64>, what: &str) -> Result<(Vec<usize>, Vec<f64>)> {
    let v = floats(ctx, t)?;
    match t.rank() {
        4 => Ok((t.shape.clone(), v)),
        3 => {
            let h =
                heads.filter(|&h| h > 0).ok_or_else(|| ctx.err(format!("3-D {what} needs the head count attribute")))?
                    as usize;
            let (b, s, hd) = (t.shape[0], t.shape[1], t.shape[2]);
            if hd % h != 0 {
                return Err(ctx.err(format!("{what} hidden size {hd} is not a multiple of {h} heads")));
            }
            let d = hd / h;
            let mut out = vec![0.0; v.len()];
            for bi in 0..b {
                for si in 0..s {
                    for hi in 0..h {
                        for di in 0..d {
                            out[((bi * h + hi) * s + si) * d + di] = v[((bi * s + si) * h + hi) * d + di];
                        }
                    }
                }
            }
            Ok((vec![b, h, s, d], out))
        }
        r => Err(ctx.err(format!("{what} must have rank 3 or 4, not {r}"))),
    }
}

/// `past` (B, H, P, D) followed by `cur` (B, H, S, D) along the sequence axis.
fn cat_seq(past: &(Vec<usize>, Vec<f64>), cur: &(Vec<usize>, Vec<f64>)) -> (Vec<usize>, Vec<f64>) {
    let (ps, pv) = past;
    let (cs, cv) = cur;
    let (b, h, p, s, d) = (cs[0], cs[1], ps[2], cs[2], cs[3]);
    let mut out = Vec::with_capacity(pv.len() + cv.len());
    for bh in 0..b * h {
        out.extend_from_slice(&pv[bh * p * d..(bh + 1) * p * d]);
        out.extend_from_slice(&cv[bh * s * d..(bh + 1) * s * d]);
    }
    (vec![b, h, p + s, d], out)
}

fn attention(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&[
        "scale",
        "is_causal",
        "q_num_heads",
        "kv_num_heads",
        "softmax_precision",
        "softcap",
        "qk_matmul_output_mode",
        "left_window_size",
        "right_window_size",
    ])?;
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if q.rank() != k.rank() || q.rank() != v.rank() {
        return Err(ctx.err("Q, K and V must have one rank"));
    }
    let three_d = q.rank() == 3;
    let qh = ctx.attr_opt_i("q_num_heads");
    let kvh = ctx.attr_opt_i("kv_num_heads");
    let (qs, qv) = to_4d(ctx, q, qh, "Q")?;
    let mut key = to_4d(ctx, k, kvh, "K")?;
    let mut val = to_4d(ctx, v, kvh, "V")?;
    let past_len = match (ctx.opt_input(4)?, ctx.opt_input(5)?) {
        (Some(pk), Some(pv)) => {
            let pk = (pk.shape.clone(), floats(ctx, pk)?);
            let pv = (pv.shape.clone(), floats(ctx, pv)?);
            if pk.0.len() != 4 || pv.0.len() != 4 || pk.0[3] != key.0[3] || pk.0[..2] != key.0[..2] {
                return Err(ctx.err("past_key/past_value must be (B, H_kv, past, D) matching K and V"));
            }
            key = cat_seq(&pk, &key);
            val = cat_seq(&pv, &val);
            Some(pk.0[2])
        }
        (None, None) => None,
        _ => return Err(ctx.err("past_key and past_value go together")),
    };
    let (b, hq, sq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hk, skv, dk) = (key.0[1], key.0[2], key.0[3]);
    let dv = val.0[3];
    if key.0[0] != b || val.0[0] != b || dk != d || val.0[1] != hk || val.0[2] != skv {
        return Err(ctx.err(format!("Q {qs:?}, K {:?} and V {:?} do not fit", key.0, val.0)));
    }
    if hk == 0 || hq % hk != 0 {
        return Err(ctx.err(format!("{hq} query heads do not group over {hk} key/value heads")));
    }
    let reps = hq / hk;
    let scale = ctx.attr_opt_f("scale").map_or(1.0 / (d as f64).sqrt(), f64::from);
    let softcap = f64::from(ctx.attr_f("softcap", 0.0));
    let causal = ctx.attr_i("is_causal", 0) != 0;
    let mode = ctx.attr_i("qk_matmul_output_mode", 0);
    let nonpad = match ctx.opt_input(6)? {
        Some(t) => {
            Some(t.to_i64s().filter(|v| v.len() == b).ok_or_else(|| ctx.err("nonpad_kv_seqlen must hold B integers"))?)
        }
        None => None,
    };
    // The additive bias over (B, Hq, Sq, Skv), from the mask (padded with
    // "masked" up to Skv), the causal frontier and the KV padding.
    let full = [b, hq, sq, skv];
    let mut bias = vec![0.0f64; b * hq * sq * skv];
    if let Some(m) = ctx.opt_input(3)? {
        if m.rank() < 1 || m.rank() > 4 || m.shape[m.rank() - 1] > skv {
            return Err(ctx.err(format!("attn_mask {:?} does not fit (.., {sq}, {skv})", m.shape)));
        }
        let mv: Vec<f64> = match &m.data {
            Data::Bool(bv) => bv.iter().map(|&x| if x { 0.0 } else { f64::NEG_INFINITY }).collect(),
            _ => floats(ctx, m)?,
        };
        let mut padded_shape = m.shape.clone();
        let last = padded_shape.len() - 1;
        let width = padded_shape[last];
        padded_shape[last] = skv;
        if broadcast_shape(&[&padded_shape, &full]).as_deref() != Some(&full[..]) {
            return Err(ctx.err(format!("attn_mask {:?} does not broadcast to {full:?}", m.shape)));
        }
        let idx = broadcast_index(&full, &padded_shape);
        for (p, &i) in idx.iter().enumerate() {
            let (row, col) = (i / skv, i % skv);
            bias[p] = if col < width { mv[row * width + col] } else { f64::NEG_INFINITY };
        }
    }
    if causal {
        for bi in 0..b {
            let offset = match (past_len, &nonpad) {
                (Some(p), _) => p as i64,
                (None, Some(n)) => n[bi] - sq as i64,
                (None, None) => 0,
            };
            for h in 0..hq {
                for i in 0..sq {
                    for j in 0..skv {
                        if j as i64 > i as i64 + offset {
                            bias[((bi * hq + h) * sq + i) * skv + j] = f64::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
    // A sliding window: query i (at position i + offset among the keys)
    // sees keys from left_window_size before to right_window_size after it;
    // -1 leaves a side unbounded.
    let left = ctx.attr_i("left_window_size", -1);
    let right = ctx.attr_i("right_window_size", -1);
    if left >= 0 || right >= 0 {
        for bi in 0..b {
            let offset = match (past_len, &nonpad) {
                (Some(p), _) => p as i64,
                (None, Some(n)) => n[bi] - sq as i64,
                (None, None) => 0,
            };
            for h in 0..hq {
                for i in 0..sq {
                    let pos = i as i64 + offset;
                    for j in 0..skv {
                        let j = j as i64;
                        if (left >= 0 && j < pos - left) || (right >= 0 && j > pos + right) {
                            bias[((bi * hq + h) * sq + i) * skv + j as usize] = f64::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
    if let Some(n) = &nonpad {
        for bi in 0..b {
            for h in 0..hq {
                for i in 0..sq {
                    for j in 0..skv {
                        if j as i64 >= n[bi] {
                            bias[((bi * hq + h) * sq + i) * skv + j] = f64::NEG_INFINITY;
                        }
                    }
                }
            }
        }
    }
    let mut y = vec![0.0; b * hq * sq * dv];
    let mut qk_out = vec![0.0; b * hq * sq * skv];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / reps;
            let kbase = (bi * hk + kh) * skv;
            for i in 0..sq {
                let qrow = &qv[((bi * hq + h) * sq + i) * d..][..d];
                let row = ((bi * hq + h) * sq + i) * skv;
                let mut scores = vec![0.0; skv];
                for (j, s) in scores.iter_mut().enumerate() {
                    let krow = &key.1[(kbase + j) * d..][..d];
                    let mut dot: f64 = qrow.iter().zip(krow).map(|(a, c)| a * c).sum::<f64>() * scale;
                    if softcap > 0.0 {
                        dot = (dot / softcap).tanh() * softcap;
                    }
                    if mode == 0 || mode == 1 {
                        qk_out[row + j] = dot;
                    }
                    *s = dot + bias[row + j];
                    if mode == 2 {
                        qk_out[row + j] = *s;
                    }
                }
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                // A fully masked row attends to nothing: zeros, not NaN.
                let probs: Vec<f64> = if m == f64::NEG_INFINITY {
                    vec![0.0; skv]
                } else {
                    let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    e.iter().map(|x| x / sum).collect()
                };
                if mode == 3 {
                    qk_out[row..row + skv].copy_from_slice(&probs);
                }
                let out = &mut y[((bi * hq + h) * sq + i) * dv..][..dv];
                for (j, &p) in probs.iter().enumerate() {
                    let vrow = &val.1[(kbase + j) * dv..][..dv];
                    for (o, &x) in out.iter_mut().zip(vrow) {
                        *o += p * x;
                    }
                }
            }
        }
    }
    let elem = q.elem();
    let y = if three_d {
        let mut t = vec![0.0; y.len()];
        for bi in 0..b {
            for h in 0..hq {
                for i in 0..sq {
                    for c in 0..dv {
                        t[((bi * sq + i) * hq + h) * dv + c] = y[((bi * hq + h) * sq + i) * dv + c];
                    }
                }
            }
        }
        from_f64s(ctx, elem, vec![b, sq, hq * dv], &t)?
    } else {
        from_f64s(ctx, elem, vec![b, hq, sq, dv], &y)?
    };
    Ok(vec![
        Some(Value::Tensor(y)),
        Some(Value::Tensor(from_f64s(ctx, k.elem(), key.0, &key.1)?)),
        Some(Value::Tensor(from_f64s(ctx, v.elem(), val.0, &val.1)?)),
        Some(Value::Tensor(from_f64s(ctx, elem, full.to_vec(), &qk_out)?)),
    ])
}

/// `RotaryEmbedding`: rotates pairs of each head's first
/// `rotary_embedding_dim` features (halves, or even/odd when interleaved)
/// by the cached angle of the token's position.
fn rotary_embedding(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["interleaved", "rotary_embedding_dim", "num_heads"])?;
    let (x, cos, sin) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let xv = floats(ctx, x)?;
    let (cv, sv) = (floats(ctx, cos)?, floats(ctx, sin)?);
    let (b, s, h, d, four) = match x.rank() {
        4 => (x.shape[0], x.shape[2], x.shape[1], x.shape[3], true),
        3 => {
            let h = ctx.attr_i("num_heads", 0);
            if h <= 0 || x.shape[2] % h as usize != 0 {
                return Err(ctx.err("3-D input needs num_heads dividing the hidden size"));
            }
            (x.shape[0], x.shape[1], h as usize, x.shape[2] / h as usize, false)
        }
        r => return Err(ctx.err(format!("input must have rank 3 or 4, not {r}"))),
    };
    let rot = match ctx.attr_i("rotary_embedding_dim", 0) {
        0 => d,
        r => r as usize,
    };
    if rot > d || rot % 2 != 0 {
        return Err(ctx.err(format!("rotary_embedding_dim {rot} does not fit head size {d}")));
    }
    let half = rot / 2;
    let interleaved = ctx.attr_i("interleaved", 0) != 0;
    // the cache row of each (batch, position)
    let positions = ctx.opt_ints(3)?;
    let rows = cos.len() / half.max(1);
    let row_of = |bi: usize, si: usize| -> Result<usize> {
        let r = match &positions {
            Some(p) => {
                let v = *p.get(bi * s + si).ok_or_else(|| ctx.err("position_ids must be (batch, sequence)"))?;
                usize::try_from(v).map_err(|_| ctx.err("negative position"))?
            }
            None => bi * s + si,
        };
        if r >= rows || cos.shape.last() != Some(&half) || sin.len() != cos.len() {
            return Err(ctx.err(format!("the caches {:?} do not cover row {r} of {half} angles", cos.shape)));
        }
        Ok(r)
    };
    let at = |bi: usize, si: usize, hi: usize| {
        if four {
            ((bi * h + hi) * s + si) * d
        } else {
            ((bi * s + si) * h + hi) * d
        }
    };
    let mut out = xv.clone();
    for bi in 0..b {
        for si in 0..s {
            let r = row_of(bi, si)?;
            for hi in 0..h {
                let base = at(bi, si, hi);
                for i in 0..half {
                    let (p, q) =
                        if interleaved { (base + 2 * i, base + 2 * i + 1) } else { (base + i, base + half + i) };
                    let (c, sn) = (cv[r * half + i], sv[r * half + i]);
                    out[p] = c * xv[p] - sn * xv[q];
                    out[q] = sn * xv[p] + c * xv[q];
                }
            }
        }
    }
    Ok(vec![Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?))])
}

/// `LinearAttention`: a recurrent state (B, H_kv, d_k, d_v) updated per
/// token by the update rule (`linear`, `gated`: decayed by exp(decay),
/// `delta`/`gated_delta`: writing β·(v − Sᵀk) instead of v), read by each
/// query head of its group.
fn linear_attention(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["chunk_size", "kv_num_heads", "q_num_heads", "scale", "update_rule"])?;
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let rule = ctx.attr_s("update_rule").unwrap_or_else(|| "gated_delta".into());
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        other => return Err(ctx.err(format!("update_rule '{other}'"))),
    };
    let hq =
        ctx.attr_opt_i("q_num_heads").filter(|&h| h > 0).ok_or_else(|| ctx.err("q_num_heads is required"))? as usize;
    let hk =
        ctx.attr_opt_i("kv_num_heads").filter(|&h| h > 0).ok_or_else(|| ctx.err("kv_num_heads is required"))? as usize;
    if hq % hk != 0 || q.rank() != 3 || k.rank() != 3 || v.rank() != 3 {
        return Err(ctx.err("query/key/value must be (B, T, H·D) with q_num_heads a multiple of kv_num_heads"));
    }
    let (b, t) = (q.shape[0], q.shape[1]);
    if q.shape[2] % hq != 0 || v.shape[2] % hk != 0 {
        return Err(ctx.err("hidden sizes are not multiples of the head counts"));
    }
    let (dk, dv) = (q.shape[2] / hq, v.shape[2] / hk);
    if k.shape != [b, t, hk * dk] || v.shape[..2] != [b, t] {
        return Err(ctx.err(format!("key {:?} / value {:?} do not fit query {:?}", k.shape, v.shape, q.shape)));
    }
    let group = hq / hk;
    let (qv, kv, vv) = (floats(ctx, q)?, floats(ctx, k)?, floats(ctx, v)?);
    let decay = ctx.opt_input(4)?;
    let beta = ctx.opt_input(5)?;
    let erase = ctx.opt_input(6)?;
    if gating != decay.is_some() || delta != beta.is_some() || (erase.is_some() && !delta) {
        return Err(ctx.err(format!("update_rule '{rule}' does not fit the decay/beta/erase_gate operands given")));
    }
    let dec = match decay {
        Some(d) if d.rank() == 3 && (d.shape[2] == hk || d.shape[2] == hk * dk) => {
            Some((floats(ctx, d)?, d.shape[2] == hk))
        }
        Some(d) => return Err(ctx.err(format!("decay {:?} must be (B, T, H_kv) or (B, T, H_kv·d_k)", d.shape))),
        None => None,
    };
    let bet = match beta {
        Some(x) if x.rank() == 3 && (x.shape[2] == hk || x.shape[2] == 1) => Some((floats(ctx, x)?, x.shape[2])),
        Some(x) => return Err(ctx.err(format!("beta {:?} must be (B, T, H_kv) or (B, T, 1)", x.shape))),
        None => None,
    };
    let eg = match erase {
        Some(e) if e.shape == [b, t, hk * dk] => Some(floats(ctx, e)?),
        Some(e) => return Err(ctx.err(format!("erase_gate {:?} must be (B, T, H_kv·d_k)", e.shape))),
        None => None,
    };
    let (mut state, state_elem) = match ctx.opt_input(3)? {
        Some(s) if s.shape == [b, hk, dk, dv] => (floats(ctx, s)?, s.elem()),
        Some(s) => return Err(ctx.err(format!("past_state {:?} must be ({b}, {hk}, {dk}, {dv})", s.shape))),
        None => (vec![0.0; b * hk * dk * dv], q.elem()),
    };
    let scale = match ctx.attr_opt_f("scale") {
        Some(s) if s != 0.0 => f64::from(s),
        _ => 1.0 / (dk as f64).sqrt(),
    };
    let mut out = vec![0.0; b * t * hq * dv];
    for bi in 0..b {
        for ti in 0..t {
            for h in 0..hk {
                let st = &mut state[(bi * hk + h) * dk * dv..][..dk * dv];
                let kt = &kv[((bi * t + ti) * hk + h) * dk..][..dk];
                let mut vt: Vec<f64> = vv[((bi * t + ti) * hk + h) * dv..][..dv].to_vec();
                if let Some((g, per_head)) = &dec {
                    for d in 0..dk {
                        let gd =
                            if *per_head { g[(bi * t + ti) * hk + h] } else { g[((bi * t + ti) * hk + h) * dk + d] };
                        let f = gd.exp();
                        for m in 0..dv {
                            st[d * dv + m] *= f;
                        }
                    }
                }
                if let Some((bv, width)) = &bet {
                    let ke: Vec<f64> = match &eg {
                        Some(e) => (0..dk).map(|d| e[((bi * t + ti) * hk + h) * dk + d] * kt[d]).collect(),
                        None => kt.to_vec(),
                    };
                    let bval = bv[(bi * t + ti) * width + if *width > 1 { h } else { 0 }];
                    for m in 0..dv {
                        let retrieved: f64 = (0..dk).map(|d| st[d * dv + m] * ke[d]).sum();
                        vt[m] = bval * (vt[m] - retrieved);
                    }
                }
                for d in 0..dk {
                    for m in 0..dv {
                        st[d * dv + m] += kt[d] * vt[m];
                    }
                }
            }
            for h in 0..hq {
                let st = &state[(bi * hk + h / group) * dk * dv..][..dk * dv];
                let qt = &qv[((bi * t + ti) * hq + h) * dk..][..dk];
                for m in 0..dv {
                    out[((bi * t + ti) * hq + h) * dv + m] =
                        scale * (0..dk).map(|d| qt[d] * st[d * dv + m]).sum::<f64>();
                }
            }
        }
    }
    Ok(vec![
        Some(Value::Tensor(from_f64s(ctx, q.elem(), vec![b, t, hq * dv], &out)?)),
        Some(Value::Tensor(from_f64s(ctx, state_elem, vec![b, hk, dk, dv], &state)?)),
    ])
}

/// `FlexAttention` (`ai.onnx.preview`): scaled dot-product attention over
/// 4-D Q/K/V with grouped heads, where the optional `score_mod` and
/// `prob_mod` subgraphs rewrite the whole score and probability tensors.
pub(super) fn flex_attention(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["scale", "score_mod", "prob_mod"])?;
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if q.rank() != 4 || k.rank() != 4 || v.rank() != 4 {
        return Err(ctx.err("Q, K and V must have rank 4"));
    }
    let (b, hq, sq, d) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3]);
    let (hk, skv, dv) = (k.shape[1], k.shape[2], v.shape[3]);
    if k.shape[0] != b
        || v.shape[0] != b
        || k.shape[3] != d
        || v.shape[1] != hk
        || v.shape[2] != skv
        || hk == 0
        || hq % hk != 0
    {
        return Err(ctx.err(format!("Q {:?}, K {:?} and V {:?} do not fit", q.shape, k.shape, v.shape)));
    }
    let group = hq / hk;
    let scale = ctx.attr_opt_f("scale").map_or(1.0 / (d as f64).sqrt(), f64::from);
    let (qv, kv, vv) = (floats(ctx, q)?, floats(ctx, k)?, floats(ctx, v)?);
    let mut scores = vec![0.0; b * hq * sq * skv];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for i in 0..sq {
                let qrow = &qv[((bi * hq + h) * sq + i) * d..][..d];
                for j in 0..skv {
                    let krow = &kv[((bi * hk + kh) * skv + j) * d..][..d];
                    scores[((bi * hq + h) * sq + i) * skv + j] =
                        qrow.iter().zip(krow).map(|(x, y)| x * y).sum::<f64>() * scale;
                }
            }
        }
    }
    let shape = vec![b, hq, sq, skv];
    // a modifier subgraph maps the whole tensor to a tensor of the same shape
    let modify = |name: &str, values: Vec<f64>| -> Result<Vec<f64>> {
        let Some(g) = ctx.attr_graph(name) else { return Ok(values) };
        let t = from_f64s(ctx, q.elem(), shape.clone(), &values)?;
        let out = ctx.run_subgraph(g, vec![Value::Tensor(t)])?;
        match out.first() {
            Some(Value::Tensor(r)) if r.shape == shape => floats(ctx, r),
            _ => Err(ctx.err(format!("{name} must return one tensor of shape {shape:?}"))),
        }
    };
    let scores = modify("score_mod", scores)?;
    let mut probs = vec![0.0; scores.len()];
    for (row, out) in scores.chunks(skv.max(1)).zip(probs.chunks_mut(skv.max(1))) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|s| (s - m).exp()).collect();
        let sum: f64 = e.iter().sum();
        for (o, x) in out.iter_mut().zip(e) {
            *o = x / sum;
        }
    }
    let probs = modify("prob_mod", probs)?;
    let mut y = vec![0.0; b * hq * sq * dv];
    for bi in 0..b {
        for h in 0..hq {
            let kh = h / group;
            for i in 0..sq {
                let out = &mut y[((bi * hq + h) * sq + i) * dv..][..dv];
                for j in 0..skv {
                    let p = probs[((bi * hq + h) * sq + i) * skv + j];
                    let vrow = &vv[((bi * hk + kh) * skv + j) * dv..][..dv];
                    for (o, x) in out.iter_mut().zip(vrow) {
                        *o += p * x;
                    }
                }
            }
        }
    }
    Ok(vec![Some(Value::Tensor(from_f64s(ctx, q.elem(), vec![b, hq, sq, dv], &y)?))])
}
