//! `fuse-attention`: scaled dot-product attention written out by exporters
//! — `softmax(s · Q·Kᵀ + mask) · V` over 4-D (batch, heads, seq, head size)
//! operands — becomes one standard `Attention(Q, K, V[, mask]) {scale}`
//! (opset 23 or later; `--target-opset 23` upgrades a model first).
//!
//! Accepted spellings: the scale as scalar `Mul`s on Q and/or Kᵀ (PyTorch's
//! `scaled_dot_product_attention` splits √s over both) and/or a scalar
//! `Mul`/`Div` of the scores; an additive float mask on either side of an
//! `Add`; PyTorch's guard `Where(IsNaN(p), 0, p)` after the softmax. Kᵀ is
//! traced back to K: a Transpose whose permutation, with its last two axes
//! swapped, is the identity reads K itself; PyTorch's
//! `Reshape(Transpose(Reshape(K, [n, S, D]), [0, 2, 1]), [B, H, D, S])` too;
//! any other Transpose is re-permuted; otherwise a Transpose of Kᵀ is added.
//!
//! Gates, each proven on inferred shapes: float32 operands of rank 4; Q is
//! (B, H, Sq, D), Kᵀ is (B, Hk, D, Skv) and V is (B, Hk, Skv, Dv) with the
//! same B, D, Hk and Skv, and Hk equal to H or 1 (MatMul's broadcast, which
//! is Attention's grouped heads with one group); the softmax is over the
//! last axis; the mask is float, of rank at most 4, and its last axis is
//! Skv (Attention pads a shorter mask with "masked", where Add would
//! broadcast). Attention gives a fully masked row zeros, as the NaN guard
//! does; without the guard such a row is NaN, so an unguarded mask must be
//! provably finite (a stored constant, or a `Where` of finite constants).
//! Every swallowed value has one reader and is not part of the interface.
//! What differs: a NaN *input* row, which the guard zeroes and Attention
//! propagates — the guard exists for masked rows, and verification runs on
//! finite inputs.

