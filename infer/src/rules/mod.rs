//! The rules, one file per constraint family: dimensions, rows, arithmetic
//! (total elements, affine sizes, sums).

mod arith;
mod dims;
mod rows;
