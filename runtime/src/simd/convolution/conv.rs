//! 2-D convolution (NCHW, weights `c_out × c_in/group × kh × kw`) with a
//! fused [`Epilogue`], by the cheapest route the shape allows:
//! - **pointwise** (1×1, stride 1, no padding): each image is already the
//!   `c_in × h·w` matrix the GEMM wants — a plain [`sgemm`](super::gemm::sgemm) per group;
//! - **depthwise** (group = c_in = c_out): on AVX-512 over input planes of
//!   up to 24×24, sixteen channels in the lanes
//!   (`depthwise_lanes`); else a direct
//!   per-channel kernel ([`depthwise`](super::depthwise)) or the direct
//!   kernel's positions in lanes;
//! - **3×3 at stride 1** with enough channels: Winograd's F(2×2, 3×3)
//!   ([`winograd`](super::winograd));
//! - few output channels or large planes: the direct kernel, positions in
//!   lanes ([`direct`](super::direct)); planes under 16 positions: output
//!   channels in lanes, from im2col's patches ([`small_plane`](super::small_plane));
//! - planes under 256 positions with 64 or more output channels and long
//!   patches, on AVX-512: output channels in lanes, straight from padded
//!   input planes (`channel_vector`);
//! - otherwise (grouped included) **im2col**: each group's input patches are
//!   laid out as a `c_in/group·kh·kw × oh·ow` matrix
//!   ([`im2col`](super::im2col)) and multiplied by the group's weights;
//!   small groups run side by side, one thread each (`units_in_parallel`).
//!
//! For the epilogue, each image's result is the matrix `c_out × oh·ow`: a
//! per-row bias is per output channel, a per-column one per output
//! position; a full bias and the residual have the whole output's layout.

#[cfg(target_arch = "x86_64")]
use super::depthwise_rows;
use super::epilogue::Epilogue;
use super::gemm::{sgemm_on, MatRef};
use super::{channel_vector, dead_taps, depthwise, depthwise_lanes, direct, im2col, small_plane, winograd};
use rayon::prelude::*;

/// The sizes and attributes of one 2-D convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2d {
    /// Batch size.
    pub n: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Stride along height, width.
    pub stride: [usize; 2],
    /// Dilation along height, width.
    pub dilation: [usize; 2],
    /// Padding: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Number of groups (divides `c_in` and `c_out`).
    pub group: usize,
}

impl Conv2d {
    /// Output height and width; `None` when the (dilated) kernel does not fit the padded input
    /// or a stride or dilation is 0.
    pub fn output_hw(&self) -> Option<(usize, usize)> {
        let side = |size: usize, pad: usize, k: usize, stride: usize, dilation: usize| {
            let span = dilation.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
            let padded = size + pad;
            (stride > 0 && dilation > 0 && padded >= span).then(|| (padded - span) / stride + 1)
        };
        Some((
            side(self.h, self.pads[0] + self.pads[2], self.kh, self.stride[0], self.dilation[0])?,
            side(self.w, self.pads[1] + self.pads[3], self.kw, self.stride[1], self.dilation[1])?,
        ))
    }

    /// Number of output values.
    pub fn output_len(&self) -> Option<usize> {
        self.output_hw().map(|(oh, ow)| self.n * self.c_out * oh * ow)
    }

    /// Input channels per group.
    pub(crate) fn group_in(&self) -> usize {
        self.c_in / self.group
    }

    /// Output channels per group.
    pub(crate) fn group_out(&self) -> usize {
        self.c_out / self.group
    }

    /// 1×1 at stride 1 without padding: each image is the GEMM's operand as it lies.
    pub(crate) fn is_pointwise(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == [1, 1] && self.pads == [0; 4]
    }

    /// One filter per channel: group = c_in = c_out (more than one).
    pub(crate) fn is_depthwise(&self) -> bool {
        self.group > 1 && self.group == self.c_in && self.group == self.c_out
    }

