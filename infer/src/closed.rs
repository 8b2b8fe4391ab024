//! Finishing a solve for a caller that reads only closed shapes (a graph
//! check): no principal shapes, no names, and no public row of every tensor
//! held at once. [`ClosedShapes`] keeps the store and each tensor's row
//! handle, and builds one tensor's closed [`RowTerm`] when asked, so a
//! report can convert each shape as it goes.

use crate::diagnostic::Diagnostic;
use crate::interned::R;
use crate::solver::{Solver, TensorId};
use crate::store::Store;
use diamond_ir::term::RowTerm;

/// The closed shapes of a solved system, one tensor at a time.
#[derive(Debug)]
pub struct ClosedShapes {
    store: Store,
    rows: Vec<R>,
}

impl ClosedShapes {
    /// The closed shape of tensor `t`.
    pub fn row(&mut self, t: TensorId) -> RowTerm {
        let flat = self.store.row(self.rows[t.0 as usize]);
        self.store.flat_term(&flat)
    }
}

impl Solver {
    /// Solves and closes like [`Solver::finish`], returning the closed
    /// shapes and the diagnostics only; everything else the solver held
    /// (causes, queues, names) is freed here.
    pub fn finish_closed(mut self) -> (ClosedShapes, Vec<Diagnostic>) {
        self.solve();
        self.close_and_order();
        let rows = self.tensors.iter().map(|t| t.row).collect();
        (ClosedShapes { store: self.store, rows }, self.diagnostics)
    }
}
