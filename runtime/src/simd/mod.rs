//! The SIMD CPU backend: runs a [`crate::kernel::LoweredModel`].
//!
//! Programs run on the tile evaluator ([`tile`]) — elementwise ones
//! ([`elementwise`]) over rows of their bound space, reductions
//! ([`reduce`]) per outer point with one sweep per nesting depth — spread
//! over the current rayon pool (the caller sets the thread count with a
//! `rayon::ThreadPool`). The inner loops are compiled twice, once for
//! AVX2+FMA, chosen at run time when the processor has them
//! (`is_x86_feature_detected!`), and once portable; [`Options::simd`]
//! (the CLI sets it from `DIAMOND_SIMD=off`) forces the portable one.
//! Contractions run on the fast kernels ([`contraction`]: MatMul and Gemm
//! through [`gemm`], 2-D Conv through [`conv`] with its depthwise and
//! pointwise cases) and their fused elementwise program after them;
//! ConvTranspose, Resize, LRN, Batch- and InstanceNormalization, pooling,
//! Concat, Transpose, Einsum, Cast and integer arithmetic and comparisons
//! run on kernels of their own ([`native`], [`norm`], [`pool`], [`concat`](mod@concat),
//! [`einsum`], [`cast`], [`integer`]); `If` branches run as sessions of
//! their own ([`branch`]); programs computing other types than `f32` and
//! bool, contractions the kernels do not cover, and every other node run on
//! the reference kernels, each such step reported with its reason
//! ([`fallback`]). A [`Session`] prepares a model once for given input
//! shapes and runs it many times.
//!
//! The files, by family (each folder's `mod.rs` maps its own; the modules
//! are re-exported here, so `simd::gemm` names `simd/products/gemm.rs`):
//! - `engine/` — the [`Session`]: preparing, binding programs to sizes,
//!   each step's route and fallbacks, profiling, the instruction set, the
//!   hot pool;
//! - `products/` — GEMM and its epilogues, integer products, MatMul, Gemm,
//!   Einsum, the elementwise programs folded into them;
//! - `convolution/` — 2-D convolution, one route per shape class, and the
//!   depthwise kernels;
//! - `pointwise/` — elementwise programs (tiles, register-resident
//!   chains), activations and math, integer and cast kernels;
//! - `reductions/` — reduction programs, normalizations, pools, TopK;
//! - `layout/` — Split, Slice, Transpose, Concat, gathers, relayouts;
//! - `recurrence/` — LSTM, GRU, RNN.

mod convolution;
mod engine;
mod layout;
mod pointwise;
mod products;
mod recurrence;
mod reductions;

#[cfg(target_arch = "x86_64")]
pub(crate) use convolution::transpose;
pub use convolution::{conv, dead_taps, depthwise, direct, im2col, small_plane, winograd};
pub use engine::{bind, branch, cpu, denormals, fallback, hot_pool, native, profile, session};
pub use layout::{concat, gather, movement, relayout};
use pointwise::late;
pub use pointwise::{activation, cast, chain, chain_vector, elementwise, integer, math, tile};
use products::quantized;
pub use products::{contraction, einsum, epilogue, few_rows, fold, fused_post, gemm, panels, portable_gemm};
pub use recurrence::recurrent;
pub use reductions::{norm, norm_lanes, pool, reduce, reduce_flat, reduce_lanes, selection, softmax_rows};

pub use fallback::{Fallback, FallbackReason, Refusal};
pub use profile::{StepKind, StepTime};
pub use session::{Coverage, Decoded, Session, SessionRun};

/// How the backend runs.
#[derive(Clone)]
pub struct Options {
    /// Use the AVX2+FMA code paths when the processor has them (`false`:
    /// the portable ones, as on a machine without AVX2).
    pub simd: bool,
    /// Optimizes and lowers an `If` branch made a model of its own, so that
    /// the branch runs prepared ([`branch`]); `None`: branches run on the
    /// reference executor.
    pub prepare_body: Option<branch::PrepareBody>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("simd", &self.simd)
            .field("prepare_body", &self.prepare_body.as_ref().map(|_| "set"))
            .finish()
    }
}

impl Default for Options {
    fn default() -> Options {
        Options { simd: true, prepare_body: None }
    }
}

impl Options {
    /// Options from the environment: `DIAMOND_SIMD=off` forces the
    /// portable code paths.
    pub fn from_env() -> Options {
        let off = std::env::var("DIAMOND_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("off") || v == "0");
        Options { simd: !off, prepare_body: None }
    }

    /// Whether the AVX2+FMA paths will run.
    pub fn use_simd(&self) -> bool {
        self.simd && avx2_available()
    }
}

pub use crate::processor::avx2_available;
