//! The TorchScript Python subset parsed into [`super::ast`]. [`parse_file`]
//! reads one `code/**.py` entry of an archive: its classes (`__parameters__`,
//! `__buffers__`, typed attributes, constants, methods) and top-level
//! functions. Expressions follow Python's precedence, from the conditional
//! `a if c else b` down to calls, subscripts and attributes; statements are
//! the ones the printer emits. The input is hostile: recursion is bounded
//! ([`MAX_NESTING`]), nothing panics, and every error names the file, line
//! and column.

use super::ast::{Class, Expr, ExprKind, File, Function, Param, Stmt, StmtKind, TypeExpr};
use super::error::{CodeError, SyntaxError};
use super::lexer::{tokenize, Token, TokenKind};

/// How deeply expressions, blocks and types may nest before the parser
/// refuses the input ("nesting too deep").
pub const MAX_NESTING: usize = 200;

/// Python's keywords: never a variable name.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// The augmented assignments, as written.
const AUGMENTED_ASSIGNMENTS: &[&str] =
    &["+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>="];

/// `-9223372036854775808` is written as minus this literal.
const I64_MIN_MAGNITUDE: u64 = 1 << 63;

type Parsed<T> = Result<T, SyntaxError>;

/// The positional and the keyword arguments of a call.
type CallArguments = (Vec<Expr>, Vec<(String, Expr)>);

/// Parses the code file `text`, named `path` in errors
/// (`code/__torch__/foo.py:12:5: expected ')' but found 'def'`).
pub fn parse_file(path: &str, text: &str) -> Result<File, CodeError> {
    let tokens = tokenize(text).map_err(|e| e.in_file(path))?;
    Parser::new(text, tokens).file().map_err(|e| e.in_file(path))
}

fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name)
}

fn expr(kind: ExprKind, line: u32) -> Expr {
    Expr { kind, line }
}

// Binding strengths of the operators, loosest first.
const OR: u8 = 1;
const AND: u8 = 2;
const NOT: u8 = 3;
const COMPARE: u8 = 4;
const BIT_OR: u8 = 5;
const BIT_XOR: u8 = 6;
const BIT_AND: u8 = 7;
const SHIFT: u8 = 8;
const ARITH: u8 = 9;
const TERM: u8 = 10;
const UNARY: u8 = 11;
const POWER: u8 = 12;

/// The precedence of an infix operator token.
fn infix_precedence(op: &str) -> Option<u8> {
    match op {
        "<" | ">" | "==" | ">=" | "<=" | "!=" => Some(COMPARE),
        "|" => Some(BIT_OR),
        "^" => Some(BIT_XOR),
        "&" => Some(BIT_AND),
        "<<" | ">>" => Some(SHIFT),
        "+" | "-" => Some(ARITH),
        "*" | "/" | "//" | "%" | "@" => Some(TERM),
        "**" => Some(POWER),
        _ => None,
    }
}

/// Operators that extend one flat node rather than nest: `a and b and c`
/// is one [`ExprKind::BoolOp`], `a < b <= c` one [`ExprKind::Compare`].
fn chain_key(precedence: u8, op: &'static str) -> Option<&'static str> {
    match precedence {
        OR | AND => Some(op),
        COMPARE => Some("compare"),
        _ => None,
    }
}

/// `left op right`: a new node, or `right` appended to the flat chain
/// `left` when `extends`.
fn combine(mut left: Expr, op: &str, right: Expr, extends: bool) -> Expr {
    if extends {
        match &mut left.kind {
            ExprKind::BoolOp(_, operands) => {
                operands.push(right);
                return left;
            }
            ExprKind::Compare(_, rest) => {
                rest.push((op.to_string(), right));
                return left;
            }
            _ => {}
        }
    }
    let line = left.line;
    let kind = match infix_precedence(op) {
        _ if op == "or" || op == "and" => ExprKind::BoolOp(op.to_string(), vec![left, right]),
        Some(COMPARE) | None => ExprKind::Compare(Box::new(left), vec![(op.to_string(), right)]),
        Some(_) => ExprKind::BinOp(Box::new(left), op.to_string(), Box::new(right)),
    };
    expr(kind, line)
}

/// `op operand`, folding minus into a number literal.
fn unary(op: &str, operand: Expr, line: u32) -> Expr {
    let folded = match (op, &operand.kind) {
        ("-", ExprKind::Int(v)) => v.checked_neg().map(ExprKind::Int),
        ("-", ExprKind::Float(v)) => Some(ExprKind::Float(-v)),
        _ => None,
    };
    let kind = folded.unwrap_or_else(|| ExprKind::Unary(op.to_string(), Box::new(operand)));
    expr(kind, line)
}

/// A cursor over the tokens of one file.
struct Parser<'a> {
    text: &'a str,
    /// Never empty: the lexer ends every list with `EOF`.
    tokens: Vec<Token>,
    pos: usize,
    /// How deeply the parse is nested now; see [`MAX_NESTING`].
    depth: usize,
}

