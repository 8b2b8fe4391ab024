//! The values the TorchScript interpreter works with: graph tensors (with
//! their element type and rank where known), constants folded at import,
//! integers only known at run time (a size read from a dynamic shape),
//! containers, and references to submodules.

use crate::torch::values::TsObject;
use diamond_ir::{ElemType, ValueId};

/// A tensor of the graph being built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct T {
    /// The graph value.
    pub id: ValueId,
    /// Its element type, if known.
    pub elem: Option<ElemType>,
    /// Its rank, if known.
    pub rank: Option<usize>,
}

/// A value during lowering.
#[derive(Clone, Debug)]
pub enum Val<'a> {
    /// A tensor.
    Tensor(T),
    /// An int known at import.
    Int(i64),
    /// An int known only when the model runs: a 0-d int64 tensor.
    RuntimeInt(ValueId),
    /// A float known at import.
    Float(f64),
    /// A bool known at import.
    Bool(bool),
    /// A string.
    Str(String),
    /// `None`.
    None,
    /// A device (`torch.device("cpu")`): ignored by the lowering.
    Device,
    /// A list.
    List(Vec<Val<'a>>),
    /// A tuple.
    Tuple(Vec<Val<'a>>),
    /// A module (or scripted object): the object and its path from the root (`layer1.0`).
    Module(&'a TsObject, String),
    /// `split(x, size, dim)` whose number of pieces is known only once it is
    /// unpacked or indexed: piece `i` is `x[i*size : (i+1)*size]` along `dim`.
    Chunks(T, i64, i64),
}

impl<'a> Val<'a> {
    /// What kind of value this is, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Val::Tensor(_) => "a tensor",
            Val::Int(_) | Val::RuntimeInt(_) => "an int",
            Val::Float(_) => "a float",
            Val::Bool(_) => "a bool",
            Val::Str(_) => "a string",
            Val::None => "None",
            Val::Device => "a device",
            Val::List(_) => "a list",
            Val::Tuple(_) => "a tuple",
            Val::Module(..) => "a module",
            Val::Chunks(..) => "a split",
        }
    }

    /// The int, if known at import.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(n) => Some(*n),
            Val::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The number as a float, if known at import.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Val::Int(n) => Some(*n as f64),
            Val::Float(x) => Some(*x),
            Val::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    /// The ints of a list or tuple known at import (a single int counts as one).
    pub fn as_ints(&self) -> Option<Vec<i64>> {
        match self {
            Val::List(items) | Val::Tuple(items) => items.iter().map(Val::as_int).collect(),
            Val::Int(n) => Some(vec![*n]),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub fn items(&self) -> Option<&[Val<'a>]> {
        match self {
            Val::List(items) | Val::Tuple(items) => Some(items),
            _ => None,
        }
    }

    /// The tensor an arithmetic operand stands for: a tensor, or a runtime
    /// int as a 0-d int64 tensor (numbers known at import take the other side's type).
    pub fn as_operand(&self) -> Option<T> {
        match self {
            Val::Tensor(t) => Some(*t),
            Val::RuntimeInt(id) => Some(T { id: *id, elem: Some(ElemType::Int64), rank: Some(0) }),
            _ => None,
        }
    }

    /// The tensor, if this is one.
    pub fn tensor(&self) -> Option<T> {
        match self {
            Val::Tensor(t) => Some(*t),
            _ => None,
        }
    }

    /// Whether this is `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Val::None)
    }
}

/// TorchScript `ScalarType` codes (`torch.to(x, 6)`) and their ONNX element types.
const SCALAR_TYPES: [(i64, ElemType); 10] = [
    (0, ElemType::Uint8),
    (1, ElemType::Int8),
    (2, ElemType::Int16),
    (3, ElemType::Int32),
    (4, ElemType::Int64),
    (5, ElemType::Float16),
    (6, ElemType::Float),
    (7, ElemType::Double),
    (11, ElemType::Bool),
    (15, ElemType::Bfloat16),
];

/// The ONNX element type of a TorchScript `ScalarType` code.
pub fn scalar_type(code: i64) -> Option<ElemType> {
    SCALAR_TYPES.iter().find(|(c, _)| *c == code).map(|(_, e)| *e)
}

/// The TorchScript `ScalarType` code of an element type.
pub fn scalar_code(elem: ElemType) -> Option<i64> {
    SCALAR_TYPES.iter().find(|(_, e)| *e == elem).map(|(c, _)| *c)
}

/// Whether `e` is a floating-point type.
pub fn is_float(e: ElemType) -> bool {
    matches!(e, ElemType::Float | ElemType::Double | ElemType::Float16 | ElemType::Bfloat16)
}
