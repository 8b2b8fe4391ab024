//! `fold-shapes`: a node whose every output value propagation knows
//! completely — shape arithmetic on a static shape, `Shape` of a tensor
//! whose shape is known, integer and boolean tensors of known elements —
//! becomes initializers holding those elements. Floating-point results are
//! left to constant folding through the executor (value propagation
//! computes them in `f64`).

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{add_initializer, constant_tensor, remove_nodes};
use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::{Model, Tensor, ValueId};
use std::collections::HashSet;

pub(crate) struct FoldShapes;

/// The most elements one folded output may hold.
const MAX_FOLDED_ELEMENTS: usize = 1 << 16;

impl Pass for FoldShapes {
    fn name(&self) -> &'static str {
        "fold-shapes"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        // Nodes whose every named output is known, with those outputs as tensors.
        let mut folded: Vec<(diamond_ir::NodeId, Vec<(ValueId, Tensor)>)> = Vec::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() == "Constant" && n.domain().is_empty() {
                continue;
            }
            if NONDETERMINISTIC.contains(&n.op_type()) || n.attributes.iter().any(|at| at.subgraphs().next().is_some())
            {
                continue;
            }
            let named: Vec<ValueId> = n.outputs.iter().copied().filter(|&v| !graph.value_name(v).is_empty()).collect();
            if named.is_empty() || named.iter().any(|&v| !a.is_internal(model, v)) {
                continue;
            }
            let tensors: Option<Vec<(ValueId, Tensor)>> = named
                .iter()
                .map(|&v| {
                    let value = a.report.known_values.get(&v)?;
                    let integral = matches!(value.data, ConstData::Ints(_) | ConstData::Bools(_));
                    if !integral || value.data.len() > MAX_FOLDED_ELEMENTS || a.dtype(model, v) != Some(value.dtype) {
                        return None;
                    }
                    Some((v, constant_tensor(graph.value_name(v), value)?))
                })
                .collect();
            if let Some(tensors) = tensors {
                folded.push((nid, tensors));
            }
        }
        let dead: HashSet<diamond_ir::NodeId> = folded.iter().map(|(n, _)| *n).collect();
        // Only values some remaining node reads become initializers; the rest
        // of the scaffolding goes with its nodes.
        let read_by_rest = |v: &ValueId| a.consumers.get(v).is_some_and(|c| c.iter().any(|n| !dead.contains(n)));
        let tensors: Vec<Tensor> =
            folded.into_iter().flat_map(|(_, ts)| ts).filter(|(v, _)| read_by_rest(v)).map(|(_, t)| t).collect();
        let graph = &mut model.graphs[a.main];
        remove_nodes(graph, &dead);
        for t in tensors {
            add_initializer(graph, t, a.initializers_are_constants);
        }
        dead.len()
    }
}
