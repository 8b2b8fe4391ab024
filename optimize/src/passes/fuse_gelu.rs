//! `fuse-gelu`: the decomposed GELU activations exporters write become one
//! `Gelu` (opset 20 or later; `--target-opset 20` upgrades a model first):
//! - exact: `0.5 · h · (1 + erf(h / √2))`, the division also written as a
//!   product with `1/√2`;
//! - tanh approximation: `0.5 · h · (1 + tanh(√(2/π) · (h + 0.044715 · h³)))`
//!   with `h³` as `Pow(h, 3)`, becoming `Gelu(h, approximate="tanh")`.
//!
//! The outer product may associate either way (`(h · a) · 0.5`,
//! `h · (0.5 · a)`, `(h · 0.5) · a`). Gates: every intermediate value has one
//! reader and is not part of the interface; constants are one-element and
//! equal to the formula's within float32 rounding; the element type is a
//! float; the result's shape is `h`'s (so no constant broadcast it larger).
//! The Gelu takes the place of the last node of the pattern.

use super::pattern::{binary, close, other, produced_by, scalar, sole_reader};
use super::Pass;
use crate::rewrite::{node, remove_nodes, string_attr};
use crate::Analysis;
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct FuseGelu;

/// One match: the activation's input, the node whose output it replaces,
/// the other nodes it swallows, and which form it is.
struct Match {
    h: ValueId,
    last: NodeId,
    swallowed: Vec<NodeId>,
    tanh: bool,
}

impl Pass for FuseGelu {
    fn name(&self) -> &'static str {
        "fuse-gelu"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 20 {
            return 0;
        }
        let graph = a.graph(model);
        let mut matches = Vec::new();
        for (id, n) in graph.nodes.iter() {
            if !n.domain().is_empty() || n.inputs.len() != 1 || n.outputs.len() != 1 {
                continue;
            }
            let found = match n.op_type() {
                "Erf" => erf_form(model, a, id),
                "Tanh" => tanh_form(model, a, id),
                _ => None,
            };
            matches.extend(found);
        }
        let count = matches.len();
        let mut dead = HashSet::new();
        for m in matches {
            let graph = &mut model.graphs[a.main];
            let last = &graph.nodes[m.last];
            let name = last.name.clone().unwrap_or_default();
            let attributes = if m.tanh { vec![string_attr("approximate", "tanh")] } else { Vec::new() };
            let gelu = node("Gelu", &name, vec![m.h], last.outputs.clone(), attributes);
            graph.nodes[m.last] = gelu;
            dead.extend(m.swallowed);
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}

/// `0.5 · h · (1 + erf(h / √2))` around the Erf node `erf`.
fn erf_form(model: &Model, a: &Analysis, erf: NodeId) -> Option<Match> {
    let u = a.graph(model).nodes[erf].inputs[0];
    (sole_reader(model, a, u)? == erf).then_some(())?;
    let (scaled, h) = if let Some((id, div)) = produced_by(model, a, u, "Div") {
        close(scalar(model, a, div.inputs[1])?, std::f64::consts::SQRT_2).then_some((id, div.inputs[0]))?
    } else {
        let (id, mul) = produced_by(model, a, u, "Mul")?;
        let h = mul.inputs.iter().copied().find(|&v| scalar(model, a, v).is_none())?;
        close(scalar(model, a, other(mul, h)?)?, std::f64::consts::FRAC_1_SQRT_2).then_some((id, h))?
    };
    let mut m = tail(model, a, erf, h)?;
    m.swallowed.extend([scaled, erf]);
    Some(m)
}

/// `0.5 · h · (1 + tanh(√(2/π) · (h + 0.044715 · h³)))` around the Tanh node `tanh`.
fn tanh_form(model: &Model, a: &Analysis, tanh: NodeId) -> Option<Match> {
    let u = a.graph(model).nodes[tanh].inputs[0];
    (sole_reader(model, a, u)? == tanh).then_some(())?;
    let (outer_id, outer) = produced_by(model, a, u, "Mul")?;
    let sum = outer.inputs.iter().copied().find(|&v| scalar(model, a, v).is_none())?;
    close(scalar(model, a, other(outer, sum)?)?, (2.0 / std::f64::consts::PI).sqrt()).then_some(())?;
    (sole_reader(model, a, sum)? == outer_id).then_some(())?;
    let (sum_id, add) = produced_by(model, a, sum, "Add")?;
    // h + 0.044715 · h³, in either order.
    for (h, cubic_term) in [(add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])] {
        let Some((term_id, term)) = produced_by(model, a, cubic_term, "Mul") else { continue };
        if sole_reader(model, a, cubic_term) != Some(sum_id) {
            continue;
        }
        let Some(cube) = term.inputs.iter().copied().find(|&v| scalar(model, a, v).is_none()) else { continue };
        if !other(term, cube).and_then(|c| scalar(model, a, c)).is_some_and(|c| close(c, 0.044715)) {
            continue;
        }
        let Some((pow_id, pow)) = produced_by(model, a, cube, "Pow") else { continue };
        if pow.inputs[0] != h
            || scalar(model, a, pow.inputs[1]) != Some(3.0)
            || sole_reader(model, a, cube) != Some(term_id)
        {
            continue;
        }
        let mut m = tail(model, a, tanh, h)?;
        m.swallowed.extend([pow_id, term_id, sum_id, outer_id, tanh]);
        m.tanh = true;
        return Some(m);
    }
    None
}

/// The shared tail `0.5 · h · (1 + g)` after the Erf or Tanh node `g`.
fn tail(model: &Model, a: &Analysis, g: NodeId, h: ValueId) -> Option<Match> {
    let graph = a.graph(model);
    let g_out = graph.nodes[g].outputs[0];
    let plus_id = sole_reader(model, a, g_out)?;
    let plus = binary(model, a, plus_id, "Add")?;
    (scalar(model, a, other(plus, g_out)?)? == 1.0).then_some(())?;
    let p = plus.outputs[0];
    let m1_id = sole_reader(model, a, p)?;
    let m1 = binary(model, a, m1_id, "Mul")?;
    let o1 = other(m1, p)?;
    let half = |v: ValueId| scalar(model, a, v) == Some(0.5);
    let (last, mut swallowed) = if o1 == h {
        let m2_id = sole_reader(model, a, m1.outputs[0])?;
        let m2 = binary(model, a, m2_id, "Mul")?;
        half(other(m2, m1.outputs[0])?).then_some((m2_id, vec![plus_id, m1_id]))?
    } else if half(o1) {
        let m2_id = sole_reader(model, a, m1.outputs[0])?;
        let m2 = binary(model, a, m2_id, "Mul")?;
        (other(m2, m1.outputs[0])? == h).then_some((m2_id, vec![plus_id, m1_id]))?
    } else {
        let (h2_id, h2) = produced_by(model, a, o1, "Mul")?;
        (sole_reader(model, a, o1)? == m1_id && other(h2, h).is_some_and(half))
            .then_some((m1_id, vec![plus_id, h2_id]))?
    };
    let float =
        matches!(a.dtype(model, h), Some(ElemType::Float | ElemType::Float16 | ElemType::Double | ElemType::Bfloat16));
    let out = graph.nodes[last].outputs[0];
    let same_shape = a.shape(model, h).is_some() && a.shape(model, h) == a.shape(model, out);
    if !float || !same_shape {
        return None;
    }
    swallowed.retain(|&n| n != last);
    Some(Match { h, last, swallowed, tanh: false })
}
