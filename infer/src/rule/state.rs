//! [`LoweringState`]: the part of a model's lowering that rules read and
//! write — the solver, the facts of every value, the stored tensors not yet
//! decoded, the index bounds and the operand texts causes share. The
//! lowering owns it and lends it to each rule's [`super::OpCtx`].

use super::facts::{ConstValue, Facts};
use super::facts_table::{FactsTable, Key};
use crate::solver::Solver;
use diamond_ir::term::{RowTerm, SizeExpr};
use diamond_ir::Tensor;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

/// See the module documentation.
pub(crate) struct LoweringState<'m> {
    pub(crate) solver: Solver,
    pub(crate) facts: FactsTable,
    /// Stored tensors whose elements are decoded on first use.
    pub(crate) lazy: HashMap<Key, &'m Tensor>,
    /// Values whose every element is known to lie in `[0, bound)` (see `bounds.rs`).
    pub(crate) index_bounds: HashMap<Key, SizeExpr>,
    /// Whether stated 1s are claims (`--strict-units`).
    pub(crate) strict_units: bool,
    /// Operand texts (`input 0`) as the shared strings causes hold.
    operand_names: HashSet<Arc<str>>,
}

impl LoweringState<'_> {
    /// A state with no values, around `solver`.
    pub(crate) fn new(solver: Solver, strict_units: bool) -> Self {
        LoweringState {
            solver,
            facts: FactsTable::default(),
            lazy: HashMap::default(),
            index_bounds: HashMap::default(),
            strict_units,
            operand_names: HashSet::default(),
        }
    }

    /// `operand` as a shared string (made once per distinct text).
    pub(crate) fn shared_operand(&mut self, operand: &str) -> Arc<str> {
        if let Some(shared) = self.operand_names.get(operand) {
            return shared.clone();
        }
        let shared: Arc<str> = operand.into();
        self.operand_names.insert(shared.clone());
        shared
    }

    /// The elements of `key`, decoding a lazily stored tensor's into its facts.
    pub(crate) fn value(&mut self, key: Key) -> Option<Arc<ConstValue>> {
        if let Some(v) = self.facts.get(&key).and_then(|f| f.value.clone()) {
            return Some(v);
        }
        let tensor = self.lazy.remove(&key)?;
        let value = Arc::new(super::decode::decode(tensor)?);
        if let Some(f) = self.facts.get_mut(&key) {
            f.value = Some(value.clone());
        }
        Some(value)
    }

    /// Facts of an unknown tensor.
    pub(crate) fn unknown_facts(&mut self) -> Facts {
        let row = RowTerm { leading: vec![], var: Some(self.solver.fresh_opaque_row()), trailing: vec![] };
        Facts::tensor(row, None)
    }
}
