//! 2-D MaxPool and AveragePool on `f32` planes, in place of the reference
//! kernels (whose average sums in `f64`, one plane after another unless
//! the node is large):
//! - each output row first combines the input rows its window covers into
//!   one line (a contiguous vector max or add) inside a buffer padded with
//!   the operation's identity, then folds each output column's taps from
//!   that line, eight columns a vector at column strides 1 and 2 (at 2 the
//!   even lanes of two loads: the stepping loop it replaces went one float
//!   at a time, 0.23 ms for SqueezeNet's first 3×3/2 pool);
//! - on AVX-512, windows of at most 3 columns at column stride 1 or 2
//!   (the 3×3/2 and 2×2/2 pools of image models, Inception's 3×3/1) keep
//!   the folded rows in registers instead: 16 columns a vector, each tap a
//!   shift or an even/odd pick of two vectors (`Plan::plane_avx512`);
//! - an average divides by the taps inside the input (rows inside times
//!   columns inside) or, with `count_include_pad`, inside the padded input,
//!   both of which factor by axis;
//! - planes run in parallel on the current rayon pool when there is work.
//!
//! The output size follows ONNX (and the reference): floor, or with
//! `ceil_mode` ceil, of the padded span over the stride, dropping a last
//! window that would start past the input and its leading padding.
//! `auto_pad`, other ranks and element types, MaxPool's `Indices` output
//! and NaN inputs' propagation beyond what a select gives return `None`
//! or behave as the reference's `f32` path: the node runs on the
//! reference kernels where `None`.

use super::contraction::{floats, int_attr, overwritten};
use super::cpu;
use crate::ops::nn::window_count;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};
use rayon::prelude::*;

/// Below this many window taps in all a node runs on one thread.
const PARALLEL_TAPS: usize = 1 << 16;

/// Which pooling.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Max,
    Average { count_pad: bool },
}

/// One spatial axis of the window.
#[derive(Clone, Debug)]
struct Axis {
    input: usize,
    output: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pad_begin: usize,
    pad_end: usize,
}

impl Axis {
    /// Input position of output `o`, tap `k` (may fall in the padding).
    fn at(&self, o: usize, k: usize) -> isize {
        (o * self.stride + k * self.dilation) as isize - self.pad_begin as isize
    }

    /// Per output: the taps inside the input, and inside the padded input.
    fn counts(&self) -> (Vec<usize>, Vec<usize>) {
        let end = (self.input + self.pad_end) as isize;
        (0..self.output)
            .map(|o| {
                let taps = (0..self.kernel).map(|k| self.at(o, k));
                let inside = taps.clone().filter(|&q| q >= 0 && q < self.input as isize).count();
                let padded = taps.filter(|&q| q >= -(self.pad_begin as isize) && q < end).count();
                (inside, padded)
            })
            .unzip()
    }
}

fn ints(node: &Node, name: &str) -> Option<Option<Vec<usize>>> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Some(None),
        Some(AttrValue::Ints(v)) => v.iter().map(|&x| usize::try_from(x).ok()).collect::<Option<Vec<_>>>().map(Some),
        _ => None,
    }
}

/// The two spatial axes of a node over an input of `[h, w]`.
fn axes(node: &Node, input: [usize; 2]) -> Option<[Axis; 2]> {
    match node.attribute("auto_pad").and_then(|a| a.value()) {
        None | Some(AttrValue::String(b"NOTSET")) => {}
        _ => return None,
    }
    let kernel = ints(node, "kernel_shape")?.filter(|k| k.len() == 2)?;
    let pair = |name: &str| -> Option<Vec<usize>> {
        let v = ints(node, name)?.unwrap_or_else(|| vec![1, 1]);
        (v.len() == 2 && v.iter().all(|&x| x >= 1)).then_some(v)
    };
    let (strides, dilations) = (pair("strides")?, pair("dilations")?);
    let pads = ints(node, "pads")?.unwrap_or_else(|| vec![0; 4]);
    let ceil = int_attr(node, "ceil_mode", 0)? != 0;
    if pads.len() != 4 || kernel.contains(&0) {
        return None;
    }
    let axis = |a: usize| -> Option<Axis> {
        let span = (dilations[a] * (kernel[a] - 1) + 1) as isize;
        let padded = (input[a] + pads[a] + pads[a + 2]) as isize - span;
        if padded < 0 {
            return None;
        }
        let stride = strides[a];
        let pad = (pads[a] as i64, pads[a + 2] as i64);
        let output = window_count(input[a] as i64, pad, span as i64, stride as i64, ceil) as usize;
        Some(Axis {
            input: input[a],
            output,
            kernel: kernel[a],
            stride,
            dilation: dilations[a],
            pad_begin: pads[a],
            pad_end: pads[a + 2],
        })
    };
    Some([axis(0)?, axis(1)?])
}

