//! Running a program with reduction axes. For each point of the outer
//! axes, the reduction axes are swept once per nesting depth of its
//! reductions (Softmax: the max, then the sum of exponentials), each sweep
//! evaluating in tiles only the full-space instructions that depth needs
//! and folding them into accumulators; values of the outer axes alone are
//! computed between sweeps and held as splats; a last sweep writes the
//! full-space outputs. Outer points are spread over the current rayon pool.
//! Sums accumulate in `f32` lanes within a tile and in `f64` across tiles.

use super::bind::{offset_of, Bound};
use super::elementwise::CHUNK;
use super::reduce_lanes::LanePhases;
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{Combiner, Inst, Level, Program};
use rayon::prelude::*;

/// The order of evaluation of a reduction program, worked out once when the
/// program is bound.
pub struct Phases {
    /// Outer-level instructions without reductions.
    pub pre: Vec<usize>,
    /// Per depth: full-level instructions to evaluate in its sweep, its
    /// reductions, and the outer-level instructions after it.
    pub sweeps: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)>,
    /// Full-level instructions the full-space outputs need.
    pub last: Vec<usize>,
    /// Outputs written in the last sweep, and those written per outer point.
    pub full_outputs: Vec<usize>,
    pub outer_outputs: Vec<usize>,
    /// The same, split for the lane-wise runner.
    pub lanes: LanePhases,
    /// Where Softmax's steps are, when the program is one the row runner
    /// computes ([`super::softmax_rows`]).
    pub softmax: Option<super::softmax_rows::SoftmaxRows>,
}

/// The phases of reduction program `p`.
pub fn phases(p: &Program) -> Phases {
    let levels = p.levels();
    let depths = p.depths();
    let max_depth = depths.iter().copied().max().unwrap_or(0);
    // The full-level instructions `roots` need, through full-level arguments.
    let needed = |roots: &[usize]| -> Vec<usize> {
        let mut need = vec![false; p.body.len()];
        let mut stack: Vec<usize> = roots.to_vec();
        while let Some(i) = stack.pop() {
            for a in p.body[i].inst.args() {
                if levels[a] == Level::Full && !matches!(p.body[a].inst, Inst::Reduce(..)) && !need[a] {
                    need[a] = true;
                    stack.push(a);
                }
            }
        }
        for &r in roots {
            if levels[r] == Level::Full && !matches!(p.body[r].inst, Inst::Reduce(..)) {
                need[r] = true;
            }
        }
        (0..p.body.len()).filter(|&i| need[i]).collect()
    };
    let is_reduce = |i: usize| matches!(p.body[i].inst, Inst::Reduce(..));
    let pre: Vec<usize> =
        (0..p.body.len()).filter(|&i| levels[i] != Level::Full && depths[i] == 0 && !is_reduce(i)).collect();
    let mut sweeps = Vec::new();
    for d in 1..=max_depth {
        let reduces: Vec<usize> = (0..p.body.len()).filter(|&i| is_reduce(i) && depths[i] == d).collect();
        let full = needed(&reduces);
        let after =
            (0..p.body.len()).filter(|&i| levels[i] != Level::Full && depths[i] == d && !is_reduce(i)).collect();
        sweeps.push((full, reduces, after));
    }
    let out_levels = super::bind::output_levels(p);
    let full_outputs: Vec<usize> = (0..p.outputs.len()).filter(|&j| out_levels[j] == Level::Full).collect();
    let outer_outputs = (0..p.outputs.len()).filter(|&j| out_levels[j] != Level::Full).collect();
    let roots: Vec<usize> = full_outputs.iter().map(|&j| p.outputs[j].source).collect();
    let last = needed(&roots);
    let lanes = LanePhases::of(p, &pre, &sweeps, &last);
    let mut phases = Phases { pre, sweeps, last, full_outputs, outer_outputs, lanes, softmax: None };
    phases.softmax = super::softmax_rows::SoftmaxRows::of(p, &phases);
    phases
}

/// A reduction's running value.
#[derive(Clone, Copy)]
pub(in crate::simd) enum Acc {
    Sum(f64),
    Prod(f64),
    Max(f32),
    Min(f32),
}

impl Acc {
    pub(in crate::simd) fn new(c: Combiner) -> Acc {
        match c {
            Combiner::Sum | Combiner::Mean => Acc::Sum(0.0),
            Combiner::Prod => Acc::Prod(1.0),
            Combiner::Max => Acc::Max(f32::NEG_INFINITY),
            Combiner::Min => Acc::Min(f32::INFINITY),
        }
    }

    pub(in crate::simd) fn fold(&mut self, simd: bool, xs: &[f32]) {
        match self {
            Acc::Sum(s) => *s += sum(simd, xs),
            Acc::Prod(s) => *s = xs.iter().fold(*s, |a, &x| a * f64::from(x)),
            Acc::Max(m) => *m = extreme(simd, *m, xs, true),
            Acc::Min(m) => *m = extreme(simd, *m, xs, false),
        }
    }

