//! Whether kernels can run on a GPU here: the CUDA driver library
//! (`libcuda.so.1`, which only an NVIDIA driver installs) and a device.
//! `cudarc` panics when the library is absent, so presence is checked
//! before anything else touches the driver.

/// Why `--backend cuda` cannot run on this machine.
pub fn unavailable() -> String {
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return "--backend cuda: no CUDA driver here (libcuda.so.1 is not on the library path): it needs an NVIDIA \
                GPU and its driver; `diamond lower --target cuda -o DIR` writes the kernels without one"
            .into();
    }
    match cudarc::driver::CudaContext::device_count() {
        Ok(0) | Err(_) => "--backend cuda: the CUDA driver is present but reports no device".into(),
        Ok(n) => format!(
            "--backend cuda: {n} CUDA device(s) found, but launching the generated kernels on a device is not \
             implemented yet; `diamond lower --target cuda -o DIR` writes them, and their host execution is tested"
        ),
    }
}
