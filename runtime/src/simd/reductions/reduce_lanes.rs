//! Reductions over short rows, many rows to a tile.
//!
//! [`super::reduce`] walks one outer point at a time and sweeps its
//! reduction axes in tiles: right for long rows, but a LayerNormalization
//! over 32 channels or a Softmax over 7 keys then pays the per-point cost
//! (offsets, a handful of tile evaluations, accumulators) for a few dozen
//! flops, and rows shorter than a vector run scalar. Here one tile holds
//! `lanes` outer points (consecutive, across any outer axes) times a chunk
//! of `chunk` reduction points along the innermost reduction axis, laid
//! out lane-major (point `t * chunk + j`), so a sweep over rows of 32 is one
//! evaluation per 8 rows instead of one per row. Every instruction is
//! evaluated over the whole tile (values of the outer axes alone repeat
//! along the chunk); reductions fold each lane's chunk into per-lane
//! accumulators and are written back repeated. Operands are gathered into
//! their registers per lane (a copy where the chunk is contiguous), so the
//! body runs on the vectorized tile evaluator. Sums accumulate in `f32`
//! within a chunk and in `f64` across chunks, as the row-wise runner does.

use super::bind::{offset_of, Bound};
use super::reduce::extreme_body;
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{Combiner, Inst, Program};
use rayon::prelude::*;

/// Rows this long or shorter run many to a tile.
pub(in crate::simd) const SHORT_ROW: usize = 128;

/// Lanes a tile aims for (fewer when the model has fewer outer points).
const MIN_LANES: usize = 8;

/// Whether `b` suits the tiled-rows runner: rows of at most `SHORT_ROW`
/// points, and more than one of them.
pub fn suits(b: &Bound) -> bool {
    let points: usize = b.extents[..b.n_outer].iter().product();
    b.reduce_count <= SHORT_ROW && points >= 2
}

