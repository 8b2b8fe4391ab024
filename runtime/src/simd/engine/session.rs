//! A prepared model: built once from a lowered model and the shapes that
//! will be fed, run many times.
//!
//! [`Session::new`] plans the run with [`Plan::new`] (the fed shapes bound
//! to the model's symbols), decodes every initializer once, binds each
//! program to sizes (a program that cannot be bound, or computes types
//! other than `f32` and bool, runs as its graph nodes on the reference
//! kernels: a fallback, listed with its reason in [`Coverage::fallbacks`]
//! and profiled as its own kind of step), and works out after which step each value dies. [`Session::run`]
//! takes inputs of the planned shapes and returns the graph outputs; the
//! `f32` buffers of dead values are kept in a pool and reused for later
//! outputs, and the peak of live bytes (initializers, inputs and live
//! values) is measured as the reference executor measures it.
//!
//! The session's methods are spread over this file (the types, preparing,
//! replanning, running the steps in order) and its children in `session/`:
//! `hoist.rs` (what preparing works out once), `steps.rs` (how each kind of
//! step runs, the buffer pool), `branches.rs` (`If` branches as sessions),
//! `routes.rs` (fallbacks, the profile, each step's route).

mod branches;
mod hoist;
mod routes;
mod steps;

use super::bind::{bind, Bound};
use super::branch::PreparedBranch;
use super::conv::Prepared;
use super::epilogue::{Bias, Epilogue};
use super::fallback::{of_bind_error, Fallback, FallbackReason, Refusal};
use super::fold::{fold, Fold};
use super::profile::{first_names, op_list, StepKind, StepTime};
use super::tile::{Dst, Src};
use super::{
    contraction, elementwise, fused_post, hot_pool, movement, native, norm_lanes, quantized, recurrent, reduce,
    relayout, selection, Options,
};
use crate::error::{Result, RunError};
use crate::exec::{run_one, Frame};
use crate::kernel::{verify::verify, ContractionOp, Inst, LoweredModel, Program, Step};
use crate::plan::{Fed, Plan};
use crate::schedule::reads;
use crate::tensor::{Data, Tensor, Value};
use diamond_ir::entity::EntityId;
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The most dead buffers a session keeps for reuse.
const POOL_BUFFERS: usize = 32;
/// The most times a value's size a pooled buffer given to it may hold.
const POOL_SLACK: usize = 4;

/// A program ready to run.
pub(crate) struct Ready {
    program: Program,
    /// The order its instructions are evaluated in, worked out once.
    schedule: Schedule,
    bound: Bound,
    operands: Vec<ValueId>,
    outputs: Vec<ValueId>,
}

/// How a bound program's instructions are evaluated.
pub(crate) enum Schedule {
    /// Uniform instructions once, the rest per tile.
    Elementwise(elementwise::Order),
    /// Sweeps of the reduction axes.
    Reduce(reduce::Phases),
    /// A layer normalization over a strided axis, outer points in lanes.
    Norm(norm_lanes::StridedNorm),
}

/// A kernel of the session's own for one node: its inputs (`None` where
/// omitted) and a source of buffers in, its output (`None`: not covered).
type OwnKernel<'a> = dyn FnMut(&diamond_ir::Node, &[Option<&Tensor>], contraction::Take<'_>) -> Option<Tensor> + 'a;

