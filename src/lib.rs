//! diamond: read ONNX and TorchScript models, infer every value's shape and
//! element type, report what is wrong with them, optimize them, and run
//! them on fused SIMD kernels.
//!
//! This crate is the library the `diamond` command and the Python package
//! are built on. The pipeline is three types:
//!
//! - [`Model`] — a model read once ([`Model::open`] for a file,
//!   [`Model::from_bytes`] for ONNX bytes), then [`checked`](Model::check),
//!   [`optimized`](Model::optimize), [`converted`](Model::convert) or
//!   [`written`](Model::write);
//! - [`Session`] — a model prepared for a [`Backend`] once and
//!   [`run`](Session::run) many times, on any input shapes the model
//!   allows;
//! - [`Error`] — why a call failed, in the kinds a caller acts on;
//!
//! and [`convert_batch`], which converts a whole tree of models on a pool of
//! workers, reporting each model to a [`batch::Progress`].
//!
//! Around them, one module per job the command line has:
//!
//! - [`check`] — the report's types ([`Report`], [`check::Diagnostic`],
//!   [`check::Code`]), its JSON and HTML forms, and the check variants a
//!   command that does nothing else with the model wants;
//! - [`inspect`] — [`Model::inspect`]: the model's inventory and what
//!   `optimize` would remove;
//! - [`lower`] — [`Model::lower_kernels`] (the fusion groups as kernel
//!   programs) and [`Model::lower_cuda`] (the CUDA artifact);
//! - [`session`] — besides [`Session`]: a planned run on the reference
//!   executor with intermediate values dumped ([`Model::plan`],
//!   [`Model::run_planned`]), and the types of routes and profiles;
//! - [`rows`] — the shape solver on a `.rows` constraint file;
//! - [`values`] — runtime values and their files (`.npy`, ONNX `.pb`);
//! - [`io`] — files written whole or not at all;
//! - [`ir`] — the graph IR a model is held in.
//!
//! The `diamond` command and the Python package call nothing below this
//! crate: what they add is argument parsing and rendering.
//!
//! # Checking a model
//!
//! ```
//! let model = diamond::Model::open("fixtures/check/exported_transformer.onnx")?;
//! let report = model.check(&diamond::CheckOptions::default());
//! let hidden = report.values.iter().find(|v| v.name == "last_hidden_state").unwrap();
//! assert_eq!(hidden.shape_text(), "[batch, seq, 64]");
//! assert_eq!(report.errors(), 0);
//! # Ok::<(), diamond::Error>(())
//! ```
//!
//! # Running a model
//!
//! A [`Session`] prepares the model for its backend when it is made (for
//! the SIMD backend: widened from 16-bit floats, optimized, lowered to
//! kernel programs) and binds it to input shapes at the first run:
//!
//! ```
//! use diamond::{Model, Session, SessionOptions, Tensor, Value};
//! let model = Model::open("fixtures/check/exported_transformer.onnx")?;
//! let mut session = Session::new(&model, &SessionOptions { threads: Some(1), ..Default::default() })?;
//! assert_eq!(session.inputs()[0].name, "input_ids");
//! let ids = Tensor::from_i64s(vec![3, 1, 4, 1, 5]).reshaped(vec![1, 5]).unwrap();
//! let mask = Tensor::from_i64s(vec![1; 5]).reshaped(vec![1, 5]).unwrap();
//! let outputs = session.run(vec![
//!     ("input_ids".into(), Value::Tensor(ids)),
//!     ("attention_mask".into(), Value::Tensor(mask)),
//! ])?;
//! assert_eq!(outputs.get("last_hidden_state").and_then(Value::as_tensor).unwrap().shape, [1, 5, 64]);
//! # Ok::<(), diamond::Error>(())
//! ```
//!
//! # Optimizing a model
//!
//! ```no_run
//! let model = diamond::Model::open("model.onnx")?;
//! let optimized = model.optimize(&diamond::OptimizeOptions { verify: true, ..Default::default() })?;
//! optimized.model.write("model.opt.onnx")?;
//! # Ok::<(), diamond::Error>(())
//! ```

#![deny(missing_docs)]

pub mod batch;
pub mod check;
mod error;
mod explain;
pub mod inspect;
pub mod io;
pub mod lower;
mod model;
pub mod rows;
pub mod session;
pub mod values;

/// diamond's graph IR: the data a [`Model`] holds ([`Model::ir`]) — graphs,
/// nodes, values with their declared types, initializers, functions.
pub use diamond_ir as ir;

pub use batch::{convert_batch, BatchOptions};
pub use check::{CheckOptions, Report};
pub use diamond_importers::torch::lower::{DimSpec, InputShape};
pub use diamond_ir::ElemType;
pub use diamond_runtime::{Data, Tensor, Value};
pub use error::{Error, Result};
pub use model::{
    LoadOptions, Model, OptimizeError, OptimizeOptions, Optimized, PassRun, SkippedBody, Verdict, PASS_NAMES,
};
pub use session::{Backend, Dim, Outputs, Session, SessionOptions, ValueInfo};