    pub(in crate::simd) fn value(self, c: Combiner, count: usize) -> f32 {
        match self {
            Acc::Sum(s) if c == Combiner::Mean => (s / count as f64) as f32,
            Acc::Sum(s) | Acc::Prod(s) => s as f32,
            Acc::Max(m) | Acc::Min(m) => m,
        }
    }
}

/// The largest (`max`) or smallest of `m` and `xs`, NaN if any is NaN.
pub(in crate::simd) fn extreme(simd: bool, m: f32, xs: &[f32], max: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { extreme_avx2(m, xs, max) };
    }
    let _ = simd;
    extreme_body(m, xs, max)
}

/// [`extreme`] one float at a time (also the lane-wise runner's fold).
#[inline(always)]
pub(in crate::simd) fn extreme_body(m: f32, xs: &[f32], max: bool) -> f32 {
    let pick = |a: f32, x: f32| match (a.is_nan() || x.is_nan(), max) {
        (true, _) => f32::NAN,
        (false, true) => a.max(x),
        (false, false) => a.min(x),
    };
    xs.iter().fold(m, |a, &x| pick(a, x))
}

/// [`extreme`] eight lanes at a time (a row-wise GlobalMaxPool went one
/// float at a time, each checked for NaN: 64×56² in 0.37 ms), NaN tracked
/// beside the lanes; the lanes and the row's last values are then folded
/// as [`extreme_body`] does.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn extreme_avx2(m: f32, xs: &[f32], max: bool) -> f32 {
    use std::arch::x86_64::*;
    if m.is_nan() {
        return f32::NAN;
    }
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    let mut acc = _mm256_set1_ps(m);
    let mut nan = _mm256_setzero_ps();
    for c in chunks {
        let v = _mm256_loadu_ps(c.as_ptr());
        nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
        acc = if max { _mm256_max_ps(acc, v) } else { _mm256_min_ps(acc, v) };
    }
    if _mm256_movemask_ps(nan) != 0 {
        return f32::NAN;
    }
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    extreme_body(extreme_body(m, &lanes, max), rest, max)
}

fn sum(simd: bool, xs: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { sum_avx2(xs) };
    }
    let _ = simd;
    sum_body(xs)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn sum_avx2(xs: &[f32]) -> f64 {
    sum_body(xs)
}

#[inline(always)]
fn sum_body(xs: &[f32]) -> f64 {
    let mut lanes = [0f32; 16];
    let mut chunks = xs.chunks_exact(16);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&x| f64::from(x)).sum();
    lanes.iter().map(|&l| f64::from(l)).sum::<f64>() + tail
}

/// Offsets and accumulators of one worker, allocated once per run rather
/// than per output point.
struct Scratch {
    base: Vec<isize>,
    out_base: Vec<isize>,
    row_off: Vec<isize>,
    out_row: Vec<isize>,
    offs: Vec<isize>,
    oo: Vec<isize>,
    accs: Vec<Acc>,
}

impl Scratch {
    fn new(operands: usize, outputs: usize) -> Scratch {
        let o = || vec![0isize; operands];
        let d = || vec![0isize; outputs];
        Scratch { base: o(), out_base: d(), row_off: o(), out_row: d(), offs: o(), oo: d(), accs: Vec::new() }
    }
}

