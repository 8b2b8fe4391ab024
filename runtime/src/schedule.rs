//! The execution order of a graph and when each value dies.
//!
//! A [`Schedule`] is what the executor follows and what the execution plan
//! ([`crate::plan`]) predicts memory with, so the two cannot disagree on
//! when a value is live. The order is a topological order of the nodes,
//! file order among independent ones, checked for cycles; a node that holds
//! subgraphs depends on every enclosing value those subgraphs read. After
//! each step, every value whose last reader that node was dies, and so does
//! every output of it that nothing reads; the graph's outputs never die, and
//! neither do values no node reads (an unread initializer or input stays
//! live to the end).

use crate::error::{Result, RunError};
use crate::exec::node_label;
use diamond_ir::{Graph, Model, Node, ValueId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// The order a graph's nodes run in and the values that die after each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Node indices (into `graph.nodes`, in file order) in execution order.
    pub order: Vec<usize>,
    /// For each step of `order`, the values dropped after it, each once.
    pub frees: Vec<Vec<ValueId>>,
    /// The values the run returns (the graph's outputs, or a function's):
    /// never dropped.
    pub outputs: Vec<ValueId>,
}

impl Schedule {
    /// The schedule of `graph` (a graph of `model`) returning `outputs`.
    /// A cycle is an `InvalidModel` error naming a node on it.
    pub fn new(model: &Model, graph: &Graph, outputs: &[ValueId]) -> Result<Schedule> {
        let node_reads: Vec<Vec<ValueId>> = graph.nodes.values().map(|n| reads(model, graph, n)).collect();
        let order = topological_order(graph, &node_reads)?;
        let mut last_use: HashMap<ValueId, usize> = HashMap::new();
        for (pos, &n) in order.iter().enumerate() {
            for &id in &node_reads[n] {
                last_use.insert(id, pos);
            }
        }
        let kept: HashSet<ValueId> = outputs.iter().copied().collect();
        let nodes: Vec<&Node> = graph.nodes.values().collect();
        let frees = order
            .iter()
            .enumerate()
            .map(|(pos, &n)| {
                let dead = node_reads[n].iter().filter(|id| last_use.get(id) == Some(&pos));
                let unread = nodes[n].outputs.iter().filter(|id| !last_use.contains_key(id));
                let mut freed: Vec<ValueId> = Vec::new();
                for &id in dead.chain(unread) {
                    if !kept.contains(&id) && !freed.contains(&id) {
                        freed.push(id);
                    }
                }
                freed
            })
            .collect();
        Ok(Schedule { order, frees, outputs: outputs.to_vec() })
    }
}

impl Schedule {
    /// Whether the schedule can be one of `graph`: every node once, every
    /// value it names one of the graph's (a schedule of another graph could
    /// otherwise index past this one's nodes).
    pub fn fits(&self, graph: &Graph) -> bool {
        let n = graph.nodes.len();
        let mut seen = vec![false; n];
        let all_once =
            self.order.len() == n && self.order.iter().all(|&i| i < n && !std::mem::replace(&mut seen[i], true));
        let values = graph.values.len();
        let known = |id: &ValueId| diamond_ir::entity::EntityId::index(*id) < values;
        all_once && self.frees.len() == n && self.frees.iter().flatten().all(known) && self.outputs.iter().all(known)
    }
}

/// Names a graph (and the graphs nested in it) reads but does not define.
pub fn free_names(model: &Model, gid: diamond_ir::GraphId) -> HashSet<String> {
    let graph = &model.graphs[gid];
    let mut defined: HashSet<&str> = HashSet::new();
    for info in &graph.inputs {
        if let Some(v) = info.value {
            defined.insert(graph.value_name(v));
        }
    }
    for t in &graph.initializers {
        if let Some(n) = &t.name {
            defined.insert(n);
        }
    }
    for node in graph.nodes.values() {
        for &o in &node.outputs {
            defined.insert(graph.value_name(o));
        }
    }
    let mut free = HashSet::new();
    for node in graph.nodes.values() {
        for &i in &node.inputs {
            let name = graph.value_name(i);
            if !name.is_empty() && !defined.contains(name) {
                free.insert(name.to_string());
            }
        }
        for sub in node.subgraphs() {
            for name in free_names(model, sub) {
                if !defined.contains(name.as_str()) {
                    free.insert(name);
                }
            }
        }
    }
    for info in &graph.outputs {
        if let Some(v) = info.value {
            let name = graph.value_name(v);
            if !defined.contains(name) {
                free.insert(name.to_string());
            }
        }
    }
    free
}

/// The values node `node` reads: its operands and what its subgraphs read
/// from outside.
pub fn reads(model: &Model, graph: &Graph, node: &Node) -> Vec<ValueId> {
    let mut ids: Vec<ValueId> = node.inputs.iter().copied().filter(|&i| !graph.value_name(i).is_empty()).collect();
    for sub in node.subgraphs() {
        for name in free_names(model, sub) {
            if let Some(id) = graph.value_named(&name) {
                ids.push(id);
            }
        }
    }
    ids
}

/// Node indices in a topological order, file order among independent nodes.
fn topological_order(graph: &Graph, node_reads: &[Vec<ValueId>]) -> Result<Vec<usize>> {
    let nodes: Vec<&Node> = graph.nodes.values().collect();
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        for &o in &node.outputs {
            if !graph.value_name(o).is_empty() {
                producer.insert(o, i);
            }
        }
    }
    let mut indegree = vec![0usize; nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, reads) in node_reads.iter().enumerate() {
        let deps: HashSet<usize> =
            reads.iter().filter_map(|id| producer.get(id).copied()).filter(|&p| p != i).collect();
        indegree[i] = deps.len();
        for p in deps {
            users[p].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len()).filter(|&i| indegree[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck =
            (0..nodes.len()).find(|&i| indegree[i] > 0).map_or_else(String::new, |i| node_label(graph, nodes[i]));
        return Err(RunError::InvalidModel(format!("the graph has a cycle through node '{stuck}'")));
    }
    Ok(order)
}
