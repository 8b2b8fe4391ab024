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

use crate::cause::CauseId;
use crate::constraint::Constraint;
use crate::diagnostic::Code;
use crate::solver::{Solver, TensorKind};
use crate::store::{DimState, RowState};
use diamond_ir::term::{Dim, DimTerm, DimVar, RowTerm, RowVar};
use std::collections::HashMap;

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
    /// constraints — from `β` to `α`, from `σ` (wrapped in `l`, `r`) to `ρ` —
    /// with a worklist, so a bound crosses a chain of any length. Bounds only
    /// shrink (they meet), so this ends; a cap guards against the unforeseen.
    fn propagate_bounds(&mut self) {
        let waiting: Vec<Constraint> = self.parked().cloned().collect();
        let mut dim_edges: HashMap<u32, Vec<(DimVar, CauseId)>> = HashMap::new();
        let mut row_edges: HashMap<u32, Vec<(RowVar, RowTerm, CauseId)>> = HashMap::new();
        for c in &waiting {
            match c {
                Constraint::DimLe(a, b, cause) => {
                    if let (DimTerm::Var(a), DimTerm::Var(b)) = (self.store.dim(a), self.store.dim(b)) {
                        dim_edges.entry(b.0).or_default().push((a, *cause));
                    }
                }
                Constraint::RowLe(a, b, cause) => {
                    let (a, b) = (self.store.row(a), self.store.row(b));
                    let bare = a.leading.is_empty() && a.trailing.is_empty();
                    if let (Some(rho), true, Some(sigma)) = (a.var, bare, b.var) {
                        row_edges.entry(sigma.0).or_default().push((rho, b, *cause));
                    }
                }
                _ => {}
            }
        }
        let mut work: Vec<(bool, u32)> =
            dim_edges.keys().map(|&v| (true, v)).chain(row_edges.keys().map(|&v| (false, v))).collect();
        let mut budget = 64 * (work.len() + 1);
        while let Some((is_dim, v)) = work.pop() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            if is_dim {
                for (to, cause) in dim_edges.get(&v).cloned().unwrap_or_default() {
                    if self.push_dim_bound(DimVar(v), to, cause) {
                        work.push((true, self.store.find_dim(to).0));
                    }
                }
            } else {
                for (to, sup, cause) in row_edges.get(&v).cloned().unwrap_or_default() {
                    if self.push_row_bound(RowVar(v), to, &sup, cause) {
                        work.push((false, self.store.find_row(to).0));
                    }
                }
            }
        }
    }

    /// Gives `to` the upper bound of `from`; whether `to` changed.
    fn push_dim_bound(&mut self, from: DimVar, to: DimVar, cause: CauseId) -> bool {
        let bound = match self.store.dim_state(from) {
            DimState::Free { upper: Some((bound, _)) } => bound.clone(),
            _ => return false,
        };
        match self.store.dim_state(to) {
            DimState::Free { upper: Some((old, _)) } if *old == bound => false,
            DimState::Free { .. } => {
                self.bound_dim(to, bound, cause);
                true
            }
            DimState::Solved { .. } => false,
        }
    }

    /// Gives `to` the bound `l·U·r` where `U` is the upper bound of `from`
    /// and `sup = l·⟨from⟩·r`; whether `to`'s bound changed.
    fn push_row_bound(&mut self, from: RowVar, to: RowVar, sup: &RowTerm, cause: CauseId) -> bool {
        let Some((upper, _)) = self.row_upper(from) else { return false };
        let candidate = RowTerm {
            leading: sup.leading.iter().chain(&upper.leading).cloned().collect(),
            var: None,
            trailing: upper.trailing.iter().chain(&sup.trailing).cloned().collect(),
        };
        if !matches!(self.store.row_state(to), RowState::Free { .. }) {
            return false;
        }
        let before = self.row_upper(to).map(|(b, _)| b);
        self.bound_row(to, candidate, cause);
        self.row_upper(to).map(|(b, _)| b) != before
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