// Token access.
impl<'a> Parser<'a> {
    fn new(text: &'a str, tokens: Vec<Token>) -> Self {
        Parser { text, tokens, pos: 0, depth: 0 }
    }

    fn peek(&self) -> &Token {
        self.peek_ahead(0)
    }

    /// The token `ahead` places after the current one (`EOF` past the end).
    fn peek_ahead(&self, ahead: usize) -> &Token {
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[self.pos.saturating_add(ahead).min(last)]
    }

    /// Consumes the current token (never `EOF`) and gives its line.
    fn advance(&mut self) -> u32 {
        let line = self.peek().line;
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
        line
    }

    /// The token at index `at`, remembered with `self.pos` earlier.
    fn token(&self, at: usize) -> &Token {
        &self.tokens[at.min(self.tokens.len() - 1)]
    }

    /// The token before the current one (the last consumed).
    fn previous(&self) -> &Token {
        &self.tokens[self.pos.saturating_sub(1)]
    }

    fn at_op(&self, op: &str) -> bool {
        self.peek().is_op(op)
    }

    fn at_keyword(&self, keyword: &str) -> bool {
        self.peek().is_name(keyword)
    }

    fn at_kind(&self, kind: &TokenKind) -> bool {
        &self.peek().kind == kind
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let found = self.at_op(op);
        if found {
            self.advance();
        }
        found
    }

    fn eat_keyword(&mut self, keyword: &str) -> bool {
        let found = self.at_keyword(keyword);
        if found {
            self.advance();
        }
        found
    }

    /// Consumes the operator `op` and gives its line.
    fn expect_op(&mut self, op: &str) -> Parsed<u32> {
        if self.at_op(op) {
            Ok(self.advance())
        } else {
            Err(self.expected(&format!("'{op}'")))
        }
    }

    /// Consumes the keyword and gives its line.
    fn expect_keyword(&mut self, keyword: &str) -> Parsed<u32> {
        if self.at_keyword(keyword) {
            Ok(self.advance())
        } else {
            Err(self.expected(&format!("'{keyword}'")))
        }
    }

    fn expect_newline(&mut self) -> Parsed<()> {
        match self.peek().kind {
            TokenKind::Newline => {
                self.advance();
                Ok(())
            }
            // A file may end without a line break; the lexer adds one, but
            // be lenient where a block just closed.
            TokenKind::Eof | TokenKind::Dedent => Ok(()),
            _ => Err(self.expected("end of line")),
        }
    }

    fn expect_indent(&mut self) -> Parsed<()> {
        if self.at_kind(&TokenKind::Indent) {
            self.advance();
            Ok(())
        } else {
            Err(self.expected("an indented block"))
        }
    }

    /// A name that is not a keyword.
    fn expect_identifier(&mut self) -> Parsed<String> {
        match &self.peek().kind {
            TokenKind::Name(name) if !is_keyword(name) => {
                let name = name.clone();
                self.advance();
                Ok(name)
            }
            _ => Err(self.expected("a name")),
        }
    }

    /// Any name, keywords included (attribute names, dotted paths).
    fn expect_any_name(&mut self) -> Parsed<String> {
        match &self.peek().kind {
            TokenKind::Name(name) => {
                let name = name.clone();
                self.advance();
                Ok(name)
            }
            _ => Err(self.expected("a name")),
        }
    }

    /// "expected {what} but found {the current token}", at the current token.
    fn expected(&self, what: &str) -> SyntaxError {
        let token = self.peek();
        SyntaxError::new(token.line, token.col, format!("expected {what} but found {}", self.describe(token)))
    }

    fn error_at(token: &Token, what: impl Into<String>) -> SyntaxError {
        SyntaxError::new(token.line, token.col, what)
    }

    /// How a token reads in a message: its source text, quoted and cut short.
    fn describe(&self, token: &Token) -> String {
        match token.kind {
            TokenKind::Newline => "end of line".to_string(),
            TokenKind::Indent => "an unexpected indent".to_string(),
            TokenKind::Dedent => "the end of the block".to_string(),
            TokenKind::Eof => "end of file".to_string(),
            _ => {
                let source = self.text.get(token.start..token.end).unwrap_or("?");
                let mut shown: String = source.chars().take(30).collect();
                if shown.len() < source.len() {
                    shown.push_str("...");
                }
                format!("'{shown}'")
            }
        }
    }

    /// The source from the token at index `first` up to the last consumed one.
    fn source_since(&self, first: usize) -> String {
        let start = self.token(first).start;
        let end = self.previous().end.max(start);
        self.text.get(start..end).unwrap_or("").to_string()
    }

    /// Counts one more level of nesting; too many is an error.
    fn enter(&mut self) -> Parsed<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(Self::error_at(self.peek(), format!("nesting too deep (more than {MAX_NESTING} levels)")));
        }
        Ok(())
    }

    fn leave(&mut self, levels: usize) {
        self.depth = self.depth.saturating_sub(levels);
    }
}

