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
//! run on kernels of their own ([`native`], [`norm`], [`pool`], [`concat`],
//! [`einsum`], [`cast`], [`integer`]); `If` branches run as sessions of
//! their own ([`branch`]); programs computing other types than `f32` and
//! bool, contractions the kernels do not cover, and every other node run on
//! the reference kernels, each such step reported with its reason
//! ([`fallback`]). A [`Session`] prepares a model once for given input
//! shapes and runs it many times.

pub mod activation;
pub mod bind;
pub mod branch;
pub mod cast;
pub mod chain;
pub mod chain_vector;
mod channel_vector;
pub mod concat;
pub mod contraction;
pub mod conv;
pub mod cpu;
pub mod dead_taps;
pub mod denormals;
pub mod depthwise;
mod depthwise_lanes;
#[cfg(target_arch = "x86_64")]
mod depthwise_rows;
pub mod direct;
mod direct_store;
pub mod einsum;
pub mod elementwise;
pub mod epilogue;
pub mod fallback;
pub mod few_rows;
pub mod fold;
pub mod fused_post;
pub mod gather;
pub mod gemm;
pub mod hot_pool;
mod igemm;
pub mod im2col;
pub mod integer;
mod late;
pub mod math;
pub mod movement;
pub mod native;
pub mod norm;
pub mod norm_lanes;
pub mod pool;
pub mod portable_gemm;
pub mod profile;
mod quantized;
mod recurrence_8bit;
pub mod recurrent;
pub mod reduce;
pub mod reduce_flat;
pub mod reduce_lanes;
pub mod relayout;
pub mod selection;
pub mod session;
pub mod small_plane;
pub mod tile;
#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;
pub mod winograd;

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

/// Whether this processor has AVX2 and FMA.
pub fn avx2_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
