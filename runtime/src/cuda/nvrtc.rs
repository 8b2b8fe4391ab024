//! Compiling generated CUDA C with NVRTC, loaded at run time through
//! `cudarc` (no CUDA toolkit at build time): PTX for a virtual
//! architecture, CUBIN for real ones (sm_80, sm_90). Results are cached
//! on disk by a hash of the source and the options, so a model's kernels
//! compile once.
//!
//! `cudarc` panics when the library is missing, so [`available`] is
//! checked first and its absence becomes an error that says what to
//! install.

use cudarc::nvrtc::{result, sys};
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// What NVRTC produced for one architecture.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// `compute_80`, `sm_90`, ...
    pub arch: String,
    /// The PTX text (virtual architectures) or the CUBIN bytes (real ones).
    pub bytes: Vec<u8>,
}

/// The message when NVRTC cannot be loaded.
pub const MISSING: &str = "NVRTC (libnvrtc.so.12) is not on the library path: install the CUDA wheels \
(pip install nvidia-cuda-nvrtc-cu12==12.9.* nvidia-cuda-nvcc-cu12==12.9.* nvidia-cuda-runtime-cu12==12.9.*) \
and put their lib folder on LD_LIBRARY_PATH (see the README)";

/// Whether NVRTC can be loaded.
pub fn available() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { sys::is_culib_present() }
}

/// NVRTC's version, `(major, minor)`.
pub fn version() -> Result<(i32, i32), String> {
    if !available() {
        return Err(MISSING.into());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; the pointers are valid.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }.result().map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// Compiles `source` for `arch` (`compute_XX` gives PTX, `sm_XX` a CUBIN),
/// with `includes` searched for `#include`s; cached under `cache`.
pub fn compile(source: &str, arch: &str, includes: &[PathBuf], cache: Option<&Path>) -> Result<Compiled, String> {
    let real = arch.starts_with("sm_");
    let key = super::hash_hex(&[source.as_bytes(), arch.as_bytes()]);
    let cached = cache.map(|c| c.join(format!("{key}.{}", if real { "cubin" } else { "ptx" })));
    if let Some(bytes) = cached.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(Compiled { arch: arch.to_string(), bytes });
    }
    if !available() {
        return Err(MISSING.into());
    }
    let src = CString::new(source).map_err(|_| "the source holds a NUL byte".to_string())?;
    let name = CString::new("diamond_kernels.cu").unwrap_or_default();
    let program = result::create_program(&src, Some(&name)).map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?;
    let mut options = vec![format!("--gpu-architecture={arch}"), "--std=c++17".to_string(), "--fmad=true".to_string()];
    options.extend(includes.iter().map(|p| format!("--include-path={}", p.display())));
    // SAFETY: `program` is a live program; the options are valid strings.
    let outcome = unsafe { result::compile_program(program, &options) };
    let log = unsafe { result::get_program_log(program) }
        .map(|l| l.iter().take_while(|&&c| c != 0).map(|&c| c as u8 as char).collect::<String>())
        .unwrap_or_default();
    let bytes = match outcome {
        Err(e) => Err(format!("NVRTC failed for {arch} ({e:?}):\n{log}")),
        Ok(()) if real => unsafe { cubin(program) },
        Ok(()) => unsafe { result::get_ptx(program) }
            .map(|p| p.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect())
            .map_err(|e| format!("nvrtcGetPTX: {e:?}")),
    };
    // SAFETY: destroyed once, after its last use.
    let _ = unsafe { result::destroy_program(program) };
    let bytes = bytes?;
    if let Some(path) = cached {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")));
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, &bytes).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
    Ok(Compiled { arch: arch.to_string(), bytes })
}

/// The CUBIN of a program compiled for a real architecture.
unsafe fn cubin(program: sys::nvrtcProgram) -> Result<Vec<u8>, String> {
    let mut size = 0usize;
    sys::nvrtcGetCUBINSize(program, &mut size).result().map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
    let mut bytes = vec![0u8; size];
    sys::nvrtcGetCUBIN(program, bytes.as_mut_ptr().cast()).result().map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
    Ok(bytes)
}
