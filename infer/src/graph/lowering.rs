//! Walking a model's graphs and lowering every node through its rule.
//!
//! Each lowering of a graph is an *instance*: the main graph, each subgraph
//! (If branch, Loop body, ...) where its node is lowered, and each call site
//! of a model-local function. Values are keyed by (instance, value), so a
//! function called twice has two sets of facts. A subgraph instance sees the
//! values of the instances enclosing it by name; a function body sees only
//! its parameters.
//!
//! Nodes run in topological order (computed here: files are not always
//! sorted); a rule that lacks a fact returns `Defer` and is retried after
//! the rest of the graph, repeatedly while retries make progress.

use super::declared::{facts_from_type, states_shape, Declared};
use super::CheckOptions;
use crate::cause::{NodeSite, Origin};
use crate::diagnostic::Code;
use crate::ops::OpTable;
use crate::rule::{Defer, Facts, Host, Key, LoweringState, NodeAt, OpCtx};
use crate::solver::{Solver, TensorId, TensorKind};
use diamond_ir::entity::EntityId;
use diamond_ir::term::RowTerm;
use diamond_ir::{Graph, GraphId, Model, Node, NodeId, OpsetImport, Tensor, ValueId};
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// How deep function calls and subgraphs may nest.
const MAX_DEPTH: usize = 64;

/// One lowering of one graph.
pub(crate) struct Instance<'m> {
    pub(crate) graph: GraphId,
    /// The instance whose values this one sees by name (subgraphs only).
    pub(crate) parent: Option<u32>,
    /// Prefix of value names in reports (`If_0/then_branch/`).
    pub(crate) prefix: String,
    /// For a function body: the call node and its instance, for attribute references.
    pub(crate) call: Option<(u32, &'m Node, &'m diamond_ir::Function)>,
    /// The opsets node versions are read from.
    pub(crate) opsets: &'m [OpsetImport],
    /// Whether its values appear in the report.
    pub(crate) reported: bool,
    pub(crate) depth: usize,
}

/// The state of one model's lowering, less what it lends the rules (the
/// [`LoweringState`] each of its methods is handed).
pub(crate) struct Lowering<'m> {
    pub(crate) model: &'m Model,
    pub(crate) options: &'m CheckOptions,
    pub(crate) table: &'m OpTable,
    pub(crate) instances: Vec<Instance<'m>>,
    /// Values in report order, with their solver tensor.
    pub(crate) reported: Vec<(String, Key, TensorId, TensorKind)>,
    /// Every defined value, with its solver tensor.
    pub(crate) defined: Vec<(Key, TensorId)>,
    /// Values whose shape was taken from a declaration.
    pub(crate) from_declaration: Vec<String>,
    /// Per graph, the types `value_info` and outputs state (built on first use).
    declared: HashMap<GraphId, HashMap<ValueId, &'m diamond_ir::TypeInfo>>,
    /// The main graph inputs' symbols: what a declared `dim_param` elsewhere may state sizes in.
    pub(crate) input_symbols: std::collections::HashSet<String>,
    /// The names of the main graph inputs' open axes (`x.2`).
    pub(crate) input_dims: diamond_ir::InputDims,
    /// Open axes an earlier pass of the check found used as a fixed size or
    /// another size: their generated symbol stands for that instead.
    pub(crate) specialized: std::collections::HashMap<String, diamond_ir::term::SizeExpr>,
    /// Operator types as the shared strings causes hold, one per distinct type.
    op_names: HashMap<&'m str, Arc<str>>,
    /// Each instance's value-name prefix as a shared string, made on first use.
    prefixes: Vec<Option<Arc<str>>>,
    /// Each instance's opset version of the default domain, which most
    /// nodes are in, looked up on first use.
    default_opsets: Vec<Option<Option<i64>>>,
}

