//! Depthwise convolution (one filter per channel: group = c_in = c_out),
//! computed directly: each output plane is the sum over the kernel taps of
//! the input plane shifted by the tap and scaled by its weight — for a unit
//! horizontal stride a contiguous multiply-add over each output row, which
//! the compiler vectorizes (AVX2+FMA when present, else the baseline).
//!
//! Narrow or column-strided outputs make those rows a few floats long, and
//! a scalar loop: there, on AVX2, eight channels are computed at once
//! instead ([`blocked`]). Their planes are interleaved into one
//! position-major block (eight floats per position), each output position
//! sums its taps as 8-wide multiply-adds of the tap's eight weights and the
//! eight inputs the tap meets (found through one table of input offsets
//! per call, [`im2col::offset_table`]), and the block is spread back into
//! the eight output planes.
//!
//! The planes (or blocks) run in parallel on the current rayon pool, and
//! each gets its epilogue while it is in cache.

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::Epilogue;
use super::im2col;
use rayon::prelude::*;

/// `out = epilogue(depthwise(input, weight))` over `n × c` planes of `oh × ow`.
pub(crate) fn conv(
    input: &[f32],
    weight: &[f32],
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
) {
    let plane = oh * ow;
    let channels = p.c_out;
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() && (im2col::gathers(p, ow) || (im2col::table_fits(p) && p.stride[1] > 1)) {
        return blocked::conv(input, weight, p, (oh, ow), out, ep);
    }
    let one = |index: usize, dst: &mut [f32]| {
        let c = index % channels;
        let src = &input[index * p.h * p.w..(index + 1) * p.h * p.w];
        let taps = &weight[c * p.kh * p.kw..(c + 1) * p.kh * p.kw];
        accumulate(src, taps, p, ow, dst);
        ep.shifted(c, index * plane).apply(dst, 1, plane);
    };
    if rayon::current_num_threads() > 1 && out.len() >= 1 << 14 {
        out.par_chunks_mut(plane).enumerate().for_each(|(i, dst)| one(i, dst));
    } else {
        out.chunks_mut(plane).enumerate().for_each(|(i, dst)| one(i, dst));
    }
}

/// One output plane from one input plane and its `kh × kw` taps.
fn accumulate(src: &[f32], taps: &[f32], p: &Conv2d, ow: usize, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        unsafe { accumulate_avx2(src, taps, p, ow, dst) };
        return;
    }
    accumulate_body(src, taps, p, ow, dst);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2(src: &[f32], taps: &[f32], p: &Conv2d, ow: usize, dst: &mut [f32]) {
    accumulate_body(src, taps, p, ow, dst);
}

#[inline(always)]
fn accumulate_body(src: &[f32], taps: &[f32], p: &Conv2d, ow: usize, dst: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let (top, left) = (p.pads[0] as isize, p.pads[1] as isize);
    dst.fill(0.0);
    for kj in 0..p.kw {
        // output columns whose input column lies inside the row
        let x_of = |ox: usize| ox as isize * sw as isize + (kj * dw) as isize - left;
        let lo = (0..ow).find(|&ox| x_of(ox) >= 0).unwrap_or(ow);
        let hi = (lo..ow).find(|&ox| x_of(ox) >= p.w as isize).unwrap_or(ow);
        if lo >= hi {
            continue;
        }
        let start = x_of(lo) as usize;
        for (oy, row) in dst.chunks_mut(ow).enumerate() {
            for ki in 0..p.kh {
                let iy = oy as isize * sh as isize + (ki * dh) as isize - top;
                if iy < 0 || iy >= p.h as isize {
                    continue;
                }
                let t = taps[ki * p.kw + kj];
                let line = &src[iy as usize * p.w..(iy as usize + 1) * p.w];
                let out = &mut row[lo..hi];
                if sw == 1 {
                    out.iter_mut().zip(&line[start..start + (hi - lo)]).for_each(|(o, x)| *o += t * x);
                } else {
                    out.iter_mut().enumerate().for_each(|(i, o)| *o += t * line[start + i * sw]);
                }
            }
        }
    }
}

