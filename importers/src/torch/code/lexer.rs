//! Tokens of the TorchScript Python subset, with indentation. [`tokenize`]
//! turns source text into names, numbers, strings and operators, each with
//! its 1-based line and byte column, plus the `NEWLINE`, `INDENT` and
//! `DEDENT` tokens Python's grammar is written in. Newlines inside `()`, `[]`
//! and `{}` and after a backslash join lines; blank and comment-only lines
//! are skipped. The input is hostile: every problem is a [`SyntaxError`],
//! indentation depth and the token count are bounded.

use super::error::SyntaxError;

/// Indentation levels the lexer accepts before refusing the input.
const MAX_INDENT_LEVELS: usize = 1000;

/// Operators and delimiters, longest first so that the first match wins.
const OPERATORS: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "...", "**", "//", "<<", ">>", "<=", ">=", "==", "!=", "->", "+=", "-=", "*=", "/=",
    "%=", "@=", "&=", "|=", "^=", ":=", "+", "-", "*", "/", "%", "@", "&", "|", "^", "~", "<", ">", "(", ")", "[", "]",
    "{", "}", ",", ":", ".", ";", "=",
];

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// An identifier or a keyword (`x`, `def`, `None`).
    Name(String),
    /// An integer literal without sign. It is kept unsigned so that the
    /// parser can read `-9223372036854775808`.
    Int(u64),
    /// A float literal (`0.10000000000000001`, `1e-05`, `0.`).
    Float(f64),
    /// A string literal with its escapes decoded.
    Str(String),
    /// An operator or delimiter, as written (`+`, `**=`, `(`, `->`).
    Op(&'static str),
    /// The end of a logical line.
    Newline,
    /// The start of a more indented block.
    Indent,
    /// The end of an indented block.
    Dedent,
    /// The end of the input.
    Eof,
}

/// One token and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// What it is.
    pub kind: TokenKind,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in bytes.
    pub col: u32,
    /// Byte offset of its first character in the source.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
}

impl Token {
    /// Whether this is the operator `op`.
    pub fn is_op(&self, op: &str) -> bool {
        matches!(self.kind, TokenKind::Op(o) if o == op)
    }

    /// Whether this is the name (or keyword) `name`.
    pub fn is_name(&self, name: &str) -> bool {
        matches!(&self.kind, TokenKind::Name(n) if n == name)
    }
}

/// Splits `text` into tokens, ending with `NEWLINE`, the `DEDENT`s that
/// close open blocks, and `EOF`.
pub fn tokenize(text: &str) -> Result<Vec<Token>, SyntaxError> {
    Lexer::new(text).run()
}

/// The byte of a one-letter escape (`\n` is a line feed), if `kind` is one.
fn simple_escape(kind: u8) -> Option<u8> {
    match kind {
        b'\\' | b'\'' | b'"' => Some(kind),
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        _ => None,
    }
}

