//! Data movement the SIMD session does itself instead of the reference's
//! per-element index arithmetic (which builds the result element by
//! element through a fresh buffer):
//! - the **relabelling** operators (Reshape, Flatten, Squeeze, Unsqueeze)
//!   give their `f32` operand's elements another shape: the session moves
//!   the operand's buffer under the new shape when the operand dies there,
//!   else copies it into a pooled buffer (`relabels`; the shape is the
//!   reference's own, `exec::relabeled_shape`);
//! - **Transpose** of an `f32` tensor (`transpose`): the output's axes
//!   that stay adjacent in the input are merged, size-1 axes dropped, and
//!   the output is written row by row — a row copied whole when its axis
//!   is the input's innermost, gathered at the input's stride otherwise,
//!   in tiles of [`TILE`] × [`TILE`] so that both sides stay in cache.

use super::contraction::{floats, Take};
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Side of the square tiles a gathering transpose goes by.
pub const TILE: usize = 16;

/// Whether `node` gives its operand 0's elements another shape and nothing
/// else (Reshape, Flatten, Squeeze, Unsqueeze of the standard domain).
pub(crate) fn relabels(node: &Node) -> bool {
    matches!(node.op_type.as_deref(), Some("Reshape" | "Flatten" | "Squeeze" | "Unsqueeze"))
        && node.domain.as_deref().unwrap_or("").is_empty()
}

/// Transpose of an `f32` tensor by the node's `perm` (reversed axes when
/// absent) into a buffer from `take`, or `None` when the operand or the
/// permutation is not one (the reference then reports it).
/// Transpose `node`'s permutation of `rank` axes (reversed when `perm` is
/// absent, negative axes counted from the end), or `None` when it is not one.
pub(crate) fn permutation(node: &Node, rank: usize) -> Option<Vec<usize>> {
    let perm: Vec<usize> = match node.attribute("perm").and_then(|a| a.value()) {
        None => (0..rank).rev().collect(),
        Some(AttrValue::Ints(p)) => {
            p.iter().map(|&a| usize::try_from(if a < 0 { a + rank as i64 } else { a }).ok()).collect::<Option<_>>()?
        }
        _ => return None,
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    (sorted == (0..rank).collect::<Vec<_>>()).then_some(perm)
}

pub(crate) fn transpose(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    let xd = floats(x)?;
    let perm = permutation(node, x.shape.len())?;
    if xd.len() != x.shape.iter().product::<usize>() {
        return None;
    }
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let mut out = take(xd.len());
    out.clear();
    permute_into(xd, &x.shape, &perm, &mut out);
    Tensor::new(shape, Data::F32(out))
}

/// Writes `x` (of `shape`) permuted by `perm` into `out` (emptied first);
/// from `PARALLEL_FLOATS` on, with an outermost output axis that is not
/// the input's innermost, slices of that axis are written in parallel on
/// the current rayon pool (ShuffleNet's channel shuffles of 107K–213K
/// floats).
pub fn permute_into(x: &[f32], shape: &[usize], perm: &[usize], out: &mut Vec<f32>) {
    let (dims, strides) = merged(shape, perm);
    let r = dims.len();
    let len = x.len();
    out.clear();
    if r <= 1 {
        // one axis left (stride 1) or none: the elements in order
        out.extend_from_slice(x);
        return;
    }
    out.reserve(len);
    let spare = &mut out.spare_capacity_mut()[..len];
    let threads = rayon::current_num_threads();
    if threads > 1 && len >= PARALLEL_FLOATS && strides[0] != 1 && dims[0] > 1 {
        let outer = len / dims[0];
        let per = dims[0].div_ceil(threads * 2);
        spare.par_chunks_mut(per * outer).enumerate().for_each(|(c, chunk)| {
            let mut sub = dims.clone();
            sub[0] = chunk.len() / outer;
            write_permuted(&x[c * per * strides[0]..], &sub, &strides, chunk);
        });
    } else {
        write_permuted(x, &dims, &strides, spare);
    }
    // SAFETY: write_permuted writes every position of its output (the
    // walked axes, then the unit and last axes within a block), and the
    // chunks cover the whole output.
    unsafe { out.set_len(len) };
}

/// From this many floats a transpose is written in parallel.
const PARALLEL_FLOATS: usize = 1 << 16;

/// Writes every position of `out`, the (merged, at least two) output axes
/// `dims` of `x`, whose element at an output index lies at the dot product
/// of that index and `strides`.
fn write_permuted(x: &[f32], dims: &[usize], strides: &[usize], spare: &mut [MaybeUninit<f32>]) {
    let r = dims.len();
    let last = r - 1;
    let mut ostrides = vec![1usize; r];
    for a in (0..last).rev() {
        ostrides[a] = ostrides[a + 1] * dims[a + 1];
    }
    // The output axis that is the input's innermost, when it is not the
    // last: each (that axis × last axis) block is then gathered in tiles.
    let unit = (0..last).find(|&a| strides[a] == 1);
    let walked: Vec<usize> = (0..last).filter(|&a| Some(a) != unit).collect();
    let mut index = vec![0usize; r];
    'blocks: loop {
        let bi: usize = walked.iter().map(|&a| index[a] * strides[a]).sum();
        let bo: usize = walked.iter().map(|&a| index[a] * ostrides[a]).sum();
        let (nl, sl) = (dims[last], strides[last]);
        match unit {
            None => {
                for (o, &v) in spare[bo..bo + nl].iter_mut().zip(&x[bi..bi + nl]) {
                    o.write(v);
                }
            }
            Some(u) => {
                let (nu, ou) = (dims[u], ostrides[u]);
                for u0 in (0..nu).step_by(TILE) {
                    for l0 in (0..nl).step_by(TILE) {
                        for i in u0..(u0 + TILE).min(nu) {
                            let row = &mut spare[bo + i * ou..][..nl];
                            for (j, o) in row.iter_mut().enumerate().take((l0 + TILE).min(nl)).skip(l0) {
                                o.write(x[bi + i + j * sl]);
                            }
                        }
                    }
                }
            }
        }
        // the next block: the last walked axis fastest
        for &a in walked.iter().rev() {
            index[a] += 1;
            if index[a] < dims[a] {
                continue 'blocks;
            }
            index[a] = 0;
        }
        break;
    }
}

/// `shape` permuted by `perm` as (output dims, input strides per output
/// axis), size-1 axes dropped and output axes merged that are adjacent and
/// in order in the input too.
fn merged(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut st = vec![1usize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        st[a] = st[a + 1] * shape[a + 1];
    }
    let (mut dims, mut strides): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    for &p in perm {
        if shape[p] == 1 {
            continue;
        }
        match (dims.last_mut(), strides.last_mut()) {
            (Some(d), Some(s)) if *s == st[p] * shape[p] => {
                *d *= shape[p];
                *s = st[p];
            }
            _ => {
                dims.push(shape[p]);
                strides.push(st[p]);
            }
        }
    }
    (dims, strides)
}