    /// The same convolution over rows, for one over columns: a `kh × 1`
    /// kernel over `h × 1` planes (a 1-D convolution as tf2onnx and jax2tf
    /// write it, `N, C, L, 1`) is a `1 × kh` kernel over `1 × h` planes with
    /// the input, weight and output lying exactly as they do. The kernels
    /// put output positions along a row in their lanes; over columns of
    /// width one they filled one lane in sixteen (magika's 5×1 convolution
    /// over 512 positions: 48 GFLOP/s). `None` unless the planes are one
    /// column wide, unpadded along it, and taller than one row.
    fn as_row(&self) -> Option<Conv2d> {
        (self.w == 1 && self.kw == 1 && self.pads[1] == 0 && self.pads[3] == 0 && self.h > 1).then(|| Conv2d {
            h: 1,
            w: self.h,
            kh: 1,
            kw: self.kh,
            stride: [1, self.stride[0]],
            dilation: [1, self.dilation[0]],
            pads: [0, self.pads[0], 0, self.pads[2]],
            ..*self
        })
    }

    /// Panics unless the attributes are consistent and the buffers big enough (a caller's bug).
    fn check(&self, input: &[f32], weight: &[f32], out: &[f32]) -> (usize, usize) {
        assert!(
            self.group > 0 && self.c_in.is_multiple_of(self.group) && self.c_out.is_multiple_of(self.group),
            "conv2d: group {} does not divide {} input and {} output channels",
            self.group,
            self.c_in,
            self.c_out
        );
        let (oh, ow) = self.output_hw().unwrap_or_else(|| panic!("conv2d: the kernel does not fit: {self:?}"));
        assert!(input.len() >= self.n * self.c_in * self.h * self.w, "conv2d: input too short for {self:?}");
        assert!(weight.len() >= self.c_out * self.group_in() * self.kh * self.kw, "conv2d: weight too short");
        assert!(out.len() >= self.n * self.c_out * oh * ow, "conv2d: output too short");
        (oh, ow)
    }
}

/// `out = epilogue(conv(input, weight))`, NCHW; `Bias::PerRow` is per output channel.
/// Panics when the buffers or attributes are inconsistent.
pub fn conv2d(input: &[f32], weight: &[f32], p: &Conv2d, out: &mut [f32], ep: &Epilogue) {
    conv2d_keeping(input, weight, p, out, ep, None)
}

/// What a convolution's kernels derive from its weight — Winograd's
/// transformed filters, the small-plane kernel's transposed weight — kept
/// by a caller between calls when the weight is constant.
pub enum Prepared {
    /// [`winograd::Filters`].
    Winograd(winograd::Filters),
    /// [`small_plane::Transposed`].
    SmallPlane(small_plane::Transposed),
    /// `channel_vector::Packed`.
    ChannelVector(channel_vector::Packed),
    /// `depthwise_lanes::Taps`.
    DepthwiseLanes(depthwise_lanes::Taps),
    /// [`direct::Packed`].
    Direct(direct::Packed),
    /// [`dead_taps::Trimmed`]: the weight cut to the taps that read the input.
    Trimmed(dead_taps::Trimmed),
    /// A MatMul's or Gemm's constant B in column panels ([`Panels`](crate::simd::panels::Panels)).
    Panels(crate::simd::panels::Panels),
}

impl Prepared {
    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        match self {
            Prepared::Winograd(f) => f.byte_size(),
            Prepared::SmallPlane(t) => t.byte_size(),
            Prepared::ChannelVector(w) => w.byte_size(),
            Prepared::DepthwiseLanes(t) => t.byte_size(),
            Prepared::Direct(w) => w.byte_size(),
            Prepared::Trimmed(t) => t.byte_size(),
            Prepared::Panels(p) => p.byte_size(),
        }
    }
}

