//! `noop`: removes nodes whose output equals one of their inputs, decided
//! by the inferred shapes and types (symbolic ones included): Identity,
//! inference-mode Dropout, a Cast to the type it has, a
//! Reshape/Expand/Squeeze/Unsqueeze/Flatten whose output shape is its input
//! shape, an identity Transpose, a Slice with positive steps keeping the
//! shape, a Pad by zeros, a one-input Concat/Sum/Max/Min/Mean, a one-output
//! Split, a ReduceSum/Mean/Max/Min/Prod over axes of size 1 keeping dims
//! (and GlobalAveragePool/GlobalMaxPool over a 1×1 map),
//! Mul/Div by a uniform 1 and Add/Sub of a uniform 0 that broadcast
//! nothing, a Where whose condition is constant. Readers of the output read
//! the input instead. When the output is a graph output, the node producing
//! the input writes it under the output's name instead (where nothing else
//! reads the input); an output that a subgraph reads keeps its node.

use super::{uniform, Pass};
use crate::rewrite::{remove_nodes, replace_uses};
use crate::Analysis;
use diamond_ir::{AttrValue, Model, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct Noop;

impl Pass for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let ids: Vec<NodeId> = a.graph(model).nodes.ids().collect();
        let mut dead = HashSet::new();
        let mut renamed: HashSet<ValueId> = HashSet::new();
        for nid in ids {
            let Some((out, to)) = passthrough(model, a, nid) else { continue };
            if a.is_internal(model, out) {
                replace_uses(&mut model.graphs[a.main], out, to);
                dead.insert(nid);
            } else if let Some(producer) = renamable(model, a, nid, to, &dead).filter(|_| renamed.insert(to)) {
                // A graph output: the input's producer writes it under the output's name.
                let graph = &mut model.graphs[a.main];
                for o in &mut graph.nodes[producer].outputs {
                    if *o == to {
                        *o = out;
                    }
                }
                graph.value_info.retain(|vi| vi.value != Some(to));
                dead.insert(nid);
            }
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        dead.len()
    }
}

/// The node producing `input` when node `nid` (which passes `input` through
/// to a graph output) is its only reader and its producer may write the
/// output instead: `input` is internal, and a node's result. Readers are
/// counted in the graph as this pass has left it so far (nodes it removes,
/// `dead`, not counted): an earlier removal in the same run may have sent
/// another node's reads to `input`, which the analysis does not know.
fn renamable(model: &Model, a: &Analysis, nid: NodeId, input: ValueId, dead: &HashSet<NodeId>) -> Option<NodeId> {
    let graph = a.graph(model);
    let out = graph.nodes[nid].outputs[0];
    // The output must not be a graph input too, nor read by a subgraph from here.
    if a.inputs.contains(&out) || a.outer_refs.contains(graph.value_name(out)) {
        return None;
    }
    if !a.is_internal(model, input) {
        return None;
    }
    let readers = graph.nodes.iter().filter(|(id, n)| !dead.contains(id) && n.inputs.contains(&input)).count();
    if readers != 1 {
        return None;
    }
    let producer = *a.producer.get(&input)?;
    // Two outputs of one graph from one node: each keeps its own name.
    (!graph.nodes[producer].outputs.contains(&out)).then_some(producer)
}

