//! The syntax tree of printed TorchScript code. Every statement and
//! expression carries its 1-based source line, for provenance
//! (`code/__torch__/torchvision/models/resnet.py:45`).

/// One code file: its classes (and any top-level functions).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct File {
    /// The classes, in order.
    pub classes: Vec<Class>,
    /// Top-level `def`s (scripted free functions), in order.
    pub functions: Vec<Function>,
}

/// `class Name(Base):` with its typed attributes and methods.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Class {
    /// The class name (unqualified: `Conv2d`).
    pub name: String,
    /// The bases as written (`Module`).
    pub bases: Vec<String>,
    /// `__parameters__ = ["weight", "bias", ]`.
    pub parameters: Vec<String>,
    /// `__buffers__ = [...]`.
    pub buffers: Vec<String>,
    /// `name : Type` declarations, in order.
    pub attributes: Vec<(String, TypeExpr)>,
    /// Class-level constants (`__constants__`, `x : Final[int] = 3`): name and value.
    pub constants: Vec<(String, Expr)>,
    /// The methods.
    pub methods: Vec<Function>,
    /// The line of `class`.
    pub line: u32,
}

/// `def name(params) -> ret:` and its body.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Function {
    /// The name.
    pub name: String,
    /// The parameters, `self` included.
    pub params: Vec<Param>,
    /// The return annotation.
    pub returns: Option<TypeExpr>,
    /// The body.
    pub body: Vec<Stmt>,
    /// The line of `def`.
    pub line: u32,
}

/// One parameter: `x: Tensor` or `dim: int=1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The name.
    pub name: String,
    /// Its annotation.
    pub ty: Option<TypeExpr>,
    /// Its default.
    pub default: Option<Expr>,
}

/// A type as written: `Tensor`, `int`, `List[int]`, `Optional[Tensor]`,
/// `Tuple[Tensor, Tensor]`, `__torch__.torch.nn.modules.conv.Conv2d`.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeExpr {
    /// A (possibly dotted) name.
    Name(String),
    /// `Head[args]`.
    Generic(String, Vec<TypeExpr>),
}

/// A statement with its line.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// 1-based line.
    pub line: u32,
}

/// The statements the printer emits.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `a = e`, `a, b = e`, `a : T = e` (targets left to right for chains `a = b = e`).
    Assign { targets: Vec<Expr>, value: Expr },
    /// `a += e` and the other augmented forms (`op` as written without `=`: `+`).
    AugAssign { target: Expr, op: String, value: Expr },
    /// An expression on its own.
    Expr(Expr),
    /// `return e` (a tuple for `return a, b`).
    Return(Option<Expr>),
    /// `if c: ... elif ...: ... else: ...` (elif nests in `orelse`).
    If { cond: Expr, body: Vec<Stmt>, orelse: Vec<Stmt> },
    /// `for target in iter: ...`.
    For { target: Expr, iter: Expr, body: Vec<Stmt> },
    /// `while cond: ...`.
    While { cond: Expr, body: Vec<Stmt> },
    /// `pass`.
    Pass,
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `assert cond, msg`.
    Assert { cond: Expr, msg: Option<Expr> },
    /// `raise e`.
    Raise(Option<Expr>),
    /// `with item as target: ...` (the printer's form of `with torch.no_grad():`
    /// is `with _0:` on an object it built just before).
    With { item: Expr, target: Option<Expr>, body: Vec<Stmt> },
    /// A nested `def` (the printer writes the body of `torch.jit.fork` so:
    /// `def __forked_function(): ...` then `fork(__forked_function)`).
    FunctionDef(Box<Function>),
    /// `global`/`import`/`from` lines and anything else kept as text.
    Other(String),
}

/// An expression with its line.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// 1-based line.
    pub line: u32,
}

/// The expressions the printer emits.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A name: `x`, `self`, `torch`, `ops`, `CONSTANTS`.
    Name(String),
    /// `value.attr`.
    Attribute(Box<Expr>, String),
    /// `func(args, name=kw)`.
    Call { func: Box<Expr>, args: Vec<Expr>, kwargs: Vec<(String, Expr)> },
    /// `value[index]`; a slice index is [`ExprKind::Slice`], several indices a tuple.
    Subscript(Box<Expr>, Box<Expr>),
    /// `lower:upper:step` inside a subscript.
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    /// An int literal.
    Int(i64),
    /// A float literal (`inf`, `nan` included when written as such by the printer).
    Float(f64),
    /// A string literal.
    Str(String),
    /// `True`/`False`.
    Bool(bool),
    /// `None`.
    None,
    /// `...` (`Ellipsis`).
    Ellipsis,
    /// `(a, b)`, `(a,)`, `()`.
    Tuple(Vec<Expr>),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{k: v}`.
    Dict(Vec<(Expr, Expr)>),
    /// `a op b` for `+ - * / // % ** @ & | ^ << >>`.
    BinOp(Box<Expr>, String, Box<Expr>),
    /// `-a`, `+a`, `not a`, `~a`.
    Unary(String, Box<Expr>),
    /// `a < b <= c`, `a is None`, `a is not None`, `a in b`, `a not in b`.
    Compare(Box<Expr>, Vec<(String, Expr)>),
    /// `a and b`, `a or b`.
    BoolOp(String, Vec<Expr>),
    /// `a if c else b`.
    IfExp { cond: Box<Expr>, then: Box<Expr>, orelse: Box<Expr> },
}
