//! The reference executor.
//!
//! [`exec::run_model`] interprets a model's main graph over [`Tensor`]s:
//! graph inputs are checked against their declared types (symbols bound
//! consistently), nodes run in topological order, each value is dropped after
//! its last use, and the peak of live bytes is reported. [`plan::Plan`]
//! predicts that peak before running: it binds the inputs' symbols through
//! the solver's solution (refusing a fed shape that contradicts the model)
//! and sizes every value; [`exec::run_planned`] then runs by the plan's
//! [`schedule::Schedule`]. Kernels live in
//! [`ops`], one file per operator family like `infer/src/ops/`; they are
//! written to be obviously correct rather than fast: this executor is the
//! oracle for every faster one.
//!
//! A model the executor cannot run — an operator, element type or attribute
//! it does not implement, operands that break the operator's contract — is
//! refused with a [`RunError`] naming the node and the reason; nothing here
//! panics on a bad model.
//!
//! The crate holds four layers, each using only those before it:
//! - values and the reference executor: [`tensor`], [`exotic`], [`plan`],
//!   [`schedule`], [`exec`], the kernels in [`ops`], [`processor`];
//! - [`kernel`]: the kernel programs fused groups lower to (the IR the
//!   backends share, with its verifier and text form);
//! - [`simd`]: the SIMD CPU backend, which runs programs on its own kernels
//!   and everything else on the reference kernels;
//! - [`cuda`]: the CUDA backend (code generation, NVRTC, the host shim).

pub mod cuda;
pub mod error;
pub mod exec;
pub mod exotic;
pub mod kernel;
pub mod npy;
pub mod ops;
pub mod plan;
pub mod processor;
pub mod rng;
pub mod schedule;
pub mod simd;
pub mod tensor;

pub use error::RunError;
pub use exec::{run_model, run_planned, RunOptions, RunResult};
pub use plan::{Fed, Plan};
pub use rng::SplitMix64;
pub use tensor::{Data, MapValue, Scalar, Tensor, Value};
