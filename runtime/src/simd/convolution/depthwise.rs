//! Depthwise convolution (one filter per channel: group = c_in = c_out),
//! computed directly: each output plane is the sum over the kernel taps of
//! the input plane shifted by the tap and scaled by its weight — for a unit
//! horizontal stride a contiguous multiply-add over each output row, which
//! the compiler vectorizes (AVX2+FMA when present, else the baseline).
//!
//! Narrow or column-strided outputs make those rows a few floats long, and
//! a scalar loop: there, on AVX2, eight channels are computed at once
//! instead (`blocked`). Their planes are interleaved into one
//! position-major, zero-padded block (eight floats per position), each
//! output position sums its taps as 8-wide multiply-adds of the tap's eight
//! weights and the eight inputs the tap meets, and the results are spread
//! back into the eight output planes.
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
    if cpu::avx2_fma() && (ow < im2col::NARROW || p.stride[1] > 1) {
        return blocked::conv(input, weight, p, (oh, ow), out, ep);
    }
    let one = |index: usize, dst: &mut [f32]| {
        let c = index % channels;
        let src = &input[index * p.h * p.w..(index + 1) * p.h * p.w];
        let taps = &weight[c * p.kh * p.kw..(c + 1) * p.kh * p.kw];
        accumulate(src, taps, p, ow, dst);
        ep.shifted(c, index * plane).apply(dst, 1, plane);
    };
    each_plane(out, plane, one);
}

/// Calls `one(index, plane)` for each `plane`-long output plane of `out`,
/// on the current rayon pool when there are [`PARALLEL_OUTPUTS`] values or
/// more (the per-plane routes here and in `depthwise_rows`).
pub(crate) fn each_plane(out: &mut [f32], plane: usize, one: impl Fn(usize, &mut [f32]) + Sync + Send) {
    if rayon::current_num_threads() > 1 && out.len() >= PARALLEL_OUTPUTS {
        out.par_chunks_mut(plane).enumerate().for_each(|(i, dst)| one(i, dst));
    } else {
        out.chunks_mut(plane).enumerate().for_each(|(i, dst)| one(i, dst));
    }
}

