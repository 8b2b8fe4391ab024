//! 3×3 convolution at stride 1 by Winograd's minimal filtering F(2×2, 3×3):
//! each 2×2 block of outputs (a *tile*) comes from the 4×4 input patch
//! under it as `Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`, 16 multiplications per
//! tile and channel pair where the direct product takes 36. Summed over
//! input channels, the 16 element-wise products become 16 matrix
//! products, `M_ξ = U_ξ · V_ξ` (`c_out × c_in` times `c_in × tiles`), which
//! run on [`sgemm`]:
//! - the **filter transform** `U = G g Gᵀ` of every (output, input) channel
//!   pair, laid out `c_out × 16 × c_in` ([`Filters`]): once per session for
//!   a constant weight (the caller keeps it), else once per call;
//! - the **input transform** `V = Bᵀ d B` of every tile of a band of tile
//!   rows, per input channel (`c_in × 16 × tiles`): each input row is first
//!   split into its even and odd columns, so that both halves of the
//!   transform are contiguous vector arithmetic;
//! - the **output transform** `Aᵀ M A` per output channel, written into the
//!   output plane (the last row or column of tiles clipped to an odd
//!   output), then the epilogue over the band's rows while they are in cache.
//!
//! Bands of tile rows keep `V` and `M` to a few MiB, whatever the image
//! size. Input transforms run in parallel over channels, the 16 products
//! over the current rayon pool, output transforms in parallel over output
//! channels. The transforms' coefficients are 0, ±1 and ½, so the result
//! differs from the direct sum only by rounding, a few ulps more of it
//! (`suits` keeps small channel counts, where the direct route is as
//! fast, on im2col).

use super::conv::Conv2d;
use super::epilogue::{Epilogue, Tile};
use super::gemm::{sgemm, MatRef};
use rayon::prelude::*;

/// Fewest input and output channels for this route.
const MIN_CHANNELS: usize = 16;
/// Fewest tiles per image for this route: with fewer (a 7×7 output has 16)
/// the 16 products are too thin, and im2col's one product is faster.
const MIN_TILES: usize = 32;
/// Below this many tiles, the input channels must be at least [`WIDE_INPUT`]:
/// with few tiles and few channels (SqueezeNet's 64 → 256 over 13×13)
/// the transforms cost what the products save.
const MANY_TILES: usize = 128;
/// See [`MANY_TILES`].
const WIDE_INPUT: usize = 128;
/// Floats of `V` and `M` together that a band aims at (4 MiB).
const BAND_FLOATS: usize = 1 << 20;
/// Below this many floats of work a stage runs on one thread.
const PARALLEL_FLOATS: usize = 1 << 14;

/// Whether a convolution goes this way: 3×3, stride 1, no dilation, one
/// group, enough channels and tiles, and `DIAMOND_WINOGRAD` is not `off`.
pub(crate) fn suits(p: &Conv2d, (oh, ow): (usize, usize)) -> bool {
    super::cpu::winograd()
        && p.kh == 3
        && p.kw == 3
        && p.stride == [1, 1]
        && p.dilation == [1, 1]
        && p.group == 1
        && p.c_in >= MIN_CHANNELS
        && p.c_out >= MIN_CHANNELS
        && {
            let tiles = oh.div_ceil(2) * ow.div_ceil(2);
            tiles >= MIN_TILES && (tiles >= MANY_TILES || p.c_in >= WIDE_INPUT)
        }
}

/// The transformed filters of one convolution (`c_out × 16 × c_in`), which
/// a caller keeps between calls when the weight is constant.
pub struct Filters {
    c_in: usize,
    c_out: usize,
    u: Vec<f32>,
}

impl Filters {
    /// The transform of `weight` (`c_out × c_in × 3 × 3`).
    pub fn new(weight: &[f32], c_in: usize, c_out: usize) -> Filters {
        let mut u = vec![0f32; c_out * 16 * c_in];
        transform_filters(weight, c_in, c_out, &mut u);
        Filters { c_in, c_out, u }
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.u.len() * std::mem::size_of::<f32>()) as u64
    }

    /// Whether they were made for a `c_in → c_out` convolution.
    pub fn fits(&self, c_in: usize, c_out: usize) -> bool {
        (self.c_in, self.c_out) == (c_in, c_out)
    }
}

