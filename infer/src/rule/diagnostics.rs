//! How a rule reports what is wrong at its node: invalid attributes,
//! rank conflicts, element types that disagree, axes out of range.

use super::ctx::OpCtx;
use crate::diagnostic::Code;
use diamond_ir::ElemType;

impl OpCtx<'_, '_> {
    /// Reports `code` at this node.
    pub fn report(&mut self, code: Code, message: String) {
        self.report_at(code, "node", message);
    }

    /// Reports `code` about `operand` (`input 1`) of this node.
    pub fn report_at(&mut self, code: Code, operand: &str, message: String) {
        self.report_assuming(code, operand, message, Vec::new());
    }

    /// [`OpCtx::report_at`] for a warning that the model holds only under
    /// `assumes` (a bound, a divisibility), which `diamond run` checks once
    /// the symbols are bound.
    pub fn report_assuming(
        &mut self,
        code: Code,
        operand: &str,
        message: String,
        assumes: Vec<crate::diagnostic::Assumption>,
    ) {
        let cause = self.cause(operand, "operator rule");
        self.st.solver.report_fact_assuming(code, crate::diagnostic::shorten(message), cause, Vec::new(), assumes);
    }

    /// An `invalid-attribute` error at this node; the message is prefixed with the node.
    pub fn invalid(&mut self, message: impl AsRef<str>) {
        let m = format!("{}: {}", self.label(), message.as_ref());
        self.report(Code::InvalidAttribute, m);
    }

    /// A conflict about input `i`'s shape — its rank, or axis `axis` of it —
    /// reported with `code` at that operand (never as `invalid-attribute`:
    /// the offending thing is an input tensor); the message is prefixed
    /// with the node.
    pub fn input_conflict(&mut self, code: Code, i: usize, axis: Option<usize>, message: impl AsRef<str>) {
        let m = crate::diagnostic::shorten(format!("{}: {}", self.label(), message.as_ref()));
        let root = self.cause(&format!("input {i}"), "operator rule");
        let cause = match axis {
            Some(a) => self.st.solver.axis_cause(root, a),
            None => root,
        };
        self.st.solver.report_fact(code, m, cause, Vec::new());
    }

    /// A `rank-conflict` error: input `i` has a rank the operator does not take.
    pub fn rank_conflict(&mut self, i: usize, message: impl AsRef<str>) {
        self.input_conflict(Code::RankConflict, i, None, message);
    }

    /// A `dtype-mismatch` error at this node.
    pub fn dtype_mismatch(&mut self, message: impl AsRef<str>) {
        let m = format!("{}: {}", self.label(), message.as_ref());
        self.report(Code::DtypeMismatch, m);
    }

    /// The common element type of the given inputs; reports a
    /// `dtype-mismatch` naming both operands when two known ones differ.
    pub fn same_dtype(&mut self, inputs: &[usize]) -> Option<ElemType> {
        let mut first: Option<(usize, ElemType)> = None;
        for &i in inputs {
            let Some(t) = self.dtype(i) else { continue };
            match first {
                None => first = Some((i, t)),
                Some((j, u)) if u != t => {
                    self.dtype_mismatch(format!("input {j} is {u} but input {i} is {t}; they must have the same type"));
                    return Some(u);
                }
                _ => {}
            }
        }
        first.map(|(_, t)| t)
    }

    /// Normalizes `axis` (negative counts from the end) against `rank`;
    /// reports `invalid-attribute` naming `what` when out of range.
    pub fn axis(&mut self, axis: i64, rank: usize, what: &str) -> Option<usize> {
        let r = rank as i64;
        if axis < -r || axis >= r.max(0) {
            self.invalid(format!("{what} {axis} is out of range for rank {rank} (allowed {}..={})", -r, r - 1));
            return None;
        }
        Some(if axis < 0 { (axis + r) as usize } else { axis as usize })
    }
}
