//! The graph interpreter: binding inputs, the execution order, freeing after
//! last use, and the peak of live bytes.
//!
//! A graph runs in a [`Frame`]: one slot per value of the graph. Names a
//! graph uses but does not define (a subgraph reading its enclosing graph)
//! resolve through the parent frame. The order is a topological order of
//! the nodes, file order among independent ones; a node that holds
//! subgraphs depends on every enclosing value those subgraphs read. After
//! each node, every value whose last reader it was is dropped (graph outputs
//! are kept), so the live bytes at any point are the values some later node
//! still needs.

use crate::error::{Result, RunError};
use crate::ops;
use crate::tensor::{Tensor, Value};
use diamond_ir::{Attribute, DimValue, ElemType, Graph, GraphId, Model, Node, TypeValue, ValueId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Keep these intermediate values (by name) and return them in
    /// [`RunResult::dumped`]; `None` keeps none.
    pub dump: Option<DumpSet>,
}

/// Which intermediate values to keep.
#[derive(Clone, Debug)]
pub enum DumpSet {
    /// Every value a node of the main graph computes.
    All,
    /// The named ones.
    Names(HashSet<String>),
}

/// What a run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The main graph's outputs, in declaration order, with their names.
    pub outputs: Vec<(String, Value)>,
    /// The largest number of bytes live at once (initializers, inputs and
    /// intermediates, including what subgraphs held).
    pub peak_bytes: u64,
    /// Intermediate values asked for with [`RunOptions::dump`], in the order
    /// they were computed.
    pub dumped: Vec<(String, Value)>,
}

/// Runs the main graph of `model` on `inputs` (graph input name → value).
///
/// Every input the graph declares must be fed (unless an initializer gives
/// it a default), and each fed tensor must have the declared element type
/// and rank, the declared fixed sizes, and sizes that bind each symbolic
/// dimension (`batch`) the same way across all inputs.
pub fn run_model(model: &Model, inputs: Vec<(String, Value)>, options: &RunOptions) -> Result<RunResult> {
    let gid = model.graph.ok_or_else(|| RunError::InvalidModel("the model has no main graph".into()))?;
    let graph = &model.graphs[gid];
    check_inputs(graph, &inputs)?;
    let mut bound = Vec::new();
    for (name, value) in inputs {
        let id = graph.value_named(&name).ok_or_else(|| RunError::Input {
            name: name.clone(),
            problem: "the model has no input of that name".into(),
        })?;
        bound.push((id, value));
    }
    let mut run = execute(model, gid, None, bound, options.dump.as_ref())?;
    let names = graph.outputs.iter().map(|o| o.value.map_or(String::new(), |v| graph.value_name(v).to_string()));
    let outputs = names.zip(run.outputs.drain(..)).collect();
    Ok(RunResult { outputs, peak_bytes: run.peak_bytes, dumped: run.dumped })
}

/// Checks fed inputs against the graph's declarations.
fn check_inputs(graph: &Graph, inputs: &[(String, Value)]) -> Result<()> {
    let fed: HashMap<&str, &Value> = inputs.iter().map(|(n, v)| (n.as_str(), v)).collect();
    let initialized: HashSet<&str> = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let declared: HashSet<&str> = graph.inputs.iter().filter_map(|i| i.value).map(|v| graph.value_name(v)).collect();
    for (name, _) in inputs {
        if !declared.contains(name.as_str()) {
            return Err(RunError::Input { name: name.clone(), problem: "the model has no input of that name".into() });
        }
    }
    // symbol → (size, input, axis) of its first binding
    let mut symbols: HashMap<&str, (usize, &str, usize)> = HashMap::new();
    for info in &graph.inputs {
        let Some(vid) = info.value else { continue };
        let name = graph.value_name(vid);
        let declared_ty = info.ty.as_ref().map_or_else(|| "?".to_string(), |t| t.summary());
        let Some(value) = fed.get(name) else {
            if initialized.contains(name) {
                continue;
            }
            return Err(RunError::Input {
                name: name.to_string(),
                problem: format!("missing: the model declares it as {declared_ty} and nothing was fed"),
            });
        };
        let Some(TypeValue::Tensor { elem, shape }) = info.ty.as_ref().and_then(|t| t.value.as_ref()) else {
            continue;
        };
        let input_err = |problem: String| RunError::Input { name: name.to_string(), problem };
        let Value::Tensor(t) = value else {
            return Err(input_err(format!("a {} was fed, the model declares a tensor {declared_ty}", value.kind())));
        };
        if let Some(elem) = elem {
            if *elem != ElemType::Undefined && *elem != t.elem() {
                return Err(input_err(format!(
                    "element type {} was fed, the model declares {elem} ({declared_ty})",
                    t.elem()
                )));
            }
        }
        let Some(shape) = shape else { continue };
        if shape.dims.len() != t.rank() {
            return Err(input_err(format!(
                "rank {} (shape {:?}) was fed, the model declares rank {} ({declared_ty})",
                t.rank(),
                t.shape,
                shape.dims.len()
            )));
        }
        for (axis, (dim, &size)) in shape.dims.iter().zip(&t.shape).enumerate() {
            match &dim.value {
                Some(DimValue::Known(k)) if *k >= 0 && *k as usize != size => {
                    return Err(input_err(format!(
                        "axis {axis} has size {size}, the model declares {k} ({declared_ty})"
                    )));
                }
                Some(DimValue::Param(p)) if !p.is_empty() => match symbols.get(p.as_str()) {
                    Some(&(bound, other, other_axis)) if bound != size => {
                        return Err(input_err(format!(
                            "axis {axis} binds '{p}' to {size}, but input '{other}' axis {other_axis} bound it to {bound}"
                        )));
                    }
                    Some(_) => {}
                    None => {
                        symbols.insert(p, (size, name, axis));
                    }
                },
                _ => {}
            }
        }
    }
    Ok(())
}

