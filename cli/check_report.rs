//! The values table that opens the text report (the rest is `render::text`)
//! and the summary's count of values. The JSON document is
//! `diamond::check::json`, shared with the Python package.

use diamond::check::Report as CheckReport;
use std::fmt::Write;

/// The values table of the text report: each graph input and computed value
/// (initializers left out) with its element type and shape, then the inputs
/// inferred from use and the values only a declaration shapes. The
/// diagnostics follow it (`render::text`).
pub fn render_values(report: &CheckReport) -> String {
    let mut out = String::new();
    let shown: Vec<_> = report.values.iter().filter(|v| !v.initializer).collect();
    let width = shown.iter().map(|v| v.name.len()).max().unwrap_or(0).min(48);
    for v in &shown {
        let dtype = v.dtype.map_or("?".to_string(), |t| t.to_string());
        let kind = if v.kind == "tensor" { String::new() } else { format!(" {}", v.kind) };
        let _ = writeln!(out, "{:width$}  {dtype}{kind} {}", v.name, v.shape_text());
    }
    if !report.inferred_from_use.is_empty() {
        let _ = writeln!(out, "\ninput shapes inferred from use: {}", report.inferred_from_use.join(", "));
    }
    if !report.from_declaration.is_empty() {
        let _ = writeln!(out, "shapes taken from declarations only: {}", report.from_declaration.join(", "));
    }
    out
}

/// The values part of the summary line: `8 values (1 initializers not listed; --json has them)`.
pub fn values_summary(report: &CheckReport) -> String {
    let hidden = report.values.iter().filter(|v| v.initializer).count();
    let total = report.values.len();
    if hidden == 0 {
        format!("{total} values")
    } else {
        format!("{total} values ({hidden} initializers not listed; --json has them)")
    }
}
