//! Reductions over short rows, with the outer points as the lanes.
//!
//! [`super::reduce`] walks one outer point at a time and sweeps its
//! reduction axes in tiles: right for long rows, but a LayerNormalization
//! over 16 channels or a Softmax over 7 keys then pays the per-point cost
//! (offsets, a handful of tile evaluations, accumulators) for a few dozen
//! flops, and rows shorter than a vector run scalar. Here a tile's lanes
//! are up to [`TILE`] consecutive outer points (across any outer axes):
//! each reduction point is one evaluation of the sweep's instructions over
//! all the lanes, folded lane by lane into per-lane accumulators; values of
//! the outer axes alone are simply lane values, never splatted. Operands
//! are gathered into their registers by per-lane offsets (a copy where the
//! lanes are contiguous), so the rest of the body runs on the vectorized
//! tile evaluator. Results are the row-wise runner's (sums in `f64` per lane).

use super::bind::{offset_of, Bound};
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{Combiner, Inst, Program};
use rayon::prelude::*;

/// Rows this short or shorter may run with lanes over the outer points.
const SHORT_ROW: usize = 64;

/// Whether `b` suits the lane-wise runner: short reduction rows, and at
/// least as many outer points as a row is long (the lanes are then the
/// wider vector; measured on the exports' LayerNormalizations and Softmaxes).
pub fn suits(b: &Bound) -> bool {
    let points: usize = b.extents[..b.n_outer].iter().product();
    b.reduce_count <= SHORT_ROW && points >= b.reduce_count
}

/// A list of instructions split for the lane-wise runner: the operand
/// loads it gathers itself (instruction, operand), and the rest, which the
/// tile evaluator runs.
pub struct Split {
    loads: Vec<(usize, usize)>,
    rest: Vec<usize>,
}

impl Split {
    /// `list` (instructions of `p`) split into loads and the rest.
    pub fn of(p: &Program, list: &[usize]) -> Split {
        let mut s = Split { loads: Vec::new(), rest: Vec::new() };
        for &i in list {
            match p.body[i].inst {
                Inst::Load(k) => s.loads.push((i, k)),
                _ => s.rest.push(i),
            }
        }
        s
    }
}

/// The phases of a reduction program ([`super::reduce::Phases`]) split for
/// the lane-wise runner, worked out once.
pub struct LanePhases {
    pre: Split,
    sweeps: Vec<(Split, Vec<usize>, Split)>,
    last: Split,
}

impl LanePhases {
    /// The lane-wise form of the phases (`pre`, `sweeps`, `last`) of `p`.
    pub fn of(
        p: &Program,
        pre: &[usize],
        sweeps: &[(Vec<usize>, Vec<usize>, Vec<usize>)],
        last: &[usize],
    ) -> LanePhases {
        LanePhases {
            pre: Split::of(p, pre),
            sweeps: sweeps.iter().map(|(f, r, a)| (Split::of(p, f), r.clone(), Split::of(p, a))).collect(),
            last: Split::of(p, last),
        }
    }
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

/// How the lanes of a block lie in one tensor: each lane's offset, and
/// whether they are contiguous (a copy) or all the same (a fill).
struct Lanes {
    offs: Vec<isize>,
    contiguous: bool,
    same: bool,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes { offs: Vec::with_capacity(TILE), contiguous: false, same: false }
    }

    /// The lanes of outer points `first..first + n` of `outer` under `strides`.
    fn set(&mut self, first: usize, n: usize, outer: &[usize], strides: &[isize], offset: isize) {
        self.offs.clear();
        let r = outer.len();
        let mut index = vec_index(first, outer);
        let mut off = offset + offset_of(first, outer, strides);
        for _ in 0..n {
            self.offs.push(off);
            // odometer step over the outer axes
            let mut a = r;
            while a > 0 {
                a -= 1;
                index[a] += 1;
                off += strides[a];
                if index[a] < outer[a] {
                    break;
                }
                off -= strides[a] * outer[a] as isize;
                index[a] = 0;
            }
        }
        let d = |t: usize| self.offs[t + 1] - self.offs[t];
        self.contiguous = (0..n.saturating_sub(1)).all(|t| d(t) == 1);
        self.same = (0..n.saturating_sub(1)).all(|t| d(t) == 0);
    }
}

