//! Checking a model: the report [`Model::check`] returns — every value's
//! inferred type and the [`Diagnostic`]s, each with its [`Code`],
//! [`Severity`], node, operand and axis — how it is written out
//! ([`json`], [`html`]), and the variants of the check a command that does
//! nothing else with the model wants: [`Model::check_releasing`] gives the
//! file's pages back while it runs, [`Model::check_deferred`] leaves the
//! last notes to be made while the report is being written. [`explain`]
//! gives the long explanation of each code (`diamond explain CODE`).

use crate::model::Model;

pub use crate::explain::explain;

pub use diamond_infer::{CheckOptions, CheckReport as Report, Code, Diagnostic, Severity};

/// The check report as JSON (the document `diamond check --json` prints
/// and the Python package's `Checked.to_json()` returns).
pub mod json {
    pub use diamond_exporters::report::json::{check_json, pending_check_json, write_check_json, PendingCheckJson};
}

/// The check report as one self-contained HTML page (`diamond check --html`).
pub mod html {
    pub use diamond_exporters::report::html::write_report;
}

/// The ones-vector notes of a check made with [`Model::check_deferred`],
/// still to be made: they are the check's last diagnostics.
pub struct PendingNotes(diamond_optimize::audit::OnesVectorStep);

impl PendingNotes {
    /// Makes the notes for `model`, checked into `report` (none when the
    /// report has errors).
    pub fn make(self, model: &Model, report: &Report) -> Vec<Diagnostic> {
        self.0.notes(&model.ir, report)
    }
}

impl Model {
    /// [`Model::check`] for a caller that does nothing else with the
    /// model's weights: once the check has read the few bytes it needs, the
    /// pages of the mapped file go back to the system, so the resident set
    /// of a check stays well below the file's size. What is read again
    /// afterwards is faulted in again.
    pub fn check_releasing(&self, options: &CheckOptions) -> Report {
        diamond_optimize::audit::check_releasing(&self.ir, options, || self.release_pages())
    }

    /// [`Model::check_releasing`] (or, with `release` false, [`Model::check`])
    /// without its last step, the ones-vector notes: they are made by
    /// [`PendingNotes::make`], for example while another thread writes the
    /// rest of the report.
    pub fn check_deferred(&self, options: &CheckOptions, release: bool) -> (Report, PendingNotes) {
        let release = || {
            if release {
                self.release_pages()
            }
        };
        let (report, ones) = diamond_optimize::audit::check_releasing_deferred(&self.ir, options, release);
        (report, PendingNotes(ones))
    }

    /// Gives the pages of the model's mapped file back to the system (an
    /// ONNX file read with [`Model::open`]; nothing otherwise). The model
    /// stays whole: what is read again is faulted in again.
    pub fn release_pages(&self) {
        if let Some(file) = &self.file {
            file.release_pages();
        }
    }
}
