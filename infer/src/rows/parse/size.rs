//! Size expressions in `.rows`: parsed as written (sums, products, unary
//! minus, function calls) and evaluated into the normal form of
//! [`SizeExpr`], with nesting and the expanded size bounded.

use super::lex::Tok;
use super::{PResult, Parser, MAX_TERMS};
use diamond_ir::term::SizeExpr;

/// A size expression as written, before evaluation.
#[derive(Debug)]
pub(super) struct Expr {
    pub(super) kind: ExprKind,
    /// The characters `start..end` of the line it covers.
    pub(super) start: usize,
    pub(super) end: usize,
}

#[derive(Debug)]
pub(super) enum ExprKind {
    Int(u64),
    Symbol(String),
    Neg(Box<Expr>),
    /// Terms, each negated or not. Flat, so that long sums do not nest.
    Sum(Vec<(bool, Expr)>),
    /// Factors, each multiplying or dividing what precedes it (the first
    /// multiplies). Flat, so that long products do not nest.
    Product(Vec<(ProductOp, Expr)>),
    Call(Function, Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum ProductOp {
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Function {
    Ceil,
    Floor,
    Min,
    Max,
}

impl Function {
    fn name(self) -> &'static str {
        match self {
            Function::Ceil => "ceil",
            Function::Floor => "floor",
            Function::Min => "min",
            Function::Max => "max",
        }
    }
}

impl Parser<'_> {
    pub(super) fn sum(&mut self) -> PResult<Expr> {
        let start = self.here();
        let first = self.product()?;
        if !matches!(self.peek(), Some(Tok::Plus | Tok::Minus)) {
            return Ok(first);
        }
        let mut terms = vec![(false, first)];
        loop {
            let negated = match self.peek() {
                Some(Tok::Plus) => false,
                Some(Tok::Minus) => true,
                _ => break,
            };
            self.bump();
            terms.push((negated, self.product()?));
        }
        Ok(Expr { kind: ExprKind::Sum(terms), start, end: self.prev_end() })
    }

    pub(super) fn product(&mut self) -> PResult<Expr> {
        let start = self.here();
        let first = self.unary()?;
        if !matches!(self.peek(), Some(Tok::Star | Tok::Slash)) {
            return Ok(first);
        }
        let mut factors = vec![(ProductOp::Mul, first)];
        loop {
            let op = match self.peek() {
                Some(Tok::Star) => ProductOp::Mul,
                Some(Tok::Slash) => ProductOp::Div,
                _ => break,
            };
            self.bump();
            factors.push((op, self.unary()?));
        }
        Ok(Expr { kind: ExprKind::Product(factors), start, end: self.prev_end() })
    }

    pub(super) fn unary(&mut self) -> PResult<Expr> {
        if self.peek() != Some(&Tok::Minus) {
            return self.primary();
        }
        let start = self.here();
        self.enter()?;
        self.bump();
        let inner = self.unary()?;
        self.leave();
        Ok(Expr { kind: ExprKind::Neg(Box::new(inner)), start, end: self.prev_end() })
    }

    pub(super) fn primary(&mut self) -> PResult<Expr> {
        let start = self.here();
        let kind = match self.peek() {
            Some(Tok::Int(n)) => ExprKind::Int(*n),
            Some(Tok::Ident(name)) => {
                let name = name.clone();
                self.bump();
                if self.peek() == Some(&Tok::LParen) {
                    return self.call(&name, start);
                }
                return Ok(Expr { kind: ExprKind::Symbol(name), start, end: self.prev_end() });
            }
            Some(Tok::LParen) => {
                self.enter()?;
                self.bump();
                let inner = self.sum()?;
                self.leave();
                if self.peek() != Some(&Tok::RParen) {
                    return Err(self.expected("')' to close '('"));
                }
                self.bump();
                return Ok(Expr { kind: inner.kind, start, end: self.prev_end() });
            }
            Some(Tok::DimVar(_)) => {
                return Err(self.error_here("a dimension variable cannot appear inside a size expression"))
            }
            Some(Tok::Unit) => return Err(self.error_here("the unit '_' cannot appear inside a size expression")),
            _ => return Err(self.expected_after("a number, a symbol or '('")),
        };
        self.bump();
        Ok(Expr { kind, start, end: self.prev_end() })
    }

    /// `ceil(…)`, `floor(…)`, `min(…, …)`, `max(…, …)`; the name is consumed
    /// and the current token is `(`.
    pub(super) fn call(&mut self, name: &str, start: usize) -> PResult<Expr> {
        let function = match name {
            "ceil" => Function::Ceil,
            "floor" => Function::Floor,
            "min" => Function::Min,
            "max" => Function::Max,
            _ => return Err(self.error(start, format!("unknown function '{name}'; expected ceil, floor, min or max"))),
        };
        self.enter()?;
        self.bump();
        let mut args = vec![self.sum()?];
        loop {
            match self.peek() {
                Some(Tok::Comma) => {
                    self.bump();
                    args.push(self.sum()?);
                }
                Some(Tok::RParen) => {
                    self.bump();
                    break;
                }
                _ => return Err(self.expected(&format!("',' or ')' in the arguments of '{name}'"))),
            }
        }
        self.leave();
        let arity = if matches!(function, Function::Min | Function::Max) { 2 } else { 1 };
        if args.len() != arity {
            let plural = if arity == 1 { "" } else { "s" };
            return Err(self.error(start, format!("'{name}' takes {arity} argument{plural}, found {}", args.len())));
        }
        Ok(Expr { kind: ExprKind::Call(function, args), start, end: self.prev_end() })
    }

    /// The normal form of an expression, with an upper bound on its number of
    /// non-constant terms (0 for a constant).
    pub(super) fn eval(&self, expr: &Expr) -> PResult<(SizeExpr, u64)> {
        let overflow = |at: usize| self.error(at, "size overflows");
        let (value, bound) = match &expr.kind {
            ExprKind::Int(n) => (SizeExpr::constant(i64::try_from(*n).map_err(|_| overflow(expr.start))?), 0),
            ExprKind::Symbol(name) => (SizeExpr::symbol(name), 1),
            ExprKind::Neg(inner) => {
                let (value, bound) = self.eval(inner)?;
                (value.mul(&SizeExpr::constant(-1)).ok_or_else(|| overflow(expr.start))?, bound)
            }
            ExprKind::Sum(terms) => {
                let mut total = SizeExpr::constant(0);
                let mut total_bound: u64 = 0;
                for (negated, term) in terms {
                    let (mut value, bound) = self.eval(term)?;
                    total_bound = self.within_limit(total_bound.saturating_add(bound), expr.start)?;
                    if *negated {
                        value = value.mul(&SizeExpr::constant(-1)).ok_or_else(|| overflow(term.start))?;
                    }
                    total = total.add(&value).ok_or_else(|| overflow(term.start))?;
                    if total.as_constant().is_some() {
                        total_bound = 0;
                    }
                }
                (total, total_bound)
            }
            ExprKind::Product(factors) => self.eval_product(factors, expr.start)?,
            ExprKind::Call(function @ (Function::Min | Function::Max), args) => match args.as_slice() {
                [a, b] => {
                    let (a, _) = self.eval(a)?;
                    let (b, _) = self.eval(b)?;
                    (if *function == Function::Min { SizeExpr::min(&a, &b) } else { SizeExpr::max(&a, &b) }, 1)
                }
                _ => return Err(self.error(expr.start, format!("'{}' takes 2 arguments", function.name()))),
            },
            ExprKind::Call(function, args) => {
                let name = function.name();
                let division = match args.as_slice() {
                    [arg] => match &arg.kind {
                        ExprKind::Product(factors) => match factors.split_last() {
                            Some(((ProductOp::Div, divisor), numerator)) if !numerator.is_empty() => {
                                Some((numerator, divisor))
                            }
                            _ => None,
                        },
                        _ => None,
                    },
                    _ => None,
                };
                let Some((numerator, divisor)) = division else {
                    let found = args.first().map_or(String::new(), |a| self.text(a.start, a.end));
                    return Err(self.error(
                        args.first().map_or(expr.start, |a| a.start),
                        format!("'{name}' takes a division: write '{name}(EXPR / INT)', found '{found}'"),
                    ));
                };
                let (numerator, _) = self.eval_product(numerator, expr.start)?;
                let d = self.divisor(divisor)?;
                let value = if *function == Function::Ceil { numerator.ceil_div(d) } else { numerator.floor_div(d) };
                (value.ok_or_else(|| overflow(expr.start))?, 1)
            }
        };
        let bound = if value.as_constant().is_some() { 0 } else { bound };
        Ok((value, bound))
    }

    /// Multiplies and divides `factors` in turn; the bound is as for
    /// [`Parser::eval`].
    pub(super) fn eval_product(&self, factors: &[(ProductOp, Expr)], start: usize) -> PResult<(SizeExpr, u64)> {
        let mut product = SizeExpr::constant(1);
        let mut product_bound: u64 = 0;
        for (op, factor) in factors {
            match op {
                ProductOp::Mul => {
                    let (value, bound) = self.eval(factor)?;
                    // (n1 + 1)(n2 + 1) terms at most, one of them constant.
                    let terms = product_bound.saturating_add(1).saturating_mul(bound.saturating_add(1));
                    product_bound = self.within_limit(terms - 1, start)?;
                    product = product.mul(&value).ok_or_else(|| self.error(factor.start, "size overflows"))?;
                }
                ProductOp::Div => {
                    let d = self.divisor(factor)?;
                    product = product.floor_div(d).ok_or_else(|| self.error(factor.start, "size overflows"))?;
                    product_bound = 1;
                }
            }
            if product.as_constant().is_some() {
                product_bound = 0;
            }
        }
        Ok((product, product_bound))
    }

    /// Refuses an expression that may expand to more than [`MAX_TERMS`] terms.
    pub(super) fn within_limit(&self, non_constant_terms: u64, start: usize) -> PResult<u64> {
        if non_constant_terms >= MAX_TERMS {
            return Err(self.error(start, "size expression too large"));
        }
        Ok(non_constant_terms)
    }

    /// A divisor: a positive integer constant.
    pub(super) fn divisor(&self, expr: &Expr) -> PResult<u64> {
        let (value, _) = self.eval(expr)?;
        match value.as_constant() {
            Some(d) if d > 0 => Ok(d.unsigned_abs()),
            Some(0) => Err(self.error(expr.start, "division by zero")),
            _ => Err(self.error(
                expr.start,
                format!(
                    "the divisor of '/' must be a positive integer constant, found '{}'",
                    self.text(expr.start, expr.end)
                ),
            )),
        }
    }
}
