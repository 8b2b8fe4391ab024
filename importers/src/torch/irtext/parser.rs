//! The graph grammar: the `graph(...)` header, nodes with their outputs,
//! kind, attributes, inputs, `scope:` and `# source` trailer, the blocks
//! under `prim::If` / `prim::Loop`, and the final `return`.
//!
//! Structure is read from the tokens, not the indentation: a node's blocks
//! are the `blockN(...)` headers right after it, and every block ends at
//! its `-> (...)`.

use super::attrs::parse_attrs;
use super::cursor::{is_ident_char, is_name_char, Cursor};
use super::scopes::Scopes;
use super::types::parse_type;
use super::{IrAttr, IrBlock, IrGraph, IrNode, IrTextError, IrValue};

/// Blocks nested deeper than this are refused, so hostile text cannot
/// exhaust the stack.
pub const MAX_BLOCK_DEPTH: usize = 100;

/// The attribute under which a Python op's printed scalar arguments are
/// kept (`^Fn[...](3)(%x)` → `"3"`).
pub const PYTHON_OP_SCALARS: &str = "^scalars";

/// The reader of one graph.
pub(super) struct Parser<'t> {
    cur: Cursor<'t>,
    scopes: Scopes,
}

/// A value name after `%`, with where it stands.
struct NameAt {
    name: String,
    pos: usize,
}

impl<'t> Parser<'t> {
    /// A reader for `text`, which came from `path`.
    pub(super) fn new(path: &'t str, text: &'t str) -> Self {
        Parser { cur: Cursor::new(path, text), scopes: Scopes::new() }
    }

    /// Reads the whole text as one graph.
    pub(super) fn parse_graph(mut self) -> Result<IrGraph, IrTextError> {
        self.cur.skip_blanks();
        self.cur.expect("graph(")?;
        let inputs = self.parse_value_decls(")")?;
        self.cur.expect(")")?;
        self.cur.skip_inline_space();
        self.cur.expect(":")?;
        self.define_all(&inputs)?;
        let nodes = self.parse_nodes(0)?;
        self.cur.expect("return")?;
        self.cur.skip_inline_space();
        let returns = self.parse_uses()?;
        self.expect_end()?;
        Ok(IrGraph { inputs, nodes, returns })
    }

    /// Fails unless only blanks follow the `return`.
    fn expect_end(&mut self) -> Result<(), IrTextError> {
        self.cur.skip_blanks();
        if self.cur.at_end() {
            return Ok(());
        }
        if self.cur.starts_with("with ") {
            return Err(self.cur.error("subgraph sections (`with prim::..._0 = graph(...)`) are not supported"));
        }
        Err(self.cur.error(format!("expected the end of the graph after `return (...)`, found {}", self.cur.found())))
    }

    /// Reads `%a : T, %b : U` up to (not including) `close`, which may
    /// follow at once (no values). Names are not defined yet.
    fn parse_value_decls(&mut self, close: &str) -> Result<Vec<IrValue>, IrTextError> {
        let mut values = Vec::new();
        self.cur.skip_blanks();
        if self.cur.starts_with(close) {
            return Ok(values);
        }
        loop {
            values.push(self.parse_value_decl()?);
            self.cur.skip_blanks();
            if self.cur.starts_with(close) {
                return Ok(values);
            }
            if !self.cur.eat(",") {
                let what = format!("expected `,` or `{close}` after a value's type, found {}", self.cur.found());
                return Err(self.cur.error(what));
            }
            self.cur.skip_blanks();
        }
    }

    /// Reads `%name : Type`.
    fn parse_value_decl(&mut self) -> Result<IrValue, IrTextError> {
        let name = self.parse_value_name()?.name;
        self.cur.skip_inline_space();
        self.cur.expect(":")?;
        self.cur.skip_inline_space();
        let ty = parse_type(&mut self.cur, 0)?;
        Ok(IrValue { name, ty })
    }

    /// Reads `%name`.
    fn parse_value_name(&mut self) -> Result<NameAt, IrTextError> {
        let pos = self.cur.pos();
        if !self.cur.eat("%") {
            return Err(self.cur.error(format!("expected a value (`%name`), found {}", self.cur.found())));
        }
        let name = self.cur.take_while(is_name_char);
        if name.is_empty() {
            return Err(self.cur.error(format!("expected a value name after `%`, found {}", self.cur.found())));
        }
        Ok(NameAt { name: name.to_string(), pos })
    }

