//! Small matchers the fusion passes share — a value's only reader, the
//! other operand of a binary node, a scalar constant, a stored float tensor,
//! attributes with their defaults, an inference BatchNormalization — and the rewrite of
//! a matched normalization into its ONNX operator.

use crate::rewrite::{add_initializer, float_attr, float_tensor, int_attr, node, remove_nodes, unique_name};
use crate::Analysis;
use diamond_ir::{Model, Node, NodeId, ValueId};
use std::collections::HashSet;

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

/// A stored float32 tensor's values (as f64) and shape: an initializer, not
/// a value computed from them.
pub(crate) fn stored_floats(model: &Model, a: &Analysis, v: ValueId) -> Option<(Vec<f64>, Vec<usize>)> {
    use diamond_infer::graph::ConstData;
    if !a.initializers.contains_key(&v) {
        return None;
    }
    let k = a.constant(model, v)?;
    match (&k.data, k.dtype) {
        (ConstData::Floats(f), diamond_ir::ElemType::Float) => Some((f.clone(), k.shape.clone())),
        _ => None,
    }
}

/// `node`'s int attribute `name`, or `default`.
pub(crate) fn int_or(node: &Node, name: &str, default: i64) -> i64 {
    match node.attribute(name).and_then(|a| a.value()) {
        Some(diamond_ir::AttrValue::Int(i)) => i,
        _ => default,
    }
}

/// `node`'s float attribute `name` (as f64), or `default`.
pub(crate) fn float_or(node: &Node, name: &str, default: f64) -> f64 {
    match node.attribute(name).and_then(|a| a.value()) {
        Some(diamond_ir::AttrValue::Float(f)) => f64::from(f),
        _ => default,
    }
}

/// Whether `bn` is an inference-mode BatchNormalization writing only its
/// first output.
pub(crate) fn inference_batch_norm(graph: &diamond_ir::Graph, bn: &Node) -> bool {
    bn.op_type() == "BatchNormalization"
        && bn.domain().is_empty()
        && bn.inputs.len() == 5
        && int_or(bn, "training_mode", 0) == 0
        && bn.outputs.iter().skip(1).all(|&o| graph.value_name(o).is_empty())
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

/// A matched normalization over the last axis: its input, stored scale
/// (`None`: ones of `width` are made) and bias, epsilon, the node whose
/// output it writes and the nodes it swallows.
pub(crate) struct NormMatch {
    pub x: ValueId,
    pub scale: Option<ValueId>,
    pub bias: Option<ValueId>,
    pub width: usize,
    pub epsilon: f64,
    pub last: NodeId,
    pub swallowed: Vec<NodeId>,
}

/// Replaces each match by `op(x, scale[, bias]) {axis=-1, epsilon}` in its
/// last node's place; returns how many.
pub(crate) fn replace_with_norms(model: &mut Model, a: &Analysis, op: &str, matches: Vec<NormMatch>) -> usize {
    let count = matches.len();
    let mut dead = HashSet::new();
    for m in matches {
        let graph = &mut model.graphs[a.main];
        let scale = match m.scale {
            Some(s) => s,
            None => {
                let base = format!("{}_scale", graph.value_name(graph.nodes[m.last].outputs[0]));
                let name = unique_name(graph, &base);
                let id = graph.intern(&name);
                add_initializer(
                    graph,
                    float_tensor(&name, &[m.width], &vec![1.0; m.width]),
                    a.initializers_are_constants,
                );
                id
            }
        };
        let last = &graph.nodes[m.last];
        let label = last.name.clone().unwrap_or_default();
        let mut inputs = vec![m.x, scale];
        inputs.extend(m.bias);
        let attributes = vec![int_attr("axis", -1), float_attr("epsilon", m.epsilon as f32)];
        let fused = node(op, &label, inputs, last.outputs.clone(), attributes);
        graph.nodes[m.last] = fused;
        dead.extend(m.swallowed);
    }
    remove_nodes(&mut model.graphs[a.main], &dead);
    count
}