use super::pattern::{produced_by, scalar, sole_reader};
use super::Pass;
use crate::rewrite::{float_attr, ints_attr, node, remove_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::{ConstData, DimReport};
use diamond_ir::{AttrValue, ElemType, Model, Node, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct FuseAttention;

/// Where K in (B, Hk, Skv, D) layout comes from.
enum KeySource {
    /// A value that already holds it.
    Existing(ValueId),
    /// A new `Transpose(x, perm)`.
    Permuted(ValueId, Vec<i64>),
}

/// One match: operands, the scale, the node whose output the Attention
/// writes (the P·V MatMul) and the nodes it swallows.
struct Match {
    q: ValueId,
    k: KeySource,
    v: ValueId,
    mask: Option<ValueId>,
    scale: f64,
    last: NodeId,
    swallowed: Vec<NodeId>,
}

impl Pass for FuseAttention {
    fn name(&self) -> &'static str {
        "fuse-attention"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 23 {
            return 0;
        }
        let graph = a.graph(model);
        let matches: Vec<Match> = graph
            .nodes
            .iter()
            .filter(|(_, n)| n.op_type() == "Softmax" && n.domain().is_empty())
            .filter_map(|(id, _)| attention(model, a, id))
            .collect();
        let count = matches.len();
        let mut dead = HashSet::new();
        for m in matches {
            let graph = &mut model.graphs[a.main];
            let last = &graph.nodes[m.last];
            let label = last.name.clone().unwrap_or_default();
            let outputs = last.outputs.clone();
            let k = match m.k {
                KeySource::Existing(k) => k,
                KeySource::Permuted(x, perm) => {
                    let base = format!("{}_key", graph.value_name(outputs[0]));
                    let name = unique_name(graph, &base);
                    let k = graph.intern(&name);
                    let label = format!("{label}_key");
                    graph.nodes.push(node("Transpose", &label, vec![x], vec![k], vec![ints_attr("perm", &perm)]));
                    k
                }
            };
            let mut inputs = vec![m.q, k, m.v];
            inputs.extend(m.mask);
            let attributes = vec![float_attr("scale", m.scale as f32)];
            graph.nodes[m.last] = node("Attention", &label, inputs, outputs, attributes);
            dead.extend(m.swallowed);
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}

/// The attention around Softmax `softmax_id`, when every gate holds.
fn attention(model: &Model, a: &Analysis, softmax_id: NodeId) -> Option<Match> {
    let graph = a.graph(model);
    let softmax = &graph.nodes[softmax_id];
    let logits = *softmax.inputs.first()?;
    let axis = match softmax.attribute("axis").and_then(|k| k.value()) {
        Some(AttrValue::Int(axis)) => axis,
        None => -1,
        _ => return None,
    };
    if axis != -1 && axis != 3 {
        return None;
    }
    let mut swallowed = vec![softmax_id];
    (sole_reader(model, a, logits)? == softmax_id).then_some(())?;
    // The logits: scaled scores, plus a mask on either side.
    let (scores, mask) = match produced_by(model, a, logits, "Add") {
        Some((add_id, add)) => {
            let [x, y] = [add.inputs[0], add.inputs[1]];
            let (scores, mask) = if scores_root(model, a, x).is_some() { (x, y) } else { (y, x) };
            (sole_reader(model, a, scores)? == add_id).then_some(())?;
            swallowed.push(add_id);
            (scores, Some(mask))
        }
        None => (logits, None),
    };
    let (matmul_id, mut scale, chain) = scores_root(model, a, scores)?;
    swallowed.extend(chain);
    swallowed.push(matmul_id);
    let matmul = &graph.nodes[matmul_id];
    let (q, q_scale, q_mul) = scaled_operand(model, a, matmul.inputs[0], matmul_id);
    let (kt, k_scale, k_mul) = scaled_operand(model, a, matmul.inputs[1], matmul_id);
    scale *= q_scale * k_scale;
    swallowed.extend(q_mul);
    swallowed.extend(k_mul);
    // After the softmax: the NaN guard, then P · V.
    let probs = softmax.outputs[0];
    let (pv_id, guarded) = match a.consumers.get(&probs).map(Vec::as_slice) {
        Some([only]) if a.is_internal(model, probs) => (*only, false),
        Some([r0, r1]) if a.is_internal(model, probs) => {
            let (isnan_id, where_id) = if graph.nodes[*r0].op_type() == "IsNaN" { (*r0, *r1) } else { (*r1, *r0) };
            let (isnan, guard) = (&graph.nodes[isnan_id], &graph.nodes[where_id]);
            let nan = isnan.outputs.first().copied()?;
            let ok = isnan.op_type() == "IsNaN"
                && isnan.domain().is_empty()
                && guard.op_type() == "Where"
                && guard.domain().is_empty()
                && guard.inputs.len() == 3
                && guard.inputs[0] == nan
                && guard.inputs[2] == probs
                && scalar(model, a, guard.inputs[1]) == Some(0.0)
                && sole_reader(model, a, nan) == Some(where_id);
            ok.then_some(())?;
            swallowed.push(isnan_id);
            swallowed.push(where_id);
            (sole_reader(model, a, guard.outputs[0])?, true)
        }
        _ => return None,
    };
    let pv = &graph.nodes[pv_id];
    let p = if guarded { graph.nodes[*swallowed.last()?].outputs[0] } else { probs };
    if pv.op_type() != "MatMul" || !pv.domain().is_empty() || pv.inputs.len() != 2 || pv.inputs[0] != p {
        return None;
    }
    let v = pv.inputs[1];
    // Shapes and types.
    for x in [q, kt, v, pv.outputs[0]] {
        (a.dtype(model, x)? == ElemType::Float).then_some(())?;
    }
    let (qs, ks, vs, ys) =
        (a.shape(model, q)?, a.shape(model, kt)?, a.shape(model, v)?, a.shape(model, pv.outputs[0])?);
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return None;
    }
    let one = DimReport::Known(1);
    let heads_fit = ks[1] == qs[1] || ks[1] == one;
    let fits = ks[0] == qs[0] && ks[2] == qs[3] && heads_fit && vs[0] == qs[0] && vs[1] == ks[1] && vs[2] == ks[3];
    fits.then_some(())?;
    (ys == [qs[0].clone(), qs[1].clone(), qs[2].clone(), vs[3].clone()]).then_some(())?;
    if let Some(m) = mask {
        (a.dtype(model, m)? == ElemType::Float).then_some(())?;
        let ms = a.shape(model, m)?;
        (!ms.is_empty() && ms.len() <= 4 && ms.last() == Some(&ks[3])).then_some(())?;
        (guarded || finite(model, a, m)).then_some(())?;
    }
    let k = key_source(model, a, kt, &ks);
    Some(Match { q, k, v, mask, scale, last: pv_id, swallowed })
}

/// The MatMul under `v` and the product of the scalar `Mul`/`Div` factors
/// between them, with those nodes (each output read once).
fn scores_root(model: &Model, a: &Analysis, mut v: ValueId) -> Option<(NodeId, f64, Vec<NodeId>)> {
    let graph = a.graph(model);
    let mut factor = 1.0;
    let mut chain = Vec::new();
    loop {
        let &id = a.producer.get(&v)?;
        let n = &graph.nodes[id];
        if !n.domain().is_empty() || n.outputs.len() != 1 {
            return None;
        }
        match n.op_type() {
            "MatMul" if n.inputs.len() == 2 => return Some((id, factor, chain)),
            "Mul" if n.inputs.len() == 2 => {
                let (x, c) = match (scalar(model, a, n.inputs[1]), scalar(model, a, n.inputs[0])) {
                    (Some(c), _) => (n.inputs[0], c),
                    (None, Some(c)) => (n.inputs[1], c),
                    _ => return None,
                };
                factor *= c;
                v = x;
            }
            "Div" if n.inputs.len() == 2 => {
                let c = scalar(model, a, n.inputs[1]).filter(|c| *c != 0.0)?;
                factor /= c;
                v = n.inputs[0];
            }
            _ => return None,
        }
        (sole_reader(model, a, v)? == id).then_some(())?;
        chain.push(id);
    }
}

/// `v` without a scalar `Mul` that only `reader` reads: the operand, its
/// factor and the Mul.
fn scaled_operand(model: &Model, a: &Analysis, v: ValueId, reader: NodeId) -> (ValueId, f64, Option<NodeId>) {
    let plain = (v, 1.0, None);
    let Some((id, mul)) = produced_by(model, a, v, "Mul") else { return plain };
    if sole_reader(model, a, v) != Some(reader) {
        return plain;
    }
    for (x, c) in [(mul.inputs[0], mul.inputs[1]), (mul.inputs[1], mul.inputs[0])] {
        if let Some(factor) = scalar(model, a, c) {
            if a.shape(model, x) == a.shape(model, v) {
                return (x, factor, Some(id));
            }
        }
    }
    plain
}

/// Whether every element of `m` is finite: a stored constant, or a `Where`
/// choosing between finite constants.
fn finite(model: &Model, a: &Analysis, m: ValueId) -> bool {
    let all_finite = |v: ValueId| match a.constant(model, v).map(|k| k.data.clone()) {
        Some(ConstData::Floats(f)) => f.iter().all(|x| x.is_finite()),
        _ => false,
    };
    if all_finite(m) {
        return true;
    }
    let Some(&id) = a.producer.get(&m) else { return false };
    let n = &a.graph(model).nodes[id];
    n.op_type() == "Where"
        && n.domain().is_empty()
        && n.inputs.len() == 3
        && all_finite(n.inputs[1])
        && all_finite(n.inputs[2])
}

/// The permutation a Transpose node applies (reversal when unstated).
fn permutation(n: &Node, rank: usize) -> Option<Vec<i64>> {
    match n.attribute("perm").and_then(|p| p.value()) {
        Some(AttrValue::Ints(p)) => Some(p.to_vec()),
        None => Some((0..rank as i64).rev().collect()),
        _ => None,
    }
}

/// Where K comes from, given Kᵀ of shape `ks` (B, Hk, D, Skv).
fn key_source(model: &Model, a: &Analysis, kt: ValueId, ks: &[DimReport]) -> KeySource {
    let swap = vec![0, 1, 3, 2];
    let graph = a.graph(model);
    let Some(&id) = a.producer.get(&kt) else { return KeySource::Permuted(kt, swap) };
    let n = &graph.nodes[id];
    if !n.domain().is_empty() {
        return KeySource::Permuted(kt, swap);
    }
    if n.op_type() == "Transpose" {
        if let Some(mut perm) = permutation(n, 4).filter(|p| p.len() == 4) {
            perm.swap(2, 3);
            return if perm == [0, 1, 2, 3] {
                KeySource::Existing(n.inputs[0])
            } else {
                KeySource::Permuted(n.inputs[0], perm)
            };
        }
    }
    if let Some(k) = reshaped_transpose(model, a, n, ks) {
        return KeySource::Existing(k);
    }
    KeySource::Permuted(kt, swap)
}

/// PyTorch's `Reshape(Transpose(Reshape(K, [n, S, D]), [0, 2, 1]), Kᵀ's
/// shape)`: K, when its shape is Kᵀ's with the last two axes swapped.
fn reshaped_transpose(model: &Model, a: &Analysis, outer: &Node, ks: &[DimReport]) -> Option<ValueId> {
    let graph = a.graph(model);
    (outer.op_type() == "Reshape").then_some(())?;
    let t = &graph.nodes[*a.producer.get(outer.inputs.first()?)?];
    (t.op_type() == "Transpose" && t.domain().is_empty() && permutation(t, 3)? == [0, 2, 1]).then_some(())?;
    let inner = &graph.nodes[*a.producer.get(t.inputs.first()?)?];
    (inner.op_type() == "Reshape" && inner.domain().is_empty()).then_some(())?;
    let k = *inner.inputs.first()?;
    let (k_shape, r_shape) = (a.shape(model, k)?, a.shape(model, inner.outputs[0])?);
    let swapped = [ks[0].clone(), ks[1].clone(), ks[3].clone(), ks[2].clone()];
    (k_shape == swapped && r_shape.len() == 3 && r_shape[1..] == k_shape[2..]).then_some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reversal_is_the_default_permutation() {
        let n = node("Transpose", "t", vec![], vec![], vec![]);
        assert_eq!(permutation(&n, 4), Some(vec![3, 2, 1, 0]));
    }
}
