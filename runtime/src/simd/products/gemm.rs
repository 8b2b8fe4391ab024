//! f32 matrix products with a fused [`Epilogue`]: [`sgemm`] on strided
//! matrix views and [`batched_matmul`] with ONNX MatMul's broadcasting.
//!
//! C is cut into tiles — along its longer side (along its rows when a row is
//! little work), at least one per thread of the current rayon pool and small
//! enough to stay in cache — and each tile
//! runs on its own: the bias is written into it, the product accumulated
//! onto it by the `gemm` crate (its AVX2+FMA microkernels, one thread per
//! tile), then the activation and residual applied while it is still in
//! cache. Without AVX2+FMA, or with `DIAMOND_SIMD=off`, the product comes
//! from [`portable_gemm`](super::portable_gemm) instead; a tile of at most
//! four rows from [`few_rows`](super::few_rows), which packs nothing.

use super::epilogue::{Bias, Epilogue, Tile};
use super::panels::{self, Panels};
use super::{cpu, few_rows, portable_gemm};
use rayon::prelude::*;

/// A read-only matrix view: element (r, c) is `data[r · row_stride + c · col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance between rows, in elements (0 repeats one row).
    pub row_stride: isize,
    /// Distance between columns, in elements.
    pub col_stride: isize,
}

impl<'a> MatRef<'a> {
    /// A dense row-major `rows × cols` matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> MatRef<'a> {
        MatRef { data, rows, cols, row_stride: cols as isize, col_stride: 1 }
    }

    /// The transposed view (no copy).
    pub fn t(self) -> MatRef<'a> {
        MatRef { rows: self.cols, cols: self.rows, row_stride: self.col_stride, col_stride: self.row_stride, ..self }
    }

    /// Panics unless every element lies inside `data`.
    fn check(&self, what: &str) {
        if self.rows == 0 || self.cols == 0 {
            return;
        }
        let corners = [0, (self.rows - 1) as isize * self.row_stride]
            .into_iter()
            .flat_map(|r| [r, r + (self.cols - 1) as isize * self.col_stride]);
        let (lo, hi) = corners.fold((isize::MAX, isize::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
        assert!(
            lo >= 0 && (hi as usize) < self.data.len(),
            "sgemm: {what} ({}×{}, strides {}, {}) reaches outside its {} values",
            self.rows,
            self.cols,
            self.row_stride,
            self.col_stride,
            self.data.len()
        );
    }
}

/// A raw view shared by the tiles of one product (the tiles only read it).
#[derive(Clone, Copy)]
pub(crate) struct View {
    pub ptr: *const f32,
    pub rs: isize,
    pub cs: isize,
}

/// An output's base pointer, handed to the threads of one kernel call:
/// each writes only inside its own part (a GEMM's tile of C, a direct
/// convolution's rows of a block of channels).
#[derive(Clone, Copy)]
pub(crate) struct OutPtr(pub *mut f32);

impl OutPtr {
    /// The pointer `offset` values on.
    ///
    /// # Safety
    /// `offset` lies inside the output.
    pub(crate) unsafe fn at(self, offset: usize) -> *mut f32 {
        self.0.add(offset)
    }
}

// SAFETY: the parts the threads write are disjoint and the views are only read.
unsafe impl Send for View {}
unsafe impl Sync for View {}
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// `c = epilogue(a · b)`: `c` is rows(a) × cols(b), row-major, overwritten.
/// Panics when the shapes disagree or a view reaches outside its data.
pub fn sgemm(a: MatRef, b: MatRef, c: &mut [f32], ep: &Epilogue) {
    sgemm_on(a, b, c, ep, rayon::current_num_threads())
}

/// [`sgemm`] cut for at most `threads` threads of the current rayon pool
/// (1: on the calling thread alone, as when the caller already runs
/// products side by side).
pub(crate) fn sgemm_on(a: MatRef, b: MatRef, c: &mut [f32], ep: &Epilogue, threads: usize) {
    sgemm_with(a, b, None, c, ep, threads)
}

/// [`sgemm`] with `b` also laid out in column panels, read in place by the
/// tiles that multiply by panels (a constant weight's, kept by the caller).
pub fn sgemm_panelled(a: MatRef, b: MatRef, panels: Option<&Panels>, c: &mut [f32], ep: &Epilogue) {
    sgemm_with(a, b, panels, c, ep, rayon::current_num_threads())
}

fn sgemm_with(a: MatRef, b: MatRef, panels: Option<&Panels>, c: &mut [f32], ep: &Epilogue, threads: usize) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "sgemm: a is {m}×{k} but b is {}×{n}", b.rows);
    assert!(c.len() >= m * n, "sgemm: C holds {} values, not {m}×{n}", c.len());
    a.check("a");
    b.check("b");
    ep.check(m, n);
    if m == 0 || n == 0 {
        return;
    }
    let (av, bv) = (
        View { ptr: a.data.as_ptr(), rs: a.row_stride, cs: a.col_stride },
        View { ptr: b.data.as_ptr(), rs: b.row_stride, cs: b.col_stride },
    );
    let out = OutPtr(c.as_mut_ptr());
    let tiles = tiles(m, n, k, threads);
    // SAFETY: the views were checked to lie inside their data, C holds m×n values borrowed
    // mutably here, and the tiles cover C without overlapping.
    let panels = panels.filter(|p| p.fits(k, n));
    if tiles.len() == 1 {
        unsafe { run_tile(av, bv, panels, k, out, &tiles[0], ep) }
    } else {
        tiles.par_iter().for_each(|t| unsafe { run_tile(av, bv, panels, k, out, t, ep) });
    }
}

