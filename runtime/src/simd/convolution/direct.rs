//! Direct convolution for thin outputs: few output channels per group or
//! small planes, where im2col's GEMM runs at a tenth of the machine's
//! peak (a ResNet export's 7×7/2 stem, 3 → 8 channels on a 32×32 image:
//! M = 8 rows of a 147 × 256 product, after copying the 147 × 256 columns).
//!
//! Each input channel is split into its **stride phases**: phase `(a, b)`
//! holds the zero-padded input's rows `a, a + sh, a + 2·sh, …` and columns
//! `b, b + sw, …`, rows of `wq` values. An output row is computed `wq`
//! positions wide (the last `wq − ow` are thrown away), so that output
//! position `q = oy·wq + ox` meets, through tap `(ki, kj)`, the value at
//! `q + shift(ki, kj)` of one phase: every tap reads a **contiguous**
//! vector of consecutive outputs, whatever the stride. The kernel keeps
//! `C` output channels × `V` vectors of positions in registers, and for
//! each input channel and tap loads `V` vectors and multiplies them by the
//! tap's `C` weights (broadcast) — no column matrix, and all the work in
//! multiply-adds. The result goes through the [`Epilogue`] channel block by
//! channel block, while it is in cache.
//!
//! The body is generic over the vector width and the way `a·b + c` is
//! computed ([`Arith`]), compiled for AVX-512, AVX2+FMA and the portable
//! baseline; channel blocks (of each image and group) run in parallel on
//! the current rayon pool when the work is large enough.

use super::conv::Conv2d;
use super::cpu;
use super::direct_store::{lanes_table, InRegisters, Lanes, Placed, Sink, WideRows, MAX_BLOCK};
use super::epilogue::{Epilogue, Tile};
use super::gemm::OutPtr;
use super::math::{Arith, Split};
use rayon::prelude::*;

/// Below this many multiply-adds the blocks run on one thread.
const PARALLEL_MACS: usize = 1 << 18;

/// The largest column stride the direct kernel takes (its phase splitter's table).
const MAX_STRIDE: usize = 8;

/// Below this many values the phase planes are written on one thread.
const PARALLEL_SPLIT: usize = 1 << 13;

/// Whether the direct kernel is the faster route for `p` (not depthwise,
/// not Winograd's): few output channels per group, where im2col's GEMM
/// has a sliver of rows, or planes large enough that its columns outgrow
/// the cache. Pointwise convolutions keep their plain GEMM unless they
/// have few output channels. From `cargo bench -p diamond-runtime --bench
/// simd_gemm` with `DIAMOND_DIRECT=on|off` (share of the FMA peak, one
/// thread, AVX-512): ResNet-18 export stem 3→8 on 32² 40% vs 14%,
/// 3×3 8→8 on 8² 22% vs 8.5%, 3×3 64→64 on 56² 89% vs 70%, densenet
/// 128→32 on 7² 36% vs 29%; im2col wins with many output channels on
/// small planes (512→512 on 7² 39% vs 65%, 64→256 on 13² 62% vs 69%),
/// on planes under a vector (16→32 on 2² 3.7% vs 6.3%), and pointwise
/// layers, which need no copy at all for their GEMM (1×1 256→64 62% vs
/// 79%; EfficientNet's squeeze-excitation 1×1s on 1×1 planes made the
/// export 20% slower). Depthwise convolutions come here at unit stride on
/// outputs of 16 columns and more (3×3 on 112²: 23.5 → 40.5 GFLOP/s); the
/// others stay on the depthwise kernels' blocked route, narrow ones
/// (ConvNeXt's 7×7 on 8²: 6.3 µs there, 8.4–9.7 here) and, since that
/// route sums in intrinsics, column-strided ones too (EfficientNet's
/// 3×3/2 on 48 channels of 16²: 14.0 there against 8.7 GFLOP/s here,
/// MobileNet's 3×3/2 on 144 of 56²: 22.4 against 20.8). `DIAMOND_DIRECT=on|off` forces the choice either way
/// (for benchmarks and tests).
pub(crate) fn suits(p: &Conv2d, (oh, ow): (usize, usize)) -> bool {
    if p.stride[1] > MAX_STRIDE {
        return false;
    }
    if let Some(forced) = cpu::direct_conv() {
        return forced;
    }
    // A dilated kernel's reach widens every row the kernel computes by
    // (kw − 1)·dilation / stride wasted positions: past half the output's
    // width (DeepLab's dilation-12 3×3 on a 20-wide map: 24 of 44) the
    // im2col product is faster (95 → 15 ms on that layer).
    let reach = (p.kw - 1) * p.dilation[1] / p.stride[1].max(1);
    if p.dilation[1] > 1 && reach * 2 > ow {
        return false;
    }
    let (cog, plane) = (p.group_out(), oh * ow);
    if p.is_depthwise() {
        // the depthwise kernels' blocked route is faster on narrow or column-strided outputs
        return cpu::avx2_fma() && plane >= 16 && p.stride[1] == 1 && ow >= super::im2col::NARROW;
    }
    if !cpu::avx2_fma() || p.is_pointwise() || plane < 16 || !(cog <= 32 || plane >= 256) {
        return false;
    }
    // Undilated wide kernels waste positions the same way: a 1×7 on a
    // 17-wide map computes rows of 23 for 17 (Inception-v3's 160→192 1×7
    // on 17², `probe_conv` timing both routes in turn: 87 vs 117
    // GFLOP/s by im2col); with few output channels im2col's copy costs more.
    if reach * 3 > ow && cog > 32 {
        return false;
    }
    // Each block of output channels reads every input channel of its
    // group over the whole plane, so the input is read once per block:
    // from L2 while the image-group's input fits there, else from L3 or
    // memory, where im2col's GEMM, which packs what it reads, wins once
    // there are enough output channels to pay for its copy (the zoo's
    // strided convolutions, `probe_conv` timing both routes in turn:
    // ResNet-50's 3×3/2 128→128 on 56² 98 vs 120 GFLOP/s, RetinaNet's
    // 256→256 on 80² 65 vs 114, FCN's dilated 256→256 on 40² 63 vs 106).
    // Short patches keep the direct kernel whatever the input (the stems:
    // 3→64 7×7/2 on 640² 85 vs 61, where the GEMM's depth is 147).
    let patch = p.group_in() * p.kh * p.kw;
    let input_bytes = p.group_in() * p.h * p.w * std::mem::size_of::<f32>();
    let rereads_fit = cog <= 32 || patch < SHORT_PATCH || input_bytes <= CACHED_INPUT;
    // A 1×1 kernel at a stride reads each input value for one tap: the
    // direct kernel's phase split copies the whole input to use a quarter
    // of it, and its patch is too short to hide that (ResNet's strided
    // shortcuts, 1024→2048 on 14²: 72 vs 121).
    let strided_pointwise = p.kh == 1 && p.kw == 1;
    // Long patches (512 input channels of a 3×3) outgrow L2 in the
    // kernel's inner loop: 512→512 3×3/2 on 16² 65 vs 104.
    rereads_fit && !strided_pointwise && patch < LONG_PATCH
}

