//! Convolutions whose output planes hold a few positions (under one
//! vector: the last stages of a ResNet export on a 32×32 image, 2×2 and
//! 1×1 planes of 32–64 channels), vectorized over **output channels**
//! instead of positions. There im2col's GEMM has N = 1 to 15 columns and
//! the `gemm` crate's set-up dominates (a 3×3 32 → 32 layer on a 2×2 plane
//! took ~4 µs for 37k multiply-adds), and the direct kernel's vectors of
//! positions are mostly empty.
//!
//! The weight is laid out transposed, `patch × c_out/group` with each row
//! padded to a whole number of vectors ([`Transposed`]; a session keeps it
//! for a constant weight), the input's patches come from
//! [`im2col`](super::im2col) (`patch × plane`), and each step keeps up to
//! four positions × four vectors of output channels in registers: per
//! patch row, four weight vectors times four broadcast inputs.

use super::conv::Conv2d;
use super::cpu;
use super::epilogue::Epilogue;
use super::im2col;

/// Output channels per register: the vector width of the widest instance.
const LANES: usize = 16;
/// Vectors of output channels per step.
const BLOCK: usize = 4;
/// Output positions per step.
const POSITIONS: usize = 4;

/// Whether the route suits `p`: a plane under one vector of positions and
/// enough output channels per group to fill a vector (8 of the AVX2
/// instance's). `DIAMOND_DIRECT=off` sends these to im2col too.
pub(crate) fn suits(p: &Conv2d, (oh, ow): (usize, usize)) -> bool {
    cpu::direct_conv() != Some(false) && oh * ow < LANES && p.group_out() >= 8
}

/// A weight `c_out × c_in/group × kh × kw` laid out per group as
/// `patch × stride` (row `k` holds the group's output channels' values at
/// patch position `k`, zero past `c_out/group`).
pub struct Transposed {
    /// The convolution's weight shape it was made for: `c_out`, `patch`, groups.
    shape: (usize, usize, usize),
    /// Row length: `c_out/group` rounded up to whole steps of channels.
    stride: usize,
    data: Vec<f32>,
}

impl Transposed {
    /// The layout of `weight` for `p`.
    pub fn new(weight: &[f32], p: &Conv2d) -> Transposed {
        let (cog, patch) = (p.group_out(), p.group_in() * p.kh * p.kw);
        let stride = cog.div_ceil(LANES * BLOCK) * LANES * BLOCK;
        let mut data = vec![0.0f32; p.group * patch * stride];
        for g in 0..p.group {
            let dst = &mut data[g * patch * stride..][..patch * stride];
            for co in 0..cog {
                let row = &weight[(g * cog + co) * patch..][..patch];
                for (k, &w) in row.iter().enumerate() {
                    dst[k * stride + co] = w;
                }
            }
        }
        Transposed { shape: (p.c_out, patch, p.group), stride, data }
    }

    /// Whether it was made for a convolution of `p`'s weight shape.
    pub fn fits(&self, p: &Conv2d) -> bool {
        self.shape == (p.c_out, p.group_in() * p.kh * p.kw, p.group)
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.data.len() * std::mem::size_of::<f32>()) as u64
    }
}

/// `out = epilogue(conv(input, weight))` for a convolution that [`suits`],
/// the weight laid out as `weights`; the buffers were checked by the caller.
pub(crate) fn conv(
    input: &[f32],
    weights: &Transposed,
    p: &Conv2d,
    (oh, ow): (usize, usize),
    out: &mut [f32],
    ep: &Epilogue,
) {
    assert!(weights.fits(p), "small-plane conv: the weight layout was made for another shape");
    let plane = oh * ow;
    let (cig, cog) = (p.group_in(), p.group_out());
    let patch = cig * p.kh * p.kw;
    let pointwise = p.is_pointwise();
    let mut columns = COLUMNS.with(|c| c.take());
    columns.resize(patch * plane, 0.0);
    let mut block = [0.0f32; LANES * BLOCK * POSITIONS];
    for image in 0..p.n {
        for g in 0..p.group {
            let src = &input[(image * p.c_in + g * cig) * p.h * p.w..][..cig * p.h * p.w];
            let cols: &[f32] = if pointwise {
                src
            } else {
                im2col::fill(src, p, (oh, ow), &mut columns);
                &columns
            };
            let wt = &weights.data[g * patch * weights.stride..][..patch * weights.stride];
            let offset = (image * p.c_out + g * cog) * plane;
            let dst = &mut out[offset..offset + cog * plane];
            for first in (0..cog).step_by(LANES * BLOCK) {
                let count = (LANES * BLOCK).min(cog - first);
                for q0 in (0..plane).step_by(POSITIONS) {
                    let positions = POSITIONS.min(plane - q0);
                    let at = Step { cols, plane, patch, wt, stride: weights.stride, first, q0, positions };
                    step(&at, &mut block);
                    for q in 0..positions {
                        for c in 0..count {
                            dst[(first + c) * plane + q0 + q] = block[q * LANES * BLOCK + c];
                        }
                    }
                }
            }
            ep.shifted(g * cog, offset).apply(dst, cog, plane);
        }
    }
    COLUMNS.with(|c| c.set(columns));
}

