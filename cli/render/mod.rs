//! How `diamond check` presents its findings: the text report in the manner
//! of rustc (header, `-->` location, `= note:` chain, `= help:`), colour for
//! terminals, and SARIF 2.1.0 for code-scanning tools. The JSON document
//! and the HTML page are `diamond::check::{json, html}`; the solver's
//! diagnostics are only read here.

pub mod colour;
pub mod location;
pub mod notes;
pub mod rules;
pub mod sarif;
pub mod text;

pub use colour::ColorChoice;

/// What the command line asks of the check report's presentation.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// When to colour the text report.
    pub color: ColorChoice,
    /// Render at most this many diagnostics in the text report (JSON and SARIF carry all).
    pub max_diagnostics: Option<usize>,
    /// Also write the diagnostics as SARIF to this file.
    pub sarif: Option<std::path::PathBuf>,
    /// Warnings make the exit code 1.
    pub deny_warnings: bool,
}
