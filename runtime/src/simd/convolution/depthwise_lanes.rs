//! Depthwise convolution (group = c_in = c_out) over small planes with
//! sixteen **channels in the lanes** of AVX-512 registers: EfficientNet's
//! and MobileNet's late layers, whose planes of 1×1 to 16×16 make rows of
//! a few floats, where the plane-by-plane kernels spend their time on
//! per-row and per-block bookkeeping (EfficientNet's export: 288 channels
//! of 1×1 in 8.1 µs, 48 of 16×16 at stride 2 in 6.5 µs).
//!
//! Per image and run of 16-channel chunks, one call:
//! - the input planes are transposed, sixteen positions × sixteen channels
//!   at a time in registers, into chunk-major, position-major, zero-padded
//!   blocks (sixteen floats per position), so that every tap of every
//!   output position reads inside its block;
//! - each output position of a chunk is a chain of 16-wide multiply-adds
//!   of the tap's sixteen weights (transposed once, [`Taps`], and kept by
//!   the session) and the sixteen inputs the tap meets, eight positions
//!   side by side; scale and a per-channel or scalar bias are applied in
//!   the registers;
//! - the results are transposed back into the output planes, and the rest
//!   of the [`Epilogue`] (activations, residual, a fused program) runs over
//!   the unit's planes while they are in cache.

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::{Bias, Epilogue};
use rayon::prelude::*;

/// Channels per chunk: one AVX-512 register of `f32`s.
const LANES: usize = 16;
/// Input planes of up to this many positions go this way (larger ones keep
/// the plane kernels, whose rows are long enough).
const MAX_PLANE: usize = 24 * 24;
/// Input planes of this many positions or more with at most 8 channels (half
/// the lanes idle) keep the plane kernels: EfficientNet's 8 channels of 16×16,
/// 19.2 GFLOP/s here against 23.0 in the direct kernel.
const FEW_CHANNELS_PLANE: usize = 256;
/// Below this many multiply-adds (output values × taps) a call runs on one thread.
const PARALLEL_MACS: usize = 1 << 16;

/// Whether `p` goes this way: AVX-512, depthwise, an input plane of at most
/// [`MAX_PLANE`] positions, and no `DIAMOND_DIRECT` forcing a route.
pub(crate) fn suits(p: &Conv2d) -> bool {
    let plane = p.h * p.w;
    cpu::avx512()
        && cpu::direct_conv().is_none()
        && p.is_depthwise()
        && plane <= MAX_PLANE
        && (p.c_out > LANES / 2 || plane < FEW_CHANNELS_PLANE)
}

/// The depthwise weight laid out for the kernel: per chunk of 16 channels,
/// per tap, the 16 channels' values (0 past `c_out`).
pub struct Taps {
    /// The weight shape it was made for: channels, `kh`, `kw`.
    shape: (usize, usize, usize),
    data: Vec<f32>,
}

impl Taps {
    /// `weight` (`c × 1 × kh × kw`) laid out for `p`.
    pub fn new(weight: &[f32], p: &Conv2d) -> Taps {
        let taps = p.kh * p.kw;
        let mut data = vec![0.0f32; p.c_out.div_ceil(LANES) * taps * LANES];
        for c in 0..p.c_out {
            for t in 0..taps {
                data[((c / LANES) * taps + t) * LANES + c % LANES] = weight[c * taps + t];
            }
        }
        Taps { shape: (p.c_out, p.kh, p.kw), data }
    }

    /// Whether these taps were made for `p`'s weight shape.
    pub fn fits(&self, p: &Conv2d) -> bool {
        self.shape == (p.c_out, p.kh, p.kw)
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.data.len() * std::mem::size_of::<f32>()) as u64
    }
}

/// The zero-padded block of one chunk: rows and columns of positions.
#[derive(Clone, Copy)]
struct Padded {
    rows: usize,
    cols: usize,
}

