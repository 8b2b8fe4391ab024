//! The operator-rule interface: what a rule sees of its node and how it
//! states the node's outputs.
//!
//! The rules (`ops/`) and the lowering that runs them
//! (`graph/`) both stand on this module and it on neither: the
//! lowering takes the rule table from `ops` and hands each rule an
//! [`OpCtx`] made here. `OpCtx` reads and writes a `LoweringState` — the
//! solver, the facts of every value, the stored tensors not yet decoded,
//! the index bounds — which the lowering owns and lends to each rule
//! directly, so a rule's reads and constraints cost no dynamic dispatch.
//! The little a rule needs of the lowering itself (a function body's
//! caller, an output's declared type, lowering a subgraph) it asks through
//! the `Host` trait the lowering implements.

mod bounds;
mod ctx;
pub mod decode;
mod diagnostics;
mod dims;
mod facts;
mod facts_table;
mod host;
mod outputs;
mod state;
mod subgraph;
mod terms;

pub use ctx::{Defer, OpCtx};
pub use dims::{expr_dim, size_dim};
pub use facts::{ConstData, ConstValue, Elem, Facts, ValueKind};
pub(crate) use facts_table::Key;
pub(crate) use host::{Host, NodeAt};
pub use outputs::MAX_FLOAT_ELEMS;
pub(crate) use state::LoweringState;