/// MaxPool (`max`) or AveragePool over an `N, C, H, W` tensor.
pub fn pool(
    node: &Node,
    inputs: &[Option<&Tensor>],
    take: &mut dyn FnMut(usize) -> Vec<f32>,
    max: bool,
) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    let xd = floats(x)?;
    let &[n, c, h, w] = x.shape.as_slice() else { return None };
    if node.outputs.len() > 1 || xd.len() != n * c * h * w || h * w == 0 {
        return None;
    }
    let kind = if max { Kind::Max } else { Kind::Average { count_pad: int_attr(node, "count_include_pad", 0)? != 0 } };
    let [rows, cols] = axes(node, [h, w])?;
    let plan = Plan::new(kind, rows, cols);
    let (oh, ow) = (plan.rows.output, plan.cols.output);
    let out_plane = oh * ow;
    let mut out = overwritten(take, n * c * out_plane);
    if out_plane > 0 {
        let taps = out.len() * plan.rows.kernel * plan.cols.kernel;
        let one = |(src, dst): (&[f32], &mut [f32])| plan.plane(src, dst);
        if rayon::current_num_threads() > 1 && taps >= PARALLEL_TAPS {
            xd.par_chunks(h * w).zip(out.par_chunks_mut(out_plane)).for_each(one);
        } else {
            xd.chunks(h * w).zip(out.chunks_mut(out_plane)).for_each(one);
        }
    }
    Tensor::new(vec![n, c, oh, ow], Data::F32(out))
}

/// What every plane of one node shares.
struct Plan {
    kind: Kind,
    rows: Axis,
    cols: Axis,
    /// Per output row and column: the divisor's factor (an average's).
    row_count: Vec<usize>,
    col_count: Vec<usize>,
}

impl Plan {
    fn new(kind: Kind, rows: Axis, cols: Axis) -> Plan {
        let ((rows_in, rows_pad), (cols_in, cols_pad)) = (rows.counts(), cols.counts());
        let (row_count, col_count) = match kind {
            Kind::Average { count_pad: true } => (rows_pad, cols_pad),
            _ => (rows_in, cols_in),
        };
        Plan { kind, rows, cols, row_count, col_count }
    }

