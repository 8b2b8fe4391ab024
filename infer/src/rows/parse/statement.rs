//! Statements of `.rows`: tensor declarations, `numel`, sums and windows,
//! and comparisons, whose two sides are classified once both are read (rows,
//! tensors or dimensions); rows and dimensions with their bases.

use super::lex::Tok;
use super::{PResult, Parser};
use crate::rows::syntax::{DimSyntax, Operand, RowSyntax, StatementKind, TensorKind, WindowSyntax};
use diamond_ir::term::{Basis, Size, SizeExpr};

/// One side of a comparison, before the statement's kind is known.
pub(super) enum SideKind {
    Row(RowSyntax),
    /// A bare identifier: a declared tensor, or else a rigid symbol.
    Name(String),
    Dim(DimSyntax),
}

pub(super) struct Side {
    pub(super) kind: SideKind,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// Both sides of a comparison, once classified.
pub(super) enum Sides {
    Rows(Operand, Operand),
    Dims(DimSyntax, DimSyntax),
}

/// Whether a token after an identifier makes it part of a size expression
/// (or of a dimension with a basis) rather than a bare name.
pub(super) fn continues_size(tok: Option<&Tok>) -> bool {
    matches!(tok, Some(Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::At | Tok::LParen))
}

/// Whether a token after a leading `tensor` or `numel` makes that word an
/// operand of a comparison rather than a keyword.
pub(super) fn continues_comparison(tok: Option<&Tok>) -> bool {
    continues_size(tok) || matches!(tok, Some(Tok::Le | Tok::Ge | Tok::Eq | Tok::Lt | Tok::Gt))
}

pub(super) fn symbol_dim(name: &str) -> DimSyntax {
    DimSyntax::Known { size: Size::Symbolic(Box::new(SizeExpr::symbol(name))), basis: Basis::Default }
}

impl Parser<'_> {
    pub(super) fn statement(&mut self) -> PResult<StatementKind> {
        let kind = match (self.peek(), self.peek_nth(1)) {
            (Some(Tok::Ident(word)), next) if word == "tensor" && !continues_comparison(next) => {
                self.tensor_declaration()?
            }
            (Some(Tok::Ident(word)), next @ Some(_)) if word == "numel" && !continues_comparison(next) => {
                self.numel()?
            }
            (Some(Tok::Ident(word)), next @ Some(_)) if word == "sum" && !continues_comparison(next) => {
                self.sum_statement()?
            }
            (Some(Tok::Ident(word)), next @ Some(_)) if word == "window" && !continues_comparison(next) => {
                self.window()?
            }
            _ => self.comparison()?,
        };
        if self.peek().is_some() {
            return Err(self.expected("end of statement"));
        }
        Ok(kind)
    }

    pub(super) fn tensor_declaration(&mut self) -> PResult<StatementKind> {
        self.bump();
        let at = self.here();
        let name = match self.peek() {
            Some(Tok::Ident(name)) => name.clone(),
            _ => return Err(self.expected("a tensor name after 'tensor'")),
        };
        self.bump();
        if let Some(line) = self.tensors.get(&name) {
            return Err(self.error(at, format!("tensor '{name}' is already declared on line {line}")));
        }
        if self.peek() != Some(&Tok::Colon) {
            return Err(self.expected(&format!("':' after the tensor name '{name}'")));
        }
        self.bump();
        let kind = match self.peek() {
            Some(Tok::Ident(word)) if word == "leaf" => TensorKind::Leaf,
            Some(Tok::Ident(word)) if word == "param" => TensorKind::Param,
            Some(Tok::LBracket) => TensorKind::Interior,
            _ => return Err(self.expected("'leaf', 'param' or a row '[...]' after ':'")),
        };
        if kind != TensorKind::Interior {
            self.bump();
            if self.peek() != Some(&Tok::LBracket) {
                return Err(self.expected(&format!("a row '[...]' after '{kind}'")));
            }
        }
        let row = self.row()?;
        Ok(StatementKind::Tensor { name, kind, row })
    }

    pub(super) fn numel(&mut self) -> PResult<StatementKind> {
        self.bump();
        let a = self.numel_operand()?;
        match self.peek() {
            Some(Tok::Eq) => self.bump(),
            Some(Tok::Le | Tok::Ge) => {
                return Err(self.error_here(format!("a numel statement compares with '=' only, found {}", self.found())))
            }
            _ => return Err(self.expected("'=' after the first numel operand")),
        }
        match self.peek() {
            Some(Tok::Ident(word)) if word == "numel" => self.bump(),
            _ => return Err(self.expected("'numel' after '='")),
        }
        let b = self.numel_operand()?;
        Ok(StatementKind::NumelEq(a, b))
    }

