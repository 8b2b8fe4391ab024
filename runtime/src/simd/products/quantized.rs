//! onnxruntime's dynamically quantized operators on the session's own
//! kernels, as `quantize_dynamic` writes them: each float activation goes
//! through **DynamicQuantizeLinear** (its range, one scale and zero point,
//! the values rounded to `u8`), then **MatMulInteger** or
//! **ConvInteger** multiplies it by 8-bit weights into exact `i32` sums
//! ([`igemm`]), and a `Cast` and a `Mul` by the two scales return to float.
//! The reference kernels do all three in `f64`, an element at a time (an
//! OCR model's quantized recognizer: 75% of its time there).
//!
//! A weight that is an initializer, with its zero point, is centered and
//! laid out once ([`Weights`]) and kept by the session from run to run.
//! `DynamicQuantizeLinear` computes as the reference does: the range
//! always holds 0, `scale = (max − min) / 255` in `f32`, the zero point
//! `round(−min / scale)` clamped to `[0, 255]`, each value
//! `round(x / scale) + zero point` saturated, rounding half to even.
//!
//! Covered: `u8` and `i8` operands; MatMulInteger with a 2-D `B` (any
//! batch of `A`), a zero point per tensor or per row of `A` and per tensor
//! or per column of `B`; ConvInteger in 1-D and 2-D with the attributes
//! of `Conv` (no `auto_pad`), a zero point per tensor for `x` and per
//! tensor or per output channel for `w`. Anything else returns `None` and
//! the node runs on the reference kernels.

use super::contraction::conv_geometry;
use super::conv::Conv2d;
use super::cpu;
use super::igemm::{self, PackedB};
use super::recurrent::KeptLstm;
use crate::tensor::{Data, Tensor};
use diamond_ir::Node;
use rayon::prelude::*;

/// Whether these kernels take `node`.
pub(crate) fn covers(node: &Node) -> bool {
    node.domain.as_deref().unwrap_or("").is_empty()
        && matches!(node.op_type.as_deref(), Some("DynamicQuantizeLinear" | "MatMulInteger" | "ConvInteger"))
}

/// What a product derives from a constant weight and its zero point,
/// kept by the session from run to run.
pub(crate) enum Weights {
    /// MatMulInteger's `B`, centered and packed for [`igemm::product`].
    Packed(PackedB),
    /// ConvInteger's filters, centered: per output channel one row of its
    /// `c_in/group · kh · kw` taps, padded to `stride` (even).
    Rows { rows: Vec<i16>, stride: usize },
    /// What a `DynamicQuantizeLSTM` derives from `W` and `R` ([`recurrent`](super::recurrent)).
    Lstm(Box<KeptLstm>),
}

impl Weights {
    /// The bytes it holds.
    pub(crate) fn byte_size(&self) -> u64 {
        match self {
            Weights::Packed(p) => p.byte_size(),
            Weights::Rows { rows, .. } => (rows.len() * 2) as u64,
            Weights::Lstm(kept) => kept.byte_size(),
        }
    }
}

/// What a kernel derives from constant weights: the session's `kept` slot
/// (filled by `derive` on the first run, read after), or, without one,
/// `derive`'s result in `fresh` for this call only.
pub(crate) fn kept_or_fresh<'a, T>(
    kept: Option<&'a mut Option<T>>,
    fresh: &'a mut Option<T>,
    derive: impl FnOnce() -> Option<T>,
) -> Option<&'a T> {
    let slot = kept.unwrap_or(fresh);
    if slot.is_none() {
        *slot = Some(derive()?);
    }
    slot.as_ref()
}

/// An 8-bit operand's values.
enum Bytes<'a> {
    U8(&'a [u8]),
    I8(&'a [i8]),
}

fn bytes(t: &Tensor) -> Option<Bytes<'_>> {
    match &t.data {
        Data::U8(v) => Some(Bytes::U8(v)),
        Data::I8(v) => Some(Bytes::I8(v)),
        _ => None,
    }
}