/// `(output, input)` when node `nid`'s output 0 is its input: readers may
/// read the input instead when the output is internal.
fn passthrough(model: &Model, a: &Analysis, nid: NodeId) -> Option<(ValueId, ValueId)> {
    let graph = a.graph(model);
    let n = &graph.nodes[nid];
    let out = *n.outputs.first()?;
    if graph.value_name(out).is_empty() || a.inputs.contains(&out) {
        return None;
    }
    // Any other output (Dropout's mask, Split's others) must be unread.
    if n.outputs.iter().skip(1).any(|&o| !graph.value_name(o).is_empty() && !a.unused(model, o)) {
        return None;
    }
    let input = |i: usize| n.inputs.get(i).copied().filter(|&v| !graph.value_name(v).is_empty());
    let same = |v: ValueId| {
        let typed = a.dtype(model, v).is_some() && a.dtype(model, v) == a.dtype(model, out);
        let shaped = a.shape(model, v).zip(a.shape(model, out)).is_some_and(|(p, q)| p == q);
        typed && shaped
    };
    let constant_is = |i: usize, c: f64| input(i).and_then(|v| a.constant(model, v)).is_some_and(|k| uniform(&k, c));
    let x = input(0);
    let pass = |v: Option<ValueId>| v.filter(|&v| same(v));
    // `v` combined with operand `c`, a constant of size-1 axes no more than
    // `v` has: broadcasting it changes no shape, whatever `v`'s sizes are.
    let beside = |v: Option<ValueId>, c: usize| {
        let unit = input(c).and_then(|c| a.constant(model, c)).is_some_and(|k| k.shape.iter().all(|&d| d == 1));
        let rank_c = input(c).and_then(|c| a.rank(model, c));
        v.filter(|&v| {
            let typed = a.dtype(model, v).is_some() && a.dtype(model, v) == a.dtype(model, out);
            let ranked = rank_c.zip(a.rank(model, v)).is_some_and(|(rc, rv)| rc <= rv);
            same(v) || (unit && typed && ranked)
        })
    };
    if !n.domain().is_empty() {
        return None;
    }
    let to = match n.op_type() {
        // Whatever its type, an Identity's output is its input.
        "Identity" => x,
        // A Cast to the type it has keeps the shape, whatever it is.
        "Cast" | "CastLike" => x.filter(|&v| a.dtype(model, v).is_some() && a.dtype(model, v) == a.dtype(model, out)),
        "Reshape" | "Expand" | "Squeeze" | "Unsqueeze" | "Flatten" => pass(x),
        "Dropout" => pass(x).filter(|_| input(2).is_none() || constant_is(2, 0.0)),
        "Transpose" => pass(x).filter(|_| identity_perm(n)),
        "Slice" => pass(x).filter(|_| {
            input(4).is_none()
                || input(4)
                    .and_then(|v| a.constant(model, v))
                    .and_then(|k| k.as_i64s())
                    .is_some_and(|s| s.iter().all(|&d| d > 0))
        }),
        "Pad" => pass(x).filter(|_| match input(1) {
            Some(p) => a.constant(model, p).and_then(|k| k.as_i64s()).is_some_and(|p| p.iter().all(|&d| d == 0)),
            None => {
                n.attribute("pads").and_then(|at| match at.value() {
                    Some(AttrValue::Ints(p)) => Some(p.iter().all(|&d| d == 0)),
                    _ => None,
                }) == Some(true)
            }
        }),
        "Concat" | "Sum" | "Max" | "Min" | "Mean" if n.inputs.len() == 1 => pass(x),
        "Split" if n.outputs.len() == 1 => pass(x),
        // Same shape in and out: every reduced axis has size 1 (or none is
        // reduced), and the sum, mean, max, min or product of one element is it.
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" => pass(x),
        "GlobalAveragePool" | "GlobalMaxPool" => pass(x),
        "Mul" if constant_is(1, 1.0) => beside(x, 1),
        "Mul" if constant_is(0, 1.0) => beside(input(1), 0),
        "Add" if constant_is(1, 0.0) => beside(x, 1),
        "Add" if constant_is(0, 0.0) => beside(input(1), 0),
        "Sub" if constant_is(1, 0.0) => beside(x, 1),
        "Div" if constant_is(1, 1.0) => beside(x, 1),
        "Where" if constant_is(0, 1.0) => pass(input(1)),
        "Where" if constant_is(0, 0.0) => pass(input(2)),
        _ => None,
    }?;
    Some((out, to))
}

/// A Transpose whose `perm` is `0, 1, 2, ...` (or, without one, rank ≤ 1: the reversal is then the identity).
fn identity_perm(n: &diamond_ir::Node) -> bool {
    match n.attribute("perm").and_then(|a| a.value()) {
        Some(AttrValue::Ints(p)) => p.iter().enumerate().all(|(i, &d)| d == i as i64),
        _ => false,
    }
}
