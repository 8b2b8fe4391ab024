//! What an ONNX file may claim before diamond believes it: a tensor's data
//! must be as large as its dims say (a tensor "larger than the file" is
//! refused before anything is allocated for it), dims are non-negative and
//! their product fits 64 bits, and a declared shape's element count fits
//! 64 bits too. Each violation names the tensor or value and the limit.

use crate::ImportError;
use diamond_ir::{ElemType, Tensor, TypeInfo, TypeValue};
use std::path::Path;

/// Checks a stored tensor's dims against the data it holds.
pub(crate) fn check_tensor(t: &Tensor, path: &Path) -> Result<(), ImportError> {
    let name = t.name.as_deref().unwrap_or("(unnamed)");
    let invalid = |problem: String| ImportError::Invalid { path: path.to_path_buf(), problem };
    if let Some(d) = t.dims.iter().find(|&&d| d < 0) {
        return Err(invalid(format!("tensor '{name}' has a negative dim {d}")));
    }
    let Some(count) = t.element_count() else {
        return Err(invalid(format!("tensor '{name}': the product of its dims {:?} overflows 64 bits", t.dims)));
    };
    // A segment holds part of a tensor; external data is checked where it is resolved.
    if t.rare().segment.is_some() || t.is_external() {
        return Ok(());
    }
    let elem = t.elem_type();
    if let Some(raw) = &t.data.raw {
        if let Some(expected) = elem.raw_size(count) {
            if raw.len() as u64 != expected {
                return Err(invalid(format!(
                    "tensor '{name}' declares {count} {} elements ({expected} bytes) but its raw data holds {} bytes",
                    elem.name(),
                    raw.len()
                )));
            }
        }
        return Ok(());
    }
    let d = &t.data;
    let held =
        (d.floats.len() + d.int32s.len() + d.int64s.len() + d.doubles.len() + d.uint64s.len() + d.strings.len()) as u64;
    let per_element = match elem {
        ElemType::Complex64 | ElemType::Complex128 => 2,
        _ => 1,
    };
    if held > 0 && held != count.saturating_mul(per_element) && !packed(elem) {
        return Err(invalid(format!(
            "tensor '{name}' declares {count} {} elements but holds {held} values",
            elem.name()
        )));
    }
    if held == 0 && count > 0 {
        return Err(invalid(format!("tensor '{name}' declares {count} {} elements but holds no data", elem.name())));
    }
    Ok(())
}

/// Types stored several to one `int32_data` entry (sub-byte types).
fn packed(elem: ElemType) -> bool {
    elem.bit_width().is_some_and(|w| w < 8)
}

/// Checks a declared type: its known dims' product must fit 64 bits.
pub(crate) fn check_declared(value: &str, ty: Option<&TypeInfo>, path: &Path) -> Result<(), ImportError> {
    let Some(ty) = ty.and_then(|t| t.value.as_ref()) else { return Ok(()) };
    let shape = match ty {
        TypeValue::Tensor { shape, .. } | TypeValue::SparseTensor { shape, .. } => shape.as_ref(),
        TypeValue::Sequence(inner) | TypeValue::Optional(inner) => {
            return check_declared(value, inner.as_deref(), path)
        }
        TypeValue::Map { value: inner, .. } => return check_declared(value, inner.as_deref(), path),
        TypeValue::Opaque { .. } => None,
    };
    let Some(shape) = shape else { return Ok(()) };
    let known = shape.dims.iter().filter_map(|d| match d.value {
        Some(diamond_ir::DimValue::Known(n)) if n >= 0 => Some(n as u64),
        _ => None,
    });
    let mut product: u64 = 1;
    for n in known {
        product = product.checked_mul(n).ok_or_else(|| ImportError::Invalid {
            path: path.to_path_buf(),
            problem: format!("the declared shape of '{value}' has more elements than 64 bits can count"),
        })?;
    }
    Ok(())
}
