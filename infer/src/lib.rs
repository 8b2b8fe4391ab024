//! The broadcast-order constraint solver of seed 000.
//!
//! Shapes are rows of dimensions with a broadcast marker ([`diamond_ir::term`]).
//! Operators (or `.rows` lines) emit [`Constraint`]s: dimension and row
//! equality and broadcast inequality, plus total-element, affine and sum
//! constraints. The [`Solver`] eliminates variables with union-find,
//! defers rules that lack facts until a variable they wait on is solved, and
//! runs to a fixpoint; the result is the principal substitution. Closing then
//! commits leaves upward and interiors downward. Every constraint carries a
//! [`Cause`], so every [`Diagnostic`] can give the chain of facts behind it.
//! The solver never panics on any constraint set; it returns its solution and
//! its diagnostics.
#![warn(missing_docs)]

pub mod cause;
mod closed;
mod closing;
pub mod constraint;
pub mod diagnostic;
pub mod graph;
mod interned;
pub mod names;
pub mod ops;
pub mod rows;
pub mod rule;
mod rules;
pub mod solver;
mod store;

pub use cause::{Cause, CauseId, Origin};
pub use closed::ClosedShapes;
pub use constraint::{AffineSize, Constraint, SizeSum};
pub use diagnostic::{Assumption, Code, Diagnostic, Severity};
pub use graph::{check_model, CheckOptions, CheckReport};
pub use names::Names;
pub use solver::{Solution, SolvedTensor, Solver, TensorId, TensorKind};
