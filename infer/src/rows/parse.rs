//! The `.rows` parser: a hand-written lexer and a recursive-descent parser.
//!
//! Each non-blank line (after its `#` comment is cut) is one statement, lexed
//! and parsed on its own. Which kind of statement a line is follows from its
//! operands:
//!
//! - `tensor NAME : [leaf|param] ROW` declares a tensor;
//! - `numel A = numel B` compares element counts (`A`, `B`: tensors or rows);
//! - `A <= B`, `A >= B` (read as `B <= A`) and `A = B` compare two rows when
//!   both sides are literal rows or declared tensors, and two dimensions when
//!   both sides are dimensions. A bare identifier is a tensor when it was
//!   declared earlier in the file and a rigid symbol otherwise, except that an
//!   undeclared identifier facing a row or a tensor is an unknown tensor.
//!
//! Size expressions are evaluated while parsing into the normal form of
//! [`SizeExpr`]; a constant must be at least 1. Nesting and the size of the
//! expanded polynomial are bounded, so that no input makes the parser panic,
//! overflow its stack or run for long.

use super::syntax::{
    DimSyntax, Operand, RowSyntax, RowsFile, Span, Statement, StatementKind, TensorKind, WindowSyntax,
};
use diamond_ir::term::{Basis, Size, SizeExpr};
use std::collections::HashMap;

/// A syntax error, with the 1-based line and column (in characters) where it
/// was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    /// The line, counting from 1.
    pub line: u32,
    /// The column, counting characters from 1.
    pub column: u32,
    /// What was expected and what was found.
    pub message: String,
}

/// How deeply parentheses, unary minus and function calls may nest.
const MAX_DEPTH: usize = 64;

/// The most terms a size expression may expand to (an upper bound checked
/// before adding or multiplying, so that `(a+b)*(c+d)*…` cannot blow up).
const MAX_TERMS: u64 = 1024;

/// Parses a `.rows` file into its statements.
///
/// A tensor is known from its declaration on: a later statement may name it,
/// an earlier one may not.
///
/// # Errors
///
/// The first syntax error, with its line and column: an unexpected character
/// or token, an unknown or redeclared tensor, a row compared with a
/// dimension, a dimension whose constant size is below 1, a division by
/// anything but a positive integer constant, a dimension variable inside a
/// size expression, an overflowing or oversized expression. It never panics,
/// whatever the input.
pub fn parse_rows(text: &str) -> Result<RowsFile, ParseError> {
    let mut statements = Vec::new();
    let mut tensors: HashMap<String, u32> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = to_u32(index + 1);
        let chars: Vec<char> = raw.chars().take_while(|&c| c != '#').collect();
        let Some(first) = chars.iter().position(|c| !c.is_whitespace()) else {
            continue;
        };
        let end = chars.iter().rposition(|c| !c.is_whitespace()).map_or(first, |i| i + 1);
        let tokens = lex(line, &chars)?;
        let mut parser = Parser { line, chars: &chars, tokens, pos: 0, eol: end, depth: 0, tensors: &tensors };
        let kind = parser.statement()?;
        if let StatementKind::Tensor { name, .. } = &kind {
            tensors.insert(name.clone(), line);
        }
        let text = chars.get(first..end).unwrap_or_default().iter().collect();
        statements.push(Statement { span: Span { line, column: to_u32(first + 1) }, text, kind });
    }
    Ok(RowsFile { statements })
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn error(line: u32, index: usize, message: impl Into<String>) -> ParseError {
    ParseError { line, column: to_u32(index.saturating_add(1)), message: message.into() }
}

/// A token's kind and payload.
#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// An identifier (keywords included): `x`, `batch`, `leaf`, `a.b_2`.
    Ident(String),
    /// A non-negative integer.
    Int(u64),
    /// `'a`.
    DimVar(String),
    /// `..r`.
    RowVar(String),
    /// `<..r>`.
    OpenMarker(String),
    /// `<>`.
    Marker,
    /// `_`.
    Unit,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Colon,
    At,
    Plus,
    Minus,
    Star,
    Slash,
    Le,
    Ge,
    Eq,
    Lt,
    Gt,
}

/// A token and the characters `start..end` of its line that it covers.
#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// The end of the identifier starting at `start` (`start` itself when none
/// starts there).
fn ident_end(chars: &[char], start: usize) -> usize {
    match chars.get(start) {
        Some(&c) if is_ident_start(c) => {
            let mut end = start + 1;
            while chars.get(end).is_some_and(|&c| is_ident_continue(c)) {
                end += 1;
            }
            end
        }
        _ => start,
    }
}

fn describe_char(c: Option<char>) -> String {
    match c {
        Some(c) => format!("'{c}'"),
        None => "end of line".to_string(),
    }
}

/// The row variable name starting at `start`, after `prefix` (`..` or `<..`),
/// and where it ends.
fn row_var_name(chars: &[char], start: usize, line: u32, prefix: &str) -> Result<(String, usize), ParseError> {
    let end = ident_end(chars, start);
    if end == start {
        let found = describe_char(chars.get(start).copied());
        return Err(error(line, start, format!("expected a row variable name after '{prefix}', found {found}")));
    }
    Ok((collect(chars, start, end), end))
}

fn collect(chars: &[char], start: usize, end: usize) -> String {
    chars.get(start..end).unwrap_or_default().iter().collect()
}