// The file, classes and functions.
impl Parser<'_> {
    fn file(mut self) -> Parsed<File> {
        let mut file = File::default();
        loop {
            match &self.peek().kind {
                TokenKind::Eof => break,
                TokenKind::Newline => {
                    self.advance();
                }
                TokenKind::Indent => return Err(Self::error_at(self.peek(), "unexpected indent")),
                TokenKind::Name(n) if n == "class" => file.classes.push(self.class()?),
                TokenKind::Name(n) if n == "def" => file.functions.push(self.function()?),
                TokenKind::Op("@") => self.skip_decorator()?,
                // `op_version_set = 1`, `import torch`: checked, not kept.
                _ => self.statement(&mut Vec::new())?,
            }
        }
        Ok(file)
    }

    /// `@decorator` lines are read and dropped.
    fn skip_decorator(&mut self) -> Parsed<()> {
        self.expect_op("@")?;
        self.test()?;
        self.expect_newline()
    }

    fn class(&mut self) -> Parsed<Class> {
        let line = self.expect_keyword("class")?;
        let name = self.expect_identifier()?;
        let mut class = Class { name, line, ..Class::default() };
        if self.eat_op("(") {
            class.bases = self.class_bases()?;
        }
        self.expect_op(":")?;
        if self.eat_keyword("pass") {
            self.expect_newline()?;
            return Ok(class);
        }
        self.expect_newline()?;
        self.expect_indent()?;
        while !self.at_kind(&TokenKind::Dedent) && !self.at_kind(&TokenKind::Eof) {
            self.class_member(&mut class)?;
        }
        self.advance();
        Ok(class)
    }

    /// `Module)`, `NamedTuple)`, `)` after the opening parenthesis.
    fn class_bases(&mut self) -> Parsed<Vec<String>> {
        let mut bases = Vec::new();
        while !self.eat_op(")") {
            bases.push(self.dotted_name()?);
            if !self.eat_op(",") {
                self.expect_op(")")?;
                break;
            }
        }
        Ok(bases)
    }

    /// `a.b.c`: a name, then any names after dots.
    fn dotted_name(&mut self) -> Parsed<String> {
        let mut name = self.expect_identifier()?;
        while self.eat_op(".") {
            name.push('.');
            name.push_str(&self.expect_any_name()?);
        }
        Ok(name)
    }

    fn class_member(&mut self, class: &mut Class) -> Parsed<()> {
        match &self.peek().kind {
            TokenKind::Name(n) if n == "def" => class.methods.push(self.function()?),
            TokenKind::Name(n) if n == "pass" => {
                self.advance();
                self.expect_newline()?;
            }
            TokenKind::Op("@") => self.skip_decorator()?,
            TokenKind::Str(_) => {
                // A docstring.
                self.test()?;
                self.expect_newline()?;
            }
            TokenKind::Name(n) if !is_keyword(n) => self.class_declaration(class)?,
            _ => return Err(self.expected("a method, 'name : Type' or 'name = value'")),
        }
        Ok(())
    }

    /// `name : Type`, `name : Final[T] = value`, `name = value`,
    /// `__parameters__ = [...]`, `__annotations__["0"] = Type`.
    fn class_declaration(&mut self, class: &mut Class) -> Parsed<()> {
        let name = self.expect_identifier()?;
        if name == "__annotations__" && self.at_op("[") {
            return self.annotations_entry(class);
        }
        if self.eat_op(":") {
            let ty = self.type_expr()?;
            if self.eat_op("=") {
                class.constants.push((name, self.expr_list()?));
            } else {
                class.attributes.push((name, ty));
            }
        } else {
            self.expect_op("=")?;
            let value_at = self.pos;
            let value = self.expr_list()?;
            match name.as_str() {
                "__parameters__" => class.parameters = Self::string_list(&value, &name, self.token(value_at))?,
                "__buffers__" => class.buffers = Self::string_list(&value, &name, self.token(value_at))?,
                _ => class.constants.push((name, value)),
            }
        }
        self.expect_newline()
    }

    /// `__annotations__["0"] = __torch__.BasicBlock` (after the name): the
    /// type of an attribute whose name is not an identifier.
    fn annotations_entry(&mut self, class: &mut Class) -> Parsed<()> {
        self.expect_op("[")?;
        let TokenKind::Str(key) = self.peek().kind.clone() else {
            return Err(self.expected("a string"));
        };
        self.advance();
        self.expect_op("]")?;
        self.expect_op("=")?;
        let ty = self.type_expr()?;
        class.attributes.push((key, ty));
        self.expect_newline()
    }

    /// The strings of `["weight", "bias", ]`.
    fn string_list(value: &Expr, name: &str, at: &Token) -> Parsed<Vec<String>> {
        let ExprKind::List(items) = &value.kind else {
            return Err(Self::error_at(at, format!("{name} must be a list of strings")));
        };
        let strings = items.iter().map(|item| match &item.kind {
            ExprKind::Str(s) => Ok(s.clone()),
            _ => Err(Self::error_at(at, format!("{name} must be a list of strings"))),
        });
        strings.collect()
    }

    fn function(&mut self) -> Parsed<Function> {
        let line = self.expect_keyword("def")?;
        let name = self.expect_identifier()?;
        self.expect_op("(")?;
        let params = self.params()?;
        let returns = if self.eat_op("->") { Some(self.type_expr()?) } else { None };
        let body = self.block()?;
        Ok(Function { name, params, returns, body, line })
    }

    /// The parameters after `(`, through `)`.
    fn params(&mut self) -> Parsed<Vec<Param>> {
        let mut params = Vec::new();
        while !self.eat_op(")") {
            params.push(self.param()?);
            if !self.eat_op(",") {
                self.expect_op(")")?;
                break;
            }
        }
        Ok(params)
    }

    /// `self`, `x: Tensor`, `dim: int=1`.
    fn param(&mut self) -> Parsed<Param> {
        if self.at_op("*") || self.at_op("**") || self.at_op("/") {
            return Err(Self::error_at(self.peek(), "star and slash parameters are not supported"));
        }
        let name = self.expect_identifier()?;
        let ty = if self.eat_op(":") { Some(self.type_expr()?) } else { None };
        let default = if self.eat_op("=") { Some(self.test()?) } else { None };
        Ok(Param { name, ty, default })
    }

    /// `Tensor`, `List[int]`, `Tuple[()]`, `__torch__.foo.Bar`, `None`.
    fn type_expr(&mut self) -> Parsed<TypeExpr> {
        self.enter()?;
        let ty = self.type_expr_inner()?;
        self.leave(1);
        Ok(ty)
    }

    fn type_expr_inner(&mut self) -> Parsed<TypeExpr> {
        if let TokenKind::Str(forward) = &self.peek().kind {
            let name = forward.clone();
            self.advance();
            return Ok(TypeExpr::Name(name));
        }
        let name = if self.eat_keyword("None") { "None".to_string() } else { self.dotted_name()? };
        if !self.eat_op("[") {
            return Ok(TypeExpr::Name(name));
        }
        Ok(TypeExpr::Generic(name, self.type_args()?))
    }

    /// The arguments of `Head[...]` after `[`, through `]`; `[()]` is none.
    fn type_args(&mut self) -> Parsed<Vec<TypeExpr>> {
        if self.at_op("(") && self.peek_ahead(1).is_op(")") {
            self.advance();
            self.advance();
            self.expect_op("]")?;
            return Ok(Vec::new());
        }
        let mut args = Vec::new();
        while !self.eat_op("]") {
            args.push(self.type_expr()?);
            if !self.eat_op(",") {
                self.expect_op("]")?;
                break;
            }
        }
        Ok(args)
    }
}

