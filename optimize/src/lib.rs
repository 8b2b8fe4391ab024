//! Graph → graph optimization: small named passes over an `ir::Model`, each
//! keeping every graph output's shape and values.
//!
//! Every pass reads an [`Analysis`] of the current model — the check report
//! (each value's inferred shape and element type, the elements value
//! propagation knows) and the main graph's def-use tables — and rewrites the
//! main graph. The driver ([`optimize`]) re-analyses after each pass that
//! changed something and repeats the pass list until a round changes
//! nothing. Subgraphs are left as they are; a value they read by name from
//! the main graph is never rewired or removed. Graph inputs, outputs and
//! their names are the model's interface and are never changed.

pub mod analysis;
pub mod audit;
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
    /// The round (from 1).
    pub round: usize,
    /// How many rewrites it made.
    pub rewrites: usize,
    /// Main-graph nodes after it.
    pub nodes_after: usize,
}

/// The optimized model and what was done to it.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The result.
    pub model: Model,
    /// Main-graph nodes per operator before.
    pub before: BTreeMap<String, usize>,
    /// Main-graph nodes per operator after.
    pub after: BTreeMap<String, usize>,
    /// Every pass run that rewrote something.
    pub runs: Vec<PassRun>,
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

/// Main-graph nodes per operator (`domain::op` outside the default domain).
pub fn op_counts(model: &Model) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    if let Some(g) = model.main_graph() {
        for (_, n) in g.nodes.iter() {
            let key = if n.domain().is_empty() {
                n.op_type().to_string()
            } else {
                format!("{}::{}", n.domain(), n.op_type())
            };
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}

/// Runs the passes of `options` over `model` until a round changes nothing.
pub fn optimize(model: &Model, options: &Options) -> Result<Outcome, OptimizeError> {
    let passes: Vec<&'static dyn Pass> = options
        .passes
        .iter()
        .map(|n| pass_named(n).ok_or_else(|| OptimizeError::UnknownPass(n.clone())))
        .collect::<Result<_, _>>()?;
    let original = model.clone();
    let mut model = match options.target_opset {
        Some(target) => opset::upgrade(model, target).map_err(OptimizeError::Upgrade)?,
        None => model.clone(),
    };
    let analyse = |model: &Model| {
        Analysis::new(model).map(|mut a| {
            a.fold_limit = options.fold_limit;
            a
        })
    };
    let first = analyse(&model).ok_or(OptimizeError::NoGraph)?;
    if first.report.errors() > 0 {
        return Err(OptimizeError::ModelErrors(first.report.errors()));
    }
    let before = op_counts(&original);
    let mut snapshots: Vec<(&'static str, Model)> = Vec::new();
    let mut runs = Vec::new();
    let mut analysis = Some(first);
    for round in 1..=options.max_rounds.max(1) {
        let mut changed = false;
        for pass in &passes {
            let current = match analysis.take() {
                Some(a) => a,
                None => analyse(&model).ok_or(OptimizeError::NoGraph)?,
            };
            let rewrites = pass.run(&mut model, &current);
            if rewrites == 0 {
                analysis = Some(current);
                continue;
            }
            changed = true;
            let nodes_after = model.main_graph().map_or(0, |g| g.nodes.len());
            runs.push(PassRun { pass: pass.name(), round, rewrites, nodes_after });
            if options.verify && options.bisect {
                snapshots.push((pass.name(), model.clone()));
            }
        }
        if !changed {
            break;
        }
    }
    // Rewiring can leave a reader before its producer in the node list; ONNX requires the order.
    rewrite::sort_topologically(&mut model);
    let after = op_counts(&model);
    let verdict = if options.verify { Some(check_numerics(&original, &model, &snapshots)?) } else { None };
    Ok(Outcome { model, before, after, runs, verdict })
}

/// Verifies `result` against `original`; on a difference, names the first
/// snapshot (pass run) that differs when snapshots were kept.
fn check_numerics(
    original: &Model,
    result: &Model,
    snapshots: &[(&'static str, Model)],
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
