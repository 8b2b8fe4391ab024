//! LayerNormalization over a **strided** axis, outer points in the lanes:
//! ConvNeXt's `Transpose` + `LayerNormalization`, which normalizes the
//! channels of an NCHW tensor (channel stride `h·w`) and writes NHWC.
//!
//! The reduction runners ([`super::reduce`], [`super::reduce_lanes`]) take
//! any program, at a cost per outer point or per sweep (offsets, gathers,
//! tile evaluations, folds) that a small normalization — ConvNeXt's export
//! normalizes 16 channels at each of 64 positions — spends most of its time
//! in. A program that is exactly a layer normalization (the instructions
//! the LayerNormalization lowering makes: mean, centred values, mean of
//! their squares, `+ ε`, square root, reciprocal, then a per-channel scale
//! and shift) whose normalized axis is strided in its input runs here:
//! 16 consecutive points of the innermost outer axis at a time, each
//! channel's 16 values one contiguous read where that axis is dense, the
//! sums over the channels per lane (no horizontal folds), and the results
//! written channel-contiguous per point. Sums are `f64`; the rest is the
//! program's own `f32` arithmetic in its order.

use super::bind::{offset_of, Bound};
use super::gemm::OutPtr;
use super::tile::{Dst, Src};
use crate::kernel::{BinaryOp, Combiner, Inst, Program, UnaryOp};
use diamond_ir::ElemType;
use rayon::prelude::*;

/// Outer points a block holds (the lanes).
const LANES: usize = 16;

/// Below this many elements the blocks run on one thread.
const PARALLEL_ELEMENTS: usize = 1 << 15;

/// A per-channel factor or term: a constant, or an operand that varies
/// only along the normalized axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PerChannel {
    Const(f32),
    Operand(usize),
}

/// A program recognised as a layer normalization over a strided axis.
#[derive(Clone, Debug, PartialEq)]
pub struct StridedNorm {
    /// The operand normalized.
    x: usize,
    /// Added to the variance.
    eps: f32,
    /// Multiplies the normalized values.
    scale: Option<PerChannel>,
    /// Added last.
    shift: Option<PerChannel>,
}

impl StridedNorm {
    /// `p` as a layer normalization of one of its operands over its one
    /// reduction axis, when it is one, all `f32`, with one output, and the
    /// normalized axis is strided in the input (contiguous rows are the row
    /// runners' best case) while an outer axis remains for the lanes.
    pub fn of(p: &Program, b: &Bound) -> Option<StridedNorm> {
        let n = b.n_outer;
        if p.outputs.len() != 1 || n == 0 || b.extents.len() != n + 1 || b.empty {
            return None;
        }
        let float = p.body.iter().all(|i| i.ty == ElemType::Float)
            && p.operands.iter().all(|o| o.elem == ElemType::Float)
            && p.outputs[0].view.elem == ElemType::Float;
        if !float {
            return None;
        }
        let inst = |i: usize| &p.body[i].inst;
        let per_channel = |i: usize| match *inst(i) {
            Inst::Const(c) => Some(PerChannel::Const(c as f32)),
            Inst::Load(k) if b.operands[k].strides[..n].iter().all(|&s| s == 0) => Some(PerChannel::Operand(k)),
            _ => None,
        };
        // `i`, or `i = a ∘ t` with `t` per channel: the candidates (inner, term)
        let peel = |i: usize, op: BinaryOp| {
            let mut found = vec![(i, None)];
            if let Inst::Binary(o, a, c) = *inst(i) {
                if o == op {
                    found.extend(per_channel(c).map(|t| (a, Some(t))));
                    found.extend(per_channel(a).map(|t| (c, Some(t))));
                }
            }
            found
        };
        for (after_shift, shift) in peel(p.outputs[0].source, BinaryOp::Add) {
            for (core, scale) in peel(after_shift, BinaryOp::Mul) {
                if let Some((x, eps)) = normalized(p, core) {
                    let norm = StridedNorm { x, eps, scale, shift };
                    return (b.operands[x].strides[n] != 1).then_some(norm);
                }
            }
        }
        None
    }

