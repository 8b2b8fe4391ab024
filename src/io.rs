//! Files that appear whole: every file the library writes goes to a
//! temporary beside its place and is renamed into it once complete, so an
//! interrupted or failed write leaves no partial output. The command line
//! and the Python package write their own outputs (reports, `.npy` values)
//! through the same functions.

pub use diamond_exporters::atomic::{remove_pending, write_bytes, write_with};
