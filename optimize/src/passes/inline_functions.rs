//! `inline-functions`: a call of a model-local function becomes the
//! function's nodes, in its place — formal inputs and outputs read and
//! written as the call's operands and results, every other name of the body
//! given a fresh one under the call's name, attributes the body takes from
//! the call (`ref_attr_name`) filled from the call or the function's
//! defaults. The other passes then see the function's nodes among the
//! graph's own, and a function nothing calls any more is dropped. A call
//! stays as it is when the function imports another version of an operator
//! set than the model, or when its body holds subgraphs.

use super::Pass;
use crate::rewrite::{splice_nodes, unique_name};
use crate::Analysis;
use diamond_ir::entity::EntityId;
use diamond_ir::{Attribute, Function, Graph, Model, Node, NodeId};
use std::collections::HashMap;

pub(crate) struct InlineFunctions;

impl Pass for InlineFunctions {
    fn name(&self) -> &'static str {
        "inline-functions"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.functions.is_empty() {
            return 0;
        }
        let calls: Vec<(NodeId, usize)> = a
            .graph(model)
            .nodes
            .iter()
            .filter_map(|(nid, n)| Some((nid, called(model, n)?)))
            .filter(|&(_, f)| inlinable(model, &model.functions[f]))
            .collect();
        // From the last: splicing a node keeps the ids of the nodes before it.
        for &(nid, f) in calls.iter().rev() {
            inline_call(model, a.main, nid, f);
        }
        if !calls.is_empty() {
            drop_uncalled(model);
        }
        calls.len()
    }
}

/// The model-local function node `n` calls.
fn called(model: &Model, n: &Node) -> Option<usize> {
    model.functions.iter().position(|f| {
        f.name.as_deref() == Some(n.op_type())
            && f.domain.as_deref().unwrap_or("") == n.domain()
            && f.overload.as_deref().unwrap_or("") == n.rare().overload.as_deref().unwrap_or("")
    })
}

/// Whether a call of `f` may become `f`'s nodes: the body holds no
/// subgraph, and every operator set it imports is the model's version.
fn inlinable(model: &Model, f: &Function) -> bool {
    let body = &model.graphs[f.body];
    let same_opsets = f.opset_imports.iter().all(|o| {
        let domain = o.domain.as_deref().unwrap_or("");
        model.opset_version(domain).is_none_or(|v| Some(v) == o.version)
    });
    same_opsets && body.nodes.values().all(|n| n.subgraphs().next().is_none())
}

/// Replaces call `nid` of graph `g` by the nodes of function `f`.
fn inline_call(model: &mut Model, g: diamond_ir::GraphId, nid: NodeId, f: usize) {
    let function = model.functions[f].clone();
    let body: Graph = model.graphs[function.body].clone();
    let call = model.graphs[g].nodes[nid].clone();
    let graph = &model.graphs[g];
    // Formal parameters are the call's operands and results (an omitted one is "").
    let mut names: HashMap<String, String> = HashMap::new();
    for (k, &v) in function.inputs.iter().enumerate() {
        let actual = call.inputs.get(k).map_or("", |&a| graph.value_name(a));
        names.insert(body.value_name(v).to_string(), actual.to_string());
    }
    for (k, &v) in function.outputs.iter().enumerate() {
        let actual = call.outputs.get(k).map_or("", |&a| graph.value_name(a));
        names.insert(body.value_name(v).to_string(), actual.to_string());
    }
    let prefix =
        if call.name().is_empty() { format!("{}_{}", call.op_type(), nid.index()) } else { call.name().to_string() };
    let mut nodes = Vec::with_capacity(body.nodes.len());
    for n in body.nodes.values() {
        let mut copy = n.clone();
        copy.name = Some(format!("{prefix}/{}", n.name()));
        copy.attributes = n.attributes.iter().filter_map(|at| resolve(at, &call, &function)).collect();
        let graph = &mut model.graphs[g];
        let mut map = |v: diamond_ir::ValueId, graph: &mut Graph| {
            let name = body.value_name(v);
            if name.is_empty() {
                return graph.intern("");
            }
            let mapped = match names.get(name) {
                Some(m) => m.clone(),
                None => {
                    let fresh = unique_name(graph, &format!("{prefix}/{name}"));
                    names.insert(name.to_string(), fresh.clone());
                    fresh
                }
            };
            graph.intern(&mapped)
        };
        copy.inputs = n.inputs.iter().map(|&v| map(v, graph)).collect();
        copy.outputs = n.outputs.iter().map(|&v| map(v, graph)).collect();
        nodes.push(copy);
    }
    splice_nodes(&mut model.graphs[g], nid, nodes);
}

/// A body node's attribute with its reference to the call's attributes
/// resolved: the call's value, else the function's default, else none.
fn resolve(at: &Attribute, call: &Node, f: &Function) -> Option<Attribute> {
    let Some(reference) = at.ref_attr_name.as_deref() else { return Some(at.clone()) };
    let given = call.attribute(reference).or_else(|| f.attribute_protos.iter().find(|p| p.name() == reference))?;
    let mut value = given.clone();
    value.name = at.name.clone();
    Some(value)
}

/// Drops the functions that no node of any graph calls.
fn drop_uncalled(model: &mut Model) {
    let mut keep = vec![false; model.functions.len()];
    for (_, g) in model.graphs.iter() {
        for n in g.nodes.values() {
            if let Some(f) = called(model, n) {
                keep[f] = true;
            }
        }
    }
    let mut k = 0;
    model.functions.retain(|_| {
        k += 1;
        keep[k - 1]
    });
}
