//! NumPy `.npy` files → [`Tensor`].
//!
//! The format: the magic `\x93NUMPY`, a major and minor version, a header
//! length (2 bytes in version 1, 4 in versions 2 and 3), a Python dict literal
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, then the
//! elements in C order. Little-endian and byte-order-free data is sliced from
//! the mapped file without a copy; big-endian data is byte-swapped into a new
//! buffer. Fortran order, object arrays and strings are rejected with a clear
//! error, as is any size that does not match the bytes present.

use crate::error::ImportError;
use bytes::Bytes;
use diamond_ir::{ElemType, Tensor, TensorData};
use std::path::Path;

const MAGIC: &[u8] = b"\x93NUMPY";

/// Reads the `.npy` file at `path`.
pub fn read_npy(path: &Path) -> Result<Tensor, ImportError> {
    let bytes = crate::onnx::read_file(path)?;
    decode_npy(bytes, path)
}

/// Decodes `.npy` bytes read from `path` (used in messages).
pub fn decode_npy(bytes: Bytes, path: &Path) -> Result<Tensor, ImportError> {
    let fail = |problem: String| ImportError::InvalidTensor { path: path.to_path_buf(), problem };
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(fail("it does not start with the .npy magic \\x93NUMPY".into()));
    }
    let (header_len, header_start): (usize, usize) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        major => return Err(fail(format!(".npy format version {major} is not supported (1, 2 and 3 are)"))),
    };
    let data_start = header_start
        .checked_add(header_len)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| fail(format!("the header claims {header_len} bytes but the file has {}", bytes.len())))?;
    let header =
        std::str::from_utf8(&bytes[header_start..data_start]).map_err(|_| fail("the header is not text".into()))?;
    let header = Header::parse(header).map_err(fail)?;
    if header.fortran_order {
        return Err(fail("Fortran-ordered arrays are not supported; save with C order".into()));
    }
    if let Some(strings) = string_descr(&header.descr) {
        let (unicode, chars) = strings.map_err(fail)?;
        return decode_strings(&bytes[data_start..], &header, unicode, chars).map_err(fail);
    }
    let (elem, width, swap) = parse_descr(&header.descr).map_err(fail)?;
    let count = header.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let size =
        count.and_then(|c| c.checked_mul(width as u64)).ok_or_else(|| fail("the shape's size overflows".into()))?;
    let available = (bytes.len() - data_start) as u64;
    if available != size {
        return Err(fail(format!(
            "shape {:?} of {} needs {size} bytes of data but the file has {available}",
            header.shape, header.descr
        )));
    }
    let data = bytes.slice(data_start..);
    let raw = match swap {
        Some(unit) => swap_bytes(&data, unit),
        None => data,
    };
    let dims = header.shape.iter().map(|&d| i64::try_from(d).map_err(|_| fail("a dimension is too large".into())));
    Ok(Tensor {
        dims: dims.collect::<Result<_, _>>()?,
        data_type: Some(elem),
        data: TensorData { raw: Some(raw), ..TensorData::default() },
        ..Tensor::default()
    })
}

/// The header fields diamond needs.
#[derive(Debug, PartialEq)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

impl Header {
    /// Parses the dict literal; keys may come in any order.
    fn parse(text: &str) -> Result<Header, String> {
        let text = text.trim().trim_end_matches('\n').trim();
        let body = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(|| format!("the header is not a dict: {text}"))?;
        let value_of = |key: &str| -> Result<&str, String> {
            let needle = format!("'{key}':");
            let at = body.find(&needle).ok_or_else(|| format!("the header has no '{key}'"))?;
            Ok(body[at + needle.len()..].trim_start())
        };
        let descr = value_of("descr")?;
        let descr = descr
            .strip_prefix('\'')
            .and_then(|d| d.split('\'').next())
            .ok_or_else(|| "'descr' is not a string (structured dtypes are not supported)".to_string())?;
        let fortran = value_of("fortran_order")?;
        let fortran_order = if fortran.starts_with("True") {
            true
        } else if fortran.starts_with("False") {
            false
        } else {
            return Err("'fortran_order' is neither True nor False".into());
        };
        let shape = value_of("shape")?;
        let inside = shape
            .strip_prefix('(')
            .and_then(|s| s.split(')').next())
            .ok_or_else(|| "'shape' is not a tuple".to_string())?;
        let shape = inside
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| d.trim_end_matches('L').parse::<u64>().map_err(|_| format!("shape entry '{d}' is not a size")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Header { descr: descr.to_string(), fortran_order, shape })
    }
}