/// A kernel of the session's own for a node of several outputs.
type SeveralKernel<'a> =
    dyn FnMut(&diamond_ir::Node, &[Option<&Tensor>], contraction::Take<'_>) -> Option<Vec<Tensor>> + 'a;

/// One step as the session runs it.
pub(crate) enum Planned {
    /// A bound program.
    Program(Box<Ready>),
    /// Graph nodes, on the reference kernels.
    Nodes(Vec<NodeId>),
    /// The nodes of a program that could not be bound, on the reference
    /// kernels (listed in [`Coverage::fallbacks`]), why, and whether the
    /// program computes floating-point values.
    Fallback(Vec<NodeId>, Refusal, bool),
    /// A contraction node on the fast kernels (the reference kernels when
    /// they do not cover it).
    Contraction(NodeId, ContractionOp),
    /// A contraction node and the elementwise program after it, run by the
    /// contraction's kernels over each finished tile ([`fused_post`]); the
    /// program's operand `.3` is the contraction's result.
    Fused(NodeId, ContractionOp, Box<Ready>, usize),
    /// A contraction node and the elementwise program after it that is
    /// part of the contraction's epilogue ([`fold`]): the program's output
    /// takes the result's buffer. Where the result outlives the step, as
    /// [`Planned::Fused`] when `.5` (fusing pays), else as two steps.
    Folded(NodeId, ContractionOp, Box<Ready>, usize, Fold, bool),
    /// A node no program expresses, on the session's own kernels
    /// ([`native`]; the reference kernels when they do not cover it).
    Native(NodeId),
    /// An `If` whose branches run prepared ([`branch`]).
    Branch(NodeId),
}

/// What one run produced.
#[derive(Debug)]
pub struct SessionRun {
    /// The graph outputs in declaration order, with their names.
    pub outputs: Vec<(String, Value)>,
    /// The largest number of bytes live at once.
    pub peak_bytes: u64,
}

/// How the steps of a session are carried out, for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Programs bound and run by the SIMD executor.
    pub programs: usize,
    /// Graph nodes those programs compute.
    pub fused_nodes: usize,
    /// Graph nodes run by the reference kernels.
    pub reference_nodes: usize,
    /// Contraction nodes (MatMul, Gemm, Conv) given to the fast kernels.
    pub contractions: usize,
    /// Other nodes given to the session's own kernels (ConvTranspose, Resize,
    /// LRN, BatchNormalization, pooling, Concat).
    pub native_nodes: usize,
    /// Steps computed once when the session was prepared (their inputs all constant).
    pub hoisted_steps: usize,
    /// Shape nodes computed from the shapes the fed ones fix, when the session was prepared.
    pub folded_shapes: usize,
    /// Programs run as part of their contraction's epilogue (`fold`).
    pub folded_epilogues: usize,
    /// Programs that fell back to their nodes on the reference kernels (a
    /// size that does not bind, a type the backend lacks), in the order of
    /// the session's steps; their nodes are counted in `reference_nodes`.
    /// Fallbacks only met at run time are in [`Session::fallbacks`].
    pub fallbacks: Vec<Fallback>,
}

/// Initializers decoded by a session ([`Session::into_decoded`]), by the
/// stored bytes they were decoded from, for another session of a model that
/// holds the same bytes ([`Session::new_reusing`]). The bytes are known by
/// their address: use it only while the model they came from is alive.
#[derive(Default)]
pub struct Decoded(HashMap<StoredBytes, Tensor>);

impl Decoded {
    /// How many decoded initializers it holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Which stored bytes a tensor was decoded from: the address and length of
/// its raw data (alive as long as the model holding it), its type and dims.
type StoredBytes = (usize, usize, Option<ElemType>, Vec<i64>);

fn stored_bytes(t: &diamond_ir::Tensor) -> Option<StoredBytes> {
    let raw = t.data.raw.as_ref().filter(|_| t.external().is_none())?;
    Some((raw.as_ptr() as usize, raw.len(), t.data_type, t.dims.clone()))
}

/// A model prepared for repeated runs on inputs of fixed shapes.
pub struct Session<'m> {
    model: &'m Model,
    frame: Frame<'m>,
    steps: Vec<Planned>,
    frees: Vec<Vec<ValueId>>,
    fed: Vec<(String, Fed)>,
    outputs: Vec<ValueId>,
    initializer: Vec<bool>,
    resident: u64,
    /// What convolutions with a constant weight derive from it, by node.
    filters: HashMap<NodeId, Prepared>,
    /// What quantized products with a constant weight derive from it, by node.
    quantized: HashMap<NodeId, quantized::Weights>,
    pool: Vec<Vec<f32>>,
    simd: bool,
    coverage: Coverage,
    /// Each step's total time over the runs since profiling was turned on.
    times: Option<Vec<Duration>>,
    /// By step, the fallback a run met where the step was prepared for the fast kernels.
    late: Vec<Option<Fallback>>,
    /// Whether the step being run has sent nodes to the reference kernels.
    on_reference: bool,
    /// The options, for the sessions of `If` branches.
    options: Options,
    /// By `If` node and branch taken, the branch prepared (or why it could not be).
    branches: HashMap<(NodeId, bool), std::result::Result<PreparedBranch, Refusal>>,
    /// Why the step being run sent a branch to the reference kernels.
    branch_refusal: Option<Refusal>,
    /// By value: computed when the session was prepared from stored
    /// initializers alone (no fed input, no folded shape), so the same for
    /// any input shapes: [`Session::replan`] keeps them.
    shape_free: Vec<bool>,
}

