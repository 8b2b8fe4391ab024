//! `cse`: merges common subexpressions — nodes of the same operator,
//! attributes and inputs (in topological order, so chains merge in one
//! run), and small identical initializers. Nodes with subgraphs and random
//! operators are never merged; a duplicate whose output is a graph output
//! or read by a subgraph stays.

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{remove_nodes, replace_uses};
use crate::Analysis;
use diamond_ir::{Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};

pub(crate) struct Cse;

/// Initializers up to this many bytes are compared for merging.
const MAX_MERGED_INITIALIZER_BYTES: u64 = 1 << 16;

impl Pass for Cse {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        merge_initializers(model, a) + merge_nodes(model, a)
    }
}

fn merge_nodes(model: &mut Model, a: &Analysis) -> usize {
    let Some(order) = topological(model, a) else { return 0 };
    let mut seen: HashMap<String, NodeId> = HashMap::new();
    let mut dead = HashSet::new();
    for nid in order {
        let graph = &model.graphs[a.main];
        let n = &graph.nodes[nid];
        if n.outputs.is_empty()
            || n.attributes.iter().any(|at| at.subgraphs().next().is_some())
            || (n.domain().is_empty() && NONDETERMINISTIC.contains(&n.op_type()))
        {
            continue;
        }
        let key = format!(
            "{}\u{1}{}\u{1}{}\u{1}{:?}\u{1}{:?}\u{1}{}",
            n.domain(),
            n.op_type(),
            n.overload.as_deref().unwrap_or(""),
            n.inputs,
            n.attributes,
            n.outputs.len()
        );
        match seen.get(&key) {
            None => {
                seen.insert(key, nid);
            }
            Some(&first) => {
                let pairs: Vec<(ValueId, ValueId)> =
                    n.outputs.iter().copied().zip(graph.nodes[first].outputs.iter().copied()).collect();
                if pairs.iter().any(|&(dup, _)| !graph.value_name(dup).is_empty() && !a.is_internal(model, dup)) {
                    continue;
                }
                for (dup, keep) in pairs {
                    replace_uses(&mut model.graphs[a.main], dup, keep);
                }
                dead.insert(nid);
            }
        }
    }
    remove_nodes(&mut model.graphs[a.main], &dead);
    dead.len()
}

/// Readers of an initializer read an identical earlier one instead (the
/// duplicate is left for `dead-code`).
fn merge_initializers(model: &mut Model, a: &Analysis) -> usize {
    let graph = a.graph(model);
    let mut seen: HashMap<String, ValueId> = HashMap::new();
    let mut merges = Vec::new();
    for t in &graph.initializers {
        let Some(v) = t.name.as_deref().and_then(|n| graph.value_named(n)) else { continue };
        if !a.is_internal(model, v) || t.is_external() || t.data_bytes() > MAX_MERGED_INITIALIZER_BYTES {
            continue;
        }
        if a.consumers.get(&v).is_none_or(|c| c.is_empty()) {
            continue;
        }
        let mut unnamed = t.clone();
        unnamed.name = None;
        unnamed.doc_string = None;
        unnamed.metadata_props.clear();
        let key = format!("{unnamed:?}");
        match seen.get(&key) {
            None => {
                seen.insert(key, v);
            }
            Some(&keep) => merges.push((v, keep)),
        }
    }
    for &(dup, keep) in &merges {
        replace_uses(&mut model.graphs[a.main], dup, keep);
    }
    merges.len()
}

/// The main graph's nodes in an order where producers come first; `None` on a cycle.
pub(crate) fn topological(model: &Model, a: &Analysis) -> Option<Vec<NodeId>> {
    let graph = a.graph(model);
    let mut waiting: HashMap<NodeId, usize> = HashMap::new();
    let mut ready = Vec::new();
    for (nid, n) in graph.nodes.iter() {
        let count = n.inputs.iter().filter(|v| a.producer.contains_key(v)).count();
        waiting.insert(nid, count);
        if count == 0 {
            ready.push(nid);
        }
    }
    ready.reverse();
    let mut order = Vec::with_capacity(graph.nodes.len());
    while let Some(nid) = ready.pop() {
        order.push(nid);
        for &out in &graph.nodes[nid].outputs {
            for &reader in a.consumers.get(&out).map(Vec::as_slice).unwrap_or(&[]) {
                let w = waiting.get_mut(&reader)?;
                *w -= 1;
                if *w == 0 {
                    ready.push(reader);
                }
            }
        }
    }
    (order.len() == graph.nodes.len()).then_some(order)
}