/// Input bytes of one image-group that stay in L2 while each block of
/// output channels reads them again (L2 is 512 KiB–2 MiB a core on the
/// machines this runs on).
const CACHED_INPUT: usize = 1 << 20;

/// Patches shorter than this keep the direct kernel: im2col's GEMM runs
/// far from its peak at such depths.
const SHORT_PATCH: usize = 256;

/// Patches of this length and more go to im2col, from this kernel and
/// from [`channel_vector`](super::channel_vector)'s.
pub(crate) const LONG_PATCH: usize = 3072;

/// The layout of one image-group's phase planes and of the wide output.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    /// Strides along height, width: there are `sh · sw` phases.
    sh: usize,
    sw: usize,
    /// A phase plane's row length: the wide output's row length too.
    wq: usize,
    /// A phase plane's rows holding input.
    hq: usize,
    /// Values per phase plane, tail of zeros included: a vector read at
    /// any wide position of the output, shifted by any tap, stays inside.
    plane_len: usize,
}

impl Geometry {
    fn of(p: &Conv2d, (oh, ow): (usize, usize), lanes: usize) -> Geometry {
        let [sh, sw] = p.stride;
        let [dh, dw] = p.dilation;
        let hq = oh + (p.kh - 1) * dh / sh;
        let wq = ow + (p.kw - 1) * dw / sw;
        let max_shift = (hq - oh) * wq + (wq - ow);
        Geometry { sh, sw, wq, hq, plane_len: oh * wq + lanes + max_shift }
    }

    fn phases(&self) -> usize {
        self.sh * self.sw
    }
}

/// What a kernel call reads: one image-group's phase planes (`cig`
/// channels), one block's packed weights, the tap table and the layout.
#[derive(Clone, Copy)]
struct Operands<'a> {
    src: &'a [f32],
    packed: &'a [f32],
    taps: &'a [(usize, usize)],
    g: &'a Geometry,
    cig: usize,
}

/// What one kernel call computes: `vectors` vectors of wide output
/// positions from position `start`, into rows of `vectors · L` values.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    vectors: usize,
}

