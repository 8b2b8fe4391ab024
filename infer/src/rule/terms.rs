//! The terms a rule builds (known, fresh and unknown dimensions and rows,
//! what is resolved so far) and the constraints it states with them, each
//! with a cause naming the node and operand; broadcasting.

use super::ctx::OpCtx;
use super::dims::{expr_dim, size_dim};
use super::facts::Elem;
use crate::cause::{CauseId, Origin, Rule};
use crate::constraint::Constraint;
use diamond_ir::term::{Dim, DimTerm, RowTerm, Size};

impl OpCtx<'_, '_> {
    /// The dimension of a size a rule computes (`1` is the claim-free unit:
    /// only sizes the file states are claims, even under `--strict-units`).
    pub fn known(&self, n: u64) -> DimTerm {
        DimTerm::Dim(size_dim(n, false))
    }

    /// A fresh dimension variable for a size the constraints will determine.
    pub fn fresh_dim(&mut self) -> DimTerm {
        DimTerm::Var(self.st.solver.fresh_dim(None))
    }

    /// A fresh dimension for a size nothing determines (data-dependent):
    /// closing leaves it unknown.
    pub fn unknown_dim(&mut self) -> DimTerm {
        DimTerm::Var(self.st.solver.fresh_opaque_dim())
    }

    /// A fresh row for a shape nothing determines.
    pub fn unknown_row(&mut self) -> RowTerm {
        RowTerm { leading: Vec::new(), var: Some(self.st.solver.fresh_opaque_row()), trailing: Vec::new() }
    }

    /// A fresh row variable (a shape the constraints will determine).
    pub fn fresh_row(&mut self) -> RowTerm {
        RowTerm { leading: Vec::new(), var: Some(self.st.solver.fresh_row(None)), trailing: Vec::new() }
    }

    /// `row` as far as known now (e.g. a subgraph output's row).
    pub fn resolve_row(&mut self, row: &RowTerm) -> RowTerm {
        self.st.solver.resolve_row(row)
    }

    /// `d` as far as known now.
    pub fn resolve(&mut self, d: &DimTerm) -> DimTerm {
        self.st.solver.resolve_dim(d)
    }

    /// The known size of `d`, if it is a number.
    pub fn size_of(&mut self, d: &DimTerm) -> Option<u64> {
        match self.resolve(d) {
            DimTerm::Dim(Dim { size: Size::Known(n), .. }) => Some(n),
            _ => None,
        }
    }

    /// The dimension an integer element names (a negative or unknown one gives an unknown dimension).
    pub fn dim_of_elem(&mut self, e: &Elem) -> DimTerm {
        match e {
            Elem::Int(n) if *n >= 0 => self.known(*n as u64),
            Elem::Expr(x) => match expr_dim(x.clone()) {
                Some(d) => DimTerm::Dim(d),
                None => self.unknown_dim(),
            },
            Elem::Var(v) => self.resolve(&DimTerm::Var(*v)),
            _ => self.unknown_dim(),
        }
    }

    /// The integer element a dimension's size is.
    pub fn elem_of_dim(&mut self, d: &DimTerm) -> Elem {
        match self.resolve(d) {
            DimTerm::Dim(Dim { size: Size::Known(n), .. }) => Elem::Int(n as i64),
            DimTerm::Dim(Dim { size: Size::Symbolic(e), .. }) => Elem::from_expr(*e),
            DimTerm::Var(v) => Elem::Var(v),
        }
    }

    /// A root cause at this node: `operand` (`input 1`, `output 0`, `attribute perm`) and what the rule requires.
    pub fn cause(&mut self, operand: &str, rule: impl Into<Rule>) -> CauseId {
        let origin = Origin::Operand { site: self.at.site.clone(), operand: self.st.shared_operand(operand) };
        self.st.solver.cause(origin, rule)
    }

    /// Adds a constraint.
    pub fn constrain(&mut self, c: Constraint) {
        self.st.solver.add(c);
    }

    /// `a = b` on dimensions, because of `operand`: `why`.
    pub fn eq_dims(&mut self, a: DimTerm, b: DimTerm, operand: &str, why: impl Into<Rule>) {
        let cause = self.cause(operand, why);
        self.st.solver.add(Constraint::DimEq(a, b, cause));
    }

