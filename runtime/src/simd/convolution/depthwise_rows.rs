//! Depthwise convolution on AVX-512, one plane at a time, sixteen output
//! columns in a vector: the MobileNet / EfficientNet / MnasNet layers on
//! planes too large for the channels-in-lanes kernel
//! ([`depthwise_lanes`](super::depthwise_lanes)), at column stride 1 or 2.
//!
//! Each input plane is first copied into a zero-padded buffer, its columns
//! split by the column stride into **phases** (at stride 2: the even
//! padded columns, then the odd ones, deinterleaved sixteen at a time with
//! two permutes), so that tap `(ki, kj)` of output columns `ox…ox+15` reads
//! one contiguous vector: phase `kj mod sw`, from column `ox + kj div sw`,
//! of padded row `oy·sh + ki`. An output row is then `kh·kw` broadcast
//! multiply-adds per vector, up to four vectors at once (more work per
//! broadcast), the last vector of a row stored under a mask. The plane's
//! [`Epilogue`] runs while the plane is in cache; planes run in parallel
//! on the current rayon pool when there is enough work ([`each_plane`](super::depthwise::each_plane)).
//!
//! The blocked route this replaces for these shapes kept eight channels
//! in an AVX2 register and spent its time interleaving planes
//! (`fixtures/bench/conv_routes.py`, one thread: MobileNet-v3's 3×3/2 on
//! 64 channels of 112² 10 → 24 GFLOP/s; see [`suits`]).

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::Epilogue;

/// Output columns per vector.
const LANES: usize = 16;

/// The largest kernel side taken (a 7×7 holds 49 taps).
const MAX_SIDE: usize = 7;

/// Whether `p` goes this way: AVX-512, depthwise, no dilation, column
/// stride 1 or 2, kernels up to 7×7, and output rows of at least half a
/// vector (narrower ones waste most of each vector).
pub(crate) fn suits(p: &Conv2d, (_, ow): (usize, usize)) -> bool {
    cpu::avx512()
        && cpu::direct_conv().is_none()
        && p.is_depthwise()
        && p.dilation == [1, 1]
        && matches!(p.stride[1], 1 | 2)
        && p.kh <= MAX_SIDE
        && p.kw <= MAX_SIDE
        && ow >= LANES / 2
}

/// The padded, phase-split plane's layout: `rows` padded rows, each of
/// `phases` phase rows of `width` values.
#[derive(Clone, Copy)]
struct Layout {
    rows: usize,
    phases: usize,
    width: usize,
}

impl Layout {
    fn of(p: &Conv2d, (oh, ow): (usize, usize)) -> Layout {
        let sw = p.stride[1];
        // every vector of every tap stays inside its phase row
        let width = ow.div_ceil(LANES) * LANES + (p.kw - 1) / sw + 1;
        // at stride 2 the deinterleave reads whole pairs of vectors of the padded row
        let width = if sw == 2 { width.div_ceil(LANES) * LANES } else { width };
        Layout { rows: (oh - 1) * p.stride[0] + p.kh, phases: sw, width }
    }

    fn len(&self) -> usize {
        self.rows * self.phases * self.width
    }
}

/// `out = epilogue(depthwise(input, weight))` over `n × c` planes of
/// `oh × ow`, for a convolution that [`suits`].
pub(crate) fn conv(
    input: &[f32],
    weight: &[f32],
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
) {
    assert!(suits(p, (oh, ow)), "depthwise rows: {p:?} does not suit the kernel");
    let plane = oh * ow;
    let (channels, taps) = (p.c_out, p.kh * p.kw);
    let layout = Layout::of(p, (oh, ow));
    let offsets = tap_offsets(p, &layout);
    let one = |index: usize, dst: &mut [f32]| {
        let c = index % channels;
        let src = &input[index * p.h * p.w..(index + 1) * p.h * p.w];
        let mut padded = PADDED.with(|b| b.take());
        padded.resize(layout.len(), 0.0);
        // SAFETY: `suits` checked AVX-512; the buffers have the layout's sizes.
        let out = Plane { oh, ow, row_step: p.stride[0] * layout.phases * layout.width, dst: dst.as_mut_ptr() };
        unsafe {
            pad_plane(src, p, &layout, &mut padded);
            plane_rows(&padded, &weight[c * taps..(c + 1) * taps], &offsets, &out);
        }
        PADDED.with(|b| b.set(padded));
        ep.shifted(c, index * plane).apply(dst, 1, plane);
    };
    let out = &mut out[..p.n * channels * plane];
    super::depthwise::each_plane(out, plane, one);
}

