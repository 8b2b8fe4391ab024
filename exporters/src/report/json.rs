//! The `check --json` document: the model, its inputs and outputs, every
//! value's element type and shape, the values inferred from use or shaped
//! only by a declaration, and every diagnostic with its chain of causes.
//! The README documents the format; the Python package's `Report` is built
//! from this same document.

use diamond_infer::graph::report_json_dtype;
use diamond_infer::CheckReport;
use serde_json::{json, Map, Value};

/// The `--json` document for `report`, naming the model as `model` (the path as given).
pub fn check_json(report: &CheckReport, model: &str) -> Value {
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
        "model": model,
        "inputs": report.inputs,
        "outputs": report.outputs,
        "values": values,
        "inferred_from_use": report.inferred_from_use,
        "from_declaration": report.from_declaration,
        "diagnostics": diagnostics,
    })
}
