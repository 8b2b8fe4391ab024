//! The per-channel normalizations of CNNs on `f32` planes, in place of the
//! reference kernels (which widen every element to `f64` and run on one
//! thread):
//! - **LRN**: each output plane is its input plane divided by
//!   `(bias + alpha/size · Σ x²)^beta`, the sum over the planes of the
//!   `size` neighbouring channels (clipped at the first and last channel,
//!   `⌊(size−1)/2⌋` before and `⌈(size−1)/2⌉` after, as ONNX defines it).
//!   The sum is accumulated plane by plane in `f32`; the power is exact
//!   arithmetic for the usual exponents (`0.75`: `r·√r` with `r = 1/√t`;
//!   `0.5`, `1`) and `powf` otherwise.
//! - **BatchNormalization** in inference (one output, `training_mode` 0):
//!   `(x − mean)·k + B` per channel, `k = scale/√(var + ε)` worked out once
//!   per channel in `f64`.
//! - **InstanceNormalization**: each image's channel plane by its own mean
//!   and variance (summed in `f64`), then the channel's scale and bias.
//!
//! Planes run in parallel on the current rayon pool when there is enough
//! work; the loops are plain slice arithmetic that the compiler vectorizes,
//! compiled for AVX2 when the processor has it ([`cpu::avx2_fma`]).
//! Other element types, ranks below 3 (LRN) or 2 (BatchNormalization) and
//! training mode return `None`: the node runs on the reference kernels.

use super::contraction::{float_attr, floats, int_attr, sized, Take};
use super::cpu;
use crate::tensor::{Data, Tensor};
use diamond_ir::Node;
use rayon::prelude::*;

/// Below this many output floats a node runs on one thread.
const PARALLEL_FLOATS: usize = 1 << 15;

/// Runs `each(plane index, output plane)` over the `plane`-float planes of
/// `out`, in parallel when there is enough work.
fn planes(out: &mut [f32], plane: usize, each: impl Fn(usize, &mut [f32]) + Sync + Send) {
    if rayon::current_num_threads() > 1 && out.len() >= PARALLEL_FLOATS {
        out.par_chunks_mut(plane).enumerate().for_each(|(p, dst)| each(p, dst));
    } else {
        out.chunks_mut(plane).enumerate().for_each(|(p, dst)| each(p, dst));
    }
}

/// `t^(−beta)` for a positive `t`.
#[derive(Clone, Copy)]
enum Power {
    /// `beta = 0.75`: `r·√r`, `r = 1/√t`.
    ThreeQuarters,
    /// `beta = 0.5`: `1/√t`.
    Half,
    /// `beta = 1`: `1/t`.
    One,
    /// Any other `beta`.
    Other(f32),
}

impl Power {
    fn of(beta: f32) -> Power {
        match beta {
            0.75 => Power::ThreeQuarters,
            0.5 => Power::Half,
            1.0 => Power::One,
            b => Power::Other(b),
        }
    }
}

/// LRN over an `N, C, spatial...` tensor.
/// `take` gives a buffer with room for the given number of floats (a
/// reused allocation, its old values kept); `None` where this kernel does
/// not cover the node.
pub fn lrn(node: &Node, inputs: &[Option<&Tensor>], take: &mut dyn FnMut(usize) -> Vec<f32>) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    let xd = floats(x)?;
    let size = usize::try_from(int_attr(node, "size", 0)?).ok().filter(|&s| s > 0)?;
    let (alpha, beta, bias) =
        (float_attr(node, "alpha", 1e-4)?, float_attr(node, "beta", 0.75)?, float_attr(node, "bias", 1.0)?);
    if x.shape.len() < 3 {
        return None;
    }
    let c = x.shape[1];
    let inner: usize = x.shape[2..].iter().product();
    if inner == 0 || c == 0 || xd.len() != x.shape[0] * c * inner {
        return None;
    }
    let (before, after) = ((size - 1) / 2, (size - 1) - (size - 1) / 2);
    // alpha/size as the reference forms it: in f64, then the sum scaled in f32
    let scale = (f64::from(alpha) / size as f64) as f32;
    let power = Power::of(beta);
    let mut out = sized(take, xd.len());
    planes(&mut out, inner, |p, dst| {
        let (image, ch) = (p / c, p % c);
        let first = ch.saturating_sub(before);
        let last = (ch + after).min(c - 1);
        let at = |j: usize| &xd[(image * c + j) * inner..][..inner];
        lrn_plane(at(ch), (first..=last).map(at), bias, scale, power, dst);
    });
    Tensor::new(x.shape.clone(), Data::F32(out))
}

