//! Runtime values: dense tensors with typed storage, sequences, optionals,
//! and the maps (and sequences of maps) of the `ai.onnx.ml` operators.
//!
//! A [`Tensor`] is a shape and a [`Data`] vector of one element type, in C
//! order. 16-bit floats are stored as `half` types and computed through `f64`
//! (every kernel converts, computes, and rounds once to the element type).
//! Strings are byte strings, as ONNX stores them.

use diamond_ir::ElemType;
use half::{bf16, f16};

/// Elements of one type, in C order.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    Str(Vec<Vec<u8>>),
    F8E4M3FN(Vec<crate::exotic::F8E4M3FN>),
    F8E4M3FNUZ(Vec<crate::exotic::F8E4M3FNUZ>),
    F8E5M2(Vec<crate::exotic::F8E5M2>),
    F8E5M2FNUZ(Vec<crate::exotic::F8E5M2FNUZ>),
    F4E2M1(Vec<crate::exotic::F4E2M1>),
    I4(Vec<crate::exotic::I4>),
    U4(Vec<crate::exotic::U4>),
    I2(Vec<crate::exotic::I2>),
    U2(Vec<crate::exotic::U2>),
    F8E8M0(Vec<crate::exotic::F8E8M0>),
}

/// Runs `$body` with `$v` bound to the element vector of any variant.
#[macro_export]
macro_rules! each_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::tensor::Data::F32($v) => $body,
            $crate::tensor::Data::F64($v) => $body,
            $crate::tensor::Data::F16($v) => $body,
            $crate::tensor::Data::Bf16($v) => $body,
            $crate::tensor::Data::I8($v) => $body,
            $crate::tensor::Data::I16($v) => $body,
            $crate::tensor::Data::I32($v) => $body,
            $crate::tensor::Data::I64($v) => $body,
            $crate::tensor::Data::U8($v) => $body,
            $crate::tensor::Data::U16($v) => $body,
            $crate::tensor::Data::U32($v) => $body,
            $crate::tensor::Data::U64($v) => $body,
            $crate::tensor::Data::Bool($v) => $body,
            $crate::tensor::Data::Str($v) => $body,
            $crate::tensor::Data::F8E4M3FN($v) => $body,
            $crate::tensor::Data::F8E4M3FNUZ($v) => $body,
            $crate::tensor::Data::F8E5M2($v) => $body,
            $crate::tensor::Data::F8E5M2FNUZ($v) => $body,
            $crate::tensor::Data::F4E2M1($v) => $body,
            $crate::tensor::Data::I4($v) => $body,
            $crate::tensor::Data::U4($v) => $body,
            $crate::tensor::Data::I2($v) => $body,
            $crate::tensor::Data::U2($v) => $body,
            $crate::tensor::Data::F8E8M0($v) => $body,
        }
    };
}

/// Runs `$body` with `$v` bound to the element vector of a numeric (or bool)
/// variant, `$other` for strings.
#[macro_export]
macro_rules! each_num {
    ($data:expr, $v:ident => $body:expr, _ => $other:expr) => {
        match $data {
            $crate::tensor::Data::F32($v) => $body,
            $crate::tensor::Data::F64($v) => $body,
            $crate::tensor::Data::F16($v) => $body,
            $crate::tensor::Data::Bf16($v) => $body,
            $crate::tensor::Data::I8($v) => $body,
            $crate::tensor::Data::I16($v) => $body,
            $crate::tensor::Data::I32($v) => $body,
            $crate::tensor::Data::I64($v) => $body,
            $crate::tensor::Data::U8($v) => $body,
            $crate::tensor::Data::U16($v) => $body,
            $crate::tensor::Data::U32($v) => $body,
            $crate::tensor::Data::U64($v) => $body,
            $crate::tensor::Data::Bool($v) => $body,
            $crate::tensor::Data::Str(_) => $other,
            $crate::tensor::Data::F8E4M3FN($v) => $body,
            $crate::tensor::Data::F8E4M3FNUZ($v) => $body,
            $crate::tensor::Data::F8E5M2($v) => $body,
            $crate::tensor::Data::F8E5M2FNUZ($v) => $body,
            $crate::tensor::Data::F4E2M1($v) => $body,
            $crate::tensor::Data::I4($v) => $body,
            $crate::tensor::Data::U4($v) => $body,
            $crate::tensor::Data::I2($v) => $body,
            $crate::tensor::Data::U2($v) => $body,
            $crate::tensor::Data::F8E8M0($v) => $body,
        }
    };
}

