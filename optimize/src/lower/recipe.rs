//! What a node becomes in a kernel program: its recipe. Constants it reads
//! as parameters (Clip bounds, a Pow exponent, reduction axes, an Expand
//! target) are folded into the recipe; the inputs it reads as data are
//! listed. Only nodes whose data and results are `f32` or bool are fused
//! (the other types run on the reference kernels).

use crate::uniform::uniform;
use crate::Analysis;
use diamond_ir::{AttrValue, ElemType, Model, Node, ValueId};
use diamond_runtime::kernel::{BinaryOp, FallbackReason, Refusal, UnaryOp};

/// A reduction operator's shape of computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    SumSquare,
    L1,
    L2,
    LogSum,
    LogSumExp,
}

/// What a node computes, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Recipe {
    /// One data input.
    Unary(UnaryOp),
    /// Two data inputs.
    Binary(BinaryOp),
    /// Inputs folded left with `op`, divided by their count for Mean.
    Fold(BinaryOp, bool),
    /// Where.
    Select,
    /// Cast between f32 and bool.
    Cast,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// A ReduceX over `axes` of input 0.
    Reduce { axes: Vec<usize>, keepdims: bool, kind: Reduction },
    /// Softmax or LogSoftmax over `axes`.
    Softmax { axes: Vec<usize>, log: bool },
    /// LayerNormalization over `axes` (input 2 the optional bias).
    LayerNorm { axes: Vec<usize>, eps: f64 },
    /// RMSNormalization over `axes`.
    RmsNorm { axes: Vec<usize>, eps: f64 },
}

impl Recipe {
    /// The reduction axes, for reductions.
    pub(super) fn axes(&self) -> Option<&[usize]> {
        match self {
            Recipe::Reduce { axes, .. }
            | Recipe::Softmax { axes, .. }
            | Recipe::LayerNorm { axes, .. }
            | Recipe::RmsNorm { axes, .. } => Some(axes),
            _ => None,
        }
    }
}

fn int(n: &Node, name: &str, default: i64) -> i64 {
    match n.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Int(i)) => i,
        _ => default,
    }
}

fn float(n: &Node, name: &str, default: f64) -> f64 {
    match n.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Float(f)) => f64::from(f),
        _ => default,
    }
}

fn ints(n: &Node, name: &str) -> Option<Vec<i64>> {
    match n.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Ints(v)) => Some(v.to_vec()),
        _ => None,
    }
}

