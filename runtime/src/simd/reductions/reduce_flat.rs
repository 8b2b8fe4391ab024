//! Reductions in which every outer point reduces one contiguous run of the
//! operands, the runs one after the other: a GlobalAveragePool or a mean
//! over the last axes after an activation (EfficientNet's
//! `Sigmoid+Mul+GlobalAveragePool`, SqueezeNet's `Relu+GlobalAveragePool`).
//!
//! [`super::reduce`] walks one outer point at a time (offsets, a tile
//! evaluation and a fold per point) and [`super::reduce_lanes`] gathers
//! short rows into lanes; both pay per point more than a few dozen
//! multiply-adds cost. Here the program's full-level instructions run over
//! the operands as one flat span, a tile at a time, reading the operands
//! where they lie; each tile's values of the reduced instruction are then
//! folded per row (a row that the tiles cut is gathered first, so that
//! every row is summed in the same order), and a row's value is
//! written when it is complete; an output of every point (the
//! activation itself, which a later step reads) is copied from the tile. Sums accumulate as the row-wise
//! runner's do (`Acc`: `f32` lanes within a segment, `f64` across), so
//! the results are within the same bounds of the reference.

use super::bind::Bound;
use super::reduce::{Acc, Phases};
use super::tile::{self, Dst, Placed, Registers, Src, TILE};
use crate::kernel::{Combiner, Inst, Program};
use rayon::prelude::*;

/// Rows up to this long that a tile boundary cuts are copied and folded
/// whole, so that every row's value is summed in the same order wherever
/// the row starts: folded in the segments the tiles cut it into, identical
/// rows (a model's identical channels) gave different roundings, which a
/// Softmax of large, equal logits turned into different probabilities.
const ROW_BUFFER: usize = 1 << 14;

