//! [`Model::inspect`]: what a model is made of — its opsets, inputs and
//! outputs, operator counts, weights by size — and how much `optimize`
//! would remove, as `diamond inspect` prints it.

use crate::model::Model;

pub use diamond_exporters::inspect::InspectReport;

/// A model's inventory and the optimizer's estimate for it.
#[derive(Debug)]
pub struct Inspection {
    /// The inventory: opsets, inputs, outputs, operators, weights.
    pub report: InspectReport,
    /// Main-graph nodes before and after `optimize`'s passes (run without
    /// verification: an estimate), or why the passes refuse the model.
    pub optimize: std::result::Result<(usize, usize), String>,
}

impl Model {
    /// Inspects the model; `file_bytes` is the size of the file it came
    /// from (0 when it came from bytes).
    pub fn inspect(&self, file_bytes: u64) -> Inspection {
        let report = InspectReport::new(&self.ir, &self.label, file_bytes);
        let options = diamond_optimize::Options { verify: false, ..Default::default() };
        let optimize = diamond_optimize::optimize(&self.ir, &options).map_err(|e| e.to_string()).map(|outcome| {
            let nodes = |counts: &std::collections::BTreeMap<String, usize>| counts.values().sum::<usize>();
            (nodes(&outcome.before), nodes(&outcome.after))
        });
        Inspection { report, optimize }
    }
}

impl Inspection {
    /// The inventory as text, ending with the optimizer's estimate.
    pub fn render_text(&self) -> String {
        let mut text = self.report.render_text();
        match &self.optimize {
            Ok((before, after)) => {
                text += &format!(
                    "optimize: would remove {} of {before} nodes ({after} left; `diamond optimize` verifies)\n",
                    before - after
                )
            }
            Err(why) => text += &format!("optimize: not possible: {why}\n"),
        }
        text
    }

    /// The inventory as JSON, with an `optimize` member holding
    /// `nodes_before` and `nodes_after`, or `not_possible` and why.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.report).unwrap_or_default();
        if let Some(map) = value.as_object_mut() {
            let optimize = match &self.optimize {
                Ok((before, after)) => serde_json::json!({ "nodes_before": before, "nodes_after": after }),
                Err(why) => serde_json::json!({ "not_possible": why }),
            };
            map.insert("optimize".into(), optimize);
        }
        value
    }
}