impl<'m> Lowering<'m> {
    /// A lowering of `model` and the state it lends the rules.
    pub(crate) fn new(
        model: &'m Model,
        options: &'m CheckOptions,
        table: &'m OpTable,
        specialized: std::collections::HashMap<String, diamond_ir::term::SizeExpr>,
    ) -> (Lowering<'m>, LoweringState<'m>) {
        let mut solver = Solver::new();
        // Only sizes the file states are claims under `--strict-units`; a 1 a rule
        // computes (keepdims, Reshape's -1) asserts nothing.
        solver.set_computed_units_claim_free(true);
        solver.set_unit_widening_warns(options.strict_units);
        solver.set_default_basis_unnamed(true);
        // Every value of every graph gets facts and most are reported, most
        // of them once: their lists are made room for at once.
        let values: usize = model.graphs.values().map(|g| g.values.len()).sum();
        solver.reserve_tensors(values);
        let lowering = Lowering {
            model,
            options,
            table,
            instances: Vec::new(),
            reported: Vec::with_capacity(values),
            defined: Vec::with_capacity(values),
            from_declaration: Vec::new(),
            declared: HashMap::default(),
            input_symbols: model.main_graph().map(super::claims::input_symbols).unwrap_or_default(),
            input_dims: model.main_graph().map(diamond_ir::InputDims::of).unwrap_or_default(),
            specialized,
            op_names: HashMap::default(),
            prefixes: Vec::new(),
            default_opsets: Vec::new(),
        };
        (lowering, LoweringState::new(solver, options.strict_units))
    }

    /// What each axis of main-graph input `id` stands for where the file
    /// leaves it open: its generated symbol, or what an earlier pass found
    /// that symbol specialized to.
    fn open_axes(&self, id: ValueId, ty: Option<&diamond_ir::TypeInfo>) -> Vec<Option<diamond_ir::term::Dim>> {
        let rank = match ty.and_then(|t| t.value.as_ref()) {
            Some(diamond_ir::TypeValue::Tensor { shape: Some(s), .. }) => s.dims.len(),
            _ => return Vec::new(),
        };
        (0..rank)
            .map(|axis| {
                let name = self.input_dims.open_symbol(id, axis)?;
                match self.specialized.get(name) {
                    Some(e) => crate::rule::expr_dim(e.clone()),
                    None => crate::rule::expr_dim(diamond_ir::term::SizeExpr::symbol(name)),
                }
            })
            .collect()
    }

    /// `op` as a shared string (made once per operator type).
    pub(crate) fn shared_op(&mut self, op: &'m str) -> Arc<str> {
        self.op_names.entry(op).or_insert_with(|| op.into()).clone()
    }

    /// The site causes made at node `nid` of `inst` share.
    pub(crate) fn node_site(&mut self, inst: u32, node: &'m Node, nid: NodeId) -> Arc<NodeSite> {
        Arc::new(NodeSite {
            name: node.name().into(),
            op: self.shared_op(node.op_type()),
            index: nid.index() as u32,
            graph: self.shared_prefix(inst),
        })
    }

    /// The report-name prefix of `inst` as a shared string (made once per instance).
    pub(crate) fn shared_prefix(&mut self, inst: u32) -> Arc<str> {
        let i = inst as usize;
        if self.prefixes.len() <= i {
            self.prefixes.resize(i + 1, None);
        }
        let instances = &self.instances;
        self.prefixes[i].get_or_insert_with(|| instances[i].prefix.as_str().into()).clone()
    }

