//! Arithmetic constraints: total elements (Reshape, Flatten), affine sizes
//! (Conv, Pool), and sums (Concat, Split, Pad).
//!
//! Each waits until enough of its terms are known to compute the rest: all
//! inputs for a forward computation, or everything but one unknown for a
//! backward one. Sizes are [`SizeExpr`]s, so rigid symbols flow through
//! (`numel [batch, 4, 'a] = numel [batch, 8]` gives `'a := 2`).

use crate::cause::CauseId;
use crate::constraint::{Affine, Item};
use crate::diagnostic::Code;
use crate::interned::{DimTable, Flat, D, R};
use crate::solver::{Solver, Step, Watch};
use diamond_ir::term::{Basis, Condition, Dim, DimVar, Size, SizeExpr};
use smallvec::{smallvec, SmallVec};

/// A dimension's size as an expression.
fn size_expr(d: &Dim) -> SizeExpr {
    match &d.size {
        Size::Known(n) => SizeExpr::constant(*n as i64),
        Size::Symbolic(e) => (**e).clone(),
    }
}

/// A size expression as a dimension with the default basis; `None` unless
/// it is a positive constant or has a symbol. A computed `1` is the
/// claim-free unit when the solver is set so (ONNX checking: no one claimed it).
fn expr_dim(e: SizeExpr, unit_claim_free: bool) -> Option<Dim> {
    let size = match e.as_constant() {
        Some(1) if unit_claim_free => return Some(Dim::unit()),
        Some(n) if n >= 1 => Size::Known(n as u64),
        Some(_) => return None,
        None => Size::Symbolic(Box::new(e)),
    };
    Some(Dim { size, basis: Basis::Default })
}

/// The product of the known dims of a closed row, and its unknown variables.
fn split_row(table: &DimTable, r: &Flat) -> Option<(SizeExpr, Vec<DimVar>)> {
    let mut product = SizeExpr::constant(1);
    let mut unknown = Vec::new();
    for &d in &r.dims {
        match d.as_var() {
            None => product = product.mul(&size_expr(&table.dim(d)))?,
            Some(v) => unknown.push(v),
        }
    }
    Some((product, unknown))
}

impl Solver {
    pub(crate) fn numel(&mut self, a: R, b: R, cause: CauseId) -> Step {
        let (ra, rb) = (self.store.row(a), self.store.row(b));
        let open: SmallVec<[Watch; 2]> = [ra.var, rb.var].into_iter().flatten().map(Watch::Row).collect();
        if !open.is_empty() {
            return Step::Wait(open);
        }
        let table = &self.store.table;
        let (Some((pa, ua)), Some((pb, ub))) = (split_row(table, &ra), split_row(table, &rb)) else {
            self.report(Code::ElementCountMismatch, "element count overflows".to_string(), cause, Vec::new());
            return Step::Done;
        };
        match (ua.as_slice(), ub.as_slice()) {
            ([], []) => {
                if pa != pb {
                    self.count_clash(&ra, &rb, &pa, &pb, cause);
                }
            }
            ([v], []) => self.solve_factor(*v, &pb, &pa, cause),
            ([], [v]) => self.solve_factor(*v, &pa, &pb, cause),
            _ => return Step::Wait(ua.into_iter().chain(ub).map(Watch::Dim).collect()),
        }
        Step::Done
    }

    /// Binds `v` so that `v * known = total`.
    fn solve_factor(&mut self, v: DimVar, total: &SizeExpr, known: &SizeExpr, cause: CauseId) {
        match total.div_exact(known).and_then(|e| expr_dim(e, self.computed_units_claim_free)) {
            Some(dim) => {
                let rule = format!("{} = {total} / {known}", self.dim_name(v));
                let c = self.causes.derived(cause, rule);
                let dim = self.store.table.intern(&dim);
                self.bind_dim(v, dim, c);
            }
            None => {
                let message =
                    format!("element count mismatch: {total} elements cannot be split into {known} times a whole size");
                self.report(Code::ElementCountMismatch, message, cause, Vec::new());
            }
        }
    }

    fn count_clash(&mut self, a: &Flat, b: &Flat, pa: &SizeExpr, pb: &SizeExpr, cause: CauseId) {
        if self.store.row_mentions_poison(a) || self.store.row_mentions_poison(b) {
            return;
        }
        let (sa, sb) = (self.show_flat(a), self.show_flat(b));
        if pa.as_constant().is_none() || pb.as_constant().is_none() {
            let assumes = vec![crate::diagnostic::Assumption::Equal(pa.clone(), pb.clone())];
            let (ra, rb) = (pa.readable(), pb.readable());
            let condition = match Condition::of_equal(pa, pb) {
                Some(c) => format!("{ra} = {rb}, that is when {c}"),
                None => format!("{ra} = {rb}"),
            };
            let message = format!("dynamic axis assumed specialized: {sa} and {sb} hold the same number of elements only when {condition}");
            self.report_assuming(Code::DynamicAxisSpecialized, message, cause, Vec::new(), assumes);
            return;
        }
        let message = format!("element count mismatch: {sa} holds {pa} elements but {sb} holds {pb}");
        self.report(Code::ElementCountMismatch, message, cause, Vec::new());
    }