fn idx(id: ValueId) -> usize {
    EntityId::index(id)
}

impl<'m> Session<'m> {
    /// Prepares `lowered` (a lowering of `model`'s main graph) for inputs
    /// shaped as `fed`.
    pub fn new(
        model: &'m Model,
        lowered: &LoweredModel,
        fed: &[(String, Fed)],
        options: &Options,
    ) -> Result<Session<'m>> {
        Self::new_reusing(model, lowered, fed, options, &mut Decoded::default())
    }

    /// [`Session::new`], taking the decoded initializers `decoded` holds
    /// for the same stored bytes instead of decoding them again: a model and
    /// its optimized form share most weights, and decoding them twice costs
    /// a fresh copy of every weight.
    pub fn new_reusing(
        model: &'m Model,
        lowered: &LoweredModel,
        fed: &[(String, Fed)],
        options: &Options,
        decoded: &mut Decoded,
    ) -> Result<Session<'m>> {
        let gid = model.graph.ok_or_else(|| RunError::InvalidModel("the model has no main graph".into()))?;
        let graph = &model.graphs[gid];
        let mut frame = Frame::main(graph);
        for t in &graph.initializers {
            let name = t.name.as_deref().unwrap_or("");
            let Some(id) = graph.value_named(name) else { continue };
            let value = match stored_bytes(t).and_then(|key| decoded.0.remove(&key)) {
                Some(value) => value,
                None => Tensor::from_ir(t).map_err(|problem| RunError::Tensor { name: name.to_string(), problem })?,
            };
            frame.values[idx(id)] = Some(Value::Tensor(value));
        }
        Self::prepare(model, lowered, fed, options, frame, Vec::new())
    }

    /// The session's decoded initializers, for [`Session::new_reusing`].
    pub fn into_decoded(self) -> Decoded {
        let mut frame = self.frame;
        let graph = frame.graph;
        let mut decoded = Decoded::default();
        for t in &graph.initializers {
            let (Some(key), Some(id)) = (stored_bytes(t), graph.value_named(t.name.as_deref().unwrap_or(""))) else {
                continue;
            };
            if let Some(Value::Tensor(value)) = frame.values[idx(id)].take() {
                decoded.0.insert(key, value);
            }
        }
        decoded
    }

    /// The same model prepared for inputs shaped as `fed`, keeping the
    /// initializers this session decoded: what a caller does when the input
    /// shapes change (a new batch size, a longer sequence). Everything
    /// derived from the old shapes (folded shapes, hoisted constants,
    /// prepared filters and branches) is worked out again.
    pub fn replan(self, lowered: &LoweredModel, fed: &[(String, Fed)]) -> Result<Session<'m>> {
        let Session { model, mut frame, options, shape_free, initializer, .. } = self;
        let graph = frame.graph;
        // attribute-derived kernel state (`frame.prepared`) does not depend on shapes: it stays
        let mut keep = vec![false; frame.values.len()];
        for t in &graph.initializers {
            if let Some(id) = graph.value_named(t.name.as_deref().unwrap_or("")) {
                keep[idx(id)] = true;
            }
        }
        // what the old plan hoisted from initializers alone holds for any shapes
        for (k, (&free, &held)) in keep.iter_mut().zip(shape_free.iter().zip(&initializer)) {
            *k |= free && held;
        }
        for (value, keep) in frame.values.iter_mut().zip(keep) {
            if !keep {
                *value = None;
            }
        }
        Self::prepare(model, lowered, fed, &options, frame, shape_free)
    }

    /// Plans and binds the steps over a frame holding the decoded initializers.
    fn prepare(
        model: &'m Model,
        lowered: &LoweredModel,
        fed: &[(String, Fed)],
        options: &Options,
        frame: Frame<'m>,
        shape_free: Vec<bool>,
    ) -> Result<Session<'m>> {
        let graph = frame.graph;
        let plan = Plan::new(model, fed)?;
        let bindings: HashMap<String, i64> =
            plan.bindings().iter().filter_map(|b| Some((b.symbol.clone(), i64::try_from(b.size).ok()?))).collect();
        let value_of = |s: &str| bindings.get(s).copied();
        let initializer: Vec<bool> = frame.values.iter().map(Option::is_some).collect();
        let resident = frame.values.iter().flatten().map(Value::byte_size).sum();
        let mut coverage = Coverage::default();
        let mut steps = Vec::new();
        // A program bound (`Ok`) runs as a step; else its nodes, on the reference
        // kernels, and the fallback is listed with its reason.
        let place_program = |p: &Program,
                             r: std::result::Result<Ready, Refusal>,
                             steps: &mut Vec<Planned>,
                             coverage: &mut Coverage| match r {
            Ok(r) => {
                coverage.programs += 1;
                coverage.fused_nodes += p.nodes.len();
                steps.push(Planned::Program(Box::new(r)));
            }
            // a program the fused kernels refuse for its types or sizes
            // whose nodes the session's own kernels all take (a Cast of
            // int32 sums to float): those kernels, node by node
            Err(why)
                if matches!(why.reason, FallbackReason::OperandType | FallbackReason::UnboundExtent)
                    && p.nodes.iter().all(|&n| native::covers(&graph.nodes[n])) =>
            {
                coverage.native_nodes += p.nodes.len();
                steps.extend(p.nodes.iter().map(|&n| Planned::Native(n)));
            }
            Err(why) => {
                coverage.reference_nodes += p.nodes.len();
                let float = p.outputs.iter().any(|o| is_float(o.view.elem)) || p.body.iter().any(|i| is_float(i.ty));
                steps.push(Planned::Fallback(p.nodes.clone(), why, float));
            }
        };
        for step in &lowered.steps {
            match step {
                Step::Program(p) => place_program(p, ready(model, p, &value_of), &mut steps, &mut coverage),
                Step::Contraction(c) => {
                    coverage.contractions += 1;
                    let result = graph.nodes[c.node].outputs.first().copied();
                    let epilogue = c.epilogue.as_ref().map(|e| (e, ready(model, e, &value_of)));
                    let (k, folded) = match (&epilogue, result) {
                        (Some((_, Ok(r))), Some(result)) => (
                            fusable(r, result),
                            foldable(r, result, c.op, row_length(&plan, &frame, &graph.nodes[c.node])),
                        ),
                        _ => (None, None),
                    };
                    match (k, epilogue) {
                        (_, Some((_, Ok(r)))) if folded.is_some() => {
                            let (k_result, f) = folded.expect("tested");
                            coverage.programs += 1;
                            coverage.folded_epilogues += 1;
                            coverage.fused_nodes += r.program.nodes.len();
                            steps.push(Planned::Folded(c.node, c.op, Box::new(r), k_result, f, k.is_some()));
                        }
                        (Some(k), Some((_, Ok(r)))) => {
                            coverage.programs += 1;
                            coverage.fused_nodes += r.program.nodes.len();
                            steps.push(Planned::Fused(c.node, c.op, Box::new(r), k));
                        }
                        (_, epilogue) => {
                            steps.push(Planned::Contraction(c.node, c.op));
                            if let Some((e, r)) = epilogue {
                                place_program(e, r, &mut steps, &mut coverage);
                            }
                        }
                    }
                }
                Step::Node(n) if options.prepare_body.is_some() && is_if(&graph.nodes[*n]) => {
                    steps.push(Planned::Branch(*n));
                }
                Step::Node(n) if native::covers(&graph.nodes[*n]) => {
                    coverage.native_nodes += 1;
                    steps.push(Planned::Native(*n));
                }
                Step::Node(n) => match lowered.unfused.iter().find(|u| u.node == *n) {
                    // integer arithmetic and comparisons (of any shape, known
                    // before the run or not): the session's own kernels
                    Some(u)
                        if matches!(u.refusal.reason, FallbackReason::OperandType | FallbackReason::UnboundExtent)
                            && super::integer::OPS.contains(&graph.nodes[*n].op_type()) =>
                    {
                        coverage.native_nodes += 1;
                        steps.push(Planned::Native(*n));
                    }
                    // float work whose shapes are known only at run time
                    Some(u)
                        if u.refusal.reason == FallbackReason::UnboundExtent
                            && super::late::covers(&graph.nodes[*n]) =>
                    {
                        coverage.native_nodes += 1;
                        steps.push(Planned::Native(*n));
                    }
                    Some(u) => {
                        coverage.reference_nodes += 1;
                        steps.push(Planned::Fallback(vec![*n], u.refusal.clone(), u.float));
                    }
                    None => {
                        coverage.reference_nodes += 1;
                        steps.push(Planned::Nodes(vec![*n]));
                    }
                },
            }
        }
        let outputs = crate::exec::output_ids(graph)?;
        let mut session = Session {
            model,
            frame,
            steps,
            frees: Vec::new(),
            fed: fed.to_vec(),
            outputs,
            initializer,
            resident,
            filters: HashMap::new(),
            quantized: HashMap::new(),
            pool: Vec::new(),
            simd: options.use_simd(),
            coverage,
            times: None,
            late: Vec::new(),
            on_reference: false,
            options: options.clone(),
            branches: HashMap::new(),
            branch_refusal: None,
            shape_free,
        };
        session.fold_shapes(&plan);
        session.hoist_constants()?;
        session.frees = frees(model, &session.steps, &session.outputs);
        session.late = vec![None; session.steps.len()];
        session.coverage.fallbacks = (0..session.steps.len())
            .filter_map(|s| match &session.steps[s] {
                Planned::Fallback(_, why, float) => {
                    Some(session.fallback(s, &session.steps[s], why.clone(), *float, false))
                }
                _ => None,
            })
            .collect();
        Ok(session)
    }

    /// The input shapes and types this session was prepared for.
    pub fn fed(&self) -> &[(String, Fed)] {
        &self.fed
    }

    /// How the steps are carried out.
    pub fn coverage(&self) -> &Coverage {
        &self.coverage
    }

    /// Runs on `inputs`, which must have the shapes the session was made for.
    pub fn run(&mut self, inputs: Vec<(String, Value)>) -> Result<SessionRun> {
        let graph = self.frame.graph;
        if inputs.len() != self.fed.len()
            || inputs.iter().zip(&self.fed).any(|((n, v), (m, f))| n != m || Fed::of(v) != *f)
        {
            return Err(RunError::Input {
                name: inputs.first().map_or_else(String::new, |(n, _)| n.clone()),
                problem: "the inputs differ from those the session was prepared for".into(),
            });
        }
        let mut live = self.resident;
        let mut shadowed: Vec<(ValueId, Value)> = Vec::new();
        for (name, value) in inputs {
            let id = graph.value_named(&name).ok_or_else(|| RunError::Input {
                name: name.clone(),
                problem: "the model has no input of that name".into(),
            })?;
            live += value.byte_size();
            if let Some(old) = self.frame.values[idx(id)].replace(value) {
                live -= old.byte_size();
                if self.initializer[idx(id)] {
                    shadowed.push((id, old));
                }
            }
        }
        let mut peak = live;
        let result = super::denormals::flushing(|| hot_pool::while_hot(|| self.run_steps(&mut live, &mut peak)));
        let mut outputs = Vec::new();
        if result.is_ok() {
            for &id in &self.outputs {
                let name = graph.value_name(id).to_string();
                let value = if self.initializer[idx(id)] || self.fed.iter().any(|(n, _)| *n == name) {
                    self.frame.values[idx(id)].clone()
                } else {
                    self.frame.values[idx(id)].take()
                };
                let value =
                    value.ok_or_else(|| RunError::InvalidModel(format!("graph output '{name}' is never computed")))?;
                outputs.push((name, value));
            }
        }
        for i in 0..self.frame.values.len() {
            if !self.initializer[i] {
                if let Some(old) = self.frame.values[i].take() {
                    self.recycle(old);
                }
            }
        }
        for (id, v) in shadowed {
            self.frame.values[idx(id)] = Some(v);
        }
        result?;
        Ok(SessionRun { outputs, peak_bytes: peak })
    }

    fn run_steps(&mut self, live: &mut u64, peak: &mut u64) -> Result<()> {
        let steps = std::mem::take(&mut self.steps);
        let result = self.run_each(&steps, live, peak, true);
        self.steps = steps;
        result
    }

    /// Runs `steps` in order; `main` when they are the session's steps
    /// (not the hoisted ones): each step's time is added to the profile
    /// when one is kept, and a step prepared for the fast kernels that
    /// goes to the reference kernels is recorded as a fallback.
    fn run_each(&mut self, steps: &[Planned], live: &mut u64, peak: &mut u64, main: bool) -> Result<()> {
        let timed = main && self.times.is_some();
        for (s, step) in steps.iter().enumerate() {
            let start = timed.then(Instant::now);
            self.on_reference = false;
            let made = match step {
                Planned::Program(r) => match self.run_program(r, s)? {
                    Some(made) => made,
                    None => self.run_nodes(&r.program.nodes, peak, *live)?,
                },
                Planned::Nodes(nodes) | Planned::Fallback(nodes, ..) => self.run_nodes(nodes, peak, *live)?,
                Planned::Contraction(node, op) => self.run_contraction(*node, *op, peak, *live)?,
                Planned::Fused(node, op, r, k) => self.run_fused(*node, *op, r, *k, s, peak, *live)?,
                Planned::Folded(node, op, r, k, f, pays) => {
                    self.run_folded(*node, *op, (r, *k), (*f, *pays), s, peak, *live)?
                }
                Planned::Native(node) => self.run_native(*node, s, peak, *live)?,
                Planned::Branch(node) => self.run_branch(*node, peak, *live)?,
            };
            if let (Some(start), Some(times)) = (start, self.times.as_mut()) {
                times[s] += start.elapsed();
            }
            let fast = !matches!(step, Planned::Nodes(_) | Planned::Fallback(..));
            let branch_refusal = self.branch_refusal.take();
            if main && fast && self.on_reference && self.late[s].is_none() {
                let why = branch_refusal.unwrap_or_else(|| self.late_refusal(step));
                // Float work: what the step made (not yet freed) holds floats.
                let graph = self.frame.graph;
                let float = step_nodes(step)
                    .iter()
                    .flat_map(|&n| &graph.nodes[n].outputs)
                    .any(|&v| matches!(&self.frame.values[idx(v)], Some(Value::Tensor(t)) if is_float(t.elem())));
                self.late[s] = Some(self.fallback(s, step, why, float, true));
            }
            *live += made;
            *peak = (*peak).max(*live);
            for k in 0..self.frees[s].len() {
                let id = self.frees[s][k];
                if self.initializer[idx(id)] {
                    continue;
                }
                if let Some(old) = self.frame.values[idx(id)].take() {
                    *live -= old.byte_size();
                    self.recycle(old);
                }
            }
        }
        Ok(())
    }
}

