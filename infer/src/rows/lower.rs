//! Lowering a parsed `.rows` file into solver constraints, and solving it.
//!
//! Names map to variables once per file: every `'h` is the same dimension
//! variable, every `..r` the same row variable, and a tensor name stands for
//! the row its declaration gave. Each statement's cause is its line.

use super::syntax::{DimSyntax, Operand, RowSyntax, RowsFile, StatementKind, TensorKind as SyntaxKind};
use crate::cause::{CauseId, Origin};
use crate::constraint::{AffineSize, Constraint, SizeSum};
use crate::solver::{Solution, Solver, TensorKind};
use diamond_ir::term::{Dim, DimTerm, DimVar, RowTerm, RowVar};
use std::collections::HashMap;

struct Lowering {
    solver: Solver,
    dims: HashMap<String, DimVar>,
    rows: HashMap<String, RowVar>,
    tensors: HashMap<String, RowTerm>,
}

/// Solves and closes the system a `.rows` file states.
pub fn solve_rows(file: &RowsFile) -> Solution {
    let mut lowering =
        Lowering { solver: Solver::new(), dims: HashMap::new(), rows: HashMap::new(), tensors: HashMap::new() };
    for statement in &file.statements {
        let origin = Origin::Line { line: statement.span.line, text: statement.text.clone() };
        let cause = lowering.solver.cause(origin, crate::cause::STATED);
        lowering.statement(&statement.kind, cause);
    }
    lowering.solver.finish()
}

impl Lowering {
    fn statement(&mut self, kind: &StatementKind, cause: CauseId) {
        let constraint = match kind {
            StatementKind::Tensor { name, kind, row } => {
                let row = self.row(row);
                let kind = match kind {
                    SyntaxKind::Leaf => TensorKind::Leaf,
                    SyntaxKind::Param => TensorKind::Param,
                    SyntaxKind::Interior => TensorKind::Interior,
                };
                self.solver.add_tensor(name, kind, row.clone(), Some(cause));
                self.tensors.insert(name.clone(), row);
                return;
            }
            StatementKind::RowLe(a, b) => Constraint::RowLe(self.operand(a), self.operand(b), cause),
            StatementKind::RowEq(a, b) => Constraint::RowEq(self.operand(a), self.operand(b), cause),
            StatementKind::DimLe(a, b) => Constraint::DimLe(self.dim(a), self.dim(b), cause),
            StatementKind::DimEq(a, b) => Constraint::DimEq(self.dim(a), self.dim(b), cause),
            StatementKind::NumelEq(a, b) => Constraint::Numel(self.operand(a), self.operand(b), cause),
            StatementKind::Sum { total, parts } => {
                let parts = parts.iter().map(|p| self.dim(p)).collect();
                Constraint::Sum(Box::new(SizeSum { total: self.dim(total), parts, cause }))
            }
            StatementKind::Window(w) => Constraint::Affine(Box::new(AffineSize {
                out: self.dim(&w.out),
                input: self.dim(&w.input),
                kernel: self.dim(&w.kernel),
                pads: w.pads as i64,
                stride: w.stride,
                dilation: w.dilation,
                ceil: w.ceil,
                cause,
            })),
        };
        self.solver.add(constraint);
    }

    fn operand(&mut self, operand: &Operand) -> RowTerm {
        match operand {
            Operand::Row(row) => self.row(row),
            // The parser only lets declared tensors through; an unknown one is the empty row.
            Operand::Tensor(name) => self.tensors.get(name).cloned().unwrap_or_else(|| RowTerm::closed(Vec::new())),
        }
    }

    fn row(&mut self, row: &RowSyntax) -> RowTerm {
        let leading = row.leading.iter().map(|d| self.dim(d)).collect();
        let trailing = row.trailing.iter().map(|d| self.dim(d)).collect();
        let var = row.var.as_ref().map(|name| self.row_var(name));
        RowTerm { leading, var, trailing }
    }

    fn row_var(&mut self, name: &str) -> RowVar {
        if let Some(&v) = self.rows.get(name) {
            return v;
        }
        let v = self.solver.fresh_row(Some(name));
        self.rows.insert(name.to_string(), v);
        v
    }

    fn dim(&mut self, dim: &DimSyntax) -> DimTerm {
        match dim {
            DimSyntax::Known { size, basis } => DimTerm::Dim(Dim { size: size.clone(), basis: basis.clone() }),
            DimSyntax::Unit => DimTerm::Dim(Dim::unit()),
            DimSyntax::Var(name) => {
                if let Some(&v) = self.dims.get(name) {
                    return DimTerm::Var(v);
                }
                let v = self.solver.fresh_dim(Some(name));
                self.dims.insert(name.clone(), v);
                DimTerm::Var(v)
            }
        }
    }
}