    pub(crate) fn graph(&self, inst: u32) -> &'m Graph {
        &self.model.graphs[self.instances[inst as usize].graph]
    }

    /// The key a name used in `inst` refers to: its own value, or an
    /// enclosing instance's value of that name.
    pub(crate) fn lookup(&self, st: &LoweringState<'m>, inst: u32, id: ValueId) -> Option<Key> {
        if st.facts.contains_key(&(inst, id)) {
            return Some((inst, id));
        }
        let name = self.graph(inst).value_name(id);
        let mut at = self.instances[inst as usize].parent;
        while let Some(p) = at {
            if let Some(pid) = self.graph(p).value_named(name) {
                if st.facts.contains_key(&(p, pid)) {
                    return Some((p, pid));
                }
            }
            at = self.instances[p as usize].parent;
        }
        None
    }

    /// Registers facts for a value and, if its instance is reported, lists it.
    pub(crate) fn define(&mut self, st: &mut LoweringState<'m>, key: Key, facts: Facts, kind: TensorKind) {
        let inst = &self.instances[key.0 as usize];
        let value_name = self.graph(key.0).value_name(key.1);
        let name = if inst.prefix.is_empty() { value_name.to_string() } else { format!("{}{value_name}", inst.prefix) };
        // The solver names leaves and parameters when closing them; the
        // report holds every name.
        let solver_name = if kind == TensorKind::Interior { "" } else { name.as_str() };
        let tensor = st.solver.add_tensor_of(solver_name, kind, &facts.row, None);
        if inst.reported {
            self.reported.push((name, key, tensor, kind));
        }
        self.defined.push((key, tensor));
        st.facts.insert(key, facts);
    }

    /// The opset version of `domain` in `inst`.
    pub(crate) fn opset(&self, inst: u32, domain: &str) -> Option<i64> {
        let wanted = if domain == "ai.onnx" { "" } else { domain };
        let find = |list: &[OpsetImport]| {
            list.iter()
                .find(|o| {
                    let d = o.domain.as_deref().unwrap_or("");
                    (if d == "ai.onnx" { "" } else { d }) == wanted
                })
                .and_then(|o| o.version)
        };
        find(self.instances[inst as usize].opsets).or_else(|| find(&self.model.opset_imports))
    }

    /// The opset version a node of `domain` in `inst` is read at: [`Lowering::opset`],
    /// remembered per instance for the default domain.
    fn node_opset(&mut self, inst: u32, domain: &str) -> Option<i64> {
        if !domain.is_empty() {
            return self.opset(inst, domain);
        }
        let i = inst as usize;
        if self.default_opsets.len() <= i {
            self.default_opsets.resize(i + 1, None);
        }
        if let Some(version) = self.default_opsets[i] {
            return version;
        }
        let version = self.opset(inst, "");
        self.default_opsets[i] = Some(version);
        version
    }

    /// Creates an instance of `graph` and lowers it. `inputs[i]`, when given,
    /// are the facts of the graph's i-th input (a subgraph's or a function's
    /// actual arguments); otherwise its declared type is used. Returns the
    /// facts of the graph's outputs.
    pub(crate) fn lower_instance(
        &mut self,
        st: &mut LoweringState<'m>,
        instance: Instance<'m>,
        inputs: Vec<Option<Facts>>,
    ) -> Vec<Facts> {
        let inst = self.instances.len() as u32;
        let depth = instance.depth;
        self.instances.push(instance);
        let graph = self.graph(inst);
        st.facts.start_instance(inst, graph.values.len());
        if depth > MAX_DEPTH {
            let cause = st.solver.cause(Origin::Solver("lowering"), "nesting limit");
            st.solver.report_fact(
                Code::InvalidGraph,
                format!("subgraphs and function calls nest deeper than {MAX_DEPTH} levels; not lowered"),
                cause,
                Vec::new(),
            );
            return graph.outputs.iter().map(|_| st.unknown_facts()).collect();
        }
        let strict = self.options.strict_units;
        let mut is_input = vec![false; graph.values.len()];
        // A function body's formal parameters are the function's inputs (its
        // graph declares none); a graph's are its declared inputs.
        let function = self.instances[inst as usize].call.map(|(_, _, f)| f);
        let formals: Vec<(Option<ValueId>, Option<&'m diamond_ir::TypeInfo>)> = match function {
            Some(f) => f.inputs.iter().map(|&v| (Some(v), None)).collect(),
            None => graph.inputs.iter().map(|info| (info.value, info.ty.as_ref())).collect(),
        };
        for (i, (id, ty)) in formals.into_iter().enumerate() {
            let Some(id) = id else { continue };
            let info_ty = ty;
            is_input[id.index()] = true;
            let given = inputs.get(i).cloned().flatten();
            let facts = match given {
                Some(f) => f,
                None => {
                    let name = graph.value_name(id);
                    match self
                        .options
                        .bind
                        .get(name)
                        .filter(|_| self.instances[inst as usize].parent.is_none() && depth == 0)
                    {
                        Some(t) => self.bound_facts(t),
                        None => {
                            let main = self.instances[inst as usize].parent.is_none() && depth == 0;
                            let open = if main { self.open_axes(id, info_ty) } else { Vec::new() };
                            facts_from_type(&mut st.solver, info_ty, strict, Declared::Input(&open))
                        }
                    }
                }
            };
            self.define(st, (inst, id), facts, TensorKind::Leaf);
        }
        // Before IR 4 every initializer is also listed as a graph input and is
        // a constant; from IR 4 an input with an initializer is a default the
        // caller may override, so only its declared type is a fact.
        let inputs_are_defaults = self.model.ir_version.unwrap_or(0) >= 4;
        for t in &graph.initializers {
            let Some(id) = t.name.as_deref().and_then(|n| graph.value_named(n)) else { continue };
            if is_input[id.index()] {
                if !inputs_are_defaults && !self.options.bind.contains_key(graph.value_name(id)) {
                    st.lazy.insert((inst, id), t);
                }
                continue;
            }
            let facts = self.initializer_facts(t);
            self.define(st, (inst, id), facts, TensorKind::Param);
            st.lazy.insert((inst, id), t);
        }
        for sparse in &graph.sparse_initializers {
            let Some(values) = &sparse.values else { continue };
            let Some(id) = values.name.as_deref().and_then(|n| graph.value_named(n)) else { continue };
            if is_input[id.index()] {
                continue;
            }
            let dims = sparse
                .dims
                .iter()
                .map(|&d| diamond_ir::term::DimTerm::Dim(crate::rule::size_dim(d.max(0) as u64, strict)))
                .collect();
            let facts = Facts::tensor(RowTerm::closed(dims), values.data_type);
            self.define(st, (inst, id), facts, TensorKind::Param);
        }
        self.lower_nodes(st, inst);
        let graph = self.graph(inst);
        let results: Vec<Option<ValueId>> = match function {
            Some(f) => f.outputs.iter().map(|&v| Some(v)).collect(),
            None => graph.outputs.iter().map(|o| o.value).collect(),
        };
        results
            .into_iter()
            .map(|id| match id.and_then(|id| self.lookup(st, inst, id)) {
                Some(key) => {
                    let mut f = st.facts[&key].clone();
                    if f.value.is_none() && st.lazy.contains_key(&key) {
                        f.value = st.value(key);
                    }
                    f
                }
                None => st.unknown_facts(),
            })
            .collect()
    }

    fn initializer_facts(&mut self, t: &Tensor) -> Facts {
        let strict = self.options.strict_units;
        let dims = t
            .dims
            .iter()
            .map(|&d| diamond_ir::term::DimTerm::Dim(crate::rule::size_dim(d.max(0) as u64, strict)))
            .collect();
        Facts::tensor(RowTerm::closed(dims), t.data_type)
    }

    fn bound_facts(&mut self, t: &Tensor) -> Facts {
        let mut f = self.initializer_facts(t);
        f.value = crate::rule::decode::decode(t).map(Arc::new);
        f
    }

    /// Lowers every node of `inst` in dependency order, retrying deferred ones.
    fn lower_nodes(&mut self, st: &mut LoweringState<'m>, inst: u32) {
        let graph = self.graph(inst);
        let order = self.schedule(st, inst);
        // Every output exists before any rule runs, so a node caught in a cycle still finds its inputs.
        for &nid in &order {
            for &out in &graph.nodes[nid].outputs {
                if graph.value_name(out).is_empty() || st.facts.contains_key(&(inst, out)) {
                    continue;
                }
                let row = RowTerm { leading: vec![], var: Some(st.solver.fresh_row(None)), trailing: vec![] };
                self.define(st, (inst, out), Facts::tensor(row, None), TensorKind::Interior);
            }
        }
        let mut deferred = Vec::new();
        for nid in order {
            if self.run_node(st, inst, nid).is_err() {
                deferred.push(nid);
            }
        }
        while !deferred.is_empty() {
            let before = deferred.len();
            deferred.retain(|&nid| self.run_node(st, inst, nid).is_err());
            if deferred.len() == before {
                break;
            }
        }
        for nid in deferred {
            let node = &graph.nodes[nid];
            for j in 0..node.outputs.len() {
                self.make_unknown(st, inst, node, j);
            }
        }
    }

    /// Node order: producers before consumers. Nodes on a cycle, and names
    /// nothing defines, are reported as `invalid-graph`; the nodes still run.
    fn schedule(&mut self, st: &mut LoweringState<'m>, inst: u32) -> Vec<NodeId> {
        let graph = self.graph(inst);
        // Per value id, the node producing it (value ids are dense: no hashing).
        let mut producer: Vec<Option<NodeId>> = vec![None; graph.values.len()];
        for (nid, node) in graph.nodes.iter() {
            for &out in &node.outputs {
                if graph.value_name(out).is_empty() {
                    continue;
                }
                if let Some(first) = producer[out.index()] {
                    let other = node_label(graph, first);
                    self.graph_error(
                        st,
                        inst,
                        format!(
                            "value '{}' is produced twice: by {} and by {}",
                            graph.value_name(out),
                            other,
                            node_label(graph, nid)
                        ),
                        graph,
                        nid,
                    );
                } else {
                    producer[out.index()] = Some(nid);
                }
            }
        }
        let mut pending: Vec<usize> = Vec::with_capacity(graph.nodes.len());
        // Dependency edges (producer, consumer), each once per pair; sorted by
        // producer below into one list instead of a list per node.
        let mut edges: Vec<(NodeId, NodeId)> = Vec::with_capacity(graph.nodes.len() * 2);
        let mut seen: Vec<NodeId> = Vec::new();
        for (nid, node) in graph.nodes.iter() {
            let mut deps = 0;
            seen.clear();
            let free =
                if node.attributes.is_empty() { Vec::new() } else { subgraph_free_names(self.model, node, graph) };
            for &input in node.inputs.iter().chain(free.iter()) {
                if let Some(p) = producer.get(input.index()).copied().flatten() {
                    if !seen.contains(&p) {
                        seen.push(p);
                        deps += 1;
                        edges.push((p, nid));
                    }
                } else if !graph.value_name(input).is_empty() && self.lookup(st, inst, input).is_none() {
                    self.graph_error(
                st,
                inst,
                        format!(
                            "input '{}' of {} is not a graph input, an initializer, an outer-scope value or any node's output",
                            graph.value_name(input),
                            node_label(graph, nid)
                        ),
                        graph,
                        nid,
                    );
                    let facts = st.unknown_facts();
                    self.define(st, (inst, input), facts, TensorKind::Interior);
                }
            }
            pending.push(deps);
        }
        // Stable: each producer's consumers stay in node order, as they were pushed.
        edges.sort_by_key(|&(p, _)| p.index());
        let mut first = vec![0usize; graph.nodes.len() + 1];
        for &(p, _) in &edges {
            first[p.index() + 1] += 1;
        }
        for i in 0..graph.nodes.len() {
            first[i + 1] += first[i];
        }
        let mut order = Vec::with_capacity(graph.nodes.len());
        let mut ready: std::collections::VecDeque<NodeId> =
            graph.nodes.iter().filter(|(nid, _)| pending[nid.index()] == 0).map(|(nid, _)| nid).collect();
        while let Some(nid) = ready.pop_front() {
            order.push(nid);
            for &(_, c) in &edges[first[nid.index()]..first[nid.index() + 1]] {
                pending[c.index()] -= 1;
                if pending[c.index()] == 0 {
                    ready.push_back(c);
                }
            }
        }
        if order.len() < graph.nodes.len() {
            let stuck: Vec<NodeId> = graph.nodes.iter().map(|(n, _)| n).filter(|n| pending[n.index()] > 0).collect();
            let names: Vec<String> = stuck.iter().take(8).map(|&n| node_label(graph, n)).collect();
            self.graph_error(
                st,
                inst,
                format!(
                    "the graph has a cycle: {} node(s) on or after it cannot be ordered: {}{}",
                    stuck.len(),
                    names.join(", "),
                    if stuck.len() > names.len() { ", ..." } else { "" }
                ),
                graph,
                stuck[0],
            );
            order.extend(stuck);
        }
        order
    }

    fn graph_error(&mut self, st: &mut LoweringState<'m>, inst: u32, message: String, graph: &'m Graph, nid: NodeId) {
        let site = self.node_site(inst, &graph.nodes[nid], nid);
        let origin = Origin::Operand { site, operand: st.shared_operand("node") };
        let cause = st.solver.cause(origin, "graph structure");
        st.solver.report_fact(Code::InvalidGraph, message, cause, Vec::new());
    }

    /// Node `nid` of `inst` as its rule sees it: its label, the site its
    /// causes name, the keys of its inputs and outputs.
    fn node_at(&mut self, st: &LoweringState<'m>, inst: u32, nid: NodeId) -> NodeAt<'m> {
        let graph = self.graph(inst);
        let node = &graph.nodes[nid];
        let site = self.node_site(inst, node, nid);
        let inputs = node
            .inputs
            .iter()
            .map(|&v| if graph.value_name(v).is_empty() { None } else { self.lookup(st, inst, v) })
            .collect();
        let outputs =
            node.outputs.iter().map(|&v| if graph.value_name(v).is_empty() { None } else { Some((inst, v)) }).collect();
        NodeAt { inst, nid, node, label: std::cell::OnceCell::new(), site, inputs, outputs }
    }

    /// Lowers one node: its rule, a function call, or an unsupported-op warning.
    fn run_node(&mut self, st: &mut LoweringState<'m>, inst: u32, nid: NodeId) -> Result<(), Defer> {
        let graph = self.graph(inst);
        let node = &graph.nodes[nid];
        let domain = node.domain();
        if let Some(function) = self.find_function(node) {
            self.call_function(st, inst, nid, function);
            return Ok(());
        }
        let version = self.node_opset(inst, domain);
        let rule = version.and_then(|v| self.table.lookup(domain, node.op_type(), v));
        let Some(rule) = rule else {
            let why = match version {
                None => format!("the model imports no opset for domain '{domain}'"),
                Some(v) if self.table.knows(domain, node.op_type()) => {
                    format!("'{}' is not defined at opset {v} of domain '{}'", node.op_type(), display_domain(domain))
                }
                Some(_) => {
                    format!("diamond has no rule for '{}' of domain '{}'", node.op_type(), display_domain(domain))
                }
            };
            let code = if version.is_some() && self.table.knows(domain, node.op_type()) {
                Code::InvalidGraph
            } else {
                Code::UnsupportedOp
            };
            let at = self.node_at(st, inst, nid);
            let mut ctx = OpCtx::new(st, self, at, 0);
            ctx.report(code, format!("{}: {why}; its outputs are unknown", ctx.label()));
            ctx.finish();
            return Ok(());
        };
        let at = self.node_at(st, inst, nid);
        let mut ctx = OpCtx::new(st, self, at, version.unwrap_or(0));
        rule(&mut ctx)?;
        ctx.finish();
        Ok(())
    }

    /// The type `value_info` or a graph output states for `id`, when it states a shape.
    fn declared_type(&mut self, inst: u32, id: ValueId) -> Option<&'m diamond_ir::TypeInfo> {
        let g = self.instances[inst as usize].graph;
        let graph: &'m Graph = &self.model.graphs[g];
        let table = self.declared.entry(g).or_insert_with(|| {
            graph
                .value_info
                .iter()
                .chain(&graph.outputs)
                .filter(|vi| states_shape(vi.ty.as_ref()))
                .filter_map(|vi| Some((vi.value?, vi.ty.as_ref()?)))
                .collect()
        });
        table.get(&id).copied()
    }

    fn find_function(&self, node: &Node) -> Option<&'m diamond_ir::Function> {
        self.model.functions.iter().find(|f| {
            f.name.as_deref() == Some(node.op_type())
                && f.domain.as_deref().unwrap_or("") == node.domain()
                && f.overload.as_deref().unwrap_or("") == node.rare().overload.as_deref().unwrap_or("")
        })
    }

    /// Expands a call of a model-local function: its body is lowered as a
    /// new instance whose inputs are the call's operands.
    fn call_function(
        &mut self,
        st: &mut LoweringState<'m>,
        inst: u32,
        nid: NodeId,
        function: &'m diamond_ir::Function,
    ) {
        let graph = self.graph(inst);
        let node = &graph.nodes[nid];
        let inputs: Vec<Option<Facts>> = (0..function.inputs.len())
            .map(|i| {
                let id = *node.inputs.get(i)?;
                if graph.value_name(id).is_empty() {
                    return None;
                }
                let key = self.lookup(st, inst, id)?;
                let mut f = st.facts[&key].clone();
                if f.value.is_none() {
                    f.value = st.value(key);
                }
                Some(f)
            })
            .collect();
        let depth = self.instances[inst as usize].depth + 1;
        let instance = Instance {
            graph: function.body,
            parent: None,
            prefix: String::new(),
            call: Some((inst, node, function)),
            opsets: &function.opset_imports,
            reported: false,
            depth,
        };
        // A missing optional parameter still needs facts: give it an unknown.
        let body = &self.model.graphs[function.body];
        let inputs = inputs
            .into_iter()
            .chain(std::iter::repeat(None))
            .take(function.inputs.len().max(body.inputs.len()))
            .map(|f| Some(f.unwrap_or_else(|| st.unknown_facts())))
            .collect();
        let outputs = self.lower_instance(st, instance, inputs);
        let at = self.node_at(st, inst, nid);
        let mut ctx = OpCtx::new(st, self, at, 0);
        for (j, f) in outputs.into_iter().enumerate() {
            if j < ctx.output_count() {
                ctx.set_facts(j, f);
            }
        }
        ctx.finish();
    }

    /// The report name prefix for values of a subgraph of `node` held in attribute `attr`.
    pub(crate) fn subgraph_prefix(&self, inst: u32, node: &Node, nid: NodeId, attr: &str) -> String {
        let base = &self.instances[inst as usize].prefix;
        let name = if node.name().is_empty() {
            format!("{}_{}", node.op_type(), nid.index())
        } else {
            node.name().to_string()
        };
        format!("{base}{name}/{attr}/")
    }
}

