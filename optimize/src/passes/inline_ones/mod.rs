//! `inline-ones`: a uniform tensor (every element `c`, see `uniform.rs`) is
//! folded into what reads it and never materialized (seed 000's
//! ones-vector idiom), one file per reader:
//! - `matmul`, `einsum`, `gemm`: a product with a uniform operand sums the
//!   contracted axis of the other: ReduceSum (ReduceMean for `c = 1/K`),
//!   scaled, transposed, plus Gemm's `C`, expanded to the output's shape.
//! - `conv`: a uniform kernel sums a window over the channels (group 1) or
//!   of each channel (depthwise): ReduceSum over channels, AveragePool with
//!   `count_include_pad` times the window size, plus the bias.
//! - `reduce`: ReduceSum/ReduceMean of `Mul(x, U)` reduces `x` itself.
//! - `mean`: a ReduceSum divided by the count of what it summed (or times
//!   its reciprocal) is a ReduceMean (not a uniform operand, a sibling idiom).
//! - `elementwise`: a uniform operand of a broadcasting elementwise operator
//!   becomes a scalar (plus an Expand when it widened the other operand), or
//!   the operator goes when the value is its identity (`x + 0`, `x · 1`).
//!
//! A rewrite never leaves more nodes than the node it replaces and the nodes
//! that computed only that node's inputs and would not be folded into a
//! stored tensor anyway (`budget`): a case that would grow the node count
//! of the optimized model is left as it is, and so is one that would sum
//! values it rounded itself in float16/bfloat16 (`chain`). The rewrites
//! that save the most nodes are made first; one whose region touches
//! another's (a node one frees, a value one reads) waits for the next
//! round. What is no longer read is left for `dead-code`.

mod addend;
mod budget;
mod chain;
mod conv;
mod dims;
mod einsum;
mod elementwise;
mod gemm;
mod matmul;
mod mean;
mod reduce;

use super::Pass;
use crate::analysis::Analysis;
use crate::rewrite::{add_initializer, replace_uses, splice_nodes};
use chain::Planned;
use diamond_ir::{Model, NodeId, Tensor, ValueId};
use std::collections::HashSet;

pub(crate) struct InlineOnes;

impl Pass for InlineOnes {
    fn name(&self) -> &'static str {
        "inline-ones"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let mut plans: Vec<Rewrite> = a.graph(model).nodes.ids().filter_map(|nid| plan(model, a, nid)).collect();
        // The rewrites that save the most nodes first, then the ones-vector
        // reductions (those with a note), then node order: a ReduceSum of
        // `x · ones` reducing `x` beats the Mul alone becoming `x · 1`.
        plans.sort_by_key(|r| (std::cmp::Reverse(r.saving()), r.note.is_none()));
        let mut accepted: Vec<Rewrite> = Vec::new();
        for r in plans {
            // Rewrites whose regions touch wait for the next round: one may
            // read what another counted as freed.
            if accepted.iter().all(|other| !r.overlaps(other, a)) {
                accepted.push(r);
            }
        }
        let count = accepted.len();
        let mut aliases = Vec::new();
        // Splice from the last so that earlier ids stay valid.
        accepted.sort_by_key(|r| std::cmp::Reverse(r.replaced));
        let graph = &mut model.graphs[a.main];
        for r in accepted {
            aliases.extend(r.alias);
            let nodes = r.nodes.into_iter().map(|p| p.build(graph)).collect();
            splice_nodes(graph, r.replaced, nodes);
            for t in r.tensors {
                add_initializer(graph, t, a.initializers_are_constants);
            }
        }
        // Readers of a removed node's output read its input instead (value ids never change).
        for (from, to) in aliases {
            replace_uses(graph, from, to);
        }
        count
    }
}

/// How one node is replaced.
pub(crate) struct Rewrite {
    /// The node replaced.
    pub replaced: NodeId,
    /// The nodes in its place (the last writes its output).
    nodes: Vec<Planned>,
    /// The initializers they read.
    tensors: Vec<Tensor>,
    /// Nodes that computed only the replaced node's inputs, freed by it.
    freed: HashSet<NodeId>,
    /// How many of them would stay nodes without it (`budget::paying`).
    paid: usize,
    /// The graph's values the new nodes read.
    reads: Vec<ValueId>,
    /// Instead of nodes: readers of the output (`.0`) read `.1` instead.
    alias: Option<(ValueId, ValueId)>,
    /// What `check` says about it, for ones-vectors.
    pub note: Option<Note>,
}

