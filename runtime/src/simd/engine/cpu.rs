//! Which instruction set the SIMD kernels use, decided once per process:
//! AVX2 with FMA when the processor has both and `DIAMOND_SIMD` is not
//! `off`, else the portable code (the same loops compiled for the baseline
//! target, and a plain blocked GEMM in place of the `gemm` crate).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// True when the AVX2+FMA versions of the kernels may run.
pub fn avx2_fma() -> bool {
    static CHOSEN: OnceLock<bool> = OnceLock::new();
    *CHOSEN.get_or_init(|| !forced("off") && detected())
}

/// True when the tile evaluator may run its AVX-512 instance: AVX2+FMA
/// chosen, the processor has AVX-512 (F, VL), and `DIAMOND_SIMD` is not
/// `avx2` (which keeps the AVX2 instance, to check it on such a machine).
pub fn avx512() -> bool {
    static CHOSEN: OnceLock<bool> = OnceLock::new();
    *CHOSEN.get_or_init(|| avx2_fma() && !forced("avx2") && detected_avx512())
}

/// True unless `DIAMOND_WINOGRAD=off`, which sends 3×3 convolutions to
/// im2col as before Winograd's route (to compare the two, or to get the
/// direct sum's rounding).
pub fn winograd() -> bool {
    static CHOSEN: OnceLock<bool> = OnceLock::new();
    *CHOSEN.get_or_init(|| !std::env::var("DIAMOND_WINOGRAD").is_ok_and(|v| v.eq_ignore_ascii_case("off")))
}

/// `DIAMOND_DIRECT=on|off`: every non-depthwise convolution that is not
/// Winograd's goes to the direct kernel, or none does (to compare it with
/// im2col and to test it on every shape); unset, the shape decides.
/// [`force_direct_conv`] changes the choice while the process runs.
pub fn direct_conv() -> Option<bool> {
    match DIRECT.load(Ordering::Relaxed) {
        DIRECT_UNREAD => {
            let chosen = match std::env::var("DIAMOND_DIRECT") {
                Ok(v) if v.eq_ignore_ascii_case("on") => Some(true),
                Ok(v) if v.eq_ignore_ascii_case("off") => Some(false),
                _ => None,
            };
            force_direct_conv(chosen);
            chosen
        }
        DIRECT_ON => Some(true),
        DIRECT_OFF => Some(false),
        _ => None,
    }
}

/// Sets what [`direct_conv`] answers from now on, in place of
/// `DIAMOND_DIRECT` — for benchmarks that time both routes in turn in one
/// process (this machine's speed drifts by tens of percent between runs
/// seconds apart) and for tests.
pub fn force_direct_conv(chosen: Option<bool>) {
    let v = match chosen {
        Some(true) => DIRECT_ON,
        Some(false) => DIRECT_OFF,
        None => DIRECT_SHAPE,
    };
    DIRECT.store(v, Ordering::Relaxed);
}

/// [`direct_conv`]'s state: not read from the environment yet, forced on,
/// forced off, or left to the shape.
static DIRECT: AtomicU8 = AtomicU8::new(DIRECT_UNREAD);
const DIRECT_UNREAD: u8 = 0;
const DIRECT_ON: u8 = 1;
const DIRECT_OFF: u8 = 2;
const DIRECT_SHAPE: u8 = 3;

#[cfg(target_arch = "x86_64")]
fn detected_avx512() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl")
}

#[cfg(not(target_arch = "x86_64"))]
fn detected_avx512() -> bool {
    false
}

/// Whether `DIAMOND_SIMD` is `choice`: `off` forces the portable kernels
/// (to check them on a machine that has AVX2), `avx2` the AVX2 ones.
fn forced(choice: &str) -> bool {
    std::env::var("DIAMOND_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case(choice))
}

#[cfg(target_arch = "x86_64")]
fn detected() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn detected() -> bool {
    false
}