/// Below this many output values the planes run on one thread.
const PARALLEL_OUTPUTS: usize = 1 << 14;

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
    use super::super::transpose::transpose8;
    use rayon::prelude::*;

    /// Channels per block: one AVX register of `f32`s.
    const LANES: usize = 8;
    /// Output positions per step: independent accumulators side by side.
    const STEP: usize = 8;

    /// The padded input plane's geometry: rows, columns.
    #[derive(Clone, Copy)]
    struct Padded {
        rows: usize,
        cols: usize,
    }

    /// As [`super::conv`], for a processor with AVX2 and FMA.
    pub(in crate::simd) fn conv(
        input: &[f32],
        weight: &[f32],
        p: &Conv2d,
        (oh, ow): (usize, usize),
        out: &mut [f32],
        ep: &Epilogue,
    ) {
        let plane = oh * ow;
        let (c, hw) = (p.c_out, p.h * p.w);
        let padded = Padded { rows: p.h + p.pads[0] + p.pads[2], cols: p.w + p.pads[1] + p.pads[3] };
        let blocks = c.div_ceil(LANES);
        // A work item: channels c0..c0 + LANES (fewer in the last block) of one image.
        let one = |item: usize, dst: &mut [f32]| {
            let (image, c0) = (item / blocks, (item % blocks) * LANES);
            let lanes = LANES.min(c - c0);
            let src = &input[(image * c + c0) * hw..][..lanes * hw];
            let w = &weight[c0 * p.kh * p.kw..][..lanes * p.kh * p.kw];
            // SAFETY: the caller checked that the processor has AVX2 and FMA.
            unsafe { block_avx2(src, w, p, padded, (oh, ow), lanes, dst) };
            // the block's planes are its rows: bias and the rest in one call
            ep.shifted(c0, (image * c + c0) * plane).apply(dst, lanes, plane);
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

    /// `lanes` channels (input planes `src`, their taps in `w`) into their
    /// output planes `dst`. The planes are interleaved, position-major and
    /// zero-padded, into one block (eight floats per position), so that
    /// every tap of every output position reads inside it; each output
    /// position is then a chain of 8-wide multiply-adds, [`STEP`] positions
    /// side by side.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(
        src: &[f32],
        w: &[f32],
        p: &Conv2d,
        padded: Padded,
        (oh, ow): (usize, usize),
        lanes: usize,
        dst: &mut [f32],
    ) {
        let (hw, taps, plane) = (p.h * p.w, p.kh * p.kw, oh * ow);
        let (mut inputs, mut results) = SPARE.with(|s| s.take());
        inputs.clear();
        inputs.resize(padded.rows * padded.cols * LANES, 0.0);
        // Position by position, its eight channels written side by side: one
        // pass over the block (channel by channel, eight strided passes cost
        // more than the whole convolution).
        for y in 0..p.h {
            let row = ((y + p.pads[0]) * padded.cols + p.pads[1]) * LANES;
            let mut x = 0;
            if lanes == LANES {
                while x + LANES <= p.w {
                    let mut from: [&[f32]; LANES] = [&[]; LANES];
                    for (j, f) in from.iter_mut().enumerate() {
                        *f = &src[j * hw + y * p.w + x..][..LANES];
                    }
                    transpose8(from, &mut inputs[row + x * LANES..][..LANES * LANES]);
                    x += LANES;
                }
            }
            for x in x..p.w {
                let to: &mut [f32; LANES] = (&mut inputs[row + x * LANES..][..LANES]).try_into().expect("eight lanes");
                for (j, t) in to.iter_mut().enumerate().take(lanes) {
                    *t = src[j * hw + y * p.w + x];
                }
            }
        }
        let mut weights = vec![[0f32; LANES]; taps];
        for j in 0..lanes {
            for (t, row) in weights.iter_mut().enumerate() {
                row[j] = w[j * taps + t];
            }
        }
        results.clear();
        results.resize(plane * LANES, 0.0);
        accumulate_block(&inputs, &weights, p, padded, (oh, ow), &mut results);
        // Back to planes: eight positions' eight channels transposed at a time.
        let mut q = 0;
        let mut block = [0f32; LANES * LANES];
        while q + LANES <= plane {
            let mut from: [&[f32]; LANES] = [&[]; LANES];
            for (u, f) in from.iter_mut().enumerate() {
                *f = &results[(q + u) * LANES..][..LANES];
            }
            transpose8(from, &mut block);
            for (j, out) in dst.chunks_mut(plane).enumerate().take(lanes) {
                out[q..q + LANES].copy_from_slice(&block[j * LANES..][..LANES]);
            }
            q += LANES;
        }
        for (j, out) in dst.chunks_mut(plane).enumerate().take(lanes) {
            for (q, o) in out.iter_mut().enumerate().skip(q) {
                *o = results[q * LANES + j];
            }
        }
        SPARE.with(|s| s.set((inputs, results)));
    }

    /// Every output position of the interleaved block: `results[q·8 + j]`
    /// is channel `j`'s sum over the taps at position `q`, [`STEP`]
    /// positions at a time in registers (independent chains of multiply-
    /// adds), the row's last positions one by one.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn accumulate_block(
        inputs: &[f32],
        weights: &[[f32; LANES]],
        p: &Conv2d,
        padded: Padded,
        (oh, ow): (usize, usize),
        results: &mut [f32],
    ) {
        let [sh, sw] = p.stride;
        let [dh, dw] = p.dilation;
        // Every tap of every output position lies inside the padded block.
        let last = ((oh - 1) * sh + (p.kh - 1) * dh) * padded.cols + (ow - 1) * sw + (p.kw - 1) * dw;
        assert!(inputs.len() >= (last + 1) * LANES && results.len() >= oh * ow * LANES);
        assert!(weights.len() >= p.kh * p.kw);
        let (base, out) = (inputs.as_ptr(), results.as_mut_ptr());
        for oy in 0..oh {
            let mut ox = 0;
            // Eight positions a step, then four, two and one: each step's
            // chains of multiply-adds independent of one another.
            while ox + STEP <= ow {
                positions::<STEP>(base, weights, p, padded, (oy, ox), out.add((oy * ow + ox) * LANES));
                ox += STEP;
            }
            for n in [4, 2, 1] {
                if ox + n <= ow {
                    let to = out.add((oy * ow + ox) * LANES);
                    match n {
                        4 => positions::<4>(base, weights, p, padded, (oy, ox), to),
                        2 => positions::<2>(base, weights, p, padded, (oy, ox), to),
                        _ => positions::<1>(base, weights, p, padded, (oy, ox), to),
                    }
                    ox += n;
                }
            }
        }
    }

    /// Output positions `ox..ox + N` of row `oy` into `to` (`N` × 8 floats).
    ///
    /// # Safety
    /// AVX2 and FMA are there, and every tap of these positions lies in
    /// the block at `base` (as [`accumulate_block`] checks).
    #[inline(always)]
    unsafe fn positions<const N: usize>(
        base: *const f32,
        weights: &[[f32; LANES]],
        p: &Conv2d,
        padded: Padded,
        (oy, ox): (usize, usize),
        to: *mut f32,
    ) {
        use std::arch::x86_64::*;
        let [sh, sw] = p.stride;
        let [dh, dw] = p.dilation;
        let mut acc = [_mm256_setzero_ps(); N];
        for ki in 0..p.kh {
            let row = (oy * sh + ki * dh) * padded.cols;
            for kj in 0..p.kw {
                let wt = _mm256_loadu_ps(weights.get_unchecked(ki * p.kw + kj).as_ptr());
                let at = base.add((row + ox * sw + kj * dw) * LANES);
                for (u, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(wt, _mm256_loadu_ps(at.add(u * sw * LANES)), *a);
                }
            }
        }
        for (u, a) in acc.iter().enumerate() {
            _mm256_storeu_ps(to.add(u * LANES), *a);
        }
    }

    thread_local! {
        /// The padded input block and the result block of the last call on
        /// this thread (kept for their allocations).
        static SPARE: std::cell::Cell<(Vec<f32>, Vec<f32>)> = const { std::cell::Cell::new((Vec::new(), Vec::new())) };
    }
}
