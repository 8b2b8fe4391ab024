//! The session and what runs it: preparing and binding programs to sizes, the steps' routes (fast
//! kernels, native nodes, `If` branches, fallbacks and why), per-step profiling, the instruction
//! set chosen, the rayon pool kept hot and subnormals flushed while a run lasts.
//!
//! - `session.rs` — A prepared model: built once from a lowered model and the shapes that will be fed, run many times (its methods also in `session/`: `hoist.rs`, `steps.rs`, `branches.rs`, `routes.rs`).
//! - `bind.rs` — Binding a program to sizes: extents from the symbols' values, each view to an offset and one stride per axis, the outer axes put before the reduction axes, size-1 axes dropped and neighbouring axes merged where every view walks them as one.
//! - `branch.rs` — `If` branches on the fast path: each branch a run takes is prepared once as a [`Session`] of its own and run prepared, not interpreted.
//! - `native.rs` — Graph nodes that no kernel program expresses but the SIMD session still runs on its own `f32` kernels, in place of the reference kernels (which compute in `f64`, one element at a time): - **ConvTranspose** in 2-D: per image and group, the product `Wᵀ · X` ([`sgemm`]) gives, for every output channel and kernel tap, the plane of contributions of the input positions; each plane is then added into the output at the tap's offset with the strides and dilations (col2im), over a plane that starts as the bias.
//! - `fallback.rs` — Why a step of a [`super::Session`] runs on the reference kernels.
//! - `profile.rs` — Per-step times of a [`super::Session`], for `diamond bench --profile`.
//! - `hot_pool.rs` — Keeping the rayon pool's other threads awake for the length of a session's run.
//! - `denormals.rs` — Subnormal floats flushed to zero while a session runs.
//! - `cpu.rs` — Which instruction set the SIMD kernels use, decided once per process: AVX2 with FMA when the processor has both and `DIAMOND_SIMD` is not `off`, else the portable code (the same loops compiled for the baseline target, and a plain blocked GEMM in place of the `gemm` crate).

#[allow(unused_imports)]
use super::*;

pub mod bind;
pub mod branch;
pub mod cpu;
pub mod denormals;
pub mod fallback;
pub mod hot_pool;
pub mod native;
pub mod profile;
pub mod session;
