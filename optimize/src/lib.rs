//! Graph → graph optimization: small named passes over an `ir::Model`, each
//! keeping every graph output's shape and values.
//!
//! Every pass reads an [`Analysis`] of the current model — the check report
//! (each value's inferred shape and element type, the elements value
//! propagation knows) and the main graph's def-use tables — and rewrites the
//! main graph. The driver ([`optimize`]) re-analyses after each pass that
//! changed something and repeats the pass list until a round changes
//! nothing. Then it runs the same passes over every `If` branch and
//! `Loop`/`Scan` body, at any depth, each made the main graph for the time
//! (`bodies`: its outer values become its typed inputs, or initializers
//! where they are known constants), and the main graph again while the
//! bodies changed. A value a body reads by name from an enclosing graph is
//! never rewired or removed there. Graph inputs, outputs and their names are
//! the model's interface and are never changed.

pub mod analysis;
pub mod audit;
mod bodies;
pub mod lower;
pub mod opset;
pub mod passes;
pub mod raw_hints;
pub mod rewrite;
pub mod text;
pub mod uniform;
pub mod verify;
pub mod widen;

pub use analysis::Analysis;
pub use passes::{pass_named, Pass, PASS_NAMES};

use diamond_ir::Model;
use serde::Serialize;
use std::collections::BTreeMap;

/// How to optimize.
#[derive(Clone, Debug)]
pub struct Options {
    /// The passes to run, by name, in order (default: [`PASS_NAMES`]).
    pub passes: Vec<String>,
    /// The most rounds of the whole pass list.
    pub max_rounds: usize,
    /// Run original and result on the reference executor and refuse a result that differs.
    pub verify: bool,
    /// On a difference, verify the model after each pass run to name the first that broke it.
    pub bisect: bool,
    /// `fold-constants` keeps a result of at most this many bytes, or of no
    /// more bytes than the node's inputs (`--fold-limit`).
    pub fold_limit: u64,
    /// Upgrade the model to this default-domain opset first (exact upgrades only).
    pub target_opset: Option<i64>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            passes: PASS_NAMES.iter().map(|s| s.to_string()).collect(),
            max_rounds: 8,
            verify: false,
            bisect: false,
            fold_limit: analysis::DEFAULT_FOLD_LIMIT,
            target_opset: None,
        }
    }
}

/// What one pass did in one round.
#[derive(Clone, Debug, Serialize)]
pub struct PassRun {
    /// The pass's name.
    pub pass: &'static str,
    /// The graph it ran on: empty for the main graph, `node/attribute` (under
    /// the enclosing body's label) for a control-flow body.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub graph: String,
    /// The round (from 1).
    pub round: usize,
    /// How many rewrites it made.
    pub rewrites: usize,
    /// Nodes of the graph it ran on, after it.
    pub nodes_after: usize,
}

/// A control-flow body the passes did not run on.
#[derive(Clone, Debug, Serialize)]
pub struct SkippedBody {
    /// The body, labelled as in [`PassRun::graph`].
    pub graph: String,
    /// Why it was left as it was.
    pub why: String,
}

/// The optimized model and what was done to it.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The result.
    pub model: Model,
    /// Nodes per operator before (every graph and function, [`op_counts`]).
    pub before: BTreeMap<String, usize>,
    /// Nodes per operator after.
    pub after: BTreeMap<String, usize>,
    /// Every pass run that rewrote something.
    pub runs: Vec<PassRun>,
    /// The control-flow bodies left as they were, and why.
    pub skipped: Vec<SkippedBody>,
    /// How verification went, when asked for.
    pub verdict: Option<verify::Verdict>,
}

/// Why a model was not optimized.
#[derive(Debug, thiserror::Error)]
pub enum OptimizeError {
    /// A pass name that does not exist.
    #[error("unknown pass '{0}' (passes: {names})", names = PASS_NAMES.join(", "))]
    UnknownPass(String),
    /// The model has no main graph.
    #[error("the model has no graph")]
    NoGraph,
    /// Checking found errors: its shapes are inconsistent, so no rewrite decided by them is safe.
    #[error("the model has {0} error(s); `diamond check` lists them")]
    ModelErrors(usize),
    /// `--target-opset` asked for an upgrade that is not exact or not possible.
    #[error("{0}")]
    Upgrade(String),
    /// The optimized model computes something else than the original.
    #[error("verification failed{}: {why}", pass.as_ref().map(|p| format!(" after pass '{p}'")).unwrap_or_default())]
    Verification {
        /// The first pass whose result differs (with `bisect`).
        pass: Option<String>,
        /// What differs.
        why: String,
    },
}

