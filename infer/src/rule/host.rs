//! [`Host`]: what a rule needs of the lowering running it beyond the
//! [`LoweringState`] it is lent — the instances, the declarations, the
//! walk of subgraphs. Each is asked for rarely (an attribute reference in
//! a function body, an output no rule states, a subgraph), so the one
//! implementation, the lowering's, is reached through `dyn Host`.

use super::ctx::NodeAt;
use super::facts::Facts;
use super::state::LoweringState;
use diamond_ir::{Function, GraphId, Node};

/// See the module documentation.
pub(crate) trait Host<'m> {
    /// For instance `inst` of a function body: its instance, call node and
    /// function, where its attribute references resolve.
    fn call(&self, inst: u32) -> Option<(u32, &'m Node, &'m Function)>;

    /// Makes output `j` of `node` in `inst` an unknown (opaque) tensor, or
    /// gives it its declared type when the graph states one.
    fn make_unknown(&mut self, st: &mut LoweringState<'m>, inst: u32, node: &Node, j: usize);

    /// Lowers graph `g`, held by attribute `attr` of `node`, as a subgraph
    /// instance with `inputs[i]` the facts of its i-th formal input; its
    /// values are reported when `node`'s are and `reported` is true.
    /// Returns the facts of its outputs.
    fn lower_subgraph(
        &mut self,
        st: &mut LoweringState<'m>,
        node: &NodeAt<'m>,
        attr: &str,
        g: GraphId,
        inputs: Vec<Option<Facts>>,
        reported: bool,
    ) -> Vec<Facts>;

    /// The number of formal inputs and outputs of graph `g`.
    fn graph_arity(&self, g: GraphId) -> (usize, usize);
}
