//! `fold-constants`: a node whose every input is a constant (a stored
//! tensor, or a value this pass already folded) is run once on the
//! reference executor and replaced by the initializers it computes — float
//! arithmetic included, computed exactly as the runtime would. A result is
//! kept only under the size budget: no more elements than the node's inputs
//! hold together, or at most 256 Ki elements (1 MiB of f32), so that folding
//! never inflates a model (`ConstantOfShape` of a large shape stays). Random
//! operators, nodes with subgraphs and other domains are never folded.

use super::{Pass, NONDETERMINISTIC};
use crate::rewrite::{add_initializer, remove_nodes};
use crate::Analysis;
use diamond_ir::{Graph, GraphOwner, Model, NodeId, Tensor, TensorData, ValueInfo};
use diamond_runtime::{run_model, RunOptions, Value};
use std::collections::{HashMap, HashSet};

pub(crate) struct FoldConstants;

/// Results up to this many elements fold whatever their inputs' size.
pub(super) const SMALL_RESULT: u64 = 1 << 18;

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold-constants"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let Some(order) = crate::passes::topological(model, a) else { return 0 };
        let graph = a.graph(model);
        // Constants by name: stored tensors that are not the caller's inputs.
        let mut constants: HashMap<String, Tensor> = HashMap::new();
        for t in &graph.initializers {
            let Some(name) = t.name.as_deref() else { continue };
            let v = graph.value_named(name);
            if v.is_some_and(|v| !a.inputs.contains(&v) || a.initializers_are_constants) && !t.is_external() {
                constants.insert(name.to_string(), t.clone());
            }
        }
        let mut folded: Vec<NodeId> = Vec::new();
        let mut made: Vec<String> = Vec::new();
        for nid in order {
            let n = &graph.nodes[nid];
            let foreign = !n.domain().is_empty() && n.domain() != "ai.onnx";
            if foreign
                || NONDETERMINISTIC.contains(&n.op_type())
                || n.op_type() == "Constant"
                || n.attributes.iter().any(|at| at.subgraphs().next().is_some())
            {
                continue;
            }
            let named_inputs: Vec<&str> =
                n.inputs.iter().map(|&v| graph.value_name(v)).filter(|s| !s.is_empty()).collect();
            if named_inputs.is_empty() || named_inputs.iter().any(|s| !constants.contains_key(*s)) {
                continue;
            }
            let outputs: Vec<&str> = n.outputs.iter().map(|&v| graph.value_name(v)).collect();
            if outputs.iter().any(|o| o.is_empty()) || n.outputs.iter().any(|&v| !a.is_internal(model, v)) {
                continue;
            }
            let input_elements: u64 =
                named_inputs.iter().map(|s| constants[*s].element_count().unwrap_or(u64::MAX)).sum();
            let Some(results) = evaluate(model, n, &named_inputs, &constants) else { continue };
            let budget = input_elements.max(SMALL_RESULT);
            if results.iter().any(|t| t.element_count().is_none_or(|c| c > budget)) {
                continue;
            }
            for (name, mut t) in outputs.iter().zip(results) {
                t.name = Some(name.to_string());
                constants.insert(name.to_string(), t);
                made.push(name.to_string());
            }
            folded.push(nid);
        }
        if folded.is_empty() {
            return 0;
        }
        // Only folded values a remaining node reads become initializers.
        let dead: HashSet<NodeId> = folded.iter().copied().collect();
        let read: HashSet<String> = graph
            .nodes
            .iter()
            .filter(|(id, _)| !dead.contains(id))
            .flat_map(|(_, n)| n.inputs.iter().map(|&v| graph.value_name(v).to_string()))
            .chain(a.outer_refs.iter().cloned())
            .collect();
        let keep: Vec<Tensor> = made.iter().filter(|m| read.contains(*m)).map(|m| constants[m].clone()).collect();
        let graph = &mut model.graphs[a.main];
        remove_nodes(graph, &dead);
        for t in keep {
            add_initializer(graph, t, a.initializers_are_constants);
        }
        dead.len()
    }
}

/// Runs node `n` alone on the executor, its inputs given; its outputs as stored tensors.
fn evaluate(
    model: &Model,
    n: &diamond_ir::Node,
    inputs: &[&str],
    constants: &HashMap<String, Tensor>,
) -> Option<Vec<Tensor>> {
    let source = model.main_graph()?;
    let mut g = Graph::new(GraphOwner::Main);
    let mut node = n.clone();
    node.inputs = n.inputs.iter().map(|&v| g.intern(source.value_name(v))).collect();
    node.outputs = n.outputs.iter().map(|&v| g.intern(source.value_name(v))).collect();
    g.initializers = inputs.iter().map(|s| constants[*s].clone()).collect();
    g.outputs = node.outputs.iter().map(|&v| ValueInfo { value: Some(v), ..ValueInfo::default() }).collect();
    g.nodes.push(node);
    let mut mini = Model {
        ir_version: model.ir_version.max(Some(4)),
        opset_imports: model.opset_imports.clone(),
        ..Model::default()
    };
    let id = mini.graphs.push(g);
    mini.graph = Some(id);
    let result = run_model(&mini, Vec::new(), &RunOptions::default()).ok()?;
    result
        .outputs
        .into_iter()
        .map(|(_, v)| match v {
            Value::Tensor(t) => Some(Tensor {
                dims: t.shape.iter().map(|&d| d as i64).collect(),
                data_type: Some(t.elem()),
                data: TensorData { raw: Some(bytes::Bytes::from(t.data.to_le_bytes()?)), ..TensorData::default() },
                ..Tensor::default()
            }),
            _ => None,
        })
        .collect()
}
