//! Exact products of 8-bit integer matrices, for onnxruntime's dynamically
//! quantized models (`MatMulInteger`, `ConvInteger`, [`quantized`](super::quantized)).
//!
//! Both operands arrive with their zero points subtracted, as `i16` in
//! `[-255, 255]`. The product pairs the reduction axis: `B` is packed once
//! ([`PackedB`]) into panels of [`NR`] columns in which every pair of rows
//! `(2q, 2q+1)` holds each column's two values side by side, so that one
//! `vpmaddwd` multiplies a broadcast pair of `A` by 16 (AVX-512BW) or 8
//! (AVX2) columns' pairs and adds each column's two products into an `i32`
//! lane. Sums stay exact in `i32` (a pair adds at most 2·255², the whole
//! reduction at most `k`·255²; past 2³¹ they wrap, as `i32` arithmetic
//! does), unlike the `f32` product, whose 24-bit mantissa loses the low
//! bits of long sums. Panels run in parallel on the current rayon pool.
//!
//! With AVX-512 VNNI (`vpdpwssd`) the multiply and the add are one
//! instruction. The portable instance computes the same sums with scalar loops.

use super::cpu;
use rayon::prelude::*;

/// Columns per packed panel.
pub(crate) const NR: usize = 32;

/// A `k × n` matrix packed for [`product`]: panel `p` (columns `p·NR…`)
/// holds, for every row pair `q`, `NR` pairs `(b[2q][c], b[2q+1][c])`;
/// rows past `k` and columns past `n` are zeros.
pub(crate) struct PackedB {
    k: usize,
    n: usize,
    data: Vec<i16>,
}

impl PackedB {
    /// A zeroed packing of a `k × n` matrix, to be filled through
    /// [`Self::panels_mut`].
    pub(crate) fn zeroed(k: usize, n: usize) -> PackedB {
        let len = n.div_ceil(NR) * k.div_ceil(2) * 2 * NR;
        PackedB { k, n, data: vec![0; len] }
    }

    /// Packs row-major `b` (`k` rows of `n`).
    pub(crate) fn from_rows(k: usize, n: usize, b: &[i16]) -> PackedB {
        let mut packed = PackedB::zeroed(k, n);
        packed.fill_from_rows(b);
        packed
    }

    /// Packs row-major `b` (`k` rows of `n`, this packing's sizes) over
    /// what it held.
    pub(crate) fn fill_from_rows(&mut self, b: &[i16]) {
        let (k, n) = (self.k, self.n);
        assert_eq!(b.len(), k * n, "a {k}×{n} matrix");
        self.panels_mut().for_each(|(p, panel)| {
            let (c0, width) = (p * NR, NR.min(n - p * NR));
            for (q, pairs) in panel.chunks_exact_mut(2 * NR).enumerate() {
                let first = &b[2 * q * n + c0..][..width];
                if 2 * q + 1 < k {
                    let second = &b[(2 * q + 1) * n + c0..][..width];
                    // an interleaving store the compiler vectorizes
                    for ((d, &x), &y) in pairs.chunks_exact_mut(2).zip(first).zip(second) {
                        d[0] = x;
                        d[1] = y;
                    }
                } else {
                    for (d, &x) in pairs.chunks_exact_mut(2).zip(first) {
                        d[0] = x;
                        d[1] = 0;
                    }
                }
            }
        });
    }

    /// The panels, in parallel, each with its index: panel `p` is
    /// `pairs · 2·NR` values, element `(row, p·NR + j)` at
    /// `(row / 2)·2·NR + 2j + row % 2`.
    pub(crate) fn panels_mut(&mut self) -> impl IndexedParallelIterator<Item = (usize, &mut [i16])> {
        let len = self.pairs() * 2 * NR;
        self.data.par_chunks_mut(len.max(1)).enumerate()
    }

    /// Row pairs: the reduction length rounded up to even, halved.
    pub(crate) fn pairs(&self) -> usize {
        self.k.div_ceil(2)
    }

