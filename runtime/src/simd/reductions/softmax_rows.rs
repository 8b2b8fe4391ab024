//! Softmax over rows longer than the lane-wise runner takes (attention at
//! sequence lengths past 128: ViT's 197, Whisper's 1500), in three passes
//! over one row buffer instead of the generic runner's three sweeps that
//! each evaluate the program again: the input expression `x` (the scores,
//! with whatever the program adds to them first, as a mask) is evaluated
//! once into the buffer while its maximum `m` is taken, the buffer is
//! replaced by `e = exp(x − m)` while their sum `s` is taken, and the
//! outputs are evaluated from `y = e · (1/s)` (and whatever the program
//! does after the division, as `Where(IsNaN(y), 0, y)`). The exponential is
//! computed once per element, not twice, and the buffer stays in L1/L2. A
//! plain Softmax of a contiguous row into a contiguous row (the common
//! case) skips the buffer: the maximum is read from the operand, the
//! exponentials are written straight into the output and scaled there.
//!
//! The program must be exactly Softmax's lowering around `x` — `max x`,
//! `x − m`, `exp`, `sum`, `e / s` — with no other reduction, and the
//! instructions after the division must read nothing of the row but `y`.

use super::bind::{offset_of, Bound};
use super::elementwise::CHUNK;
use super::math;
use super::reduce::Phases;
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{BinaryOp, Combiner, Inst, Level, Program, UnaryOp};
use rayon::prelude::*;

/// Where Softmax's steps are in a program's body.
#[derive(Clone, Debug)]
pub struct SoftmaxRows {
    /// The softmax's input `x`.
    x: usize,
    /// The maximum and the sum (reductions), filled per row.
    max: usize,
    sum: usize,
    /// The quotient `y = e / s`.
    y: usize,
    /// Full-level instructions `x` needs, in order (itself included).
    prefix: Vec<usize>,
    /// Full-level instructions the outputs need beyond `y`, in order.
    suffix: Vec<usize>,
}

impl SoftmaxRows {
    /// Softmax's steps in `p` (its phases `ph`), or `None` when `p` is not
    /// a softmax this runner computes.
    pub fn of(p: &Program, ph: &Phases) -> Option<SoftmaxRows> {
        if ph.sweeps.len() != 2 || !ph.outer_outputs.is_empty() || ph.full_outputs.is_empty() {
            return None;
        }
        let (max_list, sum_list) = (&ph.sweeps[0].1, &ph.sweeps[1].1);
        let (&[max], &[sum]) = (max_list.as_slice(), sum_list.as_slice()) else { return None };
        let Inst::Reduce(Combiner::Max, x) = p.body[max].inst else { return None };
        let Inst::Reduce(Combiner::Sum, e) = p.body[sum].inst else { return None };
        let Inst::Unary(UnaryOp::Exp, d) = p.body[e].inst else { return None };
        if p.body[d].inst != Inst::Binary(BinaryOp::Sub, x, max) {
            return None;
        }
        let y = p.body.iter().position(|i| i.inst == Inst::Binary(BinaryOp::Div, e, sum))?;
        let levels = p.levels();
        let prefix = ph.sweeps[0].0.clone();
        if prefix.last() != Some(&x) || !prefix.iter().all(|&i| levels[i] == Level::Full) {
            return None;
        }
        // The row's values other than `y`: what the outputs must not read.
        let row: Vec<usize> = prefix.iter().copied().chain([d, e]).collect();
        let suffix: Vec<usize> = ph.last.iter().copied().filter(|&i| i != y && !row.contains(&i)).collect();
        let reads_row = |i: usize| p.body[i].inst.args().iter().any(|a| row.contains(a));
        if suffix.iter().any(|&i| reads_row(i))
            || ph.full_outputs.iter().any(|&j| row.contains(&p.outputs[j].source))
            || !ph.last.contains(&y)
        {
            return None;
        }
        Some(SoftmaxRows { x, max, sum, y, prefix, suffix })
    }

    /// Whether the binding suits this runner: one reduction axis, rows
    /// longer than the lane-wise runner's.
    pub fn suits(b: &Bound) -> bool {
        b.extents.len() == b.n_outer + 1 && b.reduce_count > super::reduce_lanes::SHORT_ROW
    }
}

