//! im2col: one group of one image's input laid out as the matrix whose
//! row `(c, ki, kj)` holds, for every output position, the input value that
//! kernel tap `(ki, kj)` of channel `c` meets there (0 in the padding), so
//! that the convolution is `weights · columns`. Rows are filled in
//! parallel on the current rayon pool.
//!
//! Three ways of filling, chosen by the shape: narrow outputs (under 16
//! columns per output row) gather each channel through one table of input
//! offsets per call, worked out once for every tap and output position
//! (`fill_by_table`); at stride 1, outputs of 16 to 31 columns are copied
//! from a zero-padded copy of each channel, one short block copy per output
//! row and tap (`fill_from_padded`);
//! wider ones copy each output row's run of input columns (`fill_row`),
//! where the per-row set-up is paid back by long copies.

use super::conv::Conv2d;
use rayon::prelude::*;

/// Below this many values the columns are filled on one thread.
const PARALLEL_VALUES: usize = 1 << 16;

/// Fills `columns` (`c_in/group · kh · kw` rows of `oh · ow`) from `src` (`c_in/group × h × w`).
pub(crate) fn fill(src: &[f32], p: &Conv2d, (oh, ow): (usize, usize), columns: &mut [f32]) {
    let plane = oh * ow;
    let taps = p.kh * p.kw;
    let rows = p.group_in() * taps;
    let columns = &mut columns[..rows * plane];
    if (NARROW..PADDED_BELOW).contains(&ow) && p.stride[1] == 1 {
        return fill_from_padded(src, p, (oh, ow), columns);
    }
    if gathers(p, ow) {
        return fill_by_table(src, p, (oh, ow), columns);
    }
    // Per column tap: the output columns inside the input, and the first one's input column.
    let spans: Vec<Span> = (0..p.kw).map(|kj| Span::of(p, kj, ow)).collect();
    let channel = |c: usize| &src[c * p.h * p.w..(c + 1) * p.h * p.w];
    if columns.len() >= PARALLEL_VALUES && rayon::current_num_threads() > 1 {
        columns.par_chunks_mut(plane).enumerate().for_each(|(r, dst)| {
            let (c, tap) = (r / taps, r % taps);
            fill_row(channel(c), p, tap / p.kw, &spans[tap % p.kw], (oh, ow), dst);
        });
    } else {
        // Nested loops: no division per row (small images have thousands of short rows).
        let mut at = 0;
        for c in 0..p.group_in() {
            for ki in 0..p.kh {
                for span in &spans {
                    fill_row(channel(c), p, ki, span, (oh, ow), &mut columns[at..at + plane]);
                    at += plane;
                }
            }
        }
    }
}

/// Whether the columns are gathered through a table: when output rows are
/// narrow, the per-row set-up of [`fill_row`] costs more than the copies.
/// (A column stride alone does not make it worth it: conv1 of a ResNet,
/// 7×7 at stride 2 over 16 columns, fills faster by rows.)
fn gathers(p: &Conv2d, ow: usize) -> bool {
    table_fits(p) && ow < NARROW
}

/// Whether a channel's offsets fit the table: `i32`, and the padding reads
/// element 0, so a channel must hold one.
fn table_fits(p: &Conv2d) -> bool {
    p.h * p.w > 0 && p.h * p.w <= i32::MAX as usize
}

