//! Writing tensors as NumPy `.npy` (format 1.0, little-endian, C order).
//!
//! NumPy has no bfloat16, float8, float4 or sub-byte integer types. Rather
//! than an opaque `<V2` record (what `np.save` writes for an `ml_dtypes`
//! array, which loads back as raw bytes), such a tensor is written widened
//! to the nearest NumPy type that holds every one of its values exactly:
//! float32 for bfloat16 and the float8/float4 types, int8/uint8 for the
//! 4-bit and 2-bit integers. [`npy_elem`] says which type a tensor is
//! written as, so that callers can say so.

use crate::tensor::{Data, Tensor};
use diamond_ir::ElemType;

/// The element type a tensor of `elem` is written as: itself where NumPy
/// has it, else the exact widening; `None` for types no `.npy` holds
/// (strings, complex).
pub fn npy_elem(elem: ElemType) -> Option<ElemType> {
    Some(match elem {
        ElemType::Bfloat16
        | ElemType::Float8e4m3fn
        | ElemType::Float8e4m3fnuz
        | ElemType::Float8e5m2
        | ElemType::Float8e5m2fnuz
        | ElemType::Float8e8m0
        | ElemType::Float4e2m1 => ElemType::Float,
        ElemType::Int4 | ElemType::Int2 => ElemType::Int8,
        ElemType::Uint4 | ElemType::Uint2 => ElemType::Uint8,
        ElemType::Float
        | ElemType::Double
        | ElemType::Float16
        | ElemType::Int8
        | ElemType::Int16
        | ElemType::Int32
        | ElemType::Int64
        | ElemType::Uint8
        | ElemType::Uint16
        | ElemType::Uint32
        | ElemType::Uint64
        | ElemType::Bool => elem,
        _ => return None,
    })
}

