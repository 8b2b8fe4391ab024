//! `inline-ones`: a uniform tensor (every element `c`, see `uniform.rs`)
//! used to sum out an axis is folded into the reduction and never
//! materialized (seed 000's ones-vector idiom).
//! - `MatMul(x, U)` with `U` uniform of rank 1 or 2 (`[K]`, `[K, N]`) is
//!   `ReduceSum(x)` over the contracted last axis, times `c` when `c ≠ 1`,
//!   expanded to `N` columns when `N ≠ 1`; `MatMul(U, x)` likewise over
//!   `x`'s second-last axis. A uniform operand of rank ≤ 2 adds no batch
//!   axes, so the shapes agree by construction; `N`/`M` must be known sizes.
//! - `Einsum(x, U)` whose uniform operand's labels all label `x` and whose
//!   output is `x`'s labels minus summed ones is `ReduceSum(x)` over them.
//! - `Gemm(A, U)` (no `C`, `transA = 0`) is `alpha·c·ReduceSum(A)` over
//!   `A`'s second axis, repeated to `U`'s columns.
//! - `c = 1/K` is a mean: one ReduceMean. A rewrite that would leave more
//!   nodes than the MatMul and the nodes computing only its uniform operand
//!   is not made.
//! - `Mul(x, U)` where `U` holds more than one element and `x` has the
//!   output's shape becomes `Mul(x, c)` with a scalar `c`.
//!
//! The uniform tensor and what computed it are left for `dead-code`.

use super::Pass;
use crate::analysis::Analysis;
use crate::rewrite::{
    add_initializer, int64_vector, int_attr, ints_attr, node, scalar_tensor, splice_nodes, unique_name,
};
use crate::uniform::uniform;
use diamond_infer::graph::DimReport;
use diamond_ir::{Attribute, Graph, Model, Node, NodeId, Tensor, ValueId};

pub(crate) struct InlineOnes;

impl Pass for InlineOnes {
    fn name(&self) -> &'static str {
        "inline-ones"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let opset = model
            .opset_imports
            .iter()
            .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
            .and_then(|o| o.version)
            .unwrap_or(1);
        let ids: Vec<NodeId> = a.graph(model).nodes.ids().collect();
        let mut plans: Vec<(NodeId, Vec<Planned>, Vec<Tensor>)> = Vec::new();
        for nid in ids {
            let plan = match a.graph(model).nodes[nid].op_type() {
                "MatMul" => matmul(model, a, nid, opset),
                "Mul" => mul(model, a, nid),
                "Einsum" => einsum(model, a, nid, opset),
                "Gemm" => gemm(model, a, nid, opset),
                _ => None,
            };
            if let Some((nodes, tensors)) = plan {
                plans.push((nid, nodes, tensors));
            }
        }
        let count = plans.len();
        // Splice from the last so that earlier ids stay valid.
        for (nid, nodes, tensors) in plans.into_iter().rev() {
            let graph = &mut model.graphs[a.main];
            let nodes = nodes.into_iter().map(|p| p.build(graph)).collect();
            splice_nodes(graph, nid, nodes);
            for t in tensors {
                add_initializer(graph, t, a.initializers_are_constants);
            }
        }
        count
    }
}

/// A known size of a value's axis (negative from the end).
fn known_dim(model: &Model, a: &Analysis, v: ValueId, axis: isize) -> Option<u64> {
    let shape = a.shape(model, v)?;
    let k = if axis < 0 { shape.len() as isize + axis } else { axis };
    match shape.get(usize::try_from(k).ok()?)? {
        DimReport::Known(n) => Some(*n),
        _ => None,
    }
}

/// A value a planned node reads or writes: one the graph has, or a new one by name.
#[derive(Clone)]
enum Ref {
    Old(ValueId),
    New(String),
}

/// A node to add, its new values named until the graph interns them.
struct Planned {
    op: &'static str,
    name: String,
    inputs: Vec<Ref>,
    output: Ref,
    attributes: Vec<Attribute>,
}