fn lrn_plane<'a>(
    src: &[f32],
    window: impl Iterator<Item = &'a [f32]>,
    bias: f32,
    scale: f32,
    power: Power,
    dst: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { lrn_plane_avx2(src, window, bias, scale, power, dst) };
    }
    lrn_plane_body(src, window, bias, scale, power, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lrn_plane_avx2<'a>(
    src: &[f32],
    window: impl Iterator<Item = &'a [f32]>,
    bias: f32,
    scale: f32,
    power: Power,
    dst: &mut [f32],
) {
    lrn_plane_body(src, window, bias, scale, power, dst)
}

/// `dst = src / (bias + scale·Σ window²)^beta`, the sum in `dst` first.
#[inline(always)]
fn lrn_plane_body<'a>(
    src: &[f32],
    window: impl Iterator<Item = &'a [f32]>,
    bias: f32,
    scale: f32,
    power: Power,
    dst: &mut [f32],
) {
    dst.fill(0.0);
    for plane in window {
        dst.iter_mut().zip(plane).for_each(|(s, &v)| *s += v * v);
    }
    let base = dst.iter_mut().zip(src);
    match power {
        Power::ThreeQuarters => base.for_each(|(s, &v)| {
            let r = 1.0 / (bias + scale * *s).sqrt();
            *s = v * (r * r.sqrt());
        }),
        Power::Half => base.for_each(|(s, &v)| *s = v / (bias + scale * *s).sqrt()),
        Power::One => base.for_each(|(s, &v)| *s = v / (bias + scale * *s)),
        Power::Other(beta) => base.for_each(|(s, &v)| *s = v * (bias + scale * *s).powf(-beta)),
    }
}

/// BatchNormalization in inference mode over an `N, C, ...` tensor.
/// `take` as for [`lrn`].
pub fn batch_norm(node: &Node, inputs: &[Option<&Tensor>], take: &mut dyn FnMut(usize) -> Vec<f32>) -> Option<Tensor> {
    if int_attr(node, "training_mode", 0)? != 0 || node.outputs.len() > 1 {
        return None;
    }
    let x = inputs.first().copied()??;
    let xd = floats(x)?;
    if x.shape.len() < 2 {
        return None;
    }
    let c = x.shape[1];
    let inner: usize = x.shape[2..].iter().product();
    let channel = |k: usize| -> Option<&[f32]> { floats(inputs.get(k).copied()??).filter(|v| v.len() == c) };
    let (gamma, beta, mean, var) = (channel(1)?, channel(2)?, channel(3)?, channel(4)?);
    let eps = f64::from(float_attr(node, "epsilon", 1e-5)?);
    if inner == 0 || c == 0 || xd.len() != x.shape[0] * c * inner {
        return None;
    }
    let factor: Vec<f32> = (0..c).map(|ch| (f64::from(gamma[ch]) / (f64::from(var[ch]) + eps).sqrt()) as f32).collect();
    let mut out = sized(take, xd.len());
    if inner < SMALL_PLANE {
        affine_rows(xd, c, inner, (mean, &factor, beta), &mut out);
        return Tensor::new(x.shape.clone(), Data::F32(out));
    }
    planes(&mut out, inner, |p, dst| {
        let ch = p % c;
        let src = &xd[p * inner..][..inner];
        affine_plane(src, mean[ch], factor[ch], beta[ch], dst);
    });
    Tensor::new(x.shape.clone(), Data::F32(out))
}

/// Planes shorter than this go by image rows ([`affine_rows`]): one plane per
/// task or per call costs more than its few floats (a BatchNormalization over
/// `[tokens, channels]`, as LeViT's linear layers export, has planes of one).
const SMALL_PLANE: usize = 32;