/// Runs `$body` with `$a` and `$b` bound to two element vectors of the same
/// numeric variant, `$other` when the variants differ or are strings.
#[macro_export]
macro_rules! each_num2 {
    ($x:expr, $y:expr, $a:ident, $b:ident => $body:expr, _ => $other:expr) => {
        match ($x, $y) {
            ($crate::tensor::Data::F32($a), $crate::tensor::Data::F32($b)) => $body,
            ($crate::tensor::Data::F64($a), $crate::tensor::Data::F64($b)) => $body,
            ($crate::tensor::Data::F16($a), $crate::tensor::Data::F16($b)) => $body,
            ($crate::tensor::Data::Bf16($a), $crate::tensor::Data::Bf16($b)) => $body,
            ($crate::tensor::Data::I8($a), $crate::tensor::Data::I8($b)) => $body,
            ($crate::tensor::Data::I16($a), $crate::tensor::Data::I16($b)) => $body,
            ($crate::tensor::Data::I32($a), $crate::tensor::Data::I32($b)) => $body,
            ($crate::tensor::Data::I64($a), $crate::tensor::Data::I64($b)) => $body,
            ($crate::tensor::Data::U8($a), $crate::tensor::Data::U8($b)) => $body,
            ($crate::tensor::Data::U16($a), $crate::tensor::Data::U16($b)) => $body,
            ($crate::tensor::Data::U32($a), $crate::tensor::Data::U32($b)) => $body,
            ($crate::tensor::Data::U64($a), $crate::tensor::Data::U64($b)) => $body,
            ($crate::tensor::Data::Bool($a), $crate::tensor::Data::Bool($b)) => $body,
            ($crate::tensor::Data::F8E4M3FN($a), $crate::tensor::Data::F8E4M3FN($b)) => $body,
            ($crate::tensor::Data::F8E4M3FNUZ($a), $crate::tensor::Data::F8E4M3FNUZ($b)) => $body,
            ($crate::tensor::Data::F8E5M2($a), $crate::tensor::Data::F8E5M2($b)) => $body,
            ($crate::tensor::Data::F8E5M2FNUZ($a), $crate::tensor::Data::F8E5M2FNUZ($b)) => $body,
            ($crate::tensor::Data::F4E2M1($a), $crate::tensor::Data::F4E2M1($b)) => $body,
            ($crate::tensor::Data::I4($a), $crate::tensor::Data::I4($b)) => $body,
            ($crate::tensor::Data::U4($a), $crate::tensor::Data::U4($b)) => $body,
            ($crate::tensor::Data::I2($a), $crate::tensor::Data::I2($b)) => $body,
            ($crate::tensor::Data::U2($a), $crate::tensor::Data::U2($b)) => $body,
            ($crate::tensor::Data::F8E8M0($a), $crate::tensor::Data::F8E8M0($b)) => $body,
            _ => $other,
        }
    };
}

/// An element type with storage in [`Data`].
pub trait Elem: Clone + std::fmt::Debug + 'static {
    /// Wraps a vector of this type.
    fn wrap(v: Vec<Self>) -> Data;
}

/// A numeric (or bool) element type. Floats compute through `f64`, integers
/// through `i128` (wrapping back to their width).
pub trait Scalar: Elem + Copy + PartialOrd + Default {
    /// The ONNX element type.
    const ELEM: ElemType;
    /// Whether this is a floating-point type.
    const FLOAT: bool;
    /// The value as `f64`.
    fn to_f64(self) -> f64;
    /// The nearest value (floats), the truncated and saturated one (integers,
    /// NaN → 0), or `x != 0` (bool).
    fn from_f64(x: f64) -> Self;
    /// The value as `i128` (floats truncated toward zero).
    fn to_i128(self) -> i128;
    /// The value wrapped to this type's width (floats: nearest).
    fn from_i128(x: i128) -> Self;
}

