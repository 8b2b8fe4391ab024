//! Why a step of a [`super::Session`] runs on the reference kernels.
//!
//! A fused program, a contraction or a node with a kernel of its own that
//! the SIMD backend cannot run goes to the reference kernels — a
//! fallback, 10–300× slower on float work. No fallback is silent: each is
//! a [`Fallback`] naming the step, its operators and nodes, the class of
//! the refusal ([`FallbackReason`]) and the condition in words, kept in
//! [`super::Coverage::fallbacks`] when the session is prepared and in
//! [`super::Session::fallbacks`] once a run has met it (operands that are
//! not what a step was prepared for are only seen at run time). Graph
//! nodes that no SIMD kernel computes at all (`Gather`, `Where` on
//! integers, control flow) are not fallbacks but reference steps, with the
//! reason [`FallbackReason::Operator`] in the profile.

pub use crate::kernel::refusal::{FallbackReason, Refusal};
use std::fmt;

/// One step on the reference kernels that the fast kernels were meant to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    /// The step's position in the session's order (as in the profile).
    pub step: usize,
    /// Its operator types (`Mul+Add`).
    pub ops: String,
    /// Its nodes, the first few by name.
    pub nodes: String,
    /// Why.
    pub refusal: Refusal,
    /// Whether the step computes floating-point values (a float step of a
    /// fusible group falling back is what `bench --strict` refuses).
    pub float: bool,
    /// Whether it was only seen at run time (the step was prepared for the
    /// fast kernels).
    pub at_run_time: bool,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step #{} {} [{}]: {}: {}",
            self.step,
            self.ops,
            self.nodes,
            self.refusal.reason.name(),
            self.refusal.detail
        )
    }
}

impl Fallback {
    /// The fallback as `--json` prints it.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "step": self.step,
            "ops": self.ops,
            "nodes": self.nodes,
            "reason": self.refusal.reason.name(),
            "detail": self.refusal.detail,
            "float": self.float,
            "at_run_time": self.at_run_time,
        })
    }
}

/// The refusal of a size that does not bind: an unknown symbol is an
/// unbound extent, anything else a view that does not fit.
pub(crate) fn of_bind_error(e: String) -> Refusal {
    let reason = if e.contains("is not bound") { FallbackReason::UnboundExtent } else { FallbackReason::ViewShape };
    Refusal::new(reason, format!("it does not bind: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_errors_are_classed_by_what_failed() {
        assert_eq!(of_bind_error("the size x.2 is not bound".into()).reason, FallbackReason::UnboundExtent);
        assert_eq!(of_bind_error("in0 ('a'): reaches elements 0..=9 of 4".into()).reason, FallbackReason::ViewShape);
    }

    #[test]
    fn a_fallback_names_its_step_and_reason() {
        let f = Fallback {
            step: 3,
            ops: "Mul+Add".into(),
            nodes: "n1, n2".into(),
            refusal: Refusal::new(FallbackReason::OperandType, "it computes int64"),
            float: false,
            at_run_time: false,
        };
        assert_eq!(f.to_string(), "step #3 Mul+Add [n1, n2]: operand type: it computes int64");
        assert_eq!(f.json()["reason"], "operand type");
    }
}
