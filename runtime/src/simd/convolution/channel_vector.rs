//! Direct convolution vectorized over **output channels**, for planes too
//! small for the positions-in-lanes kernel ([`super::direct`]) and many
//! output channels: SqueezeNet's 3×3 48 → 192 and 64 → 256 on 13×13, where
//! im2col's GEMM ran at 65–70% of the FMA peak and the direct kernel, whose
//! rows are as wide as a padded input row (15 for 13 outputs), at 63%.
//!
//! The input is copied once per call into zero-padded planes; output
//! position `q` (any stride or dilation) reads tap `(ki, kj)` at
//! `start(q) + ki·dh·wp + kj·dw` of each plane. A step keeps 6 positions ×
//! 4 vectors of 16 output channels in AVX-512 registers; per input channel
//! and tap it loads the 64 channels' weights (packed once, [`Packed`], and
//! kept by the session) and multiplies them by each position's broadcast
//! input: 4 loads and 6 broadcasts per 24 multiply-adds, only real output
//! positions computed. The accumulators are written channel by channel into
//! the output, then the [`Epilogue`] runs over the unit's tile while it is in
//! cache. Units (64 channels × a run of positions) run in parallel on the
//! current rayon pool when the work is large enough.

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::{Epilogue, Tile};
use super::gemm::OutPtr;
use super::im2col;
use rayon::prelude::*;

/// Output channels a step holds: 4 vectors of 16.
const BLOCK: usize = 64;
/// Output positions a step holds.
const POSITIONS: usize = 6;
/// Positions per unit of work (a multiple of [`POSITIONS`]).
const UNIT_POSITIONS: usize = 48;
/// Below this many multiply-adds the units run on one thread.
const PARALLEL_MACS: usize = 1 << 18;

/// Whether `p` goes this way: AVX-512, one group, a kernel wider than
/// 1×1, at least 64 output channels, a plane under 256 positions (larger
/// ones are the positions kernel's), and patches of 256 values or more
/// (each position's 64 results are stored one by one, paid back over the
/// patch) but under [`LONG_PATCH`](super::direct::LONG_PATCH): a block's
/// weights, read again for every run of positions, then outgrow L2 (the
/// zoo's 512→512 3×3/2 on 16², `probe_conv` timing both routes in turn:
/// 54 here vs 122 GFLOP/s by im2col). A strided 1×1 kernel goes to
/// im2col too, whose copy is then a quarter of the input (ResNet's
/// strided shortcut 512→1024 on 28²: 56 vs 112).
pub(crate) fn suits(p: &Conv2d, (oh, ow): (usize, usize)) -> bool {
    let patch = p.c_in * p.kh * p.kw;
    cpu::avx512()
        && cpu::direct_conv() != Some(false)
        && p.group == 1
        && p.kh * p.kw > 1
        && p.c_out >= BLOCK
        && oh * ow < 256
        && (256..super::direct::LONG_PATCH).contains(&patch)
}

/// The weight laid out for the kernel: per block of 64 output channels,
/// per input channel and tap, the 64 channels' values (0 past `c_out`).
pub struct Packed {
    /// The weight shape it was made for: `c_out`, `c_in`, `kh`, `kw`.
    shape: (usize, usize, usize, usize),
    data: Vec<f32>,
}

impl Packed {
    /// `weight` (`c_out × c_in × kh × kw`) laid out for `p`.
    pub fn new(weight: &[f32], p: &Conv2d) -> Packed {
        let patch = p.c_in * p.kh * p.kw;
        let blocks = p.c_out.div_ceil(BLOCK);
        let mut data = vec![0.0f32; blocks * patch * BLOCK];
        for co in 0..p.c_out {
            let (block, lane) = (co / BLOCK, co % BLOCK);
            for (k, &w) in weight[co * patch..][..patch].iter().enumerate() {
                data[(block * patch + k) * BLOCK + lane] = w;
            }
        }
        Packed { shape: (p.c_out, p.c_in, p.kh, p.kw), data }
    }

    /// Whether it was made for a convolution of `p`'s weight shape.
    pub fn fits(&self, p: &Conv2d) -> bool {
        self.shape == (p.c_out, p.c_in, p.kh, p.kw)
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.data.len() * std::mem::size_of::<f32>()) as u64
    }
}

