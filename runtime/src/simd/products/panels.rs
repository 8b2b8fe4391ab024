//! Short, wide products over a row-major B with long rows (8 to 63 rows of
//! C, as a language model's vocabulary head at a decoder step or an OCR
//! model's class head): B is read [`PANEL_COLUMNS`] columns at a time as a
//! contiguous `k × 256` panel that stays in cache while the `gemm` crate
//! multiplies it, so that B streams through once in long runs. A B that
//! changes from call to call is copied into one panel at a time
//! (`by_column_panels`); a constant weight is laid out in panels once
//! ([`Panels`], kept by the session like a convolution's prepared filters)
//! and read in place, as onnxruntime packs a constant B once per session.

use super::cpu;
use super::gemm::{MatRef, View};

/// B rows at least this long (32 KiB) make the `gemm` crate's in-place
/// reads stride across pages: 16 × 512 · 512 × 8192 ran at 34 GFLOP/s in
/// place and 77 by panels, while rows of 4096 (1024 × 4096, 6 rows of A)
/// ran at 49 in place and 25 by panels, where copying B costs as much as
/// the few rows' multiply-adds.
const LONG_B_ROWS: usize = 8192;

/// Columns of B in one panel: with `k` = 512, 512 KiB, in L2.
pub const PANEL_COLUMNS: usize = 256;

/// Whether a product is short and wide over a row-major B with long rows:
/// 8 to 63 rows of C (under a microkernel's 64; with fewer, copying B costs
/// as much as the product), rows of B of [`LONG_B_ROWS`] or more, and B
/// too large for L2. The `gemm` crate does not pack B for so few rows of A
/// and reads it in place, `k` rows a panel, each row a page or more from
/// the last — the T5 decoder's head, 16 × 512 · 512 × 32128, ran at 20
/// GFLOP/s where 64 rows ran at 98.
pub(crate) fn short_and_wide(rows: usize, k: usize, cols: usize, b_rs: isize, b_cs: isize) -> bool {
    (8..64).contains(&rows)
        && b_cs == 1
        && b_rs >= LONG_B_ROWS as isize
        && cols >= 2 * PANEL_COLUMNS
        && k * cols >= 1 << 20
}

/// A `k × n` B laid out in column panels: panel `p` holds columns
/// `p·256 ..` as a row-major `k × w` block (`w` = 256, less for the last).
pub struct Panels {
    data: Vec<f32>,
    k: usize,
    n: usize,
}

impl Panels {
    /// B (`k × n`, row-major with unit column stride: what
    /// [`short_and_wide`] accepts) in panels.
    ///
    /// # Safety
    /// `b` reaches `k` rows of `n` values.
    pub(crate) unsafe fn of(b: View, k: usize, n: usize) -> Panels {
        let mut data = Vec::with_capacity(k * n);
        for col0 in (0..n).step_by(PANEL_COLUMNS) {
            let w = PANEL_COLUMNS.min(n - col0);
            for kk in 0..k {
                data.extend_from_slice(std::slice::from_raw_parts(b.ptr.offset(kk as isize * b.rs).add(col0), w));
            }
        }
        Panels { data, k, n }
    }

    /// Whether these are the panels of a `k × n` B.
    pub fn fits(&self, k: usize, n: usize) -> bool {
        self.k == k && self.n == n
    }

    /// Bytes held.
    pub fn byte_size(&self) -> u64 {
        (self.data.len() * 4) as u64
    }
}

/// The panels of `b`, a constant weight multiplied by `rows` rows, kept in
/// `slot` from call to call (made on the first call, and again when `b`'s
/// size changes); `None` when such a product does not run by panels.
pub(crate) fn kept<'s>(slot: &'s mut Option<Panels>, rows: usize, b: MatRef) -> Option<&'s Panels> {
    let (k, n) = (b.rows, b.cols);
    if !cpu::avx2_fma() || !short_and_wide(rows, k, n, b.row_stride, b.col_stride) {
        return None;
    }
    if !slot.as_ref().is_some_and(|p| p.fits(k, n)) {
        let view = View { ptr: b.data.as_ptr(), rs: b.row_stride, cs: 1 };
        // SAFETY: a MatRef's elements lie inside its data (`MatRef::check`
        // runs when the product does; a row-major view is whole by making).
        *slot = Some(unsafe { Panels::of(view, k, n) });
    }
    slot.as_ref()
}

/// C = A·B (+ C when `read`) over columns `col0 .. col0 + n` of B, each
/// panel's part multiplied in place.
///
/// # Safety
/// As [`by_column_panels`]; `panels` are B's, and the columns lie inside it.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn by_prepared_panels(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    ldc: usize,
    read: bool,
    a: View,
    panels: &Panels,
    col0: usize,
    alpha: f32,
) {
    debug_assert!(panels.k == k && col0 + n <= panels.n);
    let mut col = col0;
    while col < col0 + n {
        let (p, within) = (col / PANEL_COLUMNS, col % PANEL_COLUMNS);
        let width = PANEL_COLUMNS.min(panels.n - p * PANEL_COLUMNS);
        let w = (width - within).min(col0 + n - col);
        let b = panels.data.as_ptr().add(p * PANEL_COLUMNS * k + within);
        multiply(m, w, k, dst.add(col - col0), ldc, read, a, View { ptr: b, rs: width as isize, cs: 1 }, alpha);
        col += w;
    }
}

/// C = A·B (+ C when `read`) with B copied [`PANEL_COLUMNS`] columns at a
/// time into a contiguous panel, reused from call to call on each thread.
///
/// # Safety
/// `a` is `m × k`, `b` is `k × n` with unit column stride, `dst` holds `m`
/// rows of `n` values `ldc` apart; no one else writes them.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn by_column_panels(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    ldc: usize,
    read: bool,
    a: View,
    b: View,
    alpha: f32,
) {
    let mut panel = PANEL.with(|p| p.take());
    panel.resize(k * PANEL_COLUMNS, 0.0);
    for col0 in (0..n).step_by(PANEL_COLUMNS) {
        let w = PANEL_COLUMNS.min(n - col0);
        for kk in 0..k {
            let from = std::slice::from_raw_parts(b.ptr.offset(kk as isize * b.rs).add(col0), w);
            panel[kk * w..(kk + 1) * w].copy_from_slice(from);
        }
        multiply(m, w, k, dst.add(col0), ldc, read, a, View { ptr: panel.as_ptr(), rs: w as isize, cs: 1 }, alpha);
    }
    PANEL.with(|p| p.set(panel));
}

/// One panel's product on the `gemm` crate's kernels.
#[allow(clippy::too_many_arguments)]
unsafe fn multiply(m: usize, n: usize, k: usize, dst: *mut f32, ldc: usize, read: bool, a: View, b: View, alpha: f32) {
    gemm::gemm(
        m,
        n,
        k,
        dst,
        1,
        ldc as isize,
        read,
        a.ptr,
        a.cs,
        a.rs,
        b.ptr,
        b.cs,
        b.rs,
        1.0,
        alpha,
        false,
        false,
        false,
        gemm::Parallelism::None,
    );
}

thread_local! {
    /// The column panel of B of the last short, wide product on this thread.
    static PANEL: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}
