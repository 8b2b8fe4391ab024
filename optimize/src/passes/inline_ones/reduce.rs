//! `ReduceSum(Mul(x, U))` and `ReduceMean(Mul(x, U))` with `U` uniform
//! (`c`) reduce `x` itself: the product is `c·x` broadcast to the Mul's
//! shape. Over an axis where `U` widened `x` from 1 (or added it) to `n`,
//! the sum counts `x` `n` times (the mean once) and `x` has nothing to
//! reduce; over the other reduced axes `x` is reduced as the product was.
//! The result is `Reduce(x)` over those axes, times `c` and the widening
//! counts (a ReduceMean when that is `1/count` of what `x` sums), expanded
//! where `U` widened a kept axis. Every size that enters the scale or the
//! Expand must be known.

use super::chain::Chain;
use super::dims::{expand_target, known_product, same, shape_of};
use super::{int, ints, is_float, is_reciprocal, quoted, value_text, Note, Rewrite};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{Model, NodeId};

/// The rewrite of ReduceSum/ReduceMean node `nid`, when it reduces a product with a uniform tensor.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    let op = n.op_type();
    let product = *n.inputs.first()?;
    let mul = &graph.nodes[*a.producer.get(&product)?];
    if mul.op_type() != "Mul" || !mul.domain().is_empty() || mul.inputs.len() != 2 {
        return None;
    }
    let (x, u_id, u) = match (uniform(model, a, mul.inputs[1]), uniform(model, a, mul.inputs[0])) {
        (Some(u), _) => (mul.inputs[0], mul.inputs[1], u),
        (None, Some(u)) => (mul.inputs[1], mul.inputs[0], u),
        _ => return None,
    };
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    let (p_shape, x_shape, out_shape) =
        (shape_of(model, a, product)?, shape_of(model, a, x)?, shape_of(model, a, out)?);
    let keepdims = int(n, "keepdims", 1) != 0;
    let axes = reduced_axes(model, a, n, op, opset, p_shape.len())?;
    let lead = p_shape.len().checked_sub(x_shape.len())?;
    let mut x_axes = Vec::new();
    let mut widened = Vec::new();
    for &i in &axes {
        let xd = i.checked_sub(lead).map(|j| &x_shape[j]);
        match xd {
            Some(d) if same(d, &p_shape[i]) => x_axes.push((i - lead) as i64),
            // x has 1 (or no axis) where the product has n: keepdims=0 must still drop x's axis.
            Some(DimReport::Known(1)) => {
                widened.push(&p_shape[i]);
                if !keepdims {
                    x_axes.push((i - lead) as i64);
                }
            }
            None => widened.push(&p_shape[i]),
            Some(_) => return None,
        }
    }
    let mut reached = x_shape.clone();
    for &j in x_axes.iter().rev() {
        if keepdims {
            reached[j as usize] = DimReport::Known(1);
        } else {
            reached.remove(j as usize);
        }
    }
    let repeated = if op == "ReduceSum" { known_product(&widened)? } else { 1 };
    let scale = u.value * repeated as f64;
    let summed: Vec<&DimReport> = x_axes.iter().map(|&j| &x_shape[j as usize]).collect();
    let mean = op == "ReduceMean"
        || is_float(dtype) && known_product(&summed).is_some_and(|k| k > 1 && is_reciprocal(scale, k as f64, dtype));
    let mut chain = Chain::new(graph, nid, x, opset);
    chain.reduce(if mean { "ReduceMean" } else { "ReduceSum" }, &x_axes, keepdims);
    chain.scale(dtype, if mean && op == "ReduceSum" { 1.0 } else { scale })?;
    chain.expand(expand_target(&reached, &out_shape)?.as_deref());
    let mut rewrite = chain.finish(model, a, nid, out)?;
    let list: Vec<String> = axes.iter().map(usize::to_string).collect();
    let verb = if op == "ReduceSum" { "sum" } else { "average" };
    let noun = if list.len() == 1 { "axis" } else { "axes" };
    rewrite.note = Some(Note {
        uniform: u_id,
        text: format!(
            "{verb}s {} times {} ({}) over {noun} {}",
            quoted(model, a, x),
            value_text(u.value),
            quoted(model, a, u_id),
            list.join(", ")
        ),
    });
    Some(rewrite)
}

/// The axes node `n` reduces, in `0..rank`, sorted; `None` when they are
/// not constant or the node reduces nothing (`noop_with_empty_axes`).
pub(super) fn reduced_axes(
    model: &Model,
    a: &Analysis,
    n: &diamond_ir::Node,
    op: &str,
    opset: i64,
    rank: usize,
) -> Option<Vec<usize>> {
    let since = if op == "ReduceSum" { 13 } else { 18 };
    let given: Option<Vec<i64>> = if opset >= since {
        match n.inputs.get(1).copied().filter(|&v| !a.graph(model).value_name(v).is_empty()) {
            Some(v) => Some(a.constant(model, v)?.as_i64s()?),
            None => None,
        }
    } else {
        ints(n, "axes")
    };
    let axes: Vec<i64> = match given {
        Some(axes) if !axes.is_empty() => axes,
        _ if int(n, "noop_with_empty_axes", 0) != 0 => return None,
        _ => (0..rank as i64).collect(),
    };
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|&i| usize::try_from(if i < 0 { i + rank as i64 } else { i }).ok().filter(|&i| i < rank))
        .collect::<Option<_>>()?;
    axes.sort_unstable();
    axes.dedup();
    Some(axes)
}
