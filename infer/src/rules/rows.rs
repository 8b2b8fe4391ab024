//! Row equality and inequality, lifted through the marker.
//!
//! Flanks align from the outer edges: leading flanks left to right, trailing
//! flanks right to left; each aligned pair becomes a dimension constraint.
//! For `sub ⊑ sup`, the part of `sup` between the aligned flanks — the
//! interior residue — becomes the upper bound of `sub`'s row variable (the
//! bipartite cut). An open `sup` whose flanks are too short grows by a
//! memoized template of fresh variables; a closed one is a rank conflict.

use crate::cause::CauseId;
use crate::constraint::Item;
use crate::diagnostic::Code;
use crate::interned::{Flat, D, R};
use crate::solver::{Solver, Step, Watch};
use diamond_ir::term::RowVar;
use smallvec::{smallvec, SmallVec};

impl Solver {
    pub(crate) fn row_eq(&mut self, a: R, b: R, cause: CauseId) -> Step {
        let (a, b) = (self.store.row_shallow(a), self.store.row_shallow(b));
        match (a.var, b.var) {
            (None, None) => {
                if a.dims.len() != b.dims.len() {
                    let message = format!(
                        "rank conflict: {} has {} axes but {} has {}",
                        self.show_flat(&a),
                        a.dims.len(),
                        self.show_flat(&b),
                        b.dims.len()
                    );
                    self.row_clash(&a, &b, message, cause);
                    return Step::Done;
                }
                self.pair(&a.dims, &b.dims, 0, cause, true);
            }
            (Some(_), None) => self.eq_open_closed(&a, &b, cause),
            (None, Some(_)) => self.eq_open_closed(&b, &a, cause),
            (Some(x), Some(y)) => self.eq_open_open(&a, &b, x, y, cause),
        }
        Step::Done
    }

    /// Emits `xs[i] = ys[i]` (or `⊑`) for each aligned pair; `first_axis` numbers them.
    /// For `sub ⊑ sup` the numbers are `sub`'s own axes where its rank is known
    /// (the operand a broadcast diagnostic names), else `sup`'s.
    fn pair(&mut self, xs: &[D], ys: &[D], first_axis: usize, cause: CauseId, equal: bool) {
        for (i, (&x, &y)) in xs.iter().zip(ys).enumerate() {
            if x == y {
                continue;
            }
            let c = self.causes.axis_of(cause, first_axis + i);
            let constraint = if equal { Item::DimEq(x, y, c) } else { Item::DimLe(x, y, c) };
            self.apply_now(constraint);
        }
    }

    fn eq_open_closed(&mut self, open: &Flat, closed: &Flat, cause: CauseId) {
        let (dims, marker) = (&closed.dims, closed.lead);
        let (l, r) = (open.leading().len(), open.trailing().len());
        if l + r > dims.len() {
            let message = format!(
                "rank conflict: {} needs at least {} axes but {} has {}",
                self.show_flat(open),
                l + r,
                self.show_flat(closed),
                dims.len()
            );
            self.row_clash(open, closed, message, cause);
            return;
        }
        let n = dims.len();
        self.pair(open.leading(), &dims[..l], 0, cause, true);
        self.pair(open.trailing(), &dims[n - r..], n - r, cause, true);
        let var = open.var.expect("open row");
        // `dims[l..n - r]` as a closed row whose marker stays where it was (clamped).
        let cut = marker.clamp(l, n - r);
        let value = self.store.alloc(&dims[l..cut], None, &dims[cut..n - r]);
        self.bind_row(var, value, cause);
    }

    fn eq_open_open(&mut self, a: &Flat, b: &Flat, x: RowVar, y: RowVar, cause: CauseId) {
        let (a_lead, a_trail, b_lead, b_trail) = (a.leading(), a.trailing(), b.leading(), b.trailing());
        let k = a_lead.len().min(b_lead.len());
        let m = a_trail.len().min(b_trail.len());
        self.pair(&a_lead[..k], &b_lead[..k], 0, cause, true);
        let (at, bt) = (&a_trail[a_trail.len() - m..], &b_trail[b_trail.len() - m..]);
        self.pair(at, bt, k, cause, true);
        let (la, lb) = (&a_lead[k..], &b_lead[k..]);
        let (ra, rb) = (&a_trail[..a_trail.len() - m], &b_trail[..b_trail.len() - m]);
        if x == y {
            if !(la.is_empty() && lb.is_empty() && ra.is_empty() && rb.is_empty()) {
                let message = format!(
                    "rank conflict: {} and {} differ by a fixed number of axes around the same row variable",
                    self.show_flat(a),
                    self.show_flat(b)
                );
                self.row_clash(a, b, message, cause);
            }
            return;
        }
        if la.is_empty() && ra.is_empty() {
            if lb.is_empty() && rb.is_empty() {
                self.union_row(x, y, cause);
            } else {
                let value = self.store.alloc(lb, Some(y), rb);
                self.bind_row(x, value, cause);
            }
        } else if lb.is_empty() && rb.is_empty() {
            let value = self.store.alloc(la, Some(x), ra);
            self.bind_row(y, value, cause);
        } else {
            let shared = self.fresh_row(None);
            let value = self.store.alloc(lb, Some(shared), rb);
            self.bind_row(x, value, cause);
            let value = self.store.alloc(la, Some(shared), ra);
            self.bind_row(y, value, cause);
        }
    }

