//! How many nodes a rewrite may use: the node it replaces plus the nodes
//! that computed only that node's inputs and that would otherwise stay.
//! A producer computed from constants alone (stored tensors, shape
//! arithmetic value propagation knows completely) with a small result is
//! folded into a stored tensor by `fold-shapes`/`fold-constants` anyway, so
//! removing it saves nothing and it pays for no node of the replacement:
//! the node count of the optimized model never grows.

use super::super::NONDETERMINISTIC;
use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::{Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};

/// The nodes that exist only to compute `inputs` for the replaced node:
/// each producer whose every output is internal and read once (by the
/// replaced node or by a node already found), transitively. Values in
/// `kept` (what the rewrite still reads) and their producers stay.
pub(super) fn exclusive_producers(
    model: &Model,
    a: &Analysis,
    inputs: &[ValueId],
    kept: &[ValueId],
) -> HashSet<NodeId> {
    let graph = a.graph(model);
    let mut stack: Vec<ValueId> = inputs.to_vec();
    let mut freed = HashSet::new();
    while let Some(v) = stack.pop() {
        if kept.contains(&v) {
            continue;
        }
        let Some(&p) = a.producer.get(&v) else { continue };
        let node = &graph.nodes[p];
        let sole =
            node.outputs.iter().all(|&o| a.is_internal(model, o) && a.consumers.get(&o).map_or(0, Vec::len) <= 1);
        if sole && freed.insert(p) {
            stack.extend(node.inputs.iter().copied());
        }
    }
    freed
}

/// How many of the `freed` nodes would stay nodes without the rewrite:
/// those not computed from constants alone into a small result.
pub(super) fn paying(model: &Model, a: &Analysis, freed: &HashSet<NodeId>) -> usize {
    let graph = a.graph(model);
    let mut memo = HashMap::new();
    freed
        .iter()
        .filter(|&&p| {
            let outputs = &graph.nodes[p].outputs;
            let folds = outputs.iter().all(|&o| constant(model, a, o, &mut memo) && small(model, a, o));
            !folds
        })
        .count()
}

/// Whether `v` fits `fold-constants`' budget (the fold limit), by its
/// inferred shape and element type.
fn small(model: &Model, a: &Analysis, v: ValueId) -> bool {
    a.known_bytes(model, v).is_some_and(|n| n <= a.fold_limit)
}

/// Whether `v` is computed from constants alone: a stored tensor that is
/// not the caller's input, a value whose elements value propagation knows
/// completely, or the output of a foldable node whose inputs all are.
fn constant(model: &Model, a: &Analysis, v: ValueId, memo: &mut HashMap<ValueId, bool>) -> bool {
    let graph = a.graph(model);
    let mut stack = vec![(v, false)];
    while let Some((w, expanded)) = stack.pop() {
        if memo.contains_key(&w) {
            continue;
        }
        let known = a.report.known_values.get(&w).is_some_and(|k| match &k.data {
            ConstData::Ints(e) => e.iter().all(|x| x.as_int().is_some()),
            ConstData::Floats(_) | ConstData::Bools(_) => true,
            ConstData::Strings(_) => false,
        });
        let stored = a.initializers.contains_key(&w) && (a.initializers_are_constants || !a.inputs.contains(&w));
        if known || stored {
            memo.insert(w, true);
            continue;
        }
        let Some(&p) = a.producer.get(&w) else {
            // A graph input is the caller's; an unnamed absent input is nothing.
            memo.insert(w, !a.inputs.contains(&w));
            continue;
        };
        let node = &graph.nodes[p];
        if !node.domain().is_empty() || NONDETERMINISTIC.contains(&node.op_type()) || node.subgraphs().next().is_some()
        {
            memo.insert(w, false);
        } else if expanded {
            let all = node.inputs.iter().all(|i| memo.get(i).copied().unwrap_or(false));
            memo.insert(w, all);
        } else {
            stack.push((w, true));
            stack.extend(node.inputs.iter().filter(|i| !memo.contains_key(*i)).map(|&i| (i, false)));
        }
    }
    memo.get(&v).copied().unwrap_or(false)
}
