//! Where a clashing size came from, traced through the graph.
//!
//! Rules read their inputs' shapes resolved, so a size such as the 64 of a
//! `[batch, 64]` activation reaches a failing constraint as a plain number
//! with no solver history. For a dimension conflict at a node of the main
//! graph, this walks back from the operand axis holding each clashing size:
//! through a producer whose output keeps that axis (element-wise and shape-
//! preserving operators: same rank, same size at the same axis), or whose
//! inputs hold the size at exactly one axis (a MatMul's `[32, 64]` weight),
//! until it reaches an initializer or a graph input — or a node that computed
//! the size from several candidates, where it stops rather than guess. The
//! result is one note per side: "64 comes from initializer 'w1' axis 1, via
//! MatMul 'fc1' → Relu 'act'". A node imported from source code (TorchScript)
//! also gets a note naming the file and line it comes from.

use super::report::{DimReport, ValueReport};
use crate::diagnostic::{Code, Diagnostic};
use diamond_ir::entity::EntityId;
use diamond_ir::{Graph, Node, NodeId, ValueId};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// How far back a trace goes before it stops.
const MAX_HOPS: usize = 64;

/// Adds a provenance note for each side of every dimension conflict located
/// at an input axis of a main-graph node.
pub(crate) fn annotate(graph: &Graph, values: &[ValueReport], diagnostics: &mut [Diagnostic]) {
    // A clean model (the common case) pays nothing for the indexes below.
    if diagnostics.is_empty() {
        return;
    }
    let shapes: HashMap<&str, &[DimReport]> =
        values.iter().filter_map(|v| Some((v.name.as_str(), v.shape.as_deref()?))).collect();
    let tracer = Tracer::new(graph, &shapes);
    for d in diagnostics.iter_mut() {
        if let Some(source) = d.graph.is_none().then(|| tracer.source_of(d)).flatten() {
            d.notes.insert(0, format!("the node comes from {source}"));
        }
        if !matches!(d.code, Code::DimMismatch | Code::BroadcastConflict) || d.graph.is_some() {
            continue;
        }
        let notes = tracer.sides(d);
        // A traced size replaces the solver's account of the same size (which
        // only reaches the node's own operand), then comes the constraint's chain.
        let traced: Vec<String> =
            notes.iter().filter_map(|n| n.split_once(" comes from ").map(|(size, _)| size.to_string())).collect();
        d.notes.retain(|n| !traced.iter().any(|size| solver_says_is(n, size)));
        d.notes.splice(0..0, notes);
    }
}

struct Tracer<'g> {
    graph: &'g Graph,
    shapes: &'g HashMap<&'g str, &'g [DimReport]>,
    producer: HashMap<ValueId, (NodeId, &'g Node)>,
    initializers: HashSet<&'g str>,
}