    fn plane(&self, src: &[f32], dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if self.plane_wide(src, dst).is_some() {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if cpu::avx2_fma() {
            // SAFETY: the processor has AVX2 and FMA.
            return unsafe { self.plane_avx2(src, dst) };
        }
        self.plane_body(src, dst, false)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn plane_avx2(&self, src: &[f32], dst: &mut [f32]) {
        self.plane_body(src, dst, true)
    }

    /// One plane, separably: for each output row, the input rows its
    /// window covers are first combined into one line (contiguous, all
    /// taps of a column at once, [`gather`]), laid in a buffer whose
    /// padding holds the operation's identity (`-inf` or 0, each of which
    /// leaves the accumulator as skipping the tap would), so that every
    /// output column then reads its `kernel` taps at `j·stride + t·dilation`
    /// alike ([`across`]). The buffer runs a vector's reach past the last
    /// window, so that the last columns go as a (partly discarded) vector.
    #[inline(always)]
    fn plane_body(&self, src: &[f32], dst: &mut [f32], simd: bool) {
        let (w, ow) = (self.cols.input, self.cols.output);
        let max = self.kind == Kind::Max;
        let init = if max { f32::NEG_INFINITY } else { 0.0 };
        let c = &self.cols;
        // ceil_mode's last window may reach past the trailing padding
        let len = (c.pad_begin + w + c.pad_end).max((ow - 1) * c.stride + (c.kernel - 1) * c.dilation + 1);
        let mut line = vec![init; len + LANES * c.stride];
        let mut covered: Vec<&[f32]> = Vec::with_capacity(self.rows.kernel);
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            covered.clear();
            for ki in 0..self.rows.kernel {
                let iy = self.rows.at(oy, ki);
                if iy >= 0 && iy < self.rows.input as isize {
                    covered.push(&src[iy as usize * w..][..w]);
                }
            }
            if covered.is_empty() {
                row.fill(init);
                continue;
            }
            gather(&mut line[c.pad_begin..][..w], &covered, max, simd);
            across(&line, row, c, max, simd);
            if !max {
                let rows = self.row_count[oy];
                for (y, &cols) in row.iter_mut().zip(&self.col_count) {
                    *y /= (rows * cols).max(1) as f32;
                }
            }
        }
    }
}

/// Floats in one AVX2 vector.
const LANES: usize = 8;

impl Plan {
    /// [`Plan::plane_body`] on AVX-512, where [`Plan::plane_avx512`] has
    /// an instance: `Some(())` when it ran.
    #[cfg(target_arch = "x86_64")]
    fn plane_wide(&self, src: &[f32], dst: &mut [f32]) -> Option<()> {
        let c = &self.cols;
        if !cpu::avx512() || c.dilation != 1 || self.rows.kernel > MAX_ROWS {
            return None;
        }
        let max = self.kind == Kind::Max;
        // SAFETY: the processor has AVX-512 F; the instance's stride and taps are the plan's.
        unsafe {
            match (c.stride, c.kernel, max) {
                (1, 3, true) => self.plane_avx512::<1, 3, true>(src, dst),
                (1, 3, false) => self.plane_avx512::<1, 3, false>(src, dst),
                (2, 2, true) => self.plane_avx512::<2, 2, true>(src, dst),
                (2, 2, false) => self.plane_avx512::<2, 2, false>(src, dst),
                (2, 3, true) => self.plane_avx512::<2, 3, true>(src, dst),
                (2, 3, false) => self.plane_avx512::<2, 3, false>(src, dst),
                _ => return None,
            }
        }
        Some(())
    }

