//! `diamond._native`: the Rust half of the Python package `diamond`.
//!
//! The module reads models from a path or from bytes, checks, converts,
//! optimizes and runs them with the workspace's crates, and hands back
//! Python objects: the check report as the same document `diamond check
//! --json` prints (built by `diamond::check::json`), ONNX bytes,
//! NumPy arrays. Every call releases the GIL while it works. The public API
//! (`Report`, `ModelProto` in and out, `convert_many`, the exceptions) is the
//! Python layer in `python/diamond/`, which calls these functions.
//!
//! The bindings are compiled only with the `python` feature, which maturin
//! turns on (`pyproject.toml`): without it this crate is empty, so that
//! `cargo test --workspace` neither builds pyo3 nor links against Python.

#[cfg(feature = "python")]
mod arrays;
#[cfg(feature = "python")]
mod checking;
#[cfg(feature = "python")]
mod errors;
#[cfg(feature = "python")]
mod running;
#[cfg(feature = "python")]
mod source;
#[cfg(feature = "python")]
mod writing;

/// mimalloc, as the `diamond` command: a session's runs allocate and free
/// large temporaries (im2col columns, non-`f32` values, outputs), which
/// glibc's allocator hands back to the system and faults in again each run.
#[cfg(feature = "python")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "python")]
mod module {
    use pyo3::prelude::*;

    /// The functions and the `Checked` class the Python layer wraps.
    #[pymodule]
    fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_class::<crate::checking::Checked>()?;
        m.add_function(wrap_pyfunction!(crate::checking::check, m)?)?;
        m.add_function(wrap_pyfunction!(crate::writing::convert, m)?)?;
        m.add_function(wrap_pyfunction!(crate::writing::convert_file, m)?)?;
        m.add_function(wrap_pyfunction!(crate::writing::optimize, m)?)?;
        m.add_function(wrap_pyfunction!(crate::running::run, m)?)?;
        m.add_class::<crate::running::Session>()?;
        m.add("PASS_NAMES", diamond::PASS_NAMES.to_vec())?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }
}