/// Nodes per operator (`domain::op` outside the default domain), counting
/// every node: the main graph's, those of the bodies their attributes hold
/// at any depth, and those of the model-local functions.
pub fn op_counts(model: &Model) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    let mut stack: Vec<diamond_ir::GraphId> = model.graph.into_iter().collect();
    stack.extend(model.functions.iter().map(|f| f.body));
    while let Some(g) = stack.pop() {
        for (_, n) in model.graphs[g].nodes.iter() {
            let key = if n.domain().is_empty() {
                n.op_type().to_string()
            } else {
                format!("{}::{}", n.domain(), n.op_type())
            };
            *counts.entry(key).or_insert(0) += 1;
            stack.extend(n.subgraphs());
        }
    }
    counts
}

/// Runs the passes of `options` over `model` until a round changes nothing,
/// then over every control-flow body, and again over the main graph while
/// the bodies changed.
pub fn optimize(model: &Model, options: &Options) -> Result<Outcome, OptimizeError> {
    let passes: Vec<&'static dyn Pass> = options
        .passes
        .iter()
        .map(|n| pass_named(n).ok_or_else(|| OptimizeError::UnknownPass(n.clone())))
        .collect::<Result<_, _>>()?;
    optimize_with(model, options, &passes)
}

/// [`optimize`] with the passes given as they are (`options.passes` is not
/// read): for a pass of the caller's own, or one under test.
pub fn optimize_with(model: &Model, options: &Options, passes: &[&'static dyn Pass]) -> Result<Outcome, OptimizeError> {
    let original = model.clone();
    let mut model = match options.target_opset {
        Some(target) => opset::upgrade(model, target).map_err(OptimizeError::Upgrade)?,
        None => model.clone(),
    };
    let first = analyse(&model, options).ok_or(OptimizeError::NoGraph)?;
    if blocking_errors(&first) > 0 {
        return Err(OptimizeError::ModelErrors(blocking_errors(&first)));
    }
    let main = first.main;
    let before = op_counts(&original);
    let mut driver =
        Driver { passes, options, runs: Vec::new(), snapshots: Vec::new(), frames: Vec::new(), skipped: Vec::new() };
    let mut analysis = first;
    for _ in 0..3 {
        let current = driver.run_passes(&mut model, analysis, "")?;
        if driver.optimize_bodies(&mut model, &current, "", &[main], 0)? == 0 {
            break;
        }
        analysis = analyse(&model, options).ok_or(OptimizeError::NoGraph)?;
    }
    // Rewiring can leave a reader before its producer in the node list; ONNX requires the order.
    rewrite::sort_topologically(&mut model);
    let after = op_counts(&model);
    let Driver { runs, snapshots, skipped, .. } = driver;
    let verdict = if options.verify { Some(check_numerics(&original, &model, &snapshots)?) } else { None };
    Ok(Outcome { model, before, after, runs, skipped, verdict })
}

/// The errors that keep a model from being optimized: every error but a
/// declaration the graph contradicts (`declared-shape-mismatch`: an
/// exporter's stale output shape), which is a claim the passes never
/// decide on — they read what the graph implies, and verification runs the
/// graph.
fn blocking_errors(a: &Analysis) -> usize {
    use diamond_infer::{Code, Severity};
    a.report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error && d.code != Code::DeclaredShapeMismatch)
        .count()
}

/// Checks `model` and indexes its main graph, with the fold limit of `options`.
fn analyse(model: &Model, options: &Options) -> Option<Analysis<'static>> {
    Analysis::new(model).map(|mut a| {
        a.fold_limit = options.fold_limit;
        a
    })
}

/// The state of one optimization: the passes, what they did, and the bodies
/// currently made the main graph ([`bodies::Frame`]), innermost last.
struct Driver<'p> {
    passes: &'p [&'static dyn Pass],
    options: &'p Options,
    runs: Vec<PassRun>,
    /// With `--bisect`: the whole model after each pass run that changed it.
    snapshots: Vec<(String, Model)>,
    frames: Vec<(bodies::Frame, Vec<diamond_ir::GraphId>)>,
    skipped: Vec<SkippedBody>,
}