    /// Defines `values` in the innermost scope; duplicates are errors at
    /// the current line.
    fn define_all(&mut self, values: &[IrValue]) -> Result<(), IrTextError> {
        self.define_all_on(values, self.cur.pos())
    }

    /// Defines `values`, blaming byte offset `pos` for a duplicate.
    fn define_all_on(&mut self, values: &[IrValue], pos: usize) -> Result<(), IrTextError> {
        let line = self.cur.line_at(pos);
        for value in values {
            self.scopes.define(&value.name, line).map_err(|what| self.cur.error_at(pos, what))?;
        }
        Ok(())
    }

    /// Reads `(%a, %b)`, checking each name is in scope.
    fn parse_uses(&mut self) -> Result<Vec<String>, IrTextError> {
        self.cur.expect("(")?;
        let mut names = Vec::new();
        self.cur.skip_inline_space();
        if self.cur.eat(")") {
            return Ok(names);
        }
        loop {
            self.cur.skip_inline_space();
            let used = self.parse_value_name()?;
            self.scopes.check_use(&used.name).map_err(|what| self.cur.error_at(used.pos, what))?;
            names.push(used.name);
            self.cur.skip_inline_space();
            if self.cur.eat(")") {
                return Ok(names);
            }
            if !self.cur.eat(",") {
                return Err(self.cur.error(format!("expected `,` or `)` between values, found {}", self.cur.found())));
            }
        }
    }

    /// Reads nodes up to the end of their block (`->`) or of the graph
    /// (`return`); `depth` is 0 for the graph's own nodes.
    fn parse_nodes(&mut self, depth: usize) -> Result<Vec<IrNode>, IrTextError> {
        let mut nodes = Vec::new();
        loop {
            self.cur.skip_blanks();
            let at_block_end = self.cur.starts_with("->");
            let at_return = self.cur.starts_with("return") && !self.cur.rest()[6..].starts_with(is_ident_char);
            match (depth, at_block_end, at_return) {
                (0, true, _) => return Err(self.cur.error("`->` outside any block")),
                (0, _, true) => return Ok(nodes),
                (_, true, _) => return Ok(nodes),
                (_, _, true) => return Err(self.cur.error("`return` inside a block (expected `-> (...)`)")),
                _ => {}
            }
            if !matches!(self.cur.peek(), Some('%' | '=')) {
                let end = if depth == 0 { "`return (...)`" } else { "`-> (...)`" };
                let what = format!("expected a node (`%name : Type = kind(...)`) or {end}, found {}", self.cur.found());
                return Err(self.cur.error(what));
            }
            nodes.push(self.parse_node(depth)?);
        }
    }

    /// Reads one node, its blocks included, and defines its outputs.
    fn parse_node(&mut self, depth: usize) -> Result<IrNode, IrTextError> {
        let start = self.cur.pos();
        let line = self.cur.line();
        let outputs = self.parse_value_decls("=")?;
        self.cur.expect("=")?;
        self.cur.skip_inline_space();
        let (kind, attrs) = self.parse_kind_and_attrs()?;
        let inputs = self.parse_uses()?;
        let (scope, source) = self.parse_trailer()?;
        let blocks = self.parse_blocks(depth)?;
        self.define_all_on(&outputs, start)?;
        Ok(IrNode { outputs, kind, attrs, inputs, blocks, scope, source, line })
    }

    /// Reads `aten::relu`, `prim::Constant[value=1]`, or a Python op
    /// `^Name[attrs](scalars)`, up to its inputs' `(`.
    fn parse_kind_and_attrs(&mut self) -> Result<(String, Vec<(String, IrAttr)>), IrTextError> {
        let python_op = self.cur.eat("^");
        let kind = if python_op { self.parse_python_op_name()? } else { self.parse_qualified_kind()? };
        let mut attrs = if self.cur.peek() == Some('[') { parse_attrs(&mut self.cur)? } else { Vec::new() };
        if python_op {
            attrs.push((PYTHON_OP_SCALARS.to_string(), self.parse_python_op_scalars(&kind)?));
        }
        if self.cur.peek() != Some('(') {
            let what = format!("expected `(` and the inputs of `{kind}`, found {}", self.cur.found());
            return Err(self.cur.error(what));
        }
        Ok((kind, attrs))
    }