    /// `a = b` on dimensions where one of them is axis `axis` of `operand`:
    /// a conflict then names that axis.
    pub fn eq_dims_at(&mut self, a: DimTerm, b: DimTerm, operand: &str, axis: usize, why: impl Into<Rule>) {
        let root = self.cause(operand, why);
        let cause = self.st.solver.axis_cause(root, axis);
        self.st.solver.add(Constraint::DimEq(a, b, cause));
    }

    /// `a ⊑ b` on dimensions (`a` broadcasts to `b`) where `a` is axis
    /// `axis` of `operand`: a conflict then names that axis.
    pub fn le_dims_at(&mut self, a: DimTerm, b: DimTerm, operand: &str, axis: usize, why: impl Into<Rule>) {
        let root = self.cause(operand, why);
        let cause = self.st.solver.axis_cause(root, axis);
        self.st.solver.add(Constraint::DimLe(a, b, cause));
    }

    /// `a = b` on rows, because of `operand`: `why`.
    pub fn eq_rows(&mut self, a: RowTerm, b: RowTerm, operand: &str, why: impl Into<Rule>) {
        let cause = self.cause(operand, why);
        self.st.solver.add(Constraint::RowEq(a, b, cause));
    }

    /// Multidirectional (NumPy) broadcasting: every given input among
    /// `inputs` broadcasts to output `out`, whose shape is their join.
    pub fn broadcast(&mut self, inputs: &[usize], out: usize) {
        let Some(out_row) = self.out_row(out) else { return };
        let rows: Vec<(String, RowTerm)> =
            inputs.iter().filter_map(|&i| Some((format!("input {i}"), self.in_row(i)?))).collect();
        self.broadcast_into(out_row, rows, "broadcasts to the output");
    }

    /// NumPy broadcasting of `rows` (each with the operand it comes from) into
    /// `target`, their join: each row broadcasts to it (`RowLe`). When every
    /// row's rank is already known, the target's rank is stated at once (the
    /// largest), so later rules see a closed row before closing.
    pub fn broadcast_into(&mut self, target: RowTerm, rows: Vec<(String, RowTerm)>, why: &'static str) {
        let resolved: Option<Vec<RowTerm>> = rows
            .iter()
            .map(|(_, r)| {
                let r = self.st.solver.resolve_row(r);
                r.var.is_none().then_some(r)
            })
            .collect();
        if let Some(resolved) = resolved {
            let rank = resolved.iter().map(RowTerm::flank_len).max().unwrap_or(0);
            // NumPy's rule: an axis where every operand has 1 (or no axis) is 1.
            // The order alone would leave it free until closing, and rules that
            // read it before (a Reshape's -1, an Expand) would see an unknown.
            let all_units = |k: usize| {
                resolved.iter().all(|r| {
                    let dims: Vec<&DimTerm> = r.leading.iter().chain(&r.trailing).collect();
                    let offset = rank - dims.len();
                    k < offset || matches!(dims[k - offset], DimTerm::Dim(d) if d.is_unit())
                })
            };
            let dims = (0..rank)
                .map(|k| if all_units(k) { DimTerm::Dim(diamond_ir::term::Dim::unit()) } else { self.fresh_dim() })
                .collect();
            let cause = self.cause("output", "has the largest rank of the broadcast operands");
            self.st.solver.add(Constraint::RowEq(target.clone(), RowTerm::closed(dims), cause));
        }
        for (operand, row) in rows {
            let cause = self.cause(&operand, why);
            self.st.solver.add(Constraint::RowLe(row, target.clone(), cause));
        }
    }

    /// Unidirectional broadcasting: input `i` broadcasts to the row `to`.
    pub fn broadcasts_to(&mut self, i: usize, to: RowTerm, why: impl Into<Rule>) {
        let Some(key) = self.at.inputs.get(i).copied().flatten() else { return };
        let row = self.st.facts[&key].row.clone();
        let cause = self.cause(&format!("input {i}"), why);
        self.st.solver.add(Constraint::RowLe(row, to, cause));
    }

    /// Input `i`'s own (unresolved) row term, to relate it in constraints.
    pub fn in_row(&self, i: usize) -> Option<RowTerm> {
        let key = (*self.at.inputs.get(i)?)?;
        Some(self.st.facts.get(&key)?.row.clone())
    }
}
