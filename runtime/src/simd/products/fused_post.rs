//! The elementwise program that follows a contraction, run by the
//! contraction's kernels over each tile of the result they finish
//! ([`Post`]), while the tile is in cache — as onnxruntime fuses an
//! activation into its convolution and tract applies its fused ops in the
//! matmul kernel's registers — instead of as a step of its own that reads
//! the whole result back.
//!
//! It applies where the program reads the contraction's result point for
//! point: one operand is the result, seen through the dense view of the
//! program's (bound) space, so point `p` of the space is element `p` of the
//! result and a tile of the result is a set of row spans of the space. The
//! program's output that has that same view may be written over the tile
//! itself (in place, when nothing else reads the result); its other
//! outputs, and every other operand, are read and written where they lie.

use super::bind::{offset_of, Bound};
use super::elementwise::{Order, Spans};
use super::epilogue::{Post, Tile};
use super::tile::{Dst, Registers, Src, TILE};
use crate::kernel::{Inst, Program};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether operand `k` of bound program `b` is the dense view of its space
/// (offset 0, row-major strides over the extents, size-1 axes aside) and
/// covers all of it: point `p` reads element `p`.
pub(crate) fn reads_point_for_point(b: &Bound, k: usize) -> bool {
    let v = &b.operands[k];
    let mut stride = 1isize;
    for (a, &e) in b.extents.iter().enumerate().rev() {
        if e > 1 && v.strides[a] != stride {
            return false;
        }
        stride *= e as isize;
    }
    !b.empty && b.n_outer == b.extents.len() && v.offset == 0 && b.operand_lens[k] == stride as usize
}

/// Whether running bound program `b` over a contraction's tiles pays: the
/// result is large ([`FUSED_POINTS`]) and the rows (along which a tile is
/// cut into spans) hold at least a tile register's points. Shorter rows,
/// each evaluated on its own, cost more than the program as a step of its
/// own, which puts several in one register, and a small result is in cache
/// for the next step anyway (`diamond bench`, one thread, alternating
/// binaries: ConvNeXt's MatMul+GELU over rows of 64, 0.031 ms fused against
/// 0.020 ms as two steps; MobileNet-v3 on 32×32, whose results are all
/// under 64K points, 11% slower with its rows of 256 fused).
pub(crate) fn pays(b: &Bound) -> bool {
    let points: usize = b.extents.iter().product();
    points >= FUSED_POINTS && b.extents.last().is_some_and(|&inner| inner >= TILE)
}

/// The fewest points of a result that its program runs over the
/// contraction's tiles: 1 MiB of `f32`, about what a core's L2 holds.
pub(crate) const FUSED_POINTS: usize = 1 << 18;

/// The output of `p` (bound as `b`) that may be written over operand `k`'s
/// buffer: the same view, `f32`, and no output a bare load of `k` (that one
/// would be stored from elements already overwritten).
pub(crate) fn writable_over(p: &Program, b: &Bound, k: usize) -> Option<usize> {
    let bare = p.outputs.iter().any(|o| matches!(p.body[o.source].inst, Inst::Load(l) if l == k));
    if bare {
        return None;
    }
    (0..p.outputs.len()).find(|&j| {
        p.outputs[j].view.elem == diamond_ir::ElemType::Float
            && b.outputs[j] == b.operands[k]
            && b.output_shapes[j].iter().product::<usize>() == b.operand_lens[k]
    })
}

/// A bound elementwise program run tile by tile over a contraction's result.
pub(crate) struct ProgramPost<'a> {
    p: &'a Program,
    b: &'a Bound,
    spans: Spans<'a>,
    /// The operands; operand `result`'s pointer is set per tile.
    srcs: Vec<Src>,
    /// The outputs; output `over`'s pointer, when written in place, is set per tile.
    dsts: Vec<Dst>,
    result: usize,
    over: Option<usize>,
    /// The uniform instructions' registers, evaluated and splatted once
    /// (the others' parts unused): every tile reads them where they lie.
    uniform: Vec<f32>,
    /// Which instructions are uniform.
    is_uniform: Vec<bool>,
    /// Set when a tile reached past the space the program was bound for
    /// (the contraction's result is not the size the plan said): that
    /// tile was left alone, and the caller computes the step again unfused.
    overran: AtomicBool,
}

// SAFETY: the uniform registers are written once, before any tile, and only read after.
unsafe impl Sync for ProgramPost<'_> {}