/// Writes into `taps` (cleared first), per tap `(ki, kj)`, row-major: the
/// phase it reads and where, in that phase, output 0's value lies.
fn tap_table(p: &Conv2d, g: &Geometry, taps: &mut Vec<(usize, usize)>) {
    let [dh, dw] = p.dilation;
    taps.clear();
    for ki in 0..p.kh {
        for kj in 0..p.kw {
            let (y, x) = (ki * dh, kj * dw);
            taps.push(((y % g.sh) * g.sw + x % g.sw, (y / g.sh) * g.wq + x / g.sw));
        }
    }
}

/// Writes the phase planes of `channel` (`h × w`) into `dst` (`sh · sw`
/// planes of `plane_len`), compiled for the instruction set that runs.
fn split_phases(isa: Isa, channel: &[f32], p: &Conv2d, g: &Geometry, dst: &mut [f32]) {
    match isa {
        // SAFETY: the processor has the features (checked by `cpu` before `Isa` was chosen).
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { split_phases_avx512(channel, p, g, dst) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { split_phases_avx2(channel, p, g, dst) },
        Isa::Portable => split_phases_body(channel, p, g, dst),
    }
}

/// On AVX-512, a column stride of 2 splits each input row into both column
/// phases at once: 32 values loaded, evens and odds picked by two permutes,
/// the row's ends masked ([`split_pairs_avx512`]); other strides as the body.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn split_phases_avx512(channel: &[f32], p: &Conv2d, g: &Geometry, dst: &mut [f32]) {
    if g.sw != 2 {
        return split_phases_body(channel, p, g, dst);
    }
    let runs = column_runs(p, g);
    zero_padding(p, g, &runs, dst);
    // the phase that input column 0 lands in, and the one column 1 lands in
    let even = p.pads[1] % 2;
    let odd = 1 - even;
    let ((_, ce, ne), (_, co, no)) = (runs[even], runs[odd]);
    // Whole vectors may be stored when every column lands (no input column
    // past the last phase column): the lanes past a row's end are then the
    // zeros loaded past the input row, written over the phase row's right
    // padding and the next row's start (written after it), or into the
    // plane's tail of at least 16 zeros. Masked stores are slow on AMD's
    // processors (most of this function's time on 16-column rows).
    let whole = ne == p.w.div_ceil(2) && no == p.w / 2;
    for (line, phase_row) in rows_of(channel, p, g) {
        let to_even = dst[phase_row + even * g.plane_len + ce..].as_mut_ptr();
        let to_odd = dst[phase_row + odd * g.plane_len + co..].as_mut_ptr();
        split_pairs_avx512(line, (to_even, ne), (to_odd, no), whole);
    }
}

