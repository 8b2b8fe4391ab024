//! Data movement the session does itself: Split, Slice, Transpose, GatherND, Concat and
//! GatherElements, and the relayouts between steps.
//!
//! - `movement.rs` — Data movement on the session's own kernels: **Split**, **Slice**, **Gather** along an axis, **GatherND**, **Pad**, and **Transpose** of the types the `f32` kernel ([`relayout`](super::relayout)) leaves, for tensors of any element type but strings, the `f32` ones written into buffers from the session's pool.
//! - `relayout.rs` — Data movement the SIMD session does itself instead of the reference's per-element index arithmetic (which builds the result element by element through a fresh buffer): - the **relabelling** operators (Reshape, Flatten, Squeeze, Unsqueeze) give their `f32` operand's elements another shape: the session moves the operand's buffer under the new shape when the operand dies there, else copies it into a pooled buffer ([`relabels`]; the shape is the reference's own, `exec::relabeled_shape`); - **Transpose** of an `f32` tensor ([`transpose`]): the output's axes that stay adjacent in the input are merged, size-1 axes dropped, and the output is written row by row — a row copied whole when its axis is the input's innermost, gathered at the input's stride otherwise, in tiles of [`TILE`] × [`TILE`] so that both sides stay in cache.
//! - `concat.rs` — Concat of `f32` tensors into a buffer from the session's pool (the reference allocates a fresh one each run, whose pages the kernel must fault in and zero): for each of the `outer` blocks before the axis, each operand's block is copied into place, the copies spread over the current rayon pool when there are enough bytes to move.
//! - `gather.rs` — `GatherElements` of `f32` data by int64 or int32 indices on the SIMD session's own kernel: `out[i] = data[i with axis a replaced by indices[i]]`, the indices' rows walked with each row's offset into the data worked out once (DeBERTa's relative-position attention gathers 24 score tensors per run: a quarter of its time on the reference kernels, which go through `f64` one element at a time).

#[allow(unused_imports)]
use super::*;

pub mod concat;
pub mod gather;
pub mod movement;
pub mod relayout;
