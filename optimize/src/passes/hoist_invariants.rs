//! `hoist-invariants`: the nodes of a `Loop` or `Scan` body that compute the
//! same value in every iteration — they read only outer values, the body's
//! initializers and each other, hold no subgraph and draw no random numbers
//! — move out of the body, before the loop, and run once. The body then
//! reads their results by name from the enclosing graph. A node whose result
//! is one of the body's outputs stays (each iteration hands it on).

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{splice_nodes, unique_name};
use crate::Analysis;
use diamond_ir::entity::EntityId;
use diamond_ir::{GraphId, Model, NodeId};
use std::collections::HashSet;

pub(crate) struct HoistInvariants;

impl Pass for HoistInvariants {
    fn name(&self) -> &'static str {
        "hoist-invariants"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let loops: Vec<(NodeId, GraphId)> = a
            .graph(model)
            .nodes
            .iter()
            .filter(|(_, n)| n.domain().is_empty() && matches!(n.op_type(), "Loop" | "Scan"))
            .filter_map(|(nid, n)| Some((nid, n.attribute("body")?.g?)))
            .collect();
        let mut moved = 0;
        // From the last: splicing nodes before one keeps the ids of the nodes before it.
        for &(nid, body) in loops.iter().rev() {
            moved += hoist(model, a, nid, body);
        }
        moved
    }
}

/// Moves the invariant nodes of `body` before loop `nid`; how many moved.
fn hoist(model: &mut Model, a: &Analysis, nid: NodeId, body: GraphId) -> usize {
    let b = &model.graphs[body];
    let initializers: HashSet<&str> = b.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let defined: HashSet<&str> = b
        .nodes
        .values()
        .flat_map(|n| n.outputs.iter().map(|&v| b.value_name(v)))
        .chain(b.inputs.iter().filter_map(|vi| vi.value).map(|v| b.value_name(v)))
        .chain(initializers.iter().copied())
        .collect();
    let outputs: HashSet<&str> = b.outputs.iter().filter_map(|vi| vi.value).map(|v| b.value_name(v)).collect();
    let mut invariant: HashSet<&str> = HashSet::new();
    let mut hoisted: Vec<NodeId> = Vec::new();
    for (id, n) in b.nodes.iter() {
        let fixed = n.subgraphs().next().is_none()
            && !NONDETERMINISTIC.contains(&n.op_type())
            && n.inputs.iter().map(|&v| b.value_name(v)).all(|name| {
                name.is_empty() || !defined.contains(name) || initializers.contains(name) || invariant.contains(name)
            })
            && n.outputs.iter().all(|&v| !outputs.contains(b.value_name(v)));
        if fixed {
            invariant.extend(n.outputs.iter().map(|&v| b.value_name(v)));
            hoisted.push(id);
        }
    }
    // Only constants: nothing is computed once instead of each time.
    if hoisted.iter().all(|&id| b.nodes[id].inputs.is_empty()) {
        return 0;
    }
    // The names the moved nodes define or read from the body's initializers,
    // renamed where the enclosing graph already has them.
    let mut names: Vec<String> = hoisted
        .iter()
        .flat_map(|&id| {
            let n = &b.nodes[id];
            n.outputs
                .iter()
                .chain(n.inputs.iter().filter(|&&v| initializers.contains(b.value_name(v))))
                .map(|&v| b.value_name(v).to_string())
        })
        .filter(|name| !name.is_empty())
        .collect();
    names.sort();
    names.dedup();
    for name in &names {
        if model.graphs[a.main].value_named(name).is_some() {
            let new = unique_name(&model.graphs[a.main], name);
            let new = (0..)
                .map(|i| if i == 0 { new.clone() } else { format!("{new}__{i}") })
                .find(|n| model.graphs[body].value_named(n).is_none())
                .expect("a name");
            model.graphs[a.main].intern(&new);
            crate::bodies::rename_everywhere(model, body, name, &new);
        }
    }
    let b = model.graphs[body].clone();
    let used_initializers: HashSet<&str> = hoisted
        .iter()
        .flat_map(|&id| b.nodes[id].inputs.iter().map(|&v| b.value_name(v)))
        .filter(|name| b.initializers.iter().any(|t| t.name.as_deref() == Some(*name)))
        .collect();
    for t in b.initializers.iter().filter(|t| t.name.as_deref().is_some_and(|n| used_initializers.contains(n))) {
        crate::rewrite::add_initializer(&mut model.graphs[a.main], t.clone(), a.initializers_are_constants);
    }
    let mut nodes = Vec::with_capacity(hoisted.len() + 1);
    for &id in &hoisted {
        let n = &b.nodes[id];
        let mut copy = n.clone();
        let g = &mut model.graphs[a.main];
        copy.inputs = n.inputs.iter().map(|&v| g.intern(b.value_name(v))).collect();
        copy.outputs = n.outputs.iter().map(|&v| g.intern(b.value_name(v))).collect();
        nodes.push(copy);
    }
    nodes.push(model.graphs[a.main].nodes[nid].clone());
    splice_nodes(&mut model.graphs[a.main], nid, nodes);
    let gone: HashSet<NodeId> = hoisted.iter().copied().collect();
    let graph = &mut model.graphs[body];
    crate::rewrite::remove_nodes(graph, &gone);
    // The body reads the weights it shared with them from the enclosing graph now.
    graph.initializers.retain(|t| !t.name.as_deref().is_some_and(|n| used_initializers.contains(n)));
    graph.owner = diamond_ir::GraphOwner::Attribute { graph: a.main, node: NodeId::new(nid.index() + hoisted.len()) };
    hoisted.len()
}
