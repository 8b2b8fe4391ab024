//! The closing policy of seed 000.
//!
//! After solving, leaves (graph inputs, `leaf` and `param` tensors) close
//! upward: each free row variable of a leaf becomes its accumulated upper
//! bound (or the empty row), each free dimension variable its upper bound; a
//! leaf row with no bound of its own that waits below an open row whose
//! variable is free and unbounded closes to that row's known axes (the
//! variable will close to the empty row: the ones-vector idiom); a
//! dimension with no bound is a hole, which becomes `_` for a leaf and an
//! `undetermined-parameter` error for a parameter. Bounds reach a leaf
//! through the inequalities still waiting between two variables, so they are
//! first propagated along those. Then the solver runs again, and every
//! variable still free — the interior ones — closes downward to `_` or the
//! empty row, and a last round checks what was waiting.

use crate::cause::CauseId;
use crate::constraint::Item;
use crate::diagnostic::Code;
use crate::interned::{D, R};
use crate::solver::{Solver, TensorKind};
use crate::store::{DimState, RowState};
use diamond_ir::term::{DimVar, RowVar};
use smallvec::SmallVec;

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
        let empty = self.store.alloc(&[], None, &[]);
        for v in 0..self.store.row_count() {
            let v = RowVar(v as u32);
            if matches!(self.store.row_state(v), RowState::Free { .. })
                && !opaque_rows.contains(&self.store.find_row(v).0)
            {
                self.bind_row(v, empty, cause);
            }
        }
        for v in 0..self.store.dim_count() {
            let v = DimVar(v as u32);
            if matches!(self.store.dim_state(v), DimState::Free { .. })
                && !opaque_dims.contains(&self.store.find_dim(v).0)
            {
                self.bind_dim(v, D::UNIT, cause);
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
            let value = self.store.row(R::open(v));
            if let Some(r) = value.var {
                rows.insert(r.0);
            }
            for d in &value.dims {
                if let Some(d) = d.as_var() {
                    dims.insert(d.0);
                }
            }
        }
        if dims.is_empty() && rows.is_empty() {
            return (dims, rows);
        }
        let waiting: Vec<Item> = self.parked().cloned().collect();
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
    fn free_vars(&mut self, c: &Item) -> (Vec<u32>, Vec<u32>) {
        let mut rows_seen = Vec::new();
        let mut dim_terms: Vec<D> = Vec::new();
        let mut row = |s: &mut Solver, r: R, dim_terms: &mut Vec<D>| {
            let r = s.store.row(r);
            if let Some(v) = r.var {
                rows_seen.push(v.0);
            }
            dim_terms.extend(r.dims);
        };
        match c {
            Item::DimEq(a, b, _) | Item::DimLe(a, b, _) => dim_terms.extend([*a, *b]),
            Item::RowEq(a, b, _) | Item::RowLe(a, b, _) | Item::Numel(a, b, _) => {
                row(self, *a, &mut dim_terms);
                row(self, *b, &mut dim_terms);
            }
            Item::Affine(a) => dim_terms.extend([a.out, a.input, a.kernel]),
            Item::Sum(s) => {
                dim_terms.push(s.total);
                dim_terms.extend(s.parts.iter().copied());
            }
        }
        let dims = dim_terms.iter().filter_map(|&d| self.store.dim(d).as_var().map(|v| v.0)).collect();
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
        // A row edge's `l·⟨σ⟩·r` keeps its flanks in `sups`, a local arena.
        let mut row_edges: Vec<(RowVar, Sup, CauseId, u32)> = Vec::new();
        let mut sups: Vec<D> = Vec::new();
        let mut work: Vec<(bool, u32)> = Vec::new();
        for slot in 0..self.pending.len() {
            match self.pending[slot] {
                Some(Item::DimLe(a, b, cause)) => {
                    if let (Some(a), Some(b)) = (self.store.dim(a).as_var(), self.store.dim(b).as_var()) {
                        push_edge(&mut dim_lists, &mut dim_edges, &mut work, true, b.0, |next| (a, cause, next));
                    }
                }
                Some(Item::RowLe(a, b, cause)) => {
                    let (a, b) = (self.store.row(a), self.store.row(b));
                    let bare = a.dims.is_empty();
                    if let (Some(rho), true, Some(sigma)) = (a.var, bare, b.var) {
                        let sup = Sup { start: sups.len() as u32, lead: b.lead as u32, len: b.dims.len() as u32 };
                        sups.extend_from_slice(&b.dims);
                        push_edge(&mut row_lists, &mut row_edges, &mut work, false, sigma.0, |next| {
                            (rho, sup, cause, next)
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
                    let (to, sup, cause, next) = row_edges[at as usize];
                    let dims = &sups[sup.start as usize..(sup.start + sup.len) as usize];
                    let (l, r) = dims.split_at(sup.lead as usize);
                    if self.push_row_bound(RowVar(v), to, (l, r), cause) {
                        work.push((false, self.store.find_row(to).0));
                    }
                    at = next;
                }
            }
        }
    }

    /// Gives `to` the upper bound of `from`; whether `to` changed.
    fn push_dim_bound(&mut self, from: DimVar, to: DimVar, cause: CauseId) -> bool {
        let bound = match *self.store.dim_state(from) {
            DimState::Free { upper: Some((bound, _)) } => bound,
            _ => return false,
        };
        match *self.store.dim_state(to) {
            DimState::Free { upper: Some((old, _)) } if old == bound => false,
            DimState::Free { .. } => {
                self.bound_dim(to, bound, cause);
                true
            }
            DimState::Solved { .. } => false,
        }
    }

    /// Gives `to` the bound `l·U·r` where `U` is the upper bound of `from`
    /// and `sup = l·⟨from⟩·r`; whether `to`'s bound changed.
    fn push_row_bound(&mut self, from: RowVar, to: RowVar, sup: (&[D], &[D]), cause: CauseId) -> bool {
        let Some((upper, _)) = self.row_upper(from) else { return false };
        if !matches!(self.store.row_state(to), RowState::Free { .. }) {
            return false;
        }
        let leading: SmallVec<[D; 8]> = sup.0.iter().chain(self.store.leading(upper)).copied().collect();
        let trailing: SmallVec<[D; 8]> = self.store.trailing(upper).iter().chain(sup.1).copied().collect();
        let candidate = self.store.alloc(&leading, None, &trailing);
        let before = self.row_upper(to).map(|(b, _)| b);
        self.bound_row(to, candidate, cause);
        let after = self.row_upper(to).map(|(b, _)| b);
        match (before, after) {
            (Some(b), Some(a)) => !self.store.same_row(a, b),
            (b, a) => b.is_some() != a.is_some(),
        }
    }

    fn close_leaf(&mut self, index: usize, opaque: &(std::collections::HashSet<u32>, std::collections::HashSet<u32>)) {
        let (name, kind, row, declared) = {
            let t = &self.tensors[index];
            (t.name.clone(), t.kind, t.row, t.declared)
        };
        let what = if kind == TensorKind::Param { "parameter" } else { "leaf" };
        let rule = format!("closing: {what} '{name}' closes upward to what its uses require");
        let cause = match declared {
            Some(decl) => self.causes.derived(decl, rule),
            None => self.cause(crate::cause::Origin::Solver("closing"), rule),
        };
        let resolved = self.store.row(row);
        if let Some(rho) = resolved.var {
            match self.row_upper(rho) {
                Some((bound, _)) => self.bind_row(rho, bound, cause),
                None if kind == TensorKind::Param => {
                    let message =
                        format!("nothing determines the rank of parameter '{name}' ({})", self.show_flat(&resolved));
                    self.report(Code::UndeterminedParameter, message, cause, Vec::new());
                    let empty = self.store.alloc(&[], None, &[]);
                    self.bind_row(rho, empty, cause);
                }
                None if opaque.1.contains(&self.store.find_row(rho).0) => {}
                None => {
                    let value = match self.known_axes_above(rho, cause) {
                        Some(known) => known,
                        None => self.store.alloc(&[], None, &[]),
                    };
                    self.bind_row(rho, value, cause)
                }
            }
        }
        let resolved = self.store.row(row);
        for (axis, &d) in resolved.dims.iter().enumerate() {
            let Some(v) = self.store.dim(d).as_var() else { continue };
            let upper = match *self.store.dim_state(v) {
                DimState::Free { upper } => upper,
                DimState::Solved { .. } => continue,
            };
            match upper {
                Some((bound, _)) => self.bind_dim(v, bound, cause),
                None => {
                    if kind == TensorKind::Param {
                        let shown = self.show_flat(&resolved);
                        let message = format!(
                            "nothing determines dimension {axis} ({}) of parameter '{name}' {shown}",
                            self.dim_name(v)
                        );
                        self.report(Code::UndeterminedParameter, message, cause, Vec::new());
                    } else if opaque.0.contains(&self.store.find_dim(v).0) {
                        continue;
                    }
                    self.bind_dim(v, D::UNIT, cause);
                }
            }
        }
    }
}

impl Solver {
    /// For a leaf row variable `rho` with no upper bound of its own: the
    /// known axes of the open rows it waits below (`ρ ⊑ l·⟨σ⟩·r` with `σ`
    /// free and unbounded), met when there are several. Such a `σ` has
    /// nothing above it, so it closes downward to the empty row and the
    /// larger row becomes `l·r`: closing `ρ` upward to exactly that is the
    /// seed's ones-vector idiom (`ones ⊑ prod`, `x ⊑ prod`, `x : [2, 7]`
    /// closes `ones` to `[2, 7]`). `None` when no such row is waiting.
    fn known_axes_above(&mut self, rho: RowVar, cause: CauseId) -> Option<R> {
        let root = self.store.find_row(rho);
        // Closing an earlier leaf may have woken a constraint without running
        // it again: it still waits, and counts, or the result would depend on
        // the order the constraints came in.
        let waiting: Vec<(R, R)> = self
            .unsettled()
            .filter_map(|c| match *c {
                Item::RowLe(a, b, _) => Some((a, b)),
                _ => None,
            })
            .collect();
        let mut found = false;
        for (a, b) in waiting {
            let sub = self.store.row(a);
            if !sub.dims.is_empty() || sub.var.map(|v| self.store.find_row(v)) != Some(root) {
                continue;
            }
            let sup = self.store.row(b);
            let Some(sigma) = sup.var else { continue };
            let sigma = self.store.find_row(sigma);
            if sigma == root || !matches!(self.store.row_state(sigma), RowState::Free { upper: None }) {
                continue;
            }
            let known = self.store.alloc(sup.leading(), None, sup.trailing());
            self.bound_row(root, known, cause);
            found = true;
        }
        if !found {
            return None;
        }
        self.row_upper(root).map(|(bound, _)| bound)
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

/// The flanks of a row edge's larger row: `len` axes from `start` in the
/// edges' arena, the first `lead` of them leading.
#[derive(Clone, Copy)]
struct Sup {
    start: u32,
    lead: u32,
    len: u32,
}

impl EdgeNext for (RowVar, Sup, CauseId, u32) {
    fn set_next(&mut self, next: u32) {
        self.3 = next;
    }
}
