//! Which instruction set the SIMD kernels use, decided once per process:
//! AVX2 with FMA when the processor has both and `DIAMOND_SIMD` is not
//! `off`, else the portable code (the same loops compiled for the baseline
//! target, and a plain blocked GEMM in place of the `gemm` crate).

use std::sync::OnceLock;

/// True when the AVX2+FMA versions of the kernels may run.
pub fn avx2_fma() -> bool {
    static CHOSEN: OnceLock<bool> = OnceLock::new();
    *CHOSEN.get_or_init(|| !forced_off() && detected())
}

/// `DIAMOND_SIMD=off` forces the portable kernels (to check them on a machine that has AVX2).
fn forced_off() -> bool {
    std::env::var("DIAMOND_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("off"))
}

#[cfg(target_arch = "x86_64")]
fn detected() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> bool {
    false
}