/// Runs reduction program `p` bound as `b` in phases `ph` (of `p`): each
/// outer point's one contiguous run of dense operands as one flat span
/// ([`super::reduce_flat`]), rows short enough with lanes over the outer
/// points ([`super::reduce_lanes`]), a Softmax's longer rows through a row
/// buffer ([`super::softmax_rows`]), the others one outer point at a time.
///
/// # Safety
/// As [`super::elementwise::run`].
pub unsafe fn run(p: &Program, ph: &Phases, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    if b.empty {
        return;
    }
    if super::reduce_flat::suits(p, ph, b, srcs, dsts) {
        return super::reduce_flat::run(p, ph, b, srcs, dsts, simd);
    }
    if super::reduce_lanes::suits(b) {
        return super::reduce_lanes::run(p, ph, &ph.lanes, b, srcs, dsts, simd);
    }
    if let Some(softmax) = ph.softmax.as_ref().filter(|_| super::softmax_rows::SoftmaxRows::suits(b)) {
        return super::softmax_rows::run(p, ph, softmax, b, srcs, dsts, simd);
    }
    let outer = &b.extents[..b.n_outer];
    let red = &b.extents[b.n_outer..];
    let n_points: usize = outer.iter().product();
    let rr = red.len();
    let inner = if rr == 0 { 1 } else { red[rr - 1] };
    let red_rows: usize = red[..rr.saturating_sub(1)].iter().product();
    let red_outer = &red[..rr.saturating_sub(1)];
    let inner_of = |s: &[isize]| if rr == 0 { 0 } else { s[s.len() - 1] };
    let op_inner: Vec<isize> = b.operands.iter().map(|v| inner_of(&v.strides)).collect();
    let out_inner: Vec<isize> = b.outputs.iter().map(|v| inner_of(&v.strides)).collect();
    let zero = vec![0isize; srcs.len()];
    // Tiles of a sweep hold at most this many points: splats fill no more.
    let span = inner.clamp(1, TILE);
    let splat = |regs: &mut [f32], list: &[usize]| {
        for &i in list {
            let v = regs[i * TILE];
            regs[i * TILE..i * TILE + span].fill(v);
        }
    };
    // One sweep of the reduction axes from per-operand offsets `s.base`,
    // calling `each(regs, n, tile_start_offsets_of_outputs)` per tile.
    let sweep = |regs: &mut Registers,
                 s: &mut Scratch,
                 list: &[usize],
                 each: &mut dyn FnMut(&mut Registers, usize, &[isize])| {
        for row in 0..red_rows {
            for (k, v) in b.operands.iter().enumerate() {
                s.row_off[k] =
                    s.base[k] + offset_of(row, red_outer, &v.strides[b.n_outer..b.n_outer + red_outer.len()]);
            }
            for (j, v) in b.outputs.iter().enumerate() {
                s.out_row[j] =
                    s.out_base[j] + offset_of(row, red_outer, &v.strides[b.n_outer..b.n_outer + red_outer.len()]);
            }
            let mut c = 0;
            while c < inner {
                let n = TILE.min(inner - c);
                for k in 0..s.offs.len() {
                    s.offs[k] = s.row_off[k] + c as isize * op_inner[k];
                }
                for j in 0..s.oo.len() {
                    s.oo[j] = s.out_row[j] + c as isize * out_inner[j];
                }
                tile::eval(simd, &p.body, list, regs, n, srcs, &s.offs, &op_inner);
                each(regs, n, &s.oo);
                c += n;
            }
        }
    };
    let point = |(regs, s): &mut (Registers, Scratch), o: usize| {
        for (k, v) in b.operands.iter().enumerate() {
            s.base[k] = v.offset + offset_of(o, outer, &v.strides[..b.n_outer]);
        }
        for (j, v) in b.outputs.iter().enumerate() {
            s.out_base[j] = v.offset + offset_of(o, outer, &v.strides[..b.n_outer]);
        }
        tile::eval(simd, &p.body, &ph.pre, regs, 1, srcs, &s.base, &zero);
        splat(regs, &ph.pre);
        for (full, reduces, after) in &ph.sweeps {
            s.accs.clear();
            s.accs.extend(reduces.iter().map(|&i| match p.body[i].inst {
                Inst::Reduce(c, _) => Acc::new(c),
                _ => unreachable!("only reductions are listed"),
            }));
            let mut accs = std::mem::take(&mut s.accs);
            sweep(regs, s, full, &mut |regs, n, _| {
                for (acc, &i) in accs.iter_mut().zip(reduces) {
                    if let Inst::Reduce(_, a) = p.body[i].inst {
                        acc.fold(simd, &regs[a * TILE..][..n]);
                    }
                }
            });
            for (acc, &i) in accs.iter().zip(reduces) {
                if let Inst::Reduce(c, _) = p.body[i].inst {
                    regs[i * TILE..i * TILE + span].fill(acc.value(c, b.reduce_count));
                }
            }
            s.accs = accs;
            tile::eval(simd, &p.body, after, regs, 1, srcs, &s.base, &zero);
            splat(regs, after);
        }
        if !ph.full_outputs.is_empty() {
            sweep(regs, s, &ph.last, &mut |regs, n, oo| {
                for &j in &ph.full_outputs {
                    let reg = &regs[p.outputs[j].source * TILE..][..n];
                    tile::store(dsts[j], oo[j], out_inner[j], reg);
                }
            });
        }
        for &j in &ph.outer_outputs {
            let reg = &regs[p.outputs[j].source * TILE..][..1];
            tile::store(dsts[j], s.out_base[j], 0, reg);
        }
    };
    let init = || (Registers::new(p.body.len() * TILE), Scratch::new(srcs.len(), dsts.len()));
    let work = n_points.saturating_mul(b.reduce_count.max(1));
    if work <= CHUNK || n_points == 1 || rayon::current_num_threads() == 1 {
        let mut state = init();
        for o in 0..n_points {
            point(&mut state, o);
        }
    } else {
        let per = (CHUNK / b.reduce_count.max(1)).max(1);
        (0..n_points.div_ceil(per)).into_par_iter().for_each_init(init, |state, item| {
            for o in item * per..((item + 1) * per).min(n_points) {
                point(state, o);
            }
        });
    }
}