impl Driver<'_> {
    /// Runs the passes over the current main graph until a round changes
    /// nothing; returns the analysis of the result.
    fn run_passes(
        &mut self,
        model: &mut Model,
        first: Analysis<'static>,
        graph: &str,
    ) -> Result<Analysis<'static>, OptimizeError> {
        let mut analysis = Some(first);
        for round in 1..=self.options.max_rounds.max(1) {
            let mut changed = false;
            for pass in self.passes {
                let current = match analysis.take() {
                    Some(a) => a,
                    None => analyse(model, self.options).ok_or(OptimizeError::NoGraph)?,
                };
                let rewrites = pass.run(model, &current);
                if rewrites == 0 {
                    analysis = Some(current);
                    continue;
                }
                changed = true;
                let nodes_after = model.main_graph().map_or(0, |g| g.nodes.len());
                self.runs.push(PassRun { pass: pass.name(), graph: graph.to_string(), round, rewrites, nodes_after });
                if self.options.verify && self.options.bisect {
                    let whole =
                        if self.frames.is_empty() { model.clone() } else { bodies::restored(model, &self.frames) };
                    let label =
                        if graph.is_empty() { pass.name().to_string() } else { format!("{} on {graph}", pass.name()) };
                    self.snapshots.push((label, whole));
                }
            }
            if !changed {
                break;
            }
        }
        match analysis {
            Some(a) => Ok(a),
            None => analyse(model, self.options).ok_or(OptimizeError::NoGraph),
        }
    }

    /// Optimizes every body held by the nodes of the current main graph
    /// (which `analysis` describes), and the bodies nested in them;
    /// `ancestors` are the graphs around the current main graph and itself,
    /// outermost first. Returns how many rewrites were made.
    fn optimize_bodies(
        &mut self,
        model: &mut Model,
        analysis: &Analysis,
        within: &str,
        ancestors: &[diamond_ir::GraphId],
        depth: usize,
    ) -> Result<usize, OptimizeError> {
        if depth >= bodies::MAX_DEPTH {
            return Ok(0);
        }
        let mut total = 0;
        for (nid, attr, body) in bodies::bodies_of(model, analysis.main) {
            let label = bodies::label(model, analysis.main, nid, &attr, within);
            let frame = match bodies::Frame::enter(model, analysis, body) {
                Ok(frame) => frame,
                Err(why) => {
                    self.skipped.push(SkippedBody { graph: label, why });
                    continue;
                }
            };
            let inner = match analyse(model, self.options) {
                Some(a) if blocking_errors(&a) == 0 => a,
                found => {
                    let errors = found.map_or(0, |a| blocking_errors(&a));
                    let why = format!("checked on its own, the body has {errors} error(s)");
                    self.skipped.push(SkippedBody { graph: label, why });
                    frame.leave(model, ancestors);
                    continue;
                }
            };
            self.frames.push((frame, ancestors.to_vec()));
            let before = self.runs.len();
            let result = self.run_passes(model, inner, &label).and_then(|current| {
                let mut nested = ancestors.to_vec();
                nested.push(body);
                self.optimize_bodies(model, &current, &label, &nested, depth + 1)
            });
            rewrite::sort_topologically(model);
            let (frame, around) = self.frames.pop().expect("the frame pushed above");
            frame.leave(model, &around);
            result?;
            total += self.runs[before..].iter().map(|r| r.rewrites).sum::<usize>();
        }
        Ok(total)
    }
}

/// Verifies `result` against `original`; on a difference, names the first
/// snapshot (pass run) that differs when snapshots were kept.
fn check_numerics(
    original: &Model,
    result: &Model,
    snapshots: &[(String, Model)],
) -> Result<verify::Verdict, OptimizeError> {
    const SEED: u64 = 0x5eed_d1a0;
    match verify::verify(original, result, SEED) {
        verify::Verdict::Differs(why) => {
            let pass = snapshots
                .iter()
                .find(|(_, m)| matches!(verify::verify(original, m, SEED), verify::Verdict::Differs(_)))
                .map(|(p, _)| p.to_string());
            Err(OptimizeError::Verification { pass, why })
        }
        verdict => Ok(verdict),
    }
}