impl Planned {
    fn build(self, graph: &mut Graph) -> Node {
        let mut id = |r: Ref| match r {
            Ref::Old(v) => v,
            Ref::New(name) => graph.intern(&name),
        };
        let inputs = self.inputs.into_iter().map(&mut id).collect();
        let output = id(self.output);
        node(self.op, &self.name, inputs, vec![output], self.attributes)
    }
}

/// Fresh names derived from `base` that neither the graph nor this plan uses.
struct Names<'g> {
    graph: &'g Graph,
    base: String,
    taken: Vec<String>,
}

impl Names<'_> {
    fn fresh(&mut self, suffix: &str) -> String {
        let mut name = unique_name(self.graph, &format!("{}_{suffix}", self.base));
        while self.taken.contains(&name) {
            name.push('_');
        }
        self.taken.push(name.clone());
        name
    }
}

/// The chain that replaces a node: ReduceSum/ReduceMean, then a Mul by the
/// uniform value when it is not 1, then an Expand when the output repeats
/// the sum; the last node writes the replaced node's output.
struct Chain<'g> {
    names: Names<'g>,
    base: String,
    planned: Vec<Planned>,
    tensors: Vec<Tensor>,
}

impl<'g> Chain<'g> {
    fn new(graph: &'g Graph, base: String) -> Chain<'g> {
        Chain {
            names: Names { graph, base: base.clone(), taken: Vec::new() },
            base,
            planned: Vec::new(),
            tensors: Vec::new(),
        }
    }

    fn last(&self) -> Ref {
        self.planned.last().map(|p| p.output.clone()).expect("a chain starts with its reduction")
    }

    fn push(&mut self, op: &'static str, step: &str, inputs: Vec<Ref>, attributes: Vec<Attribute>) {
        let output = Ref::New(self.names.fresh(step));
        self.planned.push(Planned { op, name: format!("{}/{step}", self.base), inputs, output, attributes });
    }

    /// The reduction of `x` over `axes` (an input from opset 13, an attribute before).
    fn reduce(&mut self, op: &'static str, x: ValueId, axes: &[i64], keepdims: bool, opset: i64) {
        let mut attributes = vec![int_attr("keepdims", keepdims as i64)];
        let mut inputs = vec![Ref::Old(x)];
        if opset >= 13 {
            let name = self.names.fresh("axes");
            self.tensors.push(int64_vector(&name, axes));
            inputs.push(Ref::New(name));
        } else {
            attributes.push(ints_attr("axes", axes));
        }
        self.push(op, "sum", inputs, attributes);
    }

    /// Times `c` (nothing for 1); `None` when `c` cannot be stored as `dtype`.
    fn scale(&mut self, dtype: diamond_ir::ElemType, c: f64) -> Option<()> {
        if c == 1.0 {
            return Some(());
        }
        let t = scalar_tensor(&self.names.fresh("scale"), dtype, c)?;
        let factor = Ref::New(t.name.clone().unwrap_or_default());
        self.tensors.push(t);
        let previous = self.last();
        self.push("Mul", "scaled", vec![previous, factor], Vec::new());
        Some(())
    }

    /// Broadcast to `shape` (nothing when it holds one element).
    fn expand(&mut self, shape: &[i64]) {
        if shape.iter().product::<i64>() == 1 {
            return;
        }
        let name = self.names.fresh("repeat");
        self.tensors.push(int64_vector(&name, shape));
        let previous = self.last();
        self.push("Expand", "repeated", vec![previous, Ref::New(name)], Vec::new());
    }

    /// The plan writing `out`, unless it has more nodes than the replaced
    /// node and the `removable` nodes that only fed it: the count never grows.
    fn finish(mut self, out: ValueId, removable: usize) -> Option<(Vec<Planned>, Vec<Tensor>)> {
        if self.planned.len() > 1 + removable {
            return None;
        }
        self.planned.last_mut()?.output = Ref::Old(out);
        Some((self.planned, self.tensors))
    }
}

/// A MatMul that multiplies by a uniform operand only to sum an axis of the other.
pub(crate) struct Site {
    /// The operand whose axis is summed.
    pub summed: ValueId,
    /// The uniform operand.
    pub uniform: ValueId,
    /// Its one value.
    pub value: f64,
    /// The summed axis of `summed`, counted from the end (-1 or -2).
    pub axis_from_end: i64,
    /// The summed axis of `summed`, from the front.
    pub axis: usize,
    /// The shape the sum is repeated to (rank-2 uniform operands).
    pub repeat: Option<Vec<i64>>,
    /// The reduction it becomes.
    pub becomes: &'static str,
}

/// Node `nid` as a ones-vector site, when it is one.
pub(crate) fn site(model: &Model, a: &Analysis, nid: NodeId) -> Option<Site> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if n.op_type() != "MatMul" || !n.domain().is_empty() || n.inputs.len() != 2 {
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
    let contracted = known_dim(model, a, x, summed as isize);
    let dtype = a.dtype(model, n.outputs[0])?;
    let mean = contracted.is_some_and(|k| k > 0 && (u.value * k as f64 - 1.0).abs() < 1e-6)
        && matches!(dtype, diamond_ir::ElemType::Float | diamond_ir::ElemType::Double | diamond_ir::ElemType::Float16);
    Some(Site {
        summed: x,
        uniform: u_operand,
        value: u.value,
        axis_from_end: summed,
        axis: (rank as i64 + summed) as usize,
        repeat,
        becomes: if mean { "ReduceMean" } else { "ReduceSum" },
    })
}

/// The nodes and initializers replacing a MatMul with a uniform operand.
fn matmul(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<(Vec<Planned>, Vec<Tensor>)> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    // `site` checks the operator and its operands.
    let out = *n.outputs.first()?;
    let dtype = a.dtype(model, out)?;
    let Site { summed: x, uniform: u_operand, value, axis_from_end: summed, repeat, becomes, .. } =
        site(model, a, nid)?;
    let base = if n.name().is_empty() { graph.value_name(out).to_string() } else { n.name().to_string() };
    let mut chain = Chain::new(graph, base);
    // `c = 1/K` over the K summed elements is a mean: one ReduceMean, no scale.
    chain.reduce(becomes, x, &[summed], repeat.is_some(), opset);
    chain.scale(dtype, if becomes == "ReduceMean" { 1.0 } else { value })?;
    if let Some(shape) = &repeat {
        chain.expand(shape);
    }
    chain.finish(out, exclusive_producers(model, a, u_operand))
}

/// How many nodes exist only to compute `v` for its one reader: its
/// producer and, transitively, producers whose every output feeds only them.
fn exclusive_producers(model: &Model, a: &Analysis, v: ValueId) -> usize {
    let graph = a.graph(model);
    let mut stack = vec![v];
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = stack.pop() {
        let Some(&p) = a.producer.get(&v) else { continue };
        let node = &graph.nodes[p];
        let sole =
            node.outputs.iter().all(|&o| a.is_internal(model, o) && a.consumers.get(&o).map_or(0, Vec::len) <= 1);
        if sole && seen.insert(p) {
            stack.extend(node.inputs.iter().copied());
        }
    }
    seen.len()
}

/// `Einsum(x, U)` (either order) whose uniform operand's labels all label `x`
/// too, with an output that is `x`'s labels in order minus some summed
/// ones: `ReduceSum(x)` over the summed axes (times `c` when `c ≠ 1`).
fn einsum(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<(Vec<Planned>, Vec<Tensor>)> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if !n.domain().is_empty() || n.inputs.len() != 2 {
        return None;
    }
    let equation = match n.attribute("equation").and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::String(e)) => String::from_utf8_lossy(e).replace(' ', ""),
        _ => return None,
    };
    let (lhs, output) = equation.split_once("->")?;
    let (first, second) = lhs.split_once(',')?;
    if equation.contains('.') {
        return None;
    }
    let distinct = |l: &str| {
        l.chars().all(|c| c.is_ascii_alphabetic())
            && l.chars().collect::<std::collections::HashSet<_>>().len() == l.len()
    };
    if !distinct(first) || !distinct(second) || !distinct(output) {
        return None;
    }
    let (x, x_labels, u_id, u_labels) = match (uniform(model, a, n.inputs[1]), uniform(model, a, n.inputs[0])) {
        (Some(_), _) => (n.inputs[0], first, n.inputs[1], second),
        (None, Some(_)) => (n.inputs[1], second, n.inputs[0], first),
        _ => return None,
    };
    let u = uniform(model, a, u_id)?;
    if !u_labels.chars().all(|c| x_labels.contains(c)) {
        return None;
    }
    // The output keeps x's labels in order, dropping the summed ones.
    let kept: String = x_labels.chars().filter(|c| output.contains(*c)).collect();
    if kept != output || kept.len() == x_labels.len() {
        return None;
    }
    let summed: Vec<i64> =
        x_labels.chars().enumerate().filter(|(_, c)| !output.contains(*c)).map(|(i, _)| i as i64).collect();
    let out = n.outputs[0];
    let dtype = a.dtype(model, out)?;
    let base = if n.name().is_empty() { graph.value_name(out).to_string() } else { n.name().to_string() };
    let mut chain = Chain::new(graph, base);
    chain.reduce("ReduceSum", x, &summed, false, opset);
    chain.scale(dtype, u.value)?;
    chain.finish(out, exclusive_producers(model, a, u_id))
}