/// Runs softmax program `p` (phases `ph`, steps `s`) bound as `b`.
///
/// # Safety
/// As [`super::elementwise::run`].
pub unsafe fn run(p: &Program, ph: &Phases, s: &SoftmaxRows, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    let outer = &b.extents[..b.n_outer];
    let len = b.extents[b.n_outer];
    let n_points: usize = outer.iter().product();
    let op_inner: Vec<isize> = b.operands.iter().map(|v| v.strides[b.n_outer]).collect();
    let out_inner: Vec<isize> = b.outputs.iter().map(|v| v.strides[b.n_outer]).collect();
    let zero = vec![0isize; srcs.len()];
    let direct = direct_rows(p, ph, s, srcs, dsts, &op_inner, &out_inner);
    let point = |(regs, row, base, out_base, offs): &mut State, o: usize| {
        for (k, v) in b.operands.iter().enumerate() {
            base[k] = v.offset + offset_of(o, outer, &v.strides[..b.n_outer]);
        }
        for (j, v) in b.outputs.iter().enumerate() {
            out_base[j] = v.offset + offset_of(o, outer, &v.strides[..b.n_outer]);
        }
        let splat = |regs: &mut Registers, list: &[usize]| {
            for &i in list {
                let v = regs[i * TILE];
                regs[i * TILE..(i + 1) * TILE].fill(v);
            }
        };
        if let Some((k, j)) = direct {
            if let (Src::F32(src), Dst::F32(dst)) = (srcs[k], dsts[j]) {
                return softmax_row(simd, src.offset(base[k]), dst.offset(out_base[j]), len);
            }
        }
        tile::eval(simd, &p.body, &ph.pre, regs, 1, srcs, base, &zero);
        splat(regs, &ph.pre);
        // x into the row, and its maximum
        let mut m = f32::NEG_INFINITY;
        for c in (0..len).step_by(TILE) {
            let n = TILE.min(len - c);
            for k in 0..offs.len() {
                offs[k] = base[k] + c as isize * op_inner[k];
            }
            tile::eval(simd, &p.body, &s.prefix, regs, n, srcs, offs, &op_inner);
            let xs = &regs[s.x * TILE..][..n];
            row[c..c + n].copy_from_slice(xs);
            m = super::reduce::extreme(simd, m, xs, true);
        }
        regs[s.max * TILE..(s.max + 1) * TILE].fill(m);
        tile::eval(simd, &p.body, &ph.sweeps[0].2, regs, 1, srcs, base, &zero);
        splat(regs, &ph.sweeps[0].2);
        // e = exp(x - m) in place, and its sum (f32 lanes within a tile, f64 across, as the generic runner sums)
        let mut total = 0f64;
        for chunk in row[..len].chunks_mut(TILE) {
            total += exp_shifted_sum(simd, chunk, m);
        }
        let sum = total as f32;
        regs[s.sum * TILE..(s.sum + 1) * TILE].fill(sum);
        tile::eval(simd, &p.body, &ph.sweeps[1].2, regs, 1, srcs, base, &zero);
        splat(regs, &ph.sweeps[1].2);
        // y = e · (1/s), then what follows it, and the outputs
        let inv = 1.0 / sum;
        for c in (0..len).step_by(TILE) {
            let n = TILE.min(len - c);
            for (r, &e) in regs[s.y * TILE..][..n].iter_mut().zip(&row[c..c + n]) {
                *r = e * inv;
            }
            if !s.suffix.is_empty() {
                for k in 0..offs.len() {
                    offs[k] = base[k] + c as isize * op_inner[k];
                }
                tile::eval(simd, &p.body, &s.suffix, regs, n, srcs, offs, &op_inner);
            }
            for &j in &ph.full_outputs {
                let reg = &regs[p.outputs[j].source * TILE..][..n];
                tile::store(dsts[j], out_base[j] + c as isize * out_inner[j], out_inner[j], reg);
            }
        }
    };
    let init = || -> State {
        let operands = srcs.len();
        (
            Registers::new(p.body.len() * TILE),
            vec![0f32; len],
            vec![0; operands],
            vec![0; dsts.len()],
            vec![0; operands],
        )
    };
    if n_points == 1 || n_points * len <= CHUNK || rayon::current_num_threads() == 1 {
        let mut state = init();
        for o in 0..n_points {
            point(&mut state, o);
        }
    } else {
        let per = (CHUNK / len).max(1);
        (0..n_points.div_ceil(per)).into_par_iter().for_each_init(init, |state, item| {
            for o in item * per..((item + 1) * per).min(n_points) {
                point(state, o);
            }
        });
    }
}

