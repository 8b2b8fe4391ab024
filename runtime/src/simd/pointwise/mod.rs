//! Elementwise programs: the bound space walked in tiles or as register-resident chains, the
//! activation and transcendental functions they call, and the integer, cast and late-shaped
//! elementwise nodes run outside programs.
//!
//! - `elementwise.rs` — Running a program without reduction axes: the bound space is walked as rows along its innermost axis, each row in tiles; rows (or pieces of long rows) are spread over the current rayon pool.
//! - `chain.rs` — Register-resident runs: a chain of elementwise instructions, each taking the one before it as an operand, evaluated in vector registers a block of points at a time (32 on AVX2, 128 on AVX-512: [`super::chain_vector`]) instead of one pass over a tile register per instruction.
//! - `chain_vector.rs` — The vector instances of a register-resident run ([`super::chain`]): one body, written once as a macro over a handful of per-instruction-set primitives, instantiated for AVX2 (a block of four 8-lane registers, 32 points) and AVX-512 (eight 16-lane registers, 128 points: the step's dispatch is paid once per 128 points instead of 32).
//! - `tile.rs` — The tile evaluator: a program's instructions run over one tile of up to [`TILE`] points along the innermost swept axis, each instruction a loop over registers of `TILE` floats that stay in L1, so that memory traffic is only the loads of operands and the stores of outputs.
//! - `activation.rs` — Activation functions over a slice of `f32` (the fused epilogues of the contractions), written branch-free so that the compiler vectorizes them, with the transcendental functions of [`super::math`].
//! - `math.rs` — Branch-free f32 versions of the transcendental functions the hot activations need (exp, tanh, sigmoid, erf), written as straight-line code so that a loop over a tile compiles to vector instructions; within 2 ulp of the correctly rounded result over the ranges that matter, with overflow, underflow and NaN handled by the arithmetic itself (clamps written in the operand order that is one `max`/`min` instruction and lets NaN through, scales that overflow to infinity and round to subnormals).
//! - `integer.rs` — Integer arithmetic and comparisons with broadcasting on the session's own kernels: the index work exported models do at run time (one-hot `Equal` of int32 labels against a range, position arithmetic, mask comparisons), which the fused `f32` kernels do not compute and the reference kernels run through `f64`.
//! - `cast.rs` — `Cast` on the session's own kernels: any number or bool to `f32`, and `f32` to float16 or bfloat16 — the conversions at the edges of a half-precision model computed in `f32` (`diamond_optimize::widen::compute_in_f32`) and the index-to-float casts of masks and positions — and `f32` to `int32`, `int64`, `int8` and `uint8` (truncated toward zero and saturated, NaN to 0, as the reference casts: the rounded zero points of quantized models).
//! - `late.rs` — `f32` elementwise nodes and reductions whose shapes are known only at run time, on the session's own kernels.

#[allow(unused_imports)]
use super::*;

pub mod activation;
pub mod cast;
pub mod chain;
pub mod chain_vector;
pub mod elementwise;
pub mod integer;
pub(in crate::simd) mod late;
pub mod math;
pub mod tile;
