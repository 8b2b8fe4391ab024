//! Small matchers the fusion passes share: a value's only reader, the
//! other operand of a binary node, a scalar constant, and the check that
//! the nodes a fusion swallows may go.

use crate::Analysis;
use diamond_ir::{Model, Node, NodeId, ValueId};

/// The node reading `v`, when it is the only reader and `v` is internal.
pub(crate) fn sole_reader(model: &Model, a: &Analysis, v: ValueId) -> Option<NodeId> {
    match a.consumers.get(&v).map(Vec::as_slice) {
        Some([only]) if a.is_internal(model, v) => Some(*only),
        _ => None,
    }
}

/// `node` when it is the default-domain operator `op` with two operands.
pub(crate) fn binary<'m>(model: &'m Model, a: &Analysis, id: NodeId, op: &str) -> Option<&'m Node> {
    let node = &a.graph(model).nodes[id];
    (node.op_type() == op && node.domain().is_empty() && node.inputs.len() == 2 && node.outputs.len() == 1)
        .then_some(node)
}

/// The operand of a binary `node` that is not `v` (`v` once among them).
pub(crate) fn other(node: &Node, v: ValueId) -> Option<ValueId> {
    match node.inputs.as_slice() {
        [x, y] if *x == v && *y != v => Some(*y),
        [x, y] if *y == v && *x != v => Some(*x),
        _ => None,
    }
}

/// The value of a one-element numeric constant.
pub(crate) fn scalar(model: &Model, a: &Analysis, v: ValueId) -> Option<f64> {
    use diamond_infer::graph::ConstData;
    let k = a.constant(model, v)?;
    match &k.data {
        ConstData::Floats(f) if f.len() == 1 => Some(f[0]),
        ConstData::Ints(i) if i.len() == 1 => i[0].as_int().map(|n| n as f64),
        _ => None,
    }
}

/// Whether `x` is within float32 rounding of `want`.
pub(crate) fn close(x: f64, want: f64) -> bool {
    (x - want).abs() <= 1e-6 * want.abs().max(1.0)
}

/// The producer of `v` when it is the default-domain `op` with two operands.
pub(crate) fn produced_by<'m>(model: &'m Model, a: &Analysis, v: ValueId, op: &str) -> Option<(NodeId, &'m Node)> {
    let &id = a.producer.get(&v)?;
    binary(model, a, id, op).map(|n| (id, n))
}
