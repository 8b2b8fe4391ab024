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

impl Solver {
    /// Closes every free variable, leaves first.
    pub(crate) fn close(&mut self) {
        self.propagate_bounds();
        let opaque = self.opaque_roots();
        for i in 0..self.tensors.len() {
            if self.tensors[i].kind != TensorKind::Interior {
                self.close_leaf(i, &opaque);
            }
        }
        self.solve();
        let cause = self.cause(crate::cause::Origin::Solver("closing"), "free interior variables close downward");
        let (opaque_dims, opaque_rows) = self.opaque_roots();
        for v in 0..self.store.row_count() {
            let v = RowVar(v as u32);
            if matches!(self.store.row_state(v), RowState::Free { .. })
                && !opaque_rows.contains(&self.store.find_row(v).0)
            {
                self.bind_row(v, RowTerm::closed(Vec::new()), cause);
            }
        }
        for v in 0..self.store.dim_count() {
            let v = DimVar(v as u32);
            if matches!(self.store.dim_state(v), DimState::Free { .. })
                && !opaque_dims.contains(&self.store.find_dim(v).0)
            {
                self.bind_dim(v, Dim::unit(), cause);
            }
        }
        self.solve();
    }

    /// The representatives of the opaque variables still free, and of every
    /// variable a waiting constraint ties to one: a variable bounded by an
    /// unknown cannot close downward without inventing a value.
    fn opaque_roots(&mut self) -> (std::collections::HashSet<u32>, std::collections::HashSet<u32>) {
        let mut dims: std::collections::HashSet<u32> =
            self.opaque_dims.clone().into_iter().map(|v| self.store.find_dim(v).0).collect();
        let mut rows: std::collections::HashSet<u32> = std::collections::HashSet::new();
        // An opaque row a rule matched against a pattern (`[d0, d1, ..r]`) is
        // solved, but the pattern's variables still stand for the unknown.
        for v in self.opaque_rows.clone() {
            let value = self.store.row(&RowTerm { leading: Vec::new(), var: Some(v), trailing: Vec::new() });
            if let Some(r) = value.var {
                rows.insert(r.0);
            }
            for d in value.leading.iter().chain(&value.trailing) {
                if let DimTerm::Var(d) = d {
                    dims.insert(d.0);
                }
            }
        }
        if dims.is_empty() && rows.is_empty() {
            return (dims, rows);
        }
        let waiting: Vec<Constraint> = self.parked().cloned().collect();
        let groups: Vec<(Vec<u32>, Vec<u32>)> = waiting.iter().map(|c| self.free_vars(c)).collect();
        loop {
            let mut grew = false;
            for (d, r) in &groups {
                if d.iter().any(|v| dims.contains(v)) || r.iter().any(|v| rows.contains(v)) {
                    for v in d {
                        grew |= dims.insert(*v);
                    }
                    for v in r {
                        grew |= rows.insert(*v);
                    }
                }
            }
            if !grew {
                break;
            }
        }
        (dims, rows)
    }

    /// The free variables (representatives) a constraint mentions.
    fn free_vars(&mut self, c: &Constraint) -> (Vec<u32>, Vec<u32>) {
        let mut rows_seen = Vec::new();
        let mut dim_terms: Vec<DimTerm> = Vec::new();
        let mut row = |s: &mut Solver, r: &RowTerm, dim_terms: &mut Vec<DimTerm>| {
            let r = s.store.row(r);
            if let Some(v) = r.var {
                rows_seen.push(v.0);
            }
            dim_terms.extend(r.leading.into_iter().chain(r.trailing));
        };
        match c {
            Constraint::DimEq(a, b, _) | Constraint::DimLe(a, b, _) => dim_terms.extend([a.clone(), b.clone()]),
            Constraint::RowEq(a, b, _) | Constraint::RowLe(a, b, _) | Constraint::Numel(a, b, _) => {
                row(self, a, &mut dim_terms);
                row(self, b, &mut dim_terms);
            }
            Constraint::Affine(a) => dim_terms.extend([a.out.clone(), a.input.clone(), a.kernel.clone()]),
            Constraint::Sum(s) => {
                dim_terms.push(s.total.clone());
                dim_terms.extend(s.parts.iter().cloned());
            }
        }
        let dims = dim_terms
            .iter()
            .filter_map(|d| match self.store.dim(d) {
                DimTerm::Var(v) => Some(v.0),
                DimTerm::Dim(_) => None,
            })
            .collect();
        (dims, rows_seen)
    }

