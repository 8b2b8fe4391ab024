//! Optimizing control-flow bodies: every `If` branch and `Loop`/`Scan` body,
//! at any depth, runs through the same passes as the main graph.
//!
//! A body reads values of the graphs around it by name. To optimize it, the
//! driver makes it the model's main graph for a while (a [`Frame`]): its own
//! inputs take the types the check inferred for them, and each outer value
//! it reads becomes one of its graph inputs, typed as the check inferred it
//! in the enclosing graph — or, when the enclosing graph knows its elements
//! (a weight, a `Constant`, a folded shape), an initializer of the same name,
//! so that constants fold into the body. Passes never rename or remove a
//! graph input, so an outer value keeps its name. Leaving the frame takes the
//! borrowed inputs and initializers away again: the body reads them from
//! outside as before. A name a pass made in the body that an enclosing graph
//! also defines is renamed, so that no body shadows an outer value.

use crate::analysis::collect_refs;
use diamond_ir::entity::EntityId;
use diamond_ir::{Graph, GraphId, GraphOwner, Model, NodeId, Tensor, TypeInfo, ValueId, ValueInfo};
use rustc_hash::FxHashSet as HashSet;

/// How deep bodies are optimized (the check lowers no deeper either).
pub(crate) const MAX_DEPTH: usize = 16;

/// A body made the main graph for a while: what to restore when leaving.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    /// The graph that was the main graph.
    outer: GraphId,
    /// The body.
    body: GraphId,
    /// The body's owner.
    owner: GraphOwner,
    /// The body's own inputs, as the file declared them.
    inputs: Vec<ValueInfo>,
    /// The outer constants lent to the body as initializers, by name.
    lent: Vec<String>,
}

/// The bodies held by the nodes of graph `g`: (node, attribute name, body).
pub(crate) fn bodies_of(model: &Model, g: GraphId) -> Vec<(NodeId, String, GraphId)> {
    let mut out = Vec::new();
    for (nid, node) in model.graphs[g].nodes.iter() {
        for a in &node.attributes {
            for body in a.subgraphs() {
                out.push((nid, a.name().to_string(), body));
            }
        }
    }
    out
}

/// A body's label in pass runs: `node/attribute` under its enclosing label.
pub(crate) fn label(model: &Model, outer: GraphId, nid: NodeId, attr: &str, within: &str) -> String {
    let node = &model.graphs[outer].nodes[nid];
    let name =
        if node.name().is_empty() { format!("{}_{}", node.op_type(), nid.index()) } else { node.name().to_string() };
    if within.is_empty() {
        format!("{name}/{attr}")
    } else {
        format!("{within}/{name}/{attr}")
    }
}

/// Outer constants up to this many bytes are lent to a body as
/// initializers when the enclosing graph knows them only as folded values
/// (stored weights are lent whatever their size: their bytes are shared).
const LENT_FOLDED_BYTES: u64 = 1 << 16;

impl Frame {
    /// Makes `body` (held by a node of the current main graph, which
    /// `analysis` describes) the main graph. An error, changing nothing, when
    /// a value the body reads is not a tensor, or not a value of the enclosing graph.
    pub(crate) fn enter(model: &mut Model, analysis: &crate::Analysis, body: GraphId) -> Result<Frame, String> {
        let outer = analysis.main;
        let mut free = HashSet::default();
        collect_refs(model, body, &mut free);
        let mut free: Vec<String> = free.into_iter().collect();
        free.sort();
        let inferred = &analysis.report.inferred;
        let mut lent_tensors: Vec<Tensor> = Vec::new();
        let mut borrowed_inputs: Vec<(String, Option<TypeInfo>)> = Vec::new();
        for name in &free {
            let graph = &model.graphs[outer];
            let Some(v) = graph.value_named(name) else {
                return Err(format!("it reads '{name}', which the enclosing graph does not define"));
            };
            if let Some(&i) = analysis.initializers.get(&v) {
                if !analysis.inputs.contains(&v) || analysis.initializers_are_constants {
                    let mut t = graph.initializers[i].clone();
                    t.name = Some(name.clone());
                    lent_tensors.push(t);
                    continue;
                }
            }
            if let Some(c) = analysis.constant(model, v) {
                let small = analysis.known_bytes(model, v).is_some_and(|b| b <= LENT_FOLDED_BYTES);
                if let Some(t) = small.then(|| crate::rewrite::constant_tensor(name, &c)).flatten() {
                    lent_tensors.push(t);
                    continue;
                }
            }
            let ty = inferred.get(outer, v).cloned().or_else(|| declared_type(graph, v));
            // A value of unknown type is lent untyped (what reads it stays as it is);
            // a sequence, map or optional is not a graph input the passes expect.
            if ty.as_ref().is_some_and(|t| !is_tensor(t)) {
                return Err(format!("it reads '{name}', which is not a tensor"));
            }
            borrowed_inputs.push((name.clone(), ty));
        }
        let own: Vec<ValueInfo> = model.graphs[body].inputs.clone();
        let typed: Vec<ValueInfo> = own
            .iter()
            .map(|vi| {
                let mut vi = vi.clone();
                if let Some(ty) = vi.value.and_then(|v| inferred.get(body, v)) {
                    vi.ty = Some(ty.clone());
                }
                vi
            })
            .collect();
        let lent: Vec<String> = lent_tensors.iter().filter_map(|t| t.name.clone()).collect();
        let graph = &mut model.graphs[body];
        let owner = graph.owner;
        graph.owner = GraphOwner::Main;
        graph.inputs = typed;
        for (name, ty) in borrowed_inputs {
            let value = Some(graph.intern(&name));
            graph.inputs.push(ValueInfo { value, ty, ..ValueInfo::default() });
        }
        for t in lent_tensors {
            graph.intern(t.name.as_deref().unwrap_or_default());
            graph.initializers.push(t);
        }
        model.graph = Some(body);
        Ok(Frame { outer, body, owner, inputs: own, lent })
    }

