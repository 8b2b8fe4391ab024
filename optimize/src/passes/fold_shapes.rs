//! `fold-shapes`: a node whose every output value propagation knows
//! completely — shape arithmetic on a static shape, `Shape` of a tensor
//! whose shape is known, integer and boolean tensors of known elements —
//! becomes initializers holding those elements. Floating-point results are
//! left to constant folding through the executor (value propagation
//! computes them in `f64`).

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{constant_tensor, remove_nodes};
use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::Model;
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
        let mut dead = HashSet::new();
        let mut tensors = Vec::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() == "Constant" && n.domain().is_empty() {
                continue;
            }
            if NONDETERMINISTIC.contains(&n.op_type()) || n.attributes.iter().any(|at| at.subgraphs().next().is_some()) {
                continue;
            }
            let named: Vec<_> = n.outputs.iter().copied().filter(|&v| !graph.value_name(v).is_empty()).collect();
            if named.is_empty() || named.iter().any(|&v| !a.is_internal(model, v)) {
                continue;
            }
            let folded: Option<Vec<_>> = named
                .iter()
                .map(|&v| {
                    let value = a.report.known_values.get(graph.value_name(v))?;
                    let integral = matches!(value.data, ConstData::Ints(_) | ConstData::Bools(_));
                    if !integral || value.data.len() > MAX_FOLDED_ELEMENTS || a.dtype(model, v) != Some(value.dtype) {
                        return None;
                    }
                    constant_tensor(graph.value_name(v), value)
                })
                .collect();
            if let Some(folded) = folded {
                dead.insert(nid);
                tensors.extend(folded);
            }
        }
        let graph = &mut model.graphs[a.main];
        remove_nodes(graph, &dead);
        graph.initializers.extend(tensors);
        dead.len()
    }
}