/// `even[k] = line[2k]` for `k < ne`, `odd[k] = line[2k + 1]` for `k < no`;
/// with `whole`, in whole vectors of 16 (zeros past the line's end).
///
/// # Safety
/// AVX-512F; `even` and `odd` hold `ne` and `no` values — with `whole`,
/// those rounded up to a multiple of 16 —, `2·ne − 1` and `2·no` are at
/// most `line.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn split_pairs_avx512(line: &[f32], (even, ne): (*mut f32, usize), (odd, no): (*mut f32, usize), whole: bool) {
    use std::arch::x86_64::*;
    debug_assert!(2 * ne <= line.len() + 1 && 2 * no <= line.len());
    let pick_even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let pick_odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let mask = |n: usize| if n >= 16 { 0xffff } else { ((1u32 << n) - 1) as u16 };
    let w = line.len();
    let mut k = 0;
    while k < ne.max(no) {
        let at = 2 * k;
        let lo = _mm512_maskz_loadu_ps(mask(w - at), line.as_ptr().add(at));
        let hi = _mm512_maskz_loadu_ps(
            mask(w.saturating_sub(at + 16)),
            line.as_ptr().add(at + 16).min(line.as_ptr().add(w)),
        );
        let (evens, odds) = (_mm512_permutex2var_ps(lo, pick_even, hi), _mm512_permutex2var_ps(lo, pick_odd, hi));
        if whole {
            _mm512_storeu_ps(even.add(k), evens);
            _mm512_storeu_ps(odd.add(k), odds);
        } else {
            if k < ne {
                _mm512_mask_storeu_ps(even.add(k), mask(ne - k), evens);
            }
            if k < no {
                _mm512_mask_storeu_ps(odd.add(k), mask(no - k), odds);
            }
        }
        k += 16;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn split_phases_avx2(channel: &[f32], p: &Conv2d, g: &Geometry, dst: &mut [f32]) {
    split_phases_body(channel, p, g, dst)
}

/// Input row by input row: each lands in one phase row of each column
/// phase (the padding stays zero). What a row's columns do is worked out
/// once (divisions per row were most of the time on small planes).
#[inline(always)]
fn split_phases_body(channel: &[f32], p: &Conv2d, g: &Geometry, dst: &mut [f32]) {
    let runs = column_runs(p, g);
    zero_padding(p, g, &runs, dst);
    let sw = g.sw.min(MAX_STRIDE);
    for (line, phase_row) in rows_of(channel, p, g) {
        for (b, &(x0, c0, count)) in runs[..sw].iter().enumerate() {
            if count == 0 {
                continue;
            }
            let row = &mut dst[phase_row + b * g.plane_len + c0..][..count];
            match g.sw {
                1 => row.copy_from_slice(&line[x0..x0 + count]),
                2 => every_other(row, &line[x0..x0 + 2 * count - 1]),
                step => row.iter_mut().zip(line[x0..].iter().step_by(step)).for_each(|(o, &v)| *o = v),
            }
        }
    }
}

/// Zeroes what the input rows will not write in `dst`'s phase planes: the
/// padding rows and columns and the columns past the input. Planes of long
/// rows get only those (SqueezeNet's unpadded first convolution had 600 KB
/// of zeros written where none was needed); planes of rows shorter than
/// [`ROW_BY_ROW`] are zeroed whole, where a fill per row's padding cost
/// more than the plane (ResNet-18 export's 3×3 convolutions on 8²: 3.3 →
/// 4.7 µs a step). A plane's tail past its `hq` rows is left as it is:
/// only lanes that are thrown away (positions past the band or the wide
/// rows' extra columns) read it.
#[inline(always)]
fn zero_padding(p: &Conv2d, g: &Geometry, runs: &[(usize, usize, usize); MAX_STRIDE], dst: &mut [f32]) {
    if g.wq < ROW_BY_ROW {
        return dst.fill(0.0);
    }
    let top = p.pads[0];
    for a in 0..g.sh {
        for b in 0..g.sw {
            let plane = &mut dst[(a * g.sw + b) * g.plane_len..][..g.plane_len];
            let (_, c0, count) = if b < MAX_STRIDE { runs[b] } else { (0, 0, 0) };
            for (r, row) in plane.chunks_exact_mut(g.wq).take(g.hq).enumerate() {
                // the input row landing in phase row `r` of row phase `a`, if any
                let y = (r * g.sh + a).checked_sub(top).filter(|&y| y < p.h);
                if y.is_some() && count > 0 {
                    row[..c0].fill(0.0);
                    row[c0 + count..].fill(0.0);
                } else {
                    row.fill(0.0);
                }
            }
        }
    }
}

/// The shortest phase rows whose padding [`zero_padding`] zeroes row by row.
const ROW_BY_ROW: usize = 64;

/// Per column phase `b`: the first input column landing in it, that
/// column's place in the phase row, and how many land (0: none).
#[inline(always)]
fn column_runs(p: &Conv2d, g: &Geometry) -> [(usize, usize, usize); MAX_STRIDE] {
    let left = p.pads[1];
    let mut runs = [(0usize, 0usize, 0usize); MAX_STRIDE];
    for (b, run) in runs.iter_mut().enumerate().take(g.sw.min(MAX_STRIDE)) {
        let x0 = (b + g.sw - left % g.sw) % g.sw;
        let c0 = (x0 + left) / g.sw;
        if x0 < p.w && c0 < g.wq {
            *run = (x0, c0, (p.w - x0).div_ceil(g.sw).min(g.wq - c0));
        }
    }
    runs
}

/// The input rows that land in a phase row, each with where its phase row
/// starts in the row phase's first plane (`a · sw` planes in).
#[inline(always)]
fn rows_of<'a>(channel: &'a [f32], p: &Conv2d, g: &Geometry) -> impl Iterator<Item = (&'a [f32], usize)> {
    let (sh, sw, wq, hq, plane_len) = (g.sh, g.sw, g.wq, g.hq, g.plane_len);
    let top = p.pads[0];
    channel.chunks_exact(p.w).take(p.h).enumerate().map_while(move |(y, line)| {
        let (a, r) = ((y + top) % sh, (y + top) / sh);
        (r < hq).then_some((line, a * sw * plane_len + r * wq))
    })
}

/// `dst[i] = src[2·i]` (`src` holds `2·len − 1` values): pairs, so that
/// the loop vectorizes (an iterator stepping by 2 ran one float at a time).
#[inline(always)]
fn every_other(dst: &mut [f32], src: &[f32]) {
    let Some(last) = dst.len().checked_sub(1) else { return };
    dst[..last].iter_mut().zip(src.chunks_exact(2)).for_each(|(o, pair)| *o = pair[0]);
    dst[last] = src[2 * last];
}