/// Splits one line (comment already cut) into tokens.
fn lex(line: u32, chars: &[char]) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let next = chars.get(i + 1).copied();
        let single = match c {
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            ',' => Some(Tok::Comma),
            ':' => Some(Tok::Colon),
            '@' => Some(Tok::At),
            '+' => Some(Tok::Plus),
            '-' => Some(Tok::Minus),
            '*' => Some(Tok::Star),
            '/' => Some(Tok::Slash),
            '=' => Some(Tok::Eq),
            '<' if !matches!(next, Some('=' | '>' | '.')) => Some(Tok::Lt),
            '>' if next != Some('=') => Some(Tok::Gt),
            _ => None,
        };
        if let Some(tok) = single {
            i += 1;
            tokens.push(Token { tok, start, end: i });
            continue;
        }
        let tok = match c {
            '<' => match next {
                Some('=') => {
                    i += 2;
                    Tok::Le
                }
                Some('>') => {
                    i += 2;
                    Tok::Marker
                }
                Some('.') if chars.get(i + 2) == Some(&'.') => {
                    let (name, name_end) = row_var_name(chars, i + 3, line, "<..")?;
                    if chars.get(name_end) != Some(&'>') {
                        let found = describe_char(chars.get(name_end).copied());
                        return Err(error(
                            line,
                            name_end,
                            format!("expected '>' to close the marker '<..{name}', found {found}"),
                        ));
                    }
                    i = name_end + 1;
                    Tok::OpenMarker(name)
                }
                Some('.') => return Err(error(line, start + 1, "expected '<..r>', '<>' or '<=' after '<', found '.'")),
                _ => return Err(error(line, start, "unexpected character '<'")),
            },
            '>' => {
                i += 2;
                Tok::Ge
            }
            '.' if next == Some('.') => {
                let (name, name_end) = row_var_name(chars, i + 2, line, "..")?;
                i = name_end;
                Tok::RowVar(name)
            }
            '\'' => {
                let name_end = ident_end(chars, i + 1);
                if name_end == i + 1 {
                    let found = describe_char(next);
                    return Err(error(
                        line,
                        i + 1,
                        format!("expected a dimension variable name after ''', found {found}"),
                    ));
                }
                i = name_end;
                Tok::DimVar(collect(chars, start + 1, name_end))
            }
            '0'..='9' => {
                let mut value: Option<u64> = Some(0);
                while let Some(digit) = chars.get(i).and_then(|c| c.to_digit(10)) {
                    value = value.and_then(|v| v.checked_mul(10)).and_then(|v| v.checked_add(u64::from(digit)));
                    i += 1;
                }
                match value {
                    Some(n) => Tok::Int(n),
                    None => return Err(error(line, start, "size overflows")),
                }
            }
            c if is_ident_start(c) => {
                i = ident_end(chars, i);
                let name = collect(chars, start, i);
                if name == "_" {
                    Tok::Unit
                } else {
                    Tok::Ident(name)
                }
            }
            other => return Err(error(line, start, format!("unexpected character '{other}'"))),
        };
        tokens.push(Token { tok, start, end: i });
    }
    Ok(tokens)
}

/// A size expression as written, before evaluation.
#[derive(Debug)]
struct Expr {
    kind: ExprKind,
    /// The characters `start..end` of the line it covers.
    start: usize,
    end: usize,
}

#[derive(Debug)]
enum ExprKind {
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
enum ProductOp {
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Function {
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

/// One side of a comparison, before the statement's kind is known.
enum SideKind {
    Row(RowSyntax),
    /// A bare identifier: a declared tensor, or else a rigid symbol.
    Name(String),
    Dim(DimSyntax),
}

struct Side {
    kind: SideKind,
    start: usize,
    end: usize,
}

/// Both sides of a comparison, once classified.
enum Sides {
    Rows(Operand, Operand),
    Dims(DimSyntax, DimSyntax),
}

/// Whether a token after an identifier makes it part of a size expression
/// (or of a dimension with a basis) rather than a bare name.
fn continues_size(tok: Option<&Tok>) -> bool {
    matches!(tok, Some(Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::At | Tok::LParen))
}

/// Whether a token after a leading `tensor` or `numel` makes that word an
/// operand of a comparison rather than a keyword.
fn continues_comparison(tok: Option<&Tok>) -> bool {
    continues_size(tok) || matches!(tok, Some(Tok::Le | Tok::Ge | Tok::Eq | Tok::Lt | Tok::Gt))
}

fn symbol_dim(name: &str) -> DimSyntax {
    DimSyntax::Known { size: Size::Symbolic(Box::new(SizeExpr::symbol(name))), basis: Basis::Default }
}

/// The parser of one line.
struct Parser<'a> {
    line: u32,
    chars: &'a [char],
    tokens: Vec<Token>,
    pos: usize,
    /// One past the last non-blank character: where "end of line" is.
    eol: usize,
    depth: usize,
    /// The tensors declared so far, with the line of their declaration.
    tensors: &'a HashMap<String, u32>,
}

type PResult<T> = Result<T, ParseError>;

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.peek_nth(0)
    }

    fn peek_nth(&self, n: usize) -> Option<&Tok> {
        self.tokens.get(self.pos + n).map(|t| &t.tok)
    }

    fn bump(&mut self) {
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
    }

