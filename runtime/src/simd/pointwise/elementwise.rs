//! Running a program without reduction axes: the bound space is walked as
//! rows along its innermost axis, each row in tiles; rows (or pieces of
//! long rows) are spread over the current rayon pool. Instructions that
//! vary with no axis are evaluated once and held as splats.

use super::bind::{offset_of, Bound};
use super::chain::{Arg, Item, Plan};
use super::tile::{self, Dst, Placed, Registers, Src, TILE};
use crate::kernel::{Inst, Level, Program};
use rayon::prelude::*;
use std::sync::OnceLock;

/// Points per parallel work item.
pub const CHUNK: usize = 1 << 14;

/// Outputs of at least this many bytes in all are written with streaming
/// stores: they cannot stay in the caches anyway (this machine's L3 is 32
/// MiB, shared), and the stores then cost no read of the destination.
pub const STREAM_BYTES: usize = 16 << 20;

/// Points per step of a program whose runs touch no tile register
/// ([`untiled`]): the step's bookkeeping is paid once for this many.
const SPAN: usize = 2048;

/// The order of evaluation of an elementwise program, worked out once when
/// the program is bound: the instructions that vary with no axis (evaluated
/// once and splatted), then the rest (evaluated per tile).
pub struct Order {
    uniform: Vec<usize>,
    varying: Vec<usize>,
    /// The plan of the runs (AVX2), with the loads read in place it was
    /// made for: made at the first run, remade when another binding reads
    /// other operands in place.
    plan: OnceLock<(Vec<bool>, Plan)>,
    /// The plan for short rows several to a tile (every varying load read
    /// into its register first), with those loads marked: made at the
    /// first run that groups rows.
    grouped: OnceLock<(Vec<bool>, Plan)>,
}

impl Order {
    /// The instructions that vary with no axis.
    pub(crate) fn uniform(&self) -> &[usize] {
        &self.uniform
    }

    /// The order of `p`'s instructions.
    pub fn of(p: &Program) -> Order {
        let levels = p.levels();
        let uniform = (0..p.body.len()).filter(|&i| levels[i] == Level::Uniform).collect();
        let varying = (0..p.body.len()).filter(|&i| levels[i] != Level::Uniform).collect();
        Order { uniform, varying, plan: OnceLock::new(), grouped: OnceLock::new() }
    }
}