/// What the rules ask of the lowering beyond its state.
impl<'m> Host<'m> for Lowering<'m> {
    fn call(&self, inst: u32) -> Option<(u32, &'m Node, &'m diamond_ir::Function)> {
        self.instances[inst as usize].call
    }

    fn make_unknown(&mut self, st: &mut LoweringState<'m>, inst: u32, node: &Node, j: usize) {
        let Some(&out) = node.outputs.get(j) else { return };
        let graph = self.graph(inst);
        if graph.value_name(out).is_empty() {
            return;
        }
        let declared = self.declared_type(inst, out);
        let from_declaration = declared.is_some();
        let replacement = match declared {
            Some(ty) => {
                let prefix = &self.instances[inst as usize].prefix;
                self.from_declaration.push(format!("{prefix}{}", graph.value_name(out)));
                facts_from_type(
                    &mut st.solver,
                    Some(ty),
                    self.options.strict_units,
                    Declared::Claim(&self.input_symbols),
                )
            }
            None => st.unknown_facts(),
        };
        let cause = st.solver.cause(Origin::Solver("lowering"), "an output nothing determines");
        let Some(f) = st.facts.get_mut(&(inst, out)) else { return };
        let row = f.row.clone();
        if from_declaration {
            f.kind = replacement.kind;
        }
        if f.dtype.is_none() {
            f.dtype = replacement.dtype;
        }
        st.solver.add(crate::constraint::Constraint::RowEq(row, replacement.row, cause));
    }

    fn lower_subgraph(
        &mut self,
        st: &mut LoweringState<'m>,
        node: &NodeAt<'m>,
        attr: &str,
        g: GraphId,
        inputs: Vec<Option<Facts>>,
        reported: bool,
    ) -> Vec<Facts> {
        let prefix = self.subgraph_prefix(node.inst, node.node, node.nid, attr);
        let parent = &self.instances[node.inst as usize];
        let instance = Instance {
            graph: g,
            parent: Some(node.inst),
            prefix,
            call: parent.call,
            opsets: parent.opsets,
            reported: reported && parent.reported,
            depth: parent.depth + 1,
        };
        self.lower_instance(st, instance, inputs)
    }

    fn graph_arity(&self, g: GraphId) -> (usize, usize) {
        let graph = &self.model.graphs[g];
        (graph.inputs.len(), graph.outputs.len())
    }
}