/// Fills the columns channel by channel through one table: entry
/// `tap · plane + position` is the offset in a channel of the input value
/// that the tap meets at that output position, or −1 in the padding.
fn fill_by_table(src: &[f32], p: &Conv2d, (oh, ow): (usize, usize), columns: &mut [f32]) {
    let per_channel = p.kh * p.kw * oh * ow;
    let mut table = TABLE.with(|t| t.take());
    offset_table(p, (oh, ow), &mut table);
    let hw = p.h * p.w;
    let gather = |c: usize, dst: &mut [f32]| {
        let channel = &src[c * hw..(c + 1) * hw];
        for (d, &at) in dst.iter_mut().zip(table.iter()) {
            // Branch-free: the padding reads element 0 and keeps 0.
            let v = channel[at.max(0) as usize];
            *d = if at >= 0 { v } else { 0.0 };
        }
    };
    if columns.len() >= PARALLEL_VALUES && rayon::current_num_threads() > 1 {
        columns.par_chunks_mut(per_channel).enumerate().for_each(|(c, dst)| gather(c, dst));
    } else {
        columns.chunks_mut(per_channel).enumerate().for_each(|(c, dst)| gather(c, dst));
    }
    TABLE.with(|t| t.set(table));
}

/// Writes into `table` (cleared first), for each kernel tap `(ki, kj)` and
/// each output position, the offset in an input channel of the value the
/// tap meets there, or −1 in the padding: entry `(ki·kw + kj)·plane + position`.
/// The caller checks that a channel's offsets fit the table ([`table_fits`]).
fn offset_table(p: &Conv2d, (oh, ow): (usize, usize), table: &mut Vec<i32>) {
    table.clear();
    table.reserve(p.kh * p.kw * oh * ow);
    for ki in 0..p.kh {
        for kj in 0..p.kw {
            for oy in 0..oh {
                let iy = (oy * p.stride[0] + ki * p.dilation[0]) as isize - p.pads[0] as isize;
                for ox in 0..ow {
                    let ix = (ox * p.stride[1] + kj * p.dilation[1]) as isize - p.pads[1] as isize;
                    let inside = iy >= 0 && iy < p.h as isize && ix >= 0 && ix < p.w as isize;
                    table.push(if inside { (iy as usize * p.w + ix as usize) as i32 } else { -1 });
                }
            }
        }
    }
}