macro_rules! int_scalar {
    ($t:ty, $variant:ident, $elem:ident) => {
        impl Elem for $t {
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
        }
        impl Scalar for $t {
            const ELEM: ElemType = ElemType::$elem;
            const FLOAT: bool = false;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            fn to_i128(self) -> i128 {
                self as i128
            }
            fn from_i128(x: i128) -> Self {
                x as $t
            }
        }
    };
}

int_scalar!(i8, I8, Int8);
int_scalar!(i16, I16, Int16);
int_scalar!(i32, I32, Int32);
int_scalar!(i64, I64, Int64);
int_scalar!(u8, U8, Uint8);
int_scalar!(u16, U16, Uint16);
int_scalar!(u32, U32, Uint32);
int_scalar!(u64, U64, Uint64);

macro_rules! float_scalar {
    ($t:ty, $variant:ident, $elem:ident, $to:expr, $from:expr) => {
        impl Elem for $t {
            fn wrap(v: Vec<Self>) -> Data {
                Data::$variant(v)
            }
        }
        impl Scalar for $t {
            const ELEM: ElemType = ElemType::$elem;
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn from_f64(x: f64) -> Self {
                $from(x)
            }
            fn to_i128(self) -> i128 {
                $to(self) as i128
            }
            fn from_i128(x: i128) -> Self {
                $from(x as f64)
            }
        }
    };
}

float_scalar!(f32, F32, Float, |x: f32| x as f64, |x: f64| x as f32);
float_scalar!(f64, F64, Double, |x: f64| x, |x: f64| x);
float_scalar!(f16, F16, Float16, |x: f16| x.to_f64(), f16::from_f64);
float_scalar!(bf16, Bf16, Bfloat16, |x: bf16| x.to_f64(), bf16::from_f64);

impl Elem for bool {
    fn wrap(v: Vec<Self>) -> Data {
        Data::Bool(v)
    }
}

impl Scalar for bool {
    const ELEM: ElemType = ElemType::Bool;
    const FLOAT: bool = false;
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn from_f64(x: f64) -> Self {
        x != 0.0
    }
    fn to_i128(self) -> i128 {
        i128::from(self)
    }
    fn from_i128(x: i128) -> Self {
        x != 0
    }
}

impl Elem for Vec<u8> {
    fn wrap(v: Vec<Self>) -> Data {
        Data::Str(v)
    }
}

