//! Concat of `f32` tensors into a buffer from the session's pool (the
//! reference allocates a fresh one each run, whose pages the kernel must
//! fault in and zero): for each of the `outer` blocks before the axis, each
//! operand's block is copied into place, the copies spread over the current
//! rayon pool when there are enough bytes to move. `int64`, `int32` and
//! bool operands (indices and masks) are joined into a new vector; other
//! element types and mismatched operands return `None` (the reference
//! reports them).

use super::contraction::floats;
use crate::ops::shape_ops::interleave_blocks_into;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};
use rayon::prelude::*;

/// Below this many floats the copies run on one thread: SqueezeNet's last
/// Concats (512 channels of 13×13, 86K floats) took 4.5 µs on one thread
/// and 8.7 µs on two, where the other thread had to pull what the first
/// had just written.
const PARALLEL_FLOATS: usize = 1 << 17;

/// Concatenates `inputs` along the node's `axis`; `take` gives a buffer
/// with room for the given number of floats (a reused allocation, its old
/// values kept).
pub fn concat(node: &Node, inputs: &[Option<&Tensor>], take: &mut dyn FnMut(usize) -> Vec<f32>) -> Option<Tensor> {
    let parts: Vec<&Tensor> = inputs.iter().copied().collect::<Option<_>>()?;
    let first = parts.first()?;
    let rank = first.shape.len();
    let axis = match node.attribute("axis").and_then(|a| a.value()) {
        Some(AttrValue::Int(a)) if (-(rank as i64)..rank as i64).contains(&a) => a.rem_euclid(rank as i64) as usize,
        _ => return None,
    };
    let same = |t: &Tensor| t.shape.len() == rank && (0..rank).all(|a| a == axis || t.shape[a] == first.shape[a]);
    if !parts.iter().all(|t| same(t)) {
        return None;
    }
    let outer: usize = first.shape[..axis].iter().product();
    let inner: usize = first.shape[axis + 1..].iter().product();
    let blocks: Vec<usize> = parts.iter().map(|t| t.shape[axis] * inner).collect();
    if !matches!(first.data, Data::F32(_)) {
        return indices_or_masks(first, &parts, &blocks, outer, axis);
    }
    let data: Vec<&[f32]> = parts.iter().map(|t| floats(t)).collect::<Option<_>>()?;
    if data.iter().zip(&blocks).any(|(d, &b)| d.len() != b * outer) {
        return None;
    }
    let total: usize = blocks.iter().sum::<usize>() * outer;
    if rayon::current_num_threads() > 1 && total >= PARALLEL_FLOATS {
        // the copies cover the output: a recycled buffer is not zeroed first
        // (SqueezeNet's eight Concats on two threads: 0.43-0.47 ms in the
        // machine's slow two-thread state with the zeroing, 0.13 without)
        let mut out = super::contraction::overwritten(take, total);
        // every (destination, source) block in the output's order, copied in parallel
        let mut copies: Vec<(&mut [f32], &[f32])> = Vec::with_capacity(outer * parts.len());
        let mut rest = &mut out[..];
        for o in 0..outer {
            for (d, &b) in data.iter().zip(&blocks) {
                let (dst, tail) = rest.split_at_mut(b);
                copies.push((dst, &d[o * b..(o + 1) * b]));
                rest = tail;
            }
        }
        copies.into_par_iter().for_each(|(dst, src)| dst.copy_from_slice(src));
        return Tensor::new(shape_of(first, &parts, axis), Data::F32(out));
    }
    let mut out = take(total);
    out.clear();
    // the reference's layout, appended without zeroing the buffer first
    interleave_blocks_into(&mut out, &data, &blocks, outer);
    Tensor::new(shape_of(first, &parts, axis), Data::F32(out))
}

/// Concat of `int64`, `int32` or bool operands (index and mask tensors),
/// in the reference's layout in a new vector; `None` for other or mixed types.
fn indices_or_masks(first: &Tensor, parts: &[&Tensor], blocks: &[usize], outer: usize, axis: usize) -> Option<Tensor> {
    macro_rules! joined {
        ($variant:ident) => {{
            let slices: Vec<&[_]> = parts
                .iter()
                .map(|t| if let Data::$variant(v) = &t.data { Some(&v[..]) } else { None })
                .collect::<Option<_>>()?;
            if slices.iter().zip(blocks).any(|(d, &b)| d.len() != b * outer) {
                return None;
            }
            let mut out = Vec::with_capacity(blocks.iter().sum::<usize>() * outer);
            interleave_blocks_into(&mut out, &slices, blocks, outer);
            Data::$variant(out)
        }};
    }
    let data = match first.data {
        Data::I64(_) => joined!(I64),
        Data::I32(_) => joined!(I32),
        Data::Bool(_) => joined!(Bool),
        _ => return None,
    };
    Tensor::new(shape_of(first, parts, axis), data)
}

/// The concatenation's shape: `first`'s with `axis` the parts' sum.
fn shape_of(first: &Tensor, parts: &[&Tensor], axis: usize) -> Vec<usize> {
    let mut shape = first.shape.clone();
    shape[axis] = parts.iter().map(|t| t.shape[axis]).sum();
    shape
}

#[cfg(test)]
mod tests {
    use super::*;

    fn concat_on(axis: i64, parts: &[&Tensor]) -> Option<Tensor> {
        let node = Node {
            op_type: Some("Concat".into()),
            attributes: vec![diamond_ir::Attribute {
                name: Some("axis".into()),
                attr_type: Some(diamond_ir::AttrType::Int),
                i: Some(axis),
                ..Default::default()
            }],
            ..Default::default()
        };
        let inputs: Vec<Option<&Tensor>> = parts.iter().map(|&t| Some(t)).collect();
        concat(&node, &inputs, &mut |len| Vec::with_capacity(len))
    }

    #[test]
    fn integers_and_masks_concatenate_and_mixed_types_go_to_the_reference() {
        let x = Tensor::new(vec![2, 3], Data::I64(vec![0, 1, 2, 3, 4, 5])).unwrap();
        let y = Tensor::new(vec![2, 1], Data::I64(vec![9, 8])).unwrap();
        let c = concat_on(-1, &[&x, &y]).unwrap();
        assert_eq!((c.shape, c.data), (vec![2, 4], Data::I64(vec![0, 1, 2, 9, 3, 4, 5, 8])));
        let m = Tensor::new(vec![1, 2], Data::Bool(vec![true, false])).unwrap();
        let c = concat_on(0, &[&m, &m]).unwrap();
        assert_eq!(c.data, Data::Bool(vec![true, false, true, false]));
        // mixed types go to the reference
        assert!(concat_on(0, &[&x, &m]).is_none());
    }
}
