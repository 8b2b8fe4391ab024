//! Importers: file bytes in, [`diamond_ir::Model`] out.
//!
//! Every importer treats its input as hostile: bad bytes, dangling references
//! and impossible sizes become an [`ImportError`] naming the file and the
//! problem, never a panic. Importers never depend on inference.

pub mod error;
pub mod npy;
pub mod onnx;
pub mod tensor_file;
pub mod torch;
pub mod value_file;

pub use error::ImportError;