/// The multi-index of point `index` of `extents` (C order).
fn vec_index(mut index: usize, extents: &[usize]) -> smallvec_index::Index {
    let mut out = smallvec_index::Index::zeros(extents.len());
    for a in (0..extents.len()).rev() {
        out[a] = index % extents[a];
        index /= extents[a];
    }
    out
}

/// A multi-index without a heap allocation for the usual ranks.
mod smallvec_index {
    /// Up to 8 axes inline.
    pub struct Index {
        inline: [usize; 8],
        heap: Vec<usize>,
        rank: usize,
    }

    impl Index {
        pub fn zeros(rank: usize) -> Index {
            Index { inline: [0; 8], heap: if rank > 8 { vec![0; rank] } else { Vec::new() }, rank }
        }
    }

    impl std::ops::Index<usize> for Index {
        type Output = usize;
        fn index(&self, a: usize) -> &usize {
            if self.rank > 8 {
                &self.heap[a]
            } else {
                &self.inline[a]
            }
        }
    }

    impl std::ops::IndexMut<usize> for Index {
        fn index_mut(&mut self, a: usize) -> &mut usize {
            if self.rank > 8 {
                &mut self.heap[a]
            } else {
                &mut self.inline[a]
            }
        }
    }
}

/// Fills the registers of `split`'s loads for `n` lanes, each operand read
/// at its lanes' offsets plus `extra[k]`.
///
/// # Safety
/// Every lane's element must be inside its operand.
unsafe fn gather(split: &Split, regs: &mut [f32], n: usize, srcs: &[Src], lanes: &[Lanes], extra: &[isize]) {
    for &(i, k) in &split.loads {
        let out = &mut regs[i * TILE..i * TILE + n];
        let l = &lanes[k];
        let at = extra[k];
        match srcs[k] {
            Src::F32(p) if l.contiguous => std::ptr::copy_nonoverlapping(p.offset(l.offs[0] + at), out.as_mut_ptr(), n),
            Src::F32(p) if l.same => out.fill(*p.offset(l.offs[0] + at)),
            Src::F32(p) => {
                for (o, &off) in out.iter_mut().zip(&l.offs) {
                    *o = *p.offset(off + at);
                }
            }
            Src::Bool(p) => {
                for (o, &off) in out.iter_mut().zip(&l.offs) {
                    *o = f32::from(u8::from(*p.offset(off + at)));
                }
            }
        }
    }
}

/// Writes `n` lanes of `reg` to `dst` at the lanes' offsets plus `at`.
///
/// # Safety
/// Every lane's element must be inside the output.
unsafe fn scatter(dst: Dst, lanes: &Lanes, at: isize, reg: &[f32]) {
    match dst {
        Dst::F32(p) if lanes.contiguous => {
            std::ptr::copy_nonoverlapping(reg.as_ptr(), p.offset(lanes.offs[0] + at), reg.len())
        }
        Dst::F32(p) => {
            for (&v, &off) in reg.iter().zip(&lanes.offs) {
                *p.offset(off + at) = v;
            }
        }
        Dst::Bool(p) => {
            for (&v, &off) in reg.iter().zip(&lanes.offs) {
                *p.offset(off + at) = v != 0.0;
            }
        }
    }
}

/// One worker's registers, lanes and accumulators.
struct Scratch {
    regs: Registers,
    op_lanes: Vec<Lanes>,
    out_lanes: Vec<Lanes>,
    accs: Vec<f64>,
}