    /// [`Plan::plane_body`] in 16-lane registers for `K` columns at column
    /// stride `S` without dilation (the 3×3/2 and 2×2/2 pools of image
    /// models, Inception's 3×3/1), with no line in memory: vector `m` of
    /// a row is the folded rows' padded columns `16m .. 16m + 16`, loaded
    /// straight from the input rows — whole where every row's 16 columns
    /// are inside the input, else under a mask, the lanes in the padding
    /// or past the row holding the identity —, and tap `t` of 16 outputs
    /// is a shift of two such vectors ([`_mm512_alignr_epi32`]) or, at
    /// stride 2, the even or odd lanes of two ([`_mm512_permutex2var_ps`]).
    /// The same operations in the same order as the line's path, so the
    /// same values. (The line's path, written in whole vectors and read at
    /// other offsets, waited on store forwarding, and its bookkeeping per
    /// row and per tap outweighed the maxima on SqueezeNet's rows of 27.)
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
    unsafe fn plane_avx512<const S: usize, const K: usize, const MAX: bool>(&self, src: &[f32], dst: &mut [f32]) {
        use std::arch::x86_64::*;
        const V: usize = 16;
        let (w, ow) = (self.cols.input, self.cols.output);
        let fold = |v: __m512, acc: __m512| if MAX { _mm512_max_ps(v, acc) } else { _mm512_add_ps(acc, v) };
        let init = if MAX { f32::NEG_INFINITY } else { 0.0 };
        let identity = _mm512_set1_ps(init);
        let pb = self.cols.pad_begin as isize;
        // vectors m whose 16 columns 16m − pb .. are all inside the row
        let inside = (pb as usize).div_ceil(V)..(w + pb as usize) / V;
        let shift = |hi: __m512, lo: __m512, by: usize| {
            let (hi, lo) = (_mm512_castps_si512(hi), _mm512_castps_si512(lo));
            _mm512_castsi512_ps(if by == 1 {
                _mm512_alignr_epi32::<1>(hi, lo)
            } else {
                _mm512_alignr_epi32::<2>(hi, lo)
            })
        };
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let mut rows = [std::ptr::null::<f32>(); MAX_ROWS];
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            let mut n = 0;
            for ki in 0..self.rows.kernel {
                let iy = self.rows.at(oy, ki);
                if iy >= 0 && iy < self.rows.input as isize {
                    rows[n] = src[iy as usize * w..][..w].as_ptr();
                    n += 1;
                }
            }
            if n == 0 {
                row.fill(init);
                continue;
            }
            let (first, rest) = (rows[0], &rows[1..n]);
            // the folded rows' padded columns 16m .. 16m + 16
            let folded = |m: usize| {
                let start = (V * m) as isize - pb;
                if inside.contains(&m) {
                    let mut acc = _mm512_loadu_ps(first.offset(start));
                    for &r in rest {
                        acc = fold(_mm512_loadu_ps(r.offset(start)), acc);
                    }
                    return acc;
                }
                let lo = (-start).clamp(0, V as isize) as u32;
                let hi = (w as isize - start).clamp(0, V as isize) as u32;
                if lo >= hi {
                    return identity;
                }
                let mask = (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as __mmask16;
                let mut acc = _mm512_mask_loadu_ps(identity, mask, first.wrapping_offset(start));
                for &r in rest {
                    acc = fold(_mm512_mask_loadu_ps(identity, mask, r.wrapping_offset(start)), acc);
                }
                acc
            };
            let mut next = folded(0);
            for j in 0..ow.div_ceil(V) {
                let mut acc = identity;
                if S == 1 {
                    let (a, b) = (next, folded(j + 1));
                    acc = fold(a, acc);
                    for t in 1..K {
                        acc = fold(shift(b, a, t), acc);
                    }
                    next = b;
                } else {
                    let (a, b) = (next, folded(2 * j + 1));
                    acc = fold(_mm512_permutex2var_ps(a, even, b), acc);
                    acc = fold(_mm512_permutex2var_ps(a, odd, b), acc);
                    next = folded(2 * j + 2);
                    if K == 3 {
                        acc = fold(_mm512_permutex2var_ps(shift(b, a, 2), even, shift(next, b, 2)), acc);
                    }
                }
                let left = ow - V * j;
                if left >= V {
                    _mm512_storeu_ps(row.as_mut_ptr().add(V * j), acc);
                } else {
                    _mm512_mask_storeu_ps(row.as_mut_ptr().add(V * j), ((1u32 << left) - 1) as __mmask16, acc);
                }
            }
            if !MAX {
                let rows = self.row_count[oy];
                for (y, &cols) in row.iter_mut().zip(&self.col_count) {
                    *y /= (rows * cols).max(1) as f32;
                }
            }
        }
    }
}

/// The most window rows [`Plan::plane_avx512`] takes.
#[cfg(target_arch = "x86_64")]
const MAX_ROWS: usize = 4;

/// `line[i]` = the rows' `i`th elements folded in row order from the first
/// (`max` a select, `maxps`, as the reference's `f32` path: the later
/// value where it is greater, else the earlier), in vectors on AVX2.
#[inline(always)]
fn gather(line: &mut [f32], rows: &[&[f32]], max: bool, simd: bool) {
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is only set on the AVX2+FMA path.
        done = unsafe { gather_avx2(line, rows, max) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    for (i, y) in line.iter_mut().enumerate().skip(done) {
        *y = rows[1..].iter().fold(rows[0][i], |acc, r| step(acc, r[i], max));
    }
}

/// `acc` with `v` folded in: `acc + v`, or the max as a select (`maxps`,
/// as the reference's `f32` path: `v` where it is greater, else `acc`).
#[inline(always)]
fn step(acc: f32, v: f32, max: bool) -> f32 {
    if !max {
        acc + v
    } else if v > acc {
        v
    } else {
        acc
    }
}

/// [`gather`]'s vector part: the number of leading elements done.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gather_avx2(line: &mut [f32], rows: &[&[f32]], max: bool) -> usize {
    use std::arch::x86_64::*;
    let n = line.len() / LANES * LANES;
    debug_assert!(rows.iter().all(|r| r.len() >= line.len()));
    let lp = line.as_mut_ptr();
    for i in (0..n).step_by(LANES) {
        let mut acc = _mm256_loadu_ps(rows[0].as_ptr().add(i));
        for r in &rows[1..] {
            let v = _mm256_loadu_ps(r.as_ptr().add(i));
            // maxps(v, acc): v where v > acc, else acc (also where either is NaN)
            acc = if max { _mm256_max_ps(v, acc) } else { _mm256_add_ps(acc, v) };
        }
        _mm256_storeu_ps(lp.add(i), acc);
    }
    n
}

/// Output column `j` of a row from the padded line: the taps
/// `line[j·stride + t·dilation]`, `t < kernel`, folded from the identity in
/// tap order. At strides 1 and 2 on AVX2 eight columns go at once (at 2 the
/// even lanes of two loads, put in order once after the taps), the last
/// ones through a vector on the stack; other strides one at a time.
#[inline(always)]
fn across(line: &[f32], row: &mut [f32], c: &Axis, max: bool, simd: bool) {
    let (s, k, d) = (c.stride, c.kernel, c.dilation);
    #[cfg(target_arch = "x86_64")]
    if simd && (s == 1 || s == 2) {
        // SAFETY: `simd` is only set on the AVX2+FMA path; the line runs
        // `LANES·s` past the last window, which `across_avx2` reads within.
        return unsafe { across_avx2(line, row, s, k, d, max) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    let init = if max { f32::NEG_INFINITY } else { 0.0 };
    for (j, y) in row.iter_mut().enumerate() {
        *y = (0..k).fold(init, |acc, t| step(acc, line[j * s + t * d], max));
    }
}

/// [`across`]'s vector form at stride 1 or 2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn across_avx2(line: &[f32], row: &mut [f32], s: usize, k: usize, d: usize, max: bool) {
    use std::arch::x86_64::*;
    let lp = line.as_ptr();
    let init = if max { _mm256_set1_ps(f32::NEG_INFINITY) } else { _mm256_setzero_ps() };
    for j in (0..row.len()).step_by(LANES) {
        // block `j..j + 8` reads line[s·j ..= s·j + 8·s − 1 + (k − 1)·d]
        assert!(s * j + LANES * s + (k - 1) * d <= line.len());
        let mut acc = init;
        for t in 0..k {
            let p = lp.add(s * j + t * d);
            let v = if s == 1 {
                _mm256_loadu_ps(p)
            } else {
                // lanes a0 a2 b0 b2 | a4 a6 b4 b6
                _mm256_shuffle_ps::<0x88>(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(LANES)))
            };
            acc = if max { _mm256_max_ps(v, acc) } else { _mm256_add_ps(acc, v) };
        }
        if s == 2 {
            // 64-bit quarters 0 2 1 3: a0 a2 a4 a6 b0 b2 b4 b6
            acc = _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(acc)));
        }
        let rest = row.len() - j;
        if rest >= LANES {
            _mm256_storeu_ps(row.as_mut_ptr().add(j), acc);
        } else {
            let mut last = [0.0f32; LANES];
            _mm256_storeu_ps(last.as_mut_ptr(), acc);
            row[j..].copy_from_slice(&last[..rest]);
        }
    }
}
