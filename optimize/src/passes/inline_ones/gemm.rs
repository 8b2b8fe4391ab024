//! `Gemm(A, B, C)` = `alpha·A'·B' + beta·C` (`A'` is `A` or, with
//! `transA`, its transpose; `B'` likewise) with a uniform operand `c`:
//! - uniform `B`: each row of `A'` summed, `ReduceSum(A)` over axis 1 (or
//!   axis 0 with `transA`, then a Transpose to a column);
//! - uniform `A`: each column of `B'` summed, `ReduceSum(B)` over axis 0
//!   (or axis 1 with `transB`, a row without keepdims);
//!
//! times `alpha·c` (a ReduceMean when that is `1/K`), plus `beta·C` (C
//! itself, a scalar when uniform, or a stored scaled copy), expanded to
//! the output's shape where the sum and `C` do not already broadcast to
//! it. The shapes are the analysis's; a case that needs a node more than
//! the Gemm and its uniform operand's producers is left alone.

use super::addend::addend;
use super::chain::Chain;
use super::dims::{broadcast, expand_target, shape_of};
use super::{float, int, is_float, is_reciprocal, quoted, Note, Rewrite};
use crate::rewrite::ints_attr;
use crate::uniform::uniform;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{Model, NodeId};

/// The rewrite of Gemm node `nid`, when `A` or `B` is uniform.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.inputs.len() < 2 {
        return None;
    }
    let (trans_a, trans_b) = (int(n, "transA", 0) != 0, int(n, "transB", 0) != 0);
    let (alpha, beta) = (float(n, "alpha", 1.0), float(n, "beta", 1.0));
    let c = n.inputs.get(2).copied().filter(|&v| !graph.value_name(v).is_empty() && beta != 0.0);
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    let out_shape = shape_of(model, a, out)?;
    // The summed operand, the uniform one, the summed axis, keepdims, and a Transpose after.
    let (x, u_id, u, axis, keepdims, transpose) = if let Some(u) = uniform(model, a, n.inputs[1]) {
        (n.inputs[0], n.inputs[1], u, if trans_a { 0 } else { 1 }, true, trans_a)
    } else if let Some(u) = uniform(model, a, n.inputs[0]) {
        (n.inputs[1], n.inputs[0], u, if trans_b { 1 } else { 0 }, !trans_b, false)
    } else {
        return None;
    };
    let x_shape = shape_of(model, a, x)?;
    if x_shape.len() != 2 {
        return None;
    }
    let mut sum_shape = x_shape.clone();
    if keepdims {
        sum_shape[axis] = DimReport::Known(1);
    } else {
        sum_shape.remove(axis);
    }
    if transpose {
        sum_shape.reverse();
    }
    let scale = alpha * u.value;
    let mean = is_float(dtype) && matches!(x_shape[axis], DimReport::Known(k) if is_reciprocal(scale, k as f64, dtype));
    let mut chain = Chain::new(graph, nid, x, opset);
    chain.reduce(if mean { "ReduceMean" } else { "ReduceSum" }, &[axis as i64], keepdims);
    if transpose {
        chain.step("Transpose", "column", 0, Vec::new(), vec![ints_attr("perm", &[1, 0])]);
    }
    chain.scale(dtype, if mean { 1.0 } else { scale })?;
    let mut shape = sum_shape;
    if let Some(c) = c {
        let (term, scalar) = addend(model, a, &mut chain, c, beta, None)?;
        let c_shape = if scalar { Vec::new() } else { shape_of(model, a, c)? };
        chain.step("Add", "biased", 0, vec![term], Vec::new());
        shape = broadcast(&shape, &c_shape)?;
    }
    chain.expand(expand_target(&shape, &out_shape)?.as_deref());
    let mut rewrite = chain.finish(model, a, nid, out)?;
    let purpose = format!("sum axis {axis} of {}", quoted(model, a, x));
    rewrite.note = Some(Note::multiplies(model, a, u_id, u.value, &purpose));
    Some(rewrite)
}