    /// Runs the normalization.
    ///
    /// # Safety
    /// `srcs` and `dsts` are the bound program's operands and outputs, as
    /// [`super::reduce::run`] takes them.
    pub unsafe fn run(&self, b: &Bound, srcs: &[Src], dsts: &[Dst]) {
        let n = b.n_outer;
        let (channels, inner) = (b.extents[n], b.extents[n - 1]);
        let rows: usize = b.extents[..n - 1].iter().product();
        let Src::F32(x) = srcs[self.x] else { unreachable!("StridedNorm::of took f32 operands") };
        let Dst::F32(out) = dsts[0] else { unreachable!("StridedNorm::of took an f32 output") };
        let values = |term: Option<PerChannel>, none: f32| -> Vec<f32> {
            match term {
                None => vec![none; channels],
                Some(PerChannel::Const(c)) => vec![c; channels],
                Some(PerChannel::Operand(k)) => {
                    let Src::F32(ptr) = srcs[k] else { unreachable!("f32 operands") };
                    let v = &b.operands[k];
                    (0..channels).map(|c| *ptr.offset(v.offset + c as isize * v.strides[n])).collect()
                }
            }
        };
        let (scale, shift) = (values(self.scale, 1.0), values(self.shift, 0.0));
        let (xv, ov) = (&b.operands[self.x], &b.outputs[0]);
        let per_row = inner.div_ceil(LANES);
        // shared by the blocks: each reads the operands and writes its own points
        let (x, out) = (OutPtr(x as *mut f32), OutPtr(out));
        let block = |tile: &mut Vec<f32>, index: usize| {
            let (row, first) = (index / per_row, index % per_row * LANES);
            let lanes = LANES.min(inner - first);
            let at = |v: &super::bind::Strided| {
                v.offset + offset_of(row, &b.extents[..n - 1], &v.strides[..n - 1]) + first as isize * v.strides[n - 1]
            };
            let from = Strided2 { base: at(xv), lane: xv.strides[n - 1], channel: xv.strides[n] };
            let to = Strided2 { base: at(ov), lane: ov.strides[n - 1], channel: ov.strides[n] };
            tile.clear();
            tile.resize(channels * LANES, 0.0);
            // SAFETY: the bound views reach only elements of their buffers
            // (checked by `bind`), and blocks write disjoint points.
            unsafe {
                gather(x.at(0), from, lanes, tile);
                self.normalize(tile, &scale, &shift);
                scatter(tile, lanes, out.at(0), to);
            }
        };
        let blocks = rows * per_row;
        let run = |index: usize| {
            let mut tile = TILE.with(|t| t.take());
            block(&mut tile, index);
            TILE.with(|t| t.set(tile));
        };
        if rayon::current_num_threads() > 1 && rows * inner * channels >= PARALLEL_ELEMENTS {
            (0..blocks).into_par_iter().for_each(run);
        } else {
            (0..blocks).for_each(run);
        }
    }

    /// The program's arithmetic over a tile of `channels × 16` values (lane
    /// `l` of channel `c` at `16c + l`), in place.
    fn normalize(&self, tile: &mut [f32], scale: &[f32], shift: &[f32]) {
        let channels = tile.len() / LANES;
        let count = channels as f64;
        let mut sum = [0f64; LANES];
        for values in tile.chunks_exact(LANES) {
            sum.iter_mut().zip(values).for_each(|(s, &v)| *s += v as f64);
        }
        let mean: [f32; LANES] = std::array::from_fn(|l| (sum[l] / count) as f32);
        let mut squares = [0f64; LANES];
        for values in tile.chunks_exact(LANES) {
            for ((s, &v), &m) in squares.iter_mut().zip(values).zip(&mean) {
                let d = v - m;
                *s += (d * d) as f64;
            }
        }
        let inv: [f32; LANES] = std::array::from_fn(|l| 1.0 / ((squares[l] / count) as f32 + self.eps).sqrt());
        for ((values, &g), &t) in tile.chunks_exact_mut(LANES).zip(scale).zip(shift) {
            for ((v, &m), &r) in values.iter_mut().zip(&mean).zip(&inv) {
                *v = (*v - m) * r * g + t;
            }
        }
    }
}