thread_local! {
    /// The im2col columns of the last small-plane convolution this thread ran.
    static COLUMNS: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// One step: output channels `first..first + LANES·BLOCK` at positions
/// `q0..q0 + positions`, from the patches `cols` (`patch × plane`) and the
/// group's transposed weight `wt` (`patch × stride`).
struct Step<'a> {
    cols: &'a [f32],
    plane: usize,
    patch: usize,
    wt: &'a [f32],
    stride: usize,
    first: usize,
    q0: usize,
    positions: usize,
}

/// Computes `s` into `block` (position-major, `LANES·BLOCK` values each).
fn step(s: &Step, block: &mut [f32; LANES * BLOCK * POSITIONS]) {
    let Step { cols, plane, patch, wt, stride, first, q0, positions } = *s;
    assert!(cols.len() >= patch * plane && q0 + positions <= plane && positions <= POSITIONS);
    assert!(wt.len() >= patch * stride && first + LANES * BLOCK <= stride);
    #[cfg(target_arch = "x86_64")]
    {
        if cpu::avx512() {
            // SAFETY: AVX-512 is present; the sizes were checked above.
            return unsafe { step_avx512(s, block) };
        }
        if cpu::avx2_fma() {
            // SAFETY: AVX2 and FMA are present; the sizes were checked above.
            return unsafe { step_avx2(s, block) };
        }
    }
    // portable: the plain sums, which the compiler vectorizes for the baseline
    block.fill(0.0);
    for k in 0..patch {
        let w = &wt[k * stride + first..][..LANES * BLOCK];
        for q in 0..positions {
            let x = cols[k * plane + q0 + q];
            for (acc, &wc) in block[q * LANES * BLOCK..][..LANES * BLOCK].iter_mut().zip(w) {
                *acc += wc * x;
            }
        }
    }
}

/// One instance of [`step`] per vector instruction set, named by its
/// intrinsics: `POSITIONS × BLOCK` accumulators of `$lanes` channels, the
/// step's `LANES · BLOCK` channels in `$parts` passes.
macro_rules! vector_step {
    ($(#[$doc:meta])* $name:ident, $features:literal, $lanes:literal, $parts:literal,
     $zero:ident, $load:ident, $splat:ident, $fma:ident, $store:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// The processor has the instance's features; the sizes as [`step`] checks them.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(s: &Step, block: &mut [f32; LANES * BLOCK * POSITIONS]) {
            use std::arch::x86_64::*;
            let Step { cols, plane, patch, wt, stride, first, q0, positions } = *s;
            const PART: usize = LANES * BLOCK / $parts;
            let x = cols.as_ptr().add(q0);
            for part in 0..$parts {
                let w = wt.as_ptr().add(first + part * PART);
                let mut acc = [[$zero(); BLOCK]; POSITIONS];
                for k in 0..patch {
                    let mut wv = [$zero(); BLOCK];
                    for (v, wv) in wv.iter_mut().enumerate() {
                        *wv = $load(w.add(k * stride + v * $lanes));
                    }
                    for (q, lanes) in acc.iter_mut().enumerate().take(positions) {
                        let xq = $splat(*x.add(k * plane + q));
                        for (a, &wv) in lanes.iter_mut().zip(&wv) {
                            *a = $fma(wv, xq, *a);
                        }
                    }
                }
                for (q, lanes) in acc.iter().enumerate() {
                    for (v, a) in lanes.iter().enumerate() {
                        $store(block.as_mut_ptr().add(q * LANES * BLOCK + part * PART + v * $lanes), *a);
                    }
                }
            }
        }
    };
}

vector_step!(
    /// [`step`] on AVX-512: 16 channels a register, one pass.
    step_avx512, "avx512f,avx2,fma", 16, 1,
    _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps
);

vector_step!(
    /// [`step`] on AVX2: 8 channels a register, two passes (16 registers
    /// hold `POSITIONS × BLOCK` accumulators, not twice that).
    step_avx2, "avx2,fma", 8, 2,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps
);
