//! Depthwise convolution (one filter per channel: group = c_in = c_out),
//! computed directly: each output plane is the sum over the kernel taps of
//! the input plane shifted by the tap and scaled by its weight — for a unit
//! horizontal stride a contiguous multiply-add over each output row, which
//! the compiler vectorizes (AVX2+FMA when present, else the baseline). The
//! planes run in parallel on the current rayon pool, and each gets its
//! epilogue while it is in cache.

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::Epilogue;
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