/// `Add 'fc1' (n3)`.
pub(crate) fn node_label(graph: &Graph, nid: NodeId) -> String {
    let node = &graph.nodes[nid];
    if node.name().is_empty() {
        format!("{} (node {})", node.op_type(), nid.index())
    } else {
        format!("{} '{}' (node {})", node.op_type(), node.name(), nid.index())
    }
}

fn display_domain(domain: &str) -> &str {
    if domain.is_empty() {
        "ai.onnx"
    } else {
        domain
    }
}

/// Names a node's subgraphs use from the enclosing graph: they order the node
/// after the producers of those names.
fn subgraph_free_names(model: &Model, node: &Node, graph: &Graph) -> Vec<ValueId> {
    let mut out = Vec::new();
    let mut stack: Vec<GraphId> = node.subgraphs().collect();
    let mut guard = 0;
    while let Some(g) = stack.pop() {
        guard += 1;
        if guard > 10_000 {
            break;
        }
        let sub = &model.graphs[g];
        for (_, n) in sub.nodes.iter() {
            for &i in &n.inputs {
                let name = sub.value_name(i);
                if name.is_empty() {
                    continue;
                }
                if let Some(outer) = graph.value_named(name) {
                    out.push(outer);
                }
            }
            stack.extend(n.subgraphs());
        }
    }
    out
}