/// `Gemm(A, U)` with `transA = 0` and a uniform `B` (`[K, N]` or `[N, K]`
/// with `transB`) and no `C`: `alpha·c·ReduceSum(A, axis 1)`, repeated to `N`
/// columns when `N ≠ 1`.
fn gemm(model: &Model, a: &Analysis, nid: NodeId, opset: i64) -> Option<(Vec<Planned>, Vec<Tensor>)> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    let int = |name: &str, default: i64| match n.attribute(name).and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::Int(i)) => i,
        _ => default,
    };
    let alpha = match n.attribute("alpha").and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::Float(f)) => f as f64,
        _ => 1.0,
    };
    let has_c = n.inputs.get(2).is_some_and(|&v| !graph.value_name(v).is_empty());
    if !n.domain().is_empty() || n.inputs.len() < 2 || has_c || int("transA", 0) != 0 {
        return None;
    }
    let (x, u_id, out) = (n.inputs[0], n.inputs[1], n.outputs[0]);
    let u = uniform(model, a, u_id)?;
    let columns = known_dim(model, a, u_id, if int("transB", 0) != 0 { 0 } else { 1 })? as i64;
    let dtype = a.dtype(model, out)?;
    let base = if n.name().is_empty() { graph.value_name(out).to_string() } else { n.name().to_string() };
    let mut chain = Chain::new(graph, base);
    chain.reduce("ReduceSum", x, &[1], true, opset);
    chain.scale(dtype, alpha * u.value)?;
    chain.expand(&[columns]);
    chain.finish(out, exclusive_producers(model, a, u_id))
}