/// A zero point's values (`[0]` when omitted), which must be one or `len`.
fn zero_points(t: Option<&Tensor>, len: usize) -> Option<Vec<i16>> {
    let Some(t) = t else { return Some(vec![0]) };
    let v: Vec<i16> = match bytes(t)? {
        Bytes::U8(v) => v.iter().map(|&z| i16::from(z)).collect(),
        Bytes::I8(v) => v.iter().map(|&z| i16::from(z)).collect(),
    };
    (v.len() == 1 || v.len() == len).then_some(v)
}

/// Rows of `width` values of `x` minus the zero point of their row
/// (`zp[row % zp.len()]`… per row when `per_row`, else the one value),
/// each padded with zeros to `stride`.
fn centered_rows(x: &Bytes<'_>, width: usize, stride: usize, zp: &[i16], period: usize) -> Vec<i16> {
    fn go<T: Copy + Into<i16>>(x: &[T], width: usize, stride: usize, zp: &[i16], period: usize) -> Vec<i16> {
        let rows = x.len().checked_div(width).unwrap_or(0);
        let mut out = vec![0i16; rows * stride];
        for (r, (dst, src)) in out.chunks_exact_mut(stride).zip(x.chunks_exact(width)).enumerate() {
            let z = if zp.len() == 1 { zp[0] } else { zp[r % period] };
            for (d, &s) in dst.iter_mut().zip(src) {
                *d = s.into() - z;
            }
        }
        out
    }
    match x {
        Bytes::U8(v) => go(v, width, stride, zp, period),
        Bytes::I8(v) => go(v, width, stride, zp, period),
    }
}

/// MatMulInteger: `(A − a_zp) · (B − b_zp)` in `i32`. `kept` is the
/// session's slot for a constant `B` (filled on the first run).
pub(crate) fn matmul_integer(
    inputs: &[Option<&Tensor>],
    kept: Option<&mut Option<Weights>>,
    simd: bool,
) -> Option<Tensor> {
    let (a, b) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let [k, n] = b.shape[..] else { return None };
    let m = match a.shape.len() {
        0 => return None,
        1 => 1,
        r => a.shape[r - 2],
    };
    if *a.shape.last()? != k || k == 0 {
        return None;
    }
    let a_zp = zero_points(inputs.get(2).copied().flatten(), m)?;
    let mut fresh = None;
    let Weights::Packed(packed) =
        kept_or_fresh(kept, &mut fresh, || Some(Weights::Packed(pack_b(b, inputs.get(3).copied().flatten())?)))?
    else {
        return None;
    };
    let lda = 2 * k.div_ceil(2);
    let rows = centered_rows(&bytes(a)?, k, lda, &a_zp, m);
    let count = rows.len() / lda;
    let mut out = vec![0i32; count * n];
    igemm::product(count, &rows, lda, packed, &mut out, n, simd);
    let mut shape = a.shape[..a.shape.len() - 1].to_vec();
    shape.push(n);
    Tensor::new(shape, Data::I32(out))
}

/// `B − b_zp` (per tensor or per column), packed.
fn pack_b(b: &Tensor, zp: Option<&Tensor>) -> Option<PackedB> {
    let [k, n] = b.shape[..] else { return None };
    let zp = zero_points(zp, n)?;
    fn go<T: Copy + Into<i16>>(b: &[T], n: usize, zp: &[i16]) -> Vec<i16> {
        let per_column = zp.len() > 1;
        b.iter().enumerate().map(|(i, &v)| v.into() - if per_column { zp[i % n] } else { zp[0] }).collect()
    }
    let centered = match bytes(b)? {
        Bytes::U8(v) => go(v, n, &zp),
        Bytes::I8(v) => go(v, n, &zp),
    };
    Some(PackedB::from_rows(k, n, &centered))
}

