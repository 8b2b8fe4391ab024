//! How a rule lowers the graphs its node holds (If branches, Loop and Scan
//! bodies, ...) as subgraph instances, through the lowering (`Host`).

use super::ctx::OpCtx;
use super::facts::Facts;
use diamond_ir::GraphId;

impl OpCtx<'_, '_> {
    /// Lowers the graph `g` (held by attribute `attr`) as a subgraph of
    /// this node, with `inputs[i]` the facts of its i-th formal input (an
    /// unknown when `None` and the graph declares nothing). Returns the
    /// facts of its outputs.
    pub fn lower_subgraph(&mut self, attr: &str, g: GraphId, inputs: Vec<Option<Facts>>) -> Vec<Facts> {
        self.host.lower_subgraph(self.st, &self.at, attr, g, inputs, true)
    }

    /// Like [`OpCtx::lower_subgraph`], but the instance's values stay out of
    /// the report: for a body lowered more than once (unrolled iterations,
    /// fixpoint rounds, one lowering per sequence element).
    pub fn lower_subgraph_unreported(&mut self, attr: &str, g: GraphId, inputs: Vec<Option<Facts>>) -> Vec<Facts> {
        self.host.lower_subgraph(self.st, &self.at, attr, g, inputs, false)
    }

    /// The number of formal inputs and outputs of graph `g`.
    pub fn graph_arity(&self, g: GraphId) -> (usize, usize) {
        self.host.graph_arity(g)
    }
}