impl Data {
    /// The element type.
    pub fn elem(&self) -> ElemType {
        match self {
            Data::F32(_) => ElemType::Float,
            Data::F64(_) => ElemType::Double,
            Data::F16(_) => ElemType::Float16,
            Data::Bf16(_) => ElemType::Bfloat16,
            Data::I8(_) => ElemType::Int8,
            Data::I16(_) => ElemType::Int16,
            Data::I32(_) => ElemType::Int32,
            Data::I64(_) => ElemType::Int64,
            Data::U8(_) => ElemType::Uint8,
            Data::U16(_) => ElemType::Uint16,
            Data::U32(_) => ElemType::Uint32,
            Data::U64(_) => ElemType::Uint64,
            Data::Bool(_) => ElemType::Bool,
            Data::Str(_) => ElemType::String,
            Data::F8E4M3FN(_) => ElemType::Float8e4m3fn,
            Data::F8E4M3FNUZ(_) => ElemType::Float8e4m3fnuz,
            Data::F8E5M2(_) => ElemType::Float8e5m2,
            Data::F8E5M2FNUZ(_) => ElemType::Float8e5m2fnuz,
            Data::F4E2M1(_) => ElemType::Float4e2m1,
            Data::I4(_) => ElemType::Int4,
            Data::U4(_) => ElemType::Uint4,
            Data::I2(_) => ElemType::Int2,
            Data::U2(_) => ElemType::Uint2,
            Data::F8E8M0(_) => ElemType::Float8e8m0,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        each_data!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements at `indices`, in that order. Every index must be in range.
    pub fn take(&self, indices: &[usize]) -> Data {
        each_data!(self, v => Elem::wrap(indices.iter().map(|&i| v[i].clone()).collect()))
    }

    /// The elements of the runs `(start, length)`, one run after another, as
    /// [`Data::take`] of every index of each run (copied a run at a time).
    /// Every run must be in range.
    pub fn take_runs(&self, runs: &[(usize, usize)]) -> Data {
        let total = runs.iter().map(|&(_, len)| len).sum();
        each_data!(self, v => {
            let mut out = Vec::with_capacity(total);
            for &(start, len) in runs {
                out.extend_from_slice(&v[start..start + len]);
            }
            Elem::wrap(out)
        })
    }

    /// An empty vector of `elem`, or `None` for types without storage here.
    pub fn empty(elem: ElemType) -> Option<Data> {
        Data::from_f64s(elem, &[]).or_else(|| (elem == ElemType::String).then(|| Data::Str(Vec::new())))
    }

    /// `values` converted to `elem` (see [`Scalar::from_f64`]); `None` for
    /// strings and types without storage here.
    pub fn from_f64s(elem: ElemType, values: &[f64]) -> Option<Data> {
        fn conv<T: Scalar>(values: &[f64]) -> Data {
            T::wrap(values.iter().map(|&x| T::from_f64(x)).collect())
        }
        Some(match elem {
            ElemType::Float => conv::<f32>(values),
            ElemType::Double => conv::<f64>(values),
            ElemType::Float16 => conv::<f16>(values),
            ElemType::Bfloat16 => conv::<bf16>(values),
            ElemType::Int8 => conv::<i8>(values),
            ElemType::Int16 => conv::<i16>(values),
            ElemType::Int32 => conv::<i32>(values),
            ElemType::Int64 => conv::<i64>(values),
            ElemType::Uint8 => conv::<u8>(values),
            ElemType::Uint16 => conv::<u16>(values),
            ElemType::Uint32 => conv::<u32>(values),
            ElemType::Uint64 => conv::<u64>(values),
            ElemType::Bool => conv::<bool>(values),
            ElemType::Float8e4m3fn => conv::<crate::exotic::F8E4M3FN>(values),
            ElemType::Float8e4m3fnuz => conv::<crate::exotic::F8E4M3FNUZ>(values),
            ElemType::Float8e5m2 => conv::<crate::exotic::F8E5M2>(values),
            ElemType::Float8e5m2fnuz => conv::<crate::exotic::F8E5M2FNUZ>(values),
            ElemType::Float4e2m1 => conv::<crate::exotic::F4E2M1>(values),
            ElemType::Int4 => conv::<crate::exotic::I4>(values),
            ElemType::Uint4 => conv::<crate::exotic::U4>(values),
            ElemType::Int2 => conv::<crate::exotic::I2>(values),
            ElemType::Uint2 => conv::<crate::exotic::U2>(values),
            ElemType::Float8e8m0 => conv::<crate::exotic::F8E8M0>(values),
            _ => return None,
        })
    }

    /// `values` wrapped to `elem` (see [`Scalar::from_i128`]); `None` for
    /// strings and types without storage here.
    pub fn from_i128s(elem: ElemType, values: &[i128]) -> Option<Data> {
        fn conv<T: Scalar>(values: &[i128]) -> Data {
            T::wrap(values.iter().map(|&x| T::from_i128(x)).collect())
        }
        Some(match elem {
            ElemType::Float => conv::<f32>(values),
            ElemType::Double => conv::<f64>(values),
            ElemType::Float16 => conv::<f16>(values),
            ElemType::Bfloat16 => conv::<bf16>(values),
            ElemType::Int8 => conv::<i8>(values),
            ElemType::Int16 => conv::<i16>(values),
            ElemType::Int32 => conv::<i32>(values),
            ElemType::Int64 => conv::<i64>(values),
            ElemType::Uint8 => conv::<u8>(values),
            ElemType::Uint16 => conv::<u16>(values),
            ElemType::Uint32 => conv::<u32>(values),
            ElemType::Uint64 => conv::<u64>(values),
            ElemType::Bool => conv::<bool>(values),
            ElemType::Float8e4m3fn => conv::<crate::exotic::F8E4M3FN>(values),
            ElemType::Float8e4m3fnuz => conv::<crate::exotic::F8E4M3FNUZ>(values),
            ElemType::Float8e5m2 => conv::<crate::exotic::F8E5M2>(values),
            ElemType::Float8e5m2fnuz => conv::<crate::exotic::F8E5M2FNUZ>(values),
            ElemType::Float4e2m1 => conv::<crate::exotic::F4E2M1>(values),
            ElemType::Int4 => conv::<crate::exotic::I4>(values),
            ElemType::Uint4 => conv::<crate::exotic::U4>(values),
            ElemType::Int2 => conv::<crate::exotic::I2>(values),
            ElemType::Uint2 => conv::<crate::exotic::U2>(values),
            ElemType::Float8e8m0 => conv::<crate::exotic::F8E8M0>(values),
            _ => return None,
        })
    }

    /// Every element as `f64`; `None` for strings.
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        each_num!(self, v => Some(v.iter().map(|x| x.to_f64()).collect()), _ => None)
    }

    /// Every element as `i128` (floats truncated); `None` for strings.
    pub fn to_i128s(&self) -> Option<Vec<i128>> {
        each_num!(self, v => Some(v.iter().map(|x| x.to_i128()).collect()), _ => None)
    }

    /// The concatenation of `parts`, which must share one element type.
    pub fn concat(parts: &[&Data]) -> Option<Data> {
        let first = parts.first()?;
        let mut out = Data::empty(first.elem())?;
        for part in parts {
            match (&mut out, part) {
                (Data::F32(o), Data::F32(p)) => o.extend_from_slice(p),
                (Data::F64(o), Data::F64(p)) => o.extend_from_slice(p),
                (Data::F16(o), Data::F16(p)) => o.extend_from_slice(p),
                (Data::Bf16(o), Data::Bf16(p)) => o.extend_from_slice(p),
                (Data::I8(o), Data::I8(p)) => o.extend_from_slice(p),
                (Data::I16(o), Data::I16(p)) => o.extend_from_slice(p),
                (Data::I32(o), Data::I32(p)) => o.extend_from_slice(p),
                (Data::I64(o), Data::I64(p)) => o.extend_from_slice(p),
                (Data::U8(o), Data::U8(p)) => o.extend_from_slice(p),
                (Data::U16(o), Data::U16(p)) => o.extend_from_slice(p),
                (Data::U32(o), Data::U32(p)) => o.extend_from_slice(p),
                (Data::U64(o), Data::U64(p)) => o.extend_from_slice(p),
                (Data::Bool(o), Data::Bool(p)) => o.extend_from_slice(p),
                (Data::Str(o), Data::Str(p)) => o.extend_from_slice(p),
                (Data::F8E4M3FN(o), Data::F8E4M3FN(p)) => o.extend_from_slice(p),
                (Data::F8E4M3FNUZ(o), Data::F8E4M3FNUZ(p)) => o.extend_from_slice(p),
                (Data::F8E5M2(o), Data::F8E5M2(p)) => o.extend_from_slice(p),
                (Data::F8E5M2FNUZ(o), Data::F8E5M2FNUZ(p)) => o.extend_from_slice(p),
                (Data::F4E2M1(o), Data::F4E2M1(p)) => o.extend_from_slice(p),
                (Data::I4(o), Data::I4(p)) => o.extend_from_slice(p),
                (Data::U4(o), Data::U4(p)) => o.extend_from_slice(p),
                (Data::I2(o), Data::I2(p)) => o.extend_from_slice(p),
                (Data::U2(o), Data::U2(p)) => o.extend_from_slice(p),
                (Data::F8E8M0(o), Data::F8E8M0(p)) => o.extend_from_slice(p),
                _ => return None,
            }
        }
        Some(out)
    }

    /// The elements as little-endian bytes, one whole byte or more per
    /// element; `None` for strings and the sub-byte types.
    pub fn to_le_bytes(&self) -> Option<Vec<u8>> {
        Some(match self {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::Bf16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Data::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U8(v) => v.clone(),
            Data::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
            Data::F8E4M3FN(v) => v.iter().map(|x| x.0).collect(),
            Data::F8E4M3FNUZ(v) => v.iter().map(|x| x.0).collect(),
            Data::F8E5M2(v) => v.iter().map(|x| x.0).collect(),
            Data::F8E5M2FNUZ(v) => v.iter().map(|x| x.0).collect(),
            Data::F8E8M0(v) => v.iter().map(|x| x.0).collect(),
            _ => return None,
        })
    }

    /// Elements of `elem` from little-endian bytes (the layout of ONNX
    /// `raw_data`).
    pub fn from_le_bytes(elem: ElemType, raw: &[u8], count: usize) -> Result<Data, String> {
        decode_raw(elem, raw, count)
    }

    /// Bytes the elements take in memory (strings: their lengths).
    pub fn byte_size(&self) -> u64 {
        match self {
            Data::Str(v) => v.iter().map(|s| s.len() as u64).sum(),
            other => other.len() as u64 * elem_bytes(other.elem()).unwrap_or(1),
        }
    }
}

/// Bytes one element of `elem` takes in memory: its width rounded up to a
/// byte (bool, 4-bit and 2-bit types take one each, unpacked); `None` for
/// strings, whose size is their length. The execution plan predicts sizes
/// with it, so it must stay the executor's measure.
pub fn elem_bytes(elem: ElemType) -> Option<u64> {
    if elem == ElemType::String {
        return None;
    }
    Some((elem.bit_width().unwrap_or(8) as u64 / 8).max(1))
}

/// A dense tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dims, outermost first.
    pub shape: Vec<usize>,
    /// The elements, `shape.iter().product()` of them.
    pub data: Data,
}

