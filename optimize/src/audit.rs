//! What `check` can say about the optimizer's opportunities: each ones-vector
//! that `inline-ones` would fold into a reduction, as an `info` note at its
//! consumer (`ones-vector: MatMul 'm' sums axis 1 of x`).

use crate::passes::inline_ones_site;
use crate::Analysis;
use diamond_infer::graph::CheckReport;
use diamond_infer::{Code, Diagnostic, Severity};
use diamond_ir::Model;

/// The `ones-vector` notes for `model`, given its check report.
pub fn ones_vectors(model: &Model, report: &CheckReport) -> Vec<Diagnostic> {
    let Some(a) = Analysis::with_report(model, report) else { return Vec::new() };
    let graph = a.graph(model);
    let mut notes = Vec::new();
    for (nid, n) in graph.nodes.iter() {
        let Some(site) = inline_ones_site(model, &a, nid) else { continue };
        let value = if site.value == 1.0 { "ones".to_string() } else { format!("a uniform {}", site.value) };
        let message = format!(
            "{} '{}' multiplies by {value} ('{}') only to sum axis {} of '{}'; `diamond optimize` makes it a {}",
            n.op_type(),
            n.name(),
            graph.value_name(site.uniform),
            site.axis,
            graph.value_name(site.summed),
            site.becomes,
        );
        notes.push(Diagnostic {
            severity: Severity::Info,
            code: Code::OnesVector,
            message,
            line: None,
            node: Some(n.name().to_string()).filter(|s| !s.is_empty()),
            op: Some(n.op_type().to_string()),
            node_index: Some(<diamond_ir::NodeId as diamond_ir::entity::EntityId>::index(nid) as u32),
            graph: None,
            operand: n.inputs.iter().position(|&v| v == site.uniform).map(|i| format!("input {i}")),
            axis: None,
            help: None,
            notes: Vec::new(),
            clash: None,
            assumes: Vec::new(),
        });
    }
    notes
}
