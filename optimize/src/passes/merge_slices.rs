//! `merge-slices`: a Slice of a Slice over different axes
//! is one Slice over both sets of axes — `x[:, 0::2][:, :, 0::2]` is
//! `x[:, 0::2, 0::2]`, how exporters write a patch merge. Starts, ends,
//! axes and steps must be stored constants (opset 10 or later, where they
//! are inputs); negative axes are read against the data's rank; two slices
//! touching the same axis are left alone (their composition is not a
//! concatenation of the two). The outer Slice reads the inner one's data;
//! the inner one stays while something else reads it (the node count never
//! grows) and is left for `dead-code` otherwise, so the two row and column
//! slices of a patch merge (2 + 4 Slices) become 4.

use super::Pass;
use crate::rewrite::{add_initializer, int64_vector, unique_name};
use crate::Analysis;
use diamond_ir::{Model, NodeId, Tensor, ValueId};
use std::collections::HashSet;

pub(crate) struct MergeSlices;

/// One Slice's parameters, axes made non-negative.
struct Params {
    starts: Vec<i64>,
    ends: Vec<i64>,
    axes: Vec<i64>,
    steps: Vec<i64>,
}

impl Pass for MergeSlices {
    fn name(&self) -> &'static str {
        "merge-slices"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 10 {
            return 0;
        }
        let graph = a.graph(model);
        let mut merges: Vec<(NodeId, ValueId, [Tensor; 4])> = Vec::new();
        let mut touched: HashSet<NodeId> = HashSet::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() != "Slice" || !n.domain().is_empty() || touched.contains(&nid) {
                continue;
            }
            let x = n.inputs[0];
            let Some(&inner_id) = a.producer.get(&x) else { continue };
            let inner = &graph.nodes[inner_id];
            if inner.op_type() != "Slice" || !inner.domain().is_empty() {
                continue;
            }
            let source = inner.inputs[0];
            let Some(rank) = a.rank(model, source) else { continue };
            let (Some(outer), Some(first)) = (params(model, a, n, rank), params(model, a, inner, rank)) else {
                continue;
            };
            if outer.axes.iter().any(|ax| first.axes.contains(ax)) || !a.is_internal(model, x) {
                continue;
            }
            let out = graph.value_name(n.outputs[0]);
            let join = |a: &[i64], b: &[i64]| a.iter().chain(b).copied().collect::<Vec<i64>>();
            let name = |what: &str| unique_name(graph, &format!("{out}_{what}"));
            let tensors = [
                int64_vector(&name("starts"), &join(&first.starts, &outer.starts)),
                int64_vector(&name("ends"), &join(&first.ends, &outer.ends)),
                int64_vector(&name("axes"), &join(&first.axes, &outer.axes)),
                int64_vector(&name("steps"), &join(&first.steps, &outer.steps)),
            ];
            touched.insert(nid);
            merges.push((nid, source, tensors));
        }
        let count = merges.len();
        for (nid, source, tensors) in merges {
            let graph = &mut model.graphs[a.main];
            let mut inputs = vec![source];
            for t in tensors {
                inputs.push(graph.intern(t.name.as_deref().unwrap_or("")));
                add_initializer(graph, t, a.initializers_are_constants);
            }
            graph.nodes[nid].inputs = inputs;
        }
        count
    }
}

/// The stored parameters of Slice `n` over data of rank `rank`.
fn params(model: &Model, a: &Analysis, n: &diamond_ir::Node, rank: usize) -> Option<Params> {
    let input = |i: usize| -> Option<Option<Vec<i64>>> {
        match n.inputs.get(i) {
            Some(&v) if !a.graph(model).value_name(v).is_empty() => Some(Some(a.constant(model, v)?.as_i64s()?)),
            _ => Some(None),
        }
    };
    let starts = input(1)??;
    let ends = input(2)??;
    let axes = match input(3)? {
        Some(axes) => axes,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = input(4)?.unwrap_or_else(|| vec![1; starts.len()]);
    let rank = rank as i64;
    let axes: Vec<i64> = axes.iter().map(|&ax| if ax < 0 { ax + rank } else { ax }).collect();
    let distinct: HashSet<&i64> = axes.iter().collect();
    if axes.iter().any(|&ax| !(0..rank).contains(&ax))
        || distinct.len() != axes.len()
        || ends.len() != starts.len()
        || axes.len() != starts.len()
        || steps.len() != starts.len()
    {
        return None;
    }
    Some(Params { starts, ends, axes, steps })
}
