//! The portable matrix product, for processors without AVX2+FMA and for
//! `DIAMOND_SIMD=off`: B's rows copied contiguous once, then each row of C
//! accumulated as `Σ_p a[i,p] · B[p,·]` — a straight loop over the row that
//! the compiler vectorizes for the baseline target.

use super::gemm::View;

/// `c = (read ? c : 0) + alpha · a·b` for an m×n tile of C with row length `ldc`.
///
/// # Safety
/// `a` (m×k) and `b` (k×n) are readable through their strides; `c` is writable over the tile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm(
    m: usize,
    n: usize,
    k: usize,
    c: *mut f32,
    ldc: usize,
    read: bool,
    a: View,
    b: View,
    alpha: f32,
) {
    let mut packed = vec![0.0f32; k * n];
    for p in 0..k {
        for j in 0..n {
            packed[p * n + j] = *b.ptr.offset(p as isize * b.rs + j as isize * b.cs);
        }
    }
    let mut acc = vec![0.0f32; n];
    for i in 0..m {
        acc.fill(0.0);
        for p in 0..k {
            let x = *a.ptr.offset(i as isize * a.rs + p as isize * a.cs);
            acc.iter_mut().zip(&packed[p * n..(p + 1) * n]).for_each(|(s, y)| *s += x * y);
        }
        let row = std::slice::from_raw_parts_mut(c.add(i * ldc), n);
        if read {
            row.iter_mut().zip(&acc).for_each(|(y, s)| *y += alpha * s);
        } else {
            row.iter_mut().zip(&acc).for_each(|(y, s)| *y = alpha * s);
        }
    }
}
