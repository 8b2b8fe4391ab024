//! What passes between a rule and the lowering running it besides the
//! [`LoweringState`] it is lent: [`NodeAt`], the node as the lowering
//! hands it over, and [`Host`], what a rule asks of the lowering itself —
//! the instances, the declarations, the walk of subgraphs. Each is asked
//! for rarely (an attribute reference in a function body, an output no
//! rule states, a subgraph), so the one implementation, the lowering's, is
//! reached through `dyn Host`.

use super::facts::Facts;
use super::facts_table::Key;
use super::state::LoweringState;
use crate::cause::NodeSite;
use diamond_ir::{Function, GraphId, Node, NodeId};
use std::sync::Arc;

/// The node a rule runs on, as the lowering found it.
pub(crate) struct NodeAt<'m> {
    /// The instance it is lowered in.
    pub(crate) inst: u32,
    pub(crate) nid: NodeId,
    pub(crate) node: &'m Node,
    /// The node's display label, made from `site` when first asked for
    /// (most nodes report nothing).
    pub(crate) label: std::cell::OnceCell<String>,
    /// The node as its causes name it, shared by all of them.
    pub(crate) site: Arc<NodeSite>,
    /// The keys of its inputs: `None` for an omitted one.
    pub(crate) inputs: Vec<Option<Key>>,
    /// The keys of its outputs: `None` for one not wanted.
    pub(crate) outputs: Vec<Option<Key>>,
}

/// What a rule asks of the lowering beyond its state. See the module documentation.
pub(crate) trait Host<'m> {
    /// For instance `inst` of a function body: the caller's instance, the
    /// call node and the function, where its attribute references resolve.
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