/// For a plain Softmax (`x` a load of a contiguous operand `k`, one
/// contiguous output `j` that is `y`): `k`, `j` and their elements.
fn direct_rows(
    p: &Program,
    ph: &Phases,
    s: &SoftmaxRows,
    srcs: &[Src],
    dsts: &[Dst],
    op_inner: &[isize],
    out_inner: &[isize],
) -> Option<(usize, usize)> {
    let Inst::Load(k) = p.body[s.x].inst else { return None };
    let &[j] = ph.full_outputs.as_slice() else { return None };
    let plain = s.prefix == [s.x] && s.suffix.is_empty() && p.outputs[j].source == s.y;
    match (srcs[k], dsts[j]) {
        (Src::F32(_), Dst::F32(_)) if plain && op_inner[k] == 1 && out_inner[j] == 1 => Some((k, j)),
        _ => None,
    }
}

/// Softmax of the `len` values at `from` into `to` (the same row, or one
/// that does not overlap it), by the tile as the buffered runner sums.
///
/// # Safety
/// Both rows lie inside their buffers; nothing else touches `to`'s.
unsafe fn softmax_row(simd: bool, from: *const f32, to: *mut f32, len: usize) {
    let m = super::reduce::extreme(simd, f32::NEG_INFINITY, std::slice::from_raw_parts(from, len), true);
    let mut total = 0f64;
    for c in (0..len).step_by(TILE) {
        let n = TILE.min(len - c);
        let out = std::slice::from_raw_parts_mut(to.add(c), n);
        total += if from == to.cast_const() {
            exp_shifted_sum(simd, out, m)
        } else {
            exp_shifted_sum_into(simd, std::slice::from_raw_parts(from.add(c), n), out, m)
        };
    }
    let inv = 1.0 / total as f32;
    for y in std::slice::from_raw_parts_mut(to, len) {
        *y *= inv;
    }
}

/// One worker's registers, row buffer and offsets.
type State = (Registers, Vec<f32>, Vec<isize>, Vec<isize>, Vec<isize>);

/// Replaces `xs` by `exp(x − m)` and returns their sum.
fn exp_shifted_sum(simd: bool, xs: &mut [f32], m: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { exp_shifted_sum_avx2(xs, m) };
    }
    let _ = simd;
    exp_shifted_sum_body::<math::Split>(xs, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_sum_avx2(xs: &mut [f32], m: f32) -> f64 {
    exp_shifted_sum_body::<math::Fused>(xs, m)
}

/// `out = exp(xs − m)`, and their sum.
fn exp_shifted_sum_into(simd: bool, xs: &[f32], out: &mut [f32], m: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is set only when the processor has AVX2 and FMA.
        return unsafe { exp_shifted_sum_into_avx2(xs, out, m) };
    }
    let _ = simd;
    exp_shifted_sum_into_body::<math::Split>(xs, out, m)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_shifted_sum_into_avx2(xs: &[f32], out: &mut [f32], m: f32) -> f64 {
    exp_shifted_sum_into_body::<math::Fused>(xs, out, m)
}

/// [`exp_shifted_sum_body`] from one row into another.
#[inline(always)]
fn exp_shifted_sum_into_body<A: math::Arith>(xs: &[f32], out: &mut [f32], m: f32) -> f64 {
    let mut lanes = [0f32; 16];
    let mut from = xs.chunks_exact(16);
    let mut to = out.chunks_exact_mut(16);
    for (c, o) in (&mut from).zip(&mut to) {
        for ((l, y), &x) in lanes.iter_mut().zip(o.iter_mut()).zip(c) {
            *y = math::exp_in::<A>(x - m);
            *l += *y;
        }
    }
    let mut tail = 0f64;
    for (y, &x) in to.into_remainder().iter_mut().zip(from.remainder()) {
        *y = math::exp_in::<A>(x - m);
        tail += f64::from(*y);
    }
    lanes.iter().map(|&l| f64::from(l)).sum::<f64>() + tail
}

/// The exponentials sixteen lanes at a time, each lane summing its own.
#[inline(always)]
fn exp_shifted_sum_body<A: math::Arith>(xs: &mut [f32], m: f32) -> f64 {
    let mut lanes = [0f32; 16];
    let mut chunks = xs.chunks_exact_mut(16);
    for c in &mut chunks {
        for (l, x) in lanes.iter_mut().zip(c.iter_mut()) {
            *x = math::exp_in::<A>(*x - m);
            *l += *x;
        }
    }
    let mut tail = 0f64;
    for x in chunks.into_remainder() {
        *x = math::exp_in::<A>(*x - m);
        tail += f64::from(*x);
    }
    lanes.iter().map(|&l| f64::from(l)).sum::<f64>() + tail
}
