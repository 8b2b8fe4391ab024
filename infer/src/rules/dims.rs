//! Dimension equality and inequality.
//!
//! Equality unifies. For `a ⊑ b`: a lower bound at an atom solves
//! (`d ⊑ β` binds `β := d`), an upper bound is recorded (`α ⊑ d`), and two
//! variables wait for one of them to be known. A rigid symbol is never bound:
//! where a constraint would force it, the assumption is reported as
//! `dynamic-axis-specialized` and solving goes on.

use crate::cause::CauseId;
use crate::diagnostic::{Assumption, Code};
use crate::interned::D;
use crate::solver::{Solver, Step, Watch};
use diamond_ir::term::{Basis, Dim, Size, SizeExpr};
use smallvec::smallvec;

impl Solver {
    pub(crate) fn dim_eq(&mut self, a: D, b: D, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.dim(a), self.store.dim(b));
        match (ra.as_var(), rb.as_var()) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) => self.union_dim(x, y, cause),
            (Some(v), None) => self.bind_dim(v, rb, cause),
            (None, Some(v)) => self.bind_dim(v, ra, cause),
            (None, None) if ra == rb || self.named_of_same_size(ra, rb).is_some() => {}
            // `--strict-units`: a stated unit equals a computed one (which asserts nothing).
            (None, None) if self.unit_widening_warns && self.is_one(ra) && self.is_one(rb) => {}
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
                if self.unit_widening_warns && self.is_claimed_unit(ra) {
                    // `--strict-units`: a stated unit is a lower bound that
                    // does not solve; whether it is widened is checked at the end.
                    self.unit_claims.push((v, cause));
                } else if !self.store.table.is_unit(ra) {
                    self.bind_dim(v, ra, cause);
                }
                Step::Done
            }
            (Some(v), None) => {
                self.bound_dim(v, rb, cause);
                Step::Done
            }
            (None, None) if self.unit_widening_warns && self.is_one(ra) && self.is_one(rb) => Step::Done,
            (None, None) if self.unit_widening_warns && self.is_claimed_unit(ra) => {
                let message = format!("a stated unit axis is widened to {} by broadcasting", self.store.table.dim(rb));
                self.report(Code::UnitAxisWidened, message, cause, Vec::new());
                Step::Done
            }
            (None, None) => {
                if !(ra == rb || self.store.table.is_unit(ra) || self.named_of_same_size(ra, rb).is_some()) {
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
        // Messages print sizes readable (`ceil(H/4)`, not `floor((H-1)/4)+1`); the assumptions keep them exact.
        let (rx, ry) = (x.readable(), y.readable());
        if let Some((bound, assumes)) = implied_bound(&x, &y).or_else(|| implied_bound(&y, &x)) {
            let message = format!("`{rx} {relation} {ry}` holds only when {bound}: the model assumes it");
            self.report_assuming(Code::ImpliedBound, message, cause, facts, assumes);
            return;
        }
        if x_rigid || y_rigid {
            let (symbol, other) = if x_rigid { (&rx, &ry) } else { (&ry, &rx) };
            // `s ⊑ d` also holds when the symbol is 1 (it broadcasts); `d ⊑ s` only when s = d.
            let or_one = relation == "⊑" && x_rigid && !y.is_unit();
            let (ex, ey) = (size_expr(&x.size), size_expr(&y.size));
            let assumes = match (ex, ey) {
                (Some(a), Some(b)) if or_one => vec![Assumption::EqualOrOne(a, b)],
                (Some(a), Some(b)) => vec![Assumption::Equal(a, b)],
                _ => Vec::new(),
            };
            let condition = match assumes.first() {
                Some(a) => a.plain(),
                None if or_one => format!("{rx} = {ry} or {rx} = 1"),
                None => format!("{rx} = {ry}"),
            };
            let message = format!(
                "dynamic axis {symbol} assumed to be {other}: `{rx} {relation} {ry}` holds only when {condition}"
            );
            self.report_assuming(Code::DynamicAxisSpecialized, message, cause, facts, assumes);
            return;
        }
        let message = match code {
            _ if x.size == y.size && x.basis != y.basis => {
                format!("axis meanings differ: `{rx} {relation} {ry}` has one size under two bases")
            }
            Code::BroadcastConflict if x.is_unit() || y.is_unit() => format!("{rx} cannot broadcast to {ry}"),
            Code::BroadcastConflict => {
                format!("{rx} cannot broadcast to {ry}: only the claim-free unit `_` broadcasts")
            }
            _ => format!("dimensions differ: {rx} must equal {ry}"),
        };
        self.report(code, message, cause, facts);
        if let Some(d) = self.diagnostics.last_mut() {
            d.clash = Some((x.size.to_string(), y.size.to_string()));
        }
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

impl Solver {
    /// Whether `d` has size 1, claimed or not.
    fn is_one(&self, d: D) -> bool {
        self.store.table.dim(d).size == Size::Known(1)
    }

    /// With the default basis read as unnamed: of two ground dimensions of
    /// the same size, one named and the other default, the named one.
    pub(crate) fn named_of_same_size(&self, x: D, y: D) -> Option<D> {
        if !self.default_basis_unnamed {
            return None;
        }
        let (dx, dy) = (self.store.table.dim(x), self.store.table.dim(y));
        if dx.size != dy.size {
            return None;
        }
        match (&dx.basis, &dy.basis) {
            (Basis::Named(_), Basis::Default) => Some(x),
            (Basis::Default, Basis::Named(_)) => Some(y),
            _ => None,
        }
    }

    /// Whether `d` is a unit that makes a claim (`1` stated in the file, not `_`).
    fn is_claimed_unit(&self, d: D) -> bool {
        self.is_one(d) && !self.store.table.is_unit(d)
    }

    /// `--strict-units`: reports every stated unit that broadcasting widened
    /// (its lower-bounded variable ended up a size other than 1).
    pub(crate) fn check_unit_claims(&mut self) {
        for (v, cause) in std::mem::take(&mut self.unit_claims) {
            let d = self.store.dim(D::var(v));
            if d.as_var().is_none() && !self.is_one(d) {
                let message = format!("a stated unit axis is widened to {} by broadcasting", self.store.table.dim(d));
                self.report(Code::UnitAxisWidened, message, cause, Vec::new());
            }
        }
    }
}

/// When `m` is `min(e, rest...)` and `e` is the other side, the two are equal
/// exactly when `e` is at most each other operand: the bound (`seq ≤ 512`)
/// a graph that slices a fixed-size table by a dynamic length relies on,
/// as text and as the conditions to check once the symbols are bound.
fn implied_bound(m: &Dim, e: &Dim) -> Option<(String, Vec<Assumption>)> {
    let (Size::Symbolic(mx), ex) = (&m.size, &e.size) else { return None };
    let operands = mx.min_operands()?;
    let e_expr = size_expr(ex)?;
    let at = operands.iter().position(|o| *o == e_expr)?;
    let others: Vec<&SizeExpr> = operands.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, o)| o).collect();
    let text: Vec<String> = others.iter().map(|o| o.readable().to_string()).collect();
    let assumes = others.into_iter().map(|o| Assumption::AtMost(e_expr.clone(), o.clone())).collect();
    Some((format!("{} ≤ {}", e_expr.readable(), text.join(" and ")), assumes))
}

/// A size as an expression (`None` past `i64`).
fn size_expr(size: &Size) -> Option<SizeExpr> {
    match size {
        Size::Known(n) => Some(SizeExpr::constant(i64::try_from(*n).ok()?)),
        Size::Symbolic(x) => Some((**x).clone()),
    }
}
