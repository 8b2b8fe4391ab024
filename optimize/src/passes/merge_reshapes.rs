//! `merge-reshapes`: chains of layout-only operators become one.
//! - a Reshape with a constant target reads through a Reshape, Flatten,
//!   Squeeze or Unsqueeze feeding only it: the data and the target are all
//!   that matter. A `0` in the target copies a dim of the Reshape's own
//!   input, so it is allowed only where the bypassed node's input has the
//!   same size on that axis (proven by the shapes). A Transpose that keeps
//!   the memory order — it moves only axes of size 1, the others keep their
//!   relative order — is bypassed the same way;
//! - an Unsqueeze (axes as an input, opset ≥ 13) of an Unsqueeze feeding
//!   only it becomes one Unsqueeze inserting both sets of axes, computed on
//!   the final rank.
//!
//! The bypassed node is left for `dead-code`.

use super::Pass;
use crate::rewrite::{add_initializer, int64_vector, unique_name as unique};
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{AttrValue, Model, NodeId, Tensor, ValueId};

pub(crate) struct MergeReshapes;

const LAYOUT_ONLY: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze"];

impl Pass for MergeReshapes {
    fn name(&self) -> &'static str {
        "merge-reshapes"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut rewires: Vec<(NodeId, ValueId, Option<Tensor>)> = Vec::new();
        let mut bypassed = std::collections::HashSet::new();
        for (nid, n) in graph.nodes.iter() {
            if !n.domain().is_empty() || n.inputs.len() < 2 {
                continue;
            }
            let x = n.inputs[0];
            let Some(&inner_id) = a.producer.get(&x) else { continue };
            let inner = &graph.nodes[inner_id];
            // The intermediate must feed only this node, and each inner node merges once per run.
            if !inner.domain().is_empty()
                || bypassed.contains(&inner_id)
                || !a.is_internal(model, x)
                || a.consumers.get(&x).map_or(0, Vec::len) != 1
            {
                continue;
            }
            let Some(source) = inner.inputs.first().copied() else { continue };
            match n.op_type() {
                "Reshape" if LAYOUT_ONLY.contains(&inner.op_type()) || keeps_memory_order(model, a, inner) => {
                    let Some(target) = a.constant(model, n.inputs[1]).and_then(|k| k.as_i64s()) else { continue };
                    let copies_agree = || {
                        let (Some(before), Some(after)) = (a.shape(model, source), a.shape(model, x)) else {
                            return false;
                        };
                        target
                            .iter()
                            .enumerate()
                            .filter(|(_, &t)| t == 0)
                            .all(|(i, _)| before.get(i).is_some_and(|d| after.get(i) == Some(d)))
                    };
                    let allowzero =
                        matches!(n.attribute("allowzero").and_then(|z| z.value()), Some(AttrValue::Int(z)) if z != 0);
                    // With allowzero a 0 is a size of its own, not a copy.
                    if target.contains(&0) && !allowzero && !copies_agree() {
                        continue;
                    }
                    rewires.push((nid, source, None));
                    bypassed.insert(inner_id);
                }
                "Unsqueeze" if inner.op_type() == "Unsqueeze" && inner.inputs.len() == 2 => {
                    let (Some(outer_axes), Some(inner_axes)) = (
                        a.constant(model, n.inputs[1]).and_then(|k| k.as_i64s()),
                        a.constant(model, inner.inputs[1]).and_then(|k| k.as_i64s()),
                    ) else {
                        continue;
                    };
                    let Some(rank) = a.rank(model, source) else { continue };
                    let Some(axes) = merged_axes(rank, &inner_axes, &outer_axes) else { continue };
                    let out_name = graph.value_name(n.outputs[0]);
                    let name = unique(graph, &format!("{out_name}_axes"));
                    rewires.push((nid, source, Some(int64_vector(&name, &axes))));
                    bypassed.insert(inner_id);
                }
                _ => {}
            }
        }
        let count = rewires.len();
        for (nid, source, axes) in rewires {
            let graph = &mut model.graphs[a.main];
            if let Some(t) = axes {
                let id = graph.intern(t.name.as_deref().unwrap_or(""));
                graph.nodes[nid].inputs[1] = id;
                add_initializer(graph, t, a.initializers_are_constants);
            }
            graph.nodes[nid].inputs[0] = source;
        }
        count
    }
}

/// Whether `node` is a Transpose that leaves the elements in memory order:
/// every axis it moves out of order has size 1 (proven by the shapes).
fn keeps_memory_order(model: &Model, a: &Analysis, node: &diamond_ir::Node) -> bool {
    if node.op_type() != "Transpose" || node.inputs.len() != 1 {
        return false;
    }
    let Some(shape) = node.inputs.first().and_then(|&x| a.shape(model, x)) else { return false };
    let perm: Vec<usize> = match node.attribute("perm").and_then(|p| p.value()) {
        Some(AttrValue::Ints(p)) => match p.iter().map(|&i| usize::try_from(i).ok()).collect::<Option<Vec<_>>>() {
            Some(p) => p,
            None => return false,
        },
        None => (0..shape.len()).rev().collect(),
        _ => return false,
    };
    if perm.len() != shape.len() {
        return false;
    }
    let non_unit: Vec<usize> = perm.iter().copied().filter(|&i| shape.get(i) != Some(&DimReport::Known(1))).collect();
    non_unit.windows(2).all(|w| w[0] < w[1])
}

/// The axes of one Unsqueeze doing what `inner` then `outer` do to a rank-`rank` input.
fn merged_axes(rank: usize, inner: &[i64], outer: &[i64]) -> Option<Vec<i64>> {
    let middle = rank + inner.len();
    let last = middle + outer.len();
    let norm = |a: i64, r: usize| -> Option<usize> {
        let a = if a < 0 { a + r as i64 } else { a };
        usize::try_from(a).ok().filter(|&a| a < r)
    };
    let mut new_in_final = vec![false; last];
    for &a in outer {
        new_in_final[norm(a, last)?] = true;
    }
    let mut inner_new = vec![false; middle];
    for &a in inner {
        inner_new[norm(a, middle)?] = true;
    }
    // The final positions not inserted by `outer` hold the middle's axes in order.
    let mut middle_axes = inner_new.into_iter();
    let mut axes = Vec::new();
    for (p, &by_outer) in new_in_final.iter().enumerate() {
        if by_outer || middle_axes.next()? {
            axes.push(p as i64);
        }
    }
    Some(axes)
}

#[cfg(test)]
mod tests {
    use super::merged_axes;

    #[test]
    fn unsqueeze_axes_compose_on_the_final_rank() {
        // [n] -> unsqueeze [1, 2] -> [n, 1, 1] -> unsqueeze [3] -> [n, 1, 1, 1]
        assert_eq!(merged_axes(1, &[1, 2], &[3]), Some(vec![1, 2, 3]));
        // [n] -> unsqueeze [0] -> [1, n] -> unsqueeze [0] -> [1, 1, n]
        assert_eq!(merged_axes(1, &[0], &[0]), Some(vec![0, 1]));
        // [a, b] -> unsqueeze [1] -> [a, 1, b] -> unsqueeze [-1] -> [a, 1, b, 1]
        assert_eq!(merged_axes(2, &[1], &[-1]), Some(vec![1, 3]));
        // [a] -> unsqueeze [1] -> [a, 1] -> unsqueeze [1] -> [a, 1, 1]: inner's 1 moves to 2
        assert_eq!(merged_axes(1, &[1], &[1]), Some(vec![1, 2]));
        assert_eq!(merged_axes(1, &[5], &[0]), None);
    }
}
