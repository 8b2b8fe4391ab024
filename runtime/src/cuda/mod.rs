//! The CUDA backend: kernel programs ([`crate::kernel`]) as CUDA C
//! ([`codegen`]), compiled by NVRTC ([`nvrtc`]) to PTX and to CUBINs for
//! sm_80 and sm_90, assembled by ptxas ([`ptxas`]) for the resource report,
//! and — on machines without a GPU, which is every CI machine — compiled
//! for the CPU by g++ with a small shim and run there ([`host`]) against
//! the reference executor. [`artifact`] writes what a deployment picks up:
//! each kernel's `.cu` and PTX and a JSON manifest.

pub mod artifact;
pub mod codegen;
pub mod contraction;
pub mod device;
pub mod host;
pub mod launch;
pub mod nvrtc;
pub mod prelude;
pub mod ptxas;
pub mod tensors;

pub use codegen::{generate, CudaKernel};

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

/// The source NVRTC compiles for `kernels`: the 16-bit float headers when
/// a kernel stores such values, the helpers, then every kernel.
pub fn device_source(kernels: &[CudaKernel]) -> String {
    let mut src = String::new();
    if kernels.iter().any(|k| k.buffers.iter().any(|b| b.starts_with("__"))) {
        src.push_str(prelude::DEVICE_HALF_INCLUDES);
    }
    src.push_str(prelude::DEVICE_HELPERS);
    for k in kernels {
        src.push_str(&k.source);
    }
    src
}

/// Folders holding `cuda_fp16.h` for NVRTC: `$DIAMOND_CUDA_INCLUDE`, else
/// the runtime wheel's `include/` beside NVRTC's `lib/` on `LD_LIBRARY_PATH`.
pub fn include_dirs() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("DIAMOND_CUDA_INCLUDE") {
        return vec![PathBuf::from(p)];
    }
    let libs =
        std::env::var_os("LD_LIBRARY_PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default();
    libs.iter()
        .filter_map(|l| Some(l.parent()?.parent()?.join("cuda_runtime/include")))
        .filter(|p| p.join("cuda_fp16.h").is_file())
        .take(1)
        .collect()
}

/// A hex digest of `parts`, for cache file names.
pub(crate) fn hash_hex(parts: &[&[u8]]) -> String {
    let mut out = String::new();
    for seed in [0u64, 0x9e37_79b9_7f4a_7c15] {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        for p in parts {
            p.hash(&mut h);
        }
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}
