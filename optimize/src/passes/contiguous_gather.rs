//! `contiguous-gather`: a Gather that reads every element of a flat tensor
//! in order is a Reshape. Dynamo writes `torch.as_strided` over contiguous
//! memory this way: `Gather(flat, Range(0, N, 1) · S ⊕ arange(S))`, the
//! indices `b·S + j` laid out as `[N, …S…]` — row-major, that is `0, 1, …,
//! N·S − 1`, so the result is `flat` reshaped to the indices' shape.
//!
//! Gates: the Gather's axis is 0 and its data has rank 1 with a proven
//! length of `N·S` (symbolic `N` compared by normal form); the indices are
//! `Add(Unsqueeze(Mul(Range(0, N, 1), S), axes), C)` with the Range's axis
//! first and every other axis of the Unsqueeze's output 1, and `C` a stored
//! integer tensor whose first axis is 1 and whose elements in row-major
//! order are `0, 1, …, S − 1`. The Gather becomes `Reshape(flat, [-1, C's
//! other axes])`; the index arithmetic is left for `dead-code`.

use super::pattern::{other, produced_by, scalar};
use super::Pass;
use crate::rewrite::{add_initializer, int64_vector, node, unique_name};
use crate::Analysis;
use diamond_infer::graph::{ConstData, DimReport, Elem};
use diamond_ir::term::SizeExpr;
use diamond_ir::{AttrValue, Model, NodeId};

pub(crate) struct ContiguousGather;

impl Pass for ContiguousGather {
    fn name(&self) -> &'static str {
        "contiguous-gather"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 13 {
            return 0;
        }
        let graph = a.graph(model);
        let found: Vec<(NodeId, Vec<i64>)> = graph
            .nodes
            .iter()
            .filter(|(_, n)| n.op_type() == "Gather" && n.domain().is_empty() && n.inputs.len() == 2)
            .filter_map(|(id, _)| target(model, a, id).map(|t| (id, t)))
            .collect();
        let count = found.len();
        for (id, shape) in found {
            let graph = &mut model.graphs[a.main];
            let (data, outputs, label) = {
                let gather = &graph.nodes[id];
                (gather.inputs[0], gather.outputs.clone(), gather.name.clone().unwrap_or_default())
            };
            let name = unique_name(graph, &format!("{}_shape", graph.value_name(outputs[0])));
            let target = graph.intern(&name);
            let reshape = node("Reshape", &label, vec![data, target], outputs, Vec::new());
            add_initializer(graph, int64_vector(&name, &shape), a.initializers_are_constants);
            graph.nodes[id] = reshape;
        }
        count
    }
}

/// The Reshape target replacing Gather `id`, when every gate holds.
fn target(model: &Model, a: &Analysis, id: NodeId) -> Option<Vec<i64>> {
    let graph = a.graph(model);
    let gather = &graph.nodes[id];
    if matches!(gather.attribute("axis").and_then(|x| x.value()), Some(AttrValue::Int(axis)) if axis != 0) {
        return None;
    }
    let (flat, indices) = (gather.inputs[0], gather.inputs[1]);
    let [length] = a.shape(model, flat)? else { return None };
    let (_, add) = produced_by(model, a, indices, "Add")?;
    // One operand is the stored arange C; the other the scaled, unsqueezed Range.
    let (spread, offsets) = add.inputs.iter().find_map(|&c| {
        let k = a.constant(model, c)?;
        let ConstData::Ints(elems) = &k.data else { return None };
        let row_major = elems.iter().enumerate().all(|(i, e)| e.as_int() == Some(i as i64));
        (row_major && k.shape.first() == Some(&1) && !elems.is_empty()).then(|| (other(add, c), k.shape.clone()))
    })?;
    let spread = spread?;
    let stride = offsets.iter().product::<usize>() as i64;
    let unsqueeze = &graph.nodes[*a.producer.get(&spread)?];
    if unsqueeze.op_type() != "Unsqueeze" || !unsqueeze.domain().is_empty() {
        return None;
    }
    let spread_shape = a.shape(model, spread)?;
    if spread_shape.len() != offsets.len() || spread_shape[1..].iter().any(|d| *d != DimReport::Known(1)) {
        return None;
    }
    let (_, mul) = produced_by(model, a, unsqueeze.inputs[0], "Mul")?;
    let range_out = mul.inputs.iter().copied().find(|&v| scalar(model, a, v).is_none())?;
    if scalar(model, a, other(mul, range_out)?)? != stride as f64 {
        return None;
    }
    let range = &graph.nodes[*a.producer.get(&range_out)?];
    if range.op_type() != "Range" || range.inputs.len() != 3 {
        return None;
    }
    if scalar(model, a, range.inputs[0])? != 0.0 || scalar(model, a, range.inputs[2])? != 1.0 {
        return None;
    }
    let limit = a.constant(model, range.inputs[1])?;
    let ConstData::Ints(limit) = &limit.data else { return None };
    let count = match limit.as_slice() {
        [Elem::Int(n)] => SizeExpr::constant(*n),
        [Elem::Expr(e)] => e.clone(),
        _ => return None,
    };
    let total = count.mul(&SizeExpr::constant(stride))?;
    let proven = match (length, total.as_constant()) {
        (DimReport::Known(l), Some(t)) => *l as i64 == t,
        (DimReport::Symbolic(l), None) => *l == total.to_string(),
        _ => false,
    };
    if !proven {
        return None;
    }
    Some(std::iter::once(-1).chain(offsets[1..].iter().map(|&d| d as i64)).collect())
}