/// Puts back into `kept` what node `n`'s kernel derived from its constant
/// weights (`slot`, now filled if the call derived it; `before` the bytes
/// it held), resident like the weights; the bytes it grew by.
fn keep_derived<T>(
    resident: &mut u64,
    kept: &mut HashMap<NodeId, T>,
    n: NodeId,
    slot: Option<Option<T>>,
    before: u64,
    size: impl Fn(&T) -> u64,
) -> u64 {
    let Some(Some(derived)) = slot else { return 0 };
    let added = size(&derived).saturating_sub(before);
    *resident += added;
    kept.insert(n, derived);
    added
}

/// Node `node`'s input tensors in `frame` (`None` where an input is
/// omitted), or `None` when one is not a tensor that is there.
fn node_inputs<'f>(frame: &'f Frame<'_>, node: &diamond_ir::Node) -> Option<Vec<Option<&'f Tensor>>> {
    node.inputs
        .iter()
        .map(|&v| match frame.values[idx(v)].as_ref() {
            Some(Value::Tensor(t)) => Some(Some(t)),
            None if frame.graph.value_name(v).is_empty() => Some(None),
            _ => None,
        })
        .collect()
}

/// The output of a Shape node whose input's shape `plan` fixes (the
/// `start`/`end` slice of its dimensions, as ONNX clamps them), or `None`.
fn shape_value(node: &diamond_ir::Node, plan: &Plan) -> Option<Tensor> {
    let standard = node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx");
    if !standard || node.op_type.as_deref() != Some("Shape") || node.outputs.len() != 1 {
        return None;
    }
    let dims = plan.shape_read(*node.inputs.first()?)?;
    let dims: Vec<usize> = dims.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<_>>()?;
    Some(Tensor::from_i64s(super::late::shape_dims(node, &dims)?))
}

