//! A uniform operand `U` (every element `c`, more than one element) of a
//! broadcasting elementwise operator `op(x, U)` (either order) is the
//! scalar `c`: `op(x, c)`. Where `U` widened `x`, an Expand to the output's
//! shape follows — to `U`'s own shape input when a ConstantOfShape made it
//! (symbolic sizes included), to a known target otherwise. When `c` is the
//! operator's identity (`x + 0`, `x - 0`, `x · 1`, `x / 1`, `x ^ 1`,
//! `x and true`, `x or false`, `x xor false`) the operator goes: readers of
//! its output read `x` (or its Expand; an Identity keeps an output's name).

use super::budget::{exclusive_producers, paying};
use super::chain::{Chain, Ref};
use super::dims::{expand_target, same, shape_of};
use super::Rewrite;
use crate::rewrite::scalar_tensor;
use crate::uniform::uniform;
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{Model, NodeId, ValueId};

/// Binary operators with NumPy broadcasting of their two inputs.
const BROADCASTING: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Max",
    "Min",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "BitShift",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
];

/// The rewrite of node `nid`, when it is a broadcasting operator with a many-element uniform operand.
pub(super) fn plan(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<Rewrite> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    let op = *BROADCASTING.iter().find(|&&o| o == n.op_type())?;
    if n.inputs.len() != 2 || n.outputs.len() != 1 {
        return None;
    }
    let out = n.outputs[0];
    let out_shape = shape_of(model, a, out)?;
    for u_at in [1, 0] {
        let (u_id, x) = (n.inputs[u_at], n.inputs[1 - u_at]);
        let Some(u) = uniform(model, a, u_id) else { continue };
        let (Some(u_shape), Some(x_shape)) = (shape_of(model, a, u_id), shape_of(model, a, x)) else { continue };
        // A one-element operand is a scalar already.
        if u_shape.iter().all(|d| *d == DimReport::Known(1)) {
            continue;
        }
        let passes_x =
            identity(op, u_at, u.value) && a.dtype(model, x).is_some() && a.dtype(model, x) == a.dtype(model, out);
        let widens = !same_shape(&x_shape, &out_shape);
        if passes_x && !widens && a.is_internal(model, out) {
            let reads = vec![x];
            let freed = exclusive_producers(model, a, &n.inputs, &reads);
            return Some(Rewrite {
                replaced: nid,
                nodes: Vec::new(),
                tensors: Vec::new(),
                paid: paying(model, a, &freed),
                freed,
                reads,
                alias: Some((out, x)),
                note: None,
            });
        }
        let mut chain = Chain::new(graph, nid, x, opset);
        if !passes_x {
            let name = format!("{}_scalar", graph.value_name(u_id));
            let Some(scalar) = scalar_tensor("", a.dtype(model, u_id)?, u.value) else { continue };
            let c = chain.constant_as(&name, scalar);
            chain.step(op, "narrow", 1 - u_at, vec![c], n.attributes.clone());
        }
        if widens {
            match shape_input(model, a, u_id).filter(|_| same_shape(&u_shape, &out_shape)) {
                Some(s) => chain.step("Expand", "repeated", 0, vec![Ref::Old(s)], Vec::new()),
                None => match expand_target(&x_shape, &out_shape) {
                    Some(target) => chain.expand(target.as_deref()),
                    None => continue,
                },
            }
        }
        if let Some(rewrite) = chain.finish(model, a, nid, out) {
            return Some(rewrite);
        }
    }
    None
}

/// Whether `x op c` (or `c op x` for `u_at` 0) is `x`.
fn identity(op: &str, u_at: usize, c: f64) -> bool {
    match op {
        "Add" | "Or" | "Xor" => c == 0.0,
        "Mul" | "And" => c == 1.0,
        "Sub" => u_at == 1 && c == 0.0,
        "Div" | "Pow" => u_at == 1 && c == 1.0,
        _ => false,
    }
}

/// Two inferred shapes that are the same for every value of the symbols.
fn same_shape(p: &[DimReport], q: &[DimReport]) -> bool {
    p.len() == q.len() && p.iter().zip(q).all(|(x, y)| same(x, y))
}

/// The shape input of the ConstantOfShape that made `u`.
fn shape_input(model: &Model, a: &Analysis, u: ValueId) -> Option<ValueId> {
    let p = &a.graph(model).nodes[*a.producer.get(&u)?];
    (p.op_type() == "ConstantOfShape" && p.domain().is_empty()).then(|| p.inputs.first().copied()).flatten()
}
