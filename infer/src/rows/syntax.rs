//! Syntax trees of the `.rows` format read by `diamond solve`.
//!
//! A `.rows` file is a list of statements, one a line: tensor declarations
//! (`tensor x : leaf [..a]`), row constraints between tensors and literal rows
//! (`x <= y`, `y = [2, 'k]`), dimension constraints (`'h <= 7`,
//! `'h = batch`) and element-count equalities (`numel x = numel y`). The trees
//! here keep names as written; the solver lowers them to
//! [`diamond_ir::term`] terms, giving every named variable its own
//! [`DimVar`](diamond_ir::term::DimVar) or [`RowVar`](diamond_ir::term::RowVar).
//!
//! Every tree prints back in the notation it was parsed from (`Display`), so
//! that `parse(print(tree)) == tree`.

use diamond_ir::term::{Basis, Size};
use std::fmt;

/// A position in the source: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    /// The line, counting from 1.
    pub line: u32,
    /// The column, counting characters from 1.
    pub column: u32,
}

/// A dimension as written in a row or in a dimension statement.
#[derive(Clone, Debug, PartialEq)]
pub enum DimSyntax {
    /// A size with a basis: `3`, `3@rgb`, `batch`, `(h-1)/2+1`, `batch@seq`.
    Known {
        /// The size: `Size::Known` (at least 1) for a constant, otherwise
        /// `Size::Symbolic` over rigid symbols.
        size: Size,
        /// `Basis::Default` for a bare size, `Basis::Named` for `@tag`.
        basis: Basis,
    },
    /// The claim-free unit `1_∅`, written `_`.
    Unit,
    /// A dimension variable `'a`, by name (without the quote).
    Var(String),
}

/// A row as written: `[l1, l2 <> r1]`, `[l <..r> r1]`, `[..r]`, `[3, 4]`, `[]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RowSyntax {
    /// The leading flank, outermost first (the dimensions before the marker).
    pub leading: Vec<DimSyntax>,
    /// The row variable at the marker, by name (without the dots); `None` for
    /// a closed row.
    pub var: Option<String>,
    /// The trailing flank, outermost last (the dimensions after the marker;
    /// every dimension of a row written without a marker).
    pub trailing: Vec<DimSyntax>,
}

/// One side of a row statement or of a `numel` statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A declared tensor, by name: stands for that tensor's shape.
    Tensor(String),
    /// A literal row.
    Row(RowSyntax),
}

/// What a declared tensor is, which decides how the solver closes its row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// `leaf`: a data or graph input; closes upward.
    Leaf,
    /// `param`: a parameter; a hole left in its shape is an error.
    Param,
    /// No kind written: an interior tensor; closes downward.
    Interior,
}

/// What a statement says.
#[derive(Clone, Debug, PartialEq)]
pub enum StatementKind {
    /// `tensor NAME : [leaf|param] ROW`.
    Tensor {
        /// The tensor's name.
        name: String,
        /// Its kind.
        kind: TensorKind,
        /// Its shape as declared.
        row: RowSyntax,
    },
    /// `a <= b` between rows (`a >= b` is read as `b <= a`).
    RowLe(Operand, Operand),
    /// `a = b` between rows.
    RowEq(Operand, Operand),
    /// `a <= b` between dimensions (`a >= b` is read as `b <= a`).
    DimLe(DimSyntax, DimSyntax),
    /// `a = b` between dimensions.
    DimEq(DimSyntax, DimSyntax),
    /// `numel a = numel b`: equal element counts.
    NumelEq(Operand, Operand),
    /// `sum total = a, b, ...`: a size is the sum of others (Concat, Split, Pad).
    Sum {
        /// The whole.
        total: DimSyntax,
        /// The parts.
        parts: Vec<DimSyntax>,
    },
    /// `window out = in, kernel=k, stride=s, pads=p, dilation=d, ceil`: the
    /// output size of a sliding window (Conv, Pool).
    Window(WindowSyntax),
}

/// The operands of a `window` statement.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowSyntax {
    /// The output size.
    pub out: DimSyntax,
    /// The input size.
    pub input: DimSyntax,
    /// The kernel size.
    pub kernel: DimSyntax,
    /// The stride (default 1).
    pub stride: u64,
    /// Total padding of the axis (default 0).
    pub pads: u64,
    /// The dilation (default 1).
    pub dilation: u64,
    /// Ceil mode (default floor).
    pub ceil: bool,
}

/// One statement with where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// Where the statement starts (its first non-blank character).
    pub span: Span,
    /// The source line, without its comment, trimmed.
    pub text: String,
    /// What it says.
    pub kind: StatementKind,
}

/// A parsed `.rows` file: its statements in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct RowsFile {
    /// The statements, in source order.
    pub statements: Vec<Statement>,
}

impl RowSyntax {
    /// The empty closed row `[]`.
    pub fn empty() -> RowSyntax {
        RowSyntax { leading: Vec::new(), var: None, trailing: Vec::new() }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl fmt::Display for DimSyntax {
    /// `3`, `3@rgb`, `2*batch`, `_`, `'a`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimSyntax::Known { size, basis: Basis::Named(tag) } => write!(f, "{size}@{tag}"),
            // A claim-free basis only belongs to the unit; print the size alone.
            DimSyntax::Known { size, basis: Basis::Default | Basis::ClaimFree } => write!(f, "{size}"),
            DimSyntax::Unit => f.write_str("_"),
            DimSyntax::Var(name) => write!(f, "'{name}"),
        }
    }
}

impl fmt::Display for RowSyntax {
    /// Row notation, by the same printer as `RowTerm`: `[3, 4]`, `[2 <> 3]`,
    /// `[2 <..r> 3]`, `[..r]`, `[]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        diamond_ir::term::write_row(f, &self.leading, self.var.as_deref(), &self.trailing)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Tensor(name) => f.write_str(name),
            Operand::Row(row) => write!(f, "{row}"),
        }
    }
}

impl fmt::Display for TensorKind {
    /// `leaf`, `param`, or nothing for an interior tensor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TensorKind::Leaf => "leaf",
            TensorKind::Param => "param",
            TensorKind::Interior => "",
        })
    }
}

impl fmt::Display for StatementKind {
    /// The statement in `.rows` syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatementKind::Tensor { name, kind: TensorKind::Interior, row } => write!(f, "tensor {name} : {row}"),
            StatementKind::Tensor { name, kind, row } => write!(f, "tensor {name} : {kind} {row}"),
            StatementKind::RowLe(a, b) => write!(f, "{a} <= {b}"),
            StatementKind::RowEq(a, b) => write!(f, "{a} = {b}"),
            StatementKind::DimLe(a, b) => write!(f, "{a} <= {b}"),
            StatementKind::DimEq(a, b) => write!(f, "{a} = {b}"),
            StatementKind::NumelEq(a, b) => write!(f, "numel {a} = numel {b}"),
            StatementKind::Sum { total, parts } => {
                let parts: Vec<String> = parts.iter().map(ToString::to_string).collect();
                write!(f, "sum {total} = {}", parts.join(", "))
            }
            StatementKind::Window(w) => {
                write!(
                    f,
                    "window {} = {}, kernel={}, stride={}, pads={}, dilation={}",
                    w.out, w.input, w.kernel, w.stride, w.pads, w.dilation
                )?;
                if w.ceil {
                    f.write_str(", ceil")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)
    }
}