/// BatchNormalization's `(x − mean)·factor + beta` over each image's row of
/// `c · inner` floats at once, with the per-channel values spread to a row
/// first, so that the loop runs along the row (vectorized) instead of one
/// short plane at a time. Rows go in parallel in chunks of enough work.
fn affine_rows(src: &[f32], c: usize, inner: usize, (mean, factor, beta): (&[f32], &[f32], &[f32]), out: &mut [f32]) {
    let row = c * inner;
    let spread = |v: &[f32]| -> Vec<f32> { v.iter().flat_map(|&x| std::iter::repeat_n(x, inner)).collect() };
    let (mean, factor, beta) = (spread(&mean[..c]), spread(&factor[..c]), spread(&beta[..c]));
    let rows_per_task = PARALLEL_FLOATS.div_ceil(row).max(1);
    let each = |(i, dst): (usize, &mut [f32])| {
        let first = i * rows_per_task * row;
        for (j, d) in dst.chunks_mut(row).enumerate() {
            affine_row(&src[first + j * row..][..row], (&mean, &factor, &beta), d);
        }
    };
    if rayon::current_num_threads() > 1 && out.len() >= 2 * PARALLEL_FLOATS {
        out.par_chunks_mut(rows_per_task * row).enumerate().for_each(each);
    } else {
        out.chunks_mut(rows_per_task * row).enumerate().for_each(each);
    }
}

fn affine_row(src: &[f32], spread: (&[f32], &[f32], &[f32]), dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { affine_row_avx2(src, spread, dst) };
    }
    affine_row_body(src, spread, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn affine_row_avx2(src: &[f32], spread: (&[f32], &[f32], &[f32]), dst: &mut [f32]) {
    affine_row_body(src, spread, dst)
}

/// `dst = (src − mean)·factor + beta`, element by element.
#[inline(always)]
fn affine_row_body(src: &[f32], (mean, factor, beta): (&[f32], &[f32], &[f32]), dst: &mut [f32]) {
    let n = dst.len();
    let (src, mean, factor, beta) = (&src[..n], &mean[..n], &factor[..n], &beta[..n]);
    for i in 0..n {
        dst[i] = (src[i] - mean[i]) * factor[i] + beta[i];
    }
}

fn affine_plane(src: &[f32], mean: f32, factor: f32, shift: f32, dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { affine_plane_avx2(src, mean, factor, shift, dst) };
    }
    affine_plane_body(src, mean, factor, shift, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn affine_plane_avx2(src: &[f32], mean: f32, factor: f32, shift: f32, dst: &mut [f32]) {
    affine_plane_body(src, mean, factor, shift, dst)
}

/// `dst = (src − mean)·factor + shift`.
#[inline(always)]
fn affine_plane_body(src: &[f32], mean: f32, factor: f32, shift: f32, dst: &mut [f32]) {
    dst.iter_mut().zip(src).for_each(|(y, &v)| *y = (v - mean) * factor + shift);
}

/// `InstanceNormalization`: each `(image, channel)` plane normalized by its
/// own mean and variance (summed in `f64`), then `scale[c]·x̂ + B[c]` —
/// what `GroupNorm(1)` and wav2vec2's feature-extractor norm export to.
/// `None` (the reference kernels) for other types, ranks below 3, or a
/// scale or bias that is not one value per channel.
pub(in crate::simd) fn instance_norm(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let (x, scale, bias) = (inputs.first().copied()??, inputs.get(1).copied()??, inputs.get(2).copied()??);
    let (xd, sd, bd) = (floats(x)?, floats(scale)?, floats(bias)?);
    let epsilon = f64::from(float_attr(node, "epsilon", 1e-5)?);
    let (&n, &c) = (x.shape.first()?, x.shape.get(1)?);
    if x.shape.len() < 3 || sd.len() != c || bd.len() != c || n * c == 0 {
        return None;
    }
    let inner: usize = x.shape[2..].iter().product();
    let mut out = sized(take, xd.len());
    if inner == 0 {
        return Tensor::new(x.shape.clone(), Data::F32(out));
    }
    planes(&mut out, inner, |p, dst| {
        let src = &xd[p * inner..][..inner];
        let mean = src.iter().map(|&v| f64::from(v)).sum::<f64>() / inner as f64;
        let var = src.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / inner as f64;
        let ch = p % c;
        let factor = f64::from(sd[ch]) / (var + epsilon).sqrt();
        affine_plane(src, mean as f32, factor as f32, bd[ch], dst);
    });
    Tensor::new(x.shape.clone(), Data::F32(out))
}