/// The weights of output channels `first..first + C` (of one group) laid
/// out for the kernel: per input channel and tap, `C` consecutive values
/// (0 for channels past the group's last), appended to `dst`.
fn pack_weights(weight: &[f32], patch: usize, first: usize, count: usize, block: usize, dst: &mut Vec<f32>) {
    let base = dst.len();
    dst.resize(base + patch * block, 0.0);
    for c in 0..count {
        let row = &weight[(first + c) * patch..][..patch];
        for (k, &w) in row.iter().enumerate() {
            dst[base + k * block + c] = w;
        }
    }
}

/// The weight laid out for the kernel (`pack_weights`, per group and
/// block of output channels, blocks as wide as the instance that runs
/// takes), made once and kept by a caller between calls when the weight
/// is constant (`conv::Prepared::Direct`): packing on every call took
/// 40 µs of SqueezeNet's 3×3 32→128 on 27² (0.54 ms on one thread), on
/// one thread whatever the pool.
pub struct Packed {
    /// What it was made for: `c_out`, patch, groups, block.
    shape: (usize, usize, usize, usize),
    data: Vec<f32>,
}

impl Packed {
    /// `weight` (`c_out × c_in/group × kh × kw`) laid out for `p`.
    pub fn new(weight: &[f32], p: &Conv2d) -> Packed {
        let shape = Packed::shape_for(p);
        let (cog, patch, block) = (p.group_out(), shape.1, shape.3);
        let blocks = cog.div_ceil(block);
        let mut data = Vec::with_capacity(p.group * blocks * patch * block);
        for grp in 0..p.group {
            for b in 0..blocks {
                let first = b * block;
                pack_weights(&weight[grp * cog * patch..], patch, first, block.min(cog - first), block, &mut data);
            }
        }
        Packed { shape, data }
    }

    /// Whether it was made for `p`'s weight shape and this process's instance.
    pub fn fits(&self, p: &Conv2d) -> bool {
        self.shape == Packed::shape_for(p)
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.data.len() * std::mem::size_of::<f32>()) as u64
    }

    fn shape_for(p: &Conv2d) -> (usize, usize, usize, usize) {
        (p.c_out, p.group_in() * p.kh * p.kw, p.group, block(p.group_out() == 1))
    }
}

/// Output channels per kernel step of the instance [`conv`] runs.
fn block(single: bool) -> usize {
    if single {
        return 1;
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx512() {
        return 8;
    }
    4
}

/// `out = epilogue(conv(input, weight))`, NCHW, the weight [`Packed`] for `p`.
pub(crate) fn conv(input: &[f32], weight: &Packed, p: &Conv2d, hw: (usize, usize), out: &mut [f32], ep: &Epilogue) {
    assert!(weight.fits(p), "direct conv: weights packed for {:?}, not for {p:?}", weight.shape);
    // One output channel per group (depthwise): one accumulator row, more vectors per step.
    let single = p.group_out() == 1;
    #[cfg(target_arch = "x86_64")]
    if cpu::avx512() {
        return match single {
            true => run::<16, 1, 6>(input, weight, p, hw, out, ep, Isa::Avx512),
            false => run::<16, 8, 3>(input, weight, p, hw, out, ep, Isa::Avx512),
        };
    }
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        return match single {
            true => run::<8, 1, 6>(input, weight, p, hw, out, ep, Isa::Avx2),
            false => run::<8, 4, 3>(input, weight, p, hw, out, ep, Isa::Avx2),
        };
    }
    match single {
        true => run::<4, 1, 4>(input, weight, p, hw, out, ep, Isa::Portable),
        false => run::<4, 4, 2>(input, weight, p, hw, out, ep, Isa::Portable),
    }
}

/// Which compiled instance of the kernel runs.
#[derive(Clone, Copy)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