    /// Where the current token starts (the end of the line after the last).
    fn here(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.eol, |t| t.start)
    }

    /// Where the last consumed token ends.
    fn prev_end(&self) -> usize {
        match self.pos.checked_sub(1).and_then(|p| self.tokens.get(p)) {
            Some(t) => t.end,
            None => self.here(),
        }
    }

    fn text(&self, start: usize, end: usize) -> String {
        collect(self.chars, start, end)
    }

    fn describe(&self, token: Option<&Token>) -> String {
        match token {
            None => "end of line".to_string(),
            Some(Token { tok: Tok::DimVar(name), .. }) => format!("dimension variable '{name}"),
            Some(t) => format!("'{}'", self.text(t.start, t.end)),
        }
    }

    fn found(&self) -> String {
        self.describe(self.tokens.get(self.pos))
    }

    fn error(&self, at: usize, message: impl Into<String>) -> ParseError {
        error(self.line, at, message)
    }

    fn error_here(&self, message: impl Into<String>) -> ParseError {
        self.error(self.here(), message)
    }

    /// "expected WHAT, found …" at the current token.
    fn expected(&self, what: &str) -> ParseError {
        self.error_here(format!("expected {what}, found {}", self.found()))
    }

    /// "expected WHAT after 'PREVIOUS', found …" at the current token.
    fn expected_after(&self, what: &str) -> ParseError {
        let previous = match self.pos.checked_sub(1).and_then(|p| self.tokens.get(p)) {
            Some(t) => format!(" after '{}'", self.text(t.start, t.end)),
            None => String::new(),
        };
        self.error_here(format!("expected {what}{previous}, found {}", self.found()))
    }

    fn unknown_tensor(&self, name: &str, at: usize) -> ParseError {
        self.error(at, format!("unknown tensor '{name}'; declare it with `tensor {name} : ...`"))
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_here("size expression nested too deeply"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn statement(&mut self) -> PResult<StatementKind> {
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

    fn tensor_declaration(&mut self) -> PResult<StatementKind> {
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

    fn numel(&mut self) -> PResult<StatementKind> {
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
    fn sum_statement(&mut self) -> PResult<StatementKind> {
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
    fn window(&mut self) -> PResult<StatementKind> {
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

    fn expect_eq(&mut self, after: &str) -> PResult<()> {
        if self.peek() != Some(&Tok::Eq) {
            return Err(self.expected(&format!("'=' after {after}")));
        }
        self.bump();
        Ok(())
    }

    /// A non-negative integer literal.
    fn count(&mut self, what: &str) -> PResult<u64> {
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
    fn positive(&mut self, what: &str) -> PResult<u64> {
        let at = self.here();
        match self.count(what)? {
            0 => Err(self.error(at, format!("{what} must be at least 1"))),
            n => Ok(n),
        }
    }

    fn numel_operand(&mut self) -> PResult<Operand> {
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

    fn comparison(&mut self) -> PResult<StatementKind> {
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

    fn side(&mut self, expected: &str) -> PResult<Side> {
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
    fn classify(&self, a: Side, b: Side, op: &str) -> PResult<Sides> {
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
    fn marker(&self) -> Option<Option<String>> {
        match self.peek() {
            Some(Tok::Marker) => Some(None),
            Some(Tok::OpenMarker(name)) => Some(Some(name.clone())),
            _ => None,
        }
    }

    /// A row, from its `[` (the current token) to its `]`.
    fn row(&mut self) -> PResult<RowSyntax> {
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
    fn dim(&mut self, expected: &str) -> PResult<DimSyntax> {
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
    fn nothing_attached(&self, start: usize, what: &str) -> PResult<()> {
        match self.peek() {
            Some(Tok::At) => Err(self.error_here(format!("{what} cannot have a basis"))),
            Some(Tok::Plus | Tok::Minus | Tok::Star | Tok::Slash | Tok::LParen) => {
                Err(self.error(start, format!("{what} cannot appear inside a size expression")))
            }
            _ => Ok(()),
        }
    }

    fn sum(&mut self) -> PResult<Expr> {
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

    fn product(&mut self) -> PResult<Expr> {
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

    fn unary(&mut self) -> PResult<Expr> {
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

    fn primary(&mut self) -> PResult<Expr> {
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
    fn call(&mut self, name: &str, start: usize) -> PResult<Expr> {
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
    fn eval(&self, expr: &Expr) -> PResult<(SizeExpr, u64)> {
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
    fn eval_product(&self, factors: &[(ProductOp, Expr)], start: usize) -> PResult<(SizeExpr, u64)> {
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
    fn within_limit(&self, non_constant_terms: u64, start: usize) -> PResult<u64> {
        if non_constant_terms >= MAX_TERMS {
            return Err(self.error(start, "size expression too large"));
        }
        Ok(non_constant_terms)
    }

    /// A divisor: a positive integer constant.
    fn divisor(&self, expr: &Expr) -> PResult<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One line per statement, `Variant: statement`, or `error: …`.
    fn summary(input: &str) -> String {
        match parse_rows(input) {
            Ok(file) => file
                .statements
                .iter()
                .map(|s| {
                    let variant = match &s.kind {
                        StatementKind::Tensor { .. } => "Tensor",
                        StatementKind::RowLe(..) => "RowLe",
                        StatementKind::RowEq(..) => "RowEq",
                        StatementKind::DimLe(..) => "DimLe",
                        StatementKind::DimEq(..) => "DimEq",
                        StatementKind::NumelEq(..) => "NumelEq",
                        StatementKind::Sum { .. } => "Sum",
                        StatementKind::Window(..) => "Window",
                    };
                    format!("{variant}: {}", s.kind)
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Err(e) => format!("error: {e}"),
        }
    }

    #[track_caller]
    fn check(input: &str, expected: &str) {
        assert_eq!(summary(input), expected.trim(), "input:\n{input}");
    }

    /// The only statement of `input`, which must parse.
    #[track_caller]
    fn only(input: &str) -> StatementKind {
        let mut file = parse_rows(input).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(file.statements.len(), 1, "{input}");
        file.statements.remove(0).kind
    }

    /// The dimension `text` as parsed in a dimension statement `text = 1`.
    #[track_caller]
    fn dim(text: &str) -> DimSyntax {
        match only(&format!("{text} = 1")) {
            StatementKind::DimEq(d, _) => d,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// The row `text` as declared for a tensor.
    #[track_caller]
    fn row(text: &str) -> RowSyntax {
        match only(&format!("tensor t : {text}")) {
            StatementKind::Tensor { row, .. } => row,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn known(n: u64) -> DimSyntax {
        DimSyntax::Known { size: Size::Known(n), basis: Basis::Default }
    }

    fn named(n: u64, tag: &str) -> DimSyntax {
        DimSyntax::Known { size: Size::Known(n), basis: Basis::Named(tag.into()) }
    }

    fn symbolic(e: SizeExpr) -> DimSyntax {
        DimSyntax::Known { size: Size::Symbolic(Box::new(e)), basis: Basis::Default }
    }

    fn s(name: &str) -> SizeExpr {
        SizeExpr::symbol(name)
    }

    fn c(n: i64) -> SizeExpr {
        SizeExpr::constant(n)
    }

    fn var(name: &str) -> DimSyntax {
        DimSyntax::Var(name.into())
    }

    const SAMPLE: &str = "\
# a sample file: every statement form
tensor x : leaf [..a]            # a leaf (data or graph input): closes upward
tensor w : param ['h, 3]         # a parameter: a hole is an error
tensor y : [..c]                 # an interior tensor: closes downward
tensor z : [2 <..r> 3@rgb, _, batch*seq, (h-1)/2+1]

x <= y                           # row inequality between two tensors' shapes
y = [2, 'k]                      # row equality with a literal row
[3 <> 4] <= [3 <> 5, 4]          # literal rows
y >= [<> ceil(s/2), min(a, b)]
'h <= 7                          # dimension constraint
'h = batch                       # dimension equality
batch >= seq
numel x = numel y                # total elements
numel [2, 3] = numel z
";

    #[test]
    fn sample_file() {
        check(
            SAMPLE,
            "
Tensor: tensor x : leaf [..a]
Tensor: tensor w : param ['h, 3]
Tensor: tensor y : [..c]
Tensor: tensor z : [2 <..r> 3@rgb, _, batch*seq, floor((h-1)/2)+1]
RowLe: x <= y
RowEq: y = [2, 'k]
RowLe: [3 <> 4] <= [3 <> 5, 4]
RowLe: [ceil(s/2), min(a, b)] <= y
DimLe: 'h <= 7
DimEq: 'h = batch
DimLe: seq <= batch
NumelEq: numel x = numel y
NumelEq: numel [2, 3] = numel z
",
        );
    }

    #[test]
    fn spans_and_texts() {
        let file = parse_rows("\n  # only a comment\n\t tensor x : [3]   # shape\n   x = [3]\n").unwrap();
        let got: Vec<_> = file.statements.iter().map(|s| (s.span, s.text.as_str())).collect();
        assert_eq!(
            got,
            vec![(Span { line: 3, column: 3 }, "tensor x : [3]"), (Span { line: 4, column: 4 }, "x = [3]"),]
        );
        assert_eq!(file.statements[0].span.to_string(), "3:3");
    }

    #[test]
    fn blank_and_comment_only_files() {
        assert_eq!(parse_rows("").unwrap(), RowsFile { statements: vec![] });
        assert_eq!(parse_rows("\n \n# x <= y\n\t\r\n").unwrap(), RowsFile { statements: vec![] });
        check("tensor x : [3]\r\nx = [3]\r\n", "Tensor: tensor x : [3]\nRowEq: x = [3]");
    }

    #[test]
    fn tensor_kinds() {
        assert_eq!(
            only("tensor x : leaf [..a]"),
            StatementKind::Tensor {
                name: "x".into(),
                kind: TensorKind::Leaf,
                row: RowSyntax { leading: vec![], var: Some("a".into()), trailing: vec![] },
            }
        );
        assert_eq!(
            only("tensor w : param ['h, 3]"),
            StatementKind::Tensor {
                name: "w".into(),
                kind: TensorKind::Param,
                row: RowSyntax { leading: vec![], var: None, trailing: vec![var("h"), known(3)] },
            }
        );
        assert_eq!(
            only("tensor y.0_a : []"),
            StatementKind::Tensor { name: "y.0_a".into(), kind: TensorKind::Interior, row: RowSyntax::empty() }
        );
        // Keywords are ordinary names where a name is expected.
        check(
            "tensor leaf : leaf [1]\ntensor numel : [2]",
            "Tensor: tensor leaf : leaf [1]\nTensor: tensor numel : [2]",
        );
    }

    #[test]
    fn row_forms() {
        let r = |leading: Vec<DimSyntax>, v: Option<&str>, trailing: Vec<DimSyntax>| RowSyntax {
            leading,
            var: v.map(String::from),
            trailing,
        };
        assert_eq!(row("[]"), r(vec![], None, vec![]));
        assert_eq!(row("[..r]"), r(vec![], Some("r"), vec![]));
        assert_eq!(row("[3, 4]"), r(vec![], None, vec![known(3), known(4)]));
        assert_eq!(row("[<> 3, 4]"), r(vec![], None, vec![known(3), known(4)]));
        assert_eq!(row("[3 <>]"), r(vec![known(3)], None, vec![]));
        assert_eq!(row("[<>]"), r(vec![], None, vec![]));
        assert_eq!(row("[<..r> 3]"), r(vec![], Some("r"), vec![known(3)]));
        assert_eq!(row("[3 <..r>]"), r(vec![known(3)], Some("r"), vec![]));
        assert_eq!(row("[<..r>]"), r(vec![], Some("r"), vec![]));
        assert_eq!(row("[1, 2 <> 3]"), r(vec![known(1), known(2)], None, vec![known(3)]));
        assert_eq!(row("[1, 2 <..rho> 3, 4]"), r(vec![known(1), known(2)], Some("rho"), vec![known(3), known(4)]));
        assert_eq!(row("[ 1 ,2<>3 ]"), r(vec![known(1), known(2)], None, vec![known(3)]));
        assert_eq!(row("['a, _, 3@rgb]"), r(vec![], None, vec![var("a"), DimSyntax::Unit, named(3, "rgb")]));
    }

    #[test]
    fn rows_print_as_parsed() {
        for text in ["[]", "[..r]", "[3, 4]", "[3 <>]", "[<..r> 3]", "[3 <..r>]", "[1, 2 <> 3, 4]", "[_, 'a <..r> b@c]"]
        {
            assert_eq!(row(text).to_string(), text);
        }
        assert_eq!(row("[<> 3]").to_string(), "[3]");
        assert_eq!(row("[<>]").to_string(), "[]");
        assert_eq!(row("[<..r>]").to_string(), "[..r]");
    }

    #[test]
    fn dimensions() {
        assert_eq!(dim("3"), known(3));
        assert_eq!(dim("3@rgb"), named(3, "rgb"));
        assert_eq!(dim("3 @ DATA_CHANNEL"), named(3, "DATA_CHANNEL"));
        assert_eq!(dim("3@default"), named(3, "default"));
        assert_eq!(dim("_"), DimSyntax::Unit);
        assert_eq!(dim("'a"), var("a"));
        assert_eq!(dim("'a.b_1"), var("a.b_1"));
        assert_eq!(
            dim("batch@seq"),
            DimSyntax::Known { size: Size::Symbolic(Box::new(s("batch"))), basis: Basis::Named("seq".into()) }
        );
        assert_eq!(dim("_x"), symbolic(s("_x")));
        assert_eq!(dim("9223372036854775807@big"), named(i64::MAX.unsigned_abs(), "big"));
        check("x = 18446744073709551615", "error: line 1, column 5: size overflows");
    }

    #[test]
    fn constant_expressions_fold() {
        assert_eq!(dim("2*3"), known(6));
        assert_eq!(dim("(7-1)/2"), known(3));
        assert_eq!(dim("7/2"), known(3));
        assert_eq!(dim("ceil(7/2)"), known(4));
        assert_eq!(dim("floor(7/2)"), known(3));
        assert_eq!(dim("min(3, 5)"), known(3));
        assert_eq!(dim("max(3, 5)@rgb"), named(5, "rgb"));
        assert_eq!(dim("-(-4)"), known(4));
        assert_eq!(dim("1+2*3-4"), known(3));
        assert_eq!(dim("(1+2)*3"), known(9));
        assert_eq!(dim("b-b+1"), known(1));
        assert_eq!(dim("12/2/3"), known(2));
        assert_eq!(dim("9223372036854775807"), known(i64::MAX.unsigned_abs()));
    }

    #[test]
    fn symbolic_expressions() {
        let mul = |a: &SizeExpr, b: &SizeExpr| a.mul(b).unwrap();
        let add = |a: &SizeExpr, b: &SizeExpr| a.add(b).unwrap();
        assert_eq!(dim("batch"), symbolic(s("batch")));
        assert_eq!(dim("batch*seq"), symbolic(mul(&s("batch"), &s("seq"))));
        assert_eq!(dim("seq*batch"), dim("batch*seq"));
        assert_eq!(dim("2*b+b"), symbolic(mul(&c(3), &s("b"))));
        assert_eq!(dim("-b+2*b"), symbolic(s("b")));
        assert_eq!(dim("b-1+2"), symbolic(add(&s("b"), &c(1))));
        let h_minus_1 = add(&s("h"), &c(-1));
        assert_eq!(dim("(h-1)/2+1"), symbolic(add(&h_minus_1.floor_div(2).unwrap(), &c(1))));
        assert_eq!(dim("floor((h-1)/2)+1"), dim("(h-1)/2+1"));
        assert_eq!(dim("floor(x/2)"), dim("x/2"));
        assert_eq!(dim("ceil(x/2)"), symbolic(s("x").ceil_div(2).unwrap()));
        assert_eq!(dim("ceil(2*x/4)"), symbolic(mul(&c(2), &s("x")).ceil_div(4).unwrap()));
        assert_eq!(dim("x/(1+1)"), dim("x/2"));
        assert_eq!(dim("x/1"), dim("x"));
        assert_eq!(dim("min(a, b)"), symbolic(SizeExpr::min(&s("a"), &s("b"))));
        assert_eq!(dim("max(b,a)"), symbolic(SizeExpr::max(&s("a"), &s("b"))));
        assert_eq!(dim("min(a, a)"), dim("a"));
        assert_eq!(dim("(a+1)*(a-1)"), symbolic(add(&mul(&s("a"), &s("a")), &c(-1))));
        // `ceil`, `floor`, `min` and `max` are symbols unless called.
        assert_eq!(dim("ceil+min"), symbolic(add(&s("ceil"), &s("min"))));
        assert_eq!(dim("(h-1)/2+1").to_string(), "floor((h-1)/2)+1");
    }

    #[test]
    fn row_statements() {
        let decls = "tensor x : [3]\ntensor y : [..r]\n";
        check(&format!("{decls}x <= y"), "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nRowLe: x <= y");
        assert_eq!(
            parse_rows(&format!("{decls}x >= y")).unwrap().statements[2].kind,
            StatementKind::RowLe(Operand::Tensor("y".into()), Operand::Tensor("x".into()))
        );
        assert_eq!(
            parse_rows(&format!("{decls}y = [2, 'k]")).unwrap().statements[2].kind,
            StatementKind::RowEq(
                Operand::Tensor("y".into()),
                Operand::Row(RowSyntax { leading: vec![], var: None, trailing: vec![known(2), var("k")] })
            )
        );
        assert_eq!(
            only("[3 <> 4] <= [3 <> 5, 4]"),
            StatementKind::RowLe(
                Operand::Row(RowSyntax { leading: vec![known(3)], var: None, trailing: vec![known(4)] }),
                Operand::Row(RowSyntax { leading: vec![known(3)], var: None, trailing: vec![known(5), known(4)] }),
            )
        );
        check("[] = []", "RowEq: [] = []");
        check("[..a] >= [..b]", "RowLe: [..b] <= [..a]");
        check(
            &format!("{decls}[3] <= x\nx = [..q]"),
            "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nRowLe: [3] <= x\nRowEq: x = [..q]",
        );
        check(
            "tensor a:[1]\ntensor b:[1]\na<=b\na=b\na>=b",
            "Tensor: tensor a : [1]\nTensor: tensor b : [1]\nRowLe: a <= b\nRowEq: a = b\nRowLe: b <= a",
        );
    }

    #[test]
    fn dim_statements() {
        assert_eq!(only("'h <= 7"), StatementKind::DimLe(var("h"), known(7)));
        assert_eq!(only("'h = batch"), StatementKind::DimEq(var("h"), symbolic(s("batch"))));
        assert_eq!(only("'h >= 'w"), StatementKind::DimLe(var("w"), var("h")));
        assert_eq!(only("batch = seq"), StatementKind::DimEq(symbolic(s("batch")), symbolic(s("seq"))));
        assert_eq!(only("_ <= 3@rgb"), StatementKind::DimLe(DimSyntax::Unit, named(3, "rgb")));
        check(
            "batch*seq >= 4\n3 = n\nn = 3\n(n) = m",
            "DimLe: 4 <= batch*seq\nDimEq: 3 = n\nDimEq: n = 3\nDimEq: n = m",
        );
        // A name is a tensor only once declared: before, it is a symbol.
        check(
            "x = y\ntensor x : [1]\ntensor y : [1]\nx = y",
            "DimEq: x = y\nTensor: tensor x : [1]\nTensor: tensor y : [1]\nRowEq: x = y",
        );
        // `tensor` and `numel` followed by an operator are symbols.
        check("tensor = 3\nnumel <= numel", "DimEq: tensor = 3\nDimLe: numel <= numel");
    }

    #[test]
    fn numel_statements() {
        let decls = "tensor x : [3]\ntensor y : [..r]\n";
        assert_eq!(
            parse_rows(&format!("{decls}numel x = numel y")).unwrap().statements[2].kind,
            StatementKind::NumelEq(Operand::Tensor("x".into()), Operand::Tensor("y".into()))
        );
        check("numel [2, 3] = numel [6]", "NumelEq: numel [2, 3] = numel [6]");
        check(
            &format!("{decls}numel [..a]=numel x"),
            "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nNumelEq: numel [..a] = numel x",
        );
    }

    #[test]
    fn sum_and_window_statements() {
        check("sum 'c = 'a, 3, seq", "Sum: sum 'c = 'a, 3, seq");
        check(
            "window 'o = 224, kernel=7, stride=2, pads=6",
            "Window: window 'o = 224, kernel=7, stride=2, pads=6, dilation=1",
        );
        check(
            "window 'o = h, kernel='k, dilation=2, ceil",
            "Window: window 'o = h, kernel='k, stride=1, pads=0, dilation=2, ceil",
        );
        check("window 'o = 8", "error: line 1, column 14: a window needs kernel=K");
        check("window 'o = 8, kernel=3, stride=0", "error: line 1, column 33: stride must be at least 1");
        check(
            "window 'o = 8, size=3",
            "error: line 1, column 16: unknown window parameter 'size'; expected kernel, stride, pads, dilation or ceil",
        );
        check(
            "sum 'c 'a",
            "error: line 1, column 8: expected '=' after the total of a sum, found dimension variable 'a",
        );
        check("sum = 3", "DimEq: sum = 3");
    }

    #[test]
    fn lexical_errors() {
        check("x = $", "error: line 1, column 5: unexpected character '$'");
        check("x = é", "error: line 1, column 5: unexpected character 'é'");
        check("é = 1 # ignored", "error: line 1, column 1: unexpected character 'é'");
        check("[.. a] = []", "error: line 1, column 4: expected a row variable name after '..', found ' '");
        check("[..] = []", "error: line 1, column 4: expected a row variable name after '..', found ']'");
        check("[.] = []", "error: line 1, column 2: unexpected character '.'");
        check("[<..> 3] = []", "error: line 1, column 5: expected a row variable name after '<..', found '>'");
        check("[<..r 3] = []", "error: line 1, column 6: expected '>' to close the marker '<..r', found ' '");
        check("[<..r", "error: line 1, column 6: expected '>' to close the marker '<..r', found end of line");
        check("[<.r>] = []", "error: line 1, column 3: expected '<..r>', '<>' or '<=' after '<', found '.'");
        check("' = 3", "error: line 1, column 2: expected a dimension variable name after ''', found ' '");
        check("'3 = 3", "error: line 1, column 2: expected a dimension variable name after ''', found '3'");
        check("x = 18446744073709551616", "error: line 1, column 5: size overflows");
    }

    #[test]
    fn row_errors() {
        check("[3 > 4] = []", "error: line 1, column 4: expected ']' or ',' after dimension, found '>'");
        check("[3, 4", "error: line 1, column 6: expected ']' or ',' after dimension, found end of line");
        check("[", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found end of line");
        check("[, 3] = []", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found ','");
        check("[3,] = []", "error: line 1, column 4: expected a dimension after ',', found ']'");
        check("[3 4] = []", "error: line 1, column 4: expected ']' or ',' after dimension, found '4'");
        check(
            "[3, <> 4] = []",
            "error: line 1, column 5: expected a dimension after ',', found '<>' \
             (the marker stands between dimensions, without commas: '[2 <> 3]')",
        );
        check("[3 <> 4 <> 5] = []", "error: line 1, column 9: a row has at most one marker");
        check("[3 <> 4 <..r>] = []", "error: line 1, column 9: a row has at most one marker");
        check("[<> <>] = []", "error: line 1, column 5: expected a dimension or ']' after the marker, found '<>'");
        check("[<> ,3] = []", "error: line 1, column 5: expected a dimension or ']' after the marker, found ','");
        check(
            "[..r, 3] = []",
            "error: line 1, column 5: expected ']' after '..r' (an open row with dimensions is written '[<..r> 3]'), found ','",
        );
        check("[3, ..r] = []", "error: line 1, column 5: expected a dimension after ',', found '..r'");
        check("[[3]] = []", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found '['");
    }

    #[test]
    fn dimension_errors() {
        check("x = 0", "error: line 1, column 5: a dimension's size must be at least 1, found 0");
        check("[3, (2-3)] = []", "error: line 1, column 5: a dimension's size must be at least 1, found '(2-3)' = -1");
        check("[b-b] = []", "error: line 1, column 2: a dimension's size must be at least 1, found 'b-b' = 0");
        check("['a@rgb] = []", "error: line 1, column 4: a dimension variable cannot have a basis");
        check("[_@rgb] = []", "error: line 1, column 3: the unit '_' cannot have a basis");
        check("['a*2] = []", "error: line 1, column 2: a dimension variable cannot appear inside a size expression");
        check("'a + 1 = 3", "error: line 1, column 1: a dimension variable cannot appear inside a size expression");
        check("[2*'a] = []", "error: line 1, column 4: a dimension variable cannot appear inside a size expression");
        check("x = min('a, 3)", "error: line 1, column 9: a dimension variable cannot appear inside a size expression");
        check("[_+1] = []", "error: line 1, column 2: the unit '_' cannot appear inside a size expression");
        check("[1+_] = []", "error: line 1, column 4: the unit '_' cannot appear inside a size expression");
        check("[3@] = []", "error: line 1, column 4: expected a basis name after '@', found ']'");
        check("[3@4] = []", "error: line 1, column 4: expected a basis name after '@', found '4'");
        check("[3@rgb@x] = []", "error: line 1, column 7: expected ']' or ',' after dimension, found '@'");
    }

    #[test]
    fn expression_errors() {
        check("x = 1 +", "error: line 1, column 8: expected a number, a symbol or '(' after '+', found end of line");
        check("x = (h", "error: line 1, column 7: expected ')' to close '(', found end of line");
        check("x = h/0", "error: line 1, column 7: division by zero");
        check("x = h/n", "error: line 1, column 7: the divisor of '/' must be a positive integer constant, found 'n'");
        check(
            "x = h/-2",
            "error: line 1, column 7: the divisor of '/' must be a positive integer constant, found '-2'",
        );
        check("x = h/(1-1)", "error: line 1, column 7: division by zero");
        check("x = ceil(h)", "error: line 1, column 10: 'ceil' takes a division: write 'ceil(EXPR / INT)', found 'h'");
        check(
            "x = floor(h/2*3)",
            "error: line 1, column 11: 'floor' takes a division: write 'floor(EXPR / INT)', found 'h/2*3'",
        );
        check(
            "x = ceil(1 + h/2)",
            "error: line 1, column 10: 'ceil' takes a division: write 'ceil(EXPR / INT)', found '1 + h/2'",
        );
        check(
            "x = ceil(h/n)",
            "error: line 1, column 12: the divisor of '/' must be a positive integer constant, found 'n'",
        );
        check("x = min(a)", "error: line 1, column 5: 'min' takes 2 arguments, found 1");
        check("x = max(a, b, c)", "error: line 1, column 5: 'max' takes 2 arguments, found 3");
        check("x = ceil(a/2, b)", "error: line 1, column 5: 'ceil' takes 1 argument, found 2");
        check("x = min(a b)", "error: line 1, column 11: expected ',' or ')' in the arguments of 'min', found 'b'");
        check("x = sqrt(a)", "error: line 1, column 5: unknown function 'sqrt'; expected ceil, floor, min or max");
        check("x = +3", "error: line 1, column 5: expected a row, a tensor name or a dimension after '=', found '+'");
        check("x = 9223372036854775808", "error: line 1, column 5: size overflows");
        check("x = 9223372036854775807 + 1", "error: line 1, column 27: size overflows");
        check("x = 4294967296 * 4294967296", "error: line 1, column 18: size overflows");
        check("x = 3 * (2 * h) @ rgb @", "error: line 1, column 23: expected end of statement, found '@'");
    }

    #[test]
    fn statement_errors() {
        let decls = "tensor x : [3]\ntensor y : [..r]\n";
        let at3 =
            |input: &str, expected: &str| check(&format!("{decls}{input}"), &format!("error: line 3, {expected}"));
        at3("x <= q", "column 6: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3("q = x", "column 1: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3("[3] <= q", "column 8: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3("q <= [3]", "column 1: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3("numel x = numel q", "column 17: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3("numel q = numel x", "column 7: unknown tensor 'q'; declare it with `tensor q : ...`");
        at3(
            "x <= 7",
            "column 6: expected a row or a tensor after '<=' (the left side is tensor 'x'), found dimension '7'",
        );
        at3("'a = x", "column 6: expected a dimension after '=' (the left side is a dimension), found tensor 'x'");
        at3(
            "[3] >= 2*h",
            "column 8: expected a row or a tensor after '>=' (the left side is a row), found dimension '2*h'",
        );
        at3("3@rgb = [3]", "column 9: expected a dimension after '=' (the left side is a dimension), found row '[3]'");
        at3("tensor x : [4]", "column 8: tensor 'x' is already declared on line 1");
        at3("numel x <= numel y", "column 9: a numel statement compares with '=' only, found '<='");
        at3("numel x numel y", "column 9: expected '=' after the first numel operand, found 'numel'");
        at3("numel x = y", "column 11: expected 'numel' after '=', found 'y'");
        at3("numel 3 = numel x", "column 7: expected a tensor name or a row after 'numel', found '3'");
        at3("x < y", "column 3: expected '<=', '>=' or '=' after 'x', found '<'");
        at3("x == y", "column 4: expected a row, a tensor name or a dimension after '=', found '='");
        at3("x", "column 2: expected '<=', '>=' or '=' after 'x', found end of line");
        at3("[3] 4 = x", "column 5: expected '<=', '>=' or '=' after '[3]', found '4'");
        at3("x = y z", "column 7: expected end of statement, found 'z'");
        at3("] = x", "column 1: expected a statement, found ']'");
        at3("x = ", "column 4: expected a row, a tensor name or a dimension after '=', found end of line");
        // The line of an error counts blank lines and comments.
        check(
            "# header\n\ntensor x : [1]\n\n  x = q  # q is unknown",
            "error: line 5, column 7: unknown tensor 'q'; declare it with `tensor q : ...`",
        );
    }

    #[test]
    fn tensor_declaration_errors() {
        check("tensor", "error: line 1, column 7: expected a tensor name after 'tensor', found end of line");
        check("tensor : [3]", "error: line 1, column 8: expected a tensor name after 'tensor', found ':'");
        check("tensor _ : [3]", "error: line 1, column 8: expected a tensor name after 'tensor', found '_'");
        check("tensor x [3]", "error: line 1, column 10: expected ':' after the tensor name 'x', found '['");
        check(
            "tensor x :",
            "error: line 1, column 11: expected 'leaf', 'param' or a row '[...]' after ':', found end of line",
        );
        check(
            "tensor x : input [3]",
            "error: line 1, column 12: expected 'leaf', 'param' or a row '[...]' after ':', found 'input'",
        );
        check("tensor x : leaf", "error: line 1, column 16: expected a row '[...]' after 'leaf', found end of line");
        check("tensor x : param y", "error: line 1, column 18: expected a row '[...]' after 'param', found 'y'");
        check("tensor x : [3] [4]", "error: line 1, column 16: expected end of statement, found '['");
        check(
            "tensor x : [3]\n\ntensor x : leaf [3]",
            "error: line 3, column 8: tensor 'x' is already declared on line 1",
        );
    }

    /// Every prefix of the sample, and of each of its lines, parses or fails
    /// without panicking; an error is always inside the input.
    #[test]
    fn every_prefix_parses_or_fails_cleanly() {
        let mut inputs: Vec<String> = Vec::new();
        for (i, _) in SAMPLE.char_indices() {
            inputs.push(SAMPLE[..i].to_string());
        }
        for line in SAMPLE.lines() {
            let declared = "tensor x : [1]\ntensor y : [1]\ntensor z : [1]\n";
            for (i, _) in line.char_indices() {
                inputs.push(format!("{declared}{}", &line[..i]));
                inputs.push(format!("{declared}{}", &line[i..]));
            }
        }
        for input in &inputs {
            if let Err(e) = parse_rows(input) {
                let lines = input.lines().count().max(1);
                assert!(e.line >= 1 && (e.line as usize) <= lines, "{input:?}: {e}");
                assert!(e.column >= 1, "{input:?}: {e}");
                assert!(!e.message.is_empty());
            }
        }
    }

    #[test]
    fn deep_and_long_inputs_are_bounded() {
        let deep = format!("x = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
        check(&deep, "error: line 1, column 69: size expression nested too deeply");
        let negations = format!("x = {}1", "-".repeat(100_000));
        assert!(parse_rows(&negations).unwrap_err().message.contains("nested too deeply"));
        let calls = format!("x = {}a, 1{}", "min(".repeat(10_000), ")".repeat(10_000));
        assert!(parse_rows(&calls).unwrap_err().message.contains("nested too deeply"));
        // Nested to the limit is fine.
        let fine = format!("x = {}1{}", "(".repeat(60), ")".repeat(60));
        check(&fine, "DimEq: x = 1");
        // Long flat sums and products do not nest.
        let sum = format!("x = {}", vec!["1"; 100_000].join("+"));
        check(&sum, "DimEq: x = 100000");
        let product = format!("x = {}", vec!["1"; 100_000].join("*"));
        check(&product, "DimEq: x = 1");
        let overflow = format!("x = {}", vec!["2"; 64].join("*"));
        check(&overflow, "error: line 1, column 129: size overflows");
        // Expansion is bounded: (a0+b0)*(a1+b1)*… would have 2^n terms.
        let factors: Vec<String> = (0..40).map(|i| format!("(a{i}+b{i})")).collect();
        let blowup = format!("x = {}", factors.join("*"));
        check(&blowup, "error: line 1, column 5: size expression too large");
        let terms: Vec<String> = (0..5000).map(|i| format!("a{i}")).collect();
        check(&format!("x = {}", terms.join("+")), "error: line 1, column 5: size expression too large");
        let wide_row = format!("tensor t : [{}]", vec!["3"; 10_000].join(", "));
        assert_eq!(row(&wide_row["tensor t : ".len()..]).trailing.len(), 10_000);
    }

    proptest! {
        /// Random text over the format's alphabet never makes the parser panic.
        #[test]
        fn random_text_never_panics(text in "[\\[\\]<>=.,'@_a-c0-9 ()+*/#:\n-]{0,60}") {
            let _ = parse_rows(&text);
        }

        /// Neither does arbitrary text.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
            let _ = parse_rows(&text);
        }

        /// Random statements built from tokens never make the parser panic.
        #[test]
        fn random_token_soup_never_panics(tokens in proptest::collection::vec(
            prop::sample::select(vec![
                "tensor", "numel", "leaf", "param", "x", "y", "b", "ceil", "min", "[", "]", "<>", "<..r>", "..r",
                "'a", "_", "3", "0", "@", "rgb", ",", "(", ")", "+", "-", "*", "/", "<=", ">=", "=", ":", "\n",
            ]),
            0..24,
        )) {
            let text = format!("tensor x : [1]\ntensor y : [..r]\n{}", tokens.join(" "));
            let _ = parse_rows(&text);
        }

        /// Printed statements parse back to themselves.
        #[test]
        fn printed_statements_parse_back(mut kinds in proptest::collection::vec(statement_kind(), 1..8)) {
            for (i, kind) in kinds.iter_mut().enumerate() {
                if let StatementKind::Tensor { name, .. } = kind {
                    *name = format!("{name}_{i}");
                }
            }
            let mut text = String::from("tensor t0 : [1]\ntensor t1 : leaf [..r]\n");
            for kind in &kinds {
                text.push_str(&kind.to_string());
                text.push('\n');
            }
            let file = parse_rows(&text).map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
            let parsed: Vec<_> = file.statements.into_iter().skip(2).map(|s| s.kind).collect();
            prop_assert_eq!(parsed, kinds, "{}", text);
        }
    }

    fn size_expr() -> impl Strategy<Value = SizeExpr> {
        let leaf = prop_oneof![
            prop::sample::select(vec!["batch", "seq", "h", "w.1"]).prop_map(SizeExpr::symbol),
            (-3i64..6).prop_map(SizeExpr::constant),
        ];
        leaf.prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_filter_map("overflow", |(a, b)| a.add(&b)),
                (inner.clone(), inner.clone()).prop_filter_map("overflow", |(a, b)| a.mul(&b)),
                (inner.clone(), 1u64..4).prop_filter_map("overflow", |(a, d)| a.floor_div(d)),
                (inner.clone(), 1u64..4).prop_filter_map("overflow", |(a, d)| a.ceil_div(d)),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| SizeExpr::min(&a, &b)),
                (inner.clone(), inner).prop_map(|(a, b)| SizeExpr::max(&a, &b)),
            ]
        })
    }

    fn dim_syntax() -> impl Strategy<Value = DimSyntax> {
        let basis = prop_oneof![
            Just(Basis::Default),
            prop::sample::select(vec!["rgb", "DATA_BATCH", "h"]).prop_map(|t| Basis::Named(t.into()))
        ];
        let size = prop_oneof![
            (1u64..8).prop_map(Size::Known),
            size_expr().prop_map(|e| match e.as_constant() {
                Some(n) if n >= 1 => Size::Known(n.unsigned_abs()),
                Some(_) => Size::Known(1),
                None => Size::Symbolic(Box::new(e)),
            }),
        ];
        prop_oneof![
            (size, basis).prop_map(|(size, basis)| DimSyntax::Known { size, basis }),
            Just(DimSyntax::Unit),
            prop::sample::select(vec!["a", "k", "x.y"]).prop_map(|n| DimSyntax::Var(n.into())),
        ]
    }

    fn row_syntax() -> impl Strategy<Value = RowSyntax> {
        let dims = || proptest::collection::vec(dim_syntax(), 0..3);
        let var = proptest::option::of(prop::sample::select(vec!["r", "s"]).prop_map(String::from));
        (dims(), var, dims()).prop_map(|(leading, var, trailing)| RowSyntax { leading, var, trailing })
    }

    fn operand() -> impl Strategy<Value = Operand> {
        prop_oneof![
            prop::sample::select(vec!["t0", "t1"]).prop_map(|n| Operand::Tensor(n.into())),
            row_syntax().prop_map(Operand::Row),
        ]
    }

    fn statement_kind() -> impl Strategy<Value = StatementKind> {
        let kind = prop_oneof![Just(TensorKind::Leaf), Just(TensorKind::Param), Just(TensorKind::Interior)];
        prop_oneof![
            (prop::sample::select(vec!["u0", "u1", "u2"]), kind, row_syntax())
                .prop_map(|(name, kind, row)| { StatementKind::Tensor { name: name.into(), kind, row } }),
            (operand(), operand()).prop_map(|(a, b)| StatementKind::RowLe(a, b)),
            (operand(), operand()).prop_map(|(a, b)| StatementKind::RowEq(a, b)),
            (dim_syntax(), dim_syntax()).prop_map(|(a, b)| StatementKind::DimLe(a, b)),
            (dim_syntax(), dim_syntax()).prop_map(|(a, b)| StatementKind::DimEq(a, b)),
            (operand(), operand()).prop_map(|(a, b)| StatementKind::NumelEq(a, b)),
        ]
    }
}
