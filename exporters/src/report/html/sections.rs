//! The report's tables: the summary (counts, graph inputs and outputs with their inferred shapes, inputs inferred
//! from use), every value with its element type and shape (initializers folded away), and how often each operator
//! occurs.

use super::escape;
use diamond_infer::graph::ValueReport;
use diamond_infer::CheckReport;
use diamond_ir::Model;
use std::collections::HashMap;
use std::fmt::Write;

/// A value's element type as the text report prints it (`float`, `?`), with its kind when not a plain tensor.
fn dtype_text(v: &ValueReport) -> String {
    let dtype = v.dtype.map_or("?".to_string(), |t| t.to_string());
    if v.kind == "tensor" {
        dtype
    } else {
        format!("{dtype} ({})", v.kind)
    }
}

/// The summary: counts, then the inputs and outputs.
pub fn summary(page: &mut String, model: &Model, report: &CheckReport) {
    let nodes = model.main_graph().map_or(0, |g| g.nodes.len());
    let initializers = report.values.iter().filter(|v| v.initializer).count();
    let (errors, warnings) = (report.errors(), report.warnings());
    let verdict = if errors > 0 {
        format!(r#"<span class="error-count"><b>{errors}</b> error(s)</span>"#)
    } else {
        format!(r#"<span class="ok"><b>{errors}</b> errors</span>"#)
    };
    let _ = write!(
        page,
        "<section id=\"summary\">\n<h2>Summary</h2>\n<p class=\"counts\"><span><b>{nodes}</b> nodes</span>\
         <span><b>{}</b> values ({initializers} initializers)</span>{verdict}\
         <span class=\"warning-count\"><b>{warnings}</b> warning(s)</span></p>\n",
        report.values.len()
    );
    let by_name: HashMap<&str, &ValueReport> = report.values.iter().map(|v| (v.name.as_str(), v)).collect();
    for (title, names) in [("Inputs", &report.inputs), ("Outputs", &report.outputs)] {
        let _ = write!(page, "<h3>{title}</h3>\n<table><tr><th>name</th><th>type</th><th>shape</th></tr>\n");
        for name in names {
            let from_use = report.inferred_from_use.contains(name);
            let tag = if from_use { r#"<span class="tag">inferred from use</span>"# } else { "" };
            let (dtype, shape) =
                by_name.get(name.as_str()).map_or(("?".into(), "?".into()), |v| (dtype_text(v), v.shape_text()));
            let _ = writeln!(
                page,
                r#"<tr><td class="mono">{}{tag}</td><td class="mono">{}</td><td class="mono">{}</td></tr>"#,
                escape(name),
                escape(&dtype),
                escape(&shape)
            );
        }
        page.push_str("</table>\n");
    }
    if !report.inferred_from_use.is_empty() {
        let _ = writeln!(
            page,
            "<p>Input shapes inferred from use: <code>{}</code></p>",
            escape(&report.inferred_from_use.join(", "))
        );
    }
    if !report.from_declaration.is_empty() {
        let _ = writeln!(
            page,
            "<p>Shapes taken from declarations only: <code>{}</code></p>",
            escape(&report.from_declaration.join(", "))
        );
    }
    page.push_str("</section>\n");
}

/// One table row per value.
fn value_rows(page: &mut String, values: &[&ValueReport], report: &CheckReport) {
    page.push_str("<table><tr><th>name</th><th>type</th><th>shape</th></tr>\n");
    for v in values {
        let tag = if report.inputs.contains(&v.name) {
            r#"<span class="tag">input</span>"#
        } else if report.outputs.contains(&v.name) {
            r#"<span class="tag">output</span>"#
        } else {
            ""
        };
        let _ = writeln!(
            page,
            r#"<tr><td class="mono">{}{tag}</td><td class="mono">{}</td><td class="mono">{}</td></tr>"#,
            escape(&v.name),
            escape(&dtype_text(v)),
            escape(&v.shape_text())
        );
    }
    page.push_str("</table>\n");
}

/// Every value: computed ones in a table, initializers in a folded one.
pub fn values(page: &mut String, report: &CheckReport) {
    let (weights, shown): (Vec<&ValueReport>, Vec<&ValueReport>) = report.values.iter().partition(|v| v.initializer);
    let _ = writeln!(page, "<section id=\"values\">\n<h2>Values ({})</h2>", shown.len());
    value_rows(page, &shown, report);
    if !weights.is_empty() {
        let _ = writeln!(page, "<details><summary>Initializers ({})</summary>", weights.len());
        value_rows(page, &weights, report);
        page.push_str("</details>\n");
    }
    page.push_str("</section>\n");
}

/// How many nodes of each operator the model has, over every graph (subgraphs and function bodies included).
pub fn operators(page: &mut String, model: &Model) {
    let mut counts: HashMap<(&str, &str), usize> = HashMap::new();
    for graph in model.graphs.values() {
        for node in graph.nodes.values() {
            *counts.entry((node.domain(), node.op_type())).or_default() += 1;
        }
    }
    let mut counts: Vec<((&str, &str), usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: usize = counts.iter().map(|c| c.1).sum();
    let most = counts.first().map_or(1, |c| c.1).max(1);
    let _ = writeln!(
        page,
        "<section id=\"operators\">\n<h2>Operators ({} kinds, {total} nodes)</h2>\n<table><tr><th>operator</th><th>nodes</th><th></th></tr>",
        counts.len()
    );
    for ((domain, op), n) in counts {
        let name = if domain.is_empty() { op.to_string() } else { format!("{domain}.{op}") };
        let _ = writeln!(
            page,
            r#"<tr><td class="mono">{}</td><td>{n}</td><td><span class="bar" style="width:{}px"></span></td></tr>"#,
            escape(&name),
            (300 * n).div_ceil(most)
        );
    }
    page.push_str("</table>\n</section>\n");
}
