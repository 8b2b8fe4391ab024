//! How a rule states its node's outputs: shapes (as constraints on the
//! output rows), element types, kinds, known elements, sequence items, or
//! nothing (an unknown).

use super::ctx::OpCtx;
use super::facts::{ConstData, ConstValue, Facts, ValueKind};
use crate::constraint::Constraint;
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;
use std::sync::Arc;

/// The most float or string elements a value keeps (see [`OpCtx::set_value`]).
pub const MAX_FLOAT_ELEMS: usize = 1 << 12;

impl OpCtx<'_, '_> {
    /// Number of outputs the node lists.
    pub fn output_count(&self) -> usize {
        self.at.outputs.len()
    }

    /// Whether output `j` is wanted (listed and not the empty name).
    pub fn has_output(&self, j: usize) -> bool {
        matches!(self.at.outputs.get(j), Some(Some(_)))
    }

    /// Output `j`'s own row term (to use in constraints), if it is wanted.
    pub fn out_row(&mut self, j: usize) -> Option<RowTerm> {
        let key = (*self.at.outputs.get(j)?)?;
        self.touched[j] = true;
        Some(self.st.facts.get(&key)?.row.clone())
    }

    /// Output `j` has shape `row`.
    pub fn set_row(&mut self, j: usize, row: RowTerm) {
        let Some(out) = self.out_row(j) else { return };
        let cause = self.cause(&format!("output {j}"), "the operator's output shape");
        self.st.solver.add(Constraint::RowEq(out, row, cause));
    }

    /// Output `j` has these dimensions.
    pub fn set_dims(&mut self, j: usize, dims: Vec<DimTerm>) {
        self.set_row(j, RowTerm::closed(dims));
    }

    /// Output `j` has these known sizes.
    pub fn set_sizes(&mut self, j: usize, sizes: &[u64]) {
        let dims = sizes.iter().map(|&n| self.known(n)).collect();
        self.set_dims(j, dims);
    }

    /// Output `j` has element type `t`.
    pub fn set_dtype(&mut self, j: usize, t: ElemType) {
        if let Some(f) = self.out_facts(j) {
            f.dtype = Some(t);
        }
    }

    /// Output `j` is of kind `k` (a sequence, an optional, ...).
    pub fn set_kind(&mut self, j: usize, k: ValueKind) {
        if let Some(f) = self.out_facts(j) {
            f.kind = k;
        }
    }

    /// Output `j` holds the sequence items `items` (length known).
    pub fn set_items(&mut self, j: usize, items: Vec<Facts>) {
        if let Some(f) = self.out_facts(j) {
            f.items = Some(items);
        }
    }

    /// Output `j` of an optional kind is known present or absent.
    pub fn set_present(&mut self, j: usize, present: bool) {
        if let Some(f) = self.out_facts(j) {
            f.present = Some(present);
        }
    }

    /// Output `j` has known elements: sets its shape and type from them too.
    /// Elements are kept only where shape questions may need them: integer
    /// and bool tensors up to 2^20 elements, float and string ones up to
    /// [`MAX_FLOAT_ELEMS`] (scales and ranges are small; a weight filled by
    /// `ConstantOfShape` is not worth its memory).
    pub fn set_value(&mut self, j: usize, v: ConstValue) {
        if !self.has_output(j) {
            return;
        }
        let dims = v.shape.iter().map(|&n| self.known(n as u64)).collect();
        self.set_dims(j, dims);
        self.set_dtype(j, v.dtype);
        let cap = match v.data {
            ConstData::Ints(_) | ConstData::Bools(_) => 1 << 20,
            ConstData::Floats(_) | ConstData::Strings(_) => MAX_FLOAT_ELEMS,
        };
        if v.len() > cap {
            return;
        }
        if let Some(f) = self.out_facts(j) {
            f.value = Some(Arc::new(v));
        }
    }

    /// Output `j` is exactly `f` (kind, shape, type, elements, items): for
    /// pass-through operators and subgraph results.
    pub fn set_facts(&mut self, j: usize, f: Facts) {
        if !self.has_output(j) {
            return;
        }
        self.set_row(j, f.row.clone());
        if let Some(out) = self.out_facts(j) {
            out.kind = f.kind;
            out.dtype = f.dtype.or(out.dtype);
            out.value = f.value;
            out.items = f.items;
            out.present = f.present;
        }
    }

    /// Output `j` is input `i` as it is (`Identity`): its facts, and its
    /// value too. An initializer not decoded yet stays undecoded: the
    /// output takes the same tensor to decode when a rule asks for it, so
    /// that an alias of a weight costs nothing unless its elements matter.
    pub fn pass_through(&mut self, i: usize, j: usize) {
        let Some(key) = self.at.inputs.get(i).copied().flatten() else { return };
        let Some(tensor) = self.st.lazy.get(&key).copied() else {
            if let Some(f) = self.facts(i) {
                self.set_facts(j, f);
            }
            return;
        };
        let Some(mut f) = self.st.facts.get(&key).cloned() else { return };
        f.row = self.st.solver.resolve_row(&f.row);
        self.set_facts(j, f);
        if let Some(out) = self.at.outputs.get(j).copied().flatten() {
            if self.st.facts.get(&out).is_some_and(|o| o.value.is_none()) {
                self.st.lazy.insert(out, tensor);
            }
        }
    }

    /// The facts of output `j`, when it is wanted.
    fn out_facts(&mut self, j: usize) -> Option<&mut Facts> {
        let key = self.at.outputs.get(j).copied().flatten()?;
        self.st.facts.get_mut(&key)
    }

    /// Output `j` is unknown: nothing the operator states determines it.
    pub fn set_unknown(&mut self, j: usize) {
        if j < self.touched.len() {
            self.touched[j] = true;
            self.host.make_unknown(self.st, self.at.inst, self.at.node, j);
        }
    }

    /// Output `j`'s element type, if already set.
    pub fn out_dtype(&self, j: usize) -> Option<ElemType> {
        let key = (*self.at.outputs.get(j)?)?;
        self.st.facts.get(&key)?.dtype
    }
}
