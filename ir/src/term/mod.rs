//! The row-and-marker shape terms of the broadcast-order solver (DESIGN.md,
//! seed 000).
//!
//! A dimension is a size with a basis ([`Dim`]); the claim-free unit `1_∅` is
//! the bottom of the broadcast order and every other dimension is an atom. A
//! size is a number or a [`SizeExpr`] over rigid symbols (ONNX `dim_param`s),
//! kept in a normal form so that equal sizes compare equal. Unknowns are
//! dimension variables ([`DimVar`]) and row variables ([`RowVar`]). A
//! [`RowTerm`] is `l · ◇ · r` or, open, `l · ⟨ρ⟩ · r`: rank grows only at the
//! marker. The solver itself lives in `diamond-infer`.

mod dim;
mod row;
mod size;
mod size_condition;
mod size_readable;
mod size_text;

pub use dim::{Basis, Dim, DimTerm, DimVar};
pub use row::{write_row, RowTerm, RowVar};
pub use size::{Size, SizeExpr};
pub use size_condition::Condition;
pub use size_text::{size_text_symbols, SizeTextError};
