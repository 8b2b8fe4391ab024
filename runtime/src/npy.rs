//! Writing tensors as NumPy `.npy` (format 1.0, little-endian, C order).

use crate::tensor::{Data, Tensor};

/// The `.npy` bytes of `t`. `bfloat16`, which NumPy lacks, is written as
/// `float32`; strings are refused.
pub fn encode_npy(t: &Tensor) -> Result<Vec<u8>, String> {
    let (descr, body): (&str, Vec<u8>) = match &t.data {
        Data::F32(v) => ("<f4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::F64(v) => ("<f8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::F16(v) => ("<f2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::Bf16(v) => ("<f4", v.iter().flat_map(|x| x.to_f32().to_le_bytes()).collect()),
        Data::I8(v) => ("|i1", v.iter().map(|&x| x as u8).collect()),
        Data::I16(v) => ("<i2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::I32(v) => ("<i4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::I64(v) => ("<i8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U8(v) => ("|u1", v.clone()),
        Data::U16(v) => ("<u2", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U32(v) => ("<u4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::U64(v) => ("<u8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        Data::Bool(v) => ("|b1", v.iter().map(|&b| u8::from(b)).collect()),
        Data::Str(_) => return Err("string tensors cannot be written as .npy".into()),
        other => return Err(format!("{} tensors cannot be written as .npy", other.elem())),
    };
    let shape = match t.shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", t.shape[0]),
        _ => format!("({})", t.shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
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
    out.extend_from_slice(&body);
    Ok(out)
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
}
