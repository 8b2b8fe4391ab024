//! The `.rows` lexer: one line (its comment already cut) into tokens —
//! identifiers, row variables (`..r`, `<..r`), numbers, punctuation — each
//! with the characters of the line it covers.

use super::{error, ParseError};

/// A token's kind and payload.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
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
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

pub(super) fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// The end of the identifier starting at `start` (`start` itself when none
/// starts there).
pub(super) fn ident_end(chars: &[char], start: usize) -> usize {
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

pub(super) fn describe_char(c: Option<char>) -> String {
    match c {
        Some(c) => format!("'{c}'"),
        None => "end of line".to_string(),
    }
}

/// The row variable name starting at `start`, after `prefix` (`..` or `<..`),
/// and where it ends.
pub(super) fn row_var_name(
    chars: &[char],
    start: usize,
    line: u32,
    prefix: &str,
) -> Result<(String, usize), ParseError> {
    let end = ident_end(chars, start);
    if end == start {
        let found = describe_char(chars.get(start).copied());
        return Err(error(line, start, format!("expected a row variable name after '{prefix}', found {found}")));
    }
    Ok((collect(chars, start, end), end))
}

pub(super) fn collect(chars: &[char], start: usize, end: usize) -> String {
    chars.get(start..end).unwrap_or_default().iter().collect()
}

/// Splits one line (comment already cut) into tokens.
pub(super) fn lex(line: u32, chars: &[char]) -> Result<Vec<Token>, ParseError> {
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
