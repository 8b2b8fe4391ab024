//! `fuse-hard-swish`: the spelled-out hard activations other exporters
//! write (Paddle's `x · Clip(x + 3, 0, 6) / 6`, Keras's `relu6(x + 3) / 6`)
//! become their ONNX operators:
//! - `HardSigmoid(x) {alpha=1/6, beta=0.5}` for `Clip(x + 3, 0, 6) / 6`
//!   (the division also a product with `1/6`);
//! - `HardSwish(x)` (opset 14 or later) for `x` times that, in either
//!   order: `x · (Clip(x + 3, 0, 6) / 6)` and `(x · Clip(x + 3, 0, 6)) / 6`.
//!   Before opset 14 the product stays: `x · HardSigmoid(x)`.
//!
//! Gates: every intermediate value has one reader and is not part of the
//! interface; the constants are one-element and equal to 3, 0, 6 and 6 (or
//! 1/6) within float32 rounding; `x` is a float tensor and the result has
//! `x`'s shape (no constant broadcast it larger). The new node takes the
//! place of the pattern's last node.

use super::pattern::{binary, close, other, produced_by, scalar, sole_reader};
use super::Pass;
use crate::rewrite::{float_attr, node, remove_nodes, unique_name};
use crate::Analysis;
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct FuseHardSwish;

/// One match: the activation's input, whether `x` multiplies it (HardSwish),
/// the node whose output it writes, and the nodes it swallows.
struct Match {
    x: ValueId,
    swish: bool,
    last: NodeId,
    swallowed: Vec<NodeId>,
}

impl Pass for FuseHardSwish {
    fn name(&self) -> &'static str {
        "fuse-hard-swish"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let matches: Vec<Match> = graph
            .nodes
            .iter()
            .filter(|(_, n)| n.op_type() == "Clip" && n.domain().is_empty())
            .filter_map(|(id, _)| matched(model, a, id))
            .collect();
        let has_hard_swish = model.opset_version("").unwrap_or(0) >= 14;
        let mut dead = HashSet::new();
        for m in &matches {
            let graph = &mut model.graphs[a.main];
            let last = &graph.nodes[m.last];
            let (name, out) = (last.name.clone().unwrap_or_default(), last.outputs[0]);
            let sixth = float_attr("alpha", 1.0 / 6.0);
            if m.swish && has_hard_swish {
                graph.nodes[m.last] = node("HardSwish", &name, vec![m.x], vec![out], Vec::new());
                dead.extend(m.swallowed.iter().copied());
            } else if m.swish {
                // x · HardSigmoid(x): the HardSigmoid in a swallowed node's place.
                let h_name = unique_name(graph, &format!("{}_hard_sigmoid", graph.value_name(m.x)));
                let h = graph.intern(&h_name);
                let slot = m.swallowed[0];
                let attrs = vec![sixth, float_attr("beta", 0.5)];
                graph.nodes[slot] = node("HardSigmoid", &format!("{name}_hard_sigmoid"), vec![m.x], vec![h], attrs);
                graph.nodes[m.last] = node("Mul", &name, vec![m.x, h], vec![out], Vec::new());
                dead.extend(m.swallowed[1..].iter().copied());
            } else {
                let attrs = vec![sixth, float_attr("beta", 0.5)];
                graph.nodes[m.last] = node("HardSigmoid", &name, vec![m.x], vec![out], attrs);
                dead.extend(m.swallowed.iter().copied());
            }
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        matches.len()
    }
}

/// The hard activation around Clip node `clip`, if it is one.
fn matched(model: &Model, a: &Analysis, clip: NodeId) -> Option<Match> {
    let graph = a.graph(model);
    let c = &graph.nodes[clip];
    let clipped = *c.outputs.first()?;
    // Clip(x + 3, 0, 6): bounds as inputs (opset 11+) or attributes.
    let (low, high) = match c.inputs.as_slice() {
        [_, lo, hi] if !graph.value_name(*lo).is_empty() && !graph.value_name(*hi).is_empty() => {
            (scalar(model, a, *lo)?, scalar(model, a, *hi)?)
        }
        [_] => (attr_f(c, "min")?, attr_f(c, "max")?),
        _ => return None,
    };
    if !close(low, 0.0) || !close(high, 6.0) {
        return None;
    }
    let (add_id, add) = produced_by(model, a, c.inputs[0], "Add")?;
    sole_reader(model, a, c.inputs[0])?;
    let x = add.inputs.iter().copied().find(|&v| scalar(model, a, v).is_none())?;
    if !close(scalar(model, a, other(add, x)?)?, 3.0) || !float(model, a, x) {
        return None;
    }
    let reader = sole_reader(model, a, clipped)?;
    // Clip / 6 (or · 1/6), then perhaps x · that.
    if let Some(scaled) = divided_by_six(model, a, reader, clipped) {
        let mut swallowed = vec![add_id, clip];
        if let Some(mul_id) = sole_reader(model, a, scaled).filter(|&m| binary(model, a, m, "Mul").is_some()) {
            let mul = &graph.nodes[mul_id];
            if other(mul, scaled) == Some(x) && same_shape(model, a, mul.outputs[0], x) {
                swallowed.push(reader);
                return Some(Match { x, swish: true, last: mul_id, swallowed });
            }
        }
        if !same_shape(model, a, scaled, x) {
            return None;
        }
        return Some(Match { x, swish: false, last: reader, swallowed });
    }
    // (x · Clip) / 6.
    let mul = binary(model, a, reader, "Mul")?;
    if other(mul, clipped) != Some(x) {
        return None;
    }
    let product = mul.outputs[0];
    let last = sole_reader(model, a, product)?;
    let out = divided_by_six(model, a, last, product)?;
    same_shape(model, a, out, x).then(|| Match { x, swish: true, last, swallowed: vec![add_id, clip, reader] })
}

/// The output of node `id` when it is `v / 6` or `v · (1/6)`.
fn divided_by_six(model: &Model, a: &Analysis, id: NodeId, v: ValueId) -> Option<ValueId> {
    let graph = a.graph(model);
    let n = &graph.nodes[id];
    let by = |op: &str, want: f64| {
        binary(model, a, id, op).and_then(|n| {
            let k = other(n, v)?;
            (op == "Mul" || n.inputs[0] == v).then_some(())?;
            close(scalar(model, a, k)?, want).then_some(n.outputs[0])
        })
    };
    by("Div", 6.0).or_else(|| by("Mul", 1.0 / 6.0)).filter(|_| n.outputs.len() == 1)
}

/// Whether `v` is a float tensor.
fn float(model: &Model, a: &Analysis, v: ValueId) -> bool {
    matches!(a.dtype(model, v), Some(ElemType::Float | ElemType::Float16 | ElemType::Double | ElemType::Bfloat16))
}

/// Whether `u` and `v` have one known shape (symbolic dims included).
fn same_shape(model: &Model, a: &Analysis, u: ValueId, v: ValueId) -> bool {
    a.shape(model, u).zip(a.shape(model, v)).is_some_and(|(p, q)| p == q)
}

/// A float attribute of node `n`.
fn attr_f(n: &diamond_ir::Node, name: &str) -> Option<f64> {
    match n.attribute(name)?.value()? {
        diamond_ir::AttrValue::Float(f) => Some(f as f64),
        _ => None,
    }
}
