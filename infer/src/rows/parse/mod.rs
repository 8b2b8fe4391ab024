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
//! [`SizeExpr`](diamond_ir::term::SizeExpr); a constant must be at least 1. Nesting and the size of the
//! expanded polynomial are bounded, so that no input makes the parser panic,
//! overflow its stack or run for long.

mod lex;
mod size;
mod statement;
#[cfg(test)]
mod tests;

use super::syntax::{RowsFile, Span, Statement, StatementKind};
use lex::{collect, lex, Tok, Token};
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

/// The cursor and the errors every part of the parser shares.
impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<&Tok> {
        self.peek_nth(0)
    }

    pub(super) fn peek_nth(&self, n: usize) -> Option<&Tok> {
        self.tokens.get(self.pos + n).map(|t| &t.tok)
    }

    pub(super) fn bump(&mut self) {
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
    }

    /// Where the current token starts (the end of the line after the last).
    pub(super) fn here(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.eol, |t| t.start)
    }

    /// Where the last consumed token ends.
    pub(super) fn prev_end(&self) -> usize {
        match self.pos.checked_sub(1).and_then(|p| self.tokens.get(p)) {
            Some(t) => t.end,
            None => self.here(),
        }
    }

    pub(super) fn text(&self, start: usize, end: usize) -> String {
        collect(self.chars, start, end)
    }

    pub(super) fn describe(&self, token: Option<&Token>) -> String {
        match token {
            None => "end of line".to_string(),
            Some(Token { tok: Tok::DimVar(name), .. }) => format!("dimension variable '{name}"),
            Some(t) => format!("'{}'", self.text(t.start, t.end)),
        }
    }

    pub(super) fn found(&self) -> String {
        self.describe(self.tokens.get(self.pos))
    }

    pub(super) fn error(&self, at: usize, message: impl Into<String>) -> ParseError {
        error(self.line, at, message)
    }

    pub(super) fn error_here(&self, message: impl Into<String>) -> ParseError {
        self.error(self.here(), message)
    }

    /// "expected WHAT, found …" at the current token.
    pub(super) fn expected(&self, what: &str) -> ParseError {
        self.error_here(format!("expected {what}, found {}", self.found()))
    }

    /// "expected WHAT after 'PREVIOUS', found …" at the current token.
    pub(super) fn expected_after(&self, what: &str) -> ParseError {
        let previous = match self.pos.checked_sub(1).and_then(|p| self.tokens.get(p)) {
            Some(t) => format!(" after '{}'", self.text(t.start, t.end)),
            None => String::new(),
        };
        self.error_here(format!("expected {what}{previous}, found {}", self.found()))
    }

    pub(super) fn unknown_tensor(&self, name: &str, at: usize) -> ParseError {
        self.error(at, format!("unknown tensor '{name}'; declare it with `tensor {name} : ...`"))
    }

    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error_here("size expression nested too deeply"));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }
}
