//! Row equality and inequality, lifted through the marker.
//!
//! Flanks align from the outer edges: leading flanks left to right, trailing
//! flanks right to left; each aligned pair becomes a dimension constraint.
//! For `sub ⊑ sup`, the part of `sup` between the aligned flanks — the
//! interior residue — becomes the upper bound of `sub`'s row variable (the
//! bipartite cut). An open `sup` whose flanks are too short grows by a
//! memoized template of fresh variables; a closed one is a rank conflict.

use crate::cause::CauseId;
use crate::constraint::Constraint;
use crate::diagnostic::Code;
use crate::solver::{Solver, Step, Watch};
use diamond_ir::term::{DimTerm, RowTerm, RowVar};

/// A closed row's axes in order, and where its marker sits.
fn flatten(r: &RowTerm) -> (Vec<DimTerm>, usize) {
    let mut all = r.leading.clone();
    all.extend(r.trailing.iter().cloned());
    (all, r.leading.len())
}

/// `dims[from..to]` as a closed row whose marker stays where `marker` was (clamped).
fn closed_slice(dims: &[DimTerm], from: usize, to: usize, marker: usize) -> RowTerm {
    let cut = marker.clamp(from, to);
    RowTerm { leading: dims[from..cut].to_vec(), var: None, trailing: dims[cut..to].to_vec() }
}

impl Solver {
    pub(crate) fn row_eq(&mut self, a: &RowTerm, b: &RowTerm, cause: CauseId) -> Step {
        let (a, b) = (self.store.row_shallow(a), self.store.row_shallow(b));
        match (a.var, b.var) {
            (None, None) => {
                let ((da, _), (db, _)) = (flatten(&a), flatten(&b));
                if da.len() != db.len() {
                    let message = format!(
                        "rank conflict: {} has {} axes but {} has {}",
                        self.show_row(&a),
                        da.len(),
                        self.show_row(&b),
                        db.len()
                    );
                    self.row_clash(&a, &b, message, cause);
                    return Step::Done;
                }
                self.pair(&da, &db, 0, cause, true);
            }
            (Some(_), None) => self.eq_open_closed(&a, &b, cause),
            (None, Some(_)) => self.eq_open_closed(&b, &a, cause),
            (Some(x), Some(y)) => self.eq_open_open(&a, &b, x, y, cause),
        }
        Step::Done
    }

