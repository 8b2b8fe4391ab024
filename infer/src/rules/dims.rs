//! Dimension equality and inequality.
//!
//! Equality unifies. For `a ⊑ b`: a lower bound at an atom solves
//! (`d ⊑ β` binds `β := d`), an upper bound is recorded (`α ⊑ d`), and two
//! variables wait for one of them to be known. A rigid symbol is never bound:
//! where a constraint would force it, the assumption is reported as
//! `dynamic-axis-specialized` and solving goes on.

use crate::cause::CauseId;
use crate::diagnostic::Code;
use crate::interned::D;
use crate::solver::{Solver, Step, Watch};
use smallvec::smallvec;

impl Solver {
    pub(crate) fn dim_eq(&mut self, a: D, b: D, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.dim(a), self.store.dim(b));
        match (ra.as_var(), rb.as_var()) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => self.union_dim(x, y, cause),
            (Some(v), None) => self.bind_dim(v, rb, cause),
            (None, Some(v)) => self.bind_dim(v, ra, cause),
            (None, None) if ra == rb => {}
            (None, None) => self.dim_clash(a, b, ra, rb, Code::DimMismatch, "=", cause),
        }
        Step::Done
    }

    pub(crate) fn dim_le(&mut self, a: D, b: D, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.dim(a), self.store.dim(b));
        match (ra.as_var(), rb.as_var()) {
            (Some(x), Some(y)) if x == y => Step::Done,
            (Some(x), Some(y)) => Step::Wait(smallvec![Watch::Dim(x), Watch::Dim(y)]),
            (None, Some(v)) => {
                if !self.store.table.is_unit(ra) {
                    self.bind_dim(v, ra, cause);
                }
                Step::Done
            }
            (Some(v), None) => {
                self.bound_dim(v, rb, cause);
                Step::Done
            }
            (None, None) => {
                if !(ra == rb || self.store.table.is_unit(ra)) {
                    self.dim_clash(a, b, ra, rb, Code::BroadcastConflict, "⊑", cause);
                }
                Step::Done
            }
        }
    }

    /// Reports two ground dimensions that violate `x relation y` (`=` or
    /// `⊑`); a rigid symbol on either side makes it an assumption instead of
    /// an error.
    #[allow(clippy::too_many_arguments)]
    fn dim_clash(&mut self, a: D, b: D, x: D, y: D, code: Code, relation: &str, cause: CauseId) {
        if self.poisoned_dims(a, b) {
            return;
        }
        let facts: Vec<String> = [a, b].into_iter().filter_map(|t| self.explain_dim(t)).collect();
        let table = &self.store.table;
        let (x_rigid, y_rigid) = (table.is_rigid(x), table.is_rigid(y));
        let (x, y) = (table.dim(x), table.dim(y));
        if x_rigid || y_rigid {
            let (symbol, other) = if x_rigid { (&x, &y) } else { (&y, &x) };
            let message =
                format!("dynamic axis {symbol} assumed to be {other}: `{x} {relation} {y}` holds only when {x} = {y}");
            self.report(Code::DynamicAxisSpecialized, message, cause, facts);
            return;
        }
        let message = match code {
            Code::BroadcastConflict if x.is_unit() || y.is_unit() => format!("{x} cannot broadcast to {y}"),
            Code::BroadcastConflict => format!("{x} cannot broadcast to {y}: only the claim-free unit `_` broadcasts"),
            _ => format!("dimensions differ: {x} must equal {y}"),
        };
        self.report(code, message, cause, facts);
        self.poison_dims(a, b);
    }

    fn poisoned_dims(&mut self, a: D, b: D) -> bool {
        [a, b].into_iter().any(|t| t.as_var().is_some_and(|v| self.store.dim_poisoned(v)))
    }

    fn poison_dims(&mut self, a: D, b: D) {
        for t in [a, b] {
            if let Some(v) = t.as_var() {
                self.store.poison_dim(v);
            }
        }
    }
}
