//! A sum divided by its count is a mean: `Div(ReduceSum(x), n)` where `n`
//! is the product of the reduced extents of `x`, and `Mul(ReduceSum(x),
//! 1/n)` (either order), become `ReduceMean(x)` over the same axes (float
//! types only: an integer Div rounds). `n` may be a constant or a count
//! computed from `Shape(x)`: the integer elements value propagation knows,
//! read through Cast and one-element reshapes, must equal the product of
//! the extents as a size expression (`8*seq`), so symbolic counts are
//! proven, never assumed. The divisor must not widen the sum.

use super::chain::Chain;
use super::dims::{known_product, product, same, shape_of};
use super::reduce::reduced_axes;
use super::{int, is_float, is_reciprocal, Rewrite};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_ir::term::SizeExpr;
use diamond_ir::{Model, NodeId, ValueId};

/// Operators that keep a one-element value's element.
const KEEPS_ELEMENT: &[&str] = &["Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"];

/// The rewrite of Div/Mul node `nid`, when it turns a sum into a mean.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.inputs.len() != 2 {
        return None;
    }
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    if !is_float(dtype) {
        return None;
    }
    let orders: &[(usize, usize)] = if n.op_type() == "Div" { &[(0, 1)] } else { &[(0, 1), (1, 0)] };
    for &(si, ki) in orders {
        let (s, k) = (n.inputs[si], n.inputs[ki]);
        let Some(sum) = a.producer.get(&s).map(|&p| &graph.nodes[p]) else { continue };
        if sum.op_type() != "ReduceSum" || !sum.domain().is_empty() || sum.inputs.is_empty() {
            continue;
        }
        let x = sum.inputs[0];
        let (Some(x_shape), Some(s_shape), Some(out_shape)) =
            (shape_of(model, a, x), shape_of(model, a, s), shape_of(model, a, out))
        else {
            continue;
        };
        let keeps_shape = s_shape.len() == out_shape.len() && s_shape.iter().zip(&out_shape).all(|(p, q)| same(p, q));
        let Some(axes) = reduced_axes(model, a, sum, "ReduceSum", opset, x_shape.len()) else { continue };
        if !keeps_shape || axes.is_empty() {
            continue;
        }
        let extents: Vec<_> = axes.iter().map(|&i| &x_shape[i]).collect();
        let counted = if n.op_type() == "Div" {
            product(&extents).is_some_and(|count| divides_by_count(model, a, k, &count))
        } else {
            let count = known_product(&extents);
            uniform(model, a, k).zip(count).is_some_and(|(u, c)| is_reciprocal(u.value, c as f64, dtype))
        };
        if !counted {
            continue;
        }
        let axes: Vec<i64> = axes.iter().map(|&i| i as i64).collect();
        let mut chain = Chain::new(graph, nid, x, opset);
        chain.reduce("ReduceMean", &axes, int(sum, "keepdims", 1) != 0);
        return chain.finish(model, a, nid, out);
    }
    None
}

/// Whether `k` holds `count` in every element: a uniform constant equal to
/// it, or one integer element value propagation knows as that expression.
fn divides_by_count(model: &Model, a: &Analysis, k: ValueId, count: &SizeExpr) -> bool {
    if let Some(u) = uniform(model, a, k) {
        return count.as_constant().is_some_and(|c| u.value == c as f64);
    }
    let graph = a.graph(model);
    let mut v = k;
    for _ in 0..16 {
        if let Some(known) = a.constant(model, v) {
            return match &known.data {
                diamond_infer::graph::ConstData::Ints(e) if e.len() == 1 => e[0].as_expr().as_ref() == Some(count),
                _ => false,
            };
        }
        let Some(p) = a.producer.get(&v).map(|&p| &graph.nodes[p]) else { return false };
        if !p.domain().is_empty() || !KEEPS_ELEMENT.contains(&p.op_type()) || p.inputs.is_empty() {
            return false;
        }
        // A Cast to a narrow integer could wrap the count.
        let wide = |t: diamond_ir::ElemType| {
            is_float(t) || matches!(t, diamond_ir::ElemType::Int64 | diamond_ir::ElemType::Int32)
        };
        if p.op_type() == "Cast" && !a.dtype(model, v).is_some_and(wide) {
            return false;
        }
        if a.shape(model, v).is_none_or(|s| s.iter().any(|d| *d != diamond_infer::graph::DimReport::Known(1))) {
            return false;
        }
        v = p.inputs[0];
    }
    false
}