/// For a string dtype — `<U{n}` (NumPy `str`: `n` UTF-32 code units each)
/// or `|S{n}` (NumPy `bytes`: `n` bytes each) — whether it is unicode and
/// its width in characters; `None` for other dtypes.
fn string_descr(descr: &str) -> Option<Result<(bool, usize), String>> {
    let code = descr.trim_start_matches(['<', '>', '|', '=']);
    let big_endian = descr.starts_with('>');
    let (unicode, digits) = match code.split_at(code.len().min(1)) {
        ("U", d) => (true, d),
        ("S" | "a", d) => (false, d),
        _ => return None,
    };
    if unicode && big_endian {
        return Some(Err(format!("dtype '{descr}': big-endian strings are not supported")));
    }
    Some(digits.parse::<usize>().map(|n| (unicode, n)).map_err(|_| format!("dtype '{descr}' has no width")))
}

/// A string tensor from fixed-width NumPy strings: each element's trailing
/// NULs dropped, UTF-32 decoded to UTF-8.
fn decode_strings(data: &[u8], header: &Header, unicode: bool, chars: usize) -> Result<Tensor, String> {
    let unit = if unicode { 4 } else { 1 };
    let count = header.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let size = count
        .and_then(|c| c.checked_mul((chars * unit) as u64))
        .ok_or_else(|| "the shape's size overflows".to_string())?;
    if data.len() as u64 != size {
        return Err(format!(
            "shape {:?} of {} needs {size} bytes of data but the file has {}",
            header.shape,
            header.descr,
            data.len()
        ));
    }
    let count = count.unwrap_or(0) as usize;
    let mut strings = Vec::with_capacity(count);
    for i in 0..count {
        let item = &data[i * chars * unit..(i + 1) * chars * unit];
        let text = if unicode {
            let mut s = String::new();
            for c in item.chunks_exact(4) {
                let code = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                s.push(char::from_u32(code).ok_or_else(|| format!("element {i} holds {code:#x}, not a character"))?);
            }
            Bytes::from(s.trim_end_matches('\0').as_bytes().to_vec())
        } else {
            let end = item.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            Bytes::copy_from_slice(&item[..end])
        };
        strings.push(text);
    }
    let dims = header.shape.iter().map(|&d| i64::try_from(d).map_err(|_| "a dimension is too large".to_string()));
    Ok(Tensor {
        dims: dims.collect::<Result<_, _>>()?,
        data_type: Some(ElemType::String),
        data: TensorData { strings, ..TensorData::default() },
        ..Tensor::default()
    })
}

/// The element type, its width in bytes, and — for big-endian data — the
/// unit whose bytes must be reversed (a complex number swaps each half).
fn parse_descr(descr: &str) -> Result<(ElemType, usize, Option<usize>), String> {
    let (order, code) = descr.split_at(descr.len().min(1));
    let big_endian = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return Err(format!("dtype '{descr}' has no byte order")),
    };
    let elem = match code {
        "f2" => ElemType::Float16,
        "f4" => ElemType::Float,
        "f8" => ElemType::Double,
        "i1" => ElemType::Int8,
        "i2" => ElemType::Int16,
        "i4" => ElemType::Int32,
        "i8" => ElemType::Int64,
        "u1" => ElemType::Uint8,
        "u2" => ElemType::Uint16,
        "u4" => ElemType::Uint32,
        "u8" => ElemType::Uint64,
        "b1" => ElemType::Bool,
        "c8" => ElemType::Complex64,
        "c16" => ElemType::Complex128,
        _ => return Err(format!("dtype '{descr}' has no ONNX element type")),
    };
    let width = elem.bit_width().map_or(1, |bits| bits as usize / 8);
    let unit = if matches!(elem, ElemType::Complex64 | ElemType::Complex128) { width / 2 } else { width };
    Ok((elem, width, (big_endian && unit > 1).then_some(unit)))
}

fn swap_bytes(data: &[u8], width: usize) -> Bytes {
    let mut out = data.to_vec();
    for chunk in out.chunks_exact_mut(width) {
        chunk.reverse();
    }
    Bytes::from(out)
}