    pub(crate) fn row_le(&mut self, sub_term: R, sup_term: R, cause: CauseId) -> Step {
        let (sub, sup) = (self.store.row_shallow(sub_term), self.store.row_shallow(sup_term));
        let (l, r) = (sub.leading().len(), sub.trailing().len());
        let Some(sigma) = sup.var else {
            self.le_closed_sup(&sub, &sup, cause);
            return Step::Done;
        };
        let (big_l, big_r) = (sup.leading().len(), sup.trailing().len());
        if sub.var == Some(sigma) {
            // l·⟨σ⟩·r ⊑ L·⟨σ⟩·R: the same unknown interior on both sides.
            if l > big_l || r > big_r {
                let message = format!(
                    "rank conflict: {} has more axes around its row variable than {}",
                    self.show_flat(&sub),
                    self.show_flat(&sup)
                );
                self.row_clash(&sub, &sup, message, cause);
                return Step::Done;
            }
        } else if l > big_l || r > big_r {
            let (dl, dr) = (l.saturating_sub(big_l), r.saturating_sub(big_r));
            self.grow(sigma, dl, dr, cause);
            return Step::Again;
        }
        if l == 0 && r == 0 {
            if let Some(rho) = sub.var.filter(|&rho| rho != sigma) {
                return Step::Wait(smallvec![Watch::Row(rho), Watch::Row(sigma)]);
            }
            return Step::Done;
        }
        self.pair(sub.leading(), &sup.leading()[..l], 0, cause, false);
        self.pair(sub.trailing(), &sup.trailing()[big_r - r..], trailing_axis(&sub, big_l + big_r - r), cause, false);
        if let Some(rho) = sub.var.filter(|&rho| rho != sigma) {
            let residue = self.store.alloc(&sup.leading()[l..], Some(sigma), &sup.trailing()[..big_r - r]);
            let c = self.causes.derived(cause, "the interior of the larger row bounds the row variable");
            self.enqueue(Item::RowLe(R::open(rho), residue, c));
        }
        Step::Done
    }

    /// `sub ⊑ sup` for a closed `sup`: the flanks must fit
    /// (`|l| ≤ |L|`, `|r| ≤ |R|`), aligned pairs broadcast, and the interior
    /// `L[|l|..] ◇ R[..|R|-|r|]` bounds `sub`'s row variable.
    fn le_closed_sup(&mut self, sub: &Flat, sup: &Flat, cause: CauseId) {
        let (l, r) = (sub.leading().len(), sub.trailing().len());
        let (big_l, big_r) = (sup.leading().len(), sup.trailing().len());
        if l > big_l || r > big_r {
            let message = if sup.leading().is_empty() && sub.leading().is_empty() {
                format!(
                    "rank conflict: {} has {r} axes but {} has only {big_r}",
                    self.show_flat(sub),
                    self.show_flat(sup)
                )
            } else {
                format!(
                    "rank conflict: the flanks of {} ({l} leading, {r} trailing axes) do not fit in those of {} ({big_l}, {big_r})",
                    self.show_flat(sub),
                    self.show_flat(sup)
                )
            };
            self.row_clash(sub, sup, message, cause);
            return;
        }
        self.pair(sub.leading(), &sup.leading()[..l], 0, cause, false);
        self.pair(sub.trailing(), &sup.trailing()[big_r - r..], trailing_axis(sub, big_l + big_r - r), cause, false);
        if let Some(rho) = sub.var {
            let residue = self.store.alloc(&sup.leading()[l..], None, &sup.trailing()[..big_r - r]);
            let c = self.causes.derived(cause, "the interior of the larger row bounds the row variable");
            self.bound_row(rho, residue, c);
        }
    }

    /// Grows the open row variable `sigma` by `dl` leading and `dr` trailing
    /// fresh axes: binds it to the template `'σ.0 … <..σ.r> …`.
    ///
    /// The template is memoized by the binding itself: `sigma` is a free
    /// representative here (the resolved marker of the larger row), and
    /// binding it solves its class for good, so the same variable never has
    /// a deficit again; every later constraint on it resolves through the
    /// template. No table of templates is needed.
    fn grow(&mut self, sigma: RowVar, dl: usize, dr: usize, cause: CauseId) {
        let fresh_dims = |solver: &mut Solver, count: usize, offset: usize| -> SmallVec<[D; 8]> {
            (0..count)
                .map(|i| {
                    let v = solver.fresh_dim(None);
                    solver.name_derived(sigma, Some(v), None, &(offset + i));
                    D::var(v)
                })
                .collect()
        };
        let leading = fresh_dims(self, dl, 0);
        let trailing = fresh_dims(self, dr, dl);
        let inner = self.fresh_row(None);
        self.name_derived(sigma, None, Some(inner), &"r");
        let template = self.store.alloc(&leading, Some(inner), &trailing);
        let c =
            self.causes.derived(cause, "the larger row's variable grows by a template to fit the smaller row's axes");
        self.bind_row(sigma, template, c);
    }

    /// Reports a row-level conflict once per root cause.
    fn row_clash(&mut self, a: &Flat, b: &Flat, message: String, cause: CauseId) {
        if self.store.row_mentions_poison(a) || self.store.row_mentions_poison(b) {
            return;
        }
        self.report(Code::RankConflict, message, cause, Vec::new());
        self.store.poison_row_term(a);
        self.store.poison_row_term(b);
    }
}

/// The number of the first trailing axis of `sub` in a `⊑` pairing: its own
/// axis when `sub` is closed, else `at_sup` (the larger row's numbering).
fn trailing_axis(sub: &Flat, at_sup: usize) -> usize {
    if sub.var.is_none() {
        sub.leading().len()
    } else {
        at_sup
    }
}
