//! Eight rows of eight `f32`s transposed in AVX2 registers: the depthwise
//! kernels' interleaving of eight channels' planes, and the lane-wise
//! reductions' gathers of a strided reduction axis.

/// Rows and columns of the block.
const LANES: usize = 8;

/// `to[k·8 + j] = from[j][k]`: eight rows of eight floats transposed in
/// registers. Inlined into its callers: a call per block (it sat in the
/// depthwise module before, where it was inlined) made EfficientNet's
/// depthwise layers, and the export, 6% slower.
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(in crate::simd) unsafe fn transpose8(from: [&[f32]; LANES], to: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(to.len() >= LANES * LANES && from.iter().all(|r| r.len() >= LANES));
    // no `array::from_fn` here: its closure, compiled for AVX2 and called
    // from code that is not, was left a call per row (returning a vector
    // through memory) when the inliner decided differently, which made
    // EfficientNet's depthwise layers twice as slow
    let mut r = [_mm256_setzero_ps(); LANES];
    for (j, v) in r.iter_mut().enumerate() {
        *v = _mm256_loadu_ps(from[j].as_ptr());
    }
    let lo = |a, b| _mm256_unpacklo_ps(a, b);
    let hi = |a, b| _mm256_unpackhi_ps(a, b);
    let (t0, t1, t2, t3) = (lo(r[0], r[1]), hi(r[0], r[1]), lo(r[2], r[3]), hi(r[2], r[3]));
    let (t4, t5, t6, t7) = (lo(r[4], r[5]), hi(r[4], r[5]), lo(r[6], r[7]), hi(r[6], r[7]));
    let (u0, u1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
    let (u2, u3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
    let (u4, u5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
    let (u6, u7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
    let out = [
        _mm256_permute2f128_ps::<0x20>(u0, u4),
        _mm256_permute2f128_ps::<0x20>(u1, u5),
        _mm256_permute2f128_ps::<0x20>(u2, u6),
        _mm256_permute2f128_ps::<0x20>(u3, u7),
        _mm256_permute2f128_ps::<0x31>(u0, u4),
        _mm256_permute2f128_ps::<0x31>(u1, u5),
        _mm256_permute2f128_ps::<0x31>(u2, u6),
        _mm256_permute2f128_ps::<0x31>(u3, u7),
    ];
    for (k, v) in out.into_iter().enumerate() {
        _mm256_storeu_ps(to.as_mut_ptr().add(k * LANES), v);
    }
}