/// ConvInteger: the convolution of `x − x_zp` by `w − w_zp` in `i32`
/// (padding adds zeros to the centered input, as the zero point would to
/// `x`). `kept` is the session's slot for a constant `w`.
pub(crate) fn conv_integer(
    node: &Node,
    inputs: &[Option<&Tensor>],
    kept: Option<&mut Option<Weights>>,
    simd: bool,
) -> Option<Tensor> {
    let (x, w) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let (p, one_d) = conv_geometry(node, &x.shape, &w.shape)?;
    let x_zp = zero_points(inputs.get(2).copied().flatten(), 1)?[0];
    let taps = p.group_in() * p.kh * p.kw;
    let stride = 2 * taps.div_ceil(2);
    let mut fresh = None;
    let filters =
        kept_or_fresh(kept, &mut fresh, || filter_rows(w, inputs.get(3).copied().flatten(), &p, taps, stride))?;
    let Weights::Rows { rows, stride: lda } = filters else { return None };
    if *lda != stride || rows.len() != p.c_out * stride {
        return None;
    }
    let (oh, ow) = p.output_hw()?;
    let positions = oh * ow;
    let x = bytes(x)?;
    let mut out = vec![0i32; p.n * p.c_out * positions];
    let mut patches = vec![0i16; taps * positions];
    let mut col = PackedB::zeroed(taps, positions);
    let (gin, gout) = (p.group_in(), p.group_out());
    for image in 0..p.n {
        for g in 0..p.group {
            let first = (image * p.c_in + g * gin) * p.h * p.w;
            match &x {
                Bytes::U8(v) => im2col(v, first, &p, (oh, ow), x_zp, &mut patches),
                Bytes::I8(v) => im2col(v, first, &p, (oh, ow), x_zp, &mut patches),
            }
            col.fill_from_rows(&patches);
            let c = &mut out[(image * p.c_out + g * gout) * positions..][..gout * positions];
            igemm::product(gout, &rows[g * gout * stride..][..gout * stride], stride, &col, c, positions, simd);
        }
    }
    let shape = if one_d { vec![p.n, p.c_out, ow] } else { vec![p.n, p.c_out, oh, ow] };
    Tensor::new(shape, Data::I32(out))
}

/// The centered filters, one padded row per output channel.
fn filter_rows(w: &Tensor, zp: Option<&Tensor>, p: &Conv2d, taps: usize, stride: usize) -> Option<Weights> {
    let zp = zero_points(zp, p.c_out)?;
    let rows = centered_rows(&bytes(w)?, taps, stride, &zp, p.c_out);
    Some(Weights::Rows { rows, stride })
}

/// The patches of one image's group of channels (starting at value
/// `first` of `x`), centered, into `rows` (row-major, one row of output
/// positions per tap `(c, ki, kj)`); taps in the padding are 0. Each
/// output row's run of in-bounds taps is one contiguous (or, at a column
/// stride, strided) read of an input row.
fn im2col<T: Copy + Into<i16> + Sync>(
    x: &[T],
    first: usize,
    p: &Conv2d,
    (oh, ow): (usize, usize),
    zp: i16,
    rows: &mut [i16],
) {
    let taps = p.kh * p.kw;
    let (sh, sw) = (p.stride[0], p.stride[1]);
    rows.par_chunks_mut(oh * ow).enumerate().for_each(|(t, row)| {
        let (c, ki, kj) = (t / taps, t % taps / p.kw, t % p.kw);
        let plane = &x[first + c * p.h * p.w..][..p.h * p.w];
        // ix = ox·sw + kj·dw − left lies in [0, w) for ox in [lo, hi)
        let shift = (kj * p.dilation[1]) as isize - p.pads[1] as isize;
        let lo = if shift >= 0 { 0 } else { (-shift) as usize }.div_ceil(sw).min(ow);
        let hi = if (p.w as isize) <= shift { 0 } else { (p.w as isize - shift) as usize }.div_ceil(sw).clamp(lo, ow);
        for (oy, out) in row.chunks_exact_mut(ow).enumerate() {
            let iy = (oy * sh + ki * p.dilation[0]) as isize - p.pads[0] as isize;
            if iy < 0 || iy as usize >= p.h || lo == hi {
                out.fill(0);
                continue;
            }
            let src = &plane[iy as usize * p.w..][..p.w];
            out[..lo].fill(0);
            out[hi..].fill(0);
            let start = (lo * sw) as isize + shift;
            if sw == 1 {
                for (o, &v) in out[lo..hi].iter_mut().zip(&src[start as usize..]) {
                    *o = v.into() - zp;
                }
            } else {
                for (o, &v) in out[lo..hi].iter_mut().zip(src[start as usize..].iter().step_by(sw)) {
                    *o = v.into() - zp;
                }
            }
        }
    });
}