/// `out = epilogue(conv(input, weight))`, NCHW, for a convolution that [`suits`].
pub(crate) fn conv(
    input: &[f32],
    weights: &Packed,
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
) {
    assert!(weights.fits(p) && cpu::avx512(), "channel-vector conv: weights made for another shape, or no AVX-512");
    let plane = oh * ow;
    let (hp, wp) = (p.h + p.pads[0] + p.pads[2], p.w + p.pads[1] + p.pads[3]);
    let patch = p.c_in * p.kh * p.kw;
    let mut scratch = SCRATCH.with(|s| s.take());
    let Scratch { padded, starts, taps } = &mut scratch;
    // where each output position's window starts in a padded plane, and each tap's offset from there
    starts.clear();
    starts.extend((0..oh).flat_map(|oy| (0..ow).map(move |ox| (oy * p.stride[0] * wp + ox * p.stride[1]) as u32)));
    taps.clear();
    taps.extend((0..p.kh).flat_map(|ki| (0..p.kw).map(move |kj| ki * p.dilation[0] * wp + kj * p.dilation[1])));
    let blocks = p.c_out.div_ceil(BLOCK);
    let runs = plane.div_ceil(UNIT_POSITIONS);
    let parallel = rayon::current_num_threads() > 1 && p.c_out * plane * patch >= PARALLEL_MACS;
    for image in 0..p.n {
        pad(&input[image * p.c_in * p.h * p.w..][..p.c_in * p.h * p.w], p, (hp, wp), padded);
        let dst = OutPtr(out[image * p.c_out * plane..][..p.c_out * plane].as_mut_ptr());
        let ep = ep.shifted(0, image * p.c_out * plane);
        let unit = |u: usize| {
            let (block, run) = (u / runs, u % runs);
            let first = run * UNIT_POSITIONS;
            let count = UNIT_POSITIONS.min(plane - first);
            let channels = BLOCK.min(p.c_out - block * BLOCK);
            let s = Step {
                padded,
                plane_len: hp * wp,
                c_in: p.c_in,
                weights: &weights.data[block * patch * BLOCK..][..patch * BLOCK],
                taps,
                starts: &starts[first..first + count],
            };
            // SAFETY: units write disjoint (channel block, position run)
            // rectangles of the output, each inside it; AVX-512 was checked.
            unsafe {
                let to = dst.at(block * BLOCK * plane + first);
                run_unit(&s, to, plane, channels);
                let tile = Tile { row0: block * BLOCK, rows: channels, col0: first, cols: count, n: plane };
                ep.apply_tile(dst.at(0), &tile);
            }
        };
        if parallel {
            (0..blocks * runs).into_par_iter().for_each(unit);
        } else {
            (0..blocks * runs).for_each(unit);
        }
    }
    SCRATCH.with(|s| s.set(scratch));
}

/// The zero-padded copy of every input channel (`hp × wp` each).
fn pad(src: &[f32], p: &Conv2d, (hp, wp): (usize, usize), padded: &mut Vec<f32>) {
    padded.clear();
    padded.resize(p.c_in * hp * wp, 0.0);
    let hw = p.h * p.w;
    for (c, plane) in padded.chunks_exact_mut(hp * wp).enumerate() {
        im2col::pad_channel(&src[c * hw..(c + 1) * hw], p, (hp, wp), plane);
    }
}

/// What a unit reads: the padded planes, one block's packed weights, the
/// taps' offsets and its positions' window starts.
struct Step<'a> {
    padded: &'a [f32],
    plane_len: usize,
    c_in: usize,
    weights: &'a [f32],
    taps: &'a [usize],
    starts: &'a [u32],
}

/// The unit's positions, 6 at a time, then the rest one at a time.
///
/// # Safety
/// AVX-512F; `to` is the block's first channel at the unit's first
/// position, `channels` rows `plane` apart, each holding the unit's positions.
#[cfg(target_arch = "x86_64")]
unsafe fn run_unit(s: &Step, to: *mut f32, plane: usize, channels: usize) {
    let reach = s.taps.iter().max().copied().unwrap_or(0);
    assert!(
        s.starts.iter().all(|&q| q as usize + reach < s.plane_len),
        "channel-vector conv: a tap reads past its plane"
    );
    assert!(s.padded.len() >= s.c_in * s.plane_len && s.weights.len() >= s.c_in * s.taps.len() * BLOCK);
    let full = s.starts.len() / POSITIONS * POSITIONS;
    for q in (0..full).step_by(POSITIONS) {
        step_avx512::<POSITIONS>(s, q, to, plane, channels);
    }
    for q in full..s.starts.len() {
        step_avx512::<1>(s, q, to, plane, channels);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn run_unit(_: &Step, _: *mut f32, _: usize, _: usize) {
    unreachable!("channel-vector conv: `suits` takes AVX-512 only")
}

/// `P` positions from the unit's position `q`: 4 vectors of 16 channels each.
///
/// # Safety
/// As for [`run_unit`]; `q + P` positions exist.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn step_avx512<const P: usize>(s: &Step, q: usize, to: *mut f32, plane: usize, channels: usize) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); 4]; P];
    let starts: [usize; P] = std::array::from_fn(|p| s.starts[q + p] as usize);
    for ci in 0..s.c_in {
        let x = s.padded.as_ptr().add(ci * s.plane_len);
        let mut w = s.weights.as_ptr().add(ci * s.taps.len() * BLOCK);
        for &tap in s.taps {
            let wv = [
                _mm512_loadu_ps(w),
                _mm512_loadu_ps(w.add(16)),
                _mm512_loadu_ps(w.add(32)),
                _mm512_loadu_ps(w.add(48)),
            ];
            w = w.add(BLOCK);
            let xt = x.add(tap);
            for (lanes, &start) in acc.iter_mut().zip(&starts) {
                let b = _mm512_set1_ps(*xt.add(start));
                for (a, &wj) in lanes.iter_mut().zip(&wv) {
                    *a = _mm512_fmadd_ps(wj, b, *a);
                }
            }
        }
    }
    // each position's 64 channels, channel by channel (rows `plane` apart)
    let mut values = [0.0f32; BLOCK];
    for (p, lanes) in acc.iter().enumerate() {
        for (j, &a) in lanes.iter().enumerate() {
            _mm512_storeu_ps(values.as_mut_ptr().add(16 * j), a);
        }
        for (c, &v) in values.iter().enumerate().take(channels) {
            *to.add(c * plane + q + p) = v;
        }
    }
}

/// The buffers of one call, kept by the thread between calls.
#[derive(Default)]
struct Scratch {
    padded: Vec<f32>,
    starts: Vec<u32>,
    taps: Vec<usize>,
}

thread_local! {
    /// The scratch of the last channel-vector convolution this thread ran.
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}
