//! `fuse-gemm`: `Add(MatMul(A, B), C)` becomes `Gemm(A, B, C)` when the
//! ranks allow it. Gemm multiplies matrices only, so `A` and `B` must be
//! proven rank 2; `C` must broadcast one way to the product's `[M, N]`
//! (each of its axes, aligned from the right, 1 or the product's size on
//! that axis, symbolic sizes compared by their normal form), so the Add
//! changes no shape. The product's only reader is the Add and it is not
//! part of the model's interface. Floating-point element types only (the
//! ones every Gemm opset takes); opset 7 or later (where Gemm broadcasts `C`
//! as NumPy does one way, and needs no `broadcast` attribute).
//!
//! The Gemm takes the Add's place in the node list (`C` may be computed
//! after the MatMul) and writes the Add's output.

use super::Pass;
use crate::rewrite::{node, remove_nodes};
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{ElemType, Model, NodeId};
use std::collections::HashSet;

pub(crate) struct MatMulAdd;

impl Pass for MatMulAdd {
    fn name(&self) -> &'static str {
        "fuse-gemm"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 7 {
            return 0;
        }
        let graph = a.graph(model);
        let mut fusions: Vec<(NodeId, NodeId)> = Vec::new();
        let mut used: HashSet<NodeId> = HashSet::new();
        for (add_id, add) in graph.nodes.iter() {
            if add.op_type() != "Add" || !add.domain().is_empty() || add.inputs.len() != 2 {
                continue;
            }
            for side in [0, 1] {
                let (p, c) = (add.inputs[side], add.inputs[1 - side]);
                let Some(&mm_id) = a.producer.get(&p) else { continue };
                let mm = &graph.nodes[mm_id];
                if mm.op_type() != "MatMul" || !mm.domain().is_empty() || mm.inputs.len() != 2 || used.contains(&mm_id)
                {
                    continue;
                }
                if !a.is_internal(model, p) || a.consumers.get(&p).map_or(0, Vec::len) != 1 {
                    continue;
                }
                let float = |t: Option<ElemType>| {
                    matches!(t, Some(ElemType::Float | ElemType::Float16 | ElemType::Double | ElemType::Bfloat16))
                };
                if !float(a.dtype(model, p)) || a.dtype(model, p) != a.dtype(model, c) {
                    continue;
                }
                if a.rank(model, mm.inputs[0]) != Some(2) || a.rank(model, mm.inputs[1]) != Some(2) {
                    continue;
                }
                let (Some(product), Some(bias), Some(sum)) =
                    (a.shape(model, p), a.shape(model, c), a.shape(model, add.outputs[0]))
                else {
                    continue;
                };
                if product.len() != 2 || bias.len() > 2 || sum != product {
                    continue;
                }
                let offset = 2 - bias.len();
                let fits = bias.iter().enumerate().all(|(i, d)| *d == DimReport::Known(1) || *d == product[offset + i]);
                if !fits {
                    continue;
                }
                used.insert(mm_id);
                fusions.push((mm_id, add_id));
                break;
            }
        }
        let count = fusions.len();
        let mut dead = HashSet::new();
        for (mm_id, add_id) in fusions {
            let graph = &mut model.graphs[a.main];
            let (mm, add) = (&graph.nodes[mm_id], &graph.nodes[add_id]);
            let c = if a.producer.get(&add.inputs[0]) == Some(&mm_id) { add.inputs[1] } else { add.inputs[0] };
            let name = mm.name.clone().or_else(|| add.name.clone()).unwrap_or_default();
            let gemm = node("Gemm", &name, vec![mm.inputs[0], mm.inputs[1], c], add.outputs.clone(), Vec::new());
            graph.nodes[add_id] = gemm;
            dead.insert(mm_id);
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}