    /// `sum total = a, b, ...`
    pub(super) fn sum_statement(&mut self) -> PResult<StatementKind> {
        self.bump();
        let total = self.dim("a dimension after 'sum'")?;
        self.expect_eq("the total of a sum")?;
        let mut parts = vec![self.dim("a dimension after '='")?];
        while self.peek() == Some(&Tok::Comma) {
            self.bump();
            parts.push(self.dim("a dimension after ','")?);
        }
        Ok(StatementKind::Sum { total, parts })
    }

    /// `window out = in, kernel=k, stride=s, pads=p, dilation=d, ceil`
    pub(super) fn window(&mut self) -> PResult<StatementKind> {
        self.bump();
        let out = self.dim("the output dimension after 'window'")?;
        self.expect_eq("the output of a window")?;
        let input = self.dim("the input dimension after '='")?;
        let (mut kernel, mut stride, mut pads, mut dilation, mut ceil) = (None, 1, 0, 1, false);
        while self.peek() == Some(&Tok::Comma) {
            self.bump();
            let (key, at) = match self.peek() {
                Some(Tok::Ident(key)) => (key.clone(), self.here()),
                _ => return Err(self.expected("kernel=, stride=, pads=, dilation= or ceil after ','")),
            };
            self.bump();
            if key == "ceil" {
                ceil = true;
                continue;
            }
            self.expect_eq(&format!("'{key}'"))?;
            match key.as_str() {
                "kernel" => kernel = Some(self.dim("a dimension after 'kernel='")?),
                "stride" => stride = self.positive("stride")?,
                "dilation" => dilation = self.positive("dilation")?,
                "pads" => pads = self.count("pads")?,
                _ => {
                    return Err(self.error(
                        at,
                        format!("unknown window parameter '{key}'; expected kernel, stride, pads, dilation or ceil"),
                    ))
                }
            }
        }
        let Some(kernel) = kernel else { return Err(self.error_here("a window needs kernel=K")) };
        Ok(StatementKind::Window(WindowSyntax { out, input, kernel, stride, pads, dilation, ceil }))
    }

    pub(super) fn expect_eq(&mut self, after: &str) -> PResult<()> {
        if self.peek() != Some(&Tok::Eq) {
            return Err(self.expected(&format!("'=' after {after}")));
        }
        self.bump();
        Ok(())
    }

    /// A non-negative integer literal.
    pub(super) fn count(&mut self, what: &str) -> PResult<u64> {
        match self.peek() {
            Some(Tok::Int(n)) if i64::try_from(*n).is_ok() => {
                let n = *n;
                self.bump();
                Ok(n)
            }
            _ => Err(self.expected(&format!("a whole number for {what}"))),
        }
    }

    /// A positive integer literal.
    pub(super) fn positive(&mut self, what: &str) -> PResult<u64> {
        let at = self.here();
        match self.count(what)? {
            0 => Err(self.error(at, format!("{what} must be at least 1"))),
            n => Ok(n),
        }
    }

    pub(super) fn numel_operand(&mut self) -> PResult<Operand> {
        match self.peek() {
            Some(Tok::LBracket) => Ok(Operand::Row(self.row()?)),
            Some(Tok::Ident(name)) => {
                let name = name.clone();
                let at = self.here();
                self.bump();
                if self.tensors.contains_key(&name) {
                    Ok(Operand::Tensor(name))
                } else {
                    Err(self.unknown_tensor(&name, at))
                }
            }
            _ => Err(self.expected("a tensor name or a row after 'numel'")),
        }
    }

    pub(super) fn comparison(&mut self) -> PResult<StatementKind> {
        let a = self.side("a statement")?;
        let (op, flip) = match self.peek() {
            Some(Tok::Le) => ("<=", false),
            Some(Tok::Ge) => (">=", true),
            Some(Tok::Eq) => ("=", false),
            _ => {
                let a_text = self.text(a.start, a.end);
                return Err(self.expected(&format!("'<=', '>=' or '=' after '{a_text}'")));
            }
        };
        self.bump();
        let b = self.side(&format!("a row, a tensor name or a dimension after '{op}'"))?;
        let sides = self.classify(a, b, op)?;
        Ok(match (sides, op) {
            (Sides::Rows(a, b), "=") => StatementKind::RowEq(a, b),
            (Sides::Dims(a, b), "=") => StatementKind::DimEq(a, b),
            (Sides::Rows(a, b), _) if flip => StatementKind::RowLe(b, a),
            (Sides::Rows(a, b), _) => StatementKind::RowLe(a, b),
            (Sides::Dims(a, b), _) if flip => StatementKind::DimLe(b, a),
            (Sides::Dims(a, b), _) => StatementKind::DimLe(a, b),
        })
    }