// Statements.
impl Parser<'_> {
    /// `:` then an indented block, or simple statements on the same line.
    fn block(&mut self) -> Parsed<Vec<Stmt>> {
        self.expect_op(":")?;
        self.enter()?;
        let mut body = Vec::new();
        let parsed = if self.at_kind(&TokenKind::Newline) {
            self.indented_statements(&mut body)
        } else {
            self.simple_statements(&mut body)
        };
        self.leave(1);
        parsed.map(|()| body)
    }

    /// `NEWLINE INDENT statements DEDENT`, appended to `body`.
    fn indented_statements(&mut self, body: &mut Vec<Stmt>) -> Parsed<()> {
        self.advance();
        self.expect_indent()?;
        while !self.at_kind(&TokenKind::Dedent) && !self.at_kind(&TokenKind::Eof) {
            self.statement(body)?;
        }
        self.advance();
        Ok(())
    }

    /// One statement (several for `a; b`), appended to `out`.
    fn statement(&mut self, out: &mut Vec<Stmt>) -> Parsed<()> {
        let line = self.peek().line;
        let kind = match &self.peek().kind {
            TokenKind::Name(n) if n == "if" => self.if_statement(),
            TokenKind::Name(n) if n == "for" => self.for_statement(),
            TokenKind::Name(n) if n == "while" => self.while_statement(),
            TokenKind::Name(n) if n == "with" => self.with_statement(),
            TokenKind::Name(n) if n == "def" => self.nested_function(),
            TokenKind::Name(n) if n == "class" => {
                Err(Self::error_at(self.peek(), "a class inside a block is not supported"))
            }
            TokenKind::Op("@") => return self.skip_decorator(),
            _ => return self.simple_statements(out),
        };
        kind.map(|kind| out.push(Stmt { kind, line }))
    }

    fn nested_function(&mut self) -> Parsed<StmtKind> {
        Ok(StmtKind::FunctionDef(Box::new(self.function()?)))
    }

    /// `if c: ...` (or `elif c: ...`), its `elif`s nested in `orelse`.
    fn if_statement(&mut self) -> Parsed<StmtKind> {
        self.advance();
        let cond = self.test()?;
        let body = self.block()?;
        let orelse = self.else_branch()?;
        Ok(StmtKind::If { cond, body, orelse })
    }

    fn else_branch(&mut self) -> Parsed<Vec<Stmt>> {
        if self.at_keyword("elif") {
            let line = self.peek().line;
            self.enter()?;
            let kind = self.if_statement()?;
            self.leave(1);
            return Ok(vec![Stmt { kind, line }]);
        }
        if self.eat_keyword("else") {
            return self.block();
        }
        Ok(Vec::new())
    }

    fn for_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("for")?;
        let target_at = self.pos;
        let target = self.target_list()?;
        Self::check_target(&target, self.token(target_at))?;
        self.expect_keyword("in")?;
        let iter = self.expr_list()?;
        let body = self.block()?;
        Ok(StmtKind::For { target, iter, body })
    }

    fn while_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("while")?;
        let cond = self.test()?;
        let body = self.block()?;
        Ok(StmtKind::While { cond, body })
    }

    fn with_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("with")?;
        let item = self.test()?;
        let target = if self.eat_keyword("as") {
            let target_at = self.pos;
            let target = self.target_list()?;
            Self::check_target(&target, self.token(target_at))?;
            Some(target)
        } else {
            None
        };
        if self.at_op(",") {
            return Err(Self::error_at(self.peek(), "several context managers in one 'with' are not supported"));
        }
        let body = self.block()?;
        Ok(StmtKind::With { item, target, body })
    }

    /// `a; b; c` through the end of the line.
    fn simple_statements(&mut self, out: &mut Vec<Stmt>) -> Parsed<()> {
        loop {
            let line = self.peek().line;
            let kind = self.simple_statement()?;
            out.push(Stmt { kind, line });
            if !self.eat_op(";") || self.at_kind(&TokenKind::Newline) {
                break;
            }
        }
        self.expect_newline()
    }

    fn at_statement_end(&self) -> bool {
        matches!(self.peek().kind, TokenKind::Newline | TokenKind::Eof | TokenKind::Op(";"))
    }

    fn simple_statement(&mut self) -> Parsed<StmtKind> {
        let TokenKind::Name(word) = &self.peek().kind else {
            return self.expression_statement();
        };
        let kind = match word.as_str() {
            "pass" => StmtKind::Pass,
            "break" => StmtKind::Break,
            "continue" => StmtKind::Continue,
            "return" => return self.return_statement(),
            "raise" => return self.raise_statement(),
            "assert" => return self.assert_statement(),
            "global" | "nonlocal" | "import" | "from" | "del" => return Ok(self.statement_as_text()),
            _ => return self.expression_statement(),
        };
        self.advance();
        Ok(kind)
    }

    fn return_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("return")?;
        let value = if self.at_statement_end() { None } else { Some(self.expr_list()?) };
        Ok(StmtKind::Return(value))
    }

    fn raise_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("raise")?;
        let value = if self.at_statement_end() { None } else { Some(self.test()?) };
        Ok(StmtKind::Raise(value))
    }

    fn assert_statement(&mut self) -> Parsed<StmtKind> {
        self.expect_keyword("assert")?;
        let cond = self.test()?;
        let msg = if self.eat_op(",") { Some(self.test()?) } else { None };
        Ok(StmtKind::Assert { cond, msg })
    }

    /// `import x`, `global y`, `del z`: kept as their source text.
    fn statement_as_text(&mut self) -> StmtKind {
        let first = self.pos;
        while !self.at_statement_end() {
            self.advance();
        }
        StmtKind::Other(self.source_since(first))
    }

    /// An expression, `a = b = e`, `a, b, = e`, `a : T = e` or `a += e`.
    fn expression_statement(&mut self) -> Parsed<StmtKind> {
        let first = self.pos;
        let left = self.expr_list()?;
        if self.at_op(":") {
            return self.annotated_assignment(left, first);
        }
        if let Some(op) = self.augmented_operator() {
            Self::check_single_target(&left, self.token(first))?;
            self.advance();
            let value = self.expr_list()?;
            return Ok(StmtKind::AugAssign { target: left, op, value });
        }
        if !self.at_op("=") {
            return Ok(StmtKind::Expr(left));
        }
        Self::check_target(&left, self.token(first))?;
        let mut targets = vec![left];
        let mut value = None;
        while self.eat_op("=") {
            let start = self.pos;
            let next = self.expr_list()?;
            if let Some(previous) = value.replace(next) {
                Self::check_target(&previous, self.token(start))?;
                targets.push(previous);
            }
        }
        let value = value.ok_or_else(|| self.expected("an expression"))?;
        Ok(StmtKind::Assign { targets, value })
    }

    /// The operator of `+=` and the like, without `=`.
    fn augmented_operator(&self) -> Option<String> {
        let TokenKind::Op(op) = self.peek().kind else { return None };
        AUGMENTED_ASSIGNMENTS.contains(&op).then(|| op.trim_end_matches('=').to_string())
    }

    /// `a : T = e` becomes an assignment (the annotation is dropped);
    /// a bare `a : T` is kept as text.
    fn annotated_assignment(&mut self, target: Expr, first: usize) -> Parsed<StmtKind> {
        Self::check_single_target(&target, self.token(first))?;
        self.expect_op(":")?;
        self.type_expr()?;
        if !self.eat_op("=") {
            return Ok(StmtKind::Other(self.source_since(first)));
        }
        let value = self.expr_list()?;
        Ok(StmtKind::Assign { targets: vec![target], value })
    }

    /// A name, attribute or subscript, or a tuple or list of targets.
    fn check_target(target: &Expr, at: &Token) -> Parsed<()> {
        match &target.kind {
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                items.iter().try_for_each(|item| Self::check_target(item, at))
            }
            _ => Self::check_single_target(target, at),
        }
    }

    fn check_single_target(target: &Expr, at: &Token) -> Parsed<()> {
        match target.kind {
            ExprKind::Name(_) | ExprKind::Attribute(..) | ExprKind::Subscript(..) => Ok(()),
            _ => Err(Self::error_at(at, "cannot assign to this expression")),
        }
    }
}

