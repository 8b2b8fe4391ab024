//! Rendering a [`CheckReport`] as the JSON documented in the README, and the
//! values table that opens the text report (the rest is `render::text`).

use diamond_infer::graph::report_json_dtype;
use diamond_infer::CheckReport;
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
