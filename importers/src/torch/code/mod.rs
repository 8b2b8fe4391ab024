//! The printed TorchScript source of an archive's classes (`code/**.py`):
//! [`lexer`] makes tokens, [`parser`] builds the [`ast`]; [`parse_file`] does
//! both and reports a [`CodeError`] with the entry's path, line and column.

pub mod ast;
pub mod error;
pub mod lexer;
pub mod parser;

pub use error::CodeError;
pub use parser::parse_file;
