//! `merge-transposes`: `Transpose(Transpose(x, p), q)` where the inner one
//! feeds only the outer is one `Transpose(x, r)` with `r[i] = p[q[i]]`; an
//! identity `r` is left to `noop`. The inner node is left for `dead-code`.

use super::Pass;
use crate::Analysis;
use diamond_ir::{AttrValue, Model, Node, NodeId, ValueId};

pub(crate) struct MergeTransposes;

impl Pass for MergeTransposes {
    fn name(&self) -> &'static str {
        "merge-transposes"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut merges: Vec<(NodeId, ValueId, Vec<i64>)> = Vec::new();
        let mut used = std::collections::HashSet::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() != "Transpose" || !n.domain().is_empty() || used.contains(&nid) {
                continue;
            }
            let Some(&x) = n.inputs.first() else { continue };
            let Some(&inner_id) = a.producer.get(&x) else { continue };
            let inner = &graph.nodes[inner_id];
            if inner.op_type() != "Transpose" || !inner.domain().is_empty() || used.contains(&inner_id) {
                continue;
            }
            if !a.is_internal(model, x) || a.consumers.get(&x).map_or(0, Vec::len) != 1 {
                continue;
            }
            let (Some(p), Some(q)) = (perm(inner), perm(n)) else { continue };
            if p.len() != q.len() {
                continue;
            }
            let Some(r) = q
                .iter()
                .map(|&i| usize::try_from(i).ok().and_then(|i| p.get(i).copied()))
                .collect::<Option<Vec<i64>>>()
            else {
                continue;
            };
            merges.push((nid, inner.inputs[0], r));
            used.insert(nid);
            used.insert(inner_id);
        }
        let count = merges.len();
        let graph = &mut model.graphs[a.main];
        for (nid, source, r) in merges {
            let node = &mut graph.nodes[nid];
            node.inputs[0] = source;
            if let Some(at) = node.attributes.iter_mut().find(|at| at.name() == "perm") {
                at.ints = r;
            }
        }
        count
    }
}

/// A Transpose's explicit `perm`.
fn perm(n: &Node) -> Option<Vec<i64>> {
    match n.attribute("perm")?.value()? {
        AttrValue::Ints(p) => Some(p.to_vec()),
        _ => None,
    }
}
