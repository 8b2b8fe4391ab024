//! Why a node or a program is not run by the fast kernels: the class of
//! the refusal ([`FallbackReason`]) and the condition in words
//! ([`Refusal`]). The lowering says it for nodes it leaves out of fused
//! groups ([`super::Unfused`]); a backend says it for programs it cannot
//! bind; reports (the profile, `--json`'s `fallbacks`) print both.

/// The class of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FallbackReason {
    /// A size of the program's space is not known when the session is
    /// prepared (a symbol the fed shapes do not fix).
    UnboundExtent,
    /// An operand or result has a type the fast kernels lack.
    OperandType,
    /// A view does not fit its value's shape (or the space is empty where
    /// the program reduces), or the operands met at run time are not what
    /// the step was prepared for.
    ViewShape,
    /// No SIMD kernel computes the operator.
    Operator,
    /// The lowered program does not verify (a lowering bug).
    InvalidProgram,
}

impl FallbackReason {
    /// The reason as reports print it (`reason` in JSON).
    pub fn name(self) -> &'static str {
        match self {
            FallbackReason::UnboundExtent => "unbound extent",
            FallbackReason::OperandType => "operand type",
            FallbackReason::ViewShape => "view shape",
            FallbackReason::Operator => "operator",
            FallbackReason::InvalidProgram => "invalid program",
        }
    }
}

/// Why a step cannot run on the fast kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The class of the refusal.
    pub reason: FallbackReason,
    /// The condition, in words.
    pub detail: String,
}

impl Refusal {
    /// A refusal of class `reason`.
    pub fn new(reason: FallbackReason, detail: impl Into<String>) -> Refusal {
        Refusal { reason, detail: detail.into() }
    }
}