impl Tensor {
    /// A tensor; `None` when the element count does not match the shape.
    pub fn new(shape: Vec<usize>, data: Data) -> Option<Tensor> {
        (shape_len(&shape) == Some(data.len())).then_some(Tensor { shape, data })
    }

    /// A scalar (rank 0).
    pub fn scalar(data: Data) -> Tensor {
        Tensor { shape: Vec::new(), data }
    }

    /// A rank-1 `int64` tensor.
    pub fn from_i64s(values: Vec<i64>) -> Tensor {
        Tensor { shape: vec![values.len()], data: Data::I64(values) }
    }

    /// The element type.
    pub fn elem(&self) -> ElemType {
        self.data.elem()
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes the elements take.
    pub fn byte_size(&self) -> u64 {
        self.data.byte_size()
    }

    /// The same elements with another shape of the same size.
    pub fn reshaped(self, shape: Vec<usize>) -> Option<Tensor> {
        Tensor::new(shape, self.data)
    }

    /// Whether the element type is a float type.
    pub fn is_float(&self) -> bool {
        matches!(
            self.data,
            Data::F32(_)
                | Data::F64(_)
                | Data::F16(_)
                | Data::Bf16(_)
                | Data::F8E4M3FN(_)
                | Data::F8E4M3FNUZ(_)
                | Data::F8E5M2(_)
                | Data::F8E5M2FNUZ(_)
                | Data::F4E2M1(_)
                | Data::F8E8M0(_)
        )
    }

    /// Elements as `i64` (floats truncated); `None` for strings.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        Some(self.data.to_i128s()?.into_iter().map(|x| x as i64).collect())
    }