/// The state of one pass over the source.
struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    line_start: usize,
    /// How many brackets are open; newlines inside them join lines.
    open_brackets: usize,
    /// The indentation widths of the open blocks, `0` at the bottom.
    indents: Vec<usize>,
    /// Whether the next character starts a physical line whose indentation
    /// still has to be measured.
    at_line_start: bool,
    tokens: Vec<Token>,
    max_tokens: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Lexer {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            line: 1,
            line_start: 0,
            open_brackets: 0,
            indents: vec![0],
            at_line_start: true,
            tokens: Vec::new(),
            max_tokens: text.len().saturating_mul(2).saturating_add(16),
        }
    }

    fn run(mut self) -> Result<Vec<Token>, SyntaxError> {
        loop {
            if self.at_line_start && self.open_brackets == 0 {
                self.measure_indentation()?;
            }
            self.skip_blanks();
            let Some(&byte) = self.bytes.get(self.pos) else { break };
            match byte {
                b'#' => self.skip_comment(),
                b'\n' | b'\r' => self.end_physical_line()?,
                b'\\' => self.join_lines()?,
                b'"' | b'\'' => self.lex_string(byte)?,
                b'0'..=b'9' => self.lex_number()?,
                b'.' if self.bytes.get(self.pos + 1).is_some_and(u8::is_ascii_digit) => self.lex_number()?,
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => self.lex_name()?,
                _ => self.lex_operator()?,
            }
        }
        self.finish()
    }

    /// The column of byte offset `pos` on the current line.
    fn col_at(&self, pos: usize) -> u32 {
        u32::try_from(pos.saturating_sub(self.line_start) + 1).unwrap_or(u32::MAX)
    }

    fn error_at(&self, pos: usize, what: impl Into<String>) -> SyntaxError {
        SyntaxError::new(self.line, self.col_at(pos), what)
    }

    /// Appends a token that spans `start..self.pos` on the current line.
    fn push(&mut self, kind: TokenKind, start: usize) -> Result<(), SyntaxError> {
        let token = Token { kind, line: self.line, col: self.col_at(start), start, end: self.pos };
        self.push_token(token)
    }

    fn push_token(&mut self, token: Token) -> Result<(), SyntaxError> {
        if self.tokens.len() >= self.max_tokens {
            return Err(SyntaxError::new(token.line, token.col, "too many tokens for the size of the input"));
        }
        self.tokens.push(token);
        Ok(())
    }

    fn skip_blanks(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\x0c')) {
            self.pos += 1;
        }
    }

    fn skip_comment(&mut self) {
        while !matches!(self.bytes.get(self.pos), None | Some(b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Consumes `\n`, `\r\n` or `\r` and moves to the next line.
    fn consume_line_break(&mut self) {
        if self.bytes.get(self.pos) == Some(&b'\r') && self.bytes.get(self.pos + 1) == Some(&b'\n') {
            self.pos += 2;
        } else {
            self.pos += 1;
        }
        self.line = self.line.saturating_add(1);
        self.line_start = self.pos;
    }

    /// A line break outside brackets ends the logical line, unless the line
    /// held no token (blank, comment only) or one was already ended.
    fn end_physical_line(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        let ends_logical_line = self.open_brackets == 0 && self.last_token_is_content();
        if ends_logical_line {
            self.push(TokenKind::Newline, start)?;
        }
        self.consume_line_break();
        self.at_line_start = self.open_brackets == 0;
        Ok(())
    }

    fn last_token_is_content(&self) -> bool {
        self.tokens
            .last()
            .is_some_and(|t| !matches!(t.kind, TokenKind::Newline | TokenKind::Indent | TokenKind::Dedent))
    }

    /// A backslash right before a line break joins the two lines.
    fn join_lines(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        self.pos += 1;
        if !matches!(self.bytes.get(self.pos), Some(b'\n' | b'\r')) {
            return Err(self.error_at(start, "a backslash outside a string must end the line"));
        }
        self.consume_line_break();
        Ok(())
    }

    /// At the start of a line outside brackets: compares the line's
    /// indentation with the open blocks and emits `INDENT` or `DEDENT`s.
    /// Blank and comment-only lines leave the blocks alone.
    fn measure_indentation(&mut self) -> Result<(), SyntaxError> {
        let mut width = 0usize;
        let mut pos = self.pos;
        loop {
            match self.bytes.get(pos) {
                Some(b' ') => width += 1,
                Some(b'\t') => width = (width / 8 + 1) * 8,
                Some(b'\x0c') => width = 0,
                _ => break,
            }
            pos += 1;
        }
        if matches!(self.bytes.get(pos), None | Some(b'\n' | b'\r' | b'#')) {
            self.pos = pos;
            return Ok(());
        }
        self.pos = pos;
        self.at_line_start = false;
        self.change_indentation(width)
    }

    fn change_indentation(&mut self, width: usize) -> Result<(), SyntaxError> {
        let current = self.indents.last().copied().unwrap_or(0);
        if width > current {
            if self.indents.len() > MAX_INDENT_LEVELS {
                return Err(self.error_at(self.pos, "indentation nested too deep"));
            }
            self.indents.push(width);
            return self.push(TokenKind::Indent, self.pos);
        }
        while self.indents.last().is_some_and(|&open| open > width) {
            self.indents.pop();
            self.push(TokenKind::Dedent, self.pos)?;
        }
        if self.indents.last() != Some(&width) {
            return Err(self.error_at(self.pos, "unindent does not match any outer indentation level"));
        }
        Ok(())
    }

    /// Closes the last line and every open block. Inside an unclosed
    /// bracket only `EOF` follows, so the parser reports "end of file".
    fn finish(mut self) -> Result<Vec<Token>, SyntaxError> {
        if self.open_brackets > 0 {
            self.push(TokenKind::Eof, self.pos)?;
            return Ok(self.tokens);
        }
        if self.last_token_is_content() {
            self.push(TokenKind::Newline, self.pos)?;
        }
        while self.indents.len() > 1 {
            self.indents.pop();
            self.push(TokenKind::Dedent, self.pos)?;
        }
        self.push(TokenKind::Eof, self.pos)?;
        Ok(self.tokens)
    }

    fn lex_name(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            self.pos += 1;
        }
        let name = self.text[start..self.pos].to_string();
        self.push(TokenKind::Name(name), start)
    }

    fn lex_operator(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        let rest = &self.bytes[start..];
        let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(op.as_bytes())) else {
            let found = self.text[start..].chars().next().unwrap_or('?');
            return Err(self.error_at(start, format!("unexpected character {found:?}")));
        };
        self.pos += op.len();
        match *op {
            "(" | "[" | "{" => self.open_brackets += 1,
            ")" | "]" | "}" => self.open_brackets = self.open_brackets.saturating_sub(1),
            _ => {}
        }
        self.push(TokenKind::Op(op), start)
    }

    fn lex_number(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        let kind = match self.radix_prefix() {
            Some(radix) => self.lex_radix_int(start, radix)?,
            None => self.lex_decimal(start)?,
        };
        if self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
            return Err(self.error_at(start, format!("invalid number literal '{}'", self.literal_prefix(start))));
        }
        self.push(kind, start)
    }

    /// The radix of a `0x`, `0o` or `0b` prefix at the current position.
    fn radix_prefix(&self) -> Option<u32> {
        if self.bytes.get(self.pos) != Some(&b'0') {
            return None;
        }
        match self.bytes.get(self.pos + 1) {
            Some(b'x' | b'X') => Some(16),
            Some(b'o' | b'O') => Some(8),
            Some(b'b' | b'B') => Some(2),
            _ => None,
        }
    }

    /// `0x1F`, `0o17`, `0b101`.
    fn lex_radix_int(&mut self, start: usize, radix: u32) -> Result<TokenKind, SyntaxError> {
        self.pos += 2;
        let digits_start = self.pos;
        while self.bytes.get(self.pos).is_some_and(|b| (*b as char).is_digit(radix)) {
            self.pos += 1;
        }
        let digits = &self.text[digits_start..self.pos];
        if digits.is_empty() {
            return Err(self.error_at(start, format!("invalid number literal '{}'", self.literal_prefix(start))));
        }
        match u64::from_str_radix(digits, radix) {
            Ok(value) => Ok(TokenKind::Int(value)),
            Err(_) => Err(self.int_too_large(start)),
        }
    }

    /// `12`, `0.5`, `0.`, `.5`, `1e-05`, `1.0000000000000001e+301`.
    fn lex_decimal(&mut self, start: usize) -> Result<TokenKind, SyntaxError> {
        self.skip_digits();
        let mut is_float = false;
        if self.bytes.get(self.pos) == Some(&b'.') {
            is_float = true;
            self.pos += 1;
            self.skip_digits();
        }
        if matches!(self.bytes.get(self.pos), Some(b'e' | b'E')) {
            is_float = true;
            self.lex_exponent(start)?;
        }
        let literal = &self.text[start..self.pos];
        if is_float {
            return literal
                .parse::<f64>()
                .map(TokenKind::Float)
                .map_err(|_| self.error_at(start, format!("invalid float literal '{literal}'")));
        }
        literal.parse::<u64>().map(TokenKind::Int).map_err(|_| self.int_too_large(start))
    }

    fn lex_exponent(&mut self, start: usize) -> Result<(), SyntaxError> {
        self.pos += 1;
        if matches!(self.bytes.get(self.pos), Some(b'+' | b'-')) {
            self.pos += 1;
        }
        if !self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Err(self.error_at(start, format!("malformed exponent in '{}'", self.literal_prefix(start))));
        }
        self.skip_digits();
        Ok(())
    }

    fn skip_digits(&mut self) {
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
    }

    fn int_too_large(&self, start: usize) -> SyntaxError {
        self.error_at(start, format!("integer literal {} does not fit in 64 bits", self.literal_prefix(start)))
    }

    /// The literal that starts at `start`, cut short for messages.
    fn literal_prefix(&self, start: usize) -> String {
        let end = self.bytes[start..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'-')))
            .map_or(self.bytes.len(), |n| start + n);
        let literal = &self.text[start..end];
        if literal.len() > 40 {
            format!("{}...", &literal[..40])
        } else {
            literal.to_string()
        }
    }

    /// A `'...'` or `"..."` literal on one line. Escapes decode to bytes
    /// (TorchScript strings are byte strings: the printer writes a
    /// non-printable byte as `\ooo` octal); the bytes are read as UTF-8,
    /// invalid sequences replaced.
    fn lex_string(&mut self, quote: u8) -> Result<(), SyntaxError> {
        let start = self.pos;
        let start_line = self.line;
        let start_col = self.col_at(start);
        self.pos += 1;
        let mut value = Vec::new();
        loop {
            match self.bytes.get(self.pos) {
                None | Some(b'\n' | b'\r') => {
                    return Err(SyntaxError::new(start_line, start_col, "unterminated string literal"));
                }
                Some(&b) if b == quote => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => self.lex_escape(&mut value)?,
                Some(&b) => {
                    value.push(b);
                    self.pos += 1;
                }
            }
        }
        let text = String::from_utf8_lossy(&value).into_owned();
        self.push_token(Token { kind: TokenKind::Str(text), line: start_line, col: start_col, start, end: self.pos })
    }

    /// One escape after a backslash inside a string, appended to `value`.
    /// An unknown escape keeps its backslash, as in Python.
    fn lex_escape(&mut self, value: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let backslash = self.pos;
        self.pos += 1;
        let Some(&kind) = self.bytes.get(self.pos) else {
            return Err(self.error_at(backslash, "unterminated string literal"));
        };
        if matches!(kind, b'\n' | b'\r') {
            self.consume_line_break();
            return Ok(());
        }
        self.pos += 1;
        if let Some(byte) = simple_escape(kind) {
            value.push(byte);
            return Ok(());
        }
        match kind {
            b'0'..=b'7' => self.lex_octal_escape(kind, value),
            b'x' => {
                let byte = self.hex_escape(backslash, 2)?;
                value.push(byte as u8);
            }
            b'u' => self.push_code_point(backslash, 4, value)?,
            b'U' => self.push_code_point(backslash, 8, value)?,
            _ => {
                value.push(b'\\');
                self.pos -= 1;
            }
        }
        Ok(())
    }

    /// `\o`, `\oo` or `\ooo`: one byte (the first digit is already read).
    fn lex_octal_escape(&mut self, first: u8, value: &mut Vec<u8>) {
        let mut code = u32::from(first - b'0');
        for _ in 0..2 {
            match self.bytes.get(self.pos) {
                Some(&d @ b'0'..=b'7') => {
                    code = code * 8 + u32::from(d - b'0');
                    self.pos += 1;
                }
                _ => break,
            }
        }
        value.push((code & 0xff) as u8);
    }

    /// Reads exactly `digits` hex digits after `\x`, `\u` or `\U`.
    fn hex_escape(&mut self, backslash: usize, digits: usize) -> Result<u32, SyntaxError> {
        let end = self.pos + digits;
        let hex = self.text.get(self.pos..end).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(hex) = hex else {
            return Err(self.error_at(backslash, format!("escape needs {digits} hex digits")));
        };
        let code = u32::from_str_radix(hex, 16).map_err(|_| self.error_at(backslash, "invalid hex escape"))?;
        self.pos = end;
        Ok(code)
    }

    fn push_code_point(&mut self, backslash: usize, digits: usize, value: &mut Vec<u8>) -> Result<(), SyntaxError> {
        let code = self.hex_escape(backslash, digits)?;
        let Some(c) = char::from_u32(code) else {
            return Err(self.error_at(backslash, format!("\\{code:x} is not a Unicode scalar value")));
        };
        let mut buffer = [0u8; 4];
        value.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        tokenize(text).unwrap().into_iter().map(|t| t.kind).collect()
    }

    fn name(n: &str) -> TokenKind {
        TokenKind::Name(n.to_string())
    }

    #[test]
    fn indentation_becomes_indent_and_dedent() {
        let text = "if a:\n  b\n\n  # note\n  c\nd\n";
        let expected = vec![
            name("if"),
            name("a"),
            TokenKind::Op(":"),
            TokenKind::Newline,
            TokenKind::Indent,
            name("b"),
            TokenKind::Newline,
            name("c"),
            TokenKind::Newline,
            TokenKind::Dedent,
            name("d"),
            TokenKind::Newline,
            TokenKind::Eof,
        ];
        assert_eq!(kinds(text), expected);
    }

    #[test]
    fn brackets_and_backslash_join_lines() {
        let text = "f(a,\n    b) + \\\n  c";
        let expected = vec![
            name("f"),
            TokenKind::Op("("),
            name("a"),
            TokenKind::Op(","),
            name("b"),
            TokenKind::Op(")"),
            TokenKind::Op("+"),
            name("c"),
            TokenKind::Newline,
            TokenKind::Eof,
        ];
        assert_eq!(kinds(text), expected);
    }

    #[test]
    fn open_blocks_close_at_end_of_input() {
        let got = kinds("def f():\n  if x:\n    pass");
        let tail: Vec<_> = got[got.len() - 4..].to_vec();
        assert_eq!(tail, vec![TokenKind::Newline, TokenKind::Dedent, TokenKind::Dedent, TokenKind::Eof]);
    }

    #[test]
    fn numbers() {
        let got = kinds("0 12 0x1F 0.10000000000000001 1.0000000000000001e-05 0. .5 2E3 18446744073709551615");
        let expected = vec![
            TokenKind::Int(0),
            TokenKind::Int(12),
            TokenKind::Int(31),
            TokenKind::Float(0.1),
            TokenKind::Float(1e-05),
            TokenKind::Float(0.0),
            TokenKind::Float(0.5),
            TokenKind::Float(2000.0),
            TokenKind::Int(u64::MAX),
            TokenKind::Newline,
            TokenKind::Eof,
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn bad_numbers_are_errors() {
        let err = tokenize("x = 18446744073709551616").unwrap_err();
        assert_eq!((err.line, err.col), (1, 5));
        assert!(err.what.contains("does not fit in 64 bits"), "{}", err.what);
        assert!(tokenize("1e+").unwrap_err().what.contains("exponent"));
        assert!(tokenize("12abc").unwrap_err().what.contains("invalid number"));
        assert!(tokenize("0x").unwrap_err().what.contains("invalid number"));
    }

    #[test]
    fn operators_longest_first() {
        let got = kinds("a //= b ** c -> d ... e != f >>= g");
        let ops: Vec<_> =
            got.into_iter().filter_map(|k| if let TokenKind::Op(o) = k { Some(o) } else { None }).collect();
        assert_eq!(ops, vec!["//=", "**", "->", "...", "!=", ">>="]);
    }

    #[test]
    fn string_escapes() {
        let got = kinds(r#""a\"b\'\n\t\\" 'x"y' "\177\x41\u00e9\q""#);
        assert_eq!(got[0], TokenKind::Str("a\"b'\n\t\\".to_string()));
        assert_eq!(got[1], TokenKind::Str("x\"y".to_string()));
        assert_eq!(got[2], TokenKind::Str("\x7fA\u{e9}\\q".to_string()));
    }

    #[test]
    fn unterminated_string_points_at_its_start() {
        let err = tokenize("x = 1\ny = \"abc\nz").unwrap_err();
        assert_eq!((err.line, err.col, err.what.as_str()), (2, 5, "unterminated string literal"));
    }

    #[test]
    fn inconsistent_dedent_is_an_error() {
        let err = tokenize("if a:\n    b\n  c\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.what.contains("unindent"), "{}", err.what);
    }

    #[test]
    fn positions_are_line_and_byte_column() {
        let tokens = tokenize("a = 1\n  \n\tb").unwrap();
        let b = tokens.iter().find(|t| t.is_name("b")).unwrap();
        assert_eq!((b.line, b.col), (3, 2));
    }

    #[test]
    fn odd_characters_are_errors() {
        let err = tokenize("a = $").unwrap_err();
        assert_eq!((err.col, err.what.as_str()), (5, "unexpected character '$'"));
        assert!(tokenize("a = é").unwrap_err().what.contains("'é'"));
        assert!(tokenize("a \\ b").unwrap_err().what.contains("backslash"));
    }
}