/// Whether instruction `i` of `p` is `(x − mean x) · 1/√(mean (x − mean x)² + ε)`
/// (or `… / √(…)`), `x` an operand that varies along the reduction axis:
/// that operand and `ε`.
fn normalized(p: &Program, i: usize) -> Option<(usize, f32)> {
    let inst = |i: usize| &p.body[i].inst;
    // (centred, root): `centred · 1/root` or `centred / root`
    let mut forms = Vec::new();
    match *inst(i) {
        Inst::Binary(BinaryOp::Mul, a, c) => {
            for (d, r) in [(a, c), (c, a)] {
                if let Inst::Unary(UnaryOp::Reciprocal, root) = *inst(r) {
                    forms.push((d, root));
                }
            }
        }
        Inst::Binary(BinaryOp::Div, d, root) => forms.push((d, root)),
        _ => {}
    }
    forms.into_iter().find_map(|(d, root)| {
        let Inst::Unary(UnaryOp::Sqrt, sum) = *inst(root) else { return None };
        let (var, eps) = match *inst(sum) {
            Inst::Binary(BinaryOp::Add, a, c) => match (inst(a), inst(c)) {
                (_, &Inst::Const(e)) => (a, e),
                (&Inst::Const(e), _) => (c, e),
                _ => return None,
            },
            _ => return None,
        };
        let Inst::Reduce(Combiner::Mean, square) = *inst(var) else { return None };
        let squared = match *inst(square) {
            Inst::Unary(UnaryOp::Square, s) => s == d,
            Inst::Binary(BinaryOp::Mul, s, t) => s == d && t == d,
            _ => false,
        };
        let Inst::Binary(BinaryOp::Sub, load, mean) = *inst(d) else { return None };
        let Inst::Reduce(Combiner::Mean, again) = *inst(mean) else { return None };
        let Inst::Load(x) = *inst(load) else { return None };
        let varies = p.operands[x].axes().any(|a| p.reduce.contains(&a));
        (squared && again == load && varies).then_some((x, eps as f32))
    })
}

/// Where a block's values lie: lane `l` of channel `c` at `base + l·lane + c·channel`.
#[derive(Clone, Copy)]
struct Strided2 {
    base: isize,
    lane: isize,
    channel: isize,
}

/// Copies the block's values into `tile` (lanes past `lanes` stay 0).
///
/// # Safety
/// Every element the block names lies in `x`'s buffer.
unsafe fn gather(x: *const f32, from: Strided2, lanes: usize, tile: &mut [f32]) {
    for (c, values) in tile.chunks_exact_mut(LANES).enumerate() {
        let row = x.offset(from.base + c as isize * from.channel);
        if from.lane == 1 {
            std::ptr::copy_nonoverlapping(row, values.as_mut_ptr(), lanes);
        } else {
            for (l, v) in values[..lanes].iter_mut().enumerate() {
                *v = *row.offset(l as isize * from.lane);
            }
        }
    }
}

/// Writes the block's first `lanes` lanes from `tile`, point by point
/// (each point's channels are consecutive in a transposed output).
///
/// # Safety
/// Every element the block names lies in `out`'s buffer, which no one else writes there.
unsafe fn scatter(tile: &[f32], lanes: usize, out: *mut f32, to: Strided2) {
    for l in 0..lanes {
        let point = out.offset(to.base + l as isize * to.lane);
        for (c, values) in tile.chunks_exact(LANES).enumerate() {
            *point.offset(c as isize * to.channel) = values[l];
        }
    }
}

thread_local! {
    /// The last block's tile on this thread.
    static TILE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}
