//! `Einsum(x, U)` (either order) whose uniform operand's labels all label
//! `x` too, with an output that is `x`'s labels in order minus some summed
//! ones: `ReduceSum(x)` over the summed axes, times `c` when `c ≠ 1`.

use super::chain::Chain;
use super::{quoted, Note, Rewrite};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_ir::{Model, NodeId};

/// The rewrite of Einsum node `nid`, when one of its two operands is uniform.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.inputs.len() != 2 {
        return None;
    }
    let equation = match n.attribute("equation").and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::String(e)) => String::from_utf8_lossy(e).replace(' ', ""),
        _ => return None,
    };
    let (lhs, output) = equation.split_once("->")?;
    let (first, second) = lhs.split_once(',')?;
    if equation.contains('.') {
        return None;
    }
    let distinct = |l: &str| {
        l.chars().all(|c| c.is_ascii_alphabetic())
            && l.chars().collect::<std::collections::HashSet<_>>().len() == l.len()
    };
    if !distinct(first) || !distinct(second) || !distinct(output) {
        return None;
    }
    let (x, x_labels, u_id, u_labels) = match (uniform(model, a, n.inputs[1]), uniform(model, a, n.inputs[0])) {
        (Some(_), _) => (n.inputs[0], first, n.inputs[1], second),
        (None, Some(_)) => (n.inputs[1], second, n.inputs[0], first),
        _ => return None,
    };
    let u = uniform(model, a, u_id)?;
    if !u_labels.chars().all(|c| x_labels.contains(c)) {
        return None;
    }
    // The output keeps x's labels in order, dropping the summed ones.
    let kept: String = x_labels.chars().filter(|c| output.contains(*c)).collect();
    if kept != output || kept.len() == x_labels.len() {
        return None;
    }
    let summed: Vec<i64> =
        x_labels.chars().enumerate().filter(|(_, c)| !output.contains(*c)).map(|(i, _)| i as i64).collect();
    let out = n.outputs[0];
    let dtype = a.dtype(model, out)?;
    let mut chain = Chain::new(graph, nid, x, opset);
    chain.reduce("ReduceSum", &summed, false);
    chain.scale(dtype, u.value)?;
    let mut rewrite = chain.finish(model, a, nid, out)?;
    let axes: Vec<String> = summed.iter().map(i64::to_string).collect();
    let noun = if axes.len() == 1 { "axis" } else { "axes" };
    let purpose = format!("sum {noun} {} of {}", axes.join(", "), quoted(model, a, x));
    rewrite.note = Some(Note::multiplies(model, a, u_id, u.value, &purpose));
    Some(rewrite)
}
