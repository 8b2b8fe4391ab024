//! The text report of `diamond check`, in the manner of rustc: the values
//! table, then each diagnostic as a header (`error[code]: message`), a `-->`
//! location line, and `= note:` / `= help:` lines, then the `info` notes
//! (one line each), the assumptions the check made
//! (dynamic axes specialized, bounds implied) and a summary line.

use super::colour::{Painter, Style};
use super::{location, notes};
use diamond::check::{Diagnostic, Report as CheckReport, Severity};
use std::fmt::Write;

/// The whole text report; at most `max` diagnostics are rendered in full.
pub fn render(report: &CheckReport, painter: Painter, max: Option<usize>) -> String {
    let mut out = crate::check_report::render_values(report);
    let limit = max.unwrap_or(usize::MAX);
    let findings: Vec<&Diagnostic> = report.diagnostics.iter().filter(|d| d.severity != Severity::Info).collect();
    for d in findings.iter().take(limit) {
        out.push('\n');
        out += &diagnostic(d, painter);
    }
    let hidden = findings.len().saturating_sub(limit);
    if hidden > 0 {
        let _ = writeln!(
            out,
            "\n... and {hidden} more diagnostic(s) not shown (--max-diagnostics {limit}); --json and --sarif carry all"
        );
    }
    out += &resolved_dims(report, painter, limit);
    out += &assumptions(report, painter, limit);
    let _ = writeln!(
        out,
        "\n{}; {} error(s), {} warning(s)",
        crate::check_report::values_summary(report),
        report.errors(),
        report.warnings()
    );
    out
}

/// One diagnostic: header, location, notes and help (its last words naming
/// `diamond explain CODE`).
pub fn diagnostic(d: &Diagnostic, painter: Painter) -> String {
    let (word, style) = match d.severity {
        Severity::Error => ("error", Style::Error),
        Severity::Warning => ("warning", Style::Warning),
        Severity::Info => ("info", Style::Gutter),
    };
    let mut out = format!(
        "{}{}\n",
        painter.paint(style, &format!("{word}[{}]", d.code.as_str())),
        painter.paint(Style::Bold, &format!(": {}", headline(d)))
    );
    if let Some(at) = location::describe(d) {
        let _ = writeln!(out, "{} {at}", painter.paint(Style::Gutter, " -->"));
    }
    let _ = writeln!(out, "{}", painter.paint(Style::Gutter, "  |"));
    // The help line ends by naming the code's long explanation.
    let explain = format!("see: diamond explain {}", d.code.as_str());
    let help = match &d.help {
        Some(h) => format!("{h}; {explain}"),
        None => explain,
    };
    let labelled = d.notes.iter().map(|n| ("note", notes::display(n))).chain([("help", help)]);
    for (label, text) in labelled {
        let _ = writeln!(out, "{} {}: {text}", painter.paint(Style::Gutter, "  ="), painter.paint(Style::Bold, label));
    }
    out
}

/// The message for the header line: without a leading `Add 'add1' (node 0): `
/// that the location line below repeats.
fn headline(d: &Diagnostic) -> &str {
    let (Some(op), Some(i)) = (&d.op, d.node_index) else { return &d.message };
    let label = match location::node_name(d) {
        Some(name) => format!("{op} '{name}' (node {i}): "),
        None => format!("{op} (node {i}): "),
    };
    d.message.strip_prefix(label.as_str()).filter(|rest| !rest.is_empty()).unwrap_or(&d.message)
}

/// The `info` notes — declared dims inference sized, ones-vectors the
/// optimizer inlines — one line each (nothing to fix), at most `limit`.
fn resolved_dims(report: &CheckReport, painter: Painter, limit: usize) -> String {
    let all: Vec<&Diagnostic> = report.diagnostics.iter().filter(|d| d.severity == Severity::Info).collect();
    if all.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{}\n", painter.paint(Style::Bold, "notes (nothing to fix):"));
    for d in all.iter().take(limit) {
        let _ =
            writeln!(out, "  {}: {}", painter.paint(Style::Gutter, &format!("info[{}]", d.code.as_str())), d.message);
    }
    if all.len() > limit {
        let _ = writeln!(out, "  ... and {} more", all.len() - limit);
    }
    out
}

/// Whether `d` records an assumption the check went on under.
fn is_assumption(d: &Diagnostic) -> bool {
    d.code.is_assumption()
}