impl Rewrite {
    /// The operators put in place, in order.
    pub fn ops(&self) -> Vec<&'static str> {
        self.nodes.iter().map(Planned::op).collect()
    }

    /// How many nodes fewer the graph has after it (the replaced node and
    /// the freed ones out, the new ones in).
    fn saving(&self) -> i64 {
        1 + self.paid as i64 - self.nodes.len() as i64
    }

    /// Whether this rewrite and `other` touch: one frees a node the other
    /// replaces or frees, or one reads a value a node the other frees computes.
    fn overlaps(&self, other: &Rewrite, a: &Analysis) -> bool {
        let region = |r: &Rewrite| r.freed.iter().copied().chain([r.replaced]).collect::<HashSet<_>>();
        let (mine, theirs) = (region(self), region(other));
        let reads_freed = |r: &Rewrite, freed: &HashSet<NodeId>| {
            r.reads.iter().any(|v| a.producer.get(v).is_some_and(|p| freed.contains(p)))
        };
        !mine.is_disjoint(&theirs) || reads_freed(self, &other.freed) || reads_freed(other, &self.freed)
    }
}

/// What a ones-vector rewrite tells `check`: the uniform operand and what the node does with it.
pub(crate) struct Note {
    /// The uniform tensor.
    pub uniform: ValueId,
    /// The node's doing, after its name: `multiplies by ones ('w') only to sum axis 1 of 'x'`.
    pub text: String,
}

impl Note {
    /// A product with `uniform` (value `value`) that only sums: `purpose` is `sum axis 1 of 'x'`.
    fn multiplies(model: &Model, a: &Analysis, uniform: ValueId, value: f64, purpose: &str) -> Note {
        let u = quoted(model, a, uniform);
        Note { uniform, text: format!("multiplies by {} ({u}) only to {purpose}", value_text(value)) }
    }
}

/// A uniform value in words: `ones`, `a uniform 0.5`.
fn value_text(value: f64) -> String {
    if value == 1.0 {
        "ones".to_string()
    } else {
        format!("a uniform {value}")
    }
}

/// The rewrite of node `nid`, when there is one.
pub(crate) fn plan(model: &Model, a: &Analysis, nid: NodeId) -> Option<Rewrite> {
    let n = &a.graph(model).nodes[nid];
    if !n.domain().is_empty() || n.outputs.is_empty() {
        return None;
    }
    let opset = opset(model);
    match n.op_type() {
        "MatMul" => matmul::plan(model, a, nid, opset),
        "Einsum" => einsum::plan(model, a, nid, opset),
        "Gemm" => gemm::plan(model, a, nid, opset),
        "Conv" => conv::plan(model, a, nid, opset),
        "ReduceSum" | "ReduceMean" => reduce::plan(model, a, nid, opset),
        "Div" | "Mul" => mean::plan(model, a, nid, opset).or_else(|| elementwise::plan(model, a, nid, opset)),
        _ => elementwise::plan(model, a, nid, opset),
    }
}

/// The default-domain opset the model imports.
fn opset(model: &Model) -> i64 {
    model
        .opset_imports
        .iter()
        .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .and_then(|o| o.version)
        .unwrap_or(1)
}

/// An integer attribute of `n`, or `default`.
fn int(n: &diamond_ir::Node, name: &str, default: i64) -> i64 {
    match n.attribute(name).and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::Int(i)) => i,
        _ => default,
    }
}

/// An ints attribute of `n`.
fn ints(n: &diamond_ir::Node, name: &str) -> Option<Vec<i64>> {
    match n.attribute(name).and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::Ints(v)) => Some(v.to_vec()),
        _ => None,
    }
}

/// A float attribute of `n`, or `default`.
fn float(n: &diamond_ir::Node, name: &str, default: f64) -> f64 {
    match n.attribute(name).and_then(|at| at.value()) {
        Some(diamond_ir::AttrValue::Float(f)) => f as f64,
        _ => default,
    }
}

/// A float element type (the reductions' mean, pooling).
fn is_float(t: diamond_ir::ElemType) -> bool {
    use diamond_ir::ElemType::*;
    matches!(t, Float | Double | Float16)
}

/// Whether `x` is `1/n` to the precision of `dtype`.
fn is_reciprocal(x: f64, n: f64, dtype: diamond_ir::ElemType) -> bool {
    let tolerance = match dtype {
        diamond_ir::ElemType::Float16 => 1e-3,
        diamond_ir::ElemType::Double => 1e-12,
        _ => 1e-6,
    };
    n > 0.0 && (x * n - 1.0).abs() <= tolerance
}

/// An operand as it is named in a note: `'x'`.
fn quoted(model: &Model, a: &Analysis, v: ValueId) -> String {
    format!("'{}'", a.graph(model).value_name(v))
}
