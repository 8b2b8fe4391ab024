//! The `check --json` document: the model, its inputs and outputs, every
//! value's element type and shape, the values inferred from use or shaped
//! only by a declaration, and every diagnostic with its chain of causes.
//! The README documents the format; the Python package's `Report` is built
//! from this same document.
//!
//! The document is a set of borrowing views over the report with `Serialize`
//! impls, so the command line streams it straight to its output
//! ([`write_check_json`]) without building a `serde_json::Value` tree; the
//! Python package takes the tree ([`check_json`]), which holds the same keys
//! in the same order.

use diamond_infer::graph::report_json_dtype;
use diamond_infer::graph::{DimReport, ValueReport};
use diamond_infer::{CheckReport, Severity};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// The `--json` document for `report`, naming the model as `model` (the path as given).
pub fn check_json(report: &CheckReport, model: &str) -> Value {
    serde_json::to_value(Document { report, model }).unwrap_or(Value::Null)
}

/// Writes the `--json` document for `report` to `out`, pretty-printed (the
/// bytes `serde_json::to_string_pretty(&check_json(..))` gives), without a
/// final newline.
pub fn write_check_json<W: std::io::Write>(report: &CheckReport, model: &str, out: W) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, &Document { report, model })
}

/// The whole document.
struct Document<'a> {
    report: &'a CheckReport,
    model: &'a str,
}

impl Serialize for Document<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.report;
        let mut o = s.serialize_struct("Document", 7)?;
        o.serialize_field("model", self.model)?;
        o.serialize_field("inputs", &r.inputs)?;
        o.serialize_field("outputs", &r.outputs)?;
        o.serialize_field("values", &Values(&r.values))?;
        o.serialize_field("inferred_from_use", &r.inferred_from_use)?;
        o.serialize_field("from_declaration", &r.from_declaration)?;
        o.serialize_field("diagnostics", &Diagnostics(&r.diagnostics))?;
        o.end()
    }
}

/// Every value, an object keyed by name. The report lists each name once
/// (a body lowered several times keeps its last lowering), so the keys
/// are written in report order as they come; a repeated name would keep its
/// first place and its last entry, as a map does.
struct Values<'a>(&'a [ValueReport]);

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seen = std::collections::HashSet::with_capacity(self.0.len());
        let unique = self.0.iter().all(|v| seen.insert(v.name.as_str()));
        if !unique {
            // Not reached from `check` (names are unique there); a map keeps the semantics.
            let mut map: serde_json::Map<String, Value> = serde_json::Map::new();
            for v in self.0 {
                map.insert(v.name.clone(), serde_json::to_value(OneValue(v)).map_err(serde::ser::Error::custom)?);
            }
            return map.serialize(s);
        }
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for v in self.0 {
            m.serialize_entry(&v.name, &OneValue(v))?;
        }
        m.end()
    }
}

/// One value: `kind` (only when not a plain tensor), `dtype`, `shape`.
struct OneValue<'a>(&'a ValueReport);

impl Serialize for OneValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        let plain = v.kind == "tensor";
        let mut o = s.serialize_map(Some(if plain { 2 } else { 3 }))?;
        if !plain {
            o.serialize_entry("kind", &v.kind)?;
        }
        o.serialize_entry("dtype", &v.dtype.map(report_json_dtype))?;
        o.serialize_entry("shape", &v.shape.as_deref().map(Shape))?;
        o.end()
    }
}

/// A shape's dims.
struct Shape<'a>(&'a [DimReport]);

impl Serialize for Shape<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0)
    }
}

/// Every diagnostic.
struct Diagnostics<'a>(&'a [diamond_infer::Diagnostic]);

impl Serialize for Diagnostics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(OneDiagnostic))
    }
}

/// One diagnostic, every key present (`null` where the report has nothing).
struct OneDiagnostic<'a>(&'a diamond_infer::Diagnostic);

impl Serialize for OneDiagnostic<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.0;
        let severity: Severity = d.severity;
        let mut o = s.serialize_map(Some(11))?;
        o.serialize_entry("severity", &severity)?;
        o.serialize_entry("code", &d.code)?;
        o.serialize_entry("node", &d.node)?;
        o.serialize_entry("op", &d.op)?;
        o.serialize_entry("node_index", &d.node_index)?;
        o.serialize_entry("graph", &d.graph)?;
        o.serialize_entry("operand", &d.operand)?;
        o.serialize_entry("axis", &d.axis)?;
        o.serialize_entry("message", &d.message)?;
        o.serialize_entry("chain", &d.notes)?;
        o.serialize_entry("help", &d.help)?;
        o.end()
    }
}