    /// Elements as `f64`; `None` for strings.
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        self.data.to_f64s()
    }

    /// Decodes a stored tensor (an initializer, a `Constant`'s value, a
    /// tensor file). External data is mapped and read.
    pub fn from_ir(t: &diamond_ir::Tensor) -> Result<Tensor, String> {
        decode(t)
    }
}

/// The element count of `shape`; `None` on overflow.
pub fn shape_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// A value a graph computes.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Tensor(Tensor),
    /// A sequence of tensors, with the element type it was declared with
    /// (needed when it is empty).
    Sequence(ElemType, Vec<Tensor>),
    /// An optional value; `None` is absent.
    Optional(Option<Box<Value>>),
    /// A map with scalar values, as the `ai.onnx.ml` operators use them.
    Map(MapValue),
    /// A sequence of maps (what `ZipMap` writes: one map per row).
    MapSequence(Vec<MapValue>),
}

/// An ONNX `map(K, V)` whose values are scalars: `keys` (int64 or string)
/// and `values` are parallel vectors, one entry per key. Keys are unique;
/// their order is the order the map was built or read in, so two maps are
/// compared through [`MapValue::sorted`].
#[derive(Clone, Debug, PartialEq)]
pub struct MapValue {
    /// The keys: [`Data::I64`] or [`Data::Str`].
    pub keys: Data,
    /// One value per key.
    pub values: Data,
}

