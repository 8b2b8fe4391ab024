//! `fuse-layer-norm`: the decomposed layer normalization —
//! `d = x − mean(x)`, `d / √(mean(d²) + ε)`, optionally times a weight and
//! plus a bias over the last axis — becomes one
//! `LayerNormalization(x, scale, bias, axis=-1, ε)` (opset 17 or later;
//! older exporters and hand-written models spell it out).
//!
//! Accepted spellings: `d²` as `Pow(d, 2)` or `d · d`; the division as
//! `d / √·` or `d · Reciprocal(√·)`; both means ReduceMean over the last
//! axis only, keeping dims (axes as an attribute or a stored input).
//! Without a weight the scale is a new initializer of ones. Gates as for
//! `fuse-rms-norm`: float32 (LayerNormalization's default `stash_type`
//! computes in float32), a known last-axis size, every swallowed value read
//! only inside the pattern and not part of the interface, the result's
//! shape `x`'s.

use super::pattern::{binary, other, replace_with_norms, scalar, sole_reader, NormMatch};
use super::Pass;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{AttrValue, ElemType, Model, NodeId, ValueId};

pub(crate) struct FuseLayerNorm;

impl Pass for FuseLayerNorm {
    fn name(&self) -> &'static str {
        "fuse-layer-norm"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 17 {
            return 0;
        }
        let graph = a.graph(model);
        let matches: Vec<NormMatch> = graph
            .nodes
            .iter()
            .filter(|(_, n)| n.op_type() == "Sub" && n.domain().is_empty() && n.inputs.len() == 2)
            .filter_map(|(id, _)| layer_norm(model, a, id))
            .collect();
        replace_with_norms(model, a, "LayerNormalization", matches)
    }
}

/// Whether ReduceMean `id` averages only the last axis of a rank-`rank`
/// input and keeps dims.
fn last_axis_mean(model: &Model, a: &Analysis, id: NodeId, rank: i64) -> bool {
    let n = &a.graph(model).nodes[id];
    if n.op_type() != "ReduceMean" || !n.domain().is_empty() {
        return false;
    }
    if matches!(n.attribute("keepdims").and_then(|k| k.value()), Some(AttrValue::Int(0))) {
        return false;
    }
    let axes = match (n.attribute("axes").and_then(|k| k.value()), n.inputs.get(1)) {
        (Some(AttrValue::Ints(axes)), _) => Some(axes.to_vec()),
        (None, Some(&v)) => a.constant(model, v).and_then(|k| k.as_i64s()),
        _ => None,
    };
    matches!(axes.as_deref(), Some([ax]) if *ax == -1 || *ax == rank - 1)
}

/// The layer normalization around `Sub(x, mean(x))` node `sub_id`.
fn layer_norm(model: &Model, a: &Analysis, sub_id: NodeId) -> Option<NormMatch> {
    let graph = a.graph(model);
    let sub = &graph.nodes[sub_id];
    let (x, mean_v) = (sub.inputs[0], sub.inputs[1]);
    let &mean_id = a.producer.get(&mean_v)?;
    let shape = a.shape(model, x)?;
    let rank = shape.len() as i64;
    if graph.nodes[mean_id].inputs.first() != Some(&x) || !last_axis_mean(model, a, mean_id, rank) {
        return None;
    }
    (sole_reader(model, a, mean_v)? == sub_id).then_some(())?;
    let width = match shape.last()? {
        DimReport::Known(w) => *w as usize,
        _ => return None,
    };
    if a.dtype(model, x) != Some(ElemType::Float) {
        return None;
    }
    // d has exactly two readers: the square and the division (or product).
    let d = sub.outputs[0];
    let mut readers: Vec<NodeId> = a.consumers.get(&d)?.clone();
    readers.dedup();
    if readers.len() != 2 || !a.is_internal(model, d) {
        return None;
    }
    let mut swallowed = vec![mean_id, sub_id];
    let (square_id, divide_id) = {
        let is_square = |id: NodeId| {
            let n = &graph.nodes[id];
            (n.op_type() == "Pow" && n.inputs[0] == d && scalar(model, a, n.inputs[1]) == Some(2.0))
                || (n.op_type() == "Mul" && n.inputs.len() == 2 && n.inputs[0] == d && n.inputs[1] == d)
        };
        if is_square(readers[0]) {
            (readers[0], readers[1])
        } else if is_square(readers[1]) {
            (readers[1], readers[0])
        } else {
            return None;
        }
    };
    let squares = graph.nodes[square_id].outputs[0];
    let var_id = sole_reader(model, a, squares)?;
    if graph.nodes[var_id].inputs.first() != Some(&squares) || !last_axis_mean(model, a, var_id, rank) {
        return None;
    }
    let plus_id = sole_reader(model, a, graph.nodes[var_id].outputs[0])?;
    let plus = binary(model, a, plus_id, "Add")?;
    let epsilon = scalar(model, a, other(plus, graph.nodes[var_id].outputs[0])?)?;
    let root_id = sole_reader(model, a, plus.outputs[0])?;
    let root = &graph.nodes[root_id];
    if root.op_type() != "Sqrt" || !root.domain().is_empty() {
        return None;
    }
    swallowed.extend([square_id, var_id, plus_id, root_id]);
    let r = root.outputs[0];
    let divide = &graph.nodes[divide_id];
    match divide.op_type() {
        "Div" if divide.inputs.len() == 2 && divide.inputs[0] == d && divide.inputs[1] == r => {}
        "Mul" if divide.inputs.len() == 2 => {
            let inv = other(divide, d)?;
            let (inv_id, _) = a.producer.get(&inv).map(|&i| (i, ())).filter(|(i, _)| {
                let n = &graph.nodes[*i];
                n.op_type() == "Reciprocal" && n.inputs[0] == r
            })?;
            (sole_reader(model, a, inv)? == divide_id && sole_reader(model, a, r)? == inv_id).then_some(())?;
            swallowed.push(inv_id);
        }
        _ => return None,
    }
    if divide.op_type() == "Div" {
        (sole_reader(model, a, r)? == divide_id).then_some(())?;
    }
    let normalized = divide.outputs[0];
    let vector = |v: ValueId| {
        let k = a.constant(model, v)?;
        (k.dtype == ElemType::Float && k.shape == [width]).then_some(v)
    };
    let mut last = divide_id;
    let mut out = normalized;
    let mut scale = None;
    if let Some(id) = sole_reader(model, a, out) {
        if let Some(w) = binary(model, a, id, "Mul").and_then(|m| other(m, out)).and_then(vector) {
            swallowed.push(last);
            (last, out, scale) = (id, graph.nodes[id].outputs[0], Some(w));
        }
    }
    let mut bias = None;
    if let Some(id) = sole_reader(model, a, out) {
        if let Some(b) = binary(model, a, id, "Add").and_then(|n| other(n, out)).and_then(vector) {
            swallowed.push(last);
            (last, out, bias) = (id, graph.nodes[id].outputs[0], Some(b));
        }
    }
    (a.shape(model, out)? == shape).then_some(())?;
    Some(NormMatch { x, scale, bias, width, epsilon, last, swallowed })
}
