//! TorchScript IR text — what `print(traced.graph)` or
//! `str(scripted.inlined_graph)` prints — parsed into a syntax tree
//! ([`IrGraph`]) by [`parse_ir`]. The text is treated as hostile: every
//! problem is an [`IrTextError`] at a line and column, never a panic; block
//! and type nesting are bounded; every `%value` used must be defined
//! before, where it is in scope, and defined only once.
//!
//! - `cursor`: the read position, blanks, balanced raw text, errors.
//! - `types`: value types (`Float(2, 3, strides=[3, 1], ...)`, `int[]`, ...).
//! - `attrs`: node attributes (`[value=0.1]`, `[name="fc"]`, tensors).
//! - `scopes`: which values a use may name.
//! - `parser`: graph, nodes, blocks, `return`.

mod attrs;
mod cursor;
mod parser;
mod scopes;
mod types;

pub use parser::{MAX_BLOCK_DEPTH, PYTHON_OP_SCALARS};
pub use types::MAX_TYPE_DEPTH;

/// A parsed `graph(...)`: its inputs, its nodes in order, and what it returns.
#[derive(Clone, Debug, PartialEq)]
pub struct IrGraph {
    /// The graph's inputs (`%self.1`, `%x`), with their types.
    pub inputs: Vec<IrValue>,
    /// The top-level nodes, in order; nested ones sit in their blocks.
    pub nodes: Vec<IrNode>,
    /// The names (without `%`) in `return (...)`.
    pub returns: Vec<String>,
}

/// A value definition: `%name : Type`.
#[derive(Clone, Debug, PartialEq)]
pub struct IrValue {
    /// The name, without `%` (`x.1`, `input.3`, `42`).
    pub name: String,
    /// The printed type.
    pub ty: IrType,
}

/// A value type as TorchScript prints it.
#[derive(Clone, Debug, PartialEq)]
pub enum IrType {
    /// A tensor: `Tensor`, `Float(2, *, strides=[...], requires_grad=0, device=cpu)`,
    /// `Long(device=cpu)`, `FloatTensor`.
    Tensor {
        /// The element type as printed (`Float`, `Long`, `BFloat16`), if known.
        elem: Option<String>,
        /// The dims: `None` when the rank is unknown, `Some(None)` for a
        /// dim printed as `*`. `Some(vec![])` is a rank-0 tensor.
        sizes: Option<Vec<Option<u64>>>,
        /// `requires_grad=0/1`, if printed.
        requires_grad: Option<bool>,
        /// `device=cpu`, `device=cuda:0`, if printed.
        device: Option<String>,
    },
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `bool`.
    Bool,
    /// `str`.
    Str,
    /// `NoneType`.
    NoneType,
    /// `Device`.
    Device,
    /// `T[]` (or `List[T]`).
    List(Box<IrType>),
    /// `(T, U)` (or `Tuple[T, U]`, or `NamedTuple(a : T, b : U)` with the
    /// field names dropped).
    Tuple(Vec<IrType>),
    /// `T?` (or `Optional[T]`).
    Optional(Box<IrType>),
    /// A TorchScript class (`__torch__.torch.nn.modules.linear.Linear`).
    Class(String),
    /// Any other type, as written (`Scalar`, `Dict(str, Tensor)`, `Union(Tensor, int)`).
    Other(String),
}

/// One node: `%a : T, %b : U = kind[attrs](%in1, %in2), scope: s # source`,
/// with its blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct IrNode {
    /// The values it defines, in order (none for `= prim::RaiseException(...)`).
    pub outputs: Vec<IrValue>,
    /// The qualified kind (`aten::relu`, `prim::Constant`); a Python op is
    /// `^Name`, its printed scalar arguments under [`PYTHON_OP_SCALARS`].
    pub kind: String,
    /// The attributes, in printed order.
    pub attrs: Vec<(String, IrAttr)>,
    /// The names (without `%`) of its inputs.
    pub inputs: Vec<String>,
    /// Its blocks (`prim::If` has two, `prim::Loop` one).
    pub blocks: Vec<IrBlock>,
    /// The text after `scope:` (`__module.layer1/__module.layer1.0`).
    pub scope: Option<String>,
    /// The text after `#` (`<stdin>:6:0`, `/path/functional.py:1453:0`).
    pub source: Option<String>,
    /// The 1-based line where the node starts.
    pub line: u32,
}

/// A block of a node: `blockN(%params):`, its nodes and `-> (%values)`.
#[derive(Clone, Debug, PartialEq)]
pub struct IrBlock {
    /// The block's parameters.
    pub params: Vec<IrValue>,
    /// Its nodes, in order.
    pub nodes: Vec<IrNode>,
    /// The names (without `%`) in `-> (...)`.
    pub returns: Vec<String>,
}

/// An attribute value as printed.
#[derive(Clone, Debug, PartialEq)]
pub enum IrAttr {
    /// An int; bool constants print as `0` / `1` and land here too.
    Int(i64),
    /// A float (`1.`, `0.10000000000000001`, `inf`, `nan`).
    Float(f64),
    /// A string, escapes decoded.
    Str(String),
    /// A list of ints (or of `True` / `False`, as 1 / 0); `[]` lands here.
    Ints(Vec<i64>),
    /// A list of floats.
    Floats(Vec<f64>),
    /// A tensor, its printed text as is (`{4}`, `<Tensor>`,
    /// `0.5000  0.2500 [ CPUFloatType{2} ]`).
    Tensor(String),
    /// Anything else, as written (tuples, string lists, complex numbers, `<Graph>`).
    Other(String),
}

/// Why IR text could not be parsed: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{col}: {what}")]
pub struct IrTextError {
    /// The file the text came from, as given to [`parse_ir`].
    pub path: String,
    /// The 1-based line.
    pub line: u32,
    /// The 1-based column, in characters.
    pub col: u32,
    /// What is wrong.
    pub what: String,
}

/// Parses the IR text of one graph; `path` names it in errors.
pub fn parse_ir(path: &str, text: &str) -> Result<IrGraph, IrTextError> {
    parser::Parser::new(path, text).parse_graph()
}

impl IrGraph {
    /// Every node, blocks included, in printed order (a node before the
    /// nodes of its blocks).
    pub fn all_nodes(&self) -> Vec<&IrNode> {
        let mut found = Vec::new();
        let mut pending: Vec<&IrNode> = self.nodes.iter().rev().collect();
        while let Some(node) = pending.pop() {
            found.push(node);
            for block in node.blocks.iter().rev() {
                pending.extend(block.nodes.iter().rev());
            }
        }
        found
    }
}

impl IrNode {
    /// The attribute `name`, if the node has it.
    pub fn attr(&self, name: &str) -> Option<&IrAttr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, value)| value)
    }
}