/// Below this many multiply-adds a product runs on one thread.
const PARALLEL_WORK: usize = 64 * 64 * 64;
/// Below this many multiply-adds per row of C, column tiles' shared border
/// lines cost more than a row cut (see [`tiles`]).
const SMALL_ROW_WORK: usize = 1 << 17;
/// A tile of C holds at most this many values (1 MiB), so the epilogue finds it in cache.
const TILE_VALUES: usize = 256 * 1024;

/// Cuts the m×n result into tiles along its longer side — or along its rows, on several
/// threads, when a row is little work (below) —: a multiple of `threads` of them (one when
/// the product is small), each at most [`TILE_VALUES`] where the side allows.
fn tiles(m: usize, n: usize, k: usize, threads: usize) -> Vec<Tile> {
    let threads = if m * n * k < PARALLEL_WORK { 1 } else { threads.max(1) };
    // Tiles side by side along a row of C share, in every row they cover,
    // the cache line at their border, which both threads write (the bias,
    // the product, the activation). Where a row is little work, two column
    // tiles ran no faster than one thread (SqueezeNet's 1×1 32→128 on 27²),
    // so such products are cut along their rows where each tile keeps 64
    // of them (the microkernel's height; with 32, Winograd's 64-row
    // products lost 7%).
    let little_row_work = n * k < SMALL_ROW_WORK;
    let along_rows = m >= n || (threads > 1 && little_row_work && m >= 64 * threads);
    let (side, other) = if along_rows { (m, n) } else { (n, m) };
    // granularity along the side: whole microkernel panels where the side is long enough
    let grain = if side >= 16 * threads { 16 } else { 1 };
    let by_cache = (side * other).div_ceil(TILE_VALUES);
    let parts = by_cache.max(1).div_ceil(threads) * threads;
    let step = side.div_ceil(parts).div_ceil(grain) * grain;
    (0..side)
        .step_by(step.max(1))
        .map(|start| {
            let len = step.min(side - start);
            if along_rows {
                Tile { row0: start, rows: len, col0: 0, cols: n, n }
            } else {
                Tile { row0: 0, rows: m, col0: start, cols: len, n }
            }
        })
        .collect()
}

