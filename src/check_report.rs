//! Rendering a [`CheckReport`] as text (a table of values, then the
//! diagnostics) and as the JSON documented in the README.

use diamond_infer::graph::report_json_dtype;
use diamond_infer::{CheckReport, Severity};
use serde_json::{json, Map, Value};
use std::fmt::Write;
use std::path::Path;

/// The `--json` document.
pub fn to_json(report: &CheckReport, path: &Path) -> Value {
    let values: Map<String, Value> = report
        .values
        .iter()
        .map(|v| {
            let mut o = Map::new();
            if v.kind != "tensor" {
                o.insert("kind".into(), json!(v.kind));
            }
            o.insert("dtype".into(), v.dtype.map_or(Value::Null, |t| json!(report_json_dtype(t))));
            o.insert("shape".into(), serde_json::to_value(&v.shape).unwrap_or(Value::Null));
            (v.name.clone(), Value::Object(o))
        })
        .collect();
    let diagnostics: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| {
            json!({
                "severity": d.severity,
                "code": d.code,
                "node": d.node,
                "op": d.op,
                "node_index": d.node_index,
                "graph": d.graph,
                "operand": d.operand,
                "axis": d.axis,
                "message": d.message,
                "chain": d.notes,
                "help": d.help,
            })
        })
        .collect();
    json!({
        "model": path.display().to_string(),
        "inputs": report.inputs,
        "outputs": report.outputs,
        "values": values,
        "inferred_from_use": report.inferred_from_use,
        "from_declaration": report.from_declaration,
        "diagnostics": diagnostics,
    })
}

/// The text report.
pub fn render_text(report: &CheckReport) -> String {
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
    for d in &report.diagnostics {
        let _ = write!(out, "\n{d}");
    }
    let errors = report.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
    let warnings = report.diagnostics.len() - errors;
    let hidden = report.values.len() - shown.len();
    let _ = writeln!(
        out,
        "\n{} values ({hidden} initializers not listed; --json has them), {errors} error(s), {warnings} warning(s)",
        report.values.len()
    );
    out
}
