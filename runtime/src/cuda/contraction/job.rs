//! The host-shim launch of a contraction kernel on given tensors: the
//! buffers in parameter order, the model's symbols then the sizes computed
//! from the node's input shapes, and the grid (one block per output tile).

use super::geometry::{gemm_dims, size_values};
use super::ContractionKernel;
use crate::cuda::host::Job;
use crate::cuda::tensors::to_bytes;
use crate::kernel::Extent;
use crate::tensor::Tensor;
use diamond_ir::ElemType;

/// How much a launch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Work {
    /// The contracted size `K`.
    pub depth: u64,
    /// Output tiles (blocks' worth of work).
    pub tiles: u64,
}

/// Each output's element type and shape.
pub type Outputs = Vec<(ElemType, Vec<usize>)>;

/// The job running `k` (kernel `index` of its translation unit) on the
/// tensors `tensor` names, with `value_of` binding the model's symbols;
/// each output's type and shape; and the work it is.
pub fn job(
    k: &ContractionKernel,
    index: usize,
    tensor: &dyn Fn(&str) -> Option<Tensor>,
    value_of: &dyn Fn(&str) -> Option<i64>,
) -> Result<(Job, Outputs, Work), String> {
    let read: Vec<Tensor> =
        k.reads.iter().map(|v| tensor(v).ok_or_else(|| format!("no tensor '{v}'"))).collect::<Result<_, _>>()?;
    for (t, ty) in read.iter().zip(&k.kernel.buffers) {
        if crate::cuda::codegen::storage_type(t.elem())? != ty {
            return Err(format!("a {} tensor for a {ty} parameter", t.elem().name()));
        }
    }
    let mut shapes: Vec<Option<Vec<usize>>> = read[..k.node_inputs].iter().map(|t| Some(t.shape.clone())).collect();
    if shapes.len() == 2 {
        shapes.push(None);
    }
    let (sizes, product) = size_values(&k.geometry, &shapes)?;
    let mut buffers: Vec<Vec<u8>> = read.iter().map(to_bytes).collect::<Result<_, _>>()?;
    let mut outputs = Vec::new();
    for w in &k.writes {
        let shape: Vec<usize> = if k.fused {
            w.dims
                .iter()
                .map(|e| e.eval(value_of).map(|n| n as usize).ok_or_else(|| format!("the size {e} is not bound")))
                .collect::<Result<_, _>>()?
        } else {
            product.clone()
        };
        let bytes = crate::tensor::elem_bytes(w.elem).ok_or("an output without a byte size")? as usize;
        buffers.push(vec![0u8; shape.iter().product::<usize>() * bytes]);
        outputs.push((w.elem, shape));
    }
    let mut symbols: Vec<i64> = k
        .symbols
        .iter()
        .map(|s| Extent::Symbol(s.clone()).eval(value_of).map(|n| n as i64).ok_or_else(|| format!("{s} is not bound")))
        .collect::<Result<_, _>>()?;
    symbols.extend(&sizes);
    let (batch, m, n, depth) = gemm_dims(&k.geometry, &sizes);
    let launch = k.kernel.launch;
    let tiles = launch.tiles(batch as u64, m as u64, n as u64);
    let work = Work { depth: depth as u64, tiles };
    Ok((Job { kernel: index, grid: launch.grid(tiles), block: launch.block, buffers, symbols }, outputs, work))
}