    /// Pushes upper bounds down along waiting `α ⊑ β` and `ρ ⊑ l·⟨σ⟩·r`
    /// constraints — from `β` to `α`, from `σ` (wrapped in `l`, `r`) to `ρ` —
    /// with a worklist, so a bound crosses a chain of any length. Bounds only
    /// shrink (they meet), so this ends; a cap guards against the unforeseen.
    fn propagate_bounds(&mut self) {
        // Only a bound can cross an edge: with none, there is nothing to do.
        if !self.store.any_free_bounded() {
            return;
        }
        // Edges by source variable, as linked lists in two arenas (heads
        // indexed by variable id): no per-variable vectors, no hashing, and
        // the waiting constraints are read in place rather than copied out.
        let mut dim_lists = vec![(NONE, NONE); self.store.dim_count()];
        let mut row_lists = vec![(NONE, NONE); self.store.row_count()];
        let mut dim_edges: Vec<(DimVar, CauseId, u32)> = Vec::new();
        let mut row_edges: Vec<(RowVar, RowTerm, CauseId, u32)> = Vec::new();
        let mut work: Vec<(bool, u32)> = Vec::new();
        for slot in 0..self.pending.len() {
            match &self.pending[slot] {
                Some(Constraint::DimLe(a, b, cause)) => {
                    let (a, b, cause) = (a.clone(), b.clone(), *cause);
                    if let (DimTerm::Var(a), DimTerm::Var(b)) = (self.store.dim(&a), self.store.dim(&b)) {
                        push_edge(&mut dim_lists, &mut dim_edges, &mut work, true, b.0, |next| (a, cause, next));
                    }
                }
                Some(Constraint::RowLe(a, b, cause)) => {
                    let cause = *cause;
                    let (a, b) = (a.clone(), b.clone());
                    let (a, b) = (self.store.row(&a), self.store.row(&b));
                    let bare = a.leading.is_empty() && a.trailing.is_empty();
                    if let (Some(rho), true, Some(sigma)) = (a.var, bare, b.var) {
                        push_edge(&mut row_lists, &mut row_edges, &mut work, false, sigma.0, |next| {
                            (rho, b, cause, next)
                        });
                    }
                }
                _ => {}
            }
        }
        let mut budget = 64 * (work.len() + 1);
        while let Some((is_dim, v)) = work.pop() {
            if budget == 0 {
                break;
            }
            budget -= 1;
            if is_dim {
                let mut at = dim_lists[v as usize].0;
                while at != NONE {
                    let (to, cause, next) = dim_edges[at as usize];
                    if self.push_dim_bound(DimVar(v), to, cause) {
                        work.push((true, self.store.find_dim(to).0));
                    }
                    at = next;
                }
            } else {
                let mut at = row_lists[v as usize].0;
                while at != NONE {
                    let (to, ref sup, cause, next) = row_edges[at as usize];
                    if self.push_row_bound(RowVar(v), to, sup, cause) {
                        work.push((false, self.store.find_row(to).0));
                    }
                    at = next;
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

    fn close_leaf(&mut self, index: usize, opaque: &(std::collections::HashSet<u32>, std::collections::HashSet<u32>)) {
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
                None if opaque.1.contains(&self.store.find_row(rho).0) => {}
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
                    } else if opaque.0.contains(&self.store.find_dim(v).0) {
                        continue;
                    }
                    self.bind_dim(v, Dim::unit(), cause);
                }
            }
        }
    }
}

/// No edge.
const NONE: u32 = u32::MAX;

/// Appends the edge `make(NONE)` to the list of `from` (lists are `(first,
/// last)` pairs indexed by source, threaded through `edges` by their last
/// field, set by [`EdgeNext`]); a source seen for the first time joins the
/// worklist (`is_dim` says which kind it is).
fn push_edge<E: EdgeNext>(
    lists: &mut [(u32, u32)],
    edges: &mut Vec<E>,
    work: &mut Vec<(bool, u32)>,
    is_dim: bool,
    from: u32,
    make: impl FnOnce(u32) -> E,
) {
    let id = edges.len() as u32;
    edges.push(make(NONE));
    let list = &mut lists[from as usize];
    if list.0 == NONE {
        work.push((is_dim, from));
        *list = (id, id);
    } else {
        edges[list.1 as usize].set_next(id);
        list.1 = id;
    }
}

/// An edge of a linked list in an arena.
trait EdgeNext {
    /// Links the edge after this one.
    fn set_next(&mut self, next: u32);
}

impl EdgeNext for (DimVar, CauseId, u32) {
    fn set_next(&mut self, next: u32) {
        self.2 = next;
    }
}

impl EdgeNext for (RowVar, RowTerm, CauseId, u32) {
    fn set_next(&mut self, next: u32) {
        self.3 = next;
    }
}