/// A buffer with capacity for `len` floats from `pool`, its old values kept
/// (the caller clears it, or sets its length once it has written it, or
/// keeps what [`super::contraction::overwritten`] lets it keep), else a new
/// one. Of the buffers that fit and are at most [`POOL_SLACK`] times `len`
/// (a larger one stays for a value of its size), the one with the most of
/// `len` already written wins, then the smallest: a kernel that overwrites
/// its result extends a shorter buffer with zeros first. Handing Whisper's
/// 54 MB attention buffers to its 2 MB activations, as the smallest fit
/// did, made every attention layer zero 50 MB again, and a third such
/// buffer was made each run (a fifth of the encoder's time in page faults).
fn take_from(pool: &mut Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    let fits = |b: &Vec<f32>| b.capacity() >= len && b.capacity() <= len.saturating_mul(POOL_SLACK).max(1 << 16);
    let best = (0..pool.len())
        .filter(|&i| fits(&pool[i]))
        .min_by_key(|&i| (len.saturating_sub(pool[i].len()), pool[i].capacity()));
    match best {
        Some(i) => pool.swap_remove(i),
        None => Vec::with_capacity(len),
    }
}

/// The operand of bound program `r` that is contraction result `result`,
/// when the program can run over the contraction's tiles: elementwise, the
/// result one operand only, read point for point
/// ([`fused_post::reads_point_for_point`]), in rows long enough
/// ([`fused_post::pays`]).
fn fusable(r: &Ready, result: ValueId) -> Option<usize> {
    let k = result_operand(r, result)?;
    (r.program.operands[k].elem == ElemType::Float
        && fused_post::reads_point_for_point(&r.bound, k)
        && fused_post::pays(&r.bound))
    .then_some(k)
}