impl MapValue {
    /// A map of `keys` to `values`; `None` when they differ in length or
    /// the keys are neither int64 nor strings.
    pub fn new(keys: Data, values: Data) -> Option<MapValue> {
        let key_ok = matches!(keys, Data::I64(_) | Data::Str(_));
        (key_ok && keys.len() == values.len()).then_some(MapValue { keys, values })
    }

    /// A map of `keys` to stored scalar tensors (a `MapProto`'s values).
    pub fn from_stored(keys: Data, values: &[diamond_ir::Tensor]) -> Result<MapValue, String> {
        let tensors = values.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        if let Some(t) = tensors.iter().find(|t| t.len() != 1) {
            return Err(format!("a map value has shape {:?}; only scalar values are read", t.shape));
        }
        let parts: Vec<&Data> = tensors.iter().map(|t| &t.data).collect();
        let values = match parts.first() {
            Some(_) => Data::concat(&parts).ok_or("the map's values differ in type")?,
            None => Data::F32(Vec::new()),
        };
        MapValue::new(keys, values).ok_or_else(|| "the map's keys are not int64 or strings".into())
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The positions of the entries in ascending key order.
    pub fn key_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.len()).collect();
        match &self.keys {
            Data::I64(k) => order.sort_by_key(|&i| k[i]),
            Data::Str(k) => order.sort_by(|&a, &b| k[a].cmp(&k[b])),
            _ => {}
        }
        order
    }

    /// The same map with its entries in ascending key order.
    pub fn sorted(&self) -> MapValue {
        let order = self.key_order();
        MapValue { keys: self.keys.take(&order), values: self.values.take(&order) }
    }

    /// Bytes held by keys and values.
    pub fn byte_size(&self) -> u64 {
        self.keys.byte_size() + self.values.byte_size()
    }
}

impl Value {
    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        match self {
            Value::Tensor(t) => t.byte_size(),
            Value::Sequence(_, items) => items.iter().map(Tensor::byte_size).sum(),
            Value::Optional(v) => v.as_ref().map_or(0, |v| v.byte_size()),
            Value::Map(m) => m.byte_size(),
            Value::MapSequence(maps) => maps.iter().map(MapValue::byte_size).sum(),
        }
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A short description of the kind: `tensor`, `sequence`, `optional`,
    /// `map`, `sequence of maps`.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "tensor",
            Value::Sequence(..) => "sequence",
            Value::Optional(_) => "optional",
            Value::Map(_) => "map",
            Value::MapSequence(_) => "sequence of maps",
        }
    }
}

fn decode(t: &diamond_ir::Tensor) -> Result<Tensor, String> {
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect::<Result<Vec<_>, _>>()?;
    let count = shape_len(&shape).ok_or("the element count overflows")?;
    let elem = t.elem_type();
    if t.rare().segment.is_some() {
        return Err("segmented tensors are not supported".into());
    }
    let external;
    let raw = match (t.external(), &t.data.raw) {
        (Some(ext), _) => {
            external = ext.load().map_err(|e| e.to_string())?;
            Some(&external[..])
        }
        (None, Some(raw)) => Some(&raw[..]),
        (None, None) => None,
    };
    let data = match raw {
        Some(raw) => decode_raw(elem, raw, count)?,
        None => decode_typed(elem, &t.data, count)?,
    };
    if data.len() != count {
        return Err(format!("{} elements stored for shape {:?}", data.len(), shape));
    }
    Ok(Tensor { shape, data })
}