thread_local! {
    /// The gathered row of the last work item on this thread (its allocation kept).
    static PENDING: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Whether strides `s` walk extents `e` in row-major order without gaps
/// (axes of extent 1 may have any stride).
fn dense(e: &[usize], s: &[isize]) -> bool {
    let mut want = 1isize;
    for (&e, &s) in e.iter().zip(s).rev() {
        if e > 1 && s != want {
            return false;
        }
        want *= e as isize;
    }
    true
}

/// Whether bound program `p` (phases `ph`) runs here: one sweep with one
/// reduction (a sum, mean, max or min) and nothing computed after it,
/// every output of the outer points that reduction's value, in `f32`, one
/// after the other; every output of all points (the activation that the
/// pool reads, kept for a later step) computed in the sweep, an `f32`
/// tensor laid out densely; values of no axis computed before it (no loads); and
/// every operand that the sweep loads an `f32` tensor laid out densely over
/// the outer and reduction axes, so that point `(o, r)` lies at
/// `o · count + r` from its start.
pub fn suits(p: &Program, ph: &Phases, b: &Bound, srcs: &[Src], dsts: &[Dst]) -> bool {
    let [(full, reduces, after)] = ph.sweeps.as_slice() else { return false };
    let &[r] = reduces.as_slice() else { return false };
    if !matches!(p.body[r].inst, Inst::Reduce(c, _) if c != Combiner::Prod)
        || !after.is_empty()
        || ph.pre.iter().any(|&i| matches!(p.body[i].inst, Inst::Load(_)))
        || !ph.last.iter().all(|i| full.contains(i) || ph.pre.contains(i))
    {
        return false;
    }
    let outer = &b.extents[..b.n_outer];
    let f32_out = |j: usize| matches!(dsts[j], Dst::F32(_));
    let outputs_dense = ph
        .outer_outputs
        .iter()
        .all(|&j| p.outputs[j].source == r && f32_out(j) && dense(outer, &b.outputs[j].strides[..b.n_outer]))
        && ph.full_outputs.iter().all(|&j| f32_out(j) && dense(&b.extents, &b.outputs[j].strides));
    let loads_dense = full.iter().all(|&i| match p.body[i].inst {
        Inst::Load(k) => matches!(srcs[k], Src::F32(_)) && dense(&b.extents, &b.operands[k].strides),
        _ => true,
    });
    outputs_dense && loads_dense
}

/// Runs `p` (for which [`suits`] holds) over work items of whole rows, on
/// the current rayon pool when there is enough work.
///
/// # Safety
/// As [`super::elementwise::run`].
pub unsafe fn run(p: &Program, ph: &Phases, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    let (full, reduces, _) = &ph.sweeps[0];
    let Inst::Reduce(c, a) = p.body[reduces[0]].inst else { return };
    let count = b.reduce_count;
    let rows: usize = b.extents[..b.n_outer].iter().product();
    let starts: Vec<isize> = b.operands.iter().map(|v| v.offset).collect();
    let ones = vec![1isize; srcs.len()];
    let loaded: Vec<bool> = (0..p.body.len()).map(|i| matches!(p.body[i].inst, Inst::Load(_))).collect();
    // Per worker: registers with the uniform values splatted over a tile.
    let init = || {
        let mut regs = Registers::new(p.body.len() * TILE);
        tile::eval(simd, &p.body, &ph.pre, &mut regs, 1, srcs, &starts, &ones);
        for &i in &ph.pre {
            let v = regs[i * TILE];
            regs[i * TILE..(i + 1) * TILE].fill(v);
        }
        regs
    };
    let item = |regs: &mut Registers, row0: usize, row1: usize| {
        let base = regs.as_mut_ptr();
        let mut at: Vec<*mut f32> = (0..p.body.len()).map(|i| base.add(i * TILE)).collect();
        let mut offs = starts.clone();
        let (mut acc, mut row, mut filled) = (Acc::new(c), row0, 0);
        let (mut flat, end) = (row0 * count, row1 * count);
        // a row that tiles cut is gathered and folded whole (or, when
        // longer than `ROW_BUFFER`, tiles start at each row's start)
        let buffered = count <= ROW_BUFFER;
        let mut pending = PENDING.with(|v| v.take());
        pending.clear();
        while flat < end {
            let n = if buffered { TILE.min(end - flat) } else { TILE.min(count - filled).min(end - flat) };
            for (o, s) in offs.iter_mut().zip(&starts) {
                *o = s + flat as isize;
            }
            for &i in full {
                if let Inst::Load(k) = p.body[i].inst {
                    if let Src::F32(s) = srcs[k] {
                        at[i] = s.offset(offs[k]) as *mut f32;
                    }
                }
            }
            let place = Placed { at: &at, loaded: &loaded, streamed: &[], far: false };
            tile::eval_with(simd, &p.body, full, place, n, srcs, &offs, &ones);
            for &j in &ph.full_outputs {
                if let Dst::F32(d) = dsts[j] {
                    std::ptr::copy(at[p.outputs[j].source], d.offset(b.outputs[j].offset + flat as isize), n);
                }
            }
            let values = std::slice::from_raw_parts(at[a], n);
            let mut t = 0;
            while t < n {
                let take = (count - filled).min(n - t);
                let segment = &values[t..t + take];
                if buffered && take < count {
                    pending.extend_from_slice(segment);
                } else {
                    acc.fold(simd, segment);
                }
                (t, filled) = (t + take, filled + take);
                if filled == count {
                    if !pending.is_empty() {
                        acc.fold(simd, &pending);
                        pending.clear();
                    }
                    let v = acc.value(c, count);
                    for &j in &ph.outer_outputs {
                        if let Dst::F32(d) = dsts[j] {
                            *d.offset(b.outputs[j].offset + row as isize) = v;
                        }
                    }
                    (acc, row, filled) = (Acc::new(c), row + 1, 0);
                }
            }
            flat += n;
        }
        PENDING.with(|v| v.set(pending));
    };
    let per = (super::elementwise::CHUNK / count.max(1)).max(1);
    if rows * count <= super::elementwise::CHUNK || rayon::current_num_threads() == 1 {
        item(&mut init(), 0, rows);
    } else {
        (0..rows.div_ceil(per))
            .into_par_iter()
            .for_each_init(init, |regs, k| item(regs, k * per, ((k + 1) * per).min(rows)));
    }
}