/// `out = epilogue(depthwise(input, weight))` over `n × c` planes of `oh ×
/// ow`, on a processor with AVX-512 ([`suits`]).
pub(crate) fn conv(input: &[f32], taps: &Taps, p: &Conv2d, (oh, ow): (usize, usize), out: &mut [f32], ep: &Epilogue) {
    assert!(cpu::avx512() && taps.fits(p), "depthwise_lanes: called for a shape it does not take");
    let (c, hw, plane) = (p.c_out, p.h * p.w, oh * ow);
    assert!(input.len() >= p.n * c * hw && out.len() >= p.n * c * plane);
    let padded = Padded { rows: p.h + p.pads[0] + p.pads[2], cols: p.w + p.pads[1] + p.pads[3] };
    let chunks = c.div_ceil(LANES);
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && p.n * c * plane * p.kh * p.kw >= PARALLEL_MACS;
    // Chunks per unit: all of an image's, or few enough for two units per thread.
    let per_unit = match parallel {
        true => chunks.div_ceil((2 * threads).div_ceil(p.n)).max(1),
        false => chunks,
    };
    let units_per_image = chunks.div_ceil(per_unit);
    // Scale and bias go into the registers when they are per channel or scalar.
    let in_registers = matches!(ep.bias, Bias::None | Bias::Scalar(_) | Bias::PerRow(_));
    let rest = match in_registers {
        true => Epilogue { alpha: 1.0, bias: Bias::None, ..*ep },
        false => *ep,
    };
    let one = |unit: usize, dst: &mut [f32]| {
        let (image, k0) = (unit / units_per_image, (unit % units_per_image) * per_unit);
        let k1 = (k0 + per_unit).min(chunks);
        let (c0, c1) = (k0 * LANES, (k1 * LANES).min(c));
        let scale = match (in_registers, ep.bias) {
            (false, _) => Scale { alpha: 1.0, beta: 0.0, bias: Bias::None },
            (true, bias) => Scale { alpha: ep.alpha, beta: ep.beta, bias },
        };
        let src = &input[(image * c + c0) * hw..][..(c1 - c0) * hw];
        let (mut blocks, mut results) = SPARE.with(|s| s.take());
        // every float of both is written below (the blocks' borders by `fill_blocks`)
        blocks.resize(blocks.len().max((k1 - k0) * padded.rows * padded.cols * LANES), 0.0);
        results.resize(results.len().max((k1 - k0) * plane * LANES), 0.0);
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("AVX-512 is x86-64's");
        // SAFETY: `suits` checked AVX-512; the buffers have the sizes the kernels index.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            fill_blocks(src, c1 - c0, p, padded, &mut blocks);
            for k in k0..k1 {
                let at = (k - k0) * padded.rows * padded.cols * LANES;
                let to = (k - k0) * plane * LANES;
                let weights = &taps.data[k * p.kh * p.kw * LANES..][..p.kh * p.kw * LANES];
                accumulate(&blocks[at..], weights, p, padded, (oh, ow), &scale, k * LANES, &mut results[to..]);
            }
            spread(&results, c1 - c0, plane, dst);
        }
        SPARE.with(|s| s.set((blocks, results)));
        rest.shifted(c0, (image * c + c0) * plane).apply(dst, c1 - c0, plane);
    };
    // Units own consecutive planes of the output: one image's run of chunks.
    let mut units: Vec<(usize, &mut [f32])> = Vec::with_capacity(p.n * units_per_image);
    let mut left = &mut out[..p.n * c * plane];
    for unit in 0..p.n * units_per_image {
        let k0 = (unit % units_per_image) * per_unit;
        let channels = ((k0 + per_unit) * LANES).min(c) - k0 * LANES;
        let (head, tail) = left.split_at_mut(channels * plane);
        units.push((unit, head));
        left = tail;
    }
    if parallel {
        units.into_par_iter().for_each(|(u, dst)| one(u, dst));
    } else {
        units.into_iter().for_each(|(u, dst)| one(u, dst));
    }
}

/// What the registers apply to each sum: `alpha · sum + beta · bias`.
struct Scale<'a> {
    alpha: f32,
    beta: f32,
    bias: Bias<'a>,
}

/// Lane mask of the first `n` (≤ 16) lanes.
#[inline(always)]
fn first(n: usize) -> u16 {
    if n >= LANES {
        u16::MAX
    } else {
        ((1u32 << n) - 1) as u16
    }
}

#[cfg(target_arch = "x86_64")]
/// Sixteen vectors transposed: `r[j]` lane `i` becomes `r[i]` lane `j`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16(r: &mut [std::arch::x86_64::__m512; LANES]) {
    use std::arch::x86_64::*;
    let mut t = [_mm512_setzero_ps(); LANES];
    for i in 0..LANES / 2 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for i in 0..LANES / 4 {
        let b = 4 * i;
        r[b] = _mm512_shuffle_ps::<0x44>(t[b], t[b + 2]);
        r[b + 1] = _mm512_shuffle_ps::<0xEE>(t[b], t[b + 2]);
        r[b + 2] = _mm512_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
        r[b + 3] = _mm512_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
    }
    for h in 0..2 {
        let b = 8 * h;
        for i in 0..4 {
            t[b + i] = _mm512_shuffle_f32x4::<0x88>(r[b + i], r[b + 4 + i]);
            t[b + 4 + i] = _mm512_shuffle_f32x4::<0xDD>(r[b + i], r[b + 4 + i]);
        }
    }
    for i in 0..8 {
        r[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]);
        r[8 + i] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[8 + i]);
    }
}

