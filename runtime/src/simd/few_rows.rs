//! Products of at most [`FEW_ROWS`] rows (a classifier's Gemm over a batch
//! of two, a GEMV): `c = c·[read] + alpha · a·b` without packing either
//! operand. The `gemm` crate packs B for every call, which for a weight of
//! 144 × 256 read by two rows costs more than the product itself.
//!
//! B's columns must be contiguous (a transposed weight, `transB`), and A's
//! rows: each column of B is read once and dotted with every row of A, in
//! sixteen partial sums. Row-contiguous B as scaled row additions into C
//! (one load and store of C per multiply-add) measured slower than the
//! crate's register-held tiles (convnext_tiny's MatMuls on two rows:
//! 0.083 → 0.103 ms), so it stays with the crate, as do other layouts.

use super::gemm::View;

/// The most rows of C these products take.
pub const FEW_ROWS: usize = 4;

/// Whether [`product`] covers `a` and `b` (as [`product`]'s arguments).
pub(crate) fn covers(rows: usize, a: View, b: View) -> bool {
    rows <= FEW_ROWS && b.rs == 1 && a.cs == 1
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
    for j in 0..cols {
        let column = std::slice::from_raw_parts(b.ptr.offset(j as isize * b.cs), k);
        for r in 0..rows {
            let sum = alpha * dot(arow(r), column);
            let x = &mut row(r)[j];
            *x = if read { *x + sum } else { sum };
        }
    }
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
