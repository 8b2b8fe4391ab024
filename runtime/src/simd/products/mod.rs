//! Matrix products: the `f32` GEMM and its fused epilogues, the few-row and portable instances, the
//! exact 8-bit integer products of quantized models, and the contractions (MatMul, Gemm, Einsum)
//! that run on them, with the elementwise programs folded into a contraction's store.
//!
//! - `gemm.rs` — f32 matrix products with a fused [`Epilogue`]: [`sgemm`] on strided matrix views and [`batched_matmul`] with ONNX MatMul's broadcasting.
//! - `portable_gemm.rs` — The portable matrix product, for processors without AVX2+FMA and for `DIAMOND_SIMD=off`: B's rows copied contiguous once, then each row of C accumulated as `Σ_p a[i,p] · B[p,·]` — a straight loop over the row that the compiler vectorizes for the baseline target.
//! - `igemm.rs` — Exact products of 8-bit integer matrices, for onnxruntime's dynamically quantized models (`MatMulInteger`, `ConvInteger`, [`quantized`](super::quantized)).
//! - `panels.rs` — Short, wide products over a B with long rows (a vocabulary head at a decoder step): B read 256 columns at a time as a contiguous panel, copied per call, or laid out once for a constant weight ([`Panels`](panels::Panels), kept by the session).
//! - `few_rows.rs` — Products of at most [`FEW_ROWS`] rows (a classifier's Gemm over a batch of two, a GEMV): `c = c·[read] + alpha · a·b` without packing either operand.
//! - `contraction.rs` — Contractions on the fast kernels: MatMul through [`super::gemm::batched_matmul`], Gemm through [`super::gemm::sgemm`] (its `alpha`, `beta · C` and transposes as the kernel's epilogue and operand views) and 2-D Conv through [`super::conv::conv2d`] (its bias as the per-channel epilogue), all on `f32` (a 1-D Conv as a 2-D one over one row).
//! - `einsum.rs` — Two-operand `Einsum` on the GEMM kernels: the contraction attention blocks written with `torch.einsum` export (`bhid,bhjd->bhij`), and any other whose letters each name one axis.
//! - `epilogue.rs` — What a GEMM or convolution does to its product before it is stored: `y = after(activation(alpha · (A·B) + beta · bias) + residual)`.
//! - `fold.rs` — Which elementwise programs after a contraction are the contraction's own [`Epilogue`](super::epilogue::Epilogue): `after(act(x + b) + r)` and its parts, where `x` is the contraction's result, `b` a bias along its last axis (a MatMul's only: the other contractions bring their own), `r` another tensor of the same layout (a residual branch), and `act`, `after` activations the kernels apply to each finished tile's rows ([`Activation`]) — a convolution's Relu, Clip, HardSwish or SiLU, ResNet's `Relu(conv + x)`, MobileNet's `conv + x`, a Linear layer's bias and GELU (also as the exporters spell it out: `y · (erf(y / √2) + 1) · ½`).
//! - `fused_post.rs` — The elementwise program that follows a contraction, run by the contraction's kernels over each tile of the result they finish ([`Post`]), while the tile is in cache — as onnxruntime fuses an activation into its convolution and tract applies its fused ops in the matmul kernel's registers — instead of as a step of its own that reads the whole result back.
//! - `quantized.rs` — onnxruntime's dynamically quantized operators on the session's own kernels, as `quantize_dynamic` writes them: each float activation goes through **DynamicQuantizeLinear** (its range, one scale and zero point, the values rounded to `u8`), then **MatMulInteger** or **ConvInteger** multiplies it by 8-bit weights into exact `i32` sums ([`igemm`]), and a `Cast` and a `Mul` by the two scales return to float.

#[allow(unused_imports)]
use super::*;

pub mod contraction;
pub mod einsum;
pub mod epilogue;
pub mod few_rows;
pub mod fold;
pub mod fused_post;
pub mod gemm;
pub(in crate::simd) mod igemm;
pub mod panels;
pub mod portable_gemm;
pub(in crate::simd) mod quantized;
