//! `fold-if`: an `If` whose condition is known — a constant, or a value the
//! shapes decide (`Equal(Size(Shape(x)), 2)` on an `x` of known rank) — is
//! replaced by the nodes of the branch it takes, in its place. The branch's
//! own values move into the enclosing graph (renamed where a name is taken
//! there), its initializers with them; the graphs its nodes hold move along
//! and read the new names. Readers of the `If`'s outputs read the branch's
//! results instead; an output that is a graph output or that a subgraph reads
//! by name keeps its name through an `Identity`.

use super::Pass;
use crate::rewrite::{node, replace_uses, splice_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::entity::EntityId;
use diamond_ir::{GraphId, GraphOwner, Model, NodeId};
use std::collections::HashMap;

pub(crate) struct FoldIf;

impl Pass for FoldIf {
    fn name(&self) -> &'static str {
        "fold-if"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut taken: Vec<(NodeId, GraphId)> = Vec::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() != "If" || !n.domain().is_empty() {
                continue;
            }
            let Some(truth) = n.inputs.first().and_then(|&c| a.constant(model, c)).and_then(|c| truth(&c.data)) else {
                continue;
            };
            let attr = if truth { "then_branch" } else { "else_branch" };
            let Some(branch) = n.attribute(attr).and_then(|at| at.g) else { continue };
            let b = &model.graphs[branch];
            // A branch with inputs or sparse weights is not what the spec allows; leave it.
            if b.inputs.is_empty() && b.sparse_initializers.is_empty() && b.outputs.len() >= n.outputs.len() {
                taken.push((nid, branch));
            }
        }
        // From the last: splicing a node keeps the ids of the nodes before it.
        for &(nid, branch) in taken.iter().rev() {
            inline_branch(model, a, nid, branch);
        }
        taken.len()
    }
}

/// Whether a one-element condition is true; `None` for any other size.
fn truth(data: &ConstData) -> Option<bool> {
    if data.len() != 1 {
        return None;
    }
    match data {
        ConstData::Bools(v) => Some(v[0]),
        ConstData::Ints(v) => v[0].as_int().map(|i| i != 0),
        ConstData::Floats(v) => Some(v[0] != 0.0),
        ConstData::Strings(_) => None,
    }
}

/// Replaces `If` node `nid` of the main graph by the nodes of `branch`.
fn inline_branch(model: &mut Model, a: &Analysis, nid: NodeId, branch: GraphId) {
    let main = a.main;
    let b = model.graphs[branch].clone();
    // The branch's own names, and what they are called in the main graph.
    let mut renamed: HashMap<String, String> = HashMap::new();
    let own = b
        .initializers
        .iter()
        .filter_map(|t| t.name.clone())
        .chain(b.nodes.values().flat_map(|n| n.outputs.iter().map(|&v| b.value_name(v).to_string())))
        .filter(|name| !name.is_empty());
    for name in own {
        let free = unique_name(&model.graphs[main], &name);
        let new = if renamed.values().any(|v| *v == free) {
            (2..).map(|i| format!("{name}__{i}")).find(|n| model.graphs[main].value_named(n).is_none()).expect("a name")
        } else {
            free
        };
        model.graphs[main].intern(&new);
        renamed.insert(name, new);
    }
    let map = |name: &str| renamed.get(name).cloned().unwrap_or_else(|| name.to_string());
    let mut nodes = Vec::with_capacity(b.nodes.len() + 1);
    let mut held: Vec<Vec<GraphId>> = Vec::new();
    for n in b.nodes.values() {
        let mut copy = n.clone();
        let g = &mut model.graphs[main];
        copy.inputs = n.inputs.iter().map(|&v| g.intern(&map(b.value_name(v)))).collect();
        copy.outputs = n.outputs.iter().map(|&v| g.intern(&map(b.value_name(v)))).collect();
        held.push(n.subgraphs().collect());
        nodes.push(copy);
    }
    for t in &b.initializers {
        let mut t = t.clone();
        t.name = t.name.as_deref().map(map);
        crate::rewrite::add_initializer(&mut model.graphs[main], t, a.initializers_are_constants);
    }
    // The If's outputs: readers follow the branch's results, or an Identity keeps the name.
    let if_outputs = model.graphs[main].nodes[nid].outputs.clone();
    for (k, &out) in if_outputs.iter().enumerate() {
        let g = &model.graphs[main];
        if g.value_name(out).is_empty() {
            continue;
        }
        let Some(result) = b.outputs.get(k).and_then(|vi| vi.value) else { continue };
        let result = model.graphs[main].intern(&map(b.value_name(result)));
        if a.may_rewire(model, out) {
            replace_uses(&mut model.graphs[main], out, result);
        } else {
            let name = format!("{}_result_{k}", model.graphs[main].value_name(out));
            nodes.push(node("Identity", &name, vec![result], vec![out], Vec::new()));
            held.push(Vec::new());
        }
    }
    let at = nid.index();
    let branches: Vec<GraphId> = model.graphs[main].nodes[nid].subgraphs().collect();
    splice_nodes(&mut model.graphs[main], nid, nodes);
    // The graphs the moved nodes hold now hang off the main graph, and read the new names.
    for (k, graphs) in held.into_iter().enumerate() {
        for g in graphs {
            model.graphs[g].owner = GraphOwner::Attribute { graph: main, node: NodeId::new(at + k) };
            for (old, new) in renamed.iter().filter(|(o, n)| o != n) {
                crate::bodies::rename_reads(model, g, old, new);
            }
        }
    }
    // The branch taken was emptied into the main graph (its nested graphs moved
    // along); the other one, and all it holds, is gone with the If.
    for g in branches {
        if g == branch {
            model.graphs[g] = diamond_ir::Graph::new(GraphOwner::Detached);
        } else {
            crate::bodies::discard(model, g);
        }
    }
}
