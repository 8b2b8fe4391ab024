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
fn fill_row(channel: &[f32], p: &Conv2d, ki: usize, kj: usize, ow: usize, dst: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let (top, left) = (p.pads[0] as isize, p.pads[1] as isize);
    // output columns whose input column lies inside: ox·sw + kj·dw − left ∈ [0, w)
    let first_x = |ox: usize| ox as isize * sw as isize + (kj * dw) as isize - left;
    let lo = (0..ow).find(|&ox| first_x(ox) >= 0).unwrap_or(ow);
    let hi = (lo..ow).find(|&ox| first_x(ox) >= p.w as isize).unwrap_or(ow);
    for (oy, out) in dst.chunks_mut(ow).enumerate() {
        let iy = oy as isize * sh as isize + (ki * dh) as isize - top;
        if iy < 0 || iy >= p.h as isize {
            out.fill(0.0);
            continue;
        }
        let line = &channel[iy as usize * p.w..(iy as usize + 1) * p.w];
        out[..lo].fill(0.0);
        out[hi..].fill(0.0);
        if lo < hi {
            let start = first_x(lo) as usize;
            if sw == 1 {
                out[lo..hi].copy_from_slice(&line[start..start + (hi - lo)]);
            } else {
                out[lo..hi].iter_mut().enumerate().for_each(|(i, o)| *o = line[start + i * sw]);
            }
        }
    }
}
