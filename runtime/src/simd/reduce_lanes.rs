//! Reductions over short rows, with the outer points as the lanes.
//!
//! [`super::reduce`] walks one outer point at a time and sweeps its
//! reduction axes in tiles: right for long rows, but a LayerNormalization
//! over 16 channels or a Softmax over 16 keys then pays the per-point cost
//! (offsets, a handful of tile evaluations, accumulators) for a few dozen
//! flops. Here a tile's lanes are up to [`TILE`] consecutive points of the
//! last outer axis instead: each reduction point is one evaluation of the
//! sweep's instructions over all the lanes (operands read with the outer
//! axis's stride), folded lane by lane into per-lane accumulators; values
//! of the outer axes alone are simply lane values, never splatted. The
//! results are the same as the row-wise runner's (sums in `f64` per lane).

use super::bind::{offset_of, Bound};
use super::reduce::Phases;
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{Combiner, Inst, Program};
use rayon::prelude::*;

/// Rows this short or shorter run with lanes over the outer points.
pub const SHORT_ROW: usize = 256;

/// Lanes this few or more make the lane-wise runner worth choosing.
const MIN_LANES: usize = 8;

/// Whether `b` suits the lane-wise runner: short reduction rows and a last
/// outer axis long enough to fill lanes.
pub fn suits(b: &Bound) -> bool {
    b.n_outer > 0 && b.reduce_count <= SHORT_ROW && b.extents[b.n_outer - 1] >= MIN_LANES
}

/// Offsets and per-lane accumulators of one worker.
struct Scratch {
    base: Vec<isize>,
    out_base: Vec<isize>,
    offs: Vec<isize>,
    oo: Vec<isize>,
    accs: Vec<f64>,
}

/// The accumulator's start for combiner `c`.
fn start(c: Combiner) -> f64 {
    match c {
        Combiner::Sum | Combiner::Mean => 0.0,
        Combiner::Prod => 1.0,
        Combiner::Max => f64::NEG_INFINITY,
        Combiner::Min => f64::INFINITY,
    }
}