/// The one operand of elementwise program `r` that is contraction result
/// `result` (`None` when `r` reduces, or reads it as no operand or two).
fn result_operand(r: &Ready, result: ValueId) -> Option<usize> {
    if !matches!(r.schedule, Schedule::Elementwise(_)) {
        return None;
    }
    let mut reading = (0..r.operands.len()).filter(|&k| r.operands[k] == result);
    let k = reading.next()?;
    reading.next().is_none().then_some(k)
}

/// The operand of bound program `r` that is contraction result `result`,
/// and how `r` folds into the contraction's epilogue ([`fold`]), when it does.
fn foldable(r: &Ready, result: ValueId, op: ContractionOp, row: Option<usize>) -> Option<(usize, Fold)> {
    let k = result_operand(r, result)?;
    fold(&r.program, &r.bound, k, op, row).map(|f| (k, f))
}

/// The length of a MatMul's rows: its second operand's last dimension (of
/// two or more), as the plan has the shapes (a fed value's, an initializer
/// overridden by one included), else the initializer's.
fn row_length(plan: &Plan, frame: &Frame, node: &diamond_ir::Node) -> Option<usize> {
    let b = *node.inputs.get(1)?;
    let dims: Vec<u64> = match (plan.shape_read(b), frame.values[idx(b)].as_ref()) {
        (Some(dims), _) => dims.to_vec(),
        (None, Some(Value::Tensor(t))) => t.shape.iter().map(|&d| d as u64).collect(),
        (None, _) => return None,
    };
    (dims.len() >= 2).then(|| usize::try_from(*dims.last()?).ok()).flatten()
}

