//! Reading a stored tensor's elements into a [`ConstValue`].
//!
//! Handles `raw_data` (little-endian, sub-byte types packed) and the typed
//! fields, external data included. Element types whose values no shape
//! computation needs (float8, float4, complex) decode as `None`; so does a
//! tensor larger than [`MAX_ELEMENTS`], whose elements would cost more memory
//! than any shape question justifies.

use super::facts::{ConstData, ConstValue, Elem};
use diamond_ir::{ElemType, Tensor};

/// The most elements decoded from one tensor.
pub const MAX_ELEMENTS: u64 = 1 << 24;

/// The tensor's elements, or `None` when they cannot or need not be read.
pub fn decode(t: &Tensor) -> Option<ConstValue> {
    let count = t.element_count()?;
    if count > MAX_ELEMENTS {
        return None;
    }
    let n = count as usize;
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    let dtype = t.elem_type();
    let raw = match (t.external(), &t.data.raw) {
        (Some(ext), _) => Some(ext.load().ok()?),
        (None, Some(raw)) => Some(raw.clone()),
        (None, None) => None,
    };
    let data = match raw {
        Some(raw) => from_raw(dtype, &raw, n)?,
        None => from_typed(dtype, t, n)?,
    };
    (data.len() == n).then_some(ConstValue { dtype, shape, data })
}

fn ints(v: impl Iterator<Item = i64>) -> ConstData {
    ConstData::Ints(v.map(Elem::Int).collect())
}

fn from_raw(dtype: ElemType, raw: &[u8], n: usize) -> Option<ConstData> {
    fn chunks<const W: usize>(raw: &[u8], n: usize) -> Option<impl Iterator<Item = [u8; W]> + '_> {
        (raw.len() == n * W).then(|| raw.chunks_exact(W).map(|c| c.try_into().unwrap()))
    }
    Some(match dtype {
        ElemType::Int64 => ints(chunks::<8>(raw, n)?.map(i64::from_le_bytes)),
        ElemType::Int32 => ints(chunks::<4>(raw, n)?.map(|b| i32::from_le_bytes(b) as i64)),
        ElemType::Int16 => ints(chunks::<2>(raw, n)?.map(|b| i16::from_le_bytes(b) as i64)),
        ElemType::Int8 => ints(chunks::<1>(raw, n)?.map(|b| b[0] as i8 as i64)),
        ElemType::Uint8 => ints(chunks::<1>(raw, n)?.map(|b| b[0] as i64)),
        ElemType::Uint16 => ints(chunks::<2>(raw, n)?.map(|b| u16::from_le_bytes(b) as i64)),
        ElemType::Uint32 => ints(chunks::<4>(raw, n)?.map(|b| u32::from_le_bytes(b) as i64)),
        ElemType::Uint64 => {
            let v: Option<Vec<i64>> = chunks::<8>(raw, n)?.map(|b| i64::try_from(u64::from_le_bytes(b)).ok()).collect();
            ints(v?.into_iter())
        }
        ElemType::Bool => ConstData::Bools(chunks::<1>(raw, n)?.map(|b| b[0] != 0).collect()),
        ElemType::Float => ConstData::Floats(chunks::<4>(raw, n)?.map(|b| f32::from_le_bytes(b) as f64).collect()),
        ElemType::Double => ConstData::Floats(chunks::<8>(raw, n)?.map(f64::from_le_bytes).collect()),
        ElemType::Float16 => {
            ConstData::Floats(chunks::<2>(raw, n)?.map(|b| half::f16::from_le_bytes(b).to_f64()).collect())
        }
        ElemType::Bfloat16 => {
            ConstData::Floats(chunks::<2>(raw, n)?.map(|b| half::bf16::from_le_bytes(b).to_f64()).collect())
        }
        _ => return None,
    })
}

fn from_typed(dtype: ElemType, t: &Tensor, n: usize) -> Option<ConstData> {
    let d = &t.data;
    Some(match dtype {
        ElemType::Int64 => ints(d.int64s.iter().copied()),
        ElemType::Int32 | ElemType::Int16 | ElemType::Int8 | ElemType::Uint8 | ElemType::Uint16 => {
            ints(d.int32s.iter().map(|&v| v as i64))
        }
        ElemType::Uint32 => ints(d.uint64s.iter().map(|&v| v as i64)),
        ElemType::Uint64 => {
            ints(d.uint64s.iter().map(|&v| i64::try_from(v).ok()).collect::<Option<Vec<_>>>()?.into_iter())
        }
        ElemType::Bool => ConstData::Bools(d.int32s.iter().map(|&v| v != 0).collect()),
        ElemType::Float => ConstData::Floats(d.floats.iter().map(|&v| v as f64).collect()),
        ElemType::Double => ConstData::Floats(d.doubles.clone()),
        ElemType::Float16 => {
            ConstData::Floats(d.int32s.iter().map(|&v| half::f16::from_bits(v as u16).to_f64()).collect())
        }
        ElemType::Bfloat16 => {
            ConstData::Floats(d.int32s.iter().map(|&v| half::bf16::from_bits(v as u16).to_f64()).collect())
        }
        ElemType::String => ConstData::Strings(d.strings.iter().map(|s| s.to_vec()).collect()),
        _ => return None,
    })
    .filter(|data: &ConstData| data.len() == n)
}
