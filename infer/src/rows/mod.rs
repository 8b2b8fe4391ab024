//! The `.rows` format: a text form of constraint systems, for `diamond solve`
//! and for tests. [`syntax`] and [`parse`] read it; [`lower`] turns it into
//! solver constraints; [`render`] prints the solution.

pub mod lower;
pub mod parse;
pub mod render;
pub mod syntax;
