//! `fuse-rms-norm`: the decomposed RMS normalization of Llama, T5 and their
//! kin — `x · 1/√(mean(x², last axis) + ε)`, optionally times a weight over
//! the last axis — becomes one `RMSNormalization(x, scale, axis=-1, ε)`
//! (opset 23 or later; `--target-opset 23` upgrades a model first).
//!
//! Accepted spellings: `x²` as `Pow(x, 2)` or `x · x`; the inverse root as
//! `Reciprocal(Sqrt(·))`, `1 / Sqrt(·)`, or a division `x / Sqrt(·)`; the
//! mean a ReduceMean over the last axis only, keeping dims (axes as an
//! attribute or a stored input). Without a weight the scale is a new
//! initializer of ones. Gates: float32 (RMSNormalization computes in
//! float32, so only there is the fused result the same arithmetic); the
//! last axis's size is known; every swallowed value has one reader and is
//! not part of the interface; the result's shape is `x`'s.

use super::pattern::{binary, other, produced_by, replace_with_norms, scalar, sole_reader, NormMatch};
use super::Pass;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{AttrValue, ElemType, Model, NodeId};

pub(crate) struct FuseRmsNorm;

impl Pass for FuseRmsNorm {
    fn name(&self) -> &'static str {
        "fuse-rms-norm"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 23 {
            return 0;
        }
        let graph = a.graph(model);
        let matches: Vec<NormMatch> = graph
            .nodes
            .iter()
            .filter(|(_, n)| n.op_type() == "ReduceMean" && n.domain().is_empty())
            .filter_map(|(id, _)| rms_norm(model, a, id))
            .collect();
        replace_with_norms(model, a, "RMSNormalization", matches)
    }
}

/// The RMS normalization around ReduceMean `mean_id`, when every gate holds.
fn rms_norm(model: &Model, a: &Analysis, mean_id: NodeId) -> Option<NormMatch> {
    let graph = a.graph(model);
    let mean = &graph.nodes[mean_id];
    if matches!(mean.attribute("keepdims").and_then(|k| k.value()), Some(AttrValue::Int(0))) {
        return None;
    }
    let squares = mean.inputs[0];
    let axes: Vec<i64> = match (mean.attribute("axes").and_then(|k| k.value()), mean.inputs.get(1)) {
        (Some(AttrValue::Ints(axes)), _) => axes.to_vec(),
        (None, Some(&v)) => a.constant(model, v)?.as_i64s()?,
        _ => return None,
    };
    (sole_reader(model, a, squares)? == mean_id).then_some(())?;
    let (square_id, square) = match produced_by(model, a, squares, "Pow") {
        Some((id, pow)) => (scalar(model, a, pow.inputs[1])? == 2.0).then_some((id, pow))?,
        None => produced_by(model, a, squares, "Mul").filter(|(_, m)| m.inputs[0] == m.inputs[1])?,
    };
    let x = square.inputs[0];
    let shape = a.shape(model, x)?;
    let rank = shape.len() as i64;
    if axes.len() != 1 || (axes[0] != -1 && axes[0] != rank - 1) || rank == 0 {
        return None;
    }
    let width = match shape.last()? {
        DimReport::Known(d) => *d as usize,
        _ => return None,
    };
    if a.dtype(model, x) != Some(ElemType::Float) {
        return None;
    }
    let plus_id = sole_reader(model, a, mean.outputs[0])?;
    let plus = binary(model, a, plus_id, "Add")?;
    let epsilon = scalar(model, a, other(plus, mean.outputs[0])?)?;
    let root_id = sole_reader(model, a, plus.outputs[0])?;
    let root = &graph.nodes[root_id];
    if root.op_type() != "Sqrt" || !root.domain().is_empty() {
        return None;
    }
    let r = root.outputs[0];
    let next_id = sole_reader(model, a, r)?;
    let next = &graph.nodes[next_id];
    let mut swallowed = vec![square_id, mean_id, plus_id, root_id];
    // x · inverse root, in one of three spellings.
    let normalized_id = match next.op_type() {
        "Reciprocal" => {
            let mul_id = sole_reader(model, a, next.outputs[0])?;
            let mul = binary(model, a, mul_id, "Mul")?;
            (other(mul, next.outputs[0])? == x).then_some(())?;
            swallowed.push(next_id);
            mul_id
        }
        "Div" if next.inputs.len() == 2 && next.inputs[1] == r && next.inputs[0] == x => next_id,
        "Div" if next.inputs.len() == 2 && next.inputs[1] == r && scalar(model, a, next.inputs[0]) == Some(1.0) => {
            let mul_id = sole_reader(model, a, next.outputs[0])?;
            let mul = binary(model, a, mul_id, "Mul")?;
            (other(mul, next.outputs[0])? == x).then_some(())?;
            swallowed.push(next_id);
            mul_id
        }
        _ => return None,
    };
    let normalized = graph.nodes[normalized_id].outputs[0];
    // An optional weight over the last axis.
    let weighted = sole_reader(model, a, normalized).and_then(|id| {
        let mul = binary(model, a, id, "Mul")?;
        let w = other(mul, normalized)?;
        let k = a.constant(model, w)?;
        (k.dtype == ElemType::Float && k.shape == [width]).then_some((id, w))
    });
    let (last, scale) = match weighted {
        Some((id, w)) => {
            swallowed.push(normalized_id);
            (id, Some(w))
        }
        None => (normalized_id, None),
    };
    let out = graph.nodes[last].outputs[0];
    (a.shape(model, out)? == shape).then_some(())?;
    Some(NormMatch { x, scale, bias: None, width, epsilon, last, swallowed })
}