/// The assumptions section (empty when the check assumed nothing): one line per assumption, at most `limit`.
fn assumptions(report: &CheckReport, painter: Painter, limit: usize) -> String {
    let all: Vec<&Diagnostic> = report.diagnostics.iter().filter(|d| is_assumption(d)).collect();
    if all.is_empty() {
        return String::new();
    }
    let mut out = format!("\n{}\n", painter.paint(Style::Bold, "assumptions (the results hold only if these do):"));
    for d in all.iter().take(limit) {
        let at = location::describe(d).map(|at| format!(" ({at})")).unwrap_or_default();
        let _ = writeln!(out, "  - {}{at}", d.message);
    }
    if all.len() > limit {
        let _ = writeln!(out, "  ... and {} more", all.len() - limit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::location::tests::at_node;
    use diamond::check::Code;

    fn report(diagnostics: Vec<Diagnostic>) -> CheckReport {
        CheckReport { diagnostics, ..CheckReport::default() }
    }

    #[test]
    fn a_diagnostic_has_header_location_notes_and_help() {
        let mut d = at_node(Code::DeclaredShapeMismatch, "relu", "Relu", 0);
        d.message = "declared shape of 'y' disagrees".into();
        d.operand = Some("output 0".into());
        d.notes = vec!["declared [2, 4], inferred [2, 3]".into()];
        d.help = Some("fix it".into());
        d.graph = Some("If_0/then_branch/".into());
        assert_eq!(
            diagnostic(&d, Painter::new(false)),
            "error[declared-shape-mismatch]: declared shape of 'y' disagrees\n \
             --> If_0/then_branch: node 0 `relu` (Relu), output 0\n  |\n  \
             = note: declared [2, 4], inferred [2, 3]\n  = help: fix it; see: diamond explain declared-shape-mismatch\n"
        );
        d.help = None;
        assert!(
            diagnostic(&d, Painter::new(false)).ends_with("  = help: see: diamond explain declared-shape-mismatch\n"),
            "a diagnostic without help still names its explanation"
        );
    }

    #[test]
    fn the_header_drops_a_node_label_the_location_repeats() {
        let mut d = at_node(Code::InvalidAttribute, "bad_perm", "Transpose", 0);
        d.message = "Transpose 'bad_perm' (node 0): perm [0, 0] is not a permutation".into();
        assert_eq!(headline(&d), "perm [0, 0] is not a permutation");
        let mut unnamed = at_node(Code::InvalidAttribute, "", "Split", 2);
        unnamed.message = "Split (node 2): split sizes add up to 5".into();
        assert_eq!(headline(&unnamed), "split sizes add up to 5");
        d.message = "input 'nowhere' of Add 'add' (node 0) is dangling".into();
        assert_eq!(headline(&d), d.message);
    }

    #[test]
    fn assumptions_are_listed_and_capped() {
        let mut a = at_node(Code::DynamicAxisSpecialized, "add", "Add", 0);
        a.message = "dynamic axis batch assumed to be 8".into();
        let b = at_node(Code::UnsupportedOp, "f", "Frob", 1);
        let mut c = at_node(Code::ImpliedBound, "", "Slice", 2);
        c.message = "n <= 16".into();
        let r = report(vec![a, b, c]);
        let text = render(&r, Painter::new(false), None);
        assert!(
            text.contains(
                "assumptions (the results hold only if these do):\n  \
                 - dynamic axis batch assumed to be 8 (node 0 `add` (Add))\n  - n <= 16 (node 2 (Slice))\n"
            ),
            "{text}"
        );
        assert!(text.ends_with("0 values; 0 error(s), 3 warning(s)\n"), "{text}");
        let capped = render(&r, Painter::new(false), Some(1));
        assert!(capped.contains("... and 2 more diagnostic(s) not shown (--max-diagnostics 1)"), "{capped}");
        assert!(capped.contains("  ... and 1 more\n"), "{capped}");
    }

    #[test]
    fn colour_marks_severity_code_and_gutter() {
        let mut d = at_node(Code::UnsupportedOp, "f", "Frob", 1);
        d.help = Some("h".into());
        let text = diagnostic(&d, Painter::new(true));
        assert!(text.starts_with("\x1b[1;33mwarning[unsupported-op]\x1b[0m\x1b[1m: m\x1b[0m\n"), "{text:?}");
        assert!(text.contains("\x1b[1;34m -->\x1b[0m node 1 `f` (Frob)"), "{text:?}");
    }
}