/// The values of one running graph, with the frame of its enclosing graph.
pub struct Frame<'a> {
    /// The graph.
    pub graph: &'a Graph,
    values: Vec<Option<Value>>,
    parent: Option<&'a Frame<'a>>,
    /// Inside a model-local function: the calling node's attributes and the
    /// function's defaults, which attribute references resolve to.
    pub call_attrs: Option<CallAttrs<'a>>,
}

/// The attributes a function body's references resolve to: the call's, then
/// the function's defaults.
#[derive(Clone, Copy)]
pub struct CallAttrs<'a> {
    /// The calling node's attributes.
    pub call: &'a [Attribute],
    /// The function's attributes with default values.
    pub defaults: &'a [Attribute],
}

impl<'a> CallAttrs<'a> {
    /// The attribute `name` of the call, else its default.
    pub fn get(&self, name: &str) -> Option<&'a Attribute> {
        self.call.iter().find(|a| a.name() == name).or_else(|| self.defaults.iter().find(|a| a.name() == name))
    }
}

impl<'a> Frame<'a> {
    /// The value named `name` here or in an enclosing frame.
    pub fn lookup(&self, name: &str) -> Option<&Value> {
        if let Some(id) = self.graph.value_named(name) {
            if let Some(v) = self.values.get(id.index_usize()).and_then(Option::as_ref) {
                return Some(v);
            }
        }
        self.parent.and_then(|p| p.lookup(name))
    }
}

trait IdIndex {
    fn index_usize(self) -> usize;
}

impl IdIndex for ValueId {
    fn index_usize(self) -> usize {
        diamond_ir::entity::EntityId::index(self)
    }
}

/// What one graph execution produced.
pub struct GraphRun {
    /// The graph's outputs, in order.
    pub outputs: Vec<Value>,
    /// Peak live bytes during the run.
    pub peak_bytes: u64,
    /// Values kept for dumping.
    pub dumped: Vec<(String, Value)>,
}

