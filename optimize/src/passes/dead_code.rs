//! `dead-code`: drops what no graph output needs — nodes, initializers
//! (not graph inputs), `value_info` entries of values that no longer exist,
//! model-local functions no node calls, and opset imports of domains
//! nothing uses (the default domain is always kept).

use super::Pass;
use crate::rewrite::remove_nodes;
use crate::Analysis;
use diamond_ir::{Model, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct DeadCode;

impl Pass for DeadCode {
    fn name(&self) -> &'static str {
        "dead-code"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut needed: HashSet<ValueId> = a.outputs.iter().copied().collect();
        needed.extend(a.outer_refs.iter().filter_map(|n| graph.value_named(n)));
        let mut stack: Vec<ValueId> = needed.iter().copied().collect();
        let mut live: HashSet<NodeId> = HashSet::new();
        while let Some(v) = stack.pop() {
            let Some(&n) = a.producer.get(&v) else { continue };
            if live.insert(n) {
                for &i in &graph.nodes[n].inputs {
                    if needed.insert(i) {
                        stack.push(i);
                    }
                }
                // A node's every output stays with it.
                needed.extend(graph.nodes[n].outputs.iter().copied());
            }
        }
        let dead: HashSet<NodeId> = graph.nodes.ids().filter(|n| !live.contains(n)).collect();
        let keep_initializers = !model.training_info.is_empty();
        let graph = &mut model.graphs[a.main];
        let mut removed = dead.len();
        remove_nodes(graph, &dead);
        if !keep_initializers {
            let before = graph.initializers.len();
            // Before IR 4 an initializer is listed as a graph input too, yet is
            // no input of the caller's: an unread one goes with its input entry.
            let constants = a.initializers_are_constants;
            let inputs = &a.inputs;
            let names: Vec<Option<ValueId>> =
                graph.initializers.iter().map(|t| t.name.as_deref().and_then(|n| graph.value_named(n))).collect();
            let dropped: HashSet<ValueId> = names
                .iter()
                .flatten()
                .copied()
                .filter(|v| !needed.contains(v) && (constants || !inputs.contains(v)))
                .collect();
            let mut k = 0;
            graph.initializers.retain(|_| {
                k += 1;
                names[k - 1].is_none_or(|v| !dropped.contains(&v))
            });
            if constants {
                graph.inputs.retain(|vi| vi.value.is_none_or(|v| !dropped.contains(&v)));
            }
            removed += before - graph.initializers.len();
        }
        // value_info of values nothing defines any more.
        let mut defined: HashSet<ValueId> = graph.inputs.iter().filter_map(|vi| vi.value).collect();
        defined.extend(graph.initializers.iter().filter_map(|t| t.name.as_deref().and_then(|n| graph.value_named(n))));
        for node in graph.nodes.values() {
            defined.extend(node.outputs.iter().copied());
        }
        graph.value_info.retain(|vi| vi.value.is_some_and(|v| defined.contains(&v)));
        removed + unused_functions(model) + unused_opsets(model)
    }
}

/// Drops model-local functions no node of any graph calls.
fn unused_functions(model: &mut Model) -> usize {
    let called: HashSet<(String, String)> = model
        .graphs
        .values()
        .flat_map(|g| g.nodes.values().map(|n| (n.domain().to_string(), n.op_type().to_string())))
        .collect();
    let before = model.functions.len();
    model
        .functions
        .retain(|f| called.contains(&(f.domain.clone().unwrap_or_default(), f.name.clone().unwrap_or_default())));
    before - model.functions.len()
}

/// Drops opset imports of domains that no node and no function uses.
fn unused_opsets(model: &mut Model) -> usize {
    let used: HashSet<String> = model
        .graphs
        .values()
        .flat_map(|g| g.nodes.values().map(|n| n.domain().to_string()))
        .chain(model.functions.iter().map(|f| f.domain.clone().unwrap_or_default()))
        .collect();
    let before = model.opset_imports.len();
    model.opset_imports.retain(|o| {
        let d = o.domain.as_deref().unwrap_or("");
        d.is_empty() || d == "ai.onnx" || used.contains(d)
    });
    before - model.opset_imports.len()
}
