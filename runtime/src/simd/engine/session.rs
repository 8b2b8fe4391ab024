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
    /// Programs run as part of their contraction's epilogue ([`fold`]).
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

    /// Computes now each Shape node whose input's shape the plan fixes from
    /// the fed shapes (the check infers it, finding no error): its output is
    /// the same in every run, so it is held like an initializer and its step
    /// dropped — which lets [`Self::hoist_constants`] fold what reads it
    /// (position indices, masks, Reshape targets), as tract and onnxruntime
    /// do for a model loaded with concrete input shapes.
    fn fold_shapes(&mut self, plan: &Plan) {
        let graph = self.frame.graph;
        let mut kept = Vec::with_capacity(self.steps.len());
        for step in std::mem::take(&mut self.steps) {
            let folded = match &step {
                Planned::Nodes(nodes) if nodes.len() == 1 => shape_value(&graph.nodes[nodes[0]], plan),
                Planned::Native(n) => shape_value(&graph.nodes[*n], plan),
                _ => None,
            };
            let Some(value) = folded else {
                kept.push(step);
                continue;
            };
            let out = graph.nodes[step_nodes(&step)[0]].outputs[0];
            self.resident += value.byte_size();
            self.initializer[idx(out)] = true;
            self.frame.values[idx(out)] = Some(Value::Tensor(value));
            self.coverage.folded_shapes += 1;
        }
        self.steps = kept;
    }

    /// Runs, once and now, every step whose inputs are all constant
    /// (initializers that no fed input overrides, or what earlier such steps
    /// made) and that draws no random numbers, as onnxruntime and tract fold
    /// constants when they load a model, but with no size limit: the results
    /// stay resident like initializers, each run skips those steps, and
    /// constants that no remaining step or output reads are dropped.
    fn hoist_constants(&mut self) -> Result<()> {
        const RANDOM: [&str; 7] = [
            "RandomUniform",
            "RandomNormal",
            "RandomUniformLike",
            "RandomNormalLike",
            "Bernoulli",
            "Multinomial",
            "Dropout",
        ];
        let (model, graph) = (self.model, self.frame.graph);
        // An initializer is constant unless this session is fed a value for it (a graph input's default).
        let mut constant = self.initializer.clone();
        // Shape-free: stored initializers (and values a replanned session
        // kept), not folded shapes.
        let mut free = vec![false; constant.len()];
        for t in &graph.initializers {
            if let Some(id) = graph.value_named(t.name.as_deref().unwrap_or("")) {
                free[idx(id)] = true;
            }
        }
        for (i, f) in free.iter_mut().enumerate() {
            *f |= self.shape_free.get(i).copied().unwrap_or(false) && constant[i];
        }
        for (name, _) in &self.fed {
            if let Some(id) = graph.value_named(name) {
                constant[idx(id)] = false;
                free[idx(id)] = false;
            }
        }
        let (mut hoisted, mut kept, mut held_steps) = (Vec::new(), Vec::new(), 0);
        for step in std::mem::take(&mut self.steps) {
            let nodes = step_nodes(&step);
            let random = nodes.iter().any(|&n| {
                let node = &graph.nodes[n];
                node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx")
                    && RANDOM.contains(&node.op_type.as_deref().unwrap_or(""))
            });
            let reads = step_reads(model, &step);
            if !random && !nodes.is_empty() && reads.iter().all(|&v| constant[idx(v)]) {
                let step_free = reads.iter().all(|&v| free[idx(v)]);
                let outputs: Vec<ValueId> = nodes.iter().flat_map(|&n| graph.nodes[n].outputs.clone()).collect();
                for &o in &outputs {
                    constant[idx(o)] = true;
                    free[idx(o)] = step_free;
                }
                // computed by the plan this session was prepared from before
                let held =
                    outputs.iter().all(|&o| graph.value_name(o).is_empty() || self.frame.values[idx(o)].is_some());
                if held {
                    held_steps += 1;
                } else {
                    hoisted.push(step);
                }
            } else {
                kept.push(step);
            }
        }
        self.steps = kept;
        self.shape_free = free;
        self.coverage.hoisted_steps = hoisted.len() + held_steps;
        if hoisted.is_empty() {
            return Ok(());
        }
        self.frees = vec![Vec::new(); hoisted.len()];
        let (mut live, mut peak) = (self.resident, self.resident);
        self.run_each(&hoisted, &mut live, &mut peak, false)?;
        let mut needed: HashSet<ValueId> = self.outputs.iter().copied().collect();
        for step in &self.steps {
            needed.extend(step_reads(model, step));
        }
        for step in &hoisted {
            for n in step_nodes(step) {
                for &o in &graph.nodes[n].outputs {
                    let Some(value) = self.frame.values[idx(o)].take() else { continue };
                    if needed.contains(&o) {
                        self.resident += value.byte_size();
                        self.initializer[idx(o)] = true;
                        self.frame.values[idx(o)] = Some(value);
                    }
                }
            }
        }
        Ok(())
    }

    /// The input shapes and types this session was prepared for.
    pub fn fed(&self) -> &[(String, Fed)] {
        &self.fed
    }

    /// How the steps are carried out.
    pub fn coverage(&self) -> &Coverage {
        &self.coverage
    }

    /// Every step that ran on the reference kernels though the fast ones
    /// were meant to run it: the fallbacks known when the session was
    /// prepared ([`Coverage::fallbacks`]) and those the runs so far have
    /// met (operands not what the step was prepared for, a contraction
    /// the fast kernels do not cover), in step order.
    pub fn fallbacks(&self) -> Vec<Fallback> {
        let mut all = self.coverage.fallbacks.clone();
        all.extend(self.late.iter().flatten().cloned());
        // inside prepared branches: under the If's step, the branch named
        let graph = self.frame.graph;
        for (&(n, taken), prepared) in &self.branches {
            let Ok(b) = prepared else { continue };
            let step = self.steps.iter().position(|s| matches!(s, Planned::Branch(m) if *m == n)).unwrap_or(0);
            let side = if taken { "then" } else { "else" };
            for mut f in b.session.fallbacks() {
                f.step = step;
                f.ops = format!("If '{}' {side}: {}", graph.nodes[n].name.as_deref().unwrap_or(""), f.ops);
                all.push(f);
            }
        }
        all.sort_by_key(|f| f.step);
        all
    }

    /// Runs `If` node `n` with its branch prepared ([`PreparedBranch`]),
    /// prepared again when the shapes of the outer values it reads change;
    /// the bytes it added. A branch that cannot be prepared runs on the
    /// reference executor, and why is kept for the fallback report.
    fn run_branch(&mut self, n: NodeId, peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let cond = match node.inputs.first().and_then(|&c| self.frame.values[idx(c)].as_ref()) {
            Some(Value::Tensor(t)) if t.data.len() == 1 => t.to_f64s().and_then(|v| v.first().copied()),
            _ => None,
        };
        let branch = cond.map(|c| c != 0.0).and_then(|taken| {
            let name = if taken { "then_branch" } else { "else_branch" };
            Some((taken, node.attribute(name)?.g?))
        });
        // a condition that is not one number, or a branch missing: the reference executor says what is wrong
        let Some((taken, gid)) = branch else { return self.run_nodes(&[n], peak, live) };
        let value_fed = |name: &str| -> Option<Fed> {
            graph.value_named(name).and_then(|id| self.frame.values[idx(id)].as_ref()).map(Fed::of)
        };
        let fresh = match self.branches.get(&(n, taken)) {
            Some(Ok(b)) => !b.fed.iter().all(|(name, f)| value_fed(name).as_ref() == Some(f)),
            Some(Err(_)) => false,
            None => true,
        };
        if fresh {
            let prepared = self.prepare_branch(gid);
            self.branches.insert((n, taken), prepared);
        }
        let inputs: Option<Vec<(String, Value)>> = match self.branches.get(&(n, taken)) {
            Some(Ok(b)) => b
                .fed
                .iter()
                .map(|(name, _)| {
                    let id = graph.value_named(name)?;
                    Some((name.clone(), self.frame.values[idx(id)].clone()?))
                })
                .collect(),
            Some(Err(why)) => {
                self.branch_refusal = Some(why.clone());
                None
            }
            None => None,
        };
        let Some(inputs) = inputs else { return self.run_nodes(&[n], peak, live) };
        let Some(Ok(b)) = self.branches.get_mut(&(n, taken)) else { unreachable!("prepared above") };
        let run = b.session.run(inputs)?;
        if run.outputs.len() != node.outputs.len() {
            return Err(RunError::InvalidModel(format!(
                "If '{}': the branch gives {} outputs, the node has {}",
                node.name.as_deref().unwrap_or(""),
                run.outputs.len(),
                node.outputs.len()
            )));
        }
        *peak = (*peak).max(live + run.peak_bytes);
        let mut made = 0;
        for (&o, (_, value)) in node.outputs.iter().zip(run.outputs) {
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(o)].replace(value) {
                made -= old.byte_size();
            }
        }
        Ok(made)
    }

    /// Prepares branch `gid` for the outer values it reads as they are now:
    /// initializers no fed input overrides are copied in as its own, the
    /// rest fed each run.
    fn prepare_branch(&self, gid: diamond_ir::GraphId) -> std::result::Result<PreparedBranch, Refusal> {
        let graph = self.frame.graph;
        let Some(prepare) = self.options.prepare_body.as_ref() else {
            return Err(Refusal::new(FallbackReason::Operator, "no way to prepare branches was given"));
        };
        let mut free: Vec<String> = crate::schedule::free_names(self.model, gid).into_iter().collect();
        free.sort();
        let (mut dynamic, mut constants) = (Vec::new(), Vec::new());
        for name in free {
            let missing =
                || Refusal::new(FallbackReason::Operator, format!("the branch reads '{name}', which is not there"));
            let id = graph.value_named(&name).ok_or_else(missing)?;
            let overridden = self.fed.iter().any(|(n, _)| *n == name);
            let stored = graph.initializers.iter().find(|t| t.name.as_deref() == Some(name.as_str()));
            match stored {
                Some(t) if self.initializer[idx(id)] && !overridden => constants.push(t.clone()),
                _ => {
                    let value = self.frame.values[idx(id)].as_ref().ok_or_else(missing)?;
                    dynamic.push((name, value));
                }
            }
        }
        PreparedBranch::new(self.model, gid, &dynamic, constants, prepare, &self.options)
    }

    /// Step `s` (`step`) as a fallback for `refusal`.
    fn fallback(&self, s: usize, step: &Planned, refusal: Refusal, float: bool, at_run_time: bool) -> Fallback {
        let graph = self.frame.graph;
        let nodes = step_nodes(step);
        let ops: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].op_type.as_deref().unwrap_or("?")).collect();
        let names: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].name.as_deref().unwrap_or("")).collect();
        Fallback { step: s, ops: op_list(&ops), nodes: first_names(&names), refusal, float, at_run_time }
    }

    /// Why `step`, prepared for the fast kernels, went to the reference
    /// kernels in a run: an input of a type they lack, else operands not
    /// of the shapes it was prepared for.
    fn late_refusal(&self, step: &Planned) -> Refusal {
        let graph = self.frame.graph;
        let node = step_nodes(step).first().map(|&n| &graph.nodes[n]);
        let odd_type =
            node.into_iter().flat_map(|n| &n.inputs).find_map(|&v| match self.frame.values[idx(v)].as_ref() {
                Some(Value::Tensor(t)) if !matches!(t.data, Data::F32(_) | Data::Bool(_)) => Some(t.elem().to_string()),
                Some(v) if !matches!(v, Value::Tensor(_)) => Some("a value that is not a tensor".to_string()),
                _ => None,
            });
        match odd_type {
            Some(ty) => Refusal::new(
                FallbackReason::OperandType,
                format!("an operand is {ty}, which the fast kernels do not compute"),
            ),
            None => Refusal::new(
                FallbackReason::ViewShape,
                "its operands at run time are not of the shapes or layout the fast kernels were prepared for",
            ),
        }
    }

    /// Starts timing every step of the following runs, from zero (a second
    /// call starts over: call it after the warm-up runs).
    pub fn start_profiling(&mut self) {
        self.times = Some(vec![Duration::ZERO; self.steps.len()]);
    }

    /// Each step's total time since [`Session::start_profiling`], in the
    /// session's order; empty when profiling was never started.
    pub fn profile(&self) -> Vec<StepTime> {
        match &self.times {
            Some(times) => {
                self.routes().into_iter().zip(times).map(|(step, &total)| StepTime { total, ..step }).collect()
            }
            None => Vec::new(),
        }
    }

    /// Every step's route — how it runs and, on the reference kernels, why —
    /// as [`Session::profile`] gives it, without times (`total` is zero).
    pub fn routes(&self) -> Vec<StepTime> {
        let graph = self.frame.graph;
        self.steps
            .iter()
            .enumerate()
            .map(|(index, step)| {
                let total = Duration::ZERO;
                let kind = match step {
                    Planned::Program(r) if r.program.reduce.is_empty() => StepKind::Elementwise,
                    Planned::Program(_) => StepKind::Reduction,
                    Planned::Contraction(..) | Planned::Fused(..) | Planned::Folded(..) => StepKind::Contraction,
                    Planned::Native(_) => StepKind::Native,
                    Planned::Branch(_) => StepKind::Branch,
                    Planned::Nodes(_) => StepKind::Reference,
                    Planned::Fallback(..) => StepKind::Fallback,
                };
                let (kind, reason) = match (step, &self.late[index]) {
                    (Planned::Fallback(_, why, _), _) => (kind, Some(why.reason)),
                    (_, Some(late)) => (StepKind::Fallback, Some(late.refusal.reason)),
                    (Planned::Nodes(_), None) => (kind, Some(FallbackReason::Operator)),
                    _ => (kind, None),
                };
                let nodes = step_nodes(step);
                let ops: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].op_type.as_deref().unwrap_or("?")).collect();
                let names: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].name.as_deref().unwrap_or("")).collect();
                StepTime { index, kind, reason, ops: op_list(&ops), nodes: first_names(&names), total }
            })
            .collect()
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

    /// Runs `nodes` on the reference kernels; the bytes they added.
    fn run_nodes(&mut self, nodes: &[NodeId], peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        self.on_reference = true;
        let mut made = 0;
        for &n in nodes {
            let (computed, inner) = run_one(self.model, graph, &graph.nodes[n], &self.frame)?;
            *peak = (*peak).max(live + made + inner);
            for (o, value) in computed {
                made += value.byte_size();
                if let Some(old) = self.frame.values[idx(o)].replace(value) {
                    made -= old.byte_size();
                }
            }
        }
        Ok(made)
    }

    /// Runs contraction `n` on the fast kernels, or on the reference kernels
    /// when they do not cover its operands; the bytes it added.
    /// A convolution whose weight is constant keeps what the kernels derive
    /// from it ([`Prepared`]) from run to run, resident like the weight.
    fn run_contraction(&mut self, n: NodeId, op: ContractionOp, peak: &mut u64, live: u64) -> Result<u64> {
        let (mut slot, before) = self.take_filters(n, op);
        let made = self.run_on_own_kernels(n, peak, live, &mut |node, inputs, take| {
            contraction::compute(op, node, inputs, take, slot.as_mut(), Epilogue::default())
        })?;
        Ok(made + self.keep_filters(n, slot, before))
    }

    /// For a convolution with a constant weight, the slot of what its
    /// kernels derive from the weight ([`Prepared`], taken out of the
    /// session for the call) and the bytes it held; `None` otherwise.
    fn take_filters(&mut self, n: NodeId, op: ContractionOp) -> (Option<Option<Prepared>>, u64) {
        let weight = self.frame.graph.nodes[n].inputs.get(1).copied();
        let constant = op == ContractionOp::Conv && weight.is_some_and(|w| self.initializer[idx(w)]);
        let slot = constant.then(|| self.filters.remove(&n));
        let before = slot.as_ref().and_then(|s| s.as_ref()).map_or(0, Prepared::byte_size);
        (slot, before)
    }

    /// Puts back what [`Self::take_filters`] took (now filled, if the call
    /// derived it), held like the weight; the bytes it grew by.
    fn keep_filters(&mut self, n: NodeId, slot: Option<Option<Prepared>>, before: u64) -> u64 {
        keep_derived(&mut self.resident, &mut self.filters, n, slot, before, Prepared::byte_size)
    }

    /// Where each operand of program `r` lies (operand `skip`, if any, a
    /// null placeholder), or `None` when one is missing or not what `r`
    /// was bound for.
    fn operand_srcs(&self, r: &Ready, skip: Option<usize>) -> Option<Vec<Src>> {
        let mut srcs = Vec::with_capacity(r.operands.len());
        for (k, &id) in r.operands.iter().enumerate() {
            if Some(k) == skip {
                srcs.push(Src::F32(std::ptr::null()));
                continue;
            }
            let Some(Value::Tensor(t)) = self.frame.values[idx(id)].as_ref() else { return None };
            srcs.push(match (&t.data, r.program.operands[k].elem) {
                (Data::F32(v), ElemType::Float) if v.len() == r.bound.operand_lens[k] => Src::F32(v.as_ptr()),
                (Data::Bool(v), ElemType::Bool) if v.len() == r.bound.operand_lens[k] => Src::Bool(v.as_ptr()),
                _ => return None,
            });
        }
        Some(srcs)
    }

    /// Runs contraction `n` with program `r` over each finished tile of its
    /// result (operand `k` of `r`); the bytes it added. The program writes
    /// over the result where the result dies at this step (and is no graph
    /// output); otherwise the result is kept as a value too. Where the fast
    /// kernels do not cover the contraction, or its result is not the size
    /// `r` was bound for, the two run one after the other as unfused steps.
    #[allow(clippy::too_many_arguments)]
    fn run_fused(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        r: &Ready,
        k: usize,
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let Schedule::Elementwise(order) = &r.schedule else { unreachable!("fusable() takes elementwise programs") };
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let result = node.outputs[0];
        let unfused = |session: &mut Self, peak: &mut u64| session.run_unfused(n, op, r, step, peak, live);
        let Some(srcs) = self.operand_srcs(r, Some(k)) else { return unfused(self, peak) };
        let dies = self.frees.get(step).is_some_and(|f| f.contains(&result));
        let over = fused_post::writable_over(&r.program, &r.bound, k)
            .filter(|&j| dies && self.frame.values[idx(r.outputs[j])].is_none());
        let mut bufs: Vec<Option<Data>> = Vec::with_capacity(r.outputs.len());
        let mut dsts = Vec::with_capacity(r.outputs.len());
        for (j, out) in r.program.outputs.iter().enumerate() {
            let len: usize = r.bound.output_shapes[j].iter().product();
            if Some(j) == over {
                dsts.push(Dst::F32(std::ptr::null_mut()));
                bufs.push(None);
                continue;
            }
            let mut data = match out.view.elem {
                ElemType::Float => Data::F32(take_from(&mut self.pool, len)),
                _ => Data::Bool(vec![false; len]),
            };
            dsts.push(match &mut data {
                Data::F32(v) => Dst::F32(v.as_mut_ptr()),
                Data::Bool(v) => Dst::Bool(v.as_mut_ptr()),
                _ => unreachable!("made above"),
            });
            bufs.push(Some(data));
        }
        let post = fused_post::ProgramPost::new(&r.program, order, &r.bound, srcs, dsts, k, over, self.simd);
        let (mut slot, before) = self.take_filters(n, op);
        let computed = node_inputs(&self.frame, node).and_then(|inputs| {
            let pool = &mut self.pool;
            let ep = Epilogue { post: Some(&post), ..Epilogue::default() };
            contraction::compute(op, node, &inputs, &mut |len| take_from(pool, len), slot.as_mut(), ep)
        });
        let added = self.keep_filters(n, slot, before);
        let covered = computed.filter(|t| !post.overran() && t.data.len() == r.bound.operand_lens[k]);
        drop(post);
        let Some(t) = covered else {
            for data in bufs.into_iter().flatten() {
                self.recycle(Value::Tensor(Tensor { shape: Vec::new(), data }));
            }
            return Ok(added + unfused(self, peak)?);
        };
        let mut made = added;
        let mut result_data = Some(t.data);
        if over.is_none() {
            let value = Value::Tensor(Tensor { shape: t.shape, data: result_data.take().expect("kept above") });
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(result)].replace(value) {
                made -= old.byte_size();
            }
        }
        let written = bufs.into_iter().map(|data| match data {
            Some(d) => d,
            None => result_data.take().expect("one output is written over the result"),
        });
        // SAFETY: the program wrote every element of its outputs (they are
        // dense over its space, which the tiles covered).
        made += unsafe { self.hold_outputs(r, written) };
        *peak = (*peak).max(live + made);
        Ok(made)
    }

    /// Runs contraction `n`, then program `r` after it, as two steps; the bytes they added.
    fn run_unfused(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        r: &Ready,
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let made = self.run_contraction(n, op, peak, live)?;
        let after = match self.run_program(r, step)? {
            Some(m) => m,
            None => self.run_nodes(&r.program.nodes, peak, live + made)?,
        };
        Ok(made + after)
    }

    /// Runs contraction `n` with program `r` (operand `k` its result)
    /// folded into its epilogue as `f`; the bytes it added. The program's
    /// output takes the result's buffer, so the result must die at this
    /// step; else the program runs over the contraction's tiles where that
    /// `pays`, or after it. Where the fast kernels do not cover the
    /// contraction, or a size is not what `r` was bound for, the two run
    /// unfused.
    #[allow(clippy::too_many_arguments)]
    fn run_folded(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        (r, k): (&Ready, usize),
        (f, pays): (Fold, bool),
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let result = node.outputs[0];
        let dies = self.frees.get(step).is_some_and(|f| f.contains(&result));
        if !dies || self.frame.values[idx(r.outputs[0])].is_some() {
            return match pays {
                true => self.run_fused(n, op, r, k, step, peak, live),
                false => self.run_unfused(n, op, r, step, peak, live),
            };
        }
        let len = r.bound.operand_lens[k];
        let (mut slot, before) = self.take_filters(n, op);
        // Operand `j` of the program, `Some(None)` for none, `None` when it is not as bound.
        let operand = |j: Option<usize>| match j.map(|j| (j, self.frame.values[idx(r.operands[j])].as_ref())) {
            None => Some(None),
            Some((j, Some(Value::Tensor(Tensor { data: Data::F32(v), .. })))) if v.len() == r.bound.operand_lens[j] => {
                Some(Some(&v[..]))
            }
            Some(_) => None,
        };
        let (residual, bias) = (operand(f.residual), operand(f.bias));
        let computed = residual.zip(bias).and_then(|(residual, bias)| {
            let inputs = node_inputs(&self.frame, node)?;
            // a bias as long as the MatMul's rows: checked when planned (`row_length`)
            let bias = bias.map_or(Bias::None, Bias::PerCol);
            let ep = Epilogue { bias, activation: f.activation, residual, after: f.after, ..Epilogue::default() };
            let pool = &mut self.pool;
            contraction::compute(op, node, &inputs, &mut |len| take_from(pool, len), slot.as_mut(), ep)
        });
        let added = self.keep_filters(n, slot, before);
        let t = match computed {
            Some(t) if t.data.len() == len => t,
            other => {
                if let Some(t) = other {
                    self.recycle(Value::Tensor(t));
                }
                return Ok(added + self.run_unfused(n, op, r, step, peak, live)?);
            }
        };
        // SAFETY: the contraction wrote all `len` elements, as many as the output holds.
        let made = added + unsafe { self.hold_outputs(r, std::iter::once(t.data)) };
        *peak = (*peak).max(live + made);
        Ok(made)
    }

    /// Runs node `n` on the session's own kernels ([`native`]); the bytes it added.
    fn run_native(&mut self, n: NodeId, step: usize, peak: &mut u64, live: u64) -> Result<u64> {
        if relayout::relabels(&self.frame.graph.nodes[n]) {
            return self.run_relabel(n, step, peak, live);
        }
        if recurrent::quantized(&self.frame.graph.nodes[n]) {
            return self.run_quantized(n, peak, live);
        }
        if recurrent::covers(&self.frame.graph.nodes[n]) {
            return self.run_several(n, peak, live, &mut |node, inputs, _| recurrent::compute(node, inputs));
        }
        if self.frame.graph.nodes[n].op_type() == "Split" {
            return self.run_several(n, peak, live, &mut movement::split);
        }
        if self.frame.graph.nodes[n].op_type() == "TopK" {
            return self.run_several(n, peak, live, &mut |node, inputs, _| selection::top_k(node, inputs));
        }
        if quantized::covers(&self.frame.graph.nodes[n]) {
            return self.run_quantized(n, peak, live);
        }
        self.run_on_own_kernels(n, peak, live, &mut native::compute)
    }

    /// Runs quantized node `n` ([`quantized`], or a `DynamicQuantizeLSTM`
    /// through [`recurrent`]); the bytes it added. A node whose weights
    /// and their scales and zero points are initializers keeps what it
    /// derives from them ([`quantized::Weights`]), resident like the weights.
    fn run_quantized(&mut self, n: NodeId, peak: &mut u64, live: u64) -> Result<u64> {
        let simd = self.simd;
        let node = &self.frame.graph.nodes[n];
        if node.op_type() == "DynamicQuantizeLinear" {
            return self.run_several(n, peak, live, &mut |_, inputs, _| quantized::dynamic_quantize(inputs, simd));
        }
        let lstm = recurrent::quantized(node);
        let weights: &[usize] = if lstm { &[1, 2, 8, 9, 10, 11] } else { &[1, 3] };
        let constant = weights.iter().all(|&i| {
            node.inputs.get(i).is_none_or(|&v| self.initializer[idx(v)] || self.frame.graph.value_name(v).is_empty())
        });
        let mut slot = constant.then(|| self.quantized.remove(&n));
        let before = slot.as_ref().and_then(|s| s.as_ref()).map_or(0, quantized::Weights::byte_size);
        let made = if lstm {
            let mut kept = match slot.take() {
                Some(Some(quantized::Weights::Lstm(kept))) => Some(Some(*kept)),
                Some(_) => Some(None),
                None => None,
            };
            let made = self.run_several(n, peak, live, &mut |node, inputs, _| {
                recurrent::compute_keeping(node, inputs, kept.as_mut())
            })?;
            slot = kept.map(|k| k.map(|kept| quantized::Weights::Lstm(Box::new(kept))));
            made
        } else {
            let conv = node.op_type() == "ConvInteger";
            self.run_on_own_kernels(n, peak, live, &mut |node, inputs, _| {
                if conv {
                    quantized::conv_integer(node, inputs, slot.as_mut(), simd)
                } else {
                    quantized::matmul_integer(inputs, slot.as_mut(), simd)
                }
            })?
        };
        Ok(made + keep_derived(&mut self.resident, &mut self.quantized, n, slot, before, quantized::Weights::byte_size))
    }

    /// Runs relabelling node `n` (Reshape, Flatten, Squeeze, Unsqueeze) of
    /// an `f32` operand: the output takes the operand's buffer when the
    /// operand dies at this step (and is no initializer), else a pooled
    /// copy; the bytes it added. Other operands, and shapes the reference
    /// rejects, go to the reference kernels (which report them).
    fn run_relabel(&mut self, n: NodeId, step: usize, peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let (Some(&x), Some(&y)) = (node.inputs.first(), node.outputs.first()) else {
            return self.run_nodes(&[n], peak, live);
        };
        let Some(Value::Tensor(t)) = self.frame.values[idx(x)].as_ref() else {
            return self.run_nodes(&[n], peak, live);
        };
        let shape = match crate::exec::relabeled_shape(self.model, graph, node, &self.frame, &t.shape) {
            Some(Ok(shape)) if shape.iter().product::<usize>() == t.data.len() => shape,
            _ => return self.run_nodes(&[n], peak, live),
        };
        let moves = x != y && !self.initializer[idx(x)] && self.frees.get(step).is_some_and(|f| f.contains(&x));
        let (data, moved) = if moves {
            let Some(Value::Tensor(t)) = self.frame.values[idx(x)].take() else { unreachable!("checked above") };
            let bytes = t.byte_size();
            (t.data, bytes)
        } else if let Data::F32(data) = &t.data {
            let mut copy = take_from(&mut self.pool, data.len());
            copy.clear();
            copy.extend_from_slice(data);
            (Data::F32(copy), 0)
        } else {
            // Index and mask tensors: small, copied as they are.
            (t.data.clone(), 0)
        };
        let value = Value::Tensor(Tensor { shape, data });
        let mut made = value.byte_size();
        if let Some(old) = self.frame.values[idx(y)].replace(value) {
            made -= old.byte_size();
        }
        Ok(made.saturating_sub(moved))
    }

    /// Runs node `n` of several outputs (LSTM, GRU, RNN, Split) through
    /// `compute` (its inputs, and buffers from the pool), or on the
    /// reference kernels where `compute` does not cover it; the bytes it
    /// added. Outputs the graph leaves unnamed are dropped.
    fn run_several(&mut self, n: NodeId, peak: &mut u64, live: u64, compute: &mut SeveralKernel<'_>) -> Result<u64> {
        let node = &self.frame.graph.nodes[n];
        let Some(inputs) = node_inputs(&self.frame, node) else { return self.run_nodes(&[n], peak, live) };
        let pool = &mut self.pool;
        let Some(outs) = compute(node, &inputs, &mut |len| take_from(pool, len)) else {
            return self.run_nodes(&[n], peak, live);
        };
        let mut made = 0u64;
        for (&id, t) in node.outputs.iter().zip(outs) {
            if self.frame.graph.value_name(id).is_empty() {
                continue;
            }
            let value = Value::Tensor(t);
            let added = value.byte_size();
            let old = self.frame.values[idx(id)].replace(value).map_or(0, |v| v.byte_size());
            made += added.saturating_sub(old);
        }
        Ok(made)
    }

    /// Runs node `n` through `compute` (its inputs, and buffers from the
    /// pool), or on the reference kernels where `compute` does not cover it;
    /// the bytes it added.
    fn run_on_own_kernels(&mut self, n: NodeId, peak: &mut u64, live: u64, compute: &mut OwnKernel<'_>) -> Result<u64> {
        let node = &self.frame.graph.nodes[n];
        let Some(inputs) = node_inputs(&self.frame, node) else { return self.run_nodes(&[n], peak, live) };
        let pool = &mut self.pool;
        let Some(t) = compute(node, &inputs, &mut |len| take_from(pool, len)) else {
            return self.run_nodes(&[n], peak, live);
        };
        let value = Value::Tensor(t);
        let mut made = value.byte_size();
        if let Some(old) = self.frame.values[idx(node.outputs[0])].replace(value) {
            made -= old.byte_size();
        }
        Ok(made)
    }

    /// Runs a bound program; `None` when its operands are not what it was
    /// bound for (the caller runs its nodes instead).
    fn run_program(&mut self, r: &Ready, step: usize) -> Result<Option<u64>> {
        let Some(srcs) = self.operand_srcs(r, None) else { return Ok(None) };
        let mut bufs: Vec<Data> = Vec::with_capacity(r.outputs.len());
        let mut dsts = Vec::with_capacity(r.outputs.len());
        let (mut donors, mut donated) = (Vec::new(), 0u64);
        for (j, out) in r.program.outputs.iter().enumerate() {
            let len: usize = r.bound.output_shapes[j].iter().product();
            match out.view.elem {
                ElemType::Float => {
                    let donor = self.donor(r, j, step, &donors);
                    let mut v = match donor.and_then(|k| self.frame.values[idx(r.operands[k])].take()) {
                        Some(Value::Tensor(Tensor { data: Data::F32(mut v), .. })) => {
                            donors.extend(donor);
                            donated += (v.len() * 4) as u64;
                            v.clear();
                            v
                        }
                        _ => self.take_buffer(len),
                    };
                    dsts.push(Dst::F32(v.as_mut_ptr()));
                    bufs.push(Data::F32(v));
                }
                _ => {
                    let mut v = vec![false; len];
                    dsts.push(Dst::Bool(v.as_mut_ptr()));
                    bufs.push(Data::Bool(v));
                }
            }
        }
        // SAFETY: the bound program's views were checked against these
        // lengths; each output buffer has capacity for its elements, and
        // every element is written (outputs are dense over their axes).
        unsafe {
            match &r.schedule {
                Schedule::Elementwise(order) => elementwise::run(&r.program, order, &r.bound, &srcs, &dsts, self.simd),
                Schedule::Reduce(phases) => reduce::run(&r.program, phases, &r.bound, &srcs, &dsts, self.simd),
                Schedule::Norm(norm) => norm.run(&r.bound, &srcs, &dsts),
            }
        }
        // SAFETY: the program wrote every element of its outputs.
        let made = unsafe { self.hold_outputs(r, bufs.into_iter()) };
        Ok(Some(made.saturating_sub(donated)))
    }

    /// Holds `data` (one buffer per output of program `r`, in order) as the
    /// outputs' values, each `f32` buffer's length set to its output's
    /// size; the bytes added.
    ///
    /// # Safety
    /// Each `f32` buffer has its output's elements written.
    unsafe fn hold_outputs(&mut self, r: &Ready, data: impl Iterator<Item = Data>) -> u64 {
        let mut made = 0;
        for (j, mut data) in data.enumerate() {
            let shape = r.bound.output_shapes[j].clone();
            let len: usize = shape.iter().product();
            if let Data::F32(v) = &mut data {
                // SAFETY: the caller's promise.
                unsafe { v.set_len(len) };
            }
            let value = Value::Tensor(Tensor { shape, data });
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(r.outputs[j])].replace(value) {
                made -= old.byte_size();
            }
        }
        made
    }

    /// The operand of elementwise program `r` whose buffer output `j` can
    /// take over (written in place), if any: an `f32` value that
    /// - dies at this step and is no initializer;
    /// - is read by the program once, through the very view the output is
    ///   written by (so each point reads its element before writing it, and
    ///   no other point reads it);
    /// - is not the source of an output by a bare load (that output would be
    ///   stored from memory the in-place output has overwritten);
    /// - is not already taken (`taken`), while the output's value is not yet
    ///   held (so the bytes the step adds stay its outputs less its donors).
    fn donor(&self, r: &Ready, j: usize, step: usize, taken: &[usize]) -> Option<usize> {
        if !matches!(r.schedule, Schedule::Elementwise(_)) {
            return None;
        }
        let out = &r.bound.outputs[j];
        let len: usize = r.bound.output_shapes[j].iter().product();
        let dies = self.frees.get(step)?;
        (0..r.operands.len()).find(|&k| {
            let id = r.operands[k];
            let view = &r.bound.operands[k];
            !taken.contains(&k)
                && id != r.outputs[j]
                && self.frame.values[idx(r.outputs[j])].is_none()
                && !r.program.outputs.iter().any(|o| matches!(r.program.body[o.source].inst, Inst::Load(l) if l == k))
                && !self.initializer[idx(id)]
                && dies.contains(&id)
                && r.operands.iter().filter(|&&o| o == id).count() == 1
                && view.offset == out.offset
                && view.strides == out.strides
                && matches!(&self.frame.values[idx(id)],
                    Some(Value::Tensor(Tensor { data: Data::F32(v), .. })) if v.len() == len)
        })
    }

    /// A buffer with capacity for `len` floats, from the pool when one fits
    /// ([`take_from`]).
    fn take_buffer(&mut self, len: usize) -> Vec<f32> {
        take_from(&mut self.pool, len)
    }

    /// Keeps a dead value's `f32` buffer for reuse. Steps on the reference
    /// kernels allocate their own results, so more buffers come back than
    /// are taken: past [`POOL_BUFFERS`] the smallest is let go, which keeps
    /// the pool (and the process) from growing run after run.
    fn recycle(&mut self, v: Value) {
        if let Value::Tensor(Tensor { data: Data::F32(buf), .. }) = v {
            if buf.capacity() > 0 {
                self.pool.push(buf);
                if self.pool.len() > POOL_BUFFERS {
                    let smallest = (0..self.pool.len()).min_by_key(|&i| self.pool[i].capacity()).unwrap_or(0);
                    self.pool.swap_remove(smallest);
                }
            }
        }
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

/// A buffer with capacity for `len` floats: the smallest in `pool` that
/// fits, its old values kept (the caller clears it, or sets its length once
/// it has written it, or keeps what [`super::contraction::overwritten`]
/// lets it keep), else a new one.
fn take_from(pool: &mut Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    let best = (0..pool.len()).filter(|&i| pool[i].capacity() >= len).min_by_key(|&i| pool[i].capacity());
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