thread_local! {
    /// The offset table of the last call on this thread (kept for its allocation).
    static TABLE: std::cell::Cell<Vec<i32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// At stride 1, output rows of [`NARROW`] columns up to this many are
/// filled from a padded copy of each channel ([`fill_from_padded`]; U-Net's 16 and 24-column
/// layers 0.41 → 0.38 ms); wider ones row by row ([`fill_row`]), narrower
/// ones through the table (the padded copies were slower there: RegNet's
/// 8-column layers 0.064 → 0.067 ms).
const PADDED_BELOW: usize = 32;

/// Output rows narrower than this many columns make depthwise convolution
/// block its channels (`depthwise::blocked`), and strided convolutions
/// gather their columns through a table ([`fill_by_table`]).
pub(crate) const NARROW: usize = 16;

/// Fills the columns (at column stride 1) channel by channel from a
/// zero-padded copy of the part of the channel that the taps read: tap
/// `(ki, kj)` at output row `oy` reads `ow` consecutive values of it, from
/// row `oy·stride_h + ki·dilation_h`, column `kj·dilation_w` — one short
/// block copy per output row and tap, where [`fill_row`] pays a set-up per
/// row to find what lies in the padding.
fn fill_from_padded(src: &[f32], p: &Conv2d, (oh, ow): (usize, usize), columns: &mut [f32]) {
    debug_assert_eq!(p.stride[1], 1, "fill_from_padded reads consecutive columns");
    let (sh, [dh, dw]) = (p.stride[0], p.dilation);
    // the padded extent the taps read
    let hp = (oh - 1) * sh + (p.kh - 1) * dh + 1;
    let wp = ow + (p.kw - 1) * dw;
    let per_channel = p.kh * p.kw * oh * ow;
    let hw = p.h * p.w;
    let one = |padded: &mut Vec<f32>, c: usize, dst: &mut [f32]| {
        padded.clear();
        padded.resize(hp * wp, 0.0);
        pad_channel(&src[c * hw..(c + 1) * hw], p, (hp, wp), padded);
        let mut at = 0;
        for ki in 0..p.kh {
            for kj in 0..p.kw {
                let base = &padded[kj * dw..];
                for oy in 0..oh {
                    copy_run(&mut dst[at..at + ow], &base[(oy * sh + ki * dh) * wp..][..ow]);
                    at += ow;
                }
            }
        }
    };
    if columns.len() >= PARALLEL_VALUES && rayon::current_num_threads() > 1 {
        columns.par_chunks_mut(per_channel).enumerate().for_each_init(Vec::new, |padded, (c, dst)| one(padded, c, dst));
    } else {
        let mut padded = Vec::new();
        columns.chunks_mut(per_channel).enumerate().for_each(|(c, dst)| one(&mut padded, c, dst));
    }
}

/// Writes the padded rows `0..hp`, columns `0..wp` of `channel` into the
/// zeroed `padded` (`hp × wp`).
pub(in crate::simd) fn pad_channel(channel: &[f32], p: &Conv2d, (hp, wp): (usize, usize), padded: &mut [f32]) {
    let (top, left) = (p.pads[0], p.pads[1]);
    // padded columns holding input: left..left + w, clipped to what is read
    let (x0, x1) = (left, (left + p.w).min(wp));
    if x0 >= x1 {
        return;
    }
    for r in top..(top + p.h).min(hp) {
        let line = &channel[(r - top) * p.w..][..p.w];
        padded[r * wp + x0..r * wp + x1].copy_from_slice(&line[..x1 - x0]);
    }
}

/// The output columns `lo..hi` that one column tap reaches inside the
/// input, and the input column `start` of the first.
#[derive(Clone, Copy)]
struct Span {
    lo: usize,
    hi: usize,
    start: usize,
}

impl Span {
    fn of(p: &Conv2d, kj: usize, ow: usize) -> Span {
        let sw = p.stride[1];
        // output columns whose input column lies inside: ox·sw + kj·dw − left ∈ [0, w)
        let first_x = |ox: usize| ox as isize * sw as isize + (kj * p.dilation[1]) as isize - p.pads[1] as isize;
        let lo = (0..ow).find(|&ox| first_x(ox) >= 0).unwrap_or(ow);
        let hi = (lo..ow).find(|&ox| first_x(ox) >= p.w as isize).unwrap_or(ow);
        let start = if lo < hi { first_x(lo) as usize } else { 0 };
        Span { lo, hi, start }
    }
}

/// One row: tap `(ki, span)` of one channel over every output position.
/// Small images make runs of a few floats per output row, where a call of
/// `memcpy`/`memset` per run cost more than the copy: runs under 64 floats
/// are copied inline.
fn fill_row(channel: &[f32], p: &Conv2d, ki: usize, span: &Span, (oh, ow): (usize, usize), dst: &mut [f32]) {
    let (sh, sw) = (p.stride[0], p.stride[1]);
    let top = p.pads[0] as isize;
    let Span { lo, hi, start } = *span;
    for oy in 0..oh {
        let out = &mut dst[oy * ow..(oy + 1) * ow];
        let iy = oy as isize * sh as isize + (ki * p.dilation[0]) as isize - top;
        if iy < 0 || iy >= p.h as isize {
            zero(out);
            continue;
        }
        let line = &channel[iy as usize * p.w..(iy as usize + 1) * p.w];
        zero(&mut out[..lo]);
        zero(&mut out[hi..]);
        if lo < hi {
            if sw == 1 {
                copy_run(&mut out[lo..hi], &line[start..start + (hi - lo)]);
            } else if sw == 2 {
                // Every other input column: pairs, so the loop vectorizes
                // (an iterator stepping by 2 ran one float at a time).
                let n = hi - lo;
                let src = &line[start..start + 2 * n - 1];
                let (body, last) = out[lo..hi].split_at_mut(n - 1);
                body.iter_mut().zip(src.chunks_exact(2)).for_each(|(o, pair)| *o = pair[0]);
                last[0] = src[2 * (n - 1)];
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