thread_local! {
    /// The padded plane of the last depthwise convolution this thread ran.
    static PADDED: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Copies `src` (one `h × w` plane) into `padded`: zeros around it, the
/// columns split into the layout's phases.
///
/// # Safety
/// The processor has AVX-512 F; `padded` holds `layout.len()` values.
#[target_feature(enable = "avx512f")]
unsafe fn pad_plane(src: &[f32], p: &Conv2d, layout: &Layout, padded: &mut [f32]) {
    use std::arch::x86_64::*;
    let (top, left) = (p.pads[0], p.pads[1]);
    let row_len = layout.phases * layout.width;
    let copied = p.w.min(row_len.saturating_sub(left));
    // even columns to the first phase row, odd ones to the second
    let even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    let odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (r, dst) in padded.chunks_exact_mut(row_len).take(layout.rows).enumerate() {
        let iy = r.wrapping_sub(top);
        if iy >= p.h || copied == 0 {
            dst.fill(0.0);
            continue;
        }
        let row = &src[iy * p.w..][..copied];
        if layout.phases == 1 {
            dst[..left].fill(0.0);
            dst[left..left + copied].copy_from_slice(row);
            dst[left + copied..].fill(0.0);
            continue;
        }
        // padded column x holds row[x - left] where that lies in the row, else 0: sixteen
        // columns from x are one load, masked to the columns inside the row (a masked-off
        // lane reads nothing, so its address may lie outside the row)
        let columns = |x: usize| {
            let lo = left.saturating_sub(x).min(LANES);
            let hi = (left + copied).saturating_sub(x).min(LANES);
            let mask = if lo < hi { (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16 } else { 0 };
            _mm512_maskz_loadu_ps(mask, row.as_ptr().wrapping_add(x).wrapping_sub(left))
        };
        let (evens, odds) = dst.split_at_mut(layout.width);
        for v in 0..layout.width / LANES {
            let x = 2 * LANES * v;
            let (a, b) = (columns(x), columns(x + LANES));
            _mm512_storeu_ps(evens.as_mut_ptr().add(LANES * v), _mm512_permutex2var_ps(a, even, b));
            _mm512_storeu_ps(odds.as_mut_ptr().add(LANES * v), _mm512_permutex2var_ps(a, odd, b));
        }
    }
}

/// Where each tap reads, from the first padded row of an output row:
/// padded row `ki`, phase `kj mod sw`, column `kj div sw`.
fn tap_offsets(p: &Conv2d, layout: &Layout) -> Vec<usize> {
    let sw = layout.phases;
    let row = sw * layout.width;
    (0..p.kh).flat_map(|ki| (0..p.kw).map(move |kj| ki * row + (kj % sw) * layout.width + kj / sw)).collect()
}

/// Every output row of one plane from its padded, phase-split input, in
/// blocks of rows × vectors that keep four accumulators or more apart
/// (one vector alone would wait on each multiply-add's latency).
///
/// # Safety
/// The processor has AVX-512 F; `padded` has the layout; `dst` holds `oh × ow`.
#[target_feature(enable = "avx512f")]
unsafe fn plane_rows(padded: &[f32], taps: &[f32], offsets: &[usize], plane: &Plane) {
    let Plane { oh, .. } = *plane;
    let vectors = plane.ow.div_ceil(LANES);
    let rows_at_once = match vectors {
        1 => 4,
        2 | 3 => 2,
        _ => 1,
    };
    let mut oy = 0;
    while oy + rows_at_once <= oh {
        match rows_at_once {
            4 => row_block::<4>(padded, taps, offsets, plane, oy, vectors),
            2 => row_block::<2>(padded, taps, offsets, plane, oy, vectors),
            _ => row_block::<1>(padded, taps, offsets, plane, oy, vectors),
        }
        oy += rows_at_once;
    }
    while oy < oh {
        row_block::<1>(padded, taps, offsets, plane, oy, vectors);
        oy += 1;
    }
}

/// One plane's output geometry and destination.
struct Plane {
    oh: usize,
    ow: usize,
    /// Padded values between the first padded rows of consecutive output rows.
    row_step: usize,
    dst: *mut f32,
}

/// Output rows `oy..oy + R`, every vector of them.
///
/// # Safety
/// As [`plane_rows`].
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn row_block<const R: usize>(
    padded: &[f32],
    taps: &[f32],
    offsets: &[usize],
    plane: &Plane,
    oy: usize,
    vectors: usize,
) {
    let mut v = 0;
    if R == 1 {
        while v + 4 <= vectors {
            step::<R, 4>(padded, taps, offsets, plane, oy, v * LANES);
            v += 4;
        }
    }
    if R <= 2 {
        while v + 2 <= vectors {
            step::<R, 2>(padded, taps, offsets, plane, oy, v * LANES);
            v += 2;
        }
    }
    while v < vectors {
        step::<R, 1>(padded, taps, offsets, plane, oy, v * LANES);
        v += 1;
    }
}

/// `V` vectors of `R` output rows from row `oy`, column `ox`: every tap's
/// weight broadcast and multiplied into them; a row's last vector is
/// stored under a mask.
///
/// # Safety
/// As [`plane_rows`]; rows `oy..oy + R` and the vectors exist.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn step<const R: usize, const V: usize>(
    padded: &[f32],
    taps: &[f32],
    offsets: &[usize],
    plane: &Plane,
    oy: usize,
    ox: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    let base = padded.as_ptr().add(oy * plane.row_step + ox);
    for (&t, &off) in taps.iter().zip(offsets) {
        let w = _mm512_set1_ps(t);
        for (r, row) in acc.iter_mut().enumerate() {
            let from = base.add(r * plane.row_step + off);
            for (j, a) in row.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(w, _mm512_loadu_ps(from.add(j * LANES)), *a);
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        let to = plane.dst.add((oy + r) * plane.ow);
        for (j, a) in row.iter().enumerate() {
            let at = ox + j * LANES;
            if at + LANES <= plane.ow {
                _mm512_storeu_ps(to.add(at), *a);
            } else {
                let mask: __mmask16 = ((1u32 << (plane.ow - at)) - 1) as __mmask16;
                _mm512_mask_storeu_ps(to.add(at), mask, *a);
            }
        }
    }
}
