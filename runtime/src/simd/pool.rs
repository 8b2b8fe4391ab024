//! 2-D MaxPool and AveragePool on `f32` planes, in place of the reference
//! kernels (whose average sums in `f64`, one plane after another unless
//! the node is large):
//! - each output row first combines the input rows its window covers into
//!   one line (a contiguous vector max or add), then, for each kernel
//!   column, the run of that line the column reaches (worked out once per
//!   node: output columns `lo..hi`, first input column); at column stride
//!   2 the line is read as pairs, which vectorizes where a stepping
//!   iterator goes one float at a time;
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

use super::contraction::{floats, int_attr, sized};
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

    /// Outputs `lo..hi` whose tap `k` lies inside the input.
    fn inside(&self, k: usize) -> (usize, usize) {
        let lo = (0..self.output).find(|&o| self.at(o, k) >= 0).unwrap_or(self.output);
        let hi = (lo..self.output).find(|&o| self.at(o, k) >= self.input as isize).unwrap_or(self.output);
        (lo, hi)
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
    let mut out = sized(take, n * c * out_plane);
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
    /// Per kernel column: the outputs `lo..hi` it reaches inside the input and the first one's input column.
    runs: Vec<(usize, usize, usize)>,
    /// Per output row and column: the divisor's factor (an average's).
    row_count: Vec<usize>,
    col_count: Vec<usize>,
}

impl Plan {
    fn new(kind: Kind, rows: Axis, cols: Axis) -> Plan {
        let runs = (0..cols.kernel)
            .filter_map(|kj| {
                let (lo, hi) = cols.inside(kj);
                (lo < hi).then(|| (lo, hi, cols.at(lo, kj) as usize))
            })
            .collect();
        let ((rows_in, rows_pad), (cols_in, cols_pad)) = (rows.counts(), cols.counts());
        let (row_count, col_count) = match kind {
            Kind::Average { count_pad: true } => (rows_pad, cols_pad),
            _ => (rows_in, cols_in),
        };
        Plan { kind, rows, cols, runs, row_count, col_count }
    }

    fn plane(&self, src: &[f32], dst: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if cpu::avx2_fma() {
            // SAFETY: the processor has AVX2 and FMA.
            return unsafe { self.plane_avx2(src, dst) };
        }
        self.plane_body(src, dst)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn plane_avx2(&self, src: &[f32], dst: &mut [f32]) {
        self.plane_body(src, dst)
    }

    /// One plane, separably: for each output row, the input rows its
    /// window covers are first combined into one line (contiguous, all
    /// taps of a column at once), then the kernel's columns over that
    /// line, each a run of outputs.
    #[inline(always)]
    fn plane_body(&self, src: &[f32], dst: &mut [f32]) {
        let (w, ow, sw) = (self.cols.input, self.cols.output, self.cols.stride);
        let max = self.kind == Kind::Max;
        let init = if max { f32::NEG_INFINITY } else { 0.0 };
        let mut combined = vec![0.0f32; w];
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            row.fill(init);
            let mut inside = (0..self.rows.kernel)
                .map(|ki| self.rows.at(oy, ki))
                .filter(|&iy| iy >= 0 && iy < self.rows.input as isize)
                .map(|iy| &src[iy as usize * w..][..w]);
            let Some(first) = inside.next() else { continue };
            let line = match inside.next() {
                None => first,
                Some(second) => {
                    combined.copy_from_slice(first);
                    for line in std::iter::once(second).chain(inside) {
                        combine(&mut combined, line, 1, max);
                    }
                    &combined[..]
                }
            };
            for &(lo, hi, first) in &self.runs {
                combine(&mut row[lo..hi], &line[first..], sw, max);
            }
            if !max {
                let rows = self.row_count[oy];
                for (y, &cols) in row.iter_mut().zip(&self.col_count) {
                    *y /= (rows * cols).max(1) as f32;
                }
            }
        }
    }
}

/// `acc[i] = max(acc[i], line[i·stride])` or `acc[i] += line[i·stride]`.
#[inline(always)]
fn combine(acc: &mut [f32], line: &[f32], stride: usize, max: bool) {
    let op = |y: &mut f32, v: f32| {
        if max {
            // a select, not a branch: `maxps`, as the reference's f32 path
            *y = if v > *y { v } else { *y };
        } else {
            *y += v;
        }
    };
    match stride {
        1 => acc.iter_mut().zip(line).for_each(|(y, &v)| op(y, v)),
        2 => {
            // pairs for all but the last output, whose pair may end past the line
            let n = acc.len();
            let (body, last) = acc.split_at_mut(n - 1);
            body.iter_mut().zip(line.chunks_exact(2)).for_each(|(y, pair)| op(y, pair[0]));
            op(&mut last[0], line[2 * (n - 1)]);
        }
        s => acc.iter_mut().zip(line.iter().step_by(s)).for_each(|(y, &v)| op(y, v)),
    }
}
