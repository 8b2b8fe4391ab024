//! The closing policy of seed 000.
//!
//! After solving, leaves (graph inputs, `leaf` and `param` tensors) close
//! upward: each free row variable of a leaf becomes its accumulated upper
//! bound (or the empty row), each free dimension variable its upper bound; a
//! dimension with no bound is a hole, which becomes `_` for a leaf and an
//! `undetermined-parameter` error for a parameter. Bounds reach a leaf
//! through the inequalities still waiting between two variables, so they are
//! first propagated along those. Then the solver runs again, and every
//! variable still free — the interior ones — closes downward to `_` or the
//! empty row, and a last round checks what was waiting.

use crate::constraint::Constraint;
use crate::diagnostic::Code;
use crate::solver::{Solver, TensorKind};
use crate::store::{DimState, RowState};
use diamond_ir::term::{Dim, DimTerm, DimVar, RowTerm, RowVar};

impl Solver {
    /// Closes every free variable, leaves first.
    pub(crate) fn close(&mut self) {
        self.propagate_bounds();
        for i in 0..self.tensors.len() {
            if self.tensors[i].kind != TensorKind::Interior {
                self.close_leaf(i);
            }
        }
        self.solve();
        let cause = self.cause(crate::cause::Origin::Solver("closing"), "free interior variables close downward");
        for v in 0..self.store.row_count() {
            let v = RowVar(v as u32);
            if matches!(self.store.row_state(v), RowState::Free { .. }) {
                self.bind_row(v, RowTerm::closed(Vec::new()), cause);
            }
        }
        for v in 0..self.store.dim_count() {
            let v = DimVar(v as u32);
            if matches!(self.store.dim_state(v), DimState::Free { .. }) {
                self.bind_dim(v, Dim::unit(), cause);
            }
        }
        self.solve();
    }

    /// Pushes upper bounds down along waiting `α ⊑ β` and `ρ ⊑ l·⟨σ⟩·r`
    /// constraints, until nothing changes.
    fn propagate_bounds(&mut self) {
        let waiting: Vec<Constraint> = self.parked().cloned().collect();
        for _round in 0..waiting.len().min(64) + 1 {
            let mut changed = false;
            for c in &waiting {
                changed |= match c {
                    Constraint::DimLe(a, b, cause) => self.push_dim_bound(a, b, *cause),
                    Constraint::RowLe(a, b, cause) => self.push_row_bound(a, b, *cause),
                    _ => false,
                };
            }
            if !changed {
                break;
            }
        }
    }

    fn push_dim_bound(&mut self, a: &DimTerm, b: &DimTerm, cause: crate::cause::CauseId) -> bool {
        let (DimTerm::Var(a), DimTerm::Var(b)) = (self.store.dim(a), self.store.dim(b)) else { return false };
        let upper_b = match self.store.dim_state(b) {
            DimState::Free { upper: Some((bound, _)) } => bound.clone(),
            _ => return false,
        };
        match self.store.dim_state(a) {
            DimState::Free { upper: Some((bound, _)) } if *bound == upper_b => false,
            DimState::Free { .. } => {
                self.bound_dim(a, upper_b, cause);
                true
            }
            DimState::Solved { .. } => false,
        }
    }

    fn push_row_bound(&mut self, a: &RowTerm, b: &RowTerm, cause: crate::cause::CauseId) -> bool {
        let (a, b) = (self.store.row(a), self.store.row(b));
        let (Some(rho), true) = (a.var, a.leading.is_empty() && a.trailing.is_empty()) else { return false };
        let Some(sigma) = b.var else { return false };
        let Some((upper, _)) = self.row_upper(sigma) else { return false };
        let bound = RowTerm {
            leading: b.leading.iter().chain(&upper.leading).cloned().collect(),
            var: None,
            trailing: upper.trailing.iter().chain(&b.trailing).cloned().collect(),
        };
        if self.row_upper(rho).is_some_and(|(old, _)| old == bound) {
            return false;
        }
        self.bound_row(rho, bound, cause);
        true
    }

    fn close_leaf(&mut self, index: usize) {
        let (name, kind, row, declared) = {
            let t = &self.tensors[index];
            (t.name.clone(), t.kind, t.row.clone(), t.declared)
        };
        let what = if kind == TensorKind::Param { "parameter" } else { "leaf" };
        let rule = format!("closing: {what} '{name}' closes upward to what its uses require");
        let cause = match declared {
            Some(decl) => self.causes.derived(decl, rule),
            None => self.cause(crate::cause::Origin::Solver("closing"), rule),
        };
        let resolved = self.store.row(&row);
        if let Some(rho) = resolved.var {
            match self.row_upper(rho) {
                Some((bound, _)) => self.bind_row(rho, bound, cause),
                None if kind == TensorKind::Param => {
                    let message =
                        format!("nothing determines the rank of parameter '{name}' ({})", self.show_row(&resolved));
                    self.report(Code::UndeterminedParameter, message, cause, Vec::new());
                    self.bind_row(rho, RowTerm::closed(Vec::new()), cause);
                }
                None => self.bind_row(rho, RowTerm::closed(Vec::new()), cause),
            }
        }
        let resolved = self.store.row(&row);
        let dims: Vec<DimTerm> = resolved.leading.iter().chain(&resolved.trailing).cloned().collect();
        for (axis, d) in dims.iter().enumerate() {
            let DimTerm::Var(v) = self.store.dim(d) else { continue };
            let upper = match self.store.dim_state(v) {
                DimState::Free { upper } => upper.clone(),
                DimState::Solved { .. } => continue,
            };
            match upper {
                Some((bound, _)) => self.bind_dim(v, bound, cause),
                None => {
                    if kind == TensorKind::Param {
                        let shown = self.show_row(&resolved);
                        let message = format!(
                            "nothing determines dimension {axis} ({}) of parameter '{name}' {shown}",
                            self.dim_name(v)
                        );
                        self.report(Code::UndeterminedParameter, message, cause, Vec::new());
                    }
                    self.bind_dim(v, Dim::unit(), cause);
                }
            }
        }
    }
}