/// The convolution with `L`-wide vectors, `C` channels × `V` vectors per
/// kernel step; `packed` is the weight laid out in blocks of `C` channels.
///
/// The work is cut into units of (image, group, block of `C` output
/// channels, band of output rows); bands are only cut when there are too
/// few blocks to keep the pool's threads busy (one image of 8 channels is
/// one block).
fn run<const L: usize, const C: usize, const V: usize>(
    input: &[f32],
    packed: &Packed,
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
    isa: Isa,
) {
    let g = Geometry::of(p, (oh, ow), L);
    let Scratch { mut phases, mut taps, mut lanes } = SCRATCH.with(|b| b.take());
    tap_table(p, &g, &mut taps);
    let (cig, cog) = (p.group_in(), p.group_out());
    let plane = oh * ow;
    let patch = cig * p.kh * p.kw;
    let per_channel = g.phases() * g.plane_len;
    let blocks = cog.div_ceil(C);
    let macs = p.n * p.c_out * plane * patch;
    let threads = rayon::current_num_threads();
    let parallel = macs >= PARALLEL_MACS && threads > 1;
    let units = p.n * p.group * blocks;
    let bands = if parallel { (4 * threads).div_ceil(units).min(oh) } else { 1 };
    let rows_per_band = oh.div_ceil(bands);
    let bands = oh.div_ceil(rows_per_band);
    // A unit that alone reads its input channels (one block, one band:
    // depthwise, few output channels) splits them itself, just before its
    // kernel reads them from cache; otherwise every image-group's phases
    // are written first, in input channel order.
    let own_phases = blocks == 1 && bands == 1;
    let hw_in = p.h * p.w;
    let split = |(c, dst): (usize, &mut [f32])| split_phases(isa, &input[c * hw_in..(c + 1) * hw_in], p, &g, dst);
    if !own_phases {
        phases.resize(p.n * p.c_in * per_channel, 0.0);
        if phases.len() >= PARALLEL_SPLIT && threads > 1 {
            phases.par_chunks_exact_mut(per_channel).enumerate().for_each(split);
        } else {
            phases.chunks_exact_mut(per_channel).enumerate().for_each(split);
        }
    }
    // `block` and the instances `conv` picks must agree
    assert_eq!(packed.shape.3, C, "direct conv: weights packed in blocks of {}, the kernel takes {C}", packed.shape.3);
    let packed = &packed.data[..];
    let out = OutPtr(out[..p.n * p.c_out * plane].as_mut_ptr());
    // AVX-512 stores a unit's results into the output itself (see `direct_store`)
    #[cfg(target_arch = "x86_64")]
    let placed = matches!(isa, Isa::Avx512) && C <= MAX_BLOCK && L == 16;
    #[cfg(not(target_arch = "x86_64"))]
    let placed = false;
    // one lanes table per band, `band_vectors` apart (the last band may have fewer rows)
    let band_vectors = (rows_per_band * g.wq).div_ceil(L);
    lanes.clear();
    if placed {
        for band in 0..bands {
            let rows = rows_per_band.min(oh - band * rows_per_band);
            lanes.resize(band * band_vectors, Lanes::default());
            lanes_table((rows * g.wq).div_ceil(L), rows, ow, g.wq, &mut lanes);
        }
    }
    let one = |UnitScratch { wide, local }: &mut UnitScratch, unit: usize| {
        let (index, band) = (unit / bands, unit % bands);
        let (ig, b) = (index / blocks, index % blocks);
        let (image, grp) = (ig / p.group, ig % p.group);
        let (first, count) = (b * C, C.min(cog - b * C));
        let (r0, r1) = (band * rows_per_band, ((band + 1) * rows_per_band).min(oh));
        let span = Span { start: r0 * g.wq, vectors: ((r1 - r0) * g.wq).div_ceil(L) };
        let first_input = image * p.c_in + grp * cig;
        let src = if own_phases {
            local.resize(cig * per_channel, 0.0);
            let channels = local.chunks_exact_mut(per_channel).enumerate();
            channels.for_each(|(c, dst)| split((first_input + c, dst)));
            &local[..]
        } else {
            &phases[first_input * per_channel..][..cig * per_channel]
        };
        let weights = &packed[(grp * blocks + b) * patch * C..][..patch * C];
        let operands = Operands { src, packed: weights, taps: &taps, g: &g, cig };
        let channel = grp * cog + first;
        let offset = (image * p.c_out + channel) * plane;
        let tile = Tile { row0: 0, rows: count, col0: r0 * ow, cols: (r1 - r0) * ow, n: plane };
        let ep = ep.shifted(channel, offset);
        let in_registers = if placed { InRegisters::of(&ep, count) } else { None };
        if let Some(regs) = in_registers {
            let lanes = &lanes[band * band_vectors..][..span.vectors];
            // SAFETY: the band's rows of the block's channels, this unit's own, inside `out`.
            let to = unsafe { out.at(offset + r0 * ow) };
            let placed = Placed { to, plane, count, len: (r1 - r0) * ow, lanes, regs };
            kernel::<L, C, V>(isa, operands, span, &mut Out::Placed(&placed));
            // SAFETY: as above.
            return unsafe { regs.rest(&ep).finish(out.at(offset), &tile) };
        }
        wide.resize(C * span.vectors * L, 0.0);
        kernel::<L, C, V>(isa, operands, span, &mut Out::Wide(wide));
        for c in 0..count {
            let from = &wide[c * span.vectors * L..];
            for oy in r0..r1 {
                let at = (oy - r0) * g.wq;
                // SAFETY: units write disjoint rows of disjoint channels, all inside `out`.
                let to = unsafe { std::slice::from_raw_parts_mut(out.at(offset + c * plane + oy * ow), ow) };
                to.copy_from_slice(&from[at..at + ow]);
            }
        }
        // SAFETY: the tile is this unit's own, inside `out`.
        unsafe { ep.apply_tile(out.at(offset), &tile) };
    };
    // Each unit's accumulator rows and local phases in buffers its thread
    // keeps: fresh ones per call (or per rayon split) were zeroed, and
    // freshly mapped, every time (SqueezeNet's first convolution: 394 KB a unit).
    let run_unit = |unit: usize| {
        let mut scratch = UNIT_SCRATCH.with(|c| c.take());
        one(&mut scratch, unit);
        UNIT_SCRATCH.with(|c| c.set(scratch));
    };
    if parallel {
        (0..units * bands).into_par_iter().for_each(run_unit);
    } else {
        (0..units * bands).for_each(run_unit);
    }
    SCRATCH.with(|b| b.set(Scratch { phases, taps, lanes }));
}

