//! SARIF 2.1.0 output (`--sarif FILE`), the format code-scanning services
//! read. One run: the tool with one rule per code found, and one result per
//! diagnostic. A result points at the model file (physical location) and at
//! the node (logical location, its graph prefix included); the provenance
//! chain travels as related locations, one per note, and the node's operator,
//! operand, axis and help as result properties.

use super::{location, notes, rules};
use diamond::check::{Code, Diagnostic, Report as CheckReport, Severity};
use serde_json::{json, Map, Value};
use std::path::Path;

/// The SARIF 2.1.0 schema.
const SCHEMA: &str = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The SARIF document for `report` on the model at `model` (as given on the command line).
pub fn document(report: &CheckReport, model: &Path) -> Value {
    let uri = artifact_uri(model);
    let mut codes: Vec<Code> = Vec::new();
    for d in &report.diagnostics {
        if !codes.contains(&d.code) {
            codes.push(d.code);
        }
    }
    let results: Vec<Value> = report
        .diagnostics
        .iter()
        .map(|d| result(d, codes.iter().position(|&c| c == d.code).unwrap_or(0), &uri))
        .collect();
    let mut driver = Map::new();
    driver.insert("name".into(), json!("diamond"));
    driver.insert("version".into(), json!(env!("CARGO_PKG_VERSION")));
    let repository = env!("CARGO_PKG_REPOSITORY");
    if !repository.is_empty() {
        driver.insert("informationUri".into(), json!(repository));
    }
    driver.insert("rules".into(), Value::Array(codes.iter().map(|&c| rule(c)).collect()));
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "artifacts": [{"location": {"uri": uri}}],
            "results": results,
        }],
    })
}

/// Writes the document to `path` atomically: the file appears whole or not at all.
pub fn write(path: &Path, document: &Value) -> std::io::Result<()> {
    diamond::io::write_with(path, |file| {
        serde_json::to_writer_pretty(&mut *file, document)?;
        std::io::Write::write_all(file, b"\n")
    })
}

/// The rule entry of `code`.
fn rule(code: Code) -> Value {
    json!({
        "id": code.as_str(),
        "shortDescription": {"text": rules::short_description(code)},
        "fullDescription": {"text": what_it_means(code)},
        "help": {"text": rules::help(code), "markdown": diamond::check::explain(code)},
        "defaultConfiguration": {"level": level(code.severity())},
    })
}

/// The "What it means" paragraphs of `code`'s page, as one line of text.
fn what_it_means(code: Code) -> String {
    let page = diamond::check::explain(code);
    let section = page.split("## What it means").nth(1).unwrap_or_default();
    let body = section.split("\n## ").next().unwrap_or_default();
    body.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// SARIF's name for a severity.
fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// The result for one diagnostic.
fn result(d: &Diagnostic, rule_index: usize, uri: &str) -> Value {
    let mut at = json!({"physicalLocation": {"artifactLocation": {"uri": uri, "index": 0}}});
    if let Some(name) = location::qualified_name(d) {
        at["logicalLocations"] = json!([{"name": d.node, "fullyQualifiedName": name, "kind": "function"}]);
    }
    if let Some(text) = location::describe(d) {
        at["message"] = json!({"text": text});
    }
    let related: Vec<Value> = d
        .notes
        .iter()
        .enumerate()
        .map(|(i, note)| {
            json!({
                "id": i,
                "physicalLocation": {"artifactLocation": {"uri": uri, "index": 0}},
                "message": {"text": notes::display(note)},
            })
        })
        .collect();
    let mut properties = Map::new();
    for (key, value) in [
        ("op", json!(d.op)),
        ("nodeIndex", json!(d.node_index)),
        ("operand", json!(d.operand)),
        ("axis", json!(d.axis)),
        ("help", json!(d.help)),
    ] {
        if !value.is_null() {
            properties.insert(key.into(), value);
        }
    }
    properties.insert("chain".into(), json!(d.notes));
    json!({
        "ruleId": d.code.as_str(),
        "ruleIndex": rule_index,
        "level": level(d.severity),
        "message": {"text": d.message},
        "locations": [at],
        "relatedLocations": related,
        "properties": properties,
    })
}

/// The model file as a URI reference: a relative path stays relative (as given), an absolute one becomes `file://`;
/// bytes outside the unreserved set and `/` are percent-encoded.
pub fn artifact_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut out = String::with_capacity(text.len());
    if text.starts_with('/') {
        out += "file://";
    }
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_uri_references() {
        assert_eq!(artifact_uri(Path::new("fixtures/check/a b.onnx")), "fixtures/check/a%20b.onnx");
        assert_eq!(artifact_uri(Path::new("/tmp/m.onnx")), "file:///tmp/m.onnx");
    }
}
