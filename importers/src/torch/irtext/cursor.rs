//! A read position in IR text: peeking, consuming, skipping blanks, and
//! errors that name the line and column where the reader stands. Positions
//! are byte offsets; lines and columns (both 1-based, columns in characters)
//! are worked out only when an error or a node needs them.

use super::IrTextError;

/// Characters of a value name after `%` (`x.1`, `self`, `input.3`, `42`).
pub(super) fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '.'
}

/// Characters of an identifier (attribute names, type names, op names).
pub(super) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Spaces within a line: everything blank except the newline itself.
fn is_inline_space(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\r'
}

/// The reader's position in one text.
pub(super) struct Cursor<'t> {
    path: &'t str,
    text: &'t str,
    pos: usize,
    /// Byte offset where each line starts; `line_starts[0] == 0`.
    line_starts: Vec<usize>,
}

impl<'t> Cursor<'t> {
    /// A cursor at the start of `text`, which came from `path`.
    pub(super) fn new(path: &'t str, text: &'t str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Cursor { path, text, pos: 0, line_starts }
    }

    /// The byte offset of the read position.
    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    /// The text from `start` up to the read position.
    pub(super) fn since(&self, start: usize) -> &'t str {
        &self.text[start..self.pos]
    }

    /// The unread text.
    pub(super) fn rest(&self) -> &'t str {
        &self.text[self.pos..]
    }

    /// The next character, unread.
    pub(super) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// The character after the next one, unread.
    pub(super) fn peek_second(&self) -> Option<char> {
        self.rest().chars().nth(1)
    }

    /// Whether everything has been read.
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    /// Whether the unread text starts with `s`.
    pub(super) fn starts_with(&self, s: &str) -> bool {
        self.rest().starts_with(s)
    }

    /// Reads one character.
    pub(super) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    /// Reads `s` if the unread text starts with it.
    pub(super) fn eat(&mut self, s: &str) -> bool {
        let found = self.starts_with(s);
        if found {
            self.pos += s.len();
        }
        found
    }

    /// Reads `s`, or fails saying what was expected and what is there.
    pub(super) fn expect(&mut self, s: &str) -> Result<(), IrTextError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}`, found {}", self.found())))
        }
    }

    /// Reads characters while `keep` holds and returns them.
    pub(super) fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &'t str {
        let start = self.pos;
        while self.peek().is_some_and(&keep) {
            self.bump();
        }
        self.since(start)
    }

    /// Skips spaces and tabs, staying on the line.
    pub(super) fn skip_inline_space(&mut self) {
        self.take_while(is_inline_space);
    }

    /// Skips all blanks, newlines included.
    pub(super) fn skip_blanks(&mut self) {
        self.take_while(char::is_whitespace);
    }

    /// Whether the read position is at a newline or the end of input.
    pub(super) fn at_line_end(&self) -> bool {
        matches!(self.peek(), None | Some('\n'))
    }

    /// Reads the rest of the current line (not the newline), trimmed.
    pub(super) fn take_rest_of_line(&mut self) -> &'t str {
        self.take_while(|c| c != '\n').trim()
    }

    /// The 1-based line of byte offset `pos`.
    pub(super) fn line_at(&self, pos: usize) -> u32 {
        let line = self.line_starts.partition_point(|&start| start <= pos);
        u32::try_from(line).unwrap_or(u32::MAX)
    }

    /// The 1-based line of the read position.
    pub(super) fn line(&self) -> u32 {
        self.line_at(self.pos)
    }

    /// The 1-based column, in characters, of byte offset `pos`.
    fn column_at(&self, pos: usize) -> u32 {
        let line_index = self.line_starts.partition_point(|&start| start <= pos).saturating_sub(1);
        let line_start = self.line_starts.get(line_index).copied().unwrap_or(0);
        let chars = self.text.get(line_start..pos).map_or(0, |s| s.chars().count());
        u32::try_from(chars + 1).unwrap_or(u32::MAX)
    }

    /// An error at byte offset `pos`.
    pub(super) fn error_at(&self, pos: usize, what: impl Into<String>) -> IrTextError {
        IrTextError {
            path: self.path.to_string(),
            line: self.line_at(pos),
            col: self.column_at(pos),
            what: what.into(),
        }
    }

    /// An error at the read position.
    pub(super) fn error(&self, what: impl Into<String>) -> IrTextError {
        self.error_at(self.pos, what)
    }

    /// What stands at the read position, for messages: `` `text` ``,
    /// "end of line" or "end of input".
    pub(super) fn found(&self) -> String {
        match self.peek() {
            None => "end of input".to_string(),
            Some('\n') => "end of line".to_string(),
            Some(_) => {
                let line = self.rest().lines().next().unwrap_or("").trim_end();
                let shown: String = line.chars().take(24).collect();
                let more = if shown.len() < line.len() { "..." } else { "" };
                format!("`{shown}{more}`")
            }
        }
    }

    /// Reads a double-quoted string literal, quotes and escapes left as they
    /// are, and returns its text. The string must end on its line.
    pub(super) fn take_quoted(&mut self) -> Result<&'t str, IrTextError> {
        let start = self.pos;
        self.expect("\"")?;
        loop {
            match self.bump() {
                Some('"') => return Ok(self.since(start)),
                Some('\\') if !self.at_line_end() => {
                    self.bump();
                }
                Some('\n') | None | Some('\\') => {
                    return Err(self.error_at(start, "string not closed on its line"));
                }
                Some(_) => {}
            }
        }
    }

    /// Reads raw text up to (not including) a character at bracket depth 0
    /// for which `stop` holds, keeping `()`, `[]`, `{}` (and `<>` when
    /// `angles` is set) balanced and skipping over string literals. The text
    /// may not cross a line end. `what` names the text for errors.
    pub(super) fn take_balanced(
        &mut self,
        what: &str,
        angles: bool,
        stop: impl Fn(&Self) -> bool,
    ) -> Result<&'t str, IrTextError> {
        let start = self.pos;
        let mut open: Vec<(char, usize)> = Vec::new();
        loop {
            if open.is_empty() && stop(self) {
                return Ok(self.since(start));
            }
            let here = self.pos;
            match self.peek() {
                None | Some('\n') => {
                    let at = open.last().map_or(start, |&(_, pos)| pos);
                    return Err(self.error_at(at, format!("{what} not closed on its line")));
                }
                Some('"') => {
                    self.take_quoted()?;
                }
                Some(c) => {
                    self.bump();
                    if let Some(close) = closer_of(c, angles) {
                        open.push((close, here));
                    } else if is_closer(c, angles) {
                        match open.pop() {
                            Some((expected, _)) if expected == c => {}
                            _ => return Err(self.error_at(here, format!("unbalanced `{c}` in {what}"))),
                        }
                    }
                }
            }
        }
    }
}

/// The closing bracket for an opening one.
fn closer_of(c: char, angles: bool) -> Option<char> {
    match c {
        '(' => Some(')'),
        '[' => Some(']'),
        '{' => Some('}'),
        '<' if angles => Some('>'),
        _ => None,
    }
}

/// Whether `c` closes a bracket.
fn is_closer(c: char, angles: bool) -> bool {
    matches!(c, ')' | ']' | '}') || (angles && c == '>')
}