    /// Emits `xs[i] = ys[i]` (or `⊑`) for each aligned pair; `first_axis` numbers them.
    fn pair(&mut self, xs: &[DimTerm], ys: &[DimTerm], first_axis: usize, cause: CauseId, equal: bool) {
        for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
            if x == y {
                continue;
            }
            let c = self.causes.derived(cause, crate::cause::Rule::Axis(first_axis + i));
            let constraint = if equal {
                Constraint::DimEq(x.clone(), y.clone(), c)
            } else {
                Constraint::DimLe(x.clone(), y.clone(), c)
            };
            self.apply_now(constraint);
        }
    }

    fn eq_open_closed(&mut self, open: &RowTerm, closed: &RowTerm, cause: CauseId) {
        let (dims, marker) = flatten(closed);
        let (l, r) = (open.leading.len(), open.trailing.len());
        if l + r > dims.len() {
            let message = format!(
                "rank conflict: {} needs at least {} axes but {} has {}",
                self.show_row(open),
                l + r,
                self.show_row(closed),
                dims.len()
            );
            self.row_clash(open, closed, message, cause);
            return;
        }
        let n = dims.len();
        self.pair(&open.leading, &dims[..l], 0, cause, true);
        self.pair(&open.trailing, &dims[n - r..], n - r, cause, true);
        let var = open.var.expect("open row");
        self.bind_row(var, closed_slice(&dims, l, n - r, marker), cause);
    }

    fn eq_open_open(&mut self, a: &RowTerm, b: &RowTerm, x: RowVar, y: RowVar, cause: CauseId) {
        let k = a.leading.len().min(b.leading.len());
        let m = a.trailing.len().min(b.trailing.len());
        self.pair(&a.leading[..k], &b.leading[..k], 0, cause, true);
        let (at, bt) = (&a.trailing[a.trailing.len() - m..], &b.trailing[b.trailing.len() - m..]);
        self.pair(at, bt, k, cause, true);
        let (la, lb) = (&a.leading[k..], &b.leading[k..]);
        let (ra, rb) = (&a.trailing[..a.trailing.len() - m], &b.trailing[..b.trailing.len() - m]);
        if x == y {
            if !(la.is_empty() && lb.is_empty() && ra.is_empty() && rb.is_empty()) {
                let message = format!(
                    "rank conflict: {} and {} differ by a fixed number of axes around the same row variable",
                    self.show_row(a),
                    self.show_row(b)
                );
                self.row_clash(a, b, message, cause);
            }
            return;
        }
        let open = |lead: &[DimTerm], var, trail: &[DimTerm]| RowTerm {
            leading: lead.to_vec(),
            var: Some(var),
            trailing: trail.to_vec(),
        };
        if la.is_empty() && ra.is_empty() {
            if lb.is_empty() && rb.is_empty() {
                self.union_row(x, y, cause);
            } else {
                self.bind_row(x, open(lb, y, rb), cause);
            }
        } else if lb.is_empty() && rb.is_empty() {
            self.bind_row(y, open(la, x, ra), cause);
        } else {
            let shared = self.fresh_row(None);
            self.bind_row(x, open(lb, shared, rb), cause);
            self.bind_row(y, open(la, shared, ra), cause);
        }
    }

    pub(crate) fn row_le(&mut self, sub_term: &RowTerm, sup_term: &RowTerm, cause: CauseId) -> Step {
        let (sub, sup) = (self.store.row_shallow(sub_term), self.store.row_shallow(sup_term));
        let (l, r) = (sub.leading.len(), sub.trailing.len());
        let Some(sigma) = sup.var else {
            self.le_closed_sup(&sub, &sup, cause);
            return Step::Done;
        };
        if sub.var == Some(sigma) {
            // l·⟨σ⟩·r ⊑ L·⟨σ⟩·R: the same unknown interior on both sides.
            if l > sup.leading.len() || r > sup.trailing.len() {
                let message = format!(
                    "rank conflict: {} has more axes around its row variable than {}",
                    self.show_row(&sub),
                    self.show_row(&sup)
                );
                self.row_clash(&sub, &sup, message, cause);
                return Step::Done;
            }
        } else if l > sup.leading.len() || r > sup.trailing.len() {
            let (dl, dr) = (l.saturating_sub(sup.leading.len()), r.saturating_sub(sup.trailing.len()));
            self.grow(sigma, dl, dr, cause);
            return Step::Again;
        }
        if l == 0 && r == 0 {
            if let Some(rho) = sub.var.filter(|&rho| rho != sigma) {
                return Step::Wait(vec![Watch::Row(rho), Watch::Row(sigma)]);
            }
            return Step::Done;
        }
        let (big_l, big_r) = (sup.leading.len(), sup.trailing.len());
        self.pair(&sub.leading, &sup.leading[..l], 0, cause, false);
        self.pair(&sub.trailing, &sup.trailing[big_r - r..], big_l + big_r - r, cause, false);
        if let Some(rho) = sub.var.filter(|&rho| rho != sigma) {
            let residue = RowTerm {
                leading: sup.leading[l..].to_vec(),
                var: Some(sigma),
                trailing: sup.trailing[..big_r - r].to_vec(),
            };
            let c = self.causes.derived(cause, "the interior of the larger row bounds the row variable");
            self.enqueue(Constraint::RowLe(RowTerm::open(rho, Vec::new()), residue, c));
        }
        Step::Done
    }

    /// `sub ⊑ sup` for a closed `sup`: the flanks must fit
    /// (`|l| ≤ |L|`, `|r| ≤ |R|`), aligned pairs broadcast, and the interior
    /// `L[|l|..] ◇ R[..|R|-|r|]` bounds `sub`'s row variable.
    fn le_closed_sup(&mut self, sub: &RowTerm, sup: &RowTerm, cause: CauseId) {
        let (l, r) = (sub.leading.len(), sub.trailing.len());
        let (big_l, big_r) = (sup.leading.len(), sup.trailing.len());
        if l > big_l || r > big_r {
            let message = if sup.leading.is_empty() && sub.leading.is_empty() {
                format!(
                    "rank conflict: {} has {r} axes but {} has only {big_r}",
                    self.show_row(sub),
                    self.show_row(sup)
                )
            } else {
                format!(
                    "rank conflict: the flanks of {} ({l} leading, {r} trailing axes) do not fit in those of {} ({big_l}, {big_r})",
                    self.show_row(sub),
                    self.show_row(sup)
                )
            };
            self.row_clash(sub, sup, message, cause);
            return;
        }
        self.pair(&sub.leading, &sup.leading[..l], 0, cause, false);
        self.pair(&sub.trailing, &sup.trailing[big_r - r..], big_l + big_r - r, cause, false);
        if let Some(rho) = sub.var {
            let residue =
                RowTerm { leading: sup.leading[l..].to_vec(), var: None, trailing: sup.trailing[..big_r - r].to_vec() };
            let c = self.causes.derived(cause, "the interior of the larger row bounds the row variable");
            self.bound_row(rho, residue, c);
        }
    }

    /// Grows the open row variable `sigma` by `dl` leading and `dr` trailing
    /// fresh axes, reusing the template made for the same deficit before.
    fn grow(&mut self, sigma: RowVar, dl: usize, dr: usize, cause: CauseId) {
        let key = (self.store.find_row(sigma).0, dl, dr);
        let template = match self.templates.get(&key) {
            Some(t) => t.clone(),
            None => {
                let fresh_dims = |solver: &mut Solver, count: usize, offset: usize| -> Vec<DimTerm> {
                    (0..count)
                        .map(|i| {
                            let v = solver.fresh_dim(None);
                            solver.name_derived(sigma, Some(v), None, &(offset + i).to_string());
                            DimTerm::Var(v)
                        })
                        .collect()
                };
                let leading = fresh_dims(self, dl, 0);
                let trailing = fresh_dims(self, dr, dl);
                let inner = self.fresh_row(None);
                self.name_derived(sigma, None, Some(inner), "r");
                let t = RowTerm { leading, var: Some(inner), trailing };
                self.templates.insert(key, t.clone());
                t
            }
        };
        let c =
            self.causes.derived(cause, "the larger row's variable grows by a template to fit the smaller row's axes");
        self.bind_row(sigma, template, c);
    }

    /// Reports a row-level conflict once per root cause.
    fn row_clash(&mut self, a: &RowTerm, b: &RowTerm, message: String, cause: CauseId) {
        if self.store.row_mentions_poison(a) || self.store.row_mentions_poison(b) {
            return;
        }
        self.report(Code::RankConflict, message, cause, Vec::new());
        self.store.poison_row_term(a);
        self.store.poison_row_term(b);
    }
}
