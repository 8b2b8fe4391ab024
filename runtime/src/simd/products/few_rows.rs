//! Products of at most [`FEW_ROWS`] rows (a classifier's Gemm over a batch
//! of two, a GEMV): `c = c·[read] + alpha · a·b` without packing either
//! operand. The `gemm` crate packs B for every call, which for a weight of
//! 144 × 256 read by two rows costs more than the product itself.
//!
//! `product`: B's columns contiguous (a transposed weight, `transB`), and
//! A's rows: each column of B is read once and dotted with every row of A,
//! four columns at a time. `product_by_rows`: B's rows contiguous and B
//! bigger than 1 MiB, as scaled row additions into C. For smaller
//! row-contiguous weights those additions (one load and store of C per
//! multiply-add) measured slower than the crate's register-held tiles
//! (convnext_tiny's MatMuls on two rows: 0.083 → 0.103 ms), so they stay
//! with the crate, as do other layouts.

use super::gemm::View;

/// The most rows of C these products take.
pub const FEW_ROWS: usize = 4;

/// Whether [`product`] covers `a` and `b` (as [`product`]'s arguments).
pub(crate) fn covers(rows: usize, a: View, b: View) -> bool {
    rows <= FEW_ROWS && b.rs == 1 && a.cs == 1
}

/// Whether [`product_by_rows`] covers the product: at most [`FEW_ROWS`]
/// rows of C, B's rows contiguous (a weight as MatMul stores it,
/// `k × n`), and B too big for packing it to pay (a language model's head,
/// `1 × 512 · 512 × 32128`: the `gemm` crate packed all 66 MB of it for one
/// row, 21 ms against 5 ms streamed).
pub(crate) fn covers_by_rows(rows: usize, k: usize, cols: usize, b: View) -> bool {
    rows <= FEW_ROWS && b.cs == 1 && k * cols >= BY_ROWS_VALUES
}

/// B holds at least this many values for [`product_by_rows`] (1 MiB).
const BY_ROWS_VALUES: usize = 1 << 18;

/// Columns of C [`product_by_rows`] finishes at a time (16 KiB a row: in L1).
const BY_ROWS_CHUNK: usize = 4096;

/// As [`product`], for B whose rows are contiguous: C's rows gather
/// `a[r, kk] · b[kk, ·]` row of B after row of B, [`BY_ROWS_CHUNK`]
/// columns at a time, so that B streams through once and C stays in cache.
///
/// # Safety
/// As for [`product`], with [`covers_by_rows`] in place of [`covers`].
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
pub(crate) unsafe fn product_by_rows(
    rows: usize,
    cols: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    read: bool,
    a: View,
    b: View,
    alpha: f32,
) {
    for first in (0..cols).step_by(BY_ROWS_CHUNK) {
        let width = BY_ROWS_CHUNK.min(cols - first);
        for r in 0..rows {
            let out = std::slice::from_raw_parts_mut(c.add(r * ldc + first), width);
            if !read {
                out.fill(0.0);
            }
        }
        for kk in 0..k {
            let brow = std::slice::from_raw_parts(b.ptr.offset(kk as isize * b.rs + first as isize), width);
            for r in 0..rows {
                let x = alpha * *a.ptr.offset(r as isize * a.rs + kk as isize * a.cs);
                let out = std::slice::from_raw_parts_mut(c.add(r * ldc + first), width);
                for (o, &v) in out.iter_mut().zip(brow) {
                    *o = x.mul_add(v, *o);
                }
            }
        }
    }
}

/// `c[r, j] = (read ? c[r, j] : 0) + alpha · Σ_kk a[r, kk] · b[kk, j]` for
/// `r < rows`, `j < cols`; row `r` of C starts at `c + r·ldc`.
///
/// # Safety
/// The views reach `rows × k` and `k × cols` elements inside their data,
/// C holds the rows, [`covers`] holds, and (on x86-64) the processor has
/// AVX2 and FMA.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
pub(crate) unsafe fn product(
    rows: usize,
    cols: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    read: bool,
    a: View,
    b: View,
    alpha: f32,
) {
    let row = |r: usize| std::slice::from_raw_parts_mut(c.add(r * ldc), cols);
    let arow = |r: usize| std::slice::from_raw_parts(a.ptr.offset(r as isize * a.rs), k);
    let column = |j: usize| std::slice::from_raw_parts(b.ptr.offset(j as isize * b.cs), k);
    let store = |r: usize, j: usize, sum: f32| {
        let x = &mut row(r)[j];
        *x = if read { *x + alpha * sum } else { alpha * sum };
    };
    // Four columns at a time: four independent chains of multiply-adds per
    // lane, where one column's chain waits on each add before the next (a
    // batch-1 LSTM step's 1×512 · 512×2048 product ran at 4 multiply-adds a
    // cycle, its latency's bound).
    let quads = cols / 4 * 4;
    for j in (0..quads).step_by(4) {
        let cs = [column(j), column(j + 1), column(j + 2), column(j + 3)];
        for r in 0..rows {
            let sums = dot4(arow(r), cs);
            for (q, &sum) in sums.iter().enumerate() {
                store(r, j + q, sum);
            }
        }
    }
    for j in quads..cols {
        let col = column(j);
        for r in 0..rows {
            store(r, j, dot(arow(r), col));
        }
    }
}

/// `Σ x[i]·y_q[i]` for four `y_q`: with AVX2, eight lanes and two
/// accumulators per column (eight independent chains); elsewhere [`dot`]
/// four times.
#[inline(always)]
fn dot4(x: &[f32], ys: [&[f32]; 4]) -> [f32; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `product`, the only caller, runs with AVX2 and FMA on x86-64 (its contract).
        unsafe { dot4_avx2(x, ys) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        ys.map(|y| dot(x, y))
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn dot4_avx2(x: &[f32], ys: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let n = x.len();
    let ys = ys.map(|y| &y[..n]);
    let mut lo = [_mm256_setzero_ps(); 4];
    let mut hi = [_mm256_setzero_ps(); 4];
    let whole = n / 16 * 16;
    let mut i = 0;
    while i < whole {
        let a0 = _mm256_loadu_ps(x.as_ptr().add(i));
        let a1 = _mm256_loadu_ps(x.as_ptr().add(i + 8));
        for q in 0..4 {
            let y = ys[q].as_ptr().add(i);
            lo[q] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(y), lo[q]);
            hi[q] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(y.add(8)), hi[q]);
        }
        i += 16;
    }
    let mut out = [0f32; 4];
    for q in 0..4 {
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(lo[q], hi[q]));
        let tail: f32 = (whole..n).map(|t| x[t] * ys[q][t]).sum();
        out[q] = lanes.iter().sum::<f32>() + tail;
    }
    out
}

/// `Σ x[i]·y[i]` in sixteen partial sums (so that it vectorizes).
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (xs, ys) = (x.chunks_exact(16), y.chunks_exact(16));
    let (xr, yr) = (xs.remainder(), ys.remainder());
    for (p, q) in xs.zip(ys) {
        for l in 0..16 {
            acc[l] = p[l].mul_add(q[l], acc[l]);
        }
    }
    for (l, (&p, &q)) in xr.iter().zip(yr).enumerate() {
        acc[l] = p.mul_add(q, acc[l]);
    }
    acc.iter().sum()
}
