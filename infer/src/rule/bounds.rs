//! Index bounds: what a model's index tensors are known to stay below.
//!
//! `Range(0, seq, 1)` has `seq` elements, each in `[0, seq)`; its elements
//! cannot be listed, but their bound can be carried. The bound travels
//! through operators that move elements without changing them (Unsqueeze,
//! Reshape, Expand, Cast, ...), and a `Gather` whose indices carry one into
//! an axis of size `c` is valid only when `bound ≤ c`: the `implied-bound`
//! the model relies on (positions `[0, seq)` of a 512-row embedding ⇒
//! `seq ≤ 512`).

use super::ctx::OpCtx;
use super::facts_table::Key;
use super::state::LoweringState;
use diamond_ir::term::SizeExpr;
use diamond_ir::Node;

/// Operators whose output 0 holds only elements of input 0.
const KEEPS_ELEMENTS: &[&str] = &[
    "Identity",
    "Unsqueeze",
    "Squeeze",
    "Reshape",
    "Flatten",
    "Expand",
    "Transpose",
    "Tile",
    "Slice",
    "Cast",
    "Gather",
    "GatherElements",
    "Concat",
];

impl OpCtx<'_, '_> {
    /// Every element of input `i` is known to lie in `[0, bound)`.
    pub fn index_bound(&self, i: usize) -> Option<SizeExpr> {
        let key = (*self.at.inputs.get(i)?)?;
        self.st.index_bounds.get(&key).cloned()
    }

    /// States that every element of output `j` lies in `[0, bound)`.
    pub fn set_index_bound(&mut self, j: usize, bound: SizeExpr) {
        if let Some(key) = self.at.outputs.get(j).copied().flatten() {
            self.st.index_bounds.insert(key, bound);
        }
    }
}

impl LoweringState<'_> {
    /// After `node`'s rule: output 0 of an operator that only moves
    /// elements keeps input 0's bound (a Concat only when every input has
    /// the same one).
    pub(crate) fn carry_index_bound(&mut self, inputs: &[Option<Key>], outputs: &[Option<Key>], node: &Node) {
        // Runs after every node: most models have no bound to carry.
        if self.index_bounds.is_empty() || !node.domain().is_empty() || !KEEPS_ELEMENTS.contains(&node.op_type()) {
            return;
        }
        let (Some(Some(first)), Some(Some(out))) = (inputs.first(), outputs.first()) else { return };
        let Some(bound) = self.index_bounds.get(first).cloned() else { return };
        if node.op_type() == "Concat" {
            let same = inputs.iter().all(|k| k.is_some_and(|k| self.index_bounds.get(&k) == Some(&bound)));
            if !same {
                return;
            }
        }
        self.index_bounds.insert(*out, bound);
    }
}
