//! `cse`: merges common subexpressions — nodes of the same operator,
//! attributes and inputs (in topological order, so chains merge in one
//! run), and small identical initializers. Nodes with subgraphs and random
//! operators are never merged; a duplicate whose output is a graph output
//! or read by a subgraph stays.

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{remove_nodes, replace_uses};
use crate::Analysis;
use diamond_ir::{Model, NodeId, Tensor, TensorRare, ValueId};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

pub(crate) struct Cse;

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
            n.rare().overload.as_deref().unwrap_or(""),
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
/// duplicate is left for `dead-code`). Only initializers of one element
/// type and shape can be equal: the bytes of the others are never read.
fn merge_initializers(model: &mut Model, a: &Analysis) -> usize {
    let graph = a.graph(model);
    let mut by_shape: HashMap<(Option<i32>, &[i64]), Vec<(ValueId, &Tensor)>> = HashMap::new();
    for t in &graph.initializers {
        let Some(v) = t.name.as_deref().and_then(|n| graph.value_named(n)) else { continue };
        if !a.may_rewire(model, v) || t.is_external() || a.consumers.get(&v).is_none_or(|c| c.is_empty()) {
            continue;
        }
        by_shape.entry((t.data_type.map(|d| d.code()), t.dims.as_slice())).or_default().push((v, t));
    }
    let mut merges = Vec::new();
    for group in by_shape.values().filter(|g| g.len() > 1) {
        // Per content hash, the initializers kept so far (compared whole on a hit).
        let mut seen: HashMap<u64, Vec<(ValueId, Tensor)>> = HashMap::new();
        for &(v, t) in group {
            let mut unnamed = t.clone();
            unnamed.name = None;
            if let Some(rare) = unnamed.rare.take() {
                unnamed.rare = TensorRare { doc_string: None, metadata_props: Vec::new(), ..*rare }.boxed();
            }
            let kept = seen.entry(content_hash(&unnamed)).or_default();
            match kept.iter().find(|(_, other)| *other == unnamed) {
                Some(&(keep, _)) => merges.push((v, keep)),
                None => kept.push((v, unnamed)),
            }
        }
    }
    for &(dup, keep) in &merges {
        replace_uses(&mut model.graphs[a.main], dup, keep);
    }
    merges.len()
}

/// A hash of everything that makes two unnamed tensors equal, floats by
/// their bits (so `0.0` and `-0.0` never merge). Raw data longer than
/// [`WHOLE_HASH_BYTES`] is hashed by its length and evenly spaced samples:
/// equal tensors still hash alike, and a hit is compared whole, but a
/// model's weights (megabytes each, re-read every round) are not hashed
/// byte by byte.
fn content_hash(t: &Tensor) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    t.data_type.map(|d| d.code()).hash(&mut h);
    t.dims.hash(&mut h);
    t.rare().segment.map(|s| (s.begin, s.end)).hash(&mut h);
    let d = &t.data;
    if let Some(raw) = &d.raw {
        hash_sampled(raw, &mut h);
    }
    d.floats.iter().for_each(|f| f.to_bits().hash(&mut h));
    d.int32s.hash(&mut h);
    d.strings.hash(&mut h);
    d.int64s.hash(&mut h);
    d.doubles.iter().for_each(|f| f.to_bits().hash(&mut h));
    d.uint64s.hash(&mut h);
    h.finish()
}

/// Raw data up to this long is hashed whole.
const WHOLE_HASH_BYTES: usize = 4096;

/// `bytes` into `h`: whole when short, else its length and 512 samples of
/// 8 bytes at evenly spaced offsets (the last 8 bytes among them).
fn hash_sampled(bytes: &[u8], h: &mut impl Hasher) {
    bytes.len().hash(h);
    if bytes.len() <= WHOLE_HASH_BYTES {
        h.write(bytes);
        return;
    }
    const SAMPLES: usize = 512;
    let last = bytes.len() - 8;
    for k in 0..SAMPLES {
        let at = last * k / (SAMPLES - 1);
        h.write(&bytes[at..at + 8]);
    }
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
