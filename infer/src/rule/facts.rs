//! What the lowering knows about one graph value: its kind (tensor,
//! sequence, optional, map), its shape as a solver row, its element type, and
//! — for tensors that compute shapes — its elements.
//!
//! Integer elements are size terms ([`Elem`]): a known integer, an expression
//! over rigid symbols (`batch*seq`), or a solver dimension variable, so that
//! `Shape(x)` of an axis not yet known still feeds a `Reshape` target that
//! names the same axis. Float, bool and string elements are kept as plain
//! values (bound inputs, constants) for the few operators whose output shape
//! depends on them (`Range`, `NonZero`, `Resize` scales, ...).

use diamond_ir::term::{DimVar, RowTerm, SizeExpr};
use diamond_ir::ElemType;
use std::sync::Arc;

/// One integer element of a shape-computing tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Elem {
    /// A known integer.
    Int(i64),
    /// An expression over rigid symbols (never a constant: those are `Int`).
    Expr(SizeExpr),
    /// The size of an axis the solver has not determined yet.
    Var(DimVar),
    /// Nothing known.
    Unknown,
}

impl Elem {
    /// The element from an expression, folding constants to `Int`.
    pub fn from_expr(e: SizeExpr) -> Elem {
        match e.as_constant() {
            Some(n) => Elem::Int(n),
            None => Elem::Expr(e),
        }
    }

    /// The known integer, if any.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Elem::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The element as a size expression (`Int` and `Expr` only).
    pub fn as_expr(&self) -> Option<SizeExpr> {
        match self {
            Elem::Int(n) => Some(SizeExpr::constant(*n)),
            Elem::Expr(e) => Some(e.clone()),
            _ => None,
        }
    }
}

/// The elements of a constant or partially known tensor, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstData {
    /// Integer (and bool-as-integer is not used: see `Bools`) elements.
    Ints(Vec<Elem>),
    /// Floating-point elements, widened to `f64`.
    Floats(Vec<f64>),
    /// Boolean elements.
    Bools(Vec<bool>),
    /// String elements.
    Strings(Vec<Vec<u8>>),
}

impl ConstData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            ConstData::Ints(v) => v.len(),
            ConstData::Floats(v) => v.len(),
            ConstData::Bools(v) => v.len(),
            ConstData::Strings(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A tensor whose shape is known and whose elements are (at least partly) known.
#[derive(Clone, Debug, PartialEq)]
pub struct ConstValue {
    /// Element type.
    pub dtype: ElemType,
    /// Shape.
    pub shape: Vec<usize>,
    /// Elements, `shape.iter().product()` of them.
    pub data: ConstData,
}

impl ConstValue {
    /// An integer tensor of the given shape.
    pub fn ints(dtype: ElemType, shape: Vec<usize>, elems: Vec<Elem>) -> ConstValue {
        ConstValue { dtype, shape, data: ConstData::Ints(elems) }
    }

    /// A rank-1 int64 tensor.
    pub fn int_vector(elems: Vec<Elem>) -> ConstValue {
        ConstValue::ints(ElemType::Int64, vec![elems.len()], elems)
    }

    /// A scalar int64 tensor.
    pub fn int_scalar(e: Elem) -> ConstValue {
        ConstValue::ints(ElemType::Int64, Vec::new(), vec![e])
    }

    /// The integer elements, if this is an integer tensor.
    pub fn int_elems(&self) -> Option<&[Elem]> {
        match &self.data {
            ConstData::Ints(v) => Some(v),
            _ => None,
        }
    }

    /// Every element as a known `i64` (integers; bools as 0/1; floats that are whole numbers).
    pub fn as_i64s(&self) -> Option<Vec<i64>> {
        match &self.data {
            ConstData::Ints(v) => v.iter().map(Elem::as_int).collect(),
            ConstData::Bools(v) => Some(v.iter().map(|&b| b as i64).collect()),
            ConstData::Floats(v) => {
                v.iter().map(|&f| if f.fract() == 0.0 && f.abs() < 9.0e15 { Some(f as i64) } else { None }).collect()
            }
            ConstData::Strings(_) => None,
        }
    }

    /// Every element as `f64` (integers must be known).
    pub fn as_f64s(&self) -> Option<Vec<f64>> {
        match &self.data {
            ConstData::Ints(v) => v.iter().map(|e| e.as_int().map(|n| n as f64)).collect(),
            ConstData::Floats(v) => Some(v.clone()),
            ConstData::Bools(v) => Some(v.iter().map(|&b| b as u8 as f64).collect()),
            ConstData::Strings(_) => None,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// The kind of a graph value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A tensor.
    Tensor,
    /// A sparse tensor.
    SparseTensor,
    /// A sequence of values of the inner kind.
    Sequence(Box<ValueKind>),
    /// An optional value of the inner kind.
    Optional(Box<ValueKind>),
    /// A map from keys of the given type to values of the inner kind.
    Map(ElemType, Box<ValueKind>),
    /// Not known (an unsupported operator's output).
    Unknown,
}

impl ValueKind {
    /// Whether this kind is a plain tensor.
    pub fn is_tensor(&self) -> bool {
        matches!(self, ValueKind::Tensor)
    }

    /// The kind's type string for reports: `tensor`, `seq(tensor)`, ...
    pub fn describe(&self) -> String {
        match self {
            ValueKind::Tensor => "tensor".into(),
            ValueKind::SparseTensor => "sparse_tensor".into(),
            ValueKind::Sequence(k) => format!("seq({})", k.describe()),
            ValueKind::Optional(k) => format!("optional({})", k.describe()),
            ValueKind::Map(key, k) => format!("map({key},{})", k.describe()),
            ValueKind::Unknown => "unknown".into(),
        }
    }

    /// [`ValueKind::describe`], without an allocation for the kinds whose
    /// name is fixed (a report lists tens of thousands of tensors).
    pub fn describe_shared(&self) -> std::borrow::Cow<'static, str> {
        match self {
            ValueKind::Tensor => "tensor".into(),
            ValueKind::SparseTensor => "sparse_tensor".into(),
            ValueKind::Unknown => "unknown".into(),
            composite => composite.describe().into(),
        }
    }

    /// The innermost tensor-like kind (through sequences, optionals and maps).
    pub fn innermost(&self) -> &ValueKind {
        match self {
            ValueKind::Sequence(k) | ValueKind::Optional(k) | ValueKind::Map(_, k) => k.innermost(),
            other => other,
        }
    }
}

/// Everything known about one value.
///
/// For a tensor, `row` is its shape and `dtype` its element type. For a
/// sequence (or an optional, or a map's values), `row` and `dtype` describe
/// every tensor inside it — the shape they share, with variables where they
/// differ — and `items` lists the elements when the sequence's length is known.
#[derive(Clone, Debug)]
pub struct Facts {
    /// Tensor, sequence, optional, map.
    pub kind: ValueKind,
    /// The shape (of the tensor, or of each tensor inside).
    pub row: RowTerm,
    /// The element type (of the tensor, or of each tensor inside).
    pub dtype: Option<ElemType>,
    /// The elements, where known.
    pub value: Option<Arc<ConstValue>>,
    /// A sequence's elements, when its length is known.
    pub items: Option<Vec<Facts>>,
    /// An optional's presence, when known.
    pub present: Option<bool>,
}

impl Facts {
    /// A tensor with the given shape and element type.
    pub fn tensor(row: RowTerm, dtype: Option<ElemType>) -> Facts {
        Facts { kind: ValueKind::Tensor, row, dtype, value: None, items: None, present: None }
    }
}