#[cfg(target_arch = "x86_64")]
/// The unit's `channels` input planes (`src`, `h × w` each) into its
/// chunks' zero-padded blocks: `blocks[k][(y + top)·cols + x + left][l]` =
/// channel `16k + l`'s value at `(y, x)`, every other float 0.
#[target_feature(enable = "avx512f")]
unsafe fn fill_blocks(src: &[f32], channels: usize, p: &Conv2d, padded: Padded, blocks: &mut [f32]) {
    use std::arch::x86_64::*;
    let hw = p.h * p.w;
    let block = padded.rows * padded.cols * LANES;
    assert!(src.len() >= channels * hw && blocks.len() >= channels.div_ceil(LANES) * block);
    let (from, to) = (src.as_ptr(), blocks.as_mut_ptr());
    let zero = _mm512_setzero_ps();
    for k in 0..channels.div_ceil(LANES) {
        let lanes = LANES.min(channels - k * LANES);
        let chunk = to.add(k * block);
        // the border: whole rows above and below, the columns left and right of each row between
        let (top, bottom) = (p.pads[0], p.pads[0] + p.h);
        for pos in (0..top * padded.cols).chain(bottom * padded.cols..padded.rows * padded.cols) {
            _mm512_storeu_ps(chunk.add(pos * LANES), zero);
        }
        for y in top..bottom {
            for x in (0..p.pads[1]).chain(p.pads[1] + p.w..padded.cols) {
                _mm512_storeu_ps(chunk.add((y * padded.cols + x) * LANES), zero);
            }
        }
        let mut i0 = 0;
        while i0 < hw {
            let n = LANES.min(hw - i0);
            let mut r = [_mm512_setzero_ps(); LANES];
            for (l, v) in r.iter_mut().enumerate().take(lanes) {
                *v = _mm512_maskz_loadu_ps(first(n), from.add((k * LANES + l) * hw + i0));
            }
            transpose16(&mut r);
            for (j, v) in r.iter().enumerate().take(n) {
                let (y, x) = ((i0 + j) / p.w, (i0 + j) % p.w);
                _mm512_storeu_ps(chunk.add(((y + p.pads[0]) * padded.cols + x + p.pads[1]) * LANES), *v);
            }
            i0 += LANES;
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// One chunk's output positions: `results[q·16 + l]` = `alpha ·` (channel
/// `c0 + l`'s sum over the taps at position `q`) `+ beta · bias`, eight
/// positions at a time in registers, a row's last ones four, two and one
/// at a time.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn accumulate(
    block: &[f32],
    weights: &[f32],
    p: &Conv2d,
    padded: Padded,
    (oh, ow): (usize, usize),
    scale: &Scale,
    c0: usize,
    results: &mut [f32],
) {
    use std::arch::x86_64::*;
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    // Every tap of every output position lies inside the padded block.
    let last = ((oh - 1) * sh + (p.kh - 1) * dh) * padded.cols + (ow - 1) * sw + (p.kw - 1) * dw;
    assert!(block.len() >= (last + 1) * LANES && results.len() >= oh * ow * LANES);
    assert!(weights.len() >= p.kh * p.kw * LANES);
    // `beta · bias` of the chunk's channels (0 past the last)
    let mut lanes = [0f32; LANES];
    match scale.bias {
        Bias::None => {}
        Bias::Scalar(s) => lanes.fill(scale.beta * s),
        Bias::PerRow(b) => {
            for (l, x) in lanes.iter_mut().enumerate() {
                *x = b.get(c0 + l).map_or(0.0, |v| scale.beta * v);
            }
        }
        Bias::PerCol(_) | Bias::Full(_) => unreachable!("applied by the epilogue"),
    }
    let bias = _mm512_loadu_ps(lanes.as_ptr());
    let at = Step { base: block.as_ptr(), weights: weights.as_ptr(), alpha: _mm512_set1_ps(scale.alpha), bias };
    let out = results.as_mut_ptr();
    for oy in 0..oh {
        let mut ox = 0;
        while ox + 8 <= ow {
            at.positions::<8>(p, padded, (oy, ox), out.add((oy * ow + ox) * LANES));
            ox += 8;
        }
        for n in [4, 2, 1] {
            if ox + n <= ow {
                let to = out.add((oy * ow + ox) * LANES);
                match n {
                    4 => at.positions::<4>(p, padded, (oy, ox), to),
                    2 => at.positions::<2>(p, padded, (oy, ox), to),
                    _ => at.positions::<1>(p, padded, (oy, ox), to),
                }
                ox += n;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// What every step of a chunk shares: its block, its taps, the scale and bias vectors.
struct Step {
    base: *const f32,
    weights: *const f32,
    alpha: std::arch::x86_64::__m512,
    bias: std::arch::x86_64::__m512,
}

#[cfg(target_arch = "x86_64")]
impl Step {
    /// Output positions `ox..ox + N` of row `oy` into `to` (`N` × 16 floats).
    ///
    /// # Safety
    /// AVX-512 is there, and every tap of these positions lies in the block
    /// (as [`accumulate`] checks).
    #[inline(always)]
    unsafe fn positions<const N: usize>(&self, p: &Conv2d, padded: Padded, (oy, ox): (usize, usize), to: *mut f32) {
        use std::arch::x86_64::*;
        let [sh, sw] = p.stride;
        let [dh, dw] = p.dilation;
        let mut acc = [_mm512_setzero_ps(); N];
        for ki in 0..p.kh {
            let row = (oy * sh + ki * dh) * padded.cols;
            for kj in 0..p.kw {
                let wt = _mm512_loadu_ps(self.weights.add((ki * p.kw + kj) * LANES));
                let at = self.base.add((row + ox * sw + kj * dw) * LANES);
                for (u, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(wt, _mm512_loadu_ps(at.add(u * sw * LANES)), *a);
                }
            }
        }
        for (u, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(to.add(u * LANES), _mm512_fmadd_ps(self.alpha, *a, self.bias));
        }
    }
}

#[cfg(target_arch = "x86_64")]
/// The chunks' results (`results[k][q][l]`, `plane` positions each) back
/// into the unit's `channels` output planes `dst[(16k + l)·plane + q]`,
/// sixteen positions × sixteen channels transposed at a time.
#[target_feature(enable = "avx512f")]
unsafe fn spread(results: &[f32], channels: usize, plane: usize, dst: &mut [f32]) {
    use std::arch::x86_64::*;
    let chunks = channels.div_ceil(LANES);
    assert!(results.len() >= chunks * plane * LANES && dst.len() >= channels * plane);
    let (from, to) = (results.as_ptr(), dst.as_mut_ptr());
    for k in 0..chunks {
        let lanes = LANES.min(channels - k * LANES);
        let chunk = from.add(k * plane * LANES);
        if plane == 1 {
            // one position: its sixteen channels are consecutive in the output
            _mm512_mask_storeu_ps(to.add(k * LANES), first(lanes), _mm512_loadu_ps(chunk));
            continue;
        }
        let mut q0 = 0;
        while q0 < plane {
            let n = LANES.min(plane - q0);
            let mut r = [_mm512_setzero_ps(); LANES];
            for (j, v) in r.iter_mut().enumerate().take(n) {
                *v = _mm512_loadu_ps(chunk.add((q0 + j) * LANES));
            }
            transpose16(&mut r);
            for (l, v) in r.iter().enumerate().take(lanes) {
                _mm512_mask_storeu_ps(to.add((k * LANES + l) * plane + q0), first(n), *v);
            }
            q0 += LANES;
        }
    }
}

thread_local! {
    /// The padded blocks and the results of the last call on this thread
    /// (kept for their allocations).
    static SPARE: std::cell::Cell<(Vec<f32>, Vec<f32>)> = const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_vectors_transpose() {
        if !cpu::avx512() {
            return;
        }
        use std::arch::x86_64::*;
        let m: Vec<f32> = (0..LANES * LANES).map(|i| i as f32).collect();
        // SAFETY: AVX-512 is there (checked above).
        unsafe {
            let mut r = [_mm512_setzero_ps(); LANES];
            for (j, v) in r.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(m.as_ptr().add(j * LANES));
            }
            transpose16(&mut r);
            let mut t = vec![0f32; LANES * LANES];
            for (j, v) in r.iter().enumerate() {
                _mm512_storeu_ps(t.as_mut_ptr().add(j * LANES), *v);
            }
            for i in 0..LANES {
                for j in 0..LANES {
                    assert_eq!(t[i * LANES + j], m[j * LANES + i], "({i}, {j})");
                }
            }
        }
    }
}