/// The buffers of one direct convolution, kept by the thread between calls for their allocations.
#[derive(Default)]
struct Scratch {
    /// Every image-group's phase planes.
    phases: Vec<f32>,
    /// The [`tap_table`].
    taps: Vec<(usize, usize)>,
    /// Each band's [`lanes_table`], when the kernel stores into the output ([`Placed`]).
    lanes: Vec<Lanes>,
}

thread_local! {
    /// The scratch of the last direct convolution this thread ran.
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
    /// The last unit's buffers on this thread.
    static UNIT_SCRATCH: std::cell::Cell<UnitScratch> = const {
        std::cell::Cell::new(UnitScratch { wide: Vec::new(), local: Vec::new() })
    };
}

/// The buffers of one unit of a direct convolution.
#[derive(Default)]
struct UnitScratch {
    /// The accumulator rows (the wide output), unless the kernel stores into the output itself.
    wide: Vec<f32>,
    /// The unit's own phase planes, when it splits them itself.
    local: Vec<f32>,
}

/// Where a kernel call's results go.
enum Out<'a, 't> {
    /// `C` rows of `span.vectors · L` (the wide output).
    Wide(&'a mut [f32]),
    /// Into the output itself, on AVX-512 ([`Placed`]).
    Placed(&'a Placed<'t>),
}

/// One block of `C` output channels over `span`, into `out`: steps of `V`
/// vectors, then what is left in steps of two and one (a small plane is a
/// vector or two), in the order of the positions (as [`Placed`] needs).
fn kernel<const L: usize, const C: usize, const V: usize>(isa: Isa, o: Operands, span: Span, out: &mut Out) {
    check_sizes::<L, C>(&o, span, out);
    let full = span.vectors / V * V;
    if full > 0 {
        steps::<L, C, V>(isa, o, span, (0, full), out);
    }
    let left = span.vectors - full;
    let pairs = if V > 2 { left / 2 * 2 } else { 0 };
    if pairs > 0 {
        steps::<L, C, 2>(isa, o, span, (full, pairs), out);
    }
    if left > pairs {
        steps::<L, C, 1>(isa, o, span, (full + pairs, left - pairs), out);
    }
}

/// Vectors `first..first + count` of `span`, `V` at a time, on the chosen instance.
fn steps<const L: usize, const C: usize, const V: usize>(
    isa: Isa,
    o: Operands,
    span: Span,
    range: (usize, usize),
    out: &mut Out,
) {
    let row = span.vectors * L;
    // SAFETY (each instance): the processor has the features (checked by
    // `cpu` before `Isa` was chosen); `kernel` checked the sizes.
    match (isa, out) {
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, Out::Wide(wide)) => unsafe {
            kernel_avx512::<L, C, V, _>(o, span, range, &mut WideRows { to: wide.as_mut_ptr(), row })
        },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx512, Out::Placed(placed)) => unsafe { kernel_avx512::<L, C, V, _>(o, span, range, placed) },
        #[cfg(target_arch = "x86_64")]
        (Isa::Avx2, Out::Wide(wide)) => unsafe {
            kernel_avx2::<L, C, V, _>(o, span, range, &mut WideRows { to: wide.as_mut_ptr(), row })
        },
        (Isa::Portable, Out::Wide(wide)) => kernel_body::<Split, L, C, V>(o, span, range, wide),
        (_, Out::Placed(_)) => unreachable!("direct conv: only the AVX-512 kernel stores into the output"),
    }
}