/// The tile's shape for `points` outer points with innermost reduction
/// axis `inner`: (lanes, chunk), the chunk a divisor of `inner` (so a chunk
/// never crosses that axis) as long as it leaves room for the lanes aimed for.
fn tile_shape(points: usize, inner: usize) -> (usize, usize) {
    let most = TILE / points.clamp(1, MIN_LANES);
    let chunk = (1..=inner.min(most)).rev().find(|d| inner % d == 0).unwrap_or(1);
    (points.min(TILE / chunk), chunk)
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

/// Folds register values `xs` (lane `t`'s chunk at `t * chunk`) into
/// per-lane accumulators `acc`.
#[inline(always)]
fn fold_body(c: Combiner, acc: &mut [f64], xs: &[f32], chunk: usize) {
    for (a, xs) in acc.iter_mut().zip(xs.chunks_exact(chunk)) {
        match c {
            Combiner::Sum | Combiner::Mean => *a += f64::from(xs.iter().sum::<f32>()),
            Combiner::Prod => *a = xs.iter().fold(*a, |a, &x| a * f64::from(x)),
            Combiner::Max => *a = f64::from(extreme_body(*a as f32, xs, true)),
            Combiner::Min => *a = f64::from(extreme_body(*a as f32, xs, false)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fold_avx2(c: Combiner, acc: &mut [f64], xs: &[f32], chunk: usize) {
    fold_body(c, acc, xs, chunk)
}

fn fold(simd: bool, c: Combiner, acc: &mut [f64], xs: &[f32], chunk: usize) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { fold_avx2(c, acc, xs, chunk) };
    }
    let _ = simd;
    fold_body(c, acc, xs, chunk)
}

/// The reduction's value from its accumulator over `count` points.
fn value(c: Combiner, acc: f64, count: usize) -> f32 {
    match c {
        Combiner::Mean => (acc / count as f64) as f32,
        _ => acc as f32,
    }
}

/// Where each lane of a block starts in one tensor.
struct Lanes {
    offs: Vec<isize>,
    /// The odometer's multi-index, kept to be reused.
    index: Vec<usize>,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes { offs: Vec::with_capacity(TILE), index: Vec::new() }
    }

    /// The lanes of outer points `first..first + n` of `outer` under `strides`.
    fn set(&mut self, first: usize, n: usize, outer: &[usize], strides: &[isize], offset: isize) {
        self.offs.clear();
        let r = outer.len();
        let index = &mut self.index;
        index.clear();
        let mut rest = first;
        for &e in outer.iter().rev() {
            index.push(rest % e);
            rest /= e;
        }
        index.reverse();
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
    }
}

/// Where a chunk of reduction points lies in each tensor: its first
/// point's offset from the lane's start, and the step between its points.
struct At<'a> {
    first: &'a [isize],
    step: &'a [isize],
    chunk: usize,
}

/// Fills the registers of `split`'s loads for `lanes` lanes of one chunk.
/// On AVX2, an operand whose lanes are consecutive elements and whose
/// chunk is strided (a LayerNormalization over the channels of an NCHW
/// tensor, ConvNeXt's `Transpose+LayerNormalization`) is read eight lanes
/// of eight chunk points at a time and transposed in registers
/// ([`transposed`]); element by element it was the most of the step.
///
/// # Safety
/// Every element read must be inside its operand.
unsafe fn gather(split: &Split, regs: &mut [f32], lanes: &[Lanes], n: usize, srcs: &[Src], at: &At, simd: bool) {
    let cc = at.chunk;
    #[cfg(not(target_arch = "x86_64"))]
    let _ = simd;
    for &(i, k) in &split.loads {
        let out = &mut regs[i * TILE..i * TILE + n * cc];
        let (first, step) = (at.first[k], at.step[k]);
        #[cfg(target_arch = "x86_64")]
        if let Src::F32(p) = srcs[k] {
            // the shape first: the lanes' test is a pass over them
            let offs = &lanes[k].offs[..n];
            if simd
                && step.unsigned_abs() > 1
                && n.is_multiple_of(8)
                && cc.is_multiple_of(8)
                && offs.windows(2).all(|w| w[1] == w[0] + 1)
            {
                transposed(p.offset(offs[0] + first), step, n, cc, out);
                continue;
            }
        }
        for (row, &off) in out.chunks_exact_mut(cc).zip(&lanes[k].offs) {
            match srcs[k] {
                Src::F32(p) => {
                    let p = p.offset(off + first);
                    if step == 1 {
                        std::ptr::copy_nonoverlapping(p, row.as_mut_ptr(), cc);
                    } else if step == 0 {
                        row.fill(*p);
                    } else {
                        for (j, o) in row.iter_mut().enumerate() {
                            *o = *p.offset(j as isize * step);
                        }
                    }
                }
                Src::Bool(p) => {
                    let p = p.offset(off + first);
                    for (j, o) in row.iter_mut().enumerate() {
                        *o = f32::from(u8::from(*p.offset(j as isize * step)));
                    }
                }
            }
        }
    }
}

/// `out[t·cc + j] = p[t + j·step]` for `t < n`, `j < cc` (both multiples of
/// 8), in 8×8 blocks transposed in AVX2 registers.
///
/// # Safety
/// AVX2; every element read is inside the operand; `out` holds `n · cc`.
#[cfg(target_arch = "x86_64")]
unsafe fn transposed(p: *const f32, step: isize, n: usize, cc: usize, out: &mut [f32]) {
    let mut block = [0f32; 64];
    for t0 in (0..n).step_by(8) {
        for j0 in (0..cc).step_by(8) {
            let mut from: [&[f32]; 8] = [&[]; 8];
            for (r, f) in from.iter_mut().enumerate() {
                *f = std::slice::from_raw_parts(p.offset(t0 as isize + (j0 + r) as isize * step), 8);
            }
            super::transpose::transpose8(from, &mut block);
            for u in 0..8 {
                out[(t0 + u) * cc + j0..][..8].copy_from_slice(&block[u * 8..][..8]);
            }
        }
    }
}

/// Writes the tile's register `reg` (lane-major, `chunk` points a lane) to
/// `dst`, lane `t` from `lanes.offs[t] + first` by `step`.
///
/// # Safety
/// Every element written must be inside the output.
unsafe fn scatter(dst: Dst, lanes: &Lanes, first: isize, step: isize, chunk: usize, reg: &[f32]) {
    for (row, &off) in reg.chunks_exact(chunk).zip(&lanes.offs) {
        let at = off + first;
        match dst {
            Dst::F32(p) if step == 1 => std::ptr::copy_nonoverlapping(row.as_ptr(), p.offset(at), chunk),
            Dst::F32(p) => {
                for (j, &v) in row.iter().enumerate() {
                    *p.offset(at + j as isize * step) = v;
                }
            }
            Dst::Bool(p) => {
                for (j, &v) in row.iter().enumerate() {
                    *p.offset(at + j as isize * step) = v != 0.0;
                }
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
    firsts: Vec<f32>,
}

/// Runs reduction program `p` bound as `b` (for which [`suits`] holds) in
/// phases `ph` (with `lp` their split for this runner).
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
    let inner = red.last().copied().unwrap_or(1);
    let (k_ops, k_outs) = (b.operands.len(), b.outputs.len());
    let (mut lanes, chunk) = tile_shape(points, inner);
    // Each operand's and output's offset, from a lane's start, of the
    // first reduction point of every chunk (chunk `r / chunk` for the
    // points `r` the sweeps start at), and its step along the innermost
    // reduction axis.
    let red_offsets = |views: &[super::bind::Strided]| -> Vec<isize> {
        let firsts = (0..count).step_by(chunk);
        firsts.flat_map(|r| views.iter().map(move |v| offset_of(r, red, &v.strides[no..]))).collect()
    };
    let (op_red, out_red) = (red_offsets(&b.operands), red_offsets(&b.outputs));
    let step_of = |v: &super::bind::Strided| if red.is_empty() { 0 } else { v.strides[v.strides.len() - 1] };
    let op_step: Vec<isize> = b.operands.iter().map(step_of).collect();
    let out_step: Vec<isize> = b.outputs.iter().map(step_of).collect();
    let zero_ops = vec![0isize; k_ops];
    // Outer-level values are the same at every point of a lane's chunk.
    let zero_steps = vec![0isize; k_ops];
    let threads = rayon::current_num_threads();
    let parallel = threads > 1 && points.saturating_mul(count.max(1)) > super::elementwise::CHUNK;
    if parallel {
        lanes = lanes.min(points.div_ceil(threads * 2)).max(1);
    }
    let block = |s: &mut Scratch, item: usize| {
        let first = item * lanes;
        let n = lanes.min(points - first);
        let pts = n * chunk;
        for (l, v) in s.op_lanes.iter_mut().zip(&b.operands) {
            l.set(first, n, outer, &v.strides[..no], v.offset);
        }
        for (l, v) in s.out_lanes.iter_mut().zip(&b.outputs) {
            l.set(first, n, outer, &v.strides[..no], v.offset);
        }
        let regs = &mut s.regs[..];
        let outer_at = At { first: &zero_ops, step: &zero_steps, chunk };
        let chunk_at = |r: usize| At { first: &op_red[r / chunk * k_ops..][..k_ops], step: &op_step, chunk };
        gather(&lp.pre, regs, &s.op_lanes, n, srcs, &outer_at, simd);
        tile::eval(simd, &p.body, &lp.pre.rest, regs, pts, srcs, &zero_ops, &zero_ops);
        for (full, reduces, after) in &lp.sweeps {
            s.accs.clear();
            for &i in reduces {
                let Inst::Reduce(c, _) = p.body[i].inst else { unreachable!("only reductions are listed") };
                s.accs.extend(std::iter::repeat_n(start(c), n));
            }
            for r in (0..count).step_by(chunk) {
                gather(full, regs, &s.op_lanes, n, srcs, &chunk_at(r), simd);
                tile::eval(simd, &p.body, &full.rest, regs, pts, srcs, &zero_ops, &zero_ops);
                for (q, &i) in reduces.iter().enumerate() {
                    let Inst::Reduce(c, a) = p.body[i].inst else { continue };
                    fold(simd, c, &mut s.accs[q * n..(q + 1) * n], &regs[a * TILE..a * TILE + pts], chunk);
                }
            }
            for (q, &i) in reduces.iter().enumerate() {
                let Inst::Reduce(c, _) = p.body[i].inst else { continue };
                for t in 0..n {
                    let v = value(c, s.accs[q * n + t], count);
                    regs[i * TILE + t * chunk..i * TILE + (t + 1) * chunk].fill(v);
                }
            }
            gather(after, regs, &s.op_lanes, n, srcs, &outer_at, simd);
            tile::eval(simd, &p.body, &after.rest, regs, pts, srcs, &zero_ops, &zero_ops);
        }
        if !ph.full_outputs.is_empty() {
            for r in (0..count).step_by(chunk) {
                gather(&lp.last, regs, &s.op_lanes, n, srcs, &chunk_at(r), simd);
                tile::eval(simd, &p.body, &lp.last.rest, regs, pts, srcs, &zero_ops, &zero_ops);
                for &j in &ph.full_outputs {
                    let reg = &regs[p.outputs[j].source * TILE..][..pts];
                    scatter(dsts[j], &s.out_lanes[j], out_red[r / chunk * k_outs + j], out_step[j], chunk, reg);
                }
            }
        }
        for &j in &ph.outer_outputs {
            let reg = &regs[p.outputs[j].source * TILE..][..pts];
            scatter(dsts[j], &s.out_lanes[j], 0, 0, 1, &reg_firsts(reg, chunk, &mut s.firsts));
        }
    };
    let init = || Scratch {
        regs: Registers::new(p.body.len() * TILE),
        op_lanes: (0..srcs.len()).map(|_| Lanes::new()).collect(),
        out_lanes: (0..dsts.len()).map(|_| Lanes::new()).collect(),
        accs: Vec::new(),
        firsts: Vec::new(),
    };
    let items = points.div_ceil(lanes);
    if items == 1 || !parallel {
        let mut s = init();
        for item in 0..items {
            block(&mut s, item);
        }
    } else {
        (0..items).into_par_iter().for_each_init(init, block);
    }
}

/// The first point of each lane's chunk of `reg`, into `firsts`.
fn reg_firsts<'a>(reg: &[f32], chunk: usize, firsts: &'a mut Vec<f32>) -> &'a [f32] {
    firsts.clear();
    firsts.extend(reg.iter().step_by(chunk));
    firsts
}