    /// Gives the main graph back to the enclosing graph; `ancestors` are the
    /// graphs around the body (outermost first), whose names it must not define.
    pub(crate) fn leave(&self, model: &mut Model, ancestors: &[GraphId]) {
        model.graph = Some(self.outer);
        let graph = &mut model.graphs[self.body];
        graph.owner = self.owner;
        graph.inputs = self.inputs.clone();
        let lent: HashSet<&str> = self.lent.iter().map(String::as_str).collect();
        graph.initializers.retain(|t| !t.name.as_deref().is_some_and(|n| lent.contains(n)));
        let mut outside: HashSet<String> = HashSet::default();
        for &a in ancestors {
            defined_names(&model.graphs[a], &mut outside);
        }
        let mut clashes: Vec<String> = Vec::new();
        let body = &model.graphs[self.body];
        for (_, node) in body.nodes.iter() {
            for &v in &node.outputs {
                let name = body.value_name(v);
                if !name.is_empty() && outside.contains(name) {
                    clashes.push(name.to_string());
                }
            }
        }
        for t in &body.initializers {
            if let Some(name) = t.name.as_deref().filter(|n| outside.contains(*n)) {
                clashes.push(name.to_string());
            }
        }
        for old in clashes {
            let mut taken = outside.clone();
            defined_names(&model.graphs[self.body], &mut taken);
            let new = (2..).map(|i| format!("{old}__{i}")).find(|n| !taken.contains(n)).expect("a free name");
            rename_everywhere(model, self.body, &old, &new);
        }
    }
}

/// A copy of `model` as it will be once every frame in `frames` (innermost
/// last) is left: what `--bisect` verifies after a pass run inside a body.
pub(crate) fn restored(model: &Model, frames: &[(Frame, Vec<GraphId>)]) -> Model {
    let mut copy = model.clone();
    for (frame, ancestors) in frames.iter().rev() {
        crate::rewrite::sort_topologically(&mut copy);
        frame.leave(&mut copy, ancestors);
    }
    copy
}

/// Whether `ty` is a tensor type (or says nothing of its kind).
fn is_tensor(ty: &TypeInfo) -> bool {
    matches!(&ty.value, None | Some(diamond_ir::TypeValue::Tensor { .. }))
}

/// The type `graph` declares for `v` (as an input, output or `value_info`).
fn declared_type(graph: &Graph, v: ValueId) -> Option<TypeInfo> {
    graph.inputs.iter().chain(&graph.value_info).chain(&graph.outputs).find(|vi| vi.value == Some(v))?.ty.clone()
}

/// Every name `graph` defines: its inputs, initializers and node outputs.
fn defined_names(graph: &Graph, out: &mut HashSet<String>) {
    for vi in &graph.inputs {
        if let Some(v) = vi.value {
            out.insert(graph.value_name(v).to_string());
        }
    }
    for t in &graph.initializers {
        if let Some(n) = &t.name {
            out.insert(n.clone());
        }
    }
    for (_, node) in graph.nodes.iter() {
        for &v in &node.outputs {
            let n = graph.value_name(v);
            if !n.is_empty() {
                out.insert(n.to_string());
            }
        }
    }
}

/// Makes graph `g` (and the graphs nested in it) read `new` where they read
/// `old` from an enclosing graph; nothing when `g` defines `old` itself.
pub(crate) fn rename_reads(model: &mut Model, g: GraphId, old: &str, new: &str) {
    let mut own = HashSet::default();
    defined_names(&model.graphs[g], &mut own);
    if !own.contains(old) {
        rename_everywhere(model, g, old, new);
    }
}

/// Empties graph `g` and the graphs nested in it, and marks them detached:
/// what is left of the bodies of a node that was removed.
pub(crate) fn discard(model: &mut Model, g: GraphId) {
    let nested: Vec<GraphId> = model.graphs[g].nodes.values().flat_map(|n| n.subgraphs()).collect();
    model.graphs[g] = Graph::new(GraphOwner::Detached);
    for sub in nested {
        discard(model, sub);
    }
}

/// Renames value `old` of graph `g` to `new` everywhere `g` mentions it,
/// and in the graphs nested in `g` that read it from `g` by name.
pub(crate) fn rename_everywhere(model: &mut Model, g: GraphId, old: &str, new: &str) {
    let graph = &mut model.graphs[g];
    let Some(from) = graph.value_named(old) else { return };
    let to = graph.intern(new);
    let nested: Vec<GraphId> = graph.nodes.values().flat_map(|n| n.subgraphs()).collect();
    for node in graph.nodes.values_mut() {
        for v in node.inputs.iter_mut().chain(node.outputs.iter_mut()) {
            if *v == from {
                *v = to;
            }
        }
    }
    for vi in graph.inputs.iter_mut().chain(graph.outputs.iter_mut()).chain(graph.value_info.iter_mut()) {
        if vi.value == Some(from) {
            vi.value = Some(to);
        }
    }
    for t in &mut graph.initializers {
        if t.name.as_deref() == Some(old) {
            t.name = Some(new.to_string());
        }
    }
    for sub in nested {
        rename_reads(model, sub, old, new);
    }
}