    pub(super) fn side(&mut self, expected: &str) -> PResult<Side> {
        let start = self.here();
        let kind = match (self.peek(), self.peek_nth(1)) {
            (Some(Tok::LBracket), _) => SideKind::Row(self.row()?),
            (Some(Tok::Ident(name)), next) if !continues_size(next) => {
                let name = name.clone();
                self.bump();
                SideKind::Name(name)
            }
            _ => SideKind::Dim(self.dim(expected)?),
        };
        Ok(Side { kind, start, end: self.prev_end() })
    }

    /// Decides whether a comparison is between rows or between dimensions.
    /// Mismatches are reported at the right-hand side `b`.
    pub(super) fn classify(&self, a: Side, b: Side, op: &str) -> PResult<Sides> {
        let declared = |name: &str| self.tensors.contains_key(name);
        let b_text = self.text(b.start, b.end);
        match (a.kind, b.kind) {
            (SideKind::Row(x), SideKind::Row(y)) => Ok(Sides::Rows(Operand::Row(x), Operand::Row(y))),
            (SideKind::Dim(x), SideKind::Dim(y)) => Ok(Sides::Dims(x, y)),
            (SideKind::Name(x), SideKind::Name(y)) => match (declared(&x), declared(&y)) {
                (true, true) => Ok(Sides::Rows(Operand::Tensor(x), Operand::Tensor(y))),
                (false, false) => Ok(Sides::Dims(symbol_dim(&x), symbol_dim(&y))),
                (true, false) => Err(self.unknown_tensor(&y, b.start)),
                (false, true) => Err(self.unknown_tensor(&x, a.start)),
            },
            (SideKind::Row(x), SideKind::Name(y)) if declared(&y) => {
                Ok(Sides::Rows(Operand::Row(x), Operand::Tensor(y)))
            }
            (SideKind::Row(_), SideKind::Name(y)) => Err(self.unknown_tensor(&y, b.start)),
            (SideKind::Name(x), SideKind::Row(y)) if declared(&x) => {
                Ok(Sides::Rows(Operand::Tensor(x), Operand::Row(y)))
            }
            (SideKind::Name(x), SideKind::Row(_)) => Err(self.unknown_tensor(&x, a.start)),
            (SideKind::Name(x), SideKind::Dim(y)) if !declared(&x) => Ok(Sides::Dims(symbol_dim(&x), y)),
            (SideKind::Name(x), SideKind::Dim(_)) => Err(self.error(
                b.start,
                format!("expected a row or a tensor after '{op}' (the left side is tensor '{x}'), found dimension '{b_text}'"),
            )),
            (SideKind::Dim(x), SideKind::Name(y)) if !declared(&y) => Ok(Sides::Dims(x, symbol_dim(&y))),
            (SideKind::Dim(_), SideKind::Name(y)) => Err(self.error(
                b.start,
                format!("expected a dimension after '{op}' (the left side is a dimension), found tensor '{y}'"),
            )),
            (SideKind::Row(_), SideKind::Dim(_)) => Err(self.error(
                b.start,
                format!("expected a row or a tensor after '{op}' (the left side is a row), found dimension '{b_text}'"),
            )),
            (SideKind::Dim(_), SideKind::Row(_)) => Err(self.error(
                b.start,
                format!("expected a dimension after '{op}' (the left side is a dimension), found row '{b_text}'"),
            )),
        }
    }

    /// The marker at the current token: `Some(None)` for `<>`, `Some(Some(r))`
    /// for `<..r>`.
    pub(super) fn marker(&self) -> Option<Option<String>> {
        match self.peek() {
            Some(Tok::Marker) => Some(None),
            Some(Tok::OpenMarker(name)) => Some(Some(name.clone())),
            _ => None,
        }
    }