/// `out = epilogue(conv(input, weight))` for a convolution that [`suits`],
/// its weight transformed into `filters`; the buffers were checked by the caller.
pub(crate) fn conv(
    input: &[f32],
    filters: &Filters,
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
) {
    let (c, k) = (p.c_in, p.c_out);
    assert!(filters.fits(c, k), "winograd: filters of {}→{} for a {c}→{k} convolution", filters.c_in, filters.c_out);
    let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
    let rows_per_band = (BAND_FLOATS / (16 * (c + k) * tw)).clamp(1, th);
    let most = rows_per_band * tw;
    let mut scratch = SCRATCH.with(|s| s.take());
    scratch.v.resize(c * 16 * most, 0.0);
    scratch.m.resize(16 * k * most, 0.0);
    let Scratch { v, m } = &mut scratch;
    let u = &filters.u;
    let plane = oh * ow;
    let geometry = Geometry { h: p.h, w: p.w, top: p.pads[0], left: p.pads[1], oh, ow, tw };
    for image in 0..p.n {
        let src = &input[image * c * p.h * p.w..][..c * p.h * p.w];
        let dst = &mut out[image * k * plane..][..k * plane];
        for first in (0..th).step_by(rows_per_band) {
            let band = Band { first, rows: rows_per_band.min(th - first) };
            let tiles = band.rows * tw;
            transform_inputs(src, &geometry, &band, &mut v[..c * 16 * tiles]);
            multiply(u, &v[..c * 16 * tiles], c, k, tiles, &mut m[..16 * k * tiles]);
            transform_outputs(&m[..16 * k * tiles], &geometry, &band, k, dst, ep, image * k * plane);
        }
    }
    SCRATCH.with(|s| s.set(scratch));
}

/// Buffers kept by a thread between calls: the transformed inputs and products.
#[derive(Default)]
struct Scratch {
    v: Vec<f32>,
    m: Vec<f32>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Scratch> = std::cell::Cell::new(Scratch::default());
}

/// The sizes the transforms need.
struct Geometry {
    h: usize,
    w: usize,
    top: usize,
    left: usize,
    oh: usize,
    ow: usize,
    /// Tiles per row.
    tw: usize,
}

/// Tile rows `first..first + rows`.
struct Band {
    first: usize,
    rows: usize,
}

/// Runs `each(scratch, index, chunk)` over the `len`-float chunks of
/// `data`, in parallel when `work` is large; `scratch` is a buffer of the
/// thread's, made once per rayon job rather than once per chunk.
fn chunks(data: &mut [f32], len: usize, work: usize, each: impl Fn(&mut Vec<f32>, usize, &mut [f32]) + Sync + Send) {
    if rayon::current_num_threads() > 1 && work >= PARALLEL_FLOATS {
        data.par_chunks_mut(len).enumerate().for_each_init(Vec::new, |scratch, (i, d)| each(scratch, i, d));
    } else {
        let mut scratch = Vec::new();
        data.chunks_mut(len).enumerate().for_each(|(i, d)| each(&mut scratch, i, d));
    }
}

/// `u[k][ξ][c] = (G g Gᵀ)[ξ]` for the 3×3 filter `g` of output channel
/// `k`, input channel `c`; `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]`.
fn transform_filters(weight: &[f32], c: usize, k: usize, u: &mut [f32]) {
    chunks(&mut u[..k * 16 * c], 16 * c, k * c * 16, |_, oc, dst| {
        for ic in 0..c {
            let g = &weight[(oc * c + ic) * 9..][..9];
            // G g: four rows of three
            let mut a = [[0f32; 3]; 4];
            for j in 0..3 {
                let (g0, g1, g2) = (g[j], g[3 + j], g[6 + j]);
                a[0][j] = g0;
                a[1][j] = 0.5 * (g0 + g1 + g2);
                a[2][j] = 0.5 * (g0 - g1 + g2);
                a[3][j] = g2;
            }
            for (i, row) in a.iter().enumerate() {
                let [r0, r1, r2] = *row;
                let values = [r0, 0.5 * (r0 + r1 + r2), 0.5 * (r0 - r1 + r2), r2];
                for (j, &x) in values.iter().enumerate() {
                    dst[(i * 4 + j) * c + ic] = x;
                }
            }
        }
    });
}