/// [`conv2d`] for a weight that stays the same from call to call: `kept`
/// holds what the kernels derive from it ([`Prepared`]), made on the first
/// call (and again if the route or the shape changed).
pub fn conv2d_keeping(
    input: &[f32],
    weight: &[f32],
    p: &Conv2d,
    out: &mut [f32],
    ep: &Epilogue,
    kept: Option<&mut Option<Prepared>>,
) {
    let (oh, ow) = p.check(input, weight, out);
    let plane = oh * ow;
    ep.check(p.c_out, plane);
    if let Some(r) = ep.residual {
        assert!(r.len() >= p.n * p.c_out * plane, "conv2d: residual too short");
    }
    if let Some(q) = p.as_row() {
        return conv2d_keeping(input, weight, &q, out, ep, kept);
    }
    let mut own = None;
    let slot = kept.unwrap_or(&mut own);
    if let Some((q, first)) = dead_taps::trim(p) {
        if !matches!(slot, Some(Prepared::Trimmed(t)) if t.conv == q) {
            *slot = Some(Prepared::Trimmed(dead_taps::Trimmed::new(weight, p, q, first)));
        }
        let Some(Prepared::Trimmed(t)) = slot else { unreachable!("filled above") };
        let mut inner = t.inner.take().map(|b| *b);
        conv2d_keeping(input, &t.weight, &q, out, ep, Some(&mut inner));
        t.inner = inner.map(Box::new);
        return;
    }
    if p.is_depthwise() {
        let out = &mut out[..p.n * p.c_out * plane];
        if depthwise_lanes::suits(p) {
            if !matches!(slot, Some(Prepared::DepthwiseLanes(t)) if t.fits(p)) {
                *slot = Some(Prepared::DepthwiseLanes(depthwise_lanes::Taps::new(weight, p)));
            }
            let Some(Prepared::DepthwiseLanes(taps)) = slot else { unreachable!("filled above") };
            return depthwise_lanes::conv(input, taps, p, (oh, ow), out, ep);
        }
        #[cfg(target_arch = "x86_64")]
        if depthwise_rows::suits(p, (oh, ow)) {
            return depthwise_rows::conv(input, weight, p, (oh, ow), out, ep);
        }
        return match direct::suits(p, (oh, ow)) {
            true => direct::conv(input, packed_for_direct(slot, weight, p), p, (oh, ow), out, ep),
            false => depthwise::conv(input, weight, p, (oh, ow), out, ep),
        };
    }
    let direct = direct::suits(p, (oh, ow));
    if winograd::suits(p, (oh, ow)) && !(direct && p.c_in < WINOGRAD_OVER_DIRECT) {
        if !matches!(slot, Some(Prepared::Winograd(f)) if f.fits(p.c_in, p.c_out)) {
            *slot = Some(Prepared::Winograd(winograd::Filters::new(weight, p.c_in, p.c_out)));
        }
        let Some(Prepared::Winograd(filters)) = slot else { unreachable!("filled above") };
        return winograd::conv(input, filters, p, (oh, ow), &mut out[..p.n * p.c_out * plane], ep);
    }
    if direct {
        let packed = packed_for_direct(slot, weight, p);
        return direct::conv(input, packed, p, (oh, ow), &mut out[..p.n * p.c_out * plane], ep);
    }
    if small_plane::suits(p, (oh, ow)) {
        if !matches!(slot, Some(Prepared::SmallPlane(t)) if t.fits(p)) {
            *slot = Some(Prepared::SmallPlane(small_plane::Transposed::new(weight, p)));
        }
        let Some(Prepared::SmallPlane(weights)) = slot else { unreachable!("filled above") };
        return small_plane::conv(input, weights, p, (oh, ow), &mut out[..p.n * p.c_out * plane], ep);
    }
    if channel_vector::suits(p, (oh, ow)) {
        if !matches!(slot, Some(Prepared::ChannelVector(w)) if w.fits(p)) {
            *slot = Some(Prepared::ChannelVector(channel_vector::Packed::new(weight, p)));
        }
        let Some(Prepared::ChannelVector(weights)) = slot else { unreachable!("filled above") };
        return channel_vector::conv(input, weights, p, (oh, ow), &mut out[..p.n * p.c_out * plane], ep);
    }
    let units = p.n * p.group;
    let threads = rayon::current_num_threads();
    if threads > 1 && p.group > 1 && units_in_parallel(p, plane, units, threads) {
        let unit_len = p.group_out() * plane;
        out[..units * unit_len]
            .par_chunks_mut(unit_len)
            .enumerate()
            .for_each(|(u, dst)| unit_product(input, weight, p, (oh, ow), u / p.group, u % p.group, dst, ep, 1));
        return;
    }
    for image in 0..p.n {
        for g in 0..p.group {
            let offset = (image * p.c_out + g * p.group_out()) * plane;
            let dst = &mut out[offset..offset + p.group_out() * plane];
            unit_product(input, weight, p, (oh, ow), image, g, dst, ep, threads);
        }
    }
}

