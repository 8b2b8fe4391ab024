//! Dimension equality and inequality.
//!
//! Equality unifies. For `a ⊑ b`: a lower bound at an atom solves
//! (`d ⊑ β` binds `β := d`), an upper bound is recorded (`α ⊑ d`), and two
//! variables wait for one of them to be known. A rigid symbol is never bound:
//! where a constraint would force it, the assumption is reported as
//! `dynamic-axis-specialized` and solving goes on.

use crate::cause::CauseId;
use crate::diagnostic::Code;
use crate::solver::{is_rigid, Solver, Step, Watch};
use diamond_ir::term::{Dim, DimTerm, Size, SizeExpr};

impl Solver {
    pub(crate) fn dim_eq(&mut self, a: &DimTerm, b: &DimTerm, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.dim(a), self.store.dim(b));
        match (&ra, &rb) {
            (DimTerm::Var(x), DimTerm::Var(y)) if x == y => {}
            (DimTerm::Var(x), DimTerm::Var(y)) => self.union_dim(*x, *y, cause),
            (DimTerm::Var(v), DimTerm::Dim(d)) | (DimTerm::Dim(d), DimTerm::Var(v)) => {
                self.bind_dim(*v, d.clone(), cause)
            }
            (DimTerm::Dim(x), DimTerm::Dim(y)) if x == y => {}
            // `--strict-units`: a stated unit equals a computed one (which asserts nothing).
            (DimTerm::Dim(x), DimTerm::Dim(y)) if self.unit_widening_warns && is_one(x) && is_one(y) => {}
            (DimTerm::Dim(x), DimTerm::Dim(y)) => {
                let (x, y) = (x.clone(), y.clone());
                self.dim_clash(a, b, &x, &y, Code::DimMismatch, "=", cause);
            }
        }
        Step::Done
    }

    pub(crate) fn dim_le(&mut self, a: &DimTerm, b: &DimTerm, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.dim(a), self.store.dim(b));
        match (&ra, &rb) {
            (DimTerm::Var(x), DimTerm::Var(y)) if x == y => Step::Done,
            (DimTerm::Var(x), DimTerm::Var(y)) => Step::Wait(vec![Watch::Dim(*x), Watch::Dim(*y)]),
            (DimTerm::Dim(d), DimTerm::Var(v)) => {
                if self.unit_widening_warns && is_claimed_unit(d) {
                    // `--strict-units`: a stated unit is a lower bound that
                    // does not solve; whether it is widened is checked at the end.
                    self.unit_claims.push((*v, cause));
                } else if !d.is_unit() {
                    self.bind_dim(*v, d.clone(), cause);
                }
                Step::Done
            }
            (DimTerm::Var(v), DimTerm::Dim(d)) => {
                self.bound_dim(*v, d.clone(), cause);
                Step::Done
            }
            (DimTerm::Dim(x), DimTerm::Dim(y)) if self.unit_widening_warns && is_one(x) && is_one(y) => Step::Done,
            (DimTerm::Dim(x), DimTerm::Dim(y)) if self.unit_widening_warns && is_claimed_unit(x) => {
                let message = format!("a stated unit axis is widened to {y} by broadcasting");
                self.report(Code::UnitAxisWidened, message, cause, Vec::new());
                Step::Done
            }
            (DimTerm::Dim(x), DimTerm::Dim(y)) => {
                if !x.broadcasts_to(y) {
                    let (x, y) = (x.clone(), y.clone());
                    self.dim_clash(a, b, &x, &y, Code::BroadcastConflict, "⊑", cause);
                }
                Step::Done
            }
        }
    }

    /// Reports two ground dimensions that violate `x relation y` (`=` or
    /// `⊑`); a rigid symbol on either side makes it an assumption instead of
    /// an error.
    #[allow(clippy::too_many_arguments)]
    fn dim_clash(&mut self, a: &DimTerm, b: &DimTerm, x: &Dim, y: &Dim, code: Code, relation: &str, cause: CauseId) {
        if self.poisoned_dims(a, b) {
            return;
        }
        let facts: Vec<String> = [a, b].into_iter().filter_map(|t| self.explain_dim(t)).collect();
        if let Some(bound) = implied_bound(x, y).or_else(|| implied_bound(y, x)) {
            let message = format!("`{x} {relation} {y}` holds only when {bound}: the model assumes it");
            self.report(Code::ImpliedBound, message, cause, facts);
            return;
        }
        if is_rigid(x) || is_rigid(y) {
            let (symbol, other) = if is_rigid(x) { (x, y) } else { (y, x) };
            // `s ⊑ d` also holds when the symbol is 1 (it broadcasts); `d ⊑ s` only when s = d.
            let condition = if relation == "⊑" && is_rigid(x) && !y.is_unit() {
                format!("{x} = {y} or {x} = 1")
            } else {
                format!("{x} = {y}")
            };
            let message = format!(
                "dynamic axis {symbol} assumed to be {other}: `{x} {relation} {y}` holds only when {condition}"
            );
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

    fn poisoned_dims(&mut self, a: &DimTerm, b: &DimTerm) -> bool {
        [a, b].into_iter().any(|t| matches!(t, DimTerm::Var(v) if self.store.dim_poisoned(*v)))
    }

    fn poison_dims(&mut self, a: &DimTerm, b: &DimTerm) {
        for t in [a, b] {
            if let DimTerm::Var(v) = t {
                self.store.poison_dim(*v);
            }
        }
    }
}

/// When `m` is `min(e, rest...)` and `e` is the other side, the two are equal
/// exactly when `e` is at most each other operand: the bound (`seq ≤ 512`)
/// a graph that slices a fixed-size table by a dynamic length relies on.
fn implied_bound(m: &Dim, e: &Dim) -> Option<String> {
    let (Size::Symbolic(mx), ex) = (&m.size, &e.size) else { return None };
    let operands = mx.min_operands()?;
    let e_expr = match ex {
        Size::Known(n) => SizeExpr::constant(i64::try_from(*n).ok()?),
        Size::Symbolic(x) => (**x).clone(),
    };
    let at = operands.iter().position(|o| *o == e_expr)?;
    let others: Vec<String> =
        operands.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, o)| o.to_string()).collect();
    Some(format!("{e_expr} ≤ {}", others.join(" and ")))
}

/// Whether `d` has size 1, claimed or not.
fn is_one(d: &Dim) -> bool {
    d.size == Size::Known(1)
}

/// Whether `d` is a unit that makes a claim (`1` stated in the file, not `_`).
fn is_claimed_unit(d: &Dim) -> bool {
    is_one(d) && !d.is_unit()
}

impl Solver {
    /// `--strict-units`: reports every stated unit that broadcasting widened
    /// (its lower-bounded variable ended up a size other than 1).
    pub(crate) fn check_unit_claims(&mut self) {
        for (v, cause) in std::mem::take(&mut self.unit_claims) {
            if let DimTerm::Dim(d) = self.store.dim(&DimTerm::Var(v)) {
                if !is_one(&d) {
                    let message = format!("a stated unit axis is widened to {d} by broadcasting");
                    self.report(Code::UnitAxisWidened, message, cause, Vec::new());
                }
            }
        }
    }
}