/// `v[c][ξ][t] = (Bᵀ d B)[ξ]` for the 4×4 input patch `d` of channel `c`
/// under tile `t` of the band (zero outside the input);
/// `Bᵀ = [[1, 0, −1, 0], [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0, −1]]`.
fn transform_inputs(src: &[f32], g: &Geometry, band: &Band, v: &mut [f32]) {
    let tiles = band.rows * g.tw;
    let plane = g.h * g.w;
    chunks(v, 16 * tiles, v.len(), |scratch, ch, dst| {
        transform_channel(&src[ch * plane..][..plane], g, band, scratch, dst);
    });
}

fn transform_channel(src: &[f32], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { transform_channel_avx2(src, g, band, scratch, dst) };
    }
    transform_channel_body(src, g, band, scratch, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn transform_channel_avx2(src: &[f32], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    transform_channel_body(src, g, band, scratch, dst)
}

#[inline(always)]
fn transform_channel_body(src: &[f32], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    let tw = g.tw;
    let tiles = band.rows * tw;
    let lines = 2 * band.rows + 2;
    // every part is written before it is read: no zeroing
    scratch.resize(lines * 4 * tw + (2 * tw + 2) + 2 * (tw + 1), 0.0);
    // per input line of the band: (d B) for each tile, four values, as four rows of tw
    let (rows_b, rest) = scratch.split_at_mut(lines * 4 * tw);
    let (padded, rest) = rest.split_at_mut(2 * tw + 2);
    let (even, odd) = rest.split_at_mut(tw + 1);
    for (line, out) in rows_b.chunks_exact_mut(4 * tw).enumerate() {
        let iy = (2 * band.first + line) as isize - g.top as isize;
        padded.fill(0.0);
        if iy >= 0 && (iy as usize) < g.h {
            let row = &src[iy as usize * g.w..][..g.w];
            let take = g.w.min(padded.len() - g.left);
            padded[g.left..g.left + take].copy_from_slice(&row[..take]);
        }
        for (x, pair) in padded.chunks_exact(2).enumerate() {
            even[x] = pair[0];
            odd[x] = pair[1];
        }
        let (e0, e1) = (&even[..tw], &even[1..]);
        let (o0, o1) = (&odd[..tw], &odd[1..]);
        let (b0, rest) = out.split_at_mut(tw);
        let (b1, rest) = rest.split_at_mut(tw);
        let (b2, b3) = rest.split_at_mut(tw);
        for x in 0..tw {
            b0[x] = e0[x] - e1[x];
            b1[x] = o0[x] + e1[x];
            b2[x] = e1[x] - o0[x];
            b3[x] = o0[x] - o1[x];
        }
    }
    for q in 0..band.rows {
        let line = |r: usize, j: usize| &rows_b[((2 * q + r) * 4 + j) * tw..][..tw];
        for j in 0..4 {
            let (d0, d1, d2, d3) = (line(0, j), line(1, j), line(2, j), line(3, j));
            let at = |i: usize| (i * 4 + j) * tiles + q * tw;
            let v0 = &mut dst[at(0)..][..tw];
            for x in 0..tw {
                v0[x] = d0[x] - d2[x];
            }
            let v1 = &mut dst[at(1)..][..tw];
            for x in 0..tw {
                v1[x] = d1[x] + d2[x];
            }
            let v2 = &mut dst[at(2)..][..tw];
            for x in 0..tw {
                v2[x] = d2[x] - d1[x];
            }
            let v3 = &mut dst[at(3)..][..tw];
            for x in 0..tw {
                v3[x] = d1[x] - d3[x];
            }
        }
    }
}

/// `m[ξ] = u[·][ξ][·] · v[·][ξ][·]` (`k × c` times `c × tiles`) for the 16 ξ.
fn multiply(u: &[f32], v: &[f32], c: usize, k: usize, tiles: usize, m: &mut [f32]) {
    let one = |xi: usize, dst: &mut [f32]| {
        let a = MatRef { data: &u[xi * c..], rows: k, cols: c, row_stride: (16 * c) as isize, col_stride: 1 };
        let b =
            MatRef { data: &v[xi * tiles..], rows: c, cols: tiles, row_stride: (16 * tiles) as isize, col_stride: 1 };
        sgemm(a, b, dst, &Epilogue::default());
    };
    if rayon::current_num_threads() > 1 {
        m.par_chunks_mut(k * tiles).enumerate().for_each(|(xi, dst)| one(xi, dst));
    } else {
        m.chunks_mut(k * tiles).enumerate().for_each(|(xi, dst)| one(xi, dst));
    }
}

/// Writes `Aᵀ m A` of every tile of the band into the output planes
/// (`A ᵀ = [[1, 1, 1, 0], [0, 1, −1, −1]]`), then the epilogue over the
/// band's rows; `offset` is the image's first output element.
#[allow(clippy::too_many_arguments)]
fn transform_outputs(m: &[f32], g: &Geometry, band: &Band, k: usize, out: &mut [f32], ep: &Epilogue, offset: usize) {
    let plane = g.oh * g.ow;
    let tiles = band.rows * g.tw;
    let first_row = 2 * band.first;
    let last_row = (2 * (band.first + band.rows)).min(g.oh);
    chunks(out, plane, 16 * k * tiles, |scratch, oc, dst| {
        let at = |xi: usize| &m[(xi * k + oc) * tiles..][..tiles];
        let ms: [&[f32]; 16] = std::array::from_fn(at);
        output_channel(&ms, g, band, scratch, dst);
        let tile = Tile { row0: 0, rows: 1, col0: first_row * g.ow, cols: (last_row - first_row) * g.ow, n: plane };
        // SAFETY: `dst` is this channel's whole plane, borrowed mutably; the tile lies inside it.
        unsafe { ep.shifted(oc, offset + oc * plane).apply_tile(dst.as_mut_ptr(), &tile) };
    });
}

fn output_channel(ms: &[&[f32]; 16], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if super::cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { output_channel_avx2(ms, g, band, scratch, dst) };
    }
    output_channel_body(ms, g, band, scratch, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn output_channel_avx2(ms: &[&[f32]; 16], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    output_channel_body(ms, g, band, scratch, dst)
}

#[inline(always)]
fn output_channel_body(ms: &[&[f32]; 16], g: &Geometry, band: &Band, scratch: &mut Vec<f32>, dst: &mut [f32]) {
    let tw = g.tw;
    // per tile row: (Aᵀ m) as eight rows of tw, then the 2×2 outputs as four (y[a][b]);
    // every part is written before it is read
    scratch.resize(12 * tw, 0.0);
    let (s, y) = scratch.split_at_mut(8 * tw);
    for q in 0..band.rows {
        let m = |xi: usize| &ms[xi][q * tw..][..tw];
        // s[a][j] = (Aᵀ m)[a][j]
        for j in 0..4 {
            let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
            let (s0, s1) = s.split_at_mut(4 * tw);
            let (s0, s1) = (&mut s0[j * tw..][..tw], &mut s1[j * tw..][..tw]);
            for x in 0..tw {
                s0[x] = m0[x] + m1[x] + m2[x];
                s1[x] = m1[x] - m2[x] - m3[x];
            }
        }
        for a in 0..2 {
            let row = |j: usize| &s[(a * 4 + j) * tw..][..tw];
            let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
            let (y0, y1) = y[a * 2 * tw..][..2 * tw].split_at_mut(tw);
            for x in 0..tw {
                y0[x] = r0[x] + r1[x] + r2[x];
                y1[x] = r1[x] - r2[x] - r3[x];
            }
        }
        for a in 0..2 {
            let oy = 2 * (band.first + q) + a;
            if oy >= g.oh {
                break;
            }
            let (y0, y1) = y[a * 2 * tw..][..2 * tw].split_at(tw);
            let row = &mut dst[oy * g.ow..][..g.ow];
            let pairs = g.ow / 2;
            for (x, pair) in row[..2 * pairs].chunks_exact_mut(2).enumerate() {
                pair[0] = y0[x];
                pair[1] = y1[x];
            }
            if g.ow % 2 == 1 {
                row[g.ow - 1] = y0[pairs];
            }
        }
    }
}