/// DynamicQuantizeLinear of an `f32` tensor: the `u8` values, the scale
/// and the zero point (both scalars).
pub(crate) fn dynamic_quantize(inputs: &[Option<&Tensor>], simd: bool) -> Option<Vec<Tensor>> {
    let x = inputs.first().copied()??;
    let Data::F32(v) = &x.data else { return None };
    let (lo, hi) = range(v, simd);
    // as the reference: the difference in f64 rounded once, the zero point in f64
    let scale = ((f64::from(hi) - f64::from(lo)) as f32) / 255.0f32;
    let zp = if scale == 0.0 { 0.0 } else { (-f64::from(lo) / f64::from(scale)).round_ties_even().clamp(0.0, 255.0) };
    let mut q = vec![0u8; v.len()];
    quantize(v, scale, zp as f32, &mut q, simd);
    Some(vec![
        Tensor::new(x.shape.clone(), Data::U8(q))?,
        Tensor::scalar(Data::F32(vec![scale])),
        Tensor::scalar(Data::U8(vec![zp as u8])),
    ])
}

/// The smallest and largest value, with 0 always inside (NaN ignored).
fn range(v: &[f32], simd: bool) -> (f32, f32) {
    #[cfg(target_arch = "x86_64")]
    if simd && cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { range_avx2(v) };
    }
    let _ = simd;
    range_body(v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn range_avx2(v: &[f32]) -> (f32, f32) {
    range_body(v)
}

#[inline(always)]
fn range_body(v: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([0f32; 16], [0f32; 16]);
    let chunks = v.chunks_exact(16);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..16 {
            lo[i] = if c[i] < lo[i] { c[i] } else { lo[i] };
            hi[i] = if c[i] > hi[i] { c[i] } else { hi[i] };
        }
    }
    for &x in rest {
        lo[0] = if x < lo[0] { x } else { lo[0] };
        hi[0] = if x > hi[0] { x } else { hi[0] };
    }
    let lo = lo.iter().fold(0f32, |m, &x| if x < m { x } else { m });
    let hi = hi.iter().fold(0f32, |m, &x| if x > m { x } else { m });
    (lo, hi)
}

/// `q = saturate(round(x / scale) + zp)`, rounding half to even (`zp` when
/// the scale is 0).
fn quantize(v: &[f32], scale: f32, zp: f32, q: &mut [u8], simd: bool) {
    if scale == 0.0 {
        q.fill(zp as u8);
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if simd && cpu::avx2_fma() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { quantize_avx2(v, scale, zp, q) };
    }
    let _ = simd;
    quantize_body(v, scale, zp, q)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_avx2(v: &[f32], scale: f32, zp: f32, q: &mut [u8]) {
    quantize_body(v, scale, zp, q)
}

#[inline(always)]
fn quantize_body(v: &[f32], scale: f32, zp: f32, q: &mut [u8]) {
    for (d, &x) in q.iter_mut().zip(v) {
        // `max` takes NaN to 0, as the reference's saturating conversion does
        let r = ((x / scale).round_ties_even() + zp).max(0.0).min(255.0);
        // SAFETY: r is finite and in [0, 255] (a plain conversion, which vectorizes)
        *d = unsafe { r.to_int_unchecked::<i32>() } as u8;
    }
}