    /// The bytes it holds.
    pub(crate) fn byte_size(&self) -> u64 {
        (self.data.len() * 2) as u64
    }

    fn panel(&self, p: usize) -> &[i16] {
        let len = self.pairs() * 2 * NR;
        &self.data[p * len..][..len]
    }
}

/// `c[r·ldc + j] = Σ_t a[r·lda + t] · b[t][j]` for the `m` rows of `a`
/// (each `2·b.pairs()` values, the one past `k` zero when `k` is odd) and
/// the `n` columns of `b`. `simd` false keeps the portable loops.
pub(crate) fn product(m: usize, a: &[i16], lda: usize, b: &PackedB, c: &mut [i32], ldc: usize, simd: bool) {
    let (n, pairs) = (b.n, b.pairs());
    if m == 0 || n == 0 {
        return;
    }
    assert!(lda >= 2 * pairs && a.len() >= (m - 1) * lda + 2 * pairs, "A rows hold the paired reduction");
    assert!(ldc >= n && c.len() >= (m - 1) * ldc + n, "C holds m rows of n");
    let isa = if !simd || !cpu::avx2_fma() {
        Isa::Portable
    } else if cpu::avx512() && avx512bw() {
        if avx512vnni() {
            Isa::Avx512Vnni
        } else {
            Isa::Avx512
        }
    } else {
        Isa::Avx2
    };
    product_on(isa, m, a, lda, b, c, ldc);
}

fn avx512bw() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512bw");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn avx512vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512vnni");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`product`] on instance `isa` (which the processor must have).
fn product_on(isa: Isa, m: usize, a: &[i16], lda: usize, b: &PackedB, c: &mut [i32], ldc: usize) {
    let (n, pairs) = (b.n, b.pairs());
    let out = Out(c.as_mut_ptr());
    let panels = n.div_ceil(NR);
    let work = m * n * pairs;
    let run = |p: usize| {
        let width = NR.min(n - p * NR);
        let panel = b.panel(p);
        let mut r = 0;
        while r < m {
            let rows = isa.rows().min(m - r);
            // SAFETY: rows r…r+rows of `a` hold `2·pairs` values each (asserted
            // above); the panel holds `pairs` pair rows of NR columns; the
            // block's outputs (rows r…, columns p·NR…+width) lie inside `c`
            // and no other panel writes them.
            unsafe {
                isa.block(
                    rows,
                    a.as_ptr().add(r * lda),
                    lda,
                    panel.as_ptr(),
                    pairs,
                    out.at(r * ldc + p * NR),
                    ldc,
                    width,
                )
            };
            r += rows;
        }
    };
    if work >= 1 << 18 && panels > 1 {
        (0..panels).into_par_iter().for_each(run);
    } else {
        (0..panels).for_each(run);
    }
}

/// The output pointer, shared by the panels' tasks (each writes its own columns).
#[derive(Clone, Copy)]
struct Out(*mut i32);
// SAFETY: every task writes a disjoint set of columns of the output.
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    fn at(self, offset: usize) -> *mut i32 {
        // SAFETY: offsets come from in-bounds block origins (see `product`).
        unsafe { self.0.add(offset) }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Isa {
    Portable,
    Avx2,
    Avx512,
    /// AVX-512 with VNNI's `vpdpwssd`: the pair products added into the
    /// sums in one instruction.
    Avx512Vnni,
}

impl Isa {
    /// Rows per register block.
    fn rows(self) -> usize {
        match self {
            Isa::Portable => 4,
            Isa::Avx2 => 3,
            Isa::Avx512 | Isa::Avx512Vnni => 6,
        }
    }

    /// One block of `rows` (≤ [`Self::rows`]) rows by one panel.
    ///
    /// # Safety
    /// `a` holds `rows` rows of `2·pairs` values `lda` apart, `b` one
    /// panel of `pairs` pair rows, `c` `rows` rows of `width` writable
    /// values `ldc` apart.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        self,
        rows: usize,
        a: *const i16,
        lda: usize,
        b: *const i16,
        pairs: usize,
        c: *mut i32,
        ldc: usize,
        width: usize,
    ) {
        macro_rules! by_rows {
            ($f:ident, $($n:literal)*) => {
                match rows {
                    $($n => $f::<$n>(a, lda, b, pairs, c, ldc, width),)*
                    _ => unreachable!("at most {} rows", self.rows()),
                }
            };
        }
        #[cfg(target_arch = "x86_64")]
        {
            if self == Isa::Avx512 {
                return by_rows!(block_avx512, 1 2 3 4 5 6);
            }
            if self == Isa::Avx512Vnni {
                return by_rows!(block_vnni, 1 2 3 4 5 6);
            }
            if self == Isa::Avx2 {
                return by_rows!(block_avx2, 1 2 3);
            }
        }
        by_rows!(block_portable, 1 2 3 4)
    }
}