/// A thread's scratch for the tiles it runs: the per-instruction register
/// pointers and the per-operand and per-output offsets (a small model's
/// convolutions run hundreds of tiles of a few dozen points each).
#[derive(Default)]
struct Scratch {
    at: Vec<*mut f32>,
    srcs: Vec<Src>,
    dsts: Vec<Dst>,
    offs: Vec<isize>,
    row_offs: Vec<isize>,
    out_offs: Vec<isize>,
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

impl<'a> ProgramPost<'a> {
    /// `p` bound as `b` (operand `result` read point for point, see
    /// [`reads_point_for_point`]), its other operands at `srcs`, its
    /// outputs at `dsts`; output `over`, if any, written over the result.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        p: &'a Program,
        order: &'a Order,
        b: &'a Bound,
        mut srcs: Vec<Src>,
        mut dsts: Vec<Dst>,
        result: usize,
        over: Option<usize>,
        simd: bool,
    ) -> ProgramPost<'a> {
        // A placeholder of the right kind until a tile gives the result's buffer.
        let dangling = std::ptr::NonNull::<f32>::dangling().as_ptr();
        srcs[result] = Src::F32(dangling);
        let mut in_place = vec![false; dsts.len()];
        if let Some(j) = over {
            dsts[j] = Dst::F32(dangling);
            in_place[j] = true;
        }
        let spans = Spans::new(p, order, b, &srcs, &dsts, &|j| in_place[j], false, simd);
        let base_offs: Vec<isize> = b.operands.iter().map(|v| v.offset).collect();
        // Uniform loads never read the result (it varies point for point).
        let uniform = spans.registers(&srcs, &base_offs).to_vec();
        let mut is_uniform = vec![false; p.body.len()];
        for &i in order.uniform() {
            is_uniform[i] = true;
        }
        ProgramPost { p, b, spans, srcs, dsts, result, over, uniform, is_uniform, overran: AtomicBool::new(false) }
    }

    /// Whether a tile reached past the bound space (the outputs are then incomplete).
    pub(crate) fn overran(&self) -> bool {
        self.overran.load(Ordering::Relaxed)
    }
}

impl Post for ProgramPost<'_> {
    unsafe fn tile(&self, whole: *mut f32, base: usize, t: &Tile) {
        let b = self.b;
        let total = b.operand_lens[self.result];
        if t.rows > 0 && base + (t.row0 + t.rows - 1) * t.n + t.col0 + t.cols > total {
            self.overran.store(true, Ordering::Relaxed);
            return;
        }
        let mut s = SCRATCH.with(|c| c.take()).unwrap_or_default();
        s.srcs.clone_from(&self.srcs);
        s.srcs[self.result] = Src::F32(whole);
        s.dsts.clone_from(&self.dsts);
        if let Some(j) = self.over {
            s.dsts[j] = Dst::F32(whole);
        }
        let body = self.p.body.len();
        let mut regs = Registers::new(body * TILE);
        let (first, shared) = (regs.as_mut_ptr(), self.uniform.as_ptr() as *mut f32);
        s.at.clear();
        // Uniform registers are only read: every thread reads the shared ones.
        s.at.extend((0..body).map(|i| if self.is_uniform[i] { shared.add(i * TILE) } else { first.add(i * TILE) }));
        let r = b.extents.len();
        let inner = if r == 0 { 1 } else { b.extents[r - 1] };
        let outer = &b.extents[..r.saturating_sub(1)];
        s.offs.clear();
        s.offs.resize(self.srcs.len(), 0);
        s.row_offs.clear();
        s.row_offs.resize(b.operands.len(), 0);
        s.out_offs.clear();
        s.out_offs.resize(b.outputs.len(), 0);
        let Scratch { at, srcs, dsts, offs, row_offs, out_offs } = &mut *s;
        // Rows that span all of C's columns follow one another: one segment.
        let (segments, seg_len) = if t.cols == t.n { (1, t.rows * t.n) } else { (t.rows, t.cols) };
        for seg in 0..segments {
            let start = base + (t.row0 + seg) * t.n + t.col0;
            let (mut point, end) = (start, start + seg_len);
            while point < end {
                let (space_row, c0) = (point / inner, point % inner);
                let c1 = inner.min(c0 + (end - point));
                for (o, v) in row_offs.iter_mut().zip(&b.operands) {
                    *o = v.offset + offset_of(space_row, outer, &v.strides[..outer.len()]);
                }
                for (o, v) in out_offs.iter_mut().zip(&b.outputs) {
                    *o = v.offset + offset_of(space_row, outer, &v.strides[..outer.len()]);
                }
                self.spans.row(at, srcs, dsts, offs, row_offs, out_offs, c0, c1);
                point += c1 - c0;
            }
        }
        drop(regs);
        SCRATCH.with(|c| c.set(Some(s)));
    }
}
