//! Exporters: the IR out to files and reports.
//!
//! [`onnx`] writes ONNX models and their external data; [`inspect`] summarizes
//! a model for `diamond inspect`; [`report`] is the `check` report as JSON and
//! as an HTML page; [`atomic`] is how every file is written — to
//! a temporary file beside the target, renamed into place only when complete,
//! so that a failed or interrupted write never leaves a partial file.

pub mod atomic;
pub mod inspect;
pub mod onnx;
pub mod report;