/// The pair `(a[2q], a[2q+1])` as one `i32` (low half first).
#[inline(always)]
unsafe fn pair(a: *const i16, q: usize) -> i32 {
    // SAFETY: the caller's row holds 2q+1 values.
    unsafe { (a.add(2 * q) as *const i32).read_unaligned() }
}

unsafe fn block_portable<const R: usize>(
    a: *const i16,
    lda: usize,
    b: *const i16,
    pairs: usize,
    c: *mut i32,
    ldc: usize,
    width: usize,
) {
    let mut acc = [[0i32; NR]; R];
    for q in 0..pairs {
        // SAFETY: (see `Isa::block`)
        let bq = unsafe { std::slice::from_raw_parts(b.add(q * 2 * NR), 2 * NR) };
        for (r, row) in acc.iter_mut().enumerate() {
            let (a0, a1) = unsafe { (i32::from(*a.add(r * lda + 2 * q)), i32::from(*a.add(r * lda + 2 * q + 1))) };
            for (j, s) in row.iter_mut().enumerate() {
                *s = s.wrapping_add(a0 * i32::from(bq[2 * j]) + a1 * i32::from(bq[2 * j + 1]));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        // SAFETY: (see `Isa::block`)
        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), c.add(r * ldc), width) };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_avx2<const R: usize>(
    a: *const i16,
    lda: usize,
    b: *const i16,
    pairs: usize,
    c: *mut i32,
    ldc: usize,
    width: usize,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_si256(); 4]; R];
    for q in 0..pairs {
        let bq = unsafe { b.add(q * 2 * NR) };
        for (r, row) in acc.iter_mut().enumerate() {
            let av = _mm256_set1_epi32(unsafe { pair(a.add(r * lda), q) });
            for (v, s) in row.iter_mut().enumerate() {
                let bv = unsafe { _mm256_loadu_si256(bq.add(16 * v) as *const __m256i) };
                *s = _mm256_add_epi32(*s, _mm256_madd_epi16(av, bv));
            }
        }
    }
    for (r, row) in acc.iter().enumerate() {
        let mut lanes = [0i32; NR];
        for (v, s) in row.iter().enumerate() {
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().add(8 * v) as *mut __m256i, *s) };
        }
        unsafe { std::ptr::copy_nonoverlapping(lanes.as_ptr(), c.add(r * ldc), width) };
    }
}