/// Runs elementwise program `p` bound as `b` in order `order` (of `p`),
/// reading `srcs` and writing `dsts`.
///
/// # Safety
/// `srcs` and `dsts` point at buffers of the lengths `b` was checked
/// against, and no output buffer overlaps an operand or another output
/// (contiguous rows are read and written where they lie, not copied),
/// except that an output may be the very buffer of an operand read through
/// the same view (written in place).
pub unsafe fn run(p: &Program, order: &Order, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    if b.empty {
        return;
    }
    let varying = &order.varying;
    let r = b.extents.len();
    let inner = if r == 0 { 1 } else { b.extents[r - 1] };
    let outer = &b.extents[..r.saturating_sub(1)];
    let rows: usize = outer.iter().product();
    let base_offs: Vec<isize> = b.operands.iter().map(|v| v.offset).collect();
    let out_bytes: usize = b.output_shapes.iter().map(|s| s.iter().product::<usize>() * 4).sum();
    // Outputs are streamed when dense f32 rows of a large result, on AVX.
    let big = cfg!(target_arch = "x86_64") && simd && out_bytes >= STREAM_BYTES;
    let in_place = |j: usize| match dsts[j] {
        Dst::F32(d) => srcs.iter().any(|s| matches!(s, Src::F32(p) if std::ptr::eq(*p, d))),
        Dst::Bool(_) => false,
    };
    let spans = Spans::new(p, order, b, srcs, dsts, &in_place, big, simd);
    let streaming = spans.stream.contains(&true);
    let (op_inner, out_inner) = (&spans.op_inner, &spans.out_inner);
    let init = || spans.registers(srcs, &base_offs);
    // A work item: rows row0..row1, points c0..c1 of each.
    let (rows_per_item, pieces) = if inner >= CHUNK { (1, inner.div_ceil(CHUNK)) } else { ((CHUNK / inner).max(1), 1) };
    let items = if pieces > 1 { rows * pieces } else { rows.div_ceil(rows_per_item) };
    // Short rows go several to a tile: each operand's rows are read into
    // its load's register one after the other, the tile's instructions
    // run once over them all, and each output row is stored from its part
    // of the register (per row, a program of short rows spent more on the
    // row's bookkeeping than on its points).
    let grouped = pieces == 1 && rows_per_item > 1 && 2 * inner <= TILE && !streaming;
    let group_loads: Vec<(usize, usize)> = (0..p.body.len())
        .filter_map(|i| match p.body[i].inst {
            Inst::Load(k) if varying.contains(&i) => Some((i, k)),
            _ => None,
        })
        .collect();
    let group_plan = grouped.then(|| {
        order.grouped.get_or_init(|| {
            let mut read = vec![false; p.body.len()];
            for &(i, _) in &group_loads {
                read[i] = true;
            }
            let plan = Plan::new(&p.body, varying, &read, p.outputs.iter().map(|o| o.source));
            (read, plan)
        })
    });
    let rows_of = |regs: &mut Registers, row0: usize, row1: usize| {
        let Some((read, plan)) = group_plan else { return };
        let base = regs.as_mut_ptr();
        // SAFETY: the registers buffer holds one per instruction.
        let at: Vec<*mut f32> = (0..p.body.len()).map(|i| unsafe { base.add(i * TILE) }).collect();
        let per = TILE / inner;
        let mut row = row0;
        while row < row1 {
            let count = per.min(row1 - row);
            for &(i, k) in &group_loads {
                let v = &b.operands[k];
                for r in 0..count {
                    let off = v.offset + offset_of(row + r, outer, &v.strides[..outer.len()]);
                    // SAFETY: the binder checked the view's reach; the
                    // register holds a tile, and count·inner <= TILE.
                    unsafe {
                        tile::load(
                            srcs[k],
                            off,
                            op_inner[k],
                            std::slice::from_raw_parts_mut(at[i].add(r * inner), inner),
                        )
                    };
                }
            }
            let place = Placed { at: &at, loaded: read, streamed: &[], far: false };
            tile::eval_planned(simd, &p.body, varying, plan, place, count * inner, srcs, &base_offs, op_inner);
            for (j, out) in p.outputs.iter().enumerate() {
                let v = &b.outputs[j];
                for r in 0..count {
                    let off = v.offset + offset_of(row + r, outer, &v.strides[..outer.len()]);
                    let reg = std::slice::from_raw_parts(at[out.source].add(r * inner), inner);
                    tile::store(dsts[j], off, out_inner[j], reg);
                }
            }
            row += count;
        }
    };
    let work = |regs: &mut Registers, item: usize| {
        if grouped {
            let row0 = item * rows_per_item;
            return rows_of(regs, row0, (row0 + rows_per_item).min(rows));
        }
        let base = regs.as_mut_ptr();
        // SAFETY: the registers buffer holds one per instruction.
        let mut at: Vec<*mut f32> = (0..p.body.len()).map(|i| unsafe { base.add(i * TILE) }).collect();
        let (row0, row1, c0, c1) = if pieces > 1 {
            let piece = item % pieces;
            let row = item / pieces;
            (row, row + 1, piece * CHUNK, ((piece + 1) * CHUNK).min(inner))
        } else {
            (item * rows_per_item, ((item + 1) * rows_per_item).min(rows), 0, inner)
        };
        let mut offs = vec![0isize; srcs.len()];
        let (mut row_offs, mut out_offs) = (vec![0isize; b.operands.len()], vec![0isize; b.outputs.len()]);
        for row in row0..row1 {
            for (o, v) in row_offs.iter_mut().zip(&b.operands) {
                *o = v.offset + offset_of(row, outer, &v.strides[..outer.len()]);
            }
            for (o, v) in out_offs.iter_mut().zip(&b.outputs) {
                *o = v.offset + offset_of(row, outer, &v.strides[..outer.len()]);
            }
            spans.row(&mut at, srcs, dsts, &mut offs, &row_offs, &out_offs, c0, c1);
        }
        if streaming {
            tile::fence();
        }
    };
    if rows * inner <= CHUNK || rayon::current_num_threads() == 1 {
        let mut regs = init();
        for item in 0..items {
            work(&mut regs, item);
        }
    } else {
        (0..items).into_par_iter().for_each_init(init, work);
    }
}

/// What evaluating a bound elementwise program over spans of its rows
/// needs, worked out once per run: which loads read their operand in place,
/// which outputs their instruction writes directly, the plan of the runs
/// and the points per step.
pub(crate) struct Spans<'a> {
    p: &'a Program,
    order: &'a Order,
    plan: std::borrow::Cow<'a, Plan>,
    loaded: Vec<bool>,
    loads_in_place: Vec<Option<usize>>,
    direct: Vec<Option<usize>>,
    written: Vec<bool>,
    stream: Vec<bool>,
    /// Per instruction: its register is a streamed output that a run
    /// writes directly ([`tile::Place::streamed`]).
    streamed: Vec<bool>,
    /// The first streamed output that a run writes, if any: a row's first
    /// span ends where that output is aligned to a cache line, so that the
    /// run's blocks after it are.
    aligned_to: Option<usize>,
    /// The outputs are large ([`STREAM_BYTES`]): the operands come from
    /// memory and runs prefetch them ([`tile::Place::far`]).
    far: bool,
    step: usize,
    /// Per operand and per output: the stride along the innermost axis.
    pub(crate) op_inner: Vec<isize>,
    pub(crate) out_inner: Vec<isize>,
    simd: bool,
}

