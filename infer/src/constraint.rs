//! The constraint language.

use crate::cause::CauseId;
use diamond_ir::term::{DimTerm, RowTerm};

/// One constraint, with the cause that made it.
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// `a = b` on dimensions (unification; no broadcasting).
    DimEq(DimTerm, DimTerm, CauseId),
    /// `a ⊑ b` on dimensions: `a` broadcasts to `b`.
    DimLe(DimTerm, DimTerm, CauseId),
    /// `a = b` on rows.
    RowEq(RowTerm, RowTerm, CauseId),
    /// `sub ⊑ sup` on rows: `sub` broadcasts to `sup` (rank grows at the marker).
    RowLe(RowTerm, RowTerm, CauseId),
    /// The two rows hold the same number of elements (Reshape, Flatten).
    Numel(RowTerm, RowTerm, CauseId),
    /// `out = ⌊(input + pads − dilation·(kernel − 1) − 1) / stride⌋ + 1`
    /// (or `⌈…⌉` when `ceil`): Conv and Pool output sizes.
    Affine {
        /// The output size.
        out: DimTerm,
        /// The input size.
        input: DimTerm,
        /// The kernel size.
        kernel: DimTerm,
        /// Total padding on the axis (begin + end).
        pads: i64,
        /// Stride, at least 1.
        stride: u64,
        /// Dilation, at least 1.
        dilation: u64,
        /// Ceil mode.
        ceil: bool,
        /// Why.
        cause: CauseId,
    },
    /// `total = Σ parts` (Concat, Split, Pad).
    Sum {
        /// The whole.
        total: DimTerm,
        /// The parts.
        parts: Vec<DimTerm>,
        /// Why.
        cause: CauseId,
    },
}

impl Constraint {
    /// The constraint's cause.
    pub fn cause(&self) -> CauseId {
        match self {
            Constraint::DimEq(_, _, c)
            | Constraint::DimLe(_, _, c)
            | Constraint::RowEq(_, _, c)
            | Constraint::RowLe(_, _, c)
            | Constraint::Numel(_, _, c) => *c,
            Constraint::Affine { cause, .. } | Constraint::Sum { cause, .. } => *cause,
        }
    }
}