/// Whether `node` is an ONNX `If`.
fn is_if(node: &diamond_ir::Node) -> bool {
    node.op_type.as_deref() == Some("If") && node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx")
}

/// Whether `e` is a floating-point type.
fn is_float(e: ElemType) -> bool {
    matches!(e, ElemType::Float | ElemType::Float16 | ElemType::Bfloat16 | ElemType::Double)
}

/// Binds `p`, or says why the SIMD executor cannot run it.
fn ready(model: &Model, p: &Program, value_of: &dyn Fn(&str) -> Option<i64>) -> std::result::Result<Ready, Refusal> {
    let invalid = |e: String| Refusal::new(FallbackReason::InvalidProgram, e);
    let graph = model.main_graph().ok_or_else(|| invalid("the model has no main graph".into()))?;
    let simd_type = |e: ElemType| matches!(e, ElemType::Float | ElemType::Bool);
    verify(p).map_err(|e| invalid(format!("the program does not verify: {e}")))?;
    let odd = p
        .body
        .iter()
        .map(|i| i.ty)
        .chain(p.operands.iter().map(|o| o.elem))
        .chain(p.outputs.iter().map(|o| o.view.elem))
        .find(|&e| !simd_type(e));
    if let Some(e) = odd {
        return Err(Refusal::new(
            FallbackReason::OperandType,
            format!("it computes {e}, and the fused kernels compute float and bool only"),
        ));
    }
    let bound = bind(p, value_of).map_err(of_bind_error)?;
    if bound.empty && !p.reduce.is_empty() {
        return Err(Refusal::new(FallbackReason::ViewShape, "it reduces over an empty space"));
    }
    let named = |v: &str| graph.value_named(v).ok_or_else(|| invalid(format!("'{v}' is not a value of the graph")));
    let operands = p.operands.iter().map(|o| named(&o.value)).collect::<std::result::Result<Vec<_>, _>>()?;
    let outputs = p.outputs.iter().map(|o| named(&o.view.value)).collect::<std::result::Result<Vec<_>, _>>()?;
    let schedule = if p.reduce.is_empty() {
        Schedule::Elementwise(elementwise::Order::of(p))
    } else if let Some(norm) = norm_lanes::StridedNorm::of(p, &bound) {
        Schedule::Norm(norm)
    } else {
        Schedule::Reduce(reduce::phases(p))
    };
    Ok(Ready { program: p.clone(), schedule, bound, operands, outputs })
}

