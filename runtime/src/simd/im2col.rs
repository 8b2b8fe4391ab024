//! im2col: one group of one image's input laid out as the matrix whose
//! row `(c, ki, kj)` holds, for every output position, the input value that
//! kernel tap `(ki, kj)` of channel `c` meets there (0 in the padding), so
//! that the convolution is `weights · columns`. Rows are filled in
//! parallel on the current rayon pool.

use super::conv::Conv2d;
use rayon::prelude::*;

/// Below this many values the columns are filled on one thread.
const PARALLEL_VALUES: usize = 1 << 16;

/// Fills `columns` (`c_in/group · kh · kw` rows of `oh · ow`) from `src` (`c_in/group × h × w`).
pub(crate) fn fill(src: &[f32], p: &Conv2d, (oh, ow): (usize, usize), columns: &mut [f32]) {
    let plane = oh * ow;
    let rows = p.group_in() * p.kh * p.kw;
    let columns = &mut columns[..rows * plane];
    let row = |r: usize, dst: &mut [f32]| {
        let (c, tap) = (r / (p.kh * p.kw), r % (p.kh * p.kw));
        let (ki, kj) = (tap / p.kw, tap % p.kw);
        fill_row(&src[c * p.h * p.w..(c + 1) * p.h * p.w], p, ki, kj, ow, dst);
    };
    if columns.len() >= PARALLEL_VALUES && rayon::current_num_threads() > 1 {
        columns.par_chunks_mut(plane).enumerate().for_each(|(r, dst)| row(r, dst));
    } else {
        columns.chunks_mut(plane).enumerate().for_each(|(r, dst)| row(r, dst));
    }
}

/// One row: tap `(ki, kj)` of one channel over every output position.
/// Small images make runs of a few floats per output row, where a call of
/// `memcpy`/`memset` per run cost more than the copy (over half of a
/// 16×16-image network's time): runs under 64 floats are copied inline.
fn fill_row(channel: &[f32], p: &Conv2d, ki: usize, kj: usize, ow: usize, dst: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let (top, left) = (p.pads[0] as isize, p.pads[1] as isize);
    // output columns whose input column lies inside: ox·sw + kj·dw − left ∈ [0, w)
    let first_x = |ox: usize| ox as isize * sw as isize + (kj * dw) as isize - left;
    let lo = (0..ow).find(|&ox| first_x(ox) >= 0).unwrap_or(ow);
    let hi = (lo..ow).find(|&ox| first_x(ox) >= p.w as isize).unwrap_or(ow);
    for (oy, out) in dst.chunks_exact_mut(ow).enumerate() {
        let iy = oy as isize * sh as isize + (ki * dh) as isize - top;
        if iy < 0 || iy >= p.h as isize {
            out.fill(0.0);
            continue;
        }
        let line = &channel[iy as usize * p.w..(iy as usize + 1) * p.w];
        zero(&mut out[..lo]);
        zero(&mut out[hi..]);
        if lo < hi {
            let start = first_x(lo) as usize;
            if sw == 1 {
                copy_run(&mut out[lo..hi], &line[start..start + (hi - lo)]);
            } else {
                out[lo..hi].iter_mut().zip(line[start..].iter().step_by(sw)).for_each(|(o, &v)| *o = v);
            }
        }
    }
}

/// Zeros `d`, inline for the one to three padding columns of a row.
#[inline(always)]
fn zero(d: &mut [f32]) {
    match d.len() {
        0 => {}
        1 => d[0] = 0.0,
        2 => d[..2].copy_from_slice(&[0.0; 2]),
        3 => d[..3].copy_from_slice(&[0.0; 3]),
        _ => d.fill(0.0),
    }
}

/// Copies `src` into `dst` (the same length): short runs as overlapping
/// fixed-size blocks (vector moves), long ones with `copy_from_slice`.
#[inline(always)]
fn copy_run(dst: &mut [f32], src: &[f32]) {
    let n = dst.len();
    if n >= 64 {
        dst.copy_from_slice(src);
    } else if n >= 8 {
        let mut at = 0;
        while at + 8 <= n {
            block::<8>(dst, src, at);
            at += 8;
        }
        if at < n {
            block::<8>(dst, src, n - 8);
        }
    } else if n >= 4 {
        block::<4>(dst, src, 0);
        block::<4>(dst, src, n - 4);
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s;
        }
    }
}

/// `dst[at..at + B] = src[at..at + B]`, a fixed-size move.
#[inline(always)]
fn block<const B: usize>(dst: &mut [f32], src: &[f32], at: usize) {
    let run: [f32; B] = src[at..at + B].try_into().expect("a block inside the run");
    dst[at..at + B].copy_from_slice(&run);
}

#[cfg(test)]
mod tests {
    use super::{copy_run, zero};

    #[test]
    fn short_and_long_runs_copy_exactly() {
        for n in 0..80 {
            let src: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
            let mut dst = vec![-1.0; n];
            copy_run(&mut dst, &src);
            assert_eq!(dst, src, "run of {n}");
            zero(&mut dst);
            assert!(dst.iter().all(|&x| x == 0.0), "zeroed run of {n}");
        }
    }
}
