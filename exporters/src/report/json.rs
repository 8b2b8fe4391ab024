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
use diamond_infer::{Assumption, CheckReport, Diagnostic, Severity};
use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::cell::RefCell;

/// The `--json` document for `report`, naming the model as `model` (the path as given).
pub fn check_json(report: &CheckReport, model: &str) -> Value {
    serde_json::to_value(Document::new(report, model, None::<fn() -> Vec<Diagnostic>>)).unwrap_or(Value::Null)
}

/// Writes the `--json` document for `report` to `out`, pretty-printed (the
/// bytes `serde_json::to_string_pretty(&check_json(..))` gives), without a
/// final newline.
pub fn write_check_json<W: std::io::Write>(report: &CheckReport, model: &str, out: W) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(out, &Document::new(report, model, None::<fn() -> Vec<Diagnostic>>))
}

/// The `--json` document of a report whose last diagnostics are still being
/// made, ready to be written on another thread: what allocates is done here
/// ([`pending_check_json`]), so that the writing thread allocates nothing
/// (a thread's first allocation takes the allocator a fresh region).
pub struct PendingCheckJson<'a, F> {
    document: Document<'a, F>,
}

/// Prepares [`write_check_json`]'s document for `report`, to be written with
/// [`PendingCheckJson::write`]: once the writer reaches the diagnostics,
/// `rest` is called (it may wait for them) and what it gives is written
/// after the report's own diagnostics, as if appended to them.
pub fn pending_check_json<'a, F: FnOnce() -> Vec<Diagnostic>>(
    report: &'a CheckReport,
    model: &'a str,
    rest: F,
) -> PendingCheckJson<'a, F> {
    PendingCheckJson { document: Document::new(report, model, Some(rest)) }
}

impl<F: FnOnce() -> Vec<Diagnostic>> PendingCheckJson<'_, F> {
    /// Writes the document to `out`, pretty-printed, without a final newline.
    pub fn write<W: std::io::Write>(self, out: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, &self.document)
    }
}

/// The whole document.
struct Document<'a, F> {
    report: &'a CheckReport,
    model: &'a str,
    /// Whether the values' names are distinct ([`distinct_names`]).
    distinct: bool,
    /// What makes the diagnostics that follow the report's own, until called.
    rest: RefCell<Option<F>>,
}

impl<'a, F: FnOnce() -> Vec<Diagnostic>> Document<'a, F> {
    fn new(report: &'a CheckReport, model: &'a str, rest: Option<F>) -> Self {
        Document { report, model, distinct: distinct_names(&report.values), rest: RefCell::new(rest) }
    }
}

impl<F: FnOnce() -> Vec<Diagnostic>> Serialize for Document<'_, F> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.report;
        let mut o = s.serialize_struct("Document", 7)?;
        o.serialize_field("model", self.model)?;
        o.serialize_field("inputs", &r.inputs)?;
        o.serialize_field("outputs", &r.outputs)?;
        o.serialize_field("values", &Values(&r.values, self.distinct))?;
        o.serialize_field("inferred_from_use", &r.inferred_from_use)?;
        o.serialize_field("from_declaration", &r.from_declaration)?;
        let rest = self.rest.borrow_mut().take().map(|rest| rest()).unwrap_or_default();
        o.serialize_field("diagnostics", &Diagnostics(&r.diagnostics, &rest))?;
        o.end()
    }
}

/// Every value, an object keyed by name. The report lists each name once
/// (a body lowered several times keeps its last lowering), so the keys
/// are written in report order as they come; a repeated name would keep its
/// first place and its last entry, as a map does.
/// The second field: whether the names are distinct ([`distinct_names`]).
struct Values<'a>(&'a [ValueReport], bool);

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.1 {
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

/// Whether no two of `values` share a name. When each is a different value
/// of the main graph (whose names are interned, so different), as in every
/// report of `check`, no name is hashed.
fn distinct_names(values: &[ValueReport]) -> bool {
    use diamond_ir::entity::EntityId;
    let ids = values.iter().map(|v| v.value.map(EntityId::index));
    let len = ids.clone().map(|id| id.map_or(0, |i| i + 1)).max().unwrap_or(0);
    let mut seen = vec![false; len];
    if ids.into_iter().all(|id| id.is_some_and(|i| !std::mem::replace(&mut seen[i], true))) {
        return true;
    }
    let mut names = std::collections::HashSet::with_capacity(values.len());
    values.iter().all(|v| names.insert(v.name.as_str()))
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

/// Every diagnostic: the report's own, then those made after it.
struct Diagnostics<'a>(&'a [Diagnostic], &'a [Diagnostic]);

impl Serialize for Diagnostics<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().chain(self.1).map(OneDiagnostic))
    }
}

/// One diagnostic, every key present (`null` where the report has nothing).
/// A warning that holds only under a condition on the dynamic sizes has it
/// twice: `condition` in plain words (`H mod 32 is 0 or at least 29 (in
/// particular when H is a multiple of 32)`, as the message states it) and
/// `condition_exact` over the sizes as the rules built them
/// (`floor(floor((H-1)/2)/2)+1 = …`); several parts are joined by ` and `.
struct OneDiagnostic<'a>(&'a Diagnostic);

impl Serialize for OneDiagnostic<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.0;
        let severity: Severity = d.severity;
        let mut o = s.serialize_map(Some(13))?;
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
        // the code's page (`diamond explain CODE` prints the same text)
        o.serialize_entry("help_uri", &format!("docs/diagnostics/{}.md", d.code.as_str()))?;
        let joined = |text: &dyn Fn(&Assumption) -> String| {
            (!d.assumes.is_empty()).then(|| d.assumes.iter().map(text).collect::<Vec<_>>().join(" and "))
        };
        o.serialize_entry("condition", &joined(&Assumption::plain))?;
        o.serialize_entry("condition_exact", &joined(&|a| a.to_string()))?;
        o.end()
    }
}