/// The graph nodes a step computes.
fn step_nodes(s: &Planned) -> Vec<NodeId> {
    match s {
        Planned::Program(r) => r.program.nodes.clone(),
        Planned::Nodes(n) | Planned::Fallback(n, ..) => n.clone(),
        Planned::Contraction(n, _) | Planned::Native(n) | Planned::Branch(n) => vec![*n],
        Planned::Fused(n, _, r, _) | Planned::Folded(n, _, r, ..) => {
            std::iter::once(*n).chain(r.program.nodes.iter().copied()).collect()
        }
    }
}

/// The values a step reads that it does not make itself.
fn step_reads(model: &Model, s: &Planned) -> Vec<ValueId> {
    let Some(graph) = model.main_graph() else { return Vec::new() };
    let nodes = step_nodes(s);
    let made: HashSet<ValueId> = nodes.iter().flat_map(|&n| graph.nodes[n].outputs.iter().copied()).collect();
    let mut r: Vec<ValueId> = Vec::new();
    for &n in &nodes {
        for id in reads(model, graph, &graph.nodes[n]) {
            if !made.contains(&id) && !r.contains(&id) {
                r.push(id);
            }
        }
    }
    if let Planned::Program(p) | Planned::Fused(_, _, p, _) | Planned::Folded(_, _, p, ..) = s {
        for &id in &p.operands {
            if !made.contains(&id) && !r.contains(&id) {
                r.push(id);
            }
        }
    }
    r
}

/// After each step, the values whose last reader it was, and the values it
/// made that nothing reads (graph outputs kept).
fn frees(model: &Model, steps: &[Planned], outputs: &[ValueId]) -> Vec<Vec<ValueId>> {
    let Some(graph) = model.main_graph() else { return vec![Vec::new(); steps.len()] };
    let step_reads: Vec<Vec<ValueId>> = steps.iter().map(|s| step_reads(model, s)).collect();
    let step_made: Vec<Vec<ValueId>> = steps
        .iter()
        .map(|s| step_nodes(s).iter().flat_map(|&n| graph.nodes[n].outputs.iter().copied()).collect())
        .collect();
    let mut last: HashMap<ValueId, usize> = HashMap::new();
    for (s, r) in step_reads.iter().enumerate() {
        for &id in r {
            last.insert(id, s);
        }
    }
    let kept: HashSet<ValueId> = outputs.iter().copied().collect();
    (0..steps.len())
        .map(|s| {
            let mut f: Vec<ValueId> = Vec::new();
            let dead = step_reads[s].iter().filter(|id| last.get(id) == Some(&s));
            let unread = step_made[s].iter().filter(|id| !last.contains_key(id));
            for &id in dead.chain(unread) {
                if !kept.contains(&id) && !f.contains(&id) {
                    f.push(id);
                }
            }
            f
        })
        .collect()
}