// Expressions, loosest binding first.
impl Parser<'_> {
    /// Whether the current token can begin an expression (to tell
    /// `a, b` from the trailing comma of `a, b,`).
    fn starts_expression(&self) -> bool {
        match &self.peek().kind {
            TokenKind::Name(n) => !is_keyword(n) || matches!(n.as_str(), "True" | "False" | "None" | "not"),
            TokenKind::Int(_) | TokenKind::Float(_) | TokenKind::Str(_) => true,
            TokenKind::Op(op) => matches!(*op, "(" | "[" | "{" | "-" | "+" | "~" | "..."),
            _ => false,
        }
    }

    /// `a`, or `a, b` and `a, b,` as a tuple (assignment values, `return`).
    fn expr_list(&mut self) -> Parsed<Expr> {
        self.sequence(Self::test)
    }

    /// The targets of `for`: stops before `in`.
    fn target_list(&mut self) -> Parsed<Expr> {
        self.sequence(Self::bit_or)
    }

    fn sequence(&mut self, item: fn(&mut Self) -> Parsed<Expr>) -> Parsed<Expr> {
        let first = item(self)?;
        if !self.at_op(",") {
            return Ok(first);
        }
        let line = first.line;
        let mut items = vec![first];
        while self.eat_op(",") && self.starts_expression() {
            items.push(item(self)?);
        }
        Ok(expr(ExprKind::Tuple(items), line))
    }

    /// A full expression: `a if c else b` or anything binding tighter.
    fn test(&mut self) -> Parsed<Expr> {
        self.enter()?;
        let result = self.operators(OR).and_then(|then| self.maybe_conditional(then));
        self.leave(1);
        result
    }

    fn maybe_conditional(&mut self, then: Expr) -> Parsed<Expr> {
        if self.at_keyword("if") {
            self.conditional(then)
        } else {
            Ok(then)
        }
    }

    /// The rest of `then if cond else orelse`.
    fn conditional(&mut self, then: Expr) -> Parsed<Expr> {
        self.expect_keyword("if")?;
        let cond = self.operators(OR)?;
        self.expect_keyword("else")?;
        let orelse = self.test()?;
        let line = then.line;
        Ok(expr(ExprKind::IfExp { cond: Box::new(cond), then: Box::new(then), orelse: Box::new(orelse) }, line))
    }

    /// The targets of `for` and `with ... as`: no comparisons, so `in` stays.
    fn bit_or(&mut self) -> Parsed<Expr> {
        self.operators(BIT_OR)
    }

    /// The infix operators from `or` to `**` by precedence climbing: takes
    /// the operators that bind at least as tightly as `min`. One function
    /// for all levels keeps the stack shallow for each nesting level.
    fn operators(&mut self, min: u8) -> Parsed<Expr> {
        let left = if self.at_prefix_operator(min) { self.prefixed(min) } else { self.postfix() };
        if self.at_infix_operator(min) {
            left.and_then(|left| self.infix_chain(left, min))
        } else {
            left
        }
    }

    fn at_infix_operator(&self, min: u8) -> bool {
        self.infix_operator().is_some_and(|(precedence, _, _)| precedence >= min)
    }

    /// The operators after `left` that bind at least as tightly as `min`
    /// (kept apart from [`Self::operators`] so that nesting without
    /// operators costs little stack).
    fn infix_chain(&mut self, mut left: Expr, min: u8) -> Parsed<Expr> {
        let mut levels = 0;
        let mut open_chain = None;
        while let Some((precedence, op, width)) = self.infix_operator().filter(|(p, _, _)| *p >= min) {
            for _ in 0..width {
                self.advance();
            }
            let chain = chain_key(precedence, op);
            let extends = chain.is_some() && chain == open_chain;
            if !extends {
                self.enter()?;
                levels += 1;
            }
            let right_min = if precedence == POWER { UNARY } else { precedence + 1 };
            let right = self.operators(right_min)?;
            left = combine(left, op, right, extends);
            open_chain = chain;
        }
        self.leave(levels);
        Ok(left)
    }

    /// The infix operator at the current token: its precedence, spelling and
    /// how many tokens it takes (`not in` and `is not` take two).
    fn infix_operator(&self) -> Option<(u8, &'static str, usize)> {
        match &self.peek().kind {
            TokenKind::Op(op) => infix_precedence(op).map(|p| (p, *op, 1)),
            TokenKind::Name(n) => match n.as_str() {
                "or" => Some((OR, "or", 1)),
                "and" => Some((AND, "and", 1)),
                "in" => Some((COMPARE, "in", 1)),
                "not" if self.peek_ahead(1).is_name("in") => Some((COMPARE, "not in", 2)),
                "is" if self.peek_ahead(1).is_name("not") => Some((COMPARE, "is not", 2)),
                "is" => Some((COMPARE, "is", 1)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a prefix operator that `min` allows comes next.
    fn at_prefix_operator(&self, min: u8) -> bool {
        match &self.peek().kind {
            TokenKind::Name(n) => n == "not" && min <= NOT,
            TokenKind::Op(op) => matches!(*op, "-" | "+" | "~") && min <= UNARY,
            _ => false,
        }
    }

    /// `not a`, `-a`, `+a`, `~a` (at a prefix operator). Minus on a number
    /// literal folds into the literal (`-1` is `Int(-1)`, `-inf` is
    /// `Float(-inf)`).
    fn prefixed(&mut self, min: u8) -> Parsed<Expr> {
        let (op, operand_min) = match &self.peek().kind {
            TokenKind::Name(n) if n == "not" => ("not", NOT),
            TokenKind::Op(op @ ("-" | "+" | "~")) => (*op, UNARY),
            _ => return Err(self.expected(if min <= NOT { "'not', '-', '+' or '~'" } else { "'-', '+' or '~'" })),
        };
        if op == "-" && self.at_i64_min_literal() {
            let line = self.advance();
            self.advance();
            return Ok(expr(ExprKind::Int(i64::MIN), line));
        }
        let line = self.advance();
        self.enter()?;
        let operand = self.operators(operand_min)?;
        self.leave(1);
        Ok(unary(op, operand, line))
    }

    /// Whether `-` is followed by `9223372036854775808` standing alone.
    fn at_i64_min_literal(&self) -> bool {
        let literal = self.peek_ahead(1).kind == TokenKind::Int(I64_MIN_MAGNITUDE);
        let after = self.peek_ahead(2);
        literal && !["**", ".", "(", "["].iter().any(|op| after.is_op(op))
    }

    /// An atom followed by `.name`, `(args)` and `[index]`.
    fn postfix(&mut self) -> Parsed<Expr> {
        let value = match self.peek().kind {
            TokenKind::Op("(") => self.parenthesized(),
            TokenKind::Op("[") => self.list(),
            TokenKind::Op("{") => self.dict(),
            _ => self.literal_or_name(),
        };
        if self.at_op(".") || self.at_op("(") || self.at_op("[") {
            value.and_then(|value| self.trailers(value))
        } else {
            value
        }
    }

    /// `.name`, `(args)` and `[index]` applied to `value`, left to right.
    fn trailers(&mut self, mut value: Expr) -> Parsed<Expr> {
        let mut levels = 0;
        loop {
            let line = value.line;
            let kind = if self.eat_op(".") {
                self.enter()?;
                let name = self.expect_any_name()?;
                ExprKind::Attribute(Box::new(value), name)
            } else if self.eat_op("(") {
                self.enter()?;
                let (args, kwargs) = self.call_arguments()?;
                ExprKind::Call { func: Box::new(value), args, kwargs }
            } else if self.eat_op("[") {
                self.enter()?;
                let index = self.subscript_index()?;
                ExprKind::Subscript(Box::new(value), Box::new(index))
            } else {
                break;
            };
            levels += 1;
            value = expr(kind, line);
        }
        self.leave(levels);
        Ok(value)
    }

    /// The arguments after `(`, through `)`: positional, then `name=value`.
    fn call_arguments(&mut self) -> Parsed<CallArguments> {
        let mut args = Vec::new();
        let mut kwargs = Vec::new();
        while !self.eat_op(")") {
            if let Some(name) = self.keyword_argument_name() {
                kwargs.push((name, self.test()?));
            } else if self.at_op("*") || self.at_op("**") {
                return Err(Self::error_at(self.peek(), "star arguments are not supported"));
            } else if !kwargs.is_empty() {
                return Err(Self::error_at(self.peek(), "positional argument after keyword argument"));
            } else {
                args.push(self.test()?);
            }
            if !self.eat_op(",") {
                self.expect_op(")")?;
                break;
            }
        }
        Ok((args, kwargs))
    }

    /// Consumes `name=` if that is next, and gives the name.
    fn keyword_argument_name(&mut self) -> Option<String> {
        let TokenKind::Name(name) = &self.peek().kind else { return None };
        if is_keyword(name) || !self.peek_ahead(1).is_op("=") {
            return None;
        }
        let name = name.clone();
        self.advance();
        self.advance();
        Some(name)
    }

    /// The index after `[`, through `]`: one item, or a tuple of several.
    fn subscript_index(&mut self) -> Parsed<Expr> {
        let line = self.peek().line;
        let mut items = vec![self.subscript_item()?];
        let mut tuple = false;
        while self.eat_op(",") {
            tuple = true;
            if self.at_op("]") {
                break;
            }
            items.push(self.subscript_item()?);
        }
        self.expect_op("]")?;
        match items.pop() {
            Some(only) if !tuple && items.is_empty() => Ok(only),
            last => {
                items.extend(last);
                Ok(expr(ExprKind::Tuple(items), line))
            }
        }
    }

    /// An expression or a slice `lower:upper:step` (each part optional).
    fn subscript_item(&mut self) -> Parsed<Expr> {
        let line = self.peek().line;
        let lower = if self.at_op(":") { None } else { Some(self.test()?) };
        if !self.eat_op(":") {
            return lower.ok_or_else(|| self.expected("an expression"));
        }
        let upper = self.slice_bound()?;
        let step = if self.eat_op(":") { self.slice_bound()? } else { None };
        Ok(expr(ExprKind::Slice(lower.map(Box::new), upper.map(Box::new), step.map(Box::new)), line))
    }

    fn slice_bound(&mut self) -> Parsed<Option<Expr>> {
        if self.at_op(":") || self.at_op(",") || self.at_op("]") {
            return Ok(None);
        }
        Ok(Some(self.test()?))
    }

    /// A literal or a name (the bracketed atoms are read by [`Self::postfix`]).
    fn literal_or_name(&mut self) -> Parsed<Expr> {
        let line = self.peek().line;
        let kind = match self.peek().kind {
            TokenKind::Int(value) => self.int_literal(value)?,
            TokenKind::Float(value) => ExprKind::Float(value),
            TokenKind::Str(_) => return Ok(expr(self.strings(), line)),
            TokenKind::Name(_) => self.name_atom()?,
            TokenKind::Op("...") => ExprKind::Ellipsis,
            _ => return Err(self.expected("an expression")),
        };
        self.advance();
        Ok(expr(kind, line))
    }

    fn int_literal(&self, value: u64) -> Parsed<ExprKind> {
        match i64::try_from(value) {
            Ok(value) => Ok(ExprKind::Int(value)),
            Err(_) => Err(Self::error_at(self.peek(), format!("integer literal {value} does not fit in 64 bits"))),
        }
    }

    /// A name, `True`/`False`/`None`, or the printer's `inf` and `nan`
    /// (not consumed).
    fn name_atom(&self) -> Parsed<ExprKind> {
        let TokenKind::Name(name) = &self.peek().kind else {
            return Err(self.expected("a name"));
        };
        let kind = match name.as_str() {
            "True" => ExprKind::Bool(true),
            "False" => ExprKind::Bool(false),
            "None" => ExprKind::None,
            "inf" => ExprKind::Float(f64::INFINITY),
            "nan" => ExprKind::Float(f64::NAN),
            _ if is_keyword(name) => return Err(self.expected("an expression")),
            _ => ExprKind::Name(name.clone()),
        };
        Ok(kind)
    }

    /// Adjacent string literals, joined.
    fn strings(&mut self) -> ExprKind {
        let mut joined = String::new();
        while let TokenKind::Str(part) = &self.peek().kind {
            joined.push_str(part);
            self.advance();
        }
        ExprKind::Str(joined)
    }

    /// `(e)` is `e`; `()`, `(a,)` and `(a, b)` are tuples.
    fn parenthesized(&mut self) -> Parsed<Expr> {
        let line = self.expect_op("(")?;
        if self.eat_op(")") {
            return Ok(expr(ExprKind::Tuple(Vec::new()), line));
        }
        self.test().and_then(|first| self.parenthesized_rest(first, line))
    }

    /// After `(first`: `)` closes a parenthesized expression, `,` starts a tuple.
    fn parenthesized_rest(&mut self, first: Expr, line: u32) -> Parsed<Expr> {
        if self.eat_op(")") {
            return Ok(first);
        }
        if !self.eat_op(",") {
            return Err(self.expected("',' or ')'"));
        }
        let mut items = vec![first];
        items.extend(self.items_until(")")?);
        Ok(expr(ExprKind::Tuple(items), line))
    }

    /// Comma-separated expressions through `close`, a trailing comma allowed.
    fn items_until(&mut self, close: &str) -> Parsed<Vec<Expr>> {
        let mut items = Vec::new();
        while !self.eat_op(close) {
            items.push(self.test()?);
            if self.at_keyword("for") {
                return Err(Self::error_at(self.peek(), "comprehensions are not supported"));
            }
            if !self.eat_op(",") {
                self.expect_op(close)?;
                break;
            }
        }
        Ok(items)
    }

    fn list(&mut self) -> Parsed<Expr> {
        let line = self.expect_op("[")?;
        Ok(expr(ExprKind::List(self.items_until("]")?), line))
    }

    /// `{k: v, ...}`.
    fn dict(&mut self) -> Parsed<Expr> {
        let line = self.expect_op("{")?;
        let mut entries = Vec::new();
        while !self.eat_op("}") {
            let key = self.test()?;
            self.expect_op(":")?;
            let value = self.test()?;
            entries.push((key, value));
            if !self.eat_op(",") {
                self.expect_op("}")?;
                break;
            }
        }
        Ok(expr(ExprKind::Dict(entries), line))
    }
}
