//! The graph interpreter: binding inputs, the execution order, freeing after
//! last use, and the peak of live bytes.
//!
//! A graph runs in a [`Frame`]: one slot per value of the graph. Names a
//! graph uses but does not define (a subgraph reading its enclosing graph)
//! resolve through the parent frame. The order and the drops follow a
//! [`Schedule`]: a topological order of the nodes, file order among
//! independent ones, and after each node every value whose last reader it
//! was is dropped (graph outputs are kept), so the live bytes at any point
//! are the values some later node still needs. [`run_planned`] runs the main
//! graph by an execution plan's schedule, whose peak the plan predicted.

use crate::error::{Result, RunError};
use crate::ops;
use crate::plan::{Fed, Plan};
use crate::schedule::Schedule;
use crate::tensor::{Tensor, Value};
use diamond_ir::{Attribute, Graph, GraphId, Model, Node, ValueId};
use std::collections::{HashMap, HashSet};

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
/// it a default), and each fed value must have the declared kind, element
/// type and rank, the declared fixed sizes, and sizes that bind each
/// symbolic dimension (`batch`) the same way across all inputs: the
/// declaration half of [`Plan::new`]'s binding, without the check and the
/// sizes (callers that run many small models, like constant folding, skip
/// those).
pub fn run_model(model: &Model, inputs: Vec<(String, Value)>, options: &RunOptions) -> Result<RunResult> {
    let gid = model.graph.ok_or_else(|| RunError::InvalidModel("the model has no main graph".into()))?;
    let graph = &model.graphs[gid];
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    crate::plan::bind(graph, &fed)?;
    let outputs = output_ids(graph)?;
    let schedule = Schedule::new(model, graph, &outputs)?;
    run_main(model, gid, inputs, options, &schedule)
}

/// Runs the main graph of `model` by `plan`, which was made for these
/// inputs ([`Plan::new`] checked them against the model and bound its
/// symbols): the nodes run in the plan's order and values die where it says,
/// so the measured peak is the one the plan predicted whenever it could.
/// Inputs other than those the plan was made for are an `Input` error.
pub fn run_planned(
    model: &Model,
    plan: &Plan,
    inputs: Vec<(String, Value)>,
    options: &RunOptions,
) -> Result<RunResult> {
    let gid = model.graph.ok_or_else(|| RunError::InvalidModel("the model has no main graph".into()))?;
    plan.check_fed(&inputs)?;
    run_main(model, gid, inputs, options, plan.schedule())
}

/// Runs main graph `gid` on checked `inputs` by `schedule`.
fn run_main(
    model: &Model,
    gid: GraphId,
    inputs: Vec<(String, Value)>,
    options: &RunOptions,
    schedule: &Schedule,
) -> Result<RunResult> {
    let graph = &model.graphs[gid];
    let mut bound = Vec::new();
    for (name, value) in inputs {
        let id = graph.value_named(&name).ok_or_else(|| RunError::Input {
            name: name.clone(),
            problem: "the model has no input of that name".into(),
        })?;
        bound.push((id, value));
    }
    let mut run = execute_scheduled(model, gid, None, bound, options.dump.as_ref(), None, schedule)?;
    let names = graph.outputs.iter().map(|o| o.value.map_or(String::new(), |v| graph.value_name(v).to_string()));
    let outputs = names.zip(run.outputs.drain(..)).collect();
    Ok(RunResult { outputs, peak_bytes: run.peak_bytes, dumped: run.dumped })
}

/// The values a graph returns: its declared outputs.
pub(crate) fn output_ids(graph: &Graph) -> Result<Vec<ValueId>> {
    graph
        .outputs
        .iter()
        .map(|o| o.value.ok_or_else(|| RunError::InvalidModel("a graph output has no name".into())))
        .collect()
}

/// The values of one running graph, with the frame of its enclosing graph.
pub struct Frame<'a> {
    /// The graph.
    pub graph: &'a Graph,
    pub(crate) values: Vec<Option<Value>>,
    parent: Option<&'a Frame<'a>>,
    /// Inside a model-local function: the calling node's attributes and the
    /// function's defaults, which attribute references resolve to.
    pub call_attrs: Option<CallAttrs<'a>>,
    /// What kernels derived from a node's attributes (a tree ensemble's
    /// node arrays), by the node's address in the graph this frame borrows:
    /// a frame that lives across runs (a SIMD session's) derives it once.
    pub(crate) prepared: Prepared,
}

