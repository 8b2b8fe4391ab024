//! Runtime tensors to and from the byte buffers a kernel reads and writes
//! (little-endian, the element types kernels store), and the host job that
//! runs one program on given operand tensors.

use super::codegen::CudaKernel;
use super::host::Job;
use crate::kernel::Program;
use crate::tensor::{Data, Tensor};
use diamond_ir::ElemType;

/// The elements of `t` as bytes, as a kernel stores them.
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>, String> {
    fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }
    Ok(match &t.data {
        Data::F32(v) => le(v, f32::to_le_bytes),
        Data::F64(v) => le(v, f64::to_le_bytes),
        Data::F16(v) => le(v, |x| x.to_bits().to_le_bytes()),
        Data::Bf16(v) => le(v, |x| x.to_bits().to_le_bytes()),
        Data::I8(v) => le(v, i8::to_le_bytes),
        Data::I16(v) => le(v, i16::to_le_bytes),
        Data::I32(v) => le(v, i32::to_le_bytes),
        Data::I64(v) => le(v, i64::to_le_bytes),
        Data::U8(v) => v.clone(),
        Data::U16(v) => le(v, u16::to_le_bytes),
        Data::U32(v) => le(v, u32::to_le_bytes),
        Data::U64(v) => le(v, u64::to_le_bytes),
        Data::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        _ => return Err(format!("no kernel storage for {}", t.elem().name())),
    })
}

/// A tensor of `shape` and `elem` from kernel bytes.
pub fn from_bytes(elem: ElemType, shape: Vec<usize>, b: &[u8]) -> Result<Tensor, String> {
    fn read<T, const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        b.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
    }
    let data = match elem {
        ElemType::Float => Data::F32(read(b, f32::from_le_bytes)),
        ElemType::Double => Data::F64(read(b, f64::from_le_bytes)),
        ElemType::Float16 => Data::F16(read(b, |c| half::f16::from_bits(u16::from_le_bytes(c)))),
        ElemType::Bfloat16 => Data::Bf16(read(b, |c| half::bf16::from_bits(u16::from_le_bytes(c)))),
        ElemType::Int8 => Data::I8(read(b, i8::from_le_bytes)),
        ElemType::Int16 => Data::I16(read(b, i16::from_le_bytes)),
        ElemType::Int32 => Data::I32(read(b, i32::from_le_bytes)),
        ElemType::Int64 => Data::I64(read(b, i64::from_le_bytes)),
        ElemType::Uint8 => Data::U8(b.to_vec()),
        ElemType::Uint16 => Data::U16(read(b, u16::from_le_bytes)),
        ElemType::Uint32 => Data::U32(read(b, u32::from_le_bytes)),
        ElemType::Uint64 => Data::U64(read(b, u64::from_le_bytes)),
        ElemType::Bool => Data::Bool(b.iter().map(|&x| x != 0).collect()),
        other => return Err(format!("no kernel storage for {}", other.name())),
    };
    Tensor::new(shape, data).ok_or_else(|| "an output's bytes do not fill its shape".to_string())
}

/// The job running kernel `index` (generated from `p`) on `operands`,
/// with `value_of` giving the symbols; and each output's type and shape.
pub fn job(
    p: &Program,
    k: &CudaKernel,
    index: usize,
    operands: &[&Tensor],
    value_of: &dyn Fn(&str) -> Option<i64>,
) -> Result<(Job, Vec<(ElemType, Vec<usize>)>), String> {
    let size = |e: &crate::kernel::Extent| {
        e.eval(value_of).map(|n| n as usize).ok_or_else(|| format!("the size {e} is not bound"))
    };
    let mut buffers = Vec::new();
    for (view, t) in p.operands.iter().zip(operands) {
        if t.elem() != view.elem {
            return Err(format!(
                "operand '{}' is {}, the program reads {}",
                view.value,
                t.elem().name(),
                view.elem.name()
            ));
        }
        let want: usize = view.dims.iter().map(&size).product::<Result<usize, _>>()?;
        if t.shape.iter().product::<usize>() != want {
            return Err(format!("operand '{}' has {:?}, the program reads {} elements", view.value, t.shape, want));
        }
        buffers.push(to_bytes(t)?);
    }
    let mut outputs = Vec::new();
    for o in &p.outputs {
        let shape: Vec<usize> = o.view.dims.iter().map(&size).collect::<Result<_, _>>()?;
        let bytes = crate::tensor::elem_bytes(o.view.elem).ok_or("an output without a byte size")? as usize;
        buffers.push(vec![0u8; shape.iter().product::<usize>() * bytes]);
        outputs.push((o.view.elem, shape));
    }
    let symbols: Vec<i64> = k
        .symbols
        .iter()
        .map(|s| size(&crate::kernel::Extent::Symbol(s.clone())).map(|n| n as i64))
        .collect::<Result<_, _>>()?;
    let outer: u64 = p
        .axes
        .iter()
        .enumerate()
        .filter(|(a, _)| !p.reduce.contains(a))
        .map(|(_, e)| size(e).map(|n| n as u64))
        .product::<Result<u64, _>>()?;
    let job = Job { kernel: index, grid: k.launch.grid(outer), block: k.launch.block, buffers, symbols };
    Ok((job, outputs))
}
