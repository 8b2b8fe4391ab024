//! The printed TorchScript source of an archive's classes (`code/**.py`).

pub mod ast;
pub mod lexer;
pub mod parser;
