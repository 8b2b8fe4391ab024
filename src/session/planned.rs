//! One run on the reference executor with its plan made first, for a
//! caller that reports the plan (the predicted peak of live bytes, the
//! symbols the inputs bound, what the plan could not size) or dumps
//! intermediate values, which only the reference executor holds: the path
//! of `diamond run --backend reference` and `diamond run --dump`.

use crate::error::{Error, Result};
use crate::model::Model;
use diamond_runtime::{Fed, RunOptions, Value};

pub use diamond_runtime::exec::DumpSet as Dump;
pub use diamond_runtime::{Plan, RunResult};

impl Model {
    /// Binds the model's symbols to the shapes of `inputs` and plans a run:
    /// a fed shape that contradicts the model is [`Error::Input`] naming the
    /// input, the axis and the rule.
    pub fn plan(&self, inputs: &[(String, Value)]) -> Result<Plan> {
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        Plan::new(&self.ir, &fed).map_err(|e| Error::from_run(&self.label, e))
    }

    /// Runs the model once on the reference executor under `plan` (made by
    /// [`Model::plan`] for these inputs), keeping the intermediate values
    /// `dump` names.
    pub fn run_planned(&self, plan: &Plan, inputs: Vec<(String, Value)>, dump: Option<Dump>) -> Result<RunResult> {
        diamond_runtime::run_planned(&self.ir, plan, inputs, &RunOptions { dump })
            .map_err(|e| Error::from_run(&self.label, e))
    }
}
