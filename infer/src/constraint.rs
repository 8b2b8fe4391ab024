//! The constraint language.

use crate::cause::CauseId;
use crate::interned::{D, R};
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
    /// An output size of a sliding window (Conv, Pool). Boxed: it is rare
    /// and large, and every queued constraint is as big as the largest variant.
    Affine(Box<AffineSize>),
    /// `total = Σ parts` (Concat, Split, Pad). Boxed like [`Constraint::Affine`].
    Sum(Box<SizeSum>),
}

/// `out = ⌊(input + pads − dilation·(kernel − 1) − 1) / stride⌋ + 1`, or `⌈…⌉`
/// when `ceil`.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineSize {
    /// The output size.
    pub out: DimTerm,
    /// The input size.
    pub input: DimTerm,
    /// The kernel size.
    pub kernel: DimTerm,
    /// Total padding on the axis (begin + end).
    pub pads: i64,
    /// Stride, at least 1.
    pub stride: u64,
    /// Dilation, at least 1.
    pub dilation: u64,
    /// Ceil mode.
    pub ceil: bool,
    /// Why.
    pub cause: CauseId,
}

/// `total = Σ parts`.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeSum {
    /// The whole.
    pub total: DimTerm,
    /// The parts.
    pub parts: Vec<DimTerm>,
    /// Why.
    pub cause: CauseId,
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
            Constraint::Affine(a) => a.cause,
            Constraint::Sum(s) => s.cause,
        }
    }
}

/// A constraint as the solver queues and parks it: interned terms, rows as
/// arena handles, so that an entry is small and `Copy` but for the rare boxed
/// arithmetic. Made from a [`Constraint`] when it is added.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// `a = b` on dimensions.
    DimEq(D, D, CauseId),
    /// `a ⊑ b` on dimensions.
    DimLe(D, D, CauseId),
    /// `a = b` on rows.
    RowEq(R, R, CauseId),
    /// `sub ⊑ sup` on rows.
    RowLe(R, R, CauseId),
    /// Equal element counts.
    Numel(R, R, CauseId),
    /// A sliding window's output size.
    Affine(Box<Affine>),
    /// `total = Σ parts`.
    Sum(Box<Sum>),
}

/// [`AffineSize`] with interned terms.
#[derive(Clone, Debug)]
pub(crate) struct Affine {
    pub(crate) out: D,
    pub(crate) input: D,
    pub(crate) kernel: D,
    pub(crate) pads: i64,
    pub(crate) stride: u64,
    pub(crate) dilation: u64,
    pub(crate) ceil: bool,
    pub(crate) cause: CauseId,
}

/// [`SizeSum`] with interned terms.
#[derive(Clone, Debug)]
pub(crate) struct Sum {
    pub(crate) total: D,
    pub(crate) parts: Vec<D>,
    pub(crate) cause: CauseId,
}
