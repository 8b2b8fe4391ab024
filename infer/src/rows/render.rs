//! Printing a solution: each tensor's principal and closed shape, then the
//! diagnostics in the manner of rustc, with the offending line quoted.

use crate::diagnostic::{Diagnostic, Severity};
use crate::solver::Solution;
use std::fmt::Write;

/// The text report of `solution` for the `.rows` file `source`.
pub fn render_text(solution: &Solution, source: &str) -> String {
    let mut out = String::new();
    let width = solution.tensors.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in &solution.tensors {
        let (principal, closed) = (solution.names.row(&t.principal), solution.names.row(&t.closed));
        let _ = writeln!(out, "{:width$}  principal {principal}  closed {closed}", t.name);
    }
    for diagnostic in &solution.diagnostics {
        out.push('\n');
        out.push_str(&render_diagnostic(diagnostic, source));
    }
    let (errors, warnings) = count(&solution.diagnostics);
    if errors + warnings > 0 {
        let _ = writeln!(out, "\n{errors} error(s), {warnings} warning(s)");
    }
    out
}

/// Errors and warnings in `diagnostics`.
pub fn count(diagnostics: &[Diagnostic]) -> (usize, usize) {
    let errors = diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
    (errors, diagnostics.len() - errors)
}

fn render_diagnostic(d: &Diagnostic, source: &str) -> String {
    let mut out = String::new();
    let severity = d.severity.as_str();
    let _ = writeln!(out, "{severity}[{}]: {}", d.code.as_str(), d.message);
    if let Some(line) = d.line {
        let text = source.lines().nth(line as usize - 1).unwrap_or("").trim_end();
        let gutter = line.to_string().len();
        let _ = writeln!(out, "{:gutter$}--> line {line}", "");
        let _ = writeln!(out, "{:gutter$} |", "");
        let _ = writeln!(out, "{line} | {text}");
        let _ = writeln!(out, "{:gutter$} |", "");
    }
    for note in &d.notes {
        let _ = writeln!(out, "  = note: {note}");
    }
    out
}