/// Names a graph (and the graphs nested in it) reads but does not define.
pub fn free_names(model: &Model, gid: GraphId) -> HashSet<String> {
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
fn reads(model: &Model, graph: &Graph, node: &Node) -> Vec<ValueId> {
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

/// Runs graph `gid` with `bound` values (its inputs) inside `parent`; the
/// graph's declared outputs are returned.
pub fn execute(
    model: &Model,
    gid: GraphId,
    parent: Option<&Frame<'_>>,
    bound: Vec<(ValueId, Value)>,
    dump: Option<&DumpSet>,
) -> Result<GraphRun> {
    let graph = &model.graphs[gid];
    let outputs: Vec<ValueId> = graph
        .outputs
        .iter()
        .map(|o| o.value.ok_or_else(|| RunError::InvalidModel("a graph output has no name".into())))
        .collect::<Result<_>>()?;
    let call_attrs = parent.and_then(|p| p.call_attrs);
    execute_with(model, gid, parent, bound, dump, call_attrs, &outputs)
}

/// Runs graph `gid` as [`execute`] does, returning the values `outputs`,
/// with attribute references resolving to `call_attrs`.
pub fn execute_with<'a>(
    model: &'a Model,
    gid: GraphId,
    parent: Option<&'a Frame<'a>>,
    bound: Vec<(ValueId, Value)>,
    dump: Option<&DumpSet>,
    call_attrs: Option<CallAttrs<'a>>,
    output_ids: &[ValueId],
) -> Result<GraphRun> {
    let graph = &model.graphs[gid];
    let mut frame = Frame { graph, values: vec![None; graph.values.len()], parent, call_attrs };
    let mut live: u64 = 0;
    for t in &graph.initializers {
        let name = t.name.as_deref().unwrap_or("");
        let Some(id) = graph.value_named(name) else { continue };
        let value = Tensor::from_ir(t).map_err(|problem| RunError::Tensor { name: name.to_string(), problem })?;
        live += value.byte_size();
        frame.values[id.index_usize()] = Some(Value::Tensor(value));
    }
    for (id, value) in bound {
        let slot = &mut frame.values[id.index_usize()];
        if let Some(old) = slot.take() {
            live -= old.byte_size();
        }
        live += value.byte_size();
        *slot = Some(value);
    }
    let order = topological_order(model, graph)?;
    let node_reads: Vec<Vec<ValueId>> = graph.nodes.values().map(|n| reads(model, graph, n)).collect();
    let outputs: HashSet<ValueId> = output_ids.iter().copied().collect();
    let mut last_use: HashMap<ValueId, usize> = HashMap::new();
    for (pos, &n) in order.iter().enumerate() {
        for &id in &node_reads[n] {
            last_use.insert(id, pos);
        }
    }
    let mut peak = live;
    let mut dumped = Vec::new();
    let nodes: Vec<&Node> = graph.nodes.values().collect();
    for (pos, &n) in order.iter().enumerate() {
        let node = nodes[n];
        let inputs: Vec<Option<&Value>> = node
            .inputs
            .iter()
            .map(|&i| {
                let name = graph.value_name(i);
                if name.is_empty() {
                    return Ok(None);
                }
                frame.lookup(name).map(Some).ok_or_else(|| {
                    RunError::InvalidModel(format!(
                        "node '{}' ({}) reads '{name}', which nothing defines",
                        node_label(graph, node),
                        node.op_type()
                    ))
                })
            })
            .collect::<Result<_>>()?;
        let ctx = ops::NodeCtx::new(model, graph, node, &frame, inputs);
        let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ops::run_node(&ctx)))
            .unwrap_or_else(|_| Err(ctx.err("the executor panicked (a bug in diamond)")))?;
        let inner_peak = ctx.inner_peak.get();
        drop(ctx);
        peak = peak.max(live + inner_peak);
        let mut results = results.into_iter();
        for (k, &o) in node.outputs.iter().enumerate() {
            let value = results.next().flatten();
            let name = graph.value_name(o);
            if name.is_empty() {
                continue;
            }
            let Some(value) = value else {
                return Err(RunError::Unsupported {
                    node: node_label(graph, node),
                    op: node.op_type().to_string(),
                    reason: format!("output {k} ('{name}') is not computed"),
                });
            };
            if let Value::Tensor(t) = &value {
                if crate::tensor::shape_len(&t.shape) != Some(t.len()) {
                    return Err(RunError::Kernel {
                        node: node_label(graph, node),
                        op: node.op_type().to_string(),
                        problem: format!(
                            "output {k} has shape {:?} but {} elements (a bug in diamond)",
                            t.shape,
                            t.len()
                        ),
                    });
                }
            }
            live += value.byte_size();
            if let Some(set) = dump {
                if match set {
                    DumpSet::All => true,
                    DumpSet::Names(names) => names.contains(name),
                } {
                    dumped.push((name.to_string(), value.clone()));
                }
            }
            if let Some(old) = frame.values[o.index_usize()].replace(value) {
                live -= old.byte_size();
            }
        }
        peak = peak.max(live);
        // Free what no later node reads: this node's last reads, and its
        // outputs nobody reads.
        let dead = node_reads[n].iter().filter(|id| last_use.get(id) == Some(&pos));
        let unread = node.outputs.iter().filter(|id| !last_use.contains_key(id));
        for &id in dead.chain(unread) {
            if outputs.contains(&id) {
                continue;
            }
            if let Some(old) = frame.values.get_mut(id.index_usize()).and_then(Option::take) {
                live -= old.byte_size();
            }
        }
    }
    let mut results = Vec::new();
    for &id in output_ids {
        let value = match frame.values[id.index_usize()].take() {
            Some(v) => v,
            None => frame.lookup(graph.value_name(id)).cloned().ok_or_else(|| {
                RunError::InvalidModel(format!("graph output '{}' is never computed", graph.value_name(id)))
            })?,
        };
        results.push(value);
    }
    Ok(GraphRun { outputs: results, peak_bytes: peak, dumped })
}

/// A node's name for messages: its name, or its first output's.
pub fn node_label(graph: &Graph, node: &Node) -> String {
    if !node.name().is_empty() {
        return node.name().to_string();
    }
    node.outputs.first().map_or_else(String::new, |&o| graph.value_name(o).to_string())
}

/// Node indices in a topological order, file order among independent nodes.
fn topological_order(model: &Model, graph: &Graph) -> Result<Vec<usize>> {
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
    for (i, node) in nodes.iter().enumerate() {
        let deps: HashSet<usize> =
            reads(model, graph, node).iter().filter_map(|id| producer.get(id).copied()).filter(|&p| p != i).collect();
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
