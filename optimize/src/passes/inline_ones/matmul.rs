//! `MatMul(x, U)` with `U` uniform of rank 1 or 2 (`[K]`, `[K, N]`) is
//! `ReduceSum(x)` over the contracted last axis, times `c` when `c ≠ 1`,
//! expanded to `N` columns when `N ≠ 1`; `MatMul(U, x)` likewise over `x`'s
//! second-last axis. A uniform operand of rank ≤ 2 adds no batch axes, so
//! the shapes agree by construction; `N`/`M` must be known sizes. `c = 1/K`
//! is a mean: one ReduceMean, no scale.

use super::chain::Chain;
use super::dims::known_dim;
use super::{is_float, is_reciprocal, quoted, Note, Rewrite};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_ir::{Model, NodeId, ValueId};

/// The rewrite of MatMul node `nid`, when an operand is a small uniform tensor.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.inputs.len() != 2 {
        return None;
    }
    let (lhs, rhs) = (n.inputs[0], n.inputs[1]);
    let small = |v: ValueId| a.rank(model, v).is_some_and(|r| r <= 2);
    let (x, u_operand, u, summed, repeat) = if let Some(u) = uniform(model, a, rhs).filter(|_| small(rhs)) {
        let repeat = match a.rank(model, rhs)? {
            2 => Some(vec![known_dim(model, a, rhs, 1)? as i64]),
            _ => None,
        };
        (lhs, rhs, u, -1i64, repeat)
    } else if let Some(u) = uniform(model, a, lhs).filter(|_| small(lhs)) {
        let repeat = match a.rank(model, lhs)? {
            2 => Some(vec![known_dim(model, a, lhs, 0)? as i64, 1]),
            _ => None,
        };
        (rhs, lhs, u, -2i64, repeat)
    } else {
        return None;
    };
    let rank = a.rank(model, x)?;
    if rank < 2 {
        return None;
    }
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    let contracted = known_dim(model, a, x, summed as isize);
    let mean = is_float(dtype) && contracted.is_some_and(|k| is_reciprocal(u.value, k as f64, dtype));
    let mut chain = Chain::new(graph, nid, x, opset);
    chain.reduce(if mean { "ReduceMean" } else { "ReduceSum" }, &[summed], repeat.is_some());
    chain.scale(dtype, if mean { 1.0 } else { u.value })?;
    // A rank-2 uniform operand repeats the sum along its other axis (a no-op when that is 1).
    chain.expand(repeat.as_deref().filter(|r| r.iter().product::<i64>() != 1));
    let mut rewrite = chain.finish(model, a, nid, out)?;
    let axis = rank as i64 + summed;
    let purpose = format!("sum axis {axis} of {}", quoted(model, a, x));
    rewrite.note = Some(Note::multiplies(model, a, u_operand, u.value, &purpose));
    Some(rewrite)
}