/// Folds register values `xs` into accumulators `acc`, lane by lane.
#[inline(always)]
fn fold_body(c: Combiner, acc: &mut [f64], xs: &[f32]) {
    match c {
        Combiner::Sum | Combiner::Mean => acc.iter_mut().zip(xs).for_each(|(a, &x)| *a += f64::from(x)),
        Combiner::Prod => acc.iter_mut().zip(xs).for_each(|(a, &x)| *a *= f64::from(x)),
        Combiner::Max => acc.iter_mut().zip(xs).for_each(|(a, &x)| {
            let x = f64::from(x);
            *a = if a.is_nan() || x.is_nan() { f64::NAN } else { a.max(x) };
        }),
        Combiner::Min => acc.iter_mut().zip(xs).for_each(|(a, &x)| {
            let x = f64::from(x);
            *a = if a.is_nan() || x.is_nan() { f64::NAN } else { a.min(x) };
        }),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fold_avx2(c: Combiner, acc: &mut [f64], xs: &[f32]) {
    fold_body(c, acc, xs)
}

fn fold(simd: bool, c: Combiner, acc: &mut [f64], xs: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { fold_avx2(c, acc, xs) };
    }
    let _ = simd;
    fold_body(c, acc, xs)
}

/// The reduction's value from its accumulator over `count` points.
fn value(c: Combiner, acc: f64, count: usize) -> f32 {
    match c {
        Combiner::Mean => (acc / count as f64) as f32,
        _ => acc as f32,
    }
}

/// Runs reduction program `p` bound as `b` (for which [`suits`] holds),
/// in the order `ph` gives.
///
/// # Safety
/// As [`super::elementwise::run`].
pub unsafe fn run(p: &Program, ph: &Phases, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    let no = b.n_outer;
    let outer = &b.extents[..no];
    let red = &b.extents[no..];
    let lanes_axis = outer[no - 1];
    let rows: usize = outer[..no - 1].iter().product();
    let op_lane: Vec<isize> = b.operands.iter().map(|v| v.strides[no - 1]).collect();
    let out_lane: Vec<isize> = b.outputs.iter().map(|v| v.strides[no - 1]).collect();
    // Per reduction point, each operand's and output's offset from the lane's base.
    let (k_ops, k_outs) = (b.operands.len(), b.outputs.len());
    let op_red: Vec<isize> =
        (0..b.reduce_count).flat_map(|r| b.operands.iter().map(move |v| offset_of(r, red, &v.strides[no..]))).collect();
    let out_red: Vec<isize> =
        (0..b.reduce_count).flat_map(|r| b.outputs.iter().map(move |v| offset_of(r, red, &v.strides[no..]))).collect();
    // Lane blocks: whole tiles, smaller when that leaves threads idle.
    let points = rows * lanes_axis;
    let threads = rayon::current_num_threads();
    let work = points.saturating_mul(b.reduce_count.max(1));
    let width = if threads > 1 && work > super::elementwise::CHUNK {
        points.div_ceil(threads * 2).next_multiple_of(MIN_LANES).clamp(MIN_LANES, TILE)
    } else {
        TILE
    };
    let blocks_per_row = lanes_axis.div_ceil(width);
    let block = |(regs, s): &mut (Registers, Scratch), item: usize| {
        let (row, first) = (item / blocks_per_row, item % blocks_per_row * width);
        let n = width.min(lanes_axis - first);
        for (k, v) in b.operands.iter().enumerate() {
            s.base[k] = v.offset + offset_of(row, &outer[..no - 1], &v.strides[..no - 1]) + first as isize * op_lane[k];
        }
        for (j, v) in b.outputs.iter().enumerate() {
            s.out_base[j] =
                v.offset + offset_of(row, &outer[..no - 1], &v.strides[..no - 1]) + first as isize * out_lane[j];
        }
        tile::eval(simd, &p.body, &ph.pre, regs, n, srcs, &s.base, &op_lane);
        for (full, reduces, after) in &ph.sweeps {
            s.accs.clear();
            for &i in reduces {
                let Inst::Reduce(c, _) = p.body[i].inst else { unreachable!("only reductions are listed") };
                s.accs.extend(std::iter::repeat_n(start(c), n));
            }
            for r in 0..b.reduce_count {
                for k in 0..s.offs.len() {
                    s.offs[k] = s.base[k] + op_red[r * k_ops + k];
                }
                tile::eval(simd, &p.body, full, regs, n, srcs, &s.offs, &op_lane);
                for (q, &i) in reduces.iter().enumerate() {
                    let Inst::Reduce(c, a) = p.body[i].inst else { continue };
                    fold(simd, c, &mut s.accs[q * n..(q + 1) * n], &regs[a * TILE..a * TILE + n]);
                }
            }
            for (q, &i) in reduces.iter().enumerate() {
                let Inst::Reduce(c, _) = p.body[i].inst else { continue };
                for t in 0..n {
                    regs[i * TILE + t] = value(c, s.accs[q * n + t], b.reduce_count);
                }
            }
            tile::eval(simd, &p.body, after, regs, n, srcs, &s.base, &op_lane);
        }
        if !ph.full_outputs.is_empty() {
            for r in 0..b.reduce_count {
                for k in 0..s.offs.len() {
                    s.offs[k] = s.base[k] + op_red[r * k_ops + k];
                }
                tile::eval(simd, &p.body, &ph.last, regs, n, srcs, &s.offs, &op_lane);
                for &j in &ph.full_outputs {
                    s.oo[j] = s.out_base[j] + out_red[r * k_outs + j];
                    let reg = &regs[p.outputs[j].source * TILE..][..n];
                    tile::store(dsts[j], s.oo[j], out_lane[j], reg);
                }
            }
        }
        for &j in &ph.outer_outputs {
            let reg = &regs[p.outputs[j].source * TILE..][..n];
            tile::store(dsts[j], s.out_base[j], out_lane[j], reg);
        }
    };
    let init = || {
        let (o, d) = (srcs.len(), dsts.len());
        let s = Scratch { base: vec![0; o], out_base: vec![0; d], offs: vec![0; o], oo: vec![0; d], accs: Vec::new() };
        (Registers::new(p.body.len() * TILE), s)
    };
    let items = rows * blocks_per_row;
    if items == 1 || threads == 1 || work <= super::elementwise::CHUNK {
        let mut state = init();
        for item in 0..items {
            block(&mut state, item);
        }
    } else {
        (0..items).into_par_iter().for_each_init(init, block);
    }
}
