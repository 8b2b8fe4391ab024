//! Errors from reading printed TorchScript code. The lexer and the parser
//! report a [`SyntaxError`] (a position and what went wrong);
//! [`super::parse_file`] adds the entry's path and returns a [`CodeError`]
//! that reads `code/__torch__/foo.py:12:5: expected ')' but found 'def'`.

/// Why a code file could not be parsed, with the file and the position.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{col}: {what}")]
pub struct CodeError {
    /// The archive entry (`code/__torch__/foo.py`).
    pub path: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in bytes.
    pub col: u32,
    /// What was wrong.
    pub what: String,
}

/// A problem at a position of the source, before the path is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in bytes.
    pub col: u32,
    /// What was wrong.
    pub what: String,
}

impl SyntaxError {
    /// A problem at `line`:`col`.
    pub fn new(line: u32, col: u32, what: impl Into<String>) -> Self {
        SyntaxError { line, col, what: what.into() }
    }

    /// The same problem, located in the file `path`.
    pub fn in_file(self, path: &str) -> CodeError {
        CodeError { path: path.to_string(), line: self.line, col: self.col, what: self.what }
    }
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.what)
    }
}