/// The direct kernel's packed weight in `slot`, made there unless it
/// already holds one for `p`.
fn packed_for_direct<'s>(slot: &'s mut Option<Prepared>, weight: &[f32], p: &Conv2d) -> &'s direct::Packed {
    if !matches!(slot, Some(Prepared::Direct(w)) if w.fits(p)) {
        *slot = Some(Prepared::Direct(direct::Packed::new(weight, p)));
    }
    let Some(Prepared::Direct(packed)) = slot else { unreachable!("filled above") };
    packed
}

/// Whether the image-groups of a grouped im2col or pointwise convolution
/// run side by side, one thread each, rather than one after another with
/// each group's product cut across the threads: when the threads can
/// share them evenly and each product is small, so that one parallel
/// region replaces a fork and join per group (ShuffleNet's 1×1
/// convolutions of four groups, e.g. 34×34 channels on 28²). Ungrouped
/// batches keep the split products: for the exports' batch of two images
/// side by side measured the same or slower.
fn units_in_parallel(p: &Conv2d, plane: usize, units: usize, threads: usize) -> bool {
    let work = p.group_out() * p.group_in() * p.kh * p.kw * plane;
    (units.is_multiple_of(threads) || units >= 4 * threads) && work <= UNIT_WORK
}

/// Above this many multiply-adds per image-group a grouped convolution
/// splits each group's product across the threads instead.
const UNIT_WORK: usize = 1 << 24;

/// Image `image`, group `g` of an im2col or pointwise convolution into
/// `dst` (that unit's `c_out/group` planes), its product on up to
/// `threads` threads.
#[allow(clippy::too_many_arguments)]
fn unit_product(
    input: &[f32],
    weight: &[f32],
    p: &Conv2d,
    (oh, ow): (usize, usize),
    image: usize,
    g: usize,
    dst: &mut [f32],
    ep: &Epilogue,
    threads: usize,
) {
    let (cig, cog, plane) = (p.group_in(), p.group_out(), oh * ow);
    let patch = cig * p.kh * p.kw;
    let src = &input[(image * p.c_in + g * cig) * p.h * p.w..][..cig * p.h * p.w];
    let a = MatRef::row_major(&weight[g * cog * patch..][..cog * patch], cog, patch);
    let offset = (image * p.c_out + g * cog) * plane;
    let ep = ep.shifted(g * cog, offset);
    if p.is_pointwise() {
        return sgemm_on(a, MatRef::row_major(src, cig, plane), dst, &ep, threads);
    }
    // im2col fills every value of its columns: a buffer kept by the thread serves every call.
    let mut columns = COLUMNS.with(|c| c.take());
    if columns.len() < patch * plane {
        columns.resize(patch * plane, 0.0);
    }
    im2col::fill(src, p, (oh, ow), &mut columns);
    sgemm_on(a, MatRef::row_major(&columns, patch, plane), dst, &ep, threads);
    COLUMNS.with(|c| c.set(columns));
}

/// Below this many input channels a 3×3 convolution that both Winograd's
/// route and the direct kernel take goes to the direct kernel (`cargo
/// bench -p diamond-runtime --bench simd_gemm`, share of the FMA peak, one
/// thread, AVX-512, Winograd vs direct: SqueezeNet's 16→64 on 55² 65–71%
/// vs 80%, 32→128 on 27² 65–68% vs 80%; ResNet-50's 64→64 on 56² 103% vs
/// 89%, VGG's 64→64 on 224² 106% vs 85%).
const WINOGRAD_OVER_DIRECT: usize = 64;

thread_local! {
    /// The im2col columns of the last convolution this thread ran.
    static COLUMNS: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}