fn decode_raw(elem: ElemType, raw: &[u8], count: usize) -> Result<Data, String> {
    if elem == ElemType::String {
        return Err("string tensors cannot use raw_data".into());
    }
    if let Some(small) = crate::exotic::decode_raw(elem, raw, count) {
        return small;
    }
    let width = elem.bit_width().ok_or_else(|| format!("element type {elem} is not supported"))? as usize;
    if width % 8 != 0 {
        return Err(format!("element type {elem} is not supported"));
    }
    let width = width / 8;
    if raw.len() != count * width {
        return Err(format!("raw_data has {} bytes, {count} elements of {elem} need {}", raw.len(), count * width));
    }
    macro_rules! le {
        ($t:ty, $n:literal) => {
            raw.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; $n]))).collect()
        };
    }
    Ok(match elem {
        ElemType::Float => Data::F32(le!(f32, 4)),
        ElemType::Double => Data::F64(le!(f64, 8)),
        ElemType::Float16 => Data::F16(raw.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect()),
        ElemType::Bfloat16 => Data::Bf16(raw.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]])).collect()),
        ElemType::Int8 => Data::I8(raw.iter().map(|&b| b as i8).collect()),
        ElemType::Int16 => Data::I16(le!(i16, 2)),
        ElemType::Int32 => Data::I32(le!(i32, 4)),
        ElemType::Int64 => Data::I64(le!(i64, 8)),
        ElemType::Uint8 => Data::U8(raw.to_vec()),
        ElemType::Uint16 => Data::U16(le!(u16, 2)),
        ElemType::Uint32 => Data::U32(le!(u32, 4)),
        ElemType::Uint64 => Data::U64(le!(u64, 8)),
        ElemType::Bool => Data::Bool(raw.iter().map(|&b| b != 0).collect()),
        other => return Err(format!("element type {other} is not supported")),
    })
}

fn decode_typed(elem: ElemType, d: &diamond_ir::TensorData, count: usize) -> Result<Data, String> {
    if let Some(small) = crate::exotic::decode_int32s(elem, &d.int32s, count) {
        return small;
    }
    Ok(match elem {
        ElemType::Float => Data::F32(d.floats.clone()),
        ElemType::Double => Data::F64(d.doubles.clone()),
        ElemType::Float16 => Data::F16(d.int32s.iter().map(|&x| f16::from_bits(x as u16)).collect()),
        ElemType::Bfloat16 => Data::Bf16(d.int32s.iter().map(|&x| bf16::from_bits(x as u16)).collect()),
        ElemType::Int8 => Data::I8(d.int32s.iter().map(|&x| x as i8).collect()),
        ElemType::Int16 => Data::I16(d.int32s.iter().map(|&x| x as i16).collect()),
        ElemType::Int32 => Data::I32(d.int32s.clone()),
        ElemType::Int64 => Data::I64(d.int64s.clone()),
        ElemType::Uint8 => Data::U8(d.int32s.iter().map(|&x| x as u8).collect()),
        ElemType::Uint16 => Data::U16(d.int32s.iter().map(|&x| x as u16).collect()),
        ElemType::Uint32 => Data::U32(d.uint64s.iter().map(|&x| x as u32).collect()),
        ElemType::Uint64 => Data::U64(d.uint64s.clone()),
        ElemType::Bool => Data::Bool(d.int32s.iter().map(|&x| x != 0).collect()),
        ElemType::String => Data::Str(d.strings.iter().map(|s| s.to_vec()).collect()),
        other => return Err(format!("element type {other} is not supported")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_typed_data_decode_to_the_same_tensor() {
        let raw = diamond_ir::Tensor {
            dims: vec![2],
            data_type: Some(ElemType::Int32),
            data: diamond_ir::TensorData {
                raw: Some(bytes::Bytes::from(vec![1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff])),
                ..Default::default()
            },
            ..Default::default()
        };
        let typed = diamond_ir::Tensor {
            dims: vec![2],
            data_type: Some(ElemType::Int32),
            data: diamond_ir::TensorData { int32s: vec![1, -1], ..Default::default() },
            ..Default::default()
        };
        assert_eq!(Tensor::from_ir(&raw).unwrap(), Tensor::from_ir(&typed).unwrap());
        let short = diamond_ir::Tensor { dims: vec![3], ..typed };
        assert!(Tensor::from_ir(&short).is_err());
    }

    #[test]
    fn integers_wrap_and_floats_round_once() {
        assert_eq!(u8::from_i128(300), 44);
        assert_eq!(i8::from_f64(-3.9), -3);
        assert_eq!(f16::from_f64(1.0 / 3.0).to_f64(), f16::from_f32(1.0 / 3.0).to_f64());
        assert_eq!(strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
