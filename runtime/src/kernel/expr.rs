//! The expression body of a kernel program: a list of typed instructions in
//! SSA form (each instruction is named by its position, `%3`, and reads only
//! earlier ones). Loads read an operand at the current point of the
//! iteration space; [`Inst::Reduce`] combines its argument over the
//! program's reduction axes, and its result is one value per point of the
//! remaining (outer) axes.

use diamond_ir::ElemType;

/// One instruction and the element type of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Instr {
    /// What it computes.
    pub inst: Inst,
    /// The element type of the result.
    pub ty: ElemType,
}

/// What an instruction computes; operands name earlier instructions.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// Operand `operand` at the current point.
    Load(usize),
    /// A constant (uniform operands become these).
    Const(f64),
    /// A one-operand function.
    Unary(UnaryOp, usize),
    /// A two-operand function (NumPy broadcasting already resolved by the
    /// operands' views).
    Binary(BinaryOp, usize, usize),
    /// `cond ? then : else` (ONNX Where).
    Select(usize, usize, usize),
    /// A conversion to the instruction's type.
    Cast(usize),
    /// The argument combined over the reduction axes.
    Reduce(Combiner, usize),
}

impl Inst {
    /// The instructions it reads.
    pub fn args(&self) -> Vec<usize> {
        match *self {
            Inst::Load(_) | Inst::Const(_) => vec![],
            Inst::Unary(_, a) | Inst::Cast(a) | Inst::Reduce(_, a) => vec![a],
            Inst::Binary(_, a, b) => vec![a, b],
            Inst::Select(c, a, b) => vec![c, a, b],
        }
    }
}

/// One-operand functions. Parameters are the node's attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Identity,
    Neg,
    Abs,
    Sign,
    Ceil,
    Floor,
    Round,
    Sqrt,
    Reciprocal,
    Square,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Tanh,
    Erf,
    Relu,
    Sigmoid,
    Softsign,
    Softplus,
    Gelu,
    GeluTanh,
    HardSwish,
    Not,
    IsNaN,
    LeakyRelu(f64),
    Elu(f64),
    Selu {
        alpha: f64,
        gamma: f64,
    },
    HardSigmoid {
        alpha: f64,
        beta: f64,
    },
    ThresholdedRelu(f64),
    /// `x` limited to `[min, max]`; NaN stays NaN.
    Clip {
        min: f64,
        max: f64,
    },
    /// `x^p` for a constant `p`.
    PowConst(f64),
}

/// Two-operand functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// NaN if either is NaN, else the larger.
    Max,
    /// NaN if either is NaN, else the smaller.
    Min,
    Pow,
    /// `x < 0 ? slope * x : x`.
    PRelu,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
    And,
    Or,
    Xor,
}

impl BinaryOp {
    /// Whether the result is a boolean.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::Less
                | BinaryOp::LessOrEqual
                | BinaryOp::Greater
                | BinaryOp::GreaterOrEqual
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
        )
    }

    /// Whether both operands are booleans.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// How a reduction combines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Combiner {
    Sum,
    /// The sum divided by the number of reduced points.
    Mean,
    /// NaN if any is NaN.
    Max,
    /// NaN if any is NaN.
    Min,
    Prod,
}

impl Combiner {
    /// The combiner's name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Combiner::Sum => "sum",
            Combiner::Mean => "mean",
            Combiner::Max => "max",
            Combiner::Min => "min",
            Combiner::Prod => "prod",
        }
    }
}

/// How far an instruction varies: with every axis of the space, or only
/// with the outer (non-reduced) ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Constant over the whole space.
    Uniform,
    /// Varies with the outer axes only.
    Outer,
    /// Varies with every axis.
    Full,
}