/// One instance of the kernel per vector instruction set: `C × V`
/// accumulators of `$lanes` lanes, named by their intrinsics.
macro_rules! vector_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $lanes:literal, $vector:ty,
     $zero:ident, $load:ident, $splat:ident, $fma:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The processor has the instance's features; the sizes passed [`check_sizes`].
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const L: usize, const C: usize, const V: usize, S: Sink<$vector>>(
            o: Operands,
            span: Span,
            (first, count): (usize, usize),
            sink: &mut S,
        ) {
            use std::arch::x86_64::*;
            let Operands { src, packed, taps, g, cig } = o;
            debug_assert_eq!(L, $lanes);
            debug_assert!(count % V == 0 && first + count <= span.vectors, "direct conv: steps of {V} over {count} vectors");
            let per_channel = g.phases() * g.plane_len;
            for step in (first..first + count).step_by(V) {
                let at = step * L;
                let mut acc = [[$zero(); V]; C];
                for ci in 0..cig {
                    let channel = src.as_ptr().add(ci * per_channel + span.start + at);
                    let mut w = packed.as_ptr().add(ci * taps.len() * C);
                    for &(phase, shift) in taps {
                        let x = channel.add(phase * g.plane_len + shift);
                        let mut xs = [$zero(); V];
                        for (v, xv) in xs.iter_mut().enumerate() {
                            *xv = $load(x.add(v * L));
                        }
                        for lanes in acc.iter_mut() {
                            let wc = $splat(*w);
                            w = w.add(1);
                            for (a, xv) in lanes.iter_mut().zip(xs) {
                                *a = $fma(wc, xv, *a);
                            }
                        }
                    }
                }
                sink.put_step(step, &acc);
            }
        }
    };
}

vector_kernel!(
    /// The kernel on AVX-512: 16 lanes.
    kernel_avx512, "avx512f,avx2,fma", 16, std::arch::x86_64::__m512,
    _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps
);

vector_kernel!(
    /// The kernel on AVX2+FMA: 8 lanes.
    kernel_avx2, "avx2,fma", 8, std::arch::x86_64::__m256,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps
);

/// Panics unless every read and write of the kernel stays inside its
/// buffers: the phase planes hold every vector a tap reads from `span`
/// ([`Geometry::of`] sized their tails for it), the packed weights `C`
/// per input channel and tap, `wide` `C` rows of `span.vectors · L`, a
/// [`Placed`] output a table entry per vector and a bias per channel.
#[inline(always)]
fn check_sizes<const L: usize, const C: usize>(o: &Operands, span: Span, out: &Out) {
    let Operands { src, packed, taps, g, cig } = *o;
    let reach = taps.iter().map(|&(_, shift)| shift).max().unwrap_or(0);
    assert!(reach + span.start + span.vectors * L <= g.plane_len, "direct conv: a tap reads past its phase");
    assert!(taps.iter().all(|&(phase, _)| phase < g.phases()), "direct conv: a tap's phase is out of range");
    assert!(src.len() >= cig * g.phases() * g.plane_len, "direct conv: phases too short");
    assert!(packed.len() >= cig * taps.len() * C, "direct conv: weights too short");
    match out {
        Out::Wide(wide) => assert!(wide.len() >= C * span.vectors * L, "direct conv: output too short"),
        Out::Placed(placed) => {
            assert!(L == 16 && C <= MAX_BLOCK, "direct conv: placed stores are for 16 lanes, {MAX_BLOCK} channels");
            assert!(placed.lanes.len() >= span.vectors, "direct conv: lanes table too short");
            assert!(placed.count <= C, "direct conv: more channels than the block");
        }
    }
}

/// The portable kernel: the same steps on arrays of `L` lanes (the
/// baseline target's vectors), `a·b + c` rounded as [`Arith`] says.
#[inline(always)]
fn kernel_body<A: Arith, const L: usize, const C: usize, const V: usize>(
    o: Operands,
    span: Span,
    (first, count): (usize, usize),
    wide: &mut [f32],
) {
    let Operands { src, packed, taps, g, cig } = o;
    let per_channel = g.phases() * g.plane_len;
    let row = span.vectors * L;
    for step in (first..first + count).step_by(V) {
        let at = step * L;
        let mut acc = [[[0.0f32; L]; V]; C];
        for ci in 0..cig {
            let channel = &src[ci * per_channel..][..per_channel];
            let weights = &packed[ci * taps.len() * C..][..taps.len() * C];
            for (&(phase, shift), w) in taps.iter().zip(weights.chunks_exact(C)) {
                let run = &channel[phase * g.plane_len + shift + span.start + at..][..V * L];
                for (lanes, &wc) in acc.iter_mut().zip(w) {
                    for (a, x) in lanes.iter_mut().zip(run.chunks_exact(L)) {
                        for (a, &x) in a.iter_mut().zip(x) {
                            *a = A::mul_add(wc, x, *a);
                        }
                    }
                }
            }
        }
        for (c, lanes) in acc.iter().enumerate() {
            for (v, x) in lanes.iter().enumerate() {
                wide[c * row + at + v * L..][..L].copy_from_slice(x);
            }
        }
    }
}
