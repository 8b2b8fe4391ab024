//! Per-step times of a [`super::Session`], for `diamond bench --profile`.
//!
//! When profiling is on, every step of a run is timed and its time added
//! to the step's total. [`StepTime`] names the step as a reader of
//! onnxruntime's or tract's profiles expects: what ran it (a fused SIMD
//! program, a contraction kernel, or the reference kernels), the operator
//! types it covers, and the graph nodes (the first few by name).

use std::time::Duration;

/// How a step is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepKind {
    /// A fused elementwise program on the tile evaluator.
    Elementwise,
    /// A fused program with reductions.
    Reduction,
    /// MatMul, Gemm or Conv on the contraction kernels.
    Contraction,
    /// Another node on the session's own kernels (ConvTranspose, Resize).
    Native,
    /// Graph nodes on the reference kernels.
    Reference,
    /// A kernel program that could not be bound, its nodes on the reference kernels.
    Fallback,
    /// An `If` whose branch ran prepared, as a session of its own.
    Branch,
}

impl StepKind {
    /// The kind as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Elementwise => "simd elementwise",
            StepKind::Reduction => "simd reduction",
            StepKind::Contraction => "contraction",
            StepKind::Native => "simd kernel",
            StepKind::Reference => "reference",
            StepKind::Fallback => "fallback",
            StepKind::Branch => "simd branch",
        }
    }
}

/// The time one step took, summed over the profiled runs.
#[derive(Clone, Debug, PartialEq)]
pub struct StepTime {
    /// The step's position in the session's order.
    pub index: usize,
    /// How it ran.
    pub kind: StepKind,
    /// Why it ran on the reference kernels, where it did.
    pub reason: Option<super::FallbackReason>,
    /// The operator types of its nodes, in order, repeats folded (`Mul+Add+Tanh`).
    pub ops: String,
    /// Its nodes' names, at most three, then how many more.
    pub nodes: String,
    /// Total time over the profiled runs.
    pub total: Duration,
}

/// `names`, at most three, then how many more.
pub(crate) fn first_names(names: &[&str]) -> String {
    let mut out = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        out.push_str(&format!(" and {} more", names.len() - 3));
    }
    out
}

/// Operator types in order with adjacent repeats folded: `Mul+Add+Mul`.
pub(crate) fn op_list(ops: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for &op in ops {
        if out.last() != Some(&op) {
            out.push(op);
        }
    }
    out.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_after_three_and_repeated_ops_fold() {
        assert_eq!(first_names(&["a", "b"]), "a, b");
        assert_eq!(first_names(&["a", "b", "c", "d", "e"]), "a, b, c and 2 more");
        assert_eq!(op_list(&["Mul", "Mul", "Add", "Mul"]), "Mul+Add+Mul");
    }
}