    /// A row, from its `[` (the current token) to its `]`.
    pub(super) fn row(&mut self) -> PResult<RowSyntax> {
        if self.peek() != Some(&Tok::LBracket) {
            return Err(self.expected("a row '[...]'"));
        }
        self.bump();
        match self.peek() {
            Some(Tok::RBracket) => {
                self.bump();
                return Ok(RowSyntax::empty());
            }
            Some(Tok::RowVar(name)) => {
                let name = name.clone();
                self.bump();
                if self.peek() != Some(&Tok::RBracket) {
                    return Err(self.expected(&format!(
                        "']' after '..{name}' (an open row with dimensions is written '[<..{name}> 3]')"
                    )));
                }
                self.bump();
                return Ok(RowSyntax { leading: Vec::new(), var: Some(name), trailing: Vec::new() });
            }
            _ => {}
        }
        let mut leading = Vec::new();
        let mut trailing = Vec::new();
        let mut marker: Option<Option<String>> = None;
        let mut expected = "a dimension, a marker or ']' after '['";
        loop {
            // At the start of the row, after a dimension, or after a comma
            // (where a marker was already refused).
            if let Some(m) = self.marker() {
                if marker.is_some() {
                    return Err(self.error_here("a row has at most one marker"));
                }
                marker = Some(m);
                self.bump();
                if self.peek() == Some(&Tok::RBracket) {
                    self.bump();
                    break;
                }
                expected = "a dimension or ']' after the marker";
            }
            let dim = self.dim(expected)?;
            if marker.is_some() {
                trailing.push(dim);
            } else {
                leading.push(dim);
            }
            match self.peek() {
                Some(Tok::Comma) => {
                    self.bump();
                    if self.marker().is_some() {
                        return Err(self.error_here(format!(
                            "expected a dimension after ',', found {} (the marker stands between dimensions, \
                             without commas: '[2 <> 3]')",
                            self.found()
                        )));
                    }
                    expected = "a dimension after ','";
                }
                Some(Tok::RBracket) => {
                    self.bump();
                    break;
                }
                Some(Tok::Marker | Tok::OpenMarker(_)) if marker.is_none() => {}
                Some(Tok::Marker | Tok::OpenMarker(_)) => return Err(self.error_here("a row has at most one marker")),
                _ => return Err(self.expected("']' or ',' after dimension")),
            }
        }
        match marker {
            None => Ok(RowSyntax { leading: Vec::new(), var: None, trailing: leading }),
            Some(var) => Ok(RowSyntax { leading, var, trailing }),
        }
    }

    /// A dimension: `'a`, `_`, or a size expression with an optional basis.
    pub(super) fn dim(&mut self, expected: &str) -> PResult<DimSyntax> {
        let start = self.here();
        match self.peek() {
            Some(Tok::DimVar(name)) => {
                let name = name.clone();
                self.bump();
                self.nothing_attached(start, "a dimension variable")?;
                return Ok(DimSyntax::Var(name));
            }
            Some(Tok::Unit) => {
                self.bump();
                self.nothing_attached(start, "the unit '_'")?;
                return Ok(DimSyntax::Unit);
            }
            Some(Tok::Int(_) | Tok::Ident(_) | Tok::LParen | Tok::Minus) => {}
            _ => return Err(self.expected(expected)),
        }
        let expr = self.sum()?;
        let (value, _) = self.eval(&expr)?;
        let size = match value.as_constant() {
            Some(n) if n >= 1 => Size::Known(n.unsigned_abs()),
            Some(n) => {
                let text = self.text(expr.start, expr.end);
                let found = if text == n.to_string() { text } else { format!("'{text}' = {n}") };
                return Err(self.error(expr.start, format!("a dimension's size must be at least 1, found {found}")));
            }
            None => Size::Symbolic(Box::new(value)),
        };
        let basis = if self.peek() == Some(&Tok::At) {
            self.bump();
            match self.peek() {
                Some(Tok::Ident(tag)) => {
                    let tag = tag.clone();
                    self.bump();
                    Basis::Named(tag.into())
                }
                _ => return Err(self.expected("a basis name after '@'")),
            }
        } else {
            Basis::Default
        };
        Ok(DimSyntax::Known { size, basis })
    }

    /// Refuses a basis or an arithmetic operator after a variable or the unit.
    pub(super) fn nothing_attached(&self, start: usize, what: &str) -> PResult<()> {
        match self.peek() {
            Some(Tok::At) => Err(self.error_here(format!("{what} cannot have a basis"))),
            Some(Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::LParen) => {
                Err(self.error(start, format!("{what} cannot appear inside a size expression")))
            }
            _ => Ok(()),
        }
    }
}