/// Bias, product and the rest of the epilogue over one tile.
///
/// # Safety
/// `a`, `b` and `c` as in [`sgemm`]; no one else touches the tile.
unsafe fn run_tile(a: View, b: View, panels: Option<&Panels>, k: usize, c: OutPtr, t: &Tile, ep: &Epilogue) {
    let read = ep.has_bias();
    if read {
        ep.prefill(c.0, t);
    }
    let dst = c.0.add(t.row0 * t.n + t.col0);
    let lhs = a.ptr.offset(t.row0 as isize * a.rs);
    let rhs = b.ptr.offset(t.col0 as isize * b.cs);
    if k == 0 {
        if !read {
            for r in 0..t.rows {
                std::slice::from_raw_parts_mut(dst.add(r * t.n), t.cols).fill(0.0);
            }
        }
    } else if cpu::avx2_fma() && few_rows::covers(t.rows, a, b) {
        let (lhs, rhs) = (View { ptr: lhs, ..a }, View { ptr: rhs, ..b });
        few_rows::product(t.rows, t.cols, k, dst, t.n, read, lhs, rhs, ep.alpha);
    } else if cpu::avx2_fma() && few_rows::covers_by_rows(t.rows, k, t.cols, b) {
        let (lhs, rhs) = (View { ptr: lhs, ..a }, View { ptr: rhs, ..b });
        few_rows::product_by_rows(t.rows, t.cols, k, dst, t.n, read, lhs, rhs, ep.alpha);
    } else if cpu::avx2_fma() && panels::short_and_wide(t.rows, k, t.cols, b.rs, b.cs) {
        let lhs = View { ptr: lhs, ..a };
        match panels {
            Some(p) => panels::by_prepared_panels(t.rows, t.cols, k, dst, t.n, read, lhs, p, t.col0, ep.alpha),
            None => panels::by_column_panels(t.rows, t.cols, k, dst, t.n, read, lhs, View { ptr: rhs, ..b }, ep.alpha),
        }
    } else if cpu::avx2_fma() {
        gemm::gemm(
            t.rows,
            t.cols,
            k,
            dst,
            1,
            t.n as isize,
            read,
            lhs,
            a.cs,
            a.rs,
            rhs,
            b.cs,
            b.rs,
            1.0,
            ep.alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    } else {
        let lhs = View { ptr: lhs, ..a };
        let rhs = View { ptr: rhs, ..b };
        portable_gemm::gemm(t.rows, t.cols, k, dst, t.n, read, lhs, rhs, ep.alpha);
    }
    ep.finish(c.0, t);
}

/// ONNX MatMul (NumPy `matmul`) of `a` and `b` with the epilogue: rank-1 operands are promoted
/// (and the promoted axis dropped from the result), batch axes broadcast. `out` holds the
/// result, batch × m × n row-major; a per-row or per-column bias applies within each matrix of
/// the batch, a full bias and the residual have the whole result's layout.
/// Panics when the shapes do not multiply or `out` is too short.
pub fn batched_matmul(a: &[f32], a_shape: &[usize], b: &[f32], b_shape: &[usize], out: &mut [f32], ep: &Epilogue) {
    batched_matmul_keeping(a, a_shape, b, b_shape, out, ep, None)
}

/// [`batched_matmul`] for a `b` that stays the same from call to call:
/// where the product is one short, wide GEMM over it, `kept` holds `b` in
/// column panels ([`Panels`]), made on the first call and read in place by
/// the later ones.
pub fn batched_matmul_keeping(
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out: &mut [f32],
    ep: &Epilogue,
    kept: Option<&mut Option<Panels>>,
) {
    let plan = BatchPlan::new(a_shape, b_shape);
    let (m, k, n) = (plan.m, plan.k, plan.n);
    assert!(a.len() >= plan.a_items * m * k && b.len() >= plan.b_items * k * n, "batched_matmul: operands too short");
    let count = plan.batch.iter().product::<usize>();
    assert!(out.len() >= count * m * n, "batched_matmul: out holds {} values, not {}", out.len(), count * m * n);
    if m * n == 0 {
        return;
    }
    // One right matrix for every left one (a weight shared over a batch,
    // as `[seq, batch, d] × [d, e]` in sequence-first attention): the left
    // matrices lie one after another, so they are one `count·m × k` matrix and
    // the product is one GEMM that reads the weight once — as `count`
    // products of `m` rows each it is read `count` times (a GEMV per row
    // when m = 1). A per-row bias repeats per matrix, so it keeps the loop.
    let one_product = count == 1 || plan.b_items == 1 && plan.a_items == count && !matches!(ep.bias, Bias::PerRow(_));
    if one_product {
        let av = MatRef::row_major(&a[..count * m * k], count * m, k);
        let bv = MatRef::row_major(&b[..k * n], k, n);
        let panels = kept.and_then(|slot| panels::kept(slot, count * m, bv));
        sgemm_panelled(av, bv, panels, &mut out[..count * m * n], ep);
        return;
    }
    let item = |i: usize, c: &mut [f32]| {
        let (ia, ib) = plan.operands(i);
        let av = MatRef::row_major(&a[ia * m * k..(ia + 1) * m * k], m, k);
        let bv = MatRef::row_major(&b[ib * k * n..(ib + 1) * k * n], k, n);
        sgemm(av, bv, c, &ep.shifted(0, i * m * n));
    };
    let out = &mut out[..count * m * n];
    // Spread over the threads only when there is enough work: attention's
    // many small per-head products cost more to hand out than to compute.
    if count > 1 && count * m * n * k >= PARALLEL_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(m * n).enumerate().for_each(|(i, c)| item(i, c));
    } else {
        out.chunks_mut(m * n).enumerate().for_each(|(i, c)| item(i, c));
    }
}

