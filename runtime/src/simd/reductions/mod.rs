//! Programs with reduction axes (contiguous, strided and short rows), the normalizations and pools
//! of CNNs, and selection (TopK, NonZero).
//!
//! - `reduce.rs` — Running a program with reduction axes.
//! - `reduce_flat.rs` — Reductions in which every outer point reduces one contiguous run of the operands, the runs one after the other: a GlobalAveragePool or a mean over the last axes after an activation (EfficientNet's `Sigmoid+Mul+GlobalAveragePool`, SqueezeNet's `Relu+GlobalAveragePool`).
//! - `reduce_lanes.rs` — Reductions over short rows, many rows to a tile.
//! - `softmax_rows.rs` — Softmax over rows longer than the lane-wise runner takes (attention past 128 positions), in three passes over one row buffer: the input and its maximum, the exponentials and their sum, the quotients and the outputs — each exponential computed once.
//! - `norm.rs` — The per-channel normalizations of CNNs on `f32` planes, in place of the reference kernels (which widen every element to `f64` and run on one thread): - **LRN**: each output plane is its input plane divided by `(bias + alpha/size · Σ x²)^beta`, the sum over the planes of the `size` neighbouring channels (clipped at the first and last channel, `⌊(size−1)/2⌋` before and `⌈(size−1)/2⌉` after, as ONNX defines it).
//! - `norm_lanes.rs` — LayerNormalization over a **strided** axis, outer points in the lanes: ConvNeXt's `Transpose` + `LayerNormalization`, which normalizes the channels of an NCHW tensor (channel stride `h·w`) and writes NHWC.
//! - `pool.rs` — 2-D MaxPool and AveragePool on `f32` planes, in place of the reference kernels (whose average sums in `f64`, one plane after another unless the node is large): - each output row first combines the input rows its window covers into one line (a contiguous vector max or add) inside a buffer padded with the operation's identity, then folds each output column's taps from that line, eight columns a vector at column strides 1 and 2 (at 2 the even lanes of two loads: the stepping loop it replaces went one float at a time, 0.23 ms for SqueezeNet's first 3×3/2 pool); - on AVX-512, windows of at most 3 columns at column stride 1 or 2 (the 3×3/2 and 2×2/2 pools of image models, Inception's 3×3/1) keep the folded rows in registers instead: 16 columns a vector, each tap a shift or an even/odd pick of two vectors ([`Plan::plane_avx512`]); - an average divides by the taps inside the input (rows inside times columns inside) or, with `count_include_pad`, inside the padded input, both of which factor by axis; - planes run in parallel on the current rayon pool when there is work.
//! - `selection.rs` — Selection on the session's own kernels: **TopK** of `f32` values (the selection shared with the reference, [`top_k_sources`], on the values as they are, without widening every one to `f64`) and **NonZero** of bool, float and integer tensors (the flat positions first, then each axis's coordinate).

#[allow(unused_imports)]
use super::*;

pub mod norm;
pub mod norm_lanes;
pub mod pool;
pub mod reduce;
pub mod reduce_flat;
pub mod reduce_lanes;
pub mod selection;
pub mod softmax_rows;