/// Eight channels at a time, for narrow or column-strided outputs on AVX2.
#[cfg(target_arch = "x86_64")]
mod blocked {
    use super::super::conv::Conv2d;
    use super::super::epilogue::Epilogue;
    use super::super::im2col;
    use rayon::prelude::*;

    /// Channels per block: one AVX register of `f32`s.
    const LANES: usize = 8;

    /// As [`super::conv`], for a processor with AVX2 and FMA and inputs
    /// whose offsets fit the table ([`im2col::table_fits`]).
    pub(super) fn conv(
        input: &[f32],
        weight: &[f32],
        p: &Conv2d,
        (oh, ow): (usize, usize),
        out: &mut [f32],
        ep: &Epilogue,
    ) {
        let plane = oh * ow;
        let (c, hw, taps) = (p.c_out, p.h * p.w, p.kh * p.kw);
        let mut table = Vec::new();
        im2col::offset_table(p, (oh, ow), &mut table);
        let blocks = c.div_ceil(LANES);
        // A work item: channels c0..c0 + LANES (fewer in the last block) of one image.
        let one = |item: usize, dst: &mut [f32]| {
            let (image, c0) = (item / blocks, (item % blocks) * LANES);
            let lanes = LANES.min(c - c0);
            let src = &input[(image * c + c0) * hw..][..lanes * hw];
            let w = &weight[c0 * taps..][..lanes * taps];
            // SAFETY: the caller checked that the processor has AVX2 and FMA.
            unsafe { block_avx2(src, w, &table, (hw, taps, plane), lanes, dst) };
            for (j, out) in dst.chunks_mut(plane).enumerate() {
                ep.shifted(c0 + j, (image * c + c0 + j) * plane).apply(out, 1, plane);
            }
        };
        // Work items own consecutive planes of the output: one image's block of channels.
        let mut items: Vec<(usize, &mut [f32])> = Vec::with_capacity(p.n * blocks);
        let mut rest = &mut out[..p.n * c * plane];
        for item in 0..p.n * blocks {
            let lanes = LANES.min(c - (item % blocks) * LANES);
            let (head, tail) = rest.split_at_mut(lanes * plane);
            items.push((item, head));
            rest = tail;
        }
        if rayon::current_num_threads() > 1 && p.n * c * plane >= 1 << 14 {
            items.into_par_iter().for_each(|(i, dst)| one(i, dst));
        } else {
            items.into_iter().for_each(|(i, dst)| one(i, dst));
        }
    }

    /// `lanes` channels (input planes `src`, `taps` weights each in `w`) into
    /// their output planes `dst`, through the interleaved block.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(
        src: &[f32],
        w: &[f32],
        table: &[i32],
        (hw, taps, plane): (usize, usize, usize),
        lanes: usize,
        dst: &mut [f32],
    ) {
        let mut inputs = SPARE.with(|s| s.take());
        // Position-major: position q's eight channels at q·LANES (missing lanes 0).
        inputs.clear();
        inputs.resize(hw * LANES, 0.0);
        for j in 0..lanes {
            for (q, &v) in src[j * hw..(j + 1) * hw].iter().enumerate() {
                inputs[q * LANES + j] = v;
            }
        }
        let mut weights = vec![[0f32; LANES]; taps];
        for j in 0..lanes {
            for (t, row) in weights.iter_mut().enumerate() {
                row[j] = w[j * taps + t];
            }
        }
        for q in 0..plane {
            let mut acc = [0f32; LANES];
            for (t, wt) in weights.iter().enumerate() {
                let at = table[t * plane + q];
                if at >= 0 {
                    let x: &[f32; LANES] = inputs[at as usize * LANES..][..LANES].try_into().expect("eight lanes");
                    for l in 0..LANES {
                        acc[l] = wt[l].mul_add(x[l], acc[l]);
                    }
                }
            }
            for (j, out) in dst.chunks_mut(plane).enumerate().take(lanes) {
                out[q] = acc[j];
            }
        }
        SPARE.with(|s| s.set(inputs));
    }

    thread_local! {
        /// The interleaved input block of the last call on this thread (kept for its allocation).
        static SPARE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
    }
}
