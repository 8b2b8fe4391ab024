//! The diagnostics section: each diagnostic worded as the text report words it (severity and code, message, where,
//! the provenance chain as notes, help) with a picture of the graph around its node.

use super::escape;
use super::neighbourhood::{Picker, HOPS};
use diamond_infer::{CheckReport, Diagnostic};
use diamond_ir::Model;
use std::fmt::Write;

/// The section, with one `<article>` per diagnostic.
pub fn section(page: &mut String, model: &Model, report: &CheckReport) {
    let _ = writeln!(page, "<section id=\"diagnostics\">\n<h2>Diagnostics ({})</h2>", report.diagnostics.len());
    if report.diagnostics.is_empty() {
        page.push_str("<p class=\"ok\">No errors or warnings.</p>\n</section>\n");
        return;
    }
    page.push_str(
        "<p class=\"legend\">Pictures: <span>boxes are nodes (operator, name)</span><span>labels on the edges are \
         values (name, inferred type and shape)</span><span>red: the diagnostic's node, its operand's edge and \
         axis</span><span>green: graph inputs</span><span>yellow: graph outputs</span><span>dashed: weights and \
         values from outside the picture</span></p>\n",
    );
    let mut picker = Picker::new(model, report);
    for (i, d) in report.diagnostics.iter().enumerate() {
        article(page, &mut picker, d, i);
    }
    page.push_str("</section>\n");
}

/// One diagnostic.
fn article(page: &mut String, picker: &mut Picker<'_>, d: &Diagnostic, i: usize) {
    let severity = d.severity.as_str();
    let located = picker.locate(d);
    let _ = write!(
        page,
        "<article class=\"diagnostic {severity}\" id=\"diagnostic-{i}\">\n<pre class=\"diag\"><span class=\"sev-{severity}\">{severity}[{}]</span>: {}\n",
        d.code.as_str(),
        escape(&d.message)
    );
    let place = place(d);
    if !place.is_empty() {
        let _ = writeln!(page, "  --&gt; {}", escape(&place));
    }
    if let Some(line) = d.line {
        let _ = writeln!(page, "  --&gt; line {line}");
    }
    for note in &d.notes {
        let _ = writeln!(page, "<span class=\"note\">  = note: {}</span>", escape(note));
    }
    if let Some(help) = &d.help {
        let _ = writeln!(page, "<span class=\"help\">  = help: {}</span>", escape(help));
    }
    page.push_str("</pre>\n");
    match located {
        Some((g, n)) => {
            let scene = picker.scene(g, n, d);
            let ops = scene.items.iter().filter(|i| matches!(i, super::neighbourhood::Item::Op { .. })).count();
            let node = node_text(d);
            let title = format!("the graph around {node}");
            let _ = write!(page, "<figure>\n{}\n<figcaption>", super::svg::draw(&scene, &format!("d{i}"), &title));
            let _ = write!(
                page,
                "The graph around {}: up to {HOPS} steps of producers and consumers, {ops} node(s)",
                escape(&node)
            );
            if scene.omitted > 0 {
                let _ = write!(page, "; {} more within reach not drawn", scene.omitted);
            }
            page.push_str(".</figcaption>\n</figure>\n");
        }
        None => page.push_str("<p class=\"note\">No picture: the diagnostic names no node of the model.</p>\n"),
    }
    page.push_str("</article>\n");
}

/// `Add 'add1' (node 0)`, or `Add (node 3)` for an unnamed node (whose `node` field is already that label).
fn node_text(d: &Diagnostic) -> String {
    let node = d.node.as_deref().unwrap_or("");
    match (d.op.as_deref(), d.node_index) {
        (_, _) if node.contains(" (node ") => node.to_string(),
        (Some(op), Some(index)) => format!("{op} '{node}' (node {index})"),
        (Some(op), None) => format!("{op} '{node}'"),
        (None, _) => format!("'{node}'"),
    }
}

/// Where the diagnostic is: `Add 'add1' (node 0) in graph If_0/then_branch/, input 1, axis 1`; empty when nowhere.
fn place(d: &Diagnostic) -> String {
    let mut parts = Vec::new();
    if d.node.is_some() {
        let mut node = node_text(d);
        if let Some(graph) = d.graph.as_deref().filter(|g| !g.is_empty()) {
            node += &format!(" in graph {graph}");
        }
        parts.push(node);
    }
    if let Some(operand) = &d.operand {
        parts.push(operand.clone());
    }
    if let Some(axis) = d.axis {
        parts.push(format!("axis {axis}"));
    }
    parts.join(", ")
}