    pub(crate) fn affine(&mut self, a: &Affine) -> Step {
        let Affine { out, input, kernel, pads, stride, dilation, ceil, cause } = *a;
        let (o, i, k) = (self.store.dim(out), self.store.dim(input), self.store.dim(kernel));
        let dil = SizeExpr::constant(dilation as i64);
        let (i_var, k_var) = (i.as_var(), k.as_var());
        let table = &self.store.table;
        let known = |d: D| d.as_var().is_none().then(|| table.dim(d));
        let (o_dim, i_dim, k_dim) = (known(o), known(i), known(k));
        match (&i_dim, &k_dim) {
            (Some(i), Some(k)) => {
                // (in + pads − dil·(k − 1) − 1) / stride + 1
                let span = dil.mul(&size_expr(k).add(&SizeExpr::constant(-1)).unwrap_or_default());
                let numerator = span.and_then(|s| {
                    size_expr(i).add(&SizeExpr::constant(pads - 1))?.add(&s.mul(&SizeExpr::constant(-1))?)
                });
                let quotient = numerator.and_then(|n| if ceil { n.ceil_div(stride) } else { n.floor_div(stride) });
                match quotient
                    .and_then(|q| q.add(&SizeExpr::constant(1)))
                    .and_then(|e| expr_dim(e, self.computed_units_claim_free))
                {
                    Some(dim) => {
                        let c = self
                            .causes
                            .derived(cause, format!("the window gives an output size of {}", dim.readable()));
                        let dim = self.store.table.intern(&dim);
                        self.enqueue(Item::DimEq(out, dim, c));
                    }
                    None => {
                        let message = format!("the window (kernel {k}, dilation {dilation}, pads {pads}) does not fit in an input of size {i}");
                        self.report(Code::DimMismatch, message, cause, Vec::new());
                    }
                }
                Step::Done
            }
            (None, Some(k)) if stride == 1 => {
                let v = i_var.expect("a variable");
                let Some(o) = &o_dim else { return Step::Wait(smallvec![Watch::Dim(v), self.watch_of(o)]) };
                // Stride 1: in = out − pads + dil·(k − 1), the same in ceil mode.
                let value = size_expr(k)
                    .add(&SizeExpr::constant(-1))
                    .and_then(|km1| dil.mul(&km1))
                    .and_then(|s| size_expr(o).add(&SizeExpr::constant(-pads))?.add(&s));
                match value.and_then(|e| expr_dim(e, self.computed_units_claim_free)) {
                    Some(dim) => {
                        let dim = self.store.table.intern(&dim);
                        self.bind_dim(v, dim, cause)
                    }
                    None => self.report(
                        Code::DimMismatch,
                        format!("no input size gives output size {o}"),
                        cause,
                        Vec::new(),
                    ),
                }
                Step::Done
            }
            _ => Step::Wait([i_var, k_var].into_iter().flatten().map(Watch::Dim).collect()),
        }
    }

    pub(crate) fn sum(&mut self, total: D, parts: &[D], cause: CauseId) -> Step {
        let resolved: Vec<D> = parts.iter().map(|&p| self.store.dim(p)).collect();
        let unknown: Vec<usize> = (0..resolved.len()).filter(|&i| resolved[i].as_var().is_some()).collect();
        let table = &self.store.table;
        let known_sum = resolved.iter().try_fold(SizeExpr::constant(0), |acc, &p| match p.as_var() {
            None => acc.add(&size_expr(&table.dim(p))),
            Some(_) => Some(acc),
        });
        let Some(known_sum) = known_sum else {
            self.report(Code::DimMismatch, "sum of sizes overflows".to_string(), cause, Vec::new());
            return Step::Done;
        };
        let t = self.store.dim(total);
        let whole = t.as_var().is_none().then(|| self.store.table.dim(t));
        match (unknown.as_slice(), &whole) {
            ([], _) => match expr_dim(known_sum, self.computed_units_claim_free) {
                Some(dim) => {
                    let c = self.causes.derived(cause, format!("the parts add up to {}", dim.readable()));
                    let dim = self.store.table.intern(&dim);
                    self.enqueue(Item::DimEq(total, dim, c));
                }
                None => self.report(
                    Code::DimMismatch,
                    "the parts add up to no positive size".to_string(),
                    cause,
                    Vec::new(),
                ),
            },
            ([one], Some(whole)) => {
                let rest = known_sum.mul(&SizeExpr::constant(-1)).and_then(|neg| size_expr(whole).add(&neg));
                let Some(v) = resolved[*one].as_var() else { return Step::Done };
                match rest.and_then(|e| expr_dim(e, self.computed_units_claim_free)) {
                    Some(dim) => {
                        let c = self.causes.derived(cause, format!("the whole {whole} minus the other parts"));
                        let dim = self.store.table.intern(&dim);
                        self.bind_dim(v, dim, c);
                    }
                    None => {
                        let message =
                            format!("the other parts already add up to {known_sum}, leaving nothing of {whole}");
                        self.report(Code::DimMismatch, message, cause, Vec::new());
                    }
                }
            }
            _ => {
                let mut watches: SmallVec<[Watch; 2]> =
                    unknown.iter().filter_map(|&i| self.var_watch(resolved[i])).collect();
                watches.extend(self.var_watch(t));
                return Step::Wait(watches);
            }
        }
        Step::Done
    }

    fn var_watch(&self, t: D) -> Option<Watch> {
        t.as_var().map(Watch::Dim)
    }

    fn watch_of(&self, t: D) -> Watch {
        self.var_watch(t).expect("a variable")
    }
}