/// Rewrites `Mul(x, U)` with a many-element uniform `U` that broadcasts nothing onto `x`.
fn mul(model: &Model, a: &Analysis, nid: NodeId) -> Option<(Vec<Planned>, Vec<Tensor>)> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    if !n.domain().is_empty() || n.inputs.len() != 2 {
        return None;
    }
    let out = n.outputs[0];
    let dtype = a.dtype(model, out)?;
    for (xi, ui) in [(0, 1), (1, 0)] {
        let (x, u_id) = (n.inputs[xi], n.inputs[ui]);
        let Some(u) = uniform(model, a, u_id) else { continue };
        let many = a.shape(model, u_id).is_some_and(|s| s.iter().any(|d| *d != DimReport::Known(1)));
        if !many || a.shape(model, x).is_none() || a.shape(model, x) != a.shape(model, out) {
            continue;
        }
        let name = unique_name(graph, &format!("{}_scalar", graph.value_name(u_id)));
        let t = scalar_tensor(&name, dtype, u.value)?;
        let mut inputs = vec![Ref::Old(x), Ref::Old(x)];
        inputs[ui] = Ref::New(name);
        let name = if n.name().is_empty() { format!("{}/scaled", graph.value_name(out)) } else { n.name().to_string() };
        return Some((
            vec![Planned { op: "Mul", name, inputs, output: Ref::Old(out), attributes: Vec::new() }],
            vec![t],
        ));
    }
    None
}
