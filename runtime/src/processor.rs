//! What the processor offers, read by whichever executor wants it:
//! the reference kernels' few vectorized loops (2-D pooling) and the SIMD
//! backend both read it here, so neither depends on the other for it.

/// Whether this processor has AVX2 and FMA.
pub fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