/// The AVX-512 register block, one instance per way of adding a pair's
/// products into the sums (`vpmaddwd` then `vpaddd`, or VNNI's `vpdpwssd`).
macro_rules! avx512_block {
    ($name:ident, $features:literal, |$acc:ident, $av:ident, $bv:ident| $add:expr) => {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name<const R: usize>(
            a: *const i16,
            lda: usize,
            b: *const i16,
            pairs: usize,
            c: *mut i32,
            ldc: usize,
            width: usize,
        ) {
            use std::arch::x86_64::*;
            let mut acc = [[_mm512_setzero_si512(); 2]; R];
            for q in 0..pairs {
                let (b0, b1) = unsafe {
                    (
                        _mm512_loadu_si512(b.add(q * 2 * NR) as *const _),
                        _mm512_loadu_si512(b.add(q * 2 * NR + NR) as *const _),
                    )
                };
                for (r, row) in acc.iter_mut().enumerate() {
                    let $av = _mm512_set1_epi32(unsafe { pair(a.add(r * lda), q) });
                    for (s, bv) in row.iter_mut().zip([b0, b1]) {
                        let ($acc, $bv) = (*s, bv);
                        *s = $add;
                    }
                }
            }
            unsafe { store_avx512(&acc, c, ldc, width) }
        }
    };
}

avx512_block!(block_avx512, "avx512f,avx512bw", |acc, av, bv| _mm512_add_epi32(acc, _mm512_madd_epi16(av, bv)));
avx512_block!(block_vnni, "avx512f,avx512bw,avx512vnni", |acc, av, bv| _mm512_dpwssd_epi32(acc, av, bv));

/// Stores the sums of one AVX-512 block (`width` columns of each row).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn store_avx512<const R: usize>(
    acc: &[[std::arch::x86_64::__m512i; 2]; R],
    c: *mut i32,
    ldc: usize,
    width: usize,
) {
    use std::arch::x86_64::*;
    for (r, row) in acc.iter().enumerate() {
        let dst = unsafe { c.add(r * ldc) };
        if width == NR {
            unsafe {
                _mm512_storeu_si512(dst as *mut _, row[0]);
                _mm512_storeu_si512(dst.add(16) as *mut _, row[1]);
            }
        } else {
            let low = width.min(16);
            let high = width - low;
            unsafe {
                _mm512_mask_storeu_epi32(dst, ((1u32 << low) - 1) as u16, row[0]);
                _mm512_mask_storeu_epi32(dst.add(16), ((1u32 << high) - 1) as u16, row[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[i16], b: &[i16]) -> Vec<i32> {
        let mut c = vec![0i32; m * n];
        for r in 0..m {
            for j in 0..n {
                c[r * n + j] = (0..k).map(|t| i32::from(a[r * k + t]) * i32::from(b[t * n + j])).sum();
            }
        }
        c
    }

    fn values(len: usize, seed: u32) -> Vec<i16> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                ((s >> 16) % 511) as i16 - 255
            })
            .collect()
    }

    #[test]
    fn every_instance_gives_the_exact_integer_product() {
        for &(m, k, n) in &[(1, 1, 1), (7, 5, 33), (13, 64, 70), (6, 1024, 32), (33, 301, 97)] {
            let (a, b) = (values(m * k, 1), values(k * n, 2));
            let want = naive(m, k, n, &a, &b);
            let lda = k.div_ceil(2) * 2;
            let mut padded = vec![0i16; m * lda];
            for r in 0..m {
                padded[r * lda..r * lda + k].copy_from_slice(&a[r * k..][..k]);
            }
            let packed = PackedB::from_rows(k, n, &b);
            let mut isas = vec![Isa::Portable];
            if std::arch::is_x86_feature_detected!("avx2") {
                isas.push(Isa::Avx2);
            }
            if avx512bw() && std::arch::is_x86_feature_detected!("avx512f") {
                isas.push(Isa::Avx512);
                if avx512vnni() {
                    isas.push(Isa::Avx512Vnni);
                }
            }
            for isa in isas {
                let mut c = vec![7i32; m * (n + 3)];
                product_on(isa, m, &padded, lda, &packed, &mut c, n + 3);
                for r in 0..m {
                    assert_eq!(&c[r * (n + 3)..][..n], &want[r * n..][..n], "{m}×{k}×{n}, {isa:?}, row {r}");
                    assert_eq!(&c[r * (n + 3) + n..][..3], &[7, 7, 7], "past the columns untouched");
                }
            }
        }
    }
}