/// Kernels' state derived from attributes, by node address ([`Frame::prepared`]).
pub(crate) type Prepared = std::sync::Mutex<HashMap<usize, std::sync::Arc<dyn std::any::Any + Send + Sync>>>;

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
    /// An empty frame of main graph `graph`.
    pub(crate) fn main(graph: &'a Graph) -> Frame<'a> {
        Frame {
            graph,
            values: vec![None; graph.values.len()],
            parent: None,
            call_attrs: None,
            prepared: Prepared::default(),
        }
    }

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

/// Runs graph `gid` with `bound` values (its inputs) inside `parent`; the
/// graph's declared outputs are returned.
pub fn execute(
    model: &Model,
    gid: GraphId,
    parent: Option<&Frame<'_>>,
    bound: Vec<(ValueId, Value)>,
    dump: Option<&DumpSet>,
) -> Result<GraphRun> {
    let outputs = output_ids(&model.graphs[gid])?;
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
    let schedule = Schedule::new(model, &model.graphs[gid], output_ids)?;
    execute_scheduled(model, gid, parent, bound, dump, call_attrs, &schedule)
}

/// Runs graph `gid` in the order `schedule` gives, dropping what it says
/// after each node, and returns `schedule.outputs`.
///
/// Live bytes are counted as the plan ([`crate::plan`]) predicts them:
/// initializers and bound inputs from the start (an input replacing an
/// initializer's default replaces its bytes), each node's named outputs
/// once it has run, the peak taken after every node before the dead values
/// go, and a node running subgraphs or a function adds the peak of those
/// runs to what is live around it.
pub fn execute_scheduled<'a>(
    model: &'a Model,
    gid: GraphId,
    parent: Option<&'a Frame<'a>>,
    bound: Vec<(ValueId, Value)>,
    dump: Option<&DumpSet>,
    call_attrs: Option<CallAttrs<'a>>,
    schedule: &Schedule,
) -> Result<GraphRun> {
    let graph = &model.graphs[gid];
    if !schedule.fits(graph) {
        return Err(RunError::InvalidModel("the schedule (or plan) was made for another graph".into()));
    }
    let mut frame =
        Frame { graph, values: vec![None; graph.values.len()], parent, call_attrs, prepared: Prepared::default() };
    let mut live: u64 = 0;
    for t in &graph.initializers {
        let name = t.name.as_deref().unwrap_or("");
        let Some(id) = graph.value_named(name) else { continue };
        let value = Tensor::from_ir(t).map_err(|problem| RunError::Tensor { name: name.to_string(), problem })?;
        live += value.byte_size();
        if let Some(old) = frame.values[id.index_usize()].replace(Value::Tensor(value)) {
            live -= old.byte_size();
        }
    }
    for (id, value) in bound {
        let slot = &mut frame.values[id.index_usize()];
        if let Some(old) = slot.take() {
            live -= old.byte_size();
        }
        live += value.byte_size();
        *slot = Some(value);
    }
    let mut peak = live;
    let mut dumped = Vec::new();
    let nodes: Vec<&Node> = graph.nodes.values().collect();
    for (pos, &n) in schedule.order.iter().enumerate() {
        let node = nodes[n];
        let (computed, inner_peak) = run_one(model, graph, node, &frame)?;
        peak = peak.max(live + inner_peak);
        for (o, value) in computed {
            let name = graph.value_name(o);
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
        for &id in &schedule.frees[pos] {
            if let Some(old) = frame.values.get_mut(id.index_usize()).and_then(Option::take) {
                live -= old.byte_size();
            }
        }
    }
    let mut results = Vec::new();
    for &id in &schedule.outputs {
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

/// Runs one node of `graph` reading its operands from `frame`: each named
/// output with its value (checked to have as many elements as its shape
/// says), and the peak of what subgraph runs held.
/// `node`'s operands as `frame` holds them (`None` for an omitted one).
fn node_inputs<'f>(graph: &Graph, node: &Node, frame: &'f Frame<'_>) -> Result<Vec<Option<&'f Value>>> {
    node.inputs
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
        .collect()
}

/// The shape that `node`, a relabelling operator (Reshape, Flatten,
/// Squeeze, Unsqueeze), gives its operand 0, as the reference kernel works
/// it out, or `None` for another operator.
pub(crate) fn relabeled_shape(
    model: &Model,
    graph: &Graph,
    node: &Node,
    frame: &Frame<'_>,
    x: &[usize],
) -> Option<Result<Vec<usize>>> {
    let inputs = match node_inputs(graph, node, frame) {
        Ok(inputs) => inputs,
        Err(e) => return Some(Err(e)),
    };
    let ctx = ops::NodeCtx::new(model, graph, node, frame, inputs);
    ops::shape_ops::relabeled_shape(&ctx, x)
}

pub(crate) fn run_one(
    model: &Model,
    graph: &Graph,
    node: &Node,
    frame: &Frame<'_>,
) -> Result<(Vec<(ValueId, Value)>, u64)> {
    let inputs = node_inputs(graph, node, frame)?;
    let ctx = ops::NodeCtx::new(model, graph, node, frame, inputs);
    let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ops::run_node(&ctx)))
        .unwrap_or_else(|_| Err(ctx.err("the executor panicked (a bug in diamond)")))?;
    let inner_peak = ctx.inner_peak.get();
    drop(ctx);
    let mut results = results.into_iter();
    let mut out = Vec::new();
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
                    problem: format!("output {k} has shape {:?} but {} elements (a bug in diamond)", t.shape, t.len()),
                });
            }
        }
        out.push((o, value));
    }
    Ok((out, inner_peak))
}

/// A node's name for messages: its name, or its first output's.
pub fn node_label(graph: &Graph, node: &Node) -> String {
    if !node.name().is_empty() {
        return node.name().to_string();
    }
    node.outputs.first().map_or_else(String::new, |&o| graph.value_name(o).to_string())
}
