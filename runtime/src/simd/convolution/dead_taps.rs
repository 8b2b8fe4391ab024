//! Convolution taps that only ever read padding, dropped.
//!
//! A dilated convolution on a small plane — DeepLab's atrous pyramid runs
//! 3×3 kernels at dilations 12, 24 and 36 over a 20×20 feature map — has
//! taps whose every read falls outside the input: they multiply zeros.
//! Along each axis the taps some output position reads inside the input
//! form one run `[first, last]`; `trim` gives the convolution with only
//! those taps (the kernel cut to the run, the leading padding reduced by
//! the dropped taps' reach, the trailing one so that the output keeps its
//! size) when that drops any, and [`Trimmed`] keeps the cut weight, so the
//! kernels choose their route for the smaller kernel (a dilation-36 3×3 on
//! a 20×20 map is a pointwise product). The result is the same sum
//! without the zero terms.

use super::conv::{Conv2d, Prepared};

/// The taps of one axis that read inside the input for some output
/// position: `(first, count)`, or `None` when none does.
fn live(size: usize, pad: usize, k: usize, stride: usize, dilation: usize, out: usize) -> Option<(usize, usize)> {
    let reads = |tap: usize| {
        // input index of output o for this tap: o·stride + tap·dilation − pad
        (0..out).any(|o| {
            let at = (o * stride + tap * dilation) as i64 - pad as i64;
            at >= 0 && (at as usize) < size
        })
    };
    let first = (0..k).find(|&t| reads(t))?;
    let last = (0..k).rev().find(|&t| reads(t))?;
    Some((first, last - first + 1))
}

/// `p` with its dead taps dropped, and the first live tap along height and
/// width; `None` when every tap is live (or no output reads any input).
pub(crate) fn trim(p: &Conv2d) -> Option<(Conv2d, [usize; 2])> {
    let (oh, ow) = p.output_hw()?;
    let (h0, kh) = live(p.h, p.pads[0], p.kh, p.stride[0], p.dilation[0], oh)?;
    let (w0, kw) = live(p.w, p.pads[1], p.kw, p.stride[1], p.dilation[1], ow)?;
    if kh == p.kh && kw == p.kw {
        return None;
    }
    let top = p.pads[0].checked_sub(h0 * p.dilation[0])?;
    let left = p.pads[1].checked_sub(w0 * p.dilation[1])?;
    let mut q = Conv2d { kh, kw, pads: [top, left, 0, 0], ..*p };
    // the trailing padding that keeps the output's size: (in + pads − span) / stride + 1 = out
    let trailing = |size: usize, lead: usize, k: usize, stride: usize, dilation: usize, out: usize| {
        let span = dilation * (k - 1) + 1;
        ((out - 1) * stride + span).checked_sub(size + lead)
    };
    q.pads[2] = trailing(p.h, top, kh, p.stride[0], p.dilation[0], oh).unwrap_or(0);
    q.pads[3] = trailing(p.w, left, kw, p.stride[1], p.dilation[1], ow).unwrap_or(0);
    (q.output_hw()? == (oh, ow)).then_some((q, [h0, w0]))
}

/// A convolution's weight cut to its live taps, and what the kernels derive
/// from the cut weight.
pub struct Trimmed {
    /// The convolution the cut weight is for.
    pub(crate) conv: Conv2d,
    /// The weight, `[c_out, c_in / group, kh, kw]` of the trimmed kernel.
    pub(crate) weight: Vec<f32>,
    /// The kernels' own preparation of it.
    pub(crate) inner: Option<Box<Prepared>>,
}

impl Trimmed {
    /// Cuts `weight` (of `p`) to the taps of `q`, starting at `first`.
    pub(crate) fn new(weight: &[f32], p: &Conv2d, q: Conv2d, first: [usize; 2]) -> Trimmed {
        let per_filter = p.c_out * p.group_in();
        let mut cut = Vec::with_capacity(per_filter * q.kh * q.kw);
        for f in 0..per_filter {
            let taps = &weight[f * p.kh * p.kw..][..p.kh * p.kw];
            for i in 0..q.kh {
                let row = &taps[(first[0] + i) * p.kw..][..p.kw];
                cut.extend_from_slice(&row[first[1]..first[1] + q.kw]);
            }
        }
        Trimmed { conv: q, weight: cut, inner: None }
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.weight.len() * 4) as u64 + self.inner.as_ref().map_or(0, |p| p.byte_size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::conv::conv2d;
    use crate::simd::epilogue::Epilogue;

    fn conv(h: usize, dilation: usize, pad: usize) -> Conv2d {
        Conv2d {
            n: 1,
            c_in: 3,
            h,
            w: h,
            c_out: 4,
            kh: 3,
            kw: 3,
            stride: [1, 1],
            dilation: [dilation; 2],
            pads: [pad; 4],
            group: 1,
        }
    }

    /// The convolution by its definition, every tap read (padding as zeros).
    fn naive(input: &[f32], weight: &[f32], p: &Conv2d, out: &mut [f32]) {
        let (oh, ow) = p.output_hw().unwrap();
        for m in 0..p.c_out {
            for y in 0..oh {
                for x in 0..ow {
                    let mut sum = 0f32;
                    for c in 0..p.c_in {
                        for i in 0..p.kh {
                            for j in 0..p.kw {
                                let r = (y * p.stride[0] + i * p.dilation[0]) as i64 - p.pads[0] as i64;
                                let q = (x * p.stride[1] + j * p.dilation[1]) as i64 - p.pads[1] as i64;
                                if r >= 0 && q >= 0 && (r as usize) < p.h && (q as usize) < p.w {
                                    let v = input[(c * p.h + r as usize) * p.w + q as usize];
                                    sum += v * weight[((m * p.c_in + c) * p.kh + i) * p.kw + j];
                                }
                            }
                        }
                    }
                    out[(m * oh + y) * ow + x] = sum;
                }
            }
        }
    }

    #[test]
    fn a_dilation_past_the_plane_leaves_the_centre_tap() {
        let (q, first) = trim(&conv(20, 36, 36)).expect("trimmed");
        assert_eq!((q.kh, q.kw, first), (1, 1, [1, 1]));
        assert_eq!(q.output_hw(), Some((20, 20)));
        assert!(trim(&conv(20, 1, 1)).is_none(), "every tap of a plain 3x3 reads the input");
    }

    #[test]
    fn the_trimmed_convolution_computes_the_same_values() {
        for (h, d, pad) in [(20, 36, 36), (20, 12, 12), (9, 6, 6), (7, 5, 5)] {
            let p = conv(h, d, pad);
            let input: Vec<f32> = (0..p.c_in * h * h).map(|i| ((i * 7 % 23) as f32 - 11.0) / 11.0).collect();
            let weight: Vec<f32> = (0..p.c_out * p.c_in * 9).map(|i| ((i * 5 % 17) as f32 - 8.0) / 8.0).collect();
            let (oh, ow) = p.output_hw().unwrap();
            let mut want = vec![0f32; p.c_out * oh * ow];
            naive(&input, &weight, &p, &mut want);
            let mut got = vec![0f32; want.len()];
            conv2d(&input, &weight, &p, &mut got, &Epilogue::default());
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-4, "{h} {d}: {a} vs {b}");
            }
        }
    }
}