impl<'a> Spans<'a> {
    /// The spans of `p` bound as `b`, reading `srcs` (the kinds of
    /// operands: a load reads an `f32` operand's rows in place) and writing
    /// `dsts`; `in_place(j)`: output `j` is written over an operand (it is
    /// stored after the tile's instructions have read it); `big`: the
    /// outputs, dense `f32` rows among them, are written with streaming
    /// stores.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        p: &'a Program,
        order: &'a Order,
        b: &Bound,
        srcs: &[Src],
        dsts: &[Dst],
        in_place: &dyn Fn(usize) -> bool,
        big: bool,
        simd: bool,
    ) -> Spans<'a> {
        let varying = &order.varying;
        let r = b.extents.len();
        let inner_of = |s: &[isize]| if r == 0 { 0 } else { s[r - 1] };
        let op_inner: Vec<isize> = b.operands.iter().map(|v| inner_of(&v.strides)).collect();
        let out_inner: Vec<isize> = b.outputs.iter().map(|v| inner_of(&v.strides)).collect();
        let stream: Vec<bool> =
            dsts.iter().zip(&out_inner).map(|(d, &st)| big && st == 1 && matches!(d, Dst::F32(_))).collect();
        // Loads that read their operand where it lies: contiguous `f32` rows
        // (operand k of load i is `loads_in_place[i]`).
        let loads_in_place: Vec<Option<usize>> = (0..p.body.len())
            .map(|i| match p.body[i].inst {
                Inst::Load(k) if op_inner[k] == 1 && matches!(srcs[k], Src::F32(_)) && varying.contains(&i) => Some(k),
                _ => None,
            })
            .collect();
        let loaded: Vec<bool> = loads_in_place.iter().map(Option::is_some).collect();
        // Chains of instructions run in vector registers (AVX2 and AVX-512).
        let make = || Plan::new(&p.body, varying, &loaded, p.outputs.iter().map(|o| o.source));
        let made = order.plan.get_or_init(|| (loaded.clone(), make()));
        let plan = if made.0 == loaded { std::borrow::Cow::Borrowed(&made.1) } else { std::borrow::Cow::Owned(make()) };
        // Outputs that their instruction writes directly: contiguous `f32`
        // rows of a computed (not loaded, not uniform) value that no earlier
        // output takes, into a buffer that is no operand's (output j of
        // instruction i is `direct[i]`). One large enough to stream is direct
        // only when a run computes it: the run writes it with streaming stores
        // from its registers where a block lies on a cache line (the chain8
        // benchmark: 80-84% of copy bandwidth against 72-77% with plain
        // stores, which read each line before writing it, and 54-59% with
        // streaming stores from a tile register); the tile's loops keep
        // streaming. An output written in place of its operand is stored after
        // the tile's instructions have read it, unless the plan is a single
        // run whose last step computes it: a run stores a block's last step
        // after every step of the block has read its operands, and its
        // rest's last step after all the rest's steps.
        let last_of_one_run = |i: usize| match plan.items.as_slice() {
            [Item::Run(steps)] => !steps.is_empty() && plan.steps[steps.end - 1].inst == i,
            _ => false,
        };
        let mut direct: Vec<Option<usize>> = vec![None; p.body.len()];
        for (j, out) in p.outputs.iter().enumerate() {
            let i = out.source;
            let computed = !matches!(p.body[i].inst, Inst::Load(_)) && varying.contains(&i);
            let f32_row = out_inner[j] == 1 && matches!(dsts[j], Dst::F32(_));
            let streamable = !stream[j] || plan.steps.iter().any(|st| st.inst == i);
            let placeable = !in_place(j) || last_of_one_run(i);
            if computed && direct[i].is_none() && f32_row && streamable && placeable {
                direct[i] = Some(j);
            }
        }
        let written: Vec<bool> = (0..p.outputs.len()).map(|j| direct.contains(&Some(j))).collect();
        let streamed: Vec<bool> = direct.iter().map(|d| d.is_some_and(|j| stream[j])).collect();
        let aligned_to = direct.iter().flatten().copied().find(|&j| stream[j]);
        let step = if simd && untiled(p, &plan, &loaded, &direct) { SPAN } else { TILE };
        Spans {
            p,
            order,
            plan,
            loaded,
            loads_in_place,
            direct,
            written,
            stream,
            streamed,
            aligned_to,
            far: big,
            step,
            op_inner,
            out_inner,
            simd,
        }
    }

    /// Fresh registers with the uniform instructions evaluated (operand
    /// `k`'s uniform loads read at `base_offs[k]`) and splatted.
    pub(crate) fn registers(&self, srcs: &[Src], base_offs: &[isize]) -> Registers {
        let (p, uniform) = (self.p, &self.order.uniform);
        let mut regs = Registers::new(p.body.len() * TILE);
        // SAFETY: a uniform load reads one element at its view's offset, inside the operand.
        unsafe { tile::eval(self.simd, &p.body, uniform, &mut regs, 1, srcs, base_offs, &self.op_inner) };
        for &i in uniform {
            let v = regs[i * TILE];
            regs[i * TILE..(i + 1) * TILE].fill(v);
        }
        regs
    }

    /// Evaluates points `c0..c1` of one row: operand `k`'s point `c` at
    /// `row_offs[k] + c · inner`, output `j`'s at `out_offs[j] + c · inner`.
    /// `at` holds each instruction's register (those of `regs`); `offs` is
    /// scratch, one per operand.
    ///
    /// # Safety
    /// As [`run`]'s, for the points given.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) unsafe fn row(
        &self,
        at: &mut [*mut f32],
        srcs: &[Src],
        dsts: &[Dst],
        offs: &mut [isize],
        row_offs: &[isize],
        out_offs: &[isize],
        c0: usize,
        c1: usize,
    ) {
        let (p, varying, plan) = (self.p, &self.order.varying, &*self.plan);
        let mut c = c0;
        while c < c1 {
            // A span longer than a tile ends on a whole tile, so that a
            // run's last points (not a whole block), which the tile's
            // loops evaluate on registers of a tile, come in a call of
            // their own.
            let mut n = self.step.min(c1 - c);
            if n > TILE {
                n -= n % TILE;
            }
            if let (true, Some(j)) = (c == c0, self.aligned_to) {
                if let Dst::F32(d) = dsts[j] {
                    // The first span ends where a cache line of output j starts.
                    let past = d.offset(out_offs[j] + c as isize) as usize % 64 / 4;
                    if past != 0 {
                        n = n.min(16 - past);
                    }
                }
            }
            for k in 0..offs.len() {
                offs[k] = row_offs[k] + c as isize * self.op_inner[k];
            }
            for (i, placed) in at.iter_mut().enumerate() {
                if let Some(k) = self.loads_in_place[i] {
                    if let Src::F32(s) = srcs[k] {
                        *placed = s.offset(offs[k]) as *mut f32;
                    }
                } else if let Some(j) = self.direct[i] {
                    if let Dst::F32(d) = dsts[j] {
                        *placed = d.offset(out_offs[j] + c as isize);
                    }
                }
            }
            let place = Placed { at, loaded: &self.loaded, streamed: &self.streamed, far: self.far };
            tile::eval_planned(self.simd, &p.body, varying, plan, place, n, srcs, offs, &self.op_inner);
            for (j, out) in p.outputs.iter().enumerate() {
                if self.written[j] {
                    continue;
                }
                let reg = std::slice::from_raw_parts(at[out.source], n);
                let at = out_offs[j] + c as isize * self.out_inner[j];
                match dsts[j] {
                    #[cfg(target_arch = "x86_64")]
                    Dst::F32(d) if self.stream[j] => tile::store_streaming(d.offset(at), reg),
                    dst => tile::store(dst, at, self.out_inner[j], reg),
                }
            }
            c += n;
        }
    }
}

/// Whether `plan` of `p` is runs alone that read and write no tile
/// register: each register a step reads is an operand read in place or the
/// destination of an output, each step that is stored is an output's
/// destination, and each output is copied from neither (a uniform value's
/// register, say, holds a tile's points). Such a plan may run over any
/// number of points at once.
fn untiled(p: &Program, plan: &Plan, loaded: &[bool], direct: &[Option<usize>]) -> bool {
    let placed = |i: usize| loaded[i] || direct[i].is_some();
    p.outputs.iter().all(|o| placed(o.source))
        && plan.items.iter().all(|item| matches!(item, Item::Run(_)))
        && plan.steps.iter().all(|s| {
            let reads = [s.a, s.b].into_iter().all(|a| !matches!(a, Arg::Reg(j) if !placed(j)));
            reads && (!s.keep || direct[s.inst].is_some())
        })
}
