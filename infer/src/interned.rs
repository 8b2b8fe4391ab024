//! The solver's internal terms: interned dimensions and rows in an arena.
//!
//! A dimension term is a [`D`], a `u32`: a variable id, a small known size
//! with the default basis (encoded in the id itself), the claim-free unit, or
//! an index into the [`DimTable`] of every other dimension seen. Interning
//! keeps equality exact: two `D`s are equal iff the terms they stand for are.
//! A row is an [`R`], a `Copy` handle to a run of `D`s in the store's arena
//! (leading flank, then trailing flank) and an optional row variable. The
//! public [`DimTerm`]/[`RowTerm`] are converted at the solver's boundary only.

use diamond_ir::term::{Basis, Dim, DimTerm, DimVar, RowVar, Size};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// An interned dimension term.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct D(u32);

/// Tag bit of a variable.
const VAR: u32 = 1 << 31;
/// Tag bit of a [`DimTable`] entry.
const TABLE: u32 = 1 << 30;
/// The largest known size encoded in the id (as `n + 1`; `0` is the unit).
const SMALL_MAX: u64 = (TABLE - 2) as u64;

impl D {
    /// The claim-free unit `_`.
    pub(crate) const UNIT: D = D(0);

    /// The variable `v`.
    pub(crate) fn var(v: DimVar) -> D {
        D(v.0 | VAR)
    }

    /// The variable, if this is one.
    pub(crate) fn as_var(self) -> Option<DimVar> {
        (self.0 & VAR != 0).then_some(DimVar(self.0 & !VAR))
    }
}

/// Every dimension that is not encoded in its id, each once.
#[derive(Clone, Debug, Default)]
pub(crate) struct DimTable {
    table: Vec<Dim>,
    index: FxHashMap<Dim, u32>,
}

impl DimTable {
    /// The id of `d`.
    pub(crate) fn intern(&mut self, d: &Dim) -> D {
        match (&d.size, &d.basis) {
            (Size::Known(1), Basis::ClaimFree) => D::UNIT,
            (Size::Known(n), Basis::Default) if *n <= SMALL_MAX => D(*n as u32 + 1),
            _ => {
                if let Some(&i) = self.index.get(d) {
                    return D(i | TABLE);
                }
                let i = self.table.len() as u32;
                self.table.push(d.clone());
                self.index.insert(d.clone(), i);
                D(i | TABLE)
            }
        }
    }

    /// The id of `t`.
    pub(crate) fn term(&mut self, t: &DimTerm) -> D {
        match t {
            DimTerm::Dim(d) => self.intern(d),
            DimTerm::Var(v) => D::var(*v),
        }
    }

    /// The dimension `d` stands for (`d` must not be a variable).
    pub(crate) fn dim(&self, d: D) -> Dim {
        if d.0 & VAR != 0 {
            debug_assert!(false, "a variable is not a dimension");
            return Dim::unit();
        }
        if d.0 & TABLE != 0 {
            return self.table[(d.0 & !TABLE) as usize].clone();
        }
        match d.0 {
            0 => Dim::unit(),
            n => Dim::known(n as u64 - 1),
        }
    }

    /// The public form of `d`.
    pub(crate) fn to_term(&self, d: D) -> DimTerm {
        match d.as_var() {
            Some(v) => DimTerm::Var(v),
            None => DimTerm::Dim(self.dim(d)),
        }
    }

    /// Whether `d` is a dimension with the claim-free basis (`_`).
    pub(crate) fn is_unit(&self, d: D) -> bool {
        d == D::UNIT || (d.0 & VAR == 0 && d.0 & TABLE != 0 && self.table[(d.0 & !TABLE) as usize].is_unit())
    }

    /// Whether `d` is a rigid symbol (or an expression over them).
    pub(crate) fn is_rigid(&self, d: D) -> bool {
        d.0 & VAR == 0 && d.0 & TABLE != 0 && matches!(self.table[(d.0 & !TABLE) as usize].size, Size::Symbolic(_))
    }
}

/// No row variable.
const NO_VAR: u32 = u32::MAX;

/// A row: `lead` then `trail` dimensions from `start` in the arena, and a
/// row variable between them (or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct R {
    pub(crate) start: u32,
    pub(crate) lead: u32,
    pub(crate) trail: u32,
    var: u32,
}

impl R {
    /// The row `[..v]`, which needs no arena space.
    pub(crate) fn open(v: RowVar) -> R {
        R { start: 0, lead: 0, trail: 0, var: v.0 }
    }

    /// A row at `start` with the given flank lengths and variable.
    pub(crate) fn new(start: u32, lead: u32, trail: u32, var: Option<RowVar>) -> R {
        R { start, lead, trail, var: var.map_or(NO_VAR, |v| v.0) }
    }

    /// The row variable, if any.
    pub(crate) fn var(self) -> Option<RowVar> {
        (self.var != NO_VAR).then_some(RowVar(self.var))
    }
}

/// A resolved row, owned: its axes in order, where the marker sits, and its
/// row variable. Rules decompose these; up to eight axes need no allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flat {
    pub(crate) dims: SmallVec<[D; 8]>,
    pub(crate) lead: usize,
    pub(crate) var: Option<RowVar>,
}

impl Flat {
    /// The leading flank.
    pub(crate) fn leading(&self) -> &[D] {
        &self.dims[..self.lead]
    }

    /// The trailing flank.
    pub(crate) fn trailing(&self) -> &[D] {
        &self.dims[self.lead..]
    }
}