/// Shapes of a broadcast MatMul: matrix sizes, the result's batch axes, and where each
/// result matrix takes its operands.
struct BatchPlan {
    m: usize,
    k: usize,
    n: usize,
    batch: Vec<usize>,
    a_batch: Vec<usize>,
    b_batch: Vec<usize>,
    a_items: usize,
    b_items: usize,
}

impl BatchPlan {
    fn new(a_shape: &[usize], b_shape: &[usize]) -> BatchPlan {
        assert!(!a_shape.is_empty() && !b_shape.is_empty(), "batched_matmul: operands must have rank ≥ 1");
        let mut ash = a_shape.to_vec();
        let mut bsh = b_shape.to_vec();
        if ash.len() == 1 {
            ash.insert(0, 1);
        }
        if bsh.len() == 1 {
            bsh.push(1);
        }
        let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
        let (k2, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
        assert_eq!(k, k2, "batched_matmul: inner sizes differ: {a_shape:?} × {b_shape:?}");
        let a_batch = ash[..ash.len() - 2].to_vec();
        let b_batch = bsh[..bsh.len() - 2].to_vec();
        let rank = a_batch.len().max(b_batch.len());
        let pad =
            |s: &[usize]| -> Vec<usize> { std::iter::repeat_n(1, rank - s.len()).chain(s.iter().copied()).collect() };
        let (a_batch, b_batch) = (pad(&a_batch), pad(&b_batch));
        let batch: Vec<usize> = a_batch
            .iter()
            .zip(&b_batch)
            .map(|(&x, &y)| {
                assert!(
                    x == y || x == 1 || y == 1,
                    "batched_matmul: batch axes {a_shape:?} and {b_shape:?} do not broadcast"
                );
                if x == 1 {
                    y
                } else {
                    x
                }
            })
            .collect();
        let (a_items, b_items) = (a_batch.iter().product(), b_batch.iter().product());
        BatchPlan { m, k, n, batch, a_batch, b_batch, a_items, b_items }
    }

    /// The matrices of `a` and of `b` that result matrix `i` multiplies.
    fn operands(&self, mut i: usize) -> (usize, usize) {
        let (mut ia, mut ib, mut sa, mut sb) = (0, 0, 1, 1);
        for axis in (0..self.batch.len()).rev() {
            let at = i % self.batch[axis];
            i /= self.batch[axis];
            if self.a_batch[axis] > 1 {
                ia += at * sa;
            }
            if self.b_batch[axis] > 1 {
                ib += at * sb;
            }
            sa *= self.a_batch[axis];
            sb *= self.b_batch[axis];
        }
        (ia, ib)
    }
}