    /// Reads the `(3, None)` a Python op prints between its attributes and
    /// its inputs, kept as written without the parentheses.
    fn parse_python_op_scalars(&mut self, kind: &str) -> Result<IrAttr, IrTextError> {
        let start = self.cur.pos();
        if self.cur.peek() != Some('(') {
            let what = format!("expected `(` and the arguments of `{kind}`, found {}", self.cur.found());
            return Err(self.cur.error(what));
        }
        self.cur.take_balanced("a Python op's arguments", false, |c| c.pos() > start)?;
        let group = self.cur.since(start);
        let inner = group.get(1..group.len().saturating_sub(1)).unwrap_or("");
        Ok(IrAttr::Other(inner.trim().to_string()))
    }

    /// Reads `namespace::name` (`aten::_convolution`, `prim::FusionGroup_0`).
    fn parse_qualified_kind(&mut self) -> Result<String, IrTextError> {
        let start = self.cur.pos();
        let namespace = self.cur.take_while(is_ident_char);
        if namespace.is_empty() || !self.cur.eat("::") {
            return Err(self.cur.error_at(start, "expected a node kind (`namespace::name`)"));
        }
        let name = self.cur.take_while(|c| is_ident_char(c) || c == '.');
        if name.is_empty() {
            return Err(self
                .cur
                .error(format!("expected an op name after `{namespace}::`, found {}", self.cur.found())));
        }
        Ok(self.cur.since(start).to_string())
    }

    /// Reads the name after `^` of a Python op; the kind is `^Name`.
    fn parse_python_op_name(&mut self) -> Result<String, IrTextError> {
        let name = self.cur.take_while(|c| is_ident_char(c) || c == '.');
        if name.is_empty() {
            return Err(self.cur.error(format!("expected a Python op name after `^`, found {}", self.cur.found())));
        }
        if self.cur.peek() != Some('(') && self.cur.peek() != Some('[') {
            return Err(self.cur.error(format!("expected `[` or `(` after `^{name}`, found {}", self.cur.found())));
        }
        Ok(format!("^{name}"))
    }

    /// Reads what may follow a node's inputs on its line: `, scope: path`
    /// and `# file:line:col`. Fails on anything else.
    fn parse_trailer(&mut self) -> Result<(Option<String>, Option<String>), IrTextError> {
        self.cur.skip_inline_space();
        let mut scope = None;
        if self.cur.eat(",") {
            self.cur.skip_inline_space();
            self.cur.expect("scope:")?;
            let text = self.cur.take_while(|c| c != '\n' && c != '#');
            scope = Some(text.trim().to_string());
        }
        let mut source = None;
        if self.cur.eat("#") {
            source = Some(self.cur.take_rest_of_line().to_string());
        }
        self.cur.skip_inline_space();
        if !self.cur.at_line_end() {
            return Err(self.cur.error(format!("expected the end of the node's line, found {}", self.cur.found())));
        }
        Ok((scope, source))
    }

    /// Reads the `blockN(...)` headers and bodies after a node at `depth`.
    fn parse_blocks(&mut self, depth: usize) -> Result<Vec<IrBlock>, IrTextError> {
        let mut blocks = Vec::new();
        loop {
            self.cur.skip_blanks();
            if !self.cur.starts_with("block") {
                return Ok(blocks);
            }
            if depth + 1 > MAX_BLOCK_DEPTH {
                return Err(self.cur.error(format!("blocks nested deeper than {MAX_BLOCK_DEPTH}")));
            }
            blocks.push(self.parse_block(depth + 1, blocks.len())?);
        }
    }

    /// Reads `blockN(params):`, its nodes and `-> (values)`; `index` is N.
    fn parse_block(&mut self, depth: usize, index: usize) -> Result<IrBlock, IrTextError> {
        let header = format!("block{index}(");
        if !self.cur.eat(&header) {
            return Err(self.cur.error(format!("expected `{header}`, found {}", self.cur.found())));
        }
        let params_pos = self.cur.pos();
        let params = self.parse_value_decls(")")?;
        self.cur.expect(")")?;
        self.cur.skip_inline_space();
        self.cur.expect(":")?;
        self.scopes.open_block();
        let body = self.parse_block_body(&params, params_pos, depth);
        self.scopes.close_block();
        let (nodes, returns) = body?;
        Ok(IrBlock { params, nodes, returns })
    }

    /// The inside of a block after its header: params defined, nodes, `->`.
    fn parse_block_body(
        &mut self,
        params: &[IrValue],
        params_pos: usize,
        depth: usize,
    ) -> Result<(Vec<IrNode>, Vec<String>), IrTextError> {
        self.define_all_on(params, params_pos)?;
        let nodes = self.parse_nodes(depth)?;
        self.cur.expect("->")?;
        self.cur.skip_inline_space();
        let returns = self.parse_uses()?;
        Ok((nodes, returns))
    }
}
