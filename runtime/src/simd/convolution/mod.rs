//! 2-D convolution, one route per shape class: im2col + GEMM, Winograd F(2×2, 3×3), direct kernels
//! for thin outputs and small planes, and the depthwise kernels, with the taps that only read
//! padding dropped.
//!
//! - `conv.rs` — 2-D convolution (NCHW, weights `c_out × c_in/group × kh × kw`) with a fused [`Epilogue`], by the cheapest route the shape allows: - **pointwise** (1×1, stride 1, no padding): each image is already the `c_in × h·w` matrix the GEMM wants — a plain [`sgemm`](super::gemm::sgemm) per group; - **depthwise** (group = c_in = c_out): on AVX-512 over input planes of up to 24×24, sixteen channels in the lanes ([`depthwise_lanes`](super::depthwise_lanes)); else a direct per-channel kernel ([`depthwise`](super::depthwise)) or the direct kernel's positions in lanes; - **3×3 at stride 1** with enough channels: Winograd's F(2×2, 3×3) ([`winograd`](super::winograd)); - few output channels or large planes: the direct kernel, positions in lanes ([`direct`](super::direct)); planes under 16 positions: output channels in lanes, from im2col's patches ([`small_plane`](super::small_plane)); - planes under 256 positions with 64 or more output channels and long patches, on AVX-512: output channels in lanes, straight from padded input planes ([`channel_vector`](super::channel_vector)); - otherwise (grouped included) **im2col**: each group's input patches are laid out as a `c_in/group·kh·kw × oh·ow` matrix ([`im2col`](super::im2col)) and multiplied by the group's weights; small groups run side by side, one thread each ([`units_in_parallel`]).
//! - `im2col.rs` — im2col: one group of one image's input laid out as the matrix whose row `(c, ki, kj)` holds, for every output position, the input value that kernel tap `(ki, kj)` of channel `c` meets there (0 in the padding), so that the convolution is `weights · columns`.
//! - `winograd.rs` — 3×3 convolution at stride 1 by Winograd's minimal filtering F(2×2, 3×3): each 2×2 block of outputs (a *tile*) comes from the 4×4 input patch under it as `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`, 16 multiplications per tile and channel pair where the direct product takes 36.
//! - `direct.rs` — Direct convolution for thin outputs: few output channels per group or small planes, where im2col's GEMM runs at a tenth of the machine's peak (a ResNet export's 7×7/2 stem, 3 → 8 channels on a 32×32 image: M = 8 rows of a 147 × 256 product, after copying the 147 × 256 columns).
//! - `direct_store.rs` — Where the direct convolution's kernel ([`super::direct`]) puts a step's finished accumulators: a vector of `L` consecutive **wide** output positions (row length `wq`, of which the last `wq − ow` of each row are thrown away) of one channel of the block.
//! - `channel_vector.rs` — Direct convolution vectorized over **output channels**, for planes too small for the positions-in-lanes kernel ([`super::direct`]) and many output channels: SqueezeNet's 3×3 48 → 192 and 64 → 256 on 13×13, where im2col's GEMM ran at 65–70% of the FMA peak and the direct kernel, whose rows are as wide as a padded input row (15 for 13 outputs), at 63%.
//! - `small_plane.rs` — Convolutions whose output planes hold a few positions (under one vector: the last stages of a ResNet export on a 32×32 image, 2×2 and 1×1 planes of 32–64 channels), vectorized over **output channels** instead of positions.
//! - `dead_taps.rs` — Convolution taps that only ever read padding, dropped.
//! - `depthwise.rs` — Depthwise convolution (one filter per channel: group = c_in = c_out), computed directly: each output plane is the sum over the kernel taps of the input plane shifted by the tap and scaled by its weight — for a unit horizontal stride a contiguous multiply-add over each output row, which the compiler vectorizes (AVX2+FMA when present, else the baseline).
//! - `depthwise_lanes.rs` — Depthwise convolution (group = c_in = c_out) over small planes with sixteen **channels in the lanes** of AVX-512 registers: EfficientNet's and MobileNet's late layers, whose planes of 1×1 to 16×16 make rows of a few floats, where the plane-by-plane kernels spend their time on per-row and per-block bookkeeping (EfficientNet's export: 288 channels of 1×1 in 8.1 µs, 48 of 16×16 at stride 2 in 6.5 µs).
//! - `depthwise_rows.rs` — Depthwise convolution on AVX-512, one plane at a time, sixteen output columns in a vector: the MobileNet / EfficientNet / MnasNet layers on planes too large for the channels-in-lanes kernel ([`depthwise_lanes`](super::depthwise_lanes)), at column stride 1 or 2.
//! - `transpose.rs` — Eight rows of eight `f32`s transposed in AVX2 registers: the depthwise kernels' interleaving of eight channels' planes, and the lane-wise reductions' gathers of a strided reduction axis.

#[allow(unused_imports)]
use super::*;

pub(in crate::simd) mod channel_vector;
pub mod conv;
pub mod dead_taps;
pub mod depthwise;
pub(in crate::simd) mod depthwise_lanes;
#[cfg(target_arch = "x86_64")]
pub(in crate::simd) mod depthwise_rows;
pub mod direct;
pub(in crate::simd) mod direct_store;
pub mod im2col;
pub mod small_plane;
#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;
pub mod winograd;