/// Runs reduction program `p` bound as `b` (for which [`suits`] holds) in
/// phases `ph` (with `lp` their lane-wise split).
///
/// # Safety
/// As [`super::elementwise::run`].
pub unsafe fn run(
    p: &Program,
    ph: &super::reduce::Phases,
    lp: &LanePhases,
    b: &Bound,
    srcs: &[Src],
    dsts: &[Dst],
    simd: bool,
) {
    let no = b.n_outer;
    let outer = &b.extents[..no];
    let red = &b.extents[no..];
    let points: usize = outer.iter().product();
    let count = b.reduce_count;
    let zero = vec![0isize; srcs.len()];
    // Per reduction point, each operand's and output's offset from the lane's.
    let (k_ops, k_outs) = (b.operands.len(), b.outputs.len());
    let op_red: Vec<isize> =
        (0..count).flat_map(|r| b.operands.iter().map(move |v| offset_of(r, red, &v.strides[no..]))).collect();
    let out_red: Vec<isize> =
        (0..count).flat_map(|r| b.outputs.iter().map(move |v| offset_of(r, red, &v.strides[no..]))).collect();
    // Blocks of lanes: whole tiles, smaller when that leaves threads idle.
    let threads = rayon::current_num_threads();
    let work = points.saturating_mul(count.max(1));
    let parallel = threads > 1 && work > super::elementwise::CHUNK;
    let width = if parallel { points.div_ceil(threads * 2).next_multiple_of(8).clamp(8, TILE) } else { TILE };
    let block = |s: &mut Scratch, item: usize| {
        let first = item * width;
        let n = width.min(points - first);
        for (l, v) in s.op_lanes.iter_mut().zip(&b.operands) {
            l.set(first, n, outer, &v.strides[..no], v.offset);
        }
        for (l, v) in s.out_lanes.iter_mut().zip(&b.outputs) {
            l.set(first, n, outer, &v.strides[..no], v.offset);
        }
        let regs = &mut s.regs[..];
        gather(&lp.pre, regs, n, srcs, &s.op_lanes, &zero);
        tile::eval(simd, &p.body, &lp.pre.rest, regs, n, srcs, &zero, &zero);
        for (full, reduces, after) in &lp.sweeps {
            s.accs.clear();
            for &i in reduces {
                let Inst::Reduce(c, _) = p.body[i].inst else { unreachable!("only reductions are listed") };
                s.accs.extend(std::iter::repeat_n(start(c), n));
            }
            for r in 0..count {
                gather(full, regs, n, srcs, &s.op_lanes, &op_red[r * k_ops..(r + 1) * k_ops]);
                tile::eval(simd, &p.body, &full.rest, regs, n, srcs, &zero, &zero);
                for (q, &i) in reduces.iter().enumerate() {
                    let Inst::Reduce(c, a) = p.body[i].inst else { continue };
                    fold(simd, c, &mut s.accs[q * n..(q + 1) * n], &regs[a * TILE..a * TILE + n]);
                }
            }
            for (q, &i) in reduces.iter().enumerate() {
                let Inst::Reduce(c, _) = p.body[i].inst else { continue };
                for t in 0..n {
                    regs[i * TILE + t] = value(c, s.accs[q * n + t], count);
                }
            }
            gather(after, regs, n, srcs, &s.op_lanes, &zero);
            tile::eval(simd, &p.body, &after.rest, regs, n, srcs, &zero, &zero);
        }
        if !ph.full_outputs.is_empty() {
            for r in 0..count {
                gather(&lp.last, regs, n, srcs, &s.op_lanes, &op_red[r * k_ops..(r + 1) * k_ops]);
                tile::eval(simd, &p.body, &lp.last.rest, regs, n, srcs, &zero, &zero);
                for &j in &ph.full_outputs {
                    let reg = &regs[p.outputs[j].source * TILE..][..n];
                    scatter(dsts[j], &s.out_lanes[j], out_red[r * k_outs + j], reg);
                }
            }
        }
        for &j in &ph.outer_outputs {
            let reg = &regs[p.outputs[j].source * TILE..][..n];
            scatter(dsts[j], &s.out_lanes[j], 0, reg);
        }
    };
    let init = || Scratch {
        regs: Registers::new(p.body.len() * TILE),
        op_lanes: (0..srcs.len()).map(|_| Lanes::new()).collect(),
        out_lanes: (0..dsts.len()).map(|_| Lanes::new()).collect(),
        accs: Vec::new(),
    };
    let items = points.div_ceil(width);
    if items == 1 || !parallel {
        let mut s = init();
        for item in 0..items {
            block(&mut s, item);
        }
    } else {
        (0..items).into_par_iter().for_each_init(init, block);
    }
}
