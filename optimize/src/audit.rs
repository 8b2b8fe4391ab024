//! What `check` can say about the optimizer's opportunities: each ones-vector
//! that `inline-ones` folds into a reduction (MatMul, Gemm, Einsum, Conv,
//! ReduceSum/ReduceMean of a product), as an `info` note at its consumer
//! naming what the uniform tensor does and what the node becomes
//! (`ones-vector: Conv 'c' multiplies by ones ('w') only to sum a 3x3
//! window over 4 channels of 'x'; ...`). A note is given exactly when the
//! pass would make the rewrite in the model as it is (its plan is the note's source).

use crate::passes::inline_ones_plan;
use crate::raw_hints::RawHints;
use crate::Analysis;
use diamond_infer::graph::CheckReport;
use diamond_infer::{Code, Diagnostic, Severity};
use diamond_ir::Model;

/// `diamond check`'s report: the checker's, with the `ones-vector` notes
/// added when it found no errors. The command line and the Python package
/// both check through this, so they report the same diagnostics.
pub fn check(model: &Model, options: &diamond_infer::CheckOptions) -> CheckReport {
    let mut report = diamond_infer::check_model(model, options);
    if report.errors() == 0 {
        let ones = ones_vectors(model, &report);
        report.diagnostics.extend(ones);
    }
    report
}

/// [`check`], for a caller that gives the model file's pages back
/// (`release`) before the checker runs: the weights are glanced at first
/// ([`RawHints`]), so that the `ones-vector` analysis afterwards reads again
/// only weights that may be uniform. The report is [`check`]'s.
pub fn check_releasing(model: &Model, options: &diamond_infer::CheckOptions, release: impl FnOnce()) -> CheckReport {
    let (mut report, ones) = check_releasing_deferred(model, options, release);
    let notes = ones.notes(model, &report);
    report.diagnostics.extend(notes);
    report
}

/// [`check_releasing`] in two steps, for a caller that does something else
/// with the report (`check --json` writes most of it) while the
/// `ones-vector` notes are made: the checker's report, and the step that
/// makes the notes [`check_releasing`] would append to its diagnostics.
pub fn check_releasing_deferred(
    model: &Model,
    options: &diamond_infer::CheckOptions,
    release: impl FnOnce(),
) -> (CheckReport, OnesVectorStep) {
    let hints = RawHints::of(model);
    release();
    (diamond_infer::check_model(model, options), OnesVectorStep { hints })
}

/// The `ones-vector` notes still to be made for a report
/// ([`check_releasing_deferred`]).
pub struct OnesVectorStep {
    hints: RawHints,
}

impl OnesVectorStep {
    /// The notes for `report` (the checker's report on `model`): none when it
    /// has errors.
    pub fn notes(self, model: &Model, report: &CheckReport) -> Vec<Diagnostic> {
        if report.errors() == 0 {
            ones_vectors_with(model, report, self.hints)
        } else {
            Vec::new()
        }
    }
}

/// The `ones-vector` notes for `model`, given its check report.
pub fn ones_vectors(model: &Model, report: &CheckReport) -> Vec<Diagnostic> {
    ones_vectors_with(model, report, RawHints::default())
}

/// [`ones_vectors`], with `hints` about the initializers' raw data.
fn ones_vectors_with(model: &Model, report: &CheckReport, hints: RawHints) -> Vec<Diagnostic> {
    let Some(a) = Analysis::with_report(model, report) else { return Vec::new() };
    let a = a.with_raw_hints(hints);
    let graph = a.graph(model);
    let mut notes = Vec::new();
    for (nid, n) in graph.nodes.iter() {
        let Some(rewrite) = inline_ones_plan(model, &a, nid) else { continue };
        let Some(note) = &rewrite.note else { continue };
        let message = format!(
            "{} '{}' {}; `diamond optimize` makes it {}",
            n.op_type(),
            n.name(),
            note.text,
            listed(&rewrite.ops()),
        );
        notes.push(Diagnostic {
            severity: Severity::Info,
            code: Code::OnesVector,
            message,
            line: None,
            node: Some(n.name().to_string()).filter(|s| !s.is_empty()),
            op: Some(n.op_type().to_string()),
            node_index: Some(<diamond_ir::NodeId as diamond_ir::entity::EntityId>::index(nid) as u32),
            graph: None,
            operand: n.inputs.iter().position(|&v| v == note.uniform).map(|i| format!("input {i}")),
            axis: None,
            help: None,
            notes: Vec::new(),
            clash: None,
            assumes: Vec::new(),
        });
    }
    notes
}

/// Operators as a phrase: `a ReduceSum`, `a ReduceSum and a Mul`, `a ReduceSum, an AveragePool and a Mul`.
fn listed(ops: &[&str]) -> String {
    let article = |op: &str| {
        let an = op.starts_with(['A', 'E', 'I', 'O', 'U']);
        format!("{} {op}", if an { "an" } else { "a" })
    };
    let items: Vec<String> = ops.iter().map(|op| article(op)).collect();
    match items.split_last() {
        None => "nothing".to_string(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn operators_read_as_a_phrase() {
        assert_eq!(super::listed(&["ReduceSum"]), "a ReduceSum");
        assert_eq!(super::listed(&["AveragePool", "Mul"]), "an AveragePool and a Mul");
        assert_eq!(
            super::listed(&["ReduceSum", "AveragePool", "Mul", "Add"]),
            "a ReduceSum, an AveragePool, a Mul and an Add"
        );
    }
}