/// Axis `i` of `rank` (negative from the end).
fn axis(i: i64, rank: usize) -> Option<usize> {
    let a = if i < 0 { i + rank as i64 } else { i };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

/// The operators fused groups compute (given types and shapes they take).
const FUSIBLE: &[&str] = &[
    "Identity",
    "Expand",
    "Neg",
    "Abs",
    "Sign",
    "Ceil",
    "Floor",
    "Round",
    "Sqrt",
    "Reciprocal",
    "Exp",
    "Log",
    "Sin",
    "Cos",
    "Tan",
    "Tanh",
    "Erf",
    "Relu",
    "Sigmoid",
    "Softsign",
    "Softplus",
    "HardSwish",
    "Not",
    "IsNaN",
    "Mish",
    "LeakyRelu",
    "Elu",
    "Selu",
    "HardSigmoid",
    "ThresholdedRelu",
    "Gelu",
    "Clip",
    "Pow",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "PRelu",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "And",
    "Or",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Where",
    "Cast",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "RMSNormalization",
];

/// For a node of an operator fused groups compute that is left as a plain
/// node: why, and whether it computes floating-point values; `None` for
/// other operators.
pub(super) fn refusal(model: &Model, a: &Analysis, n: &Node) -> Option<(Refusal, bool)> {
    if !(n.domain().is_empty() || n.domain() == "ai.onnx") || !FUSIBLE.contains(&n.op_type()) {
        return None;
    }
    let graph = a.graph(model);
    let outputs: Vec<ValueId> = n.outputs.iter().copied().filter(|&v| !graph.value_name(v).is_empty()).collect();
    let types: Vec<Option<ElemType>> = outputs.iter().map(|&v| a.dtype(model, v)).collect();
    let float = types
        .iter()
        .any(|t| matches!(t, Some(ElemType::Float | ElemType::Float16 | ElemType::Bfloat16 | ElemType::Double)));
    let fits = |t: &Option<ElemType>| matches!(t, Some(ElemType::Float | ElemType::Bool));
    let odd = types.iter().find(|t| !fits(t));
    let odd_input = n
        .inputs
        .iter()
        .filter(|&&v| !graph.value_name(v).is_empty())
        .map(|&v| a.dtype(model, v))
        .find(|t| t.is_some() && !fits(t));
    // a float node of unknown shape that also reads integers (a reduction's
    // axes, an Expand's shape) is refused for its shape: that, not the
    // integers it reads as parameters, is what no program can bind
    let unbound = outputs.iter().find(|&&v| a.shape(model, v).is_none()).copied();
    let refusal = if let Some(t) = odd_input.filter(|_| odd.is_none() && n.op_type() != "Cast" && unbound.is_none()) {
        Refusal::new(
            FallbackReason::OperandType,
            format!(
                "it reads {}, and the fused kernels read float and bool only",
                t.map_or("?".into(), |t| t.to_string())
            ),
        )
    } else if let Some(t) = odd {
        let ty = t.map_or_else(|| "a type the check could not infer".to_string(), |t| t.to_string());
        Refusal::new(
            FallbackReason::OperandType,
            format!("it computes {ty}, and the fused kernels compute float and bool only"),
        )
    } else if let Some(v) = unbound {
        Refusal::new(
            FallbackReason::UnboundExtent,
            format!("the shape of '{}' is not known before the run (it depends on values)", graph.value_name(v)),
        )
    } else {
        Refusal::new(
            FallbackReason::Operator,
            "the fused kernels do not take this form of it (parameters that are not constants, or a view they cannot express)",
        )
    };
    Some((refusal, float))
}

/// The recipe of `n` and the inputs it reads as data, or `None` when it
/// is not fused.
pub(super) fn recipe(model: &Model, a: &Analysis, n: &Node) -> Option<(Recipe, Vec<usize>)> {
    if !n.domain().is_empty() && n.domain() != "ai.onnx" {
        return None;
    }
    let graph = a.graph(model);
    let opset = model.opset_version("").unwrap_or(23);
    let present = |i: usize| n.inputs.get(i).copied().filter(|&v| !graph.value_name(v).is_empty());
    let dtype = |v: ValueId| a.dtype(model, v);
    let fits = |t: Option<ElemType>| matches!(t, Some(ElemType::Float | ElemType::Bool));
    let named_outputs: Vec<ValueId> = n.outputs.iter().copied().filter(|&v| !graph.value_name(v).is_empty()).collect();
    if named_outputs.is_empty() || !named_outputs.iter().all(|&v| fits(dtype(v)) && a.shape(model, v).is_some()) {
        return None;
    }
    let scalar = |i: usize| -> Option<f64> { uniform(model, a, present(i)?).map(|u| u.value) };
    let unary = |op: UnaryOp| Some((Recipe::Unary(op), vec![0]));
    let rank0 = present(0).and_then(|v| a.rank(model, v));
    let recipe = match n.op_type() {
        "Identity" => unary(UnaryOp::Identity),
        "Expand" => unary(UnaryOp::Identity),
        "Neg" => unary(UnaryOp::Neg),
        "Abs" => unary(UnaryOp::Abs),
        "Sign" => unary(UnaryOp::Sign),
        "Ceil" => unary(UnaryOp::Ceil),
        "Floor" => unary(UnaryOp::Floor),
        "Round" => unary(UnaryOp::Round),
        "Sqrt" => unary(UnaryOp::Sqrt),
        "Reciprocal" => unary(UnaryOp::Reciprocal),
        "Exp" => unary(UnaryOp::Exp),
        "Log" => unary(UnaryOp::Log),
        "Sin" => unary(UnaryOp::Sin),
        "Cos" => unary(UnaryOp::Cos),
        "Tan" => unary(UnaryOp::Tan),
        "Tanh" => unary(UnaryOp::Tanh),
        "Erf" => unary(UnaryOp::Erf),
        "Relu" => unary(UnaryOp::Relu),
        "Sigmoid" => unary(UnaryOp::Sigmoid),
        "Softsign" => unary(UnaryOp::Softsign),
        "Softplus" => unary(UnaryOp::Softplus),
        "HardSwish" => unary(UnaryOp::HardSwish),
        "Not" => unary(UnaryOp::Not),
        "IsNaN" => unary(UnaryOp::IsNaN),
        "Mish" => Some((Recipe::Mish, vec![0])),
        "LeakyRelu" => unary(UnaryOp::LeakyRelu(float(n, "alpha", 0.01))),
        "Elu" => unary(UnaryOp::Elu(float(n, "alpha", 1.0))),
        "Selu" => unary(UnaryOp::Selu { alpha: float(n, "alpha", 1.673_263_2), gamma: float(n, "gamma", 1.050_701) }),
        "HardSigmoid" => unary(UnaryOp::HardSigmoid { alpha: float(n, "alpha", 0.2), beta: float(n, "beta", 0.5) }),
        "ThresholdedRelu" => unary(UnaryOp::ThresholdedRelu(float(n, "alpha", 1.0))),
        "Gelu" => match n.attribute("approximate").and_then(|x| x.value()) {
            None => unary(UnaryOp::Gelu),
            Some(AttrValue::String(s)) if s == b"none" => unary(UnaryOp::Gelu),
            Some(AttrValue::String(s)) if s == b"tanh" => unary(UnaryOp::GeluTanh),
            _ => None,
        },
        "Clip" => {
            let (lo, hi) = if opset < 11 {
                let at = |name: &str| match n.attribute(name).and_then(|x| x.value()) {
                    Some(AttrValue::Float(f)) => Some(f64::from(f)),
                    _ => None,
                };
                (at("min"), at("max"))
            } else {
                let bound = |i: usize| match present(i) {
                    None => Some(None),
                    Some(_) => scalar(i).map(Some),
                };
                (bound(1)?, bound(2)?)
            };
            unary(UnaryOp::Clip { min: lo.unwrap_or(f64::NEG_INFINITY), max: hi.unwrap_or(f64::INFINITY) })
        }
        "Pow" => match scalar(1) {
            Some(p) if p == 2.0 => unary(UnaryOp::Square),
            Some(p) if p == 1.0 => unary(UnaryOp::Identity),
            Some(p) => unary(UnaryOp::PowConst(p)),
            None => Some((Recipe::Binary(BinaryOp::Pow), vec![0, 1])),
        },
        "Add" | "Sub" | "Mul" | "Div" | "PRelu" | "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual"
        | "And" | "Or" | "Xor" => {
            let op = match n.op_type() {
                "Add" => BinaryOp::Add,
                "Sub" => BinaryOp::Sub,
                "Mul" => BinaryOp::Mul,
                "Div" => BinaryOp::Div,
                "PRelu" => BinaryOp::PRelu,
                "Equal" => BinaryOp::Equal,
                "Less" => BinaryOp::Less,
                "LessOrEqual" => BinaryOp::LessOrEqual,
                "Greater" => BinaryOp::Greater,
                "GreaterOrEqual" => BinaryOp::GreaterOrEqual,
                "And" => BinaryOp::And,
                "Or" => BinaryOp::Or,
                _ => BinaryOp::Xor,
            };
            if opset < 7 && int(n, "broadcast", 0) != 0 {
                return None;
            }
            Some((Recipe::Binary(op), vec![0, 1]))
        }
        "Max" | "Min" | "Sum" | "Mean" if n.inputs.len() >= 1 => {
            let op = match n.op_type() {
                "Max" => BinaryOp::Max,
                "Min" => BinaryOp::Min,
                _ => BinaryOp::Add,
            };
            Some((Recipe::Fold(op, n.op_type() == "Mean"), (0..n.inputs.len()).collect()))
        }
        "Where" => Some((Recipe::Select, vec![0, 1, 2])),
        // from float or bool only: the session's own kernels convert the other types
        "Cast" if present(0).is_some_and(|v| fits(dtype(v))) => Some((Recipe::Cast, vec![0])),
        "ReduceSum" | "ReduceMean" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceSumSquare" | "ReduceL1"
        | "ReduceL2" | "ReduceLogSum" | "ReduceLogSumExp" => {
            let op = n.op_type();
            let kind = match op {
                "ReduceSum" => Reduction::Sum,
                "ReduceMean" => Reduction::Mean,
                "ReduceMax" => Reduction::Max,
                "ReduceMin" => Reduction::Min,
                "ReduceProd" => Reduction::Prod,
                "ReduceSumSquare" => Reduction::SumSquare,
                "ReduceL1" => Reduction::L1,
                "ReduceL2" => Reduction::L2,
                "ReduceLogSum" => Reduction::LogSum,
                _ => Reduction::LogSumExp,
            };
            let rank = rank0?;
            let since = if op == "ReduceSum" { 13 } else { 18 };
            let given = if opset >= since {
                match present(1) {
                    Some(v) => Some(a.constant(model, v)?.as_i64s()?),
                    None => None,
                }
            } else {
                ints(n, "axes")
            };
            let raw: Vec<i64> = match given {
                Some(v) if !v.is_empty() => v,
                _ if int(n, "noop_with_empty_axes", 0) != 0 => return None,
                _ => (0..rank as i64).collect(),
            };
            let mut axes: Vec<usize> = raw.iter().map(|&i| axis(i, rank)).collect::<Option<_>>()?;
            axes.sort_unstable();
            axes.dedup();
            Some((Recipe::Reduce { axes, keepdims: int(n, "keepdims", 1) != 0, kind }, vec![0]))
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let rank = rank0?;
            let kind = if n.op_type() == "GlobalMaxPool" { Reduction::Max } else { Reduction::Mean };
            Some((Recipe::Reduce { axes: (2..rank).collect(), keepdims: true, kind }, vec![0]))
        }
        "Softmax" | "LogSoftmax" => {
            let rank = rank0?;
            let axes = if opset < 13 {
                // Coerced to 2-D at `axis` (which may be the rank).
                let i = int(n, "axis", 1);
                let first = usize::try_from(if i < 0 { i + rank as i64 } else { i }).ok().filter(|&f| f <= rank)?;
                (first..rank).collect()
            } else {
                vec![axis(int(n, "axis", -1), rank)?]
            };
            Some((Recipe::Softmax { axes, log: n.op_type() == "LogSoftmax" }, vec![0]))
        }
        "LayerNormalization" => {
            let rank = rank0?;
            if int(n, "stash_type", 1) != 1 {
                return None;
            }
            let first = axis(int(n, "axis", -1), rank)?;
            let data = if present(2).is_some() { vec![0, 1, 2] } else { vec![0, 1] };
            Some((Recipe::LayerNorm { axes: (first..rank).collect(), eps: float(n, "epsilon", 1e-5) }, data))
        }
        "RMSNormalization" => {
            let rank = rank0?;
            let first = axis(int(n, "axis", -1), rank)?;
            Some((Recipe::RmsNorm { axes: (first..rank).collect(), eps: float(n, "epsilon", 1e-5) }, vec![0, 1]))
        }
        _ => None,
    }?;
    // Every data input must be present and of a type the programs compute.
    for &i in &recipe.1 {
        let v = present(i)?;
        if !fits(dtype(v)) || a.shape(model, v).is_none() {
            return None;
        }
    }
    if recipe.0.axes().is_some_and(|axes| axes.is_empty()) {
        return None;
    }
    Some(recipe)
}