impl<'g> Tracer<'g> {
    fn new(graph: &'g Graph, shapes: &'g HashMap<&'g str, &'g [DimReport]>) -> Tracer<'g> {
        let mut producer = HashMap::default();
        for (nid, n) in graph.nodes.iter() {
            for &o in &n.outputs {
                producer.insert(o, (nid, n));
            }
        }
        let initializers = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
        Tracer { graph, shapes, producer, initializers }
    }

    /// Where the diagnostic's node was written, for graphs imported from
    /// source code (TorchScript: `metadata_props["source"]`, `code/...py:12`).
    fn source_of(&self, d: &Diagnostic) -> Option<String> {
        let index = d.node_index?;
        let (_, node) = self.graph.nodes.iter().find(|(nid, _)| EntityId::index(*nid) as u32 == index)?;
        node.rare().metadata_props.iter().find(|e| e.key.as_deref() == Some("source")).and_then(|e| e.value.clone())
    }

    fn shape(&self, v: ValueId) -> Option<&'g [DimReport]> {
        self.shapes.get(self.graph.value_name(v)).copied()
    }

    /// The notes for a diagnostic's two clashing sizes: the located operand
    /// axis first, then the other size at another input of the node.
    fn sides(&self, d: &Diagnostic) -> Vec<String> {
        let Some(index) = d.node_index else { return Vec::new() };
        let Some((_, node)) = self.graph.nodes.iter().find(|(nid, _)| EntityId::index(*nid) as u32 == index) else {
            return Vec::new();
        };
        // `input 1`, or `input 1 (scale)` naming the operand.
        let located = d
            .operand
            .as_deref()
            .and_then(|o| o.strip_prefix("input "))
            .and_then(|i| i.split(' ').next()?.parse::<usize>().ok());
        let (Some(i), Some(axis)) = (located, d.axis) else { return Vec::new() };
        let Some(&value) = node.inputs.get(i) else { return Vec::new() };
        let Some(size) = self.shape(value).and_then(|s| s.get(axis)).cloned() else { return Vec::new() };
        let mut notes: Vec<String> = self.trace(value, axis).into_iter().collect();
        // The other side: the first size among the clash's that another input
        // holds, preferring the axis aligned with the located one from the right.
        let rank = self.shape(value).map_or(0, <[DimReport]>::len);
        let others = d.clash.iter().flat_map(|(x, y)| [x, y]).filter(|s| **s != size.to_string());
        'sizes: for other in others {
            for (j, &input) in node.inputs.iter().enumerate() {
                if j == i || self.graph.value_name(input).is_empty() {
                    continue;
                }
                let Some(shape) = self.shape(input) else { continue };
                let aligned = (shape.len() + axis).checked_sub(rank).filter(|&k| k < shape.len());
                let at = aligned
                    .filter(|&k| shape[k].to_string() == *other)
                    .or_else(|| shape.iter().rposition(|s| s.to_string() == *other));
                if let Some(k) = at {
                    notes.extend(self.trace(input, k));
                    break 'sizes;
                }
            }
        }
        notes
    }

    /// Where axis `axis` of `value` got its size, as one note.
    fn trace(&self, value: ValueId, axis: usize) -> Option<String> {
        let size = self.shape(value)?.get(axis)?.clone();
        if size == DimReport::Unknown {
            return None;
        }
        let (mut at, mut k) = (value, axis);
        let mut via: Vec<String> = Vec::new();
        for _ in 0..MAX_HOPS {
            let name = self.graph.value_name(at);
            if self.initializers.contains(name) {
                return Some(self.phrase(&size, &format!("initializer '{name}' axis {k}"), via));
            }
            let Some(&(nid, node)) = self.producer.get(&at) else {
                return Some(self.phrase(&size, &format!("graph input '{name}' axis {k}"), via));
            };
            via.push(self.node_text(nid, node));
            match self.step_back(node, at, k, &size) {
                Some((input, axis)) => (at, k) = (input, axis),
                None => {
                    let computed = via.pop().unwrap_or_default();
                    return Some(self.phrase(&size, &format!("{computed} (its output '{name}' axis {k})"), via));
                }
            }
        }
        None
    }

    /// The input axis of `node` that output `out`'s axis `k` (of size `size`) comes from, if clear.
    fn step_back(&self, node: &Node, out: ValueId, k: usize, size: &DimReport) -> Option<(ValueId, usize)> {
        let out_rank = self.shape(out)?.len();
        let inputs = node.inputs.iter().filter(|v| !self.graph.value_name(**v).is_empty());
        let mut same_axis = None;
        let mut anywhere = Vec::new();
        for &input in inputs {
            let Some(shape) = self.shape(input) else { continue };
            if shape.len() == out_rank && shape.get(k) == Some(size) && same_axis.is_none() {
                same_axis = Some((input, k));
            }
            anywhere.extend(shape.iter().enumerate().filter(|(_, s)| *s == size).map(|(a, _)| (input, a)));
        }
        same_axis.or_else(|| (anywhere.len() == 1).then(|| anywhere[0]))
    }

    fn node_text(&self, nid: NodeId, node: &Node) -> String {
        let label = if node.name().is_empty() { format!("#{}", EntityId::index(nid)) } else { node.name().to_string() };
        format!("{} '{label}'", node.op_type())
    }

    /// `64 comes from X, via A → B` (hops listed from the source forward; a
    /// long way in the middle is counted, not listed).
    fn phrase(&self, size: &DimReport, source: &str, mut via: Vec<String>) -> String {
        via.reverse();
        if via.len() > 4 {
            let hidden = via.len() - 3;
            let last = via.pop().unwrap_or_default();
            via.truncate(2);
            via.push(format!("… {hidden} more …"));
            via.push(last);
        }
        if via.is_empty() {
            format!("{size} comes from {source}")
        } else {
            format!("{size} comes from {source}, via {}", via.join(" → "))
        }
    }
}

/// Whether `note` is the solver's `'v is SIZE because of ...` for `size`.
fn solver_says_is(note: &str, size: &str) -> bool {
    note.starts_with('\'')
        && note
            .split_once(" is ")
            .is_some_and(|(_, rest)| rest.strip_prefix(size).is_some_and(|r| r.starts_with(" because of ")))
}