/// The `.npy` bytes of `t`, in the type [`npy_elem`] gives; strings as
/// NumPy's fixed-width `str` (`<U{n}`, UTF-32), or `bytes` (`|S{n}`) when
/// one is not UTF-8 — never as pickled objects.
pub fn encode_npy(t: &Tensor) -> Result<Vec<u8>, String> {
    if let Data::Str(items) = &t.data {
        let (descr, body) = string_body(items);
        return Ok(assemble(&descr, &t.shape, &body));
    }
    let written = npy_elem(t.elem()).ok_or_else(|| format!("{} tensors cannot be written as .npy", t.elem()))?;
    let widened;
    let data = if written == t.elem() {
        &t.data
    } else {
        let values = t.data.to_f64s().ok_or_else(|| format!("{} tensors cannot be widened", t.elem()))?;
        widened = Data::from_f64s(written, &values).ok_or_else(|| format!("cannot write {written}"))?;
        &widened
    };
    let (descr, body): (&str, Vec<u8>) = match data {
        Data::F32(v) => ("<f4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::F64(v) => ("<f8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::F16(v) => ("<f2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::I8(v) => ("|i1", v.iter().map(|&x| x as u8).collect()),
        Data::I16(v) => ("<i2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::I32(v) => ("<i4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::I64(v) => ("<i8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U8(v) => ("|u1", v.clone()),
        Data::U16(v) => ("<u2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U32(v) => ("<u4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U64(v) => ("<u8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::Bool(v) => ("|b1", v.iter().map(|&b| u8::from(b)).collect()),
        other => return Err(format!("{} tensors cannot be written as .npy", other.elem())),
    };
    Ok(assemble(descr, &t.shape, &body))
}

/// NumPy's dtype and the bytes of fixed-width strings: `<U{n}` with each
/// string's code points padded with NULs to the longest, or `|S{n}` bytes
/// when a string is not UTF-8 (`n` at least 1, as NumPy writes it).
fn string_body(items: &[Vec<u8>]) -> (String, Vec<u8>) {
    let texts: Option<Vec<&str>> = items.iter().map(|b| std::str::from_utf8(b).ok()).collect();
    match texts {
        Some(texts) => {
            let width = texts.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
            let mut body = Vec::with_capacity(items.len() * width * 4);
            for s in texts {
                let mut n = 0;
                for c in s.chars() {
                    body.extend_from_slice(&(c as u32).to_le_bytes());
                    n += 1;
                }
                body.resize(body.len() + (width - n) * 4, 0);
            }
            (format!("<U{width}"), body)
        }
        None => {
            let width = items.iter().map(Vec::len).max().unwrap_or(0).max(1);
            let mut body = Vec::with_capacity(items.len() * width);
            for b in items {
                body.extend_from_slice(b);
                body.resize(body.len() + width - b.len(), 0);
            }
            (format!("|S{width}"), body)
        }
    }
}

/// A format 1.0 file: magic, version, the header padded to 64 bytes, then
/// the data.
fn assemble(descr: &str, dims: &[usize], body: &[u8]) -> Vec<u8> {
    let shape = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + body.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_aligned_and_shapes_are_tuples() {
        let t = Tensor { shape: vec![3], data: Data::I64(vec![1, 2, 3]) };
        let bytes = encode_npy(&t).unwrap();
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert!(header.contains("'shape': (3,)"), "{header}");
        assert_eq!(bytes.len(), 10 + len + 24);
    }

    /// The elements of `.npy` bytes written as float32.
    fn f32_body(bytes: &[u8]) -> (String, Vec<f32>) {
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap().to_string();
        let body = bytes[10 + len..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        (header, body)
    }

    #[test]
    fn types_numpy_lacks_are_widened_exactly() {
        // bfloat16 keeps 8 significant bits: these are all exact in it.
        let values = [1.5, -2.0, 3.25, 0.0078125, -65280.0, f64::INFINITY];
        let t = Tensor { shape: vec![2, 3], data: Data::from_f64s(ElemType::Bfloat16, &values).unwrap() };
        let (header, body) = f32_body(&encode_npy(&t).unwrap());
        assert!(header.contains("'descr': '<f4'") && header.contains("'shape': (2, 3)"), "{header}");
        assert_eq!(body, values.iter().map(|&v| v as f32).collect::<Vec<_>>());
        let f8 = Tensor { shape: vec![2], data: Data::from_f64s(ElemType::Float8e4m3fn, &[448.0, -0.5]).unwrap() };
        assert_eq!(f32_body(&encode_npy(&f8).unwrap()).1, vec![448.0, -0.5]);
        let i4 = Tensor { shape: vec![2], data: Data::from_f64s(ElemType::Int4, &[-8.0, 7.0]).unwrap() };
        let bytes = encode_npy(&i4).unwrap();
        assert_eq!(&bytes[bytes.len() - 2..], &[0xf8, 0x07]);
        assert_eq!(npy_elem(ElemType::Int4), Some(ElemType::Int8));
        assert_eq!(npy_elem(ElemType::Float16), Some(ElemType::Float16), "NumPy has float16: kept");
        assert_eq!(npy_elem(ElemType::String), None);
    }

    #[test]
    fn strings_are_fixed_width_unicode_or_bytes() {
        let t = Tensor { shape: vec![2], data: Data::Str(vec![b"ab".to_vec(), "\u{e9}".as_bytes().to_vec()]) };
        let bytes = encode_npy(&t).unwrap();
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
        assert!(header.contains("'descr': '<U2'") && header.contains("'shape': (2,)"), "{header}");
        let body: Vec<u32> =
            bytes[10 + len..].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        assert_eq!(body, vec![u32::from(b'a'), u32::from(b'b'), 0xe9, 0]);
        let raw = Tensor { shape: vec![], data: Data::Str(vec![vec![0xff, b'x']]) };
        let bytes = encode_npy(&raw).unwrap();
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert!(std::str::from_utf8(&bytes[10..10 + len]).unwrap().contains("'descr': '|S2'"));
        assert_eq!(&bytes[10 + len..], &[0xff, b'x']);
    }
}
