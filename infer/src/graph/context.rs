//! [`OpCtx`]: what an operator rule sees of its node, and how it states
//! its outputs.
//!
//! Inputs are read as resolved solver rows (so a rule sees every fact the
//! nodes before it established), element types and known elements.
//! Outputs are stated as constraints on the output rows, each with a cause
//! naming the node and operand. An output a rule leaves untouched becomes an
//! unknown that closing never fills in.

use super::declared::{expr_dim, size_dim};
use super::facts::{ConstValue, Elem, Facts, ValueKind};
use super::lowering::{node_label, Instance, Key, Lowering};
use crate::cause::{CauseId, NodeSite, Origin, Rule};
use crate::constraint::Constraint;
use crate::diagnostic::Code;
use crate::ops::Defer;
use diamond_ir::term::{Dim, DimTerm, RowTerm, Size};
use diamond_ir::{AttrValue, Attribute, ElemType, GraphId, Node, NodeId, Tensor};
use std::sync::Arc;

/// The most float or string elements a value keeps (see [`OpCtx::set_value`]).
pub const MAX_FLOAT_ELEMS: usize = 1 << 12;

/// A rule's view of one node. See the module documentation.
pub struct OpCtx<'l, 'm> {
    low: &'l mut Lowering<'m>,
    inst: u32,
    nid: NodeId,
    node: &'m Node,
    /// The node's display label.
    label: String,
    /// The node as its causes name it, shared by all of them.
    site: Arc<NodeSite>,
    inputs: Vec<Option<Key>>,
    outputs: Vec<Option<Key>>,
    touched: Vec<bool>,
    version: i64,
}

impl<'l, 'm> OpCtx<'l, 'm> {
    pub(crate) fn new(low: &'l mut Lowering<'m>, inst: u32, nid: NodeId, version: i64) -> OpCtx<'l, 'm> {
        let graph = low.graph(inst);
        let node = &graph.nodes[nid];
        let label = node_label(graph, nid);
        let site = low.node_site(inst, node, nid);
        let inputs = node
            .inputs
            .iter()
            .map(|&v| if graph.value_name(v).is_empty() { None } else { low.lookup(inst, v) })
            .collect();
        let outputs: Vec<Option<Key>> =
            node.outputs.iter().map(|&v| if graph.value_name(v).is_empty() { None } else { Some((inst, v)) }).collect();
        let touched = vec![false; outputs.len()];
        OpCtx { low, inst, nid, node, label, site, inputs, outputs, touched, version }
    }

    /// Marks untouched outputs unknown. Called by the lowering after the rule.
    pub(crate) fn finish(self) {
        for (j, touched) in self.touched.iter().enumerate() {
            if !touched {
                self.low.make_unknown(self.inst, self.node, j);
            }
        }
        self.low.carry_index_bound(&self.inputs, &self.outputs, self.node);
    }

    /// The key of input `i`, if given.
    pub(super) fn input_key(&self, i: usize) -> Option<Key> {
        *self.inputs.get(i)?
    }

    /// The key of output `j`, if wanted.
    pub(super) fn output_key(&self, j: usize) -> Option<Key> {
        *self.outputs.get(j)?
    }

    /// The lowering this node belongs to.
    pub(super) fn lowering(&self) -> &Lowering<'m> {
        self.low
    }

    /// The lowering this node belongs to, to record facts in.
    pub(super) fn lowering_mut(&mut self) -> &mut Lowering<'m> {
        self.low
    }

    // ---- the node ----

    /// The opset version of the node's domain.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The node.
    pub fn node(&self) -> &'m Node {
        self.node
    }

    /// The operator type.
    pub fn op(&self) -> &'m str {
        self.node.op_type()
    }

    /// `Add 'fc1' (node 3)`.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether `--strict-units` is on (stated 1s are claims).
    pub fn strict_units(&self) -> bool {
        self.low.options.strict_units
    }

    // ---- inputs ----

    /// Number of inputs the node lists (omitted optional ones included).
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// Whether input `i` is given (listed and not the empty name).
    pub fn has_input(&self, i: usize) -> bool {
        matches!(self.inputs.get(i), Some(Some(_)))
    }

    /// Everything known about input `i`, its row resolved.
    pub fn facts(&mut self, i: usize) -> Option<Facts> {
        let key = (*self.inputs.get(i)?)?;
        let value = self.value(i);
        let mut f = self.low.facts.get(&key)?.clone();
        f.row = self.low.solver.resolve_row(&f.row);
        f.value = value;
        Some(f)
    }

    /// The kind of input `i`.
    pub fn kind(&self, i: usize) -> Option<ValueKind> {
        let key = (*self.inputs.get(i)?)?;
        Some(self.low.facts.get(&key)?.kind.clone())
    }

    /// Input `i`'s shape (for a sequence: its elements' shape), resolved.
    pub fn row(&mut self, i: usize) -> Option<RowTerm> {
        let key = (*self.inputs.get(i)?)?;
        let row = self.low.facts.get(&key)?.row.clone();
        Some(self.low.solver.resolve_row(&row))
    }

    /// Input `i`'s rank, when known.
    pub fn rank(&mut self, i: usize) -> Option<usize> {
        let row = self.row(i)?;
        row.var.is_none().then(|| row.leading.len() + row.trailing.len())
    }

    /// Input `i`'s dimensions, when its rank is known.
    pub fn dims(&mut self, i: usize) -> Option<Vec<DimTerm>> {
        let row = self.row(i)?;
        if row.var.is_some() {
            return None;
        }
        let mut dims = row.leading;
        dims.extend(row.trailing);
        Some(dims)
    }

    /// Input `i`'s dimensions; defers when its rank is not known yet.
    /// Call only for a given input (see [`OpCtx::has_input`]).
    pub fn need_dims(&mut self, i: usize) -> Result<Vec<DimTerm>, Defer> {
        self.dims(i).ok_or(Defer)
    }

    /// Input `i`'s rank; defers when it is not known yet.
    pub fn need_rank(&mut self, i: usize) -> Result<usize, Defer> {
        self.rank(i).ok_or(Defer)
    }

    /// Input `i`'s element type, when known.
    pub fn dtype(&self, i: usize) -> Option<ElemType> {
        let key = (*self.inputs.get(i)?)?;
        self.low.facts.get(&key)?.dtype
    }

    /// Input `i`'s elements, when known; integer elements that were axis
    /// sizes not yet known are resolved against what is known now.
    pub fn value(&mut self, i: usize) -> Option<Arc<ConstValue>> {
        let key = (*self.inputs.get(i)?)?;
        let value = self.low.value(key)?;
        let has_var = value.int_elems().is_some_and(|e| e.iter().any(|x| matches!(x, Elem::Var(_))));
        if !has_var {
            return Some(value);
        }
        let mut v = (*value).clone();
        if let super::facts::ConstData::Ints(elems) = &mut v.data {
            for e in elems.iter_mut() {
                if let Elem::Var(var) = e {
                    *e = self.elem_of_dim(&DimTerm::Var(*var));
                }
            }
        }
        Some(Arc::new(v))
    }

    /// Input `i`'s integer elements (size terms), when it is an integer tensor with known elements.
    pub fn elems(&mut self, i: usize) -> Option<Vec<Elem>> {
        let v = self.value(i)?;
        v.int_elems().map(<[Elem]>::to_vec)
    }

    /// Input `i`'s elements as known integers (bools as 0/1, whole floats too).
    pub fn ints(&mut self, i: usize) -> Option<Vec<i64>> {
        self.value(i)?.as_i64s()
    }

    /// Input `i`'s elements as `f64`.
    pub fn floats(&mut self, i: usize) -> Option<Vec<f64>> {
        self.value(i)?.as_f64s()
    }

    // ---- attributes ----

    /// Attribute `name` (a function body's reference resolved to the caller's).
    pub fn attr(&self, name: &str) -> Option<&'m Attribute> {
        self.low.attribute(self.inst, self.node, name)
    }

    /// An `int` attribute.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        match self.attr(name)?.value()? {
            AttrValue::Int(i) => Some(i),
            _ => None,
        }
    }

    /// An `ints` attribute.
    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.attr(name)?.value()? {
            AttrValue::Ints(v) => Some(v.to_vec()),
            _ => None,
        }
    }

    /// A `float` attribute.
    pub fn attr_float(&self, name: &str) -> Option<f32> {
        match self.attr(name)?.value()? {
            AttrValue::Float(f) => Some(f),
            _ => None,
        }
    }

    /// A `floats` attribute.
    pub fn attr_floats(&self, name: &str) -> Option<Vec<f32>> {
        match self.attr(name)?.value()? {
            AttrValue::Floats(v) => Some(v.to_vec()),
            _ => None,
        }
    }

    /// A `string` attribute (lossy UTF-8).
    pub fn attr_str(&self, name: &str) -> Option<String> {
        match self.attr(name)?.value()? {
            AttrValue::String(s) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    /// A `strings` attribute (lossy UTF-8).
    pub fn attr_strs(&self, name: &str) -> Option<Vec<String>> {
        match self.attr(name)?.value()? {
            AttrValue::Strings(v) => Some(v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()),
            _ => None,
        }
    }

    /// A `tensor` attribute.
    pub fn attr_tensor(&self, name: &str) -> Option<&'m Tensor> {
        match self.attr(name)?.value()? {
            AttrValue::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A `graph` attribute.
    pub fn attr_graph(&self, name: &str) -> Option<GraphId> {
        match self.attr(name)?.value()? {
            AttrValue::Graph(g) => Some(g),
            _ => None,
        }
    }

    /// A `tensor` attribute's elements.
    pub fn attr_tensor_value(&self, name: &str) -> Option<ConstValue> {
        super::decode::decode(self.attr_tensor(name)?)
    }

    // ---- outputs ----

    /// Number of outputs the node lists.
    pub fn output_count(&self) -> usize {
        self.outputs.len()
    }

    /// Whether output `j` is wanted (listed and not the empty name).
    pub fn has_output(&self, j: usize) -> bool {
        matches!(self.outputs.get(j), Some(Some(_)))
    }

    /// Output `j`'s own row term (to use in constraints), if it is wanted.
    pub fn out_row(&mut self, j: usize) -> Option<RowTerm> {
        let key = (*self.outputs.get(j)?)?;
        self.touched[j] = true;
        Some(self.low.facts.get(&key)?.row.clone())
    }

    /// Output `j` has shape `row`.
    pub fn set_row(&mut self, j: usize, row: RowTerm) {
        let Some(out) = self.out_row(j) else { return };
        let cause = self.cause(&format!("output {j}"), "the operator's output shape");
        self.low.solver.add(Constraint::RowEq(out, row, cause));
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
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        if let Some(f) = self.low.facts.get_mut(&key) {
            f.dtype = Some(t);
        }
    }

    /// Output `j` is of kind `k` (a sequence, an optional, ...).
    pub fn set_kind(&mut self, j: usize, k: ValueKind) {
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        if let Some(f) = self.low.facts.get_mut(&key) {
            f.kind = k;
        }
    }

    /// Output `j` holds the sequence items `items` (length known).
    pub fn set_items(&mut self, j: usize, items: Vec<Facts>) {
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        if let Some(f) = self.low.facts.get_mut(&key) {
            f.items = Some(items);
        }
    }

    /// Output `j` of an optional kind is known present or absent.
    pub fn set_present(&mut self, j: usize, present: bool) {
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        if let Some(f) = self.low.facts.get_mut(&key) {
            f.present = Some(present);
        }
    }

    /// Output `j` has known elements: sets its shape and type from them too.
    /// Elements are kept only where shape questions may need them: integer
    /// and bool tensors up to 2^20 elements, float and string ones up to
    /// [`MAX_FLOAT_ELEMS`] (scales and ranges are small; a weight filled by
    /// `ConstantOfShape` is not worth its memory).
    pub fn set_value(&mut self, j: usize, v: ConstValue) {
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        let dims = v.shape.iter().map(|&n| self.known(n as u64)).collect();
        self.set_dims(j, dims);
        self.set_dtype(j, v.dtype);
        let cap = match v.data {
            super::facts::ConstData::Ints(_) | super::facts::ConstData::Bools(_) => 1 << 20,
            super::facts::ConstData::Floats(_) | super::facts::ConstData::Strings(_) => MAX_FLOAT_ELEMS,
        };
        if v.len() > cap {
            return;
        }
        if let Some(f) = self.low.facts.get_mut(&key) {
            f.value = Some(Arc::new(v));
        }
    }

    /// Output `j` is exactly `f` (kind, shape, type, elements, items): for
    /// pass-through operators and subgraph results.
    pub fn set_facts(&mut self, j: usize, f: Facts) {
        let Some(key) = self.outputs.get(j).copied().flatten() else { return };
        self.set_row(j, f.row.clone());
        if let Some(out) = self.low.facts.get_mut(&key) {
            out.kind = f.kind;
            out.dtype = f.dtype.or(out.dtype);
            out.value = f.value;
            out.items = f.items;
            out.present = f.present;
        }
    }

    /// Output `j` is unknown: nothing the operator states determines it.
    pub fn set_unknown(&mut self, j: usize) {
        if j < self.touched.len() {
            self.touched[j] = true;
            self.low.make_unknown(self.inst, self.node, j);
        }
    }

    /// Output `j`'s element type, if already set.
    pub fn out_dtype(&self, j: usize) -> Option<ElemType> {
        let key = (*self.outputs.get(j)?)?;
        self.low.facts.get(&key)?.dtype
    }

    // ---- terms and constraints ----

    /// The dimension of a size a rule computes (`1` is the claim-free unit:
    /// only sizes the file states are claims, even under `--strict-units`).
    pub fn known(&self, n: u64) -> DimTerm {
        DimTerm::Dim(size_dim(n, false))
    }

    /// A fresh dimension variable for a size the constraints will determine.
    pub fn fresh_dim(&mut self) -> DimTerm {
        DimTerm::Var(self.low.solver.fresh_dim(None))
    }

    /// A fresh dimension for a size nothing determines (data-dependent):
    /// closing leaves it unknown.
    pub fn unknown_dim(&mut self) -> DimTerm {
        DimTerm::Var(self.low.solver.fresh_opaque_dim())
    }

    /// A fresh row for a shape nothing determines.
    pub fn unknown_row(&mut self) -> RowTerm {
        RowTerm { leading: Vec::new(), var: Some(self.low.solver.fresh_opaque_row()), trailing: Vec::new() }
    }

    /// A fresh row variable (a shape the constraints will determine).
    pub fn fresh_row(&mut self) -> RowTerm {
        RowTerm { leading: Vec::new(), var: Some(self.low.solver.fresh_row(None)), trailing: Vec::new() }
    }

    /// `row` as far as known now (e.g. a subgraph output's row).
    pub fn resolve_row(&mut self, row: &RowTerm) -> RowTerm {
        self.low.solver.resolve_row(row)
    }

    /// `d` as far as known now.
    pub fn resolve(&mut self, d: &DimTerm) -> DimTerm {
        self.low.solver.resolve_dim(d)
    }

    /// The known size of `d`, if it is a number.
    pub fn size_of(&mut self, d: &DimTerm) -> Option<u64> {
        match self.resolve(d) {
            DimTerm::Dim(Dim { size: Size::Known(n), .. }) => Some(n),
            _ => None,
        }
    }

    /// The dimension an integer element names (a negative or unknown one gives an unknown dimension).
    pub fn dim_of_elem(&mut self, e: &Elem) -> DimTerm {
        match e {
            Elem::Int(n) if *n >= 0 => self.known(*n as u64),
            Elem::Expr(x) => match expr_dim(x.clone()) {
                Some(d) => DimTerm::Dim(d),
                None => self.unknown_dim(),
            },
            Elem::Var(v) => self.resolve(&DimTerm::Var(*v)),
            _ => self.unknown_dim(),
        }
    }

    /// The integer element a dimension's size is.
    pub fn elem_of_dim(&mut self, d: &DimTerm) -> Elem {
        match self.resolve(d) {
            DimTerm::Dim(Dim { size: Size::Known(n), .. }) => Elem::Int(n as i64),
            DimTerm::Dim(Dim { size: Size::Symbolic(e), .. }) => Elem::from_expr(*e),
            DimTerm::Var(v) => Elem::Var(v),
        }
    }

    /// A root cause at this node: `operand` (`input 1`, `output 0`, `attribute perm`) and what the rule requires.
    pub fn cause(&mut self, operand: &str, rule: impl Into<Rule>) -> CauseId {
        let origin = Origin::Operand { site: self.site.clone(), operand: self.low.shared_operand(operand) };
        self.low.solver.cause(origin, rule)
    }

    /// Adds a constraint.
    pub fn constrain(&mut self, c: Constraint) {
        self.low.solver.add(c);
    }

    /// `a = b` on dimensions, because of `operand`: `why`.
    pub fn eq_dims(&mut self, a: DimTerm, b: DimTerm, operand: &str, why: impl Into<Rule>) {
        let cause = self.cause(operand, why);
        self.low.solver.add(Constraint::DimEq(a, b, cause));
    }

    /// `a = b` on dimensions where one of them is axis `axis` of `operand`:
    /// a conflict then names that axis.
    pub fn eq_dims_at(&mut self, a: DimTerm, b: DimTerm, operand: &str, axis: usize, why: impl Into<Rule>) {
        let root = self.cause(operand, why);
        let cause = self.low.solver.axis_cause(root, axis);
        self.low.solver.add(Constraint::DimEq(a, b, cause));
    }

    /// `a ⊑ b` on dimensions (`a` broadcasts to `b`) where `a` is axis
    /// `axis` of `operand`: a conflict then names that axis.
    pub fn le_dims_at(&mut self, a: DimTerm, b: DimTerm, operand: &str, axis: usize, why: impl Into<Rule>) {
        let root = self.cause(operand, why);
        let cause = self.low.solver.axis_cause(root, axis);
        self.low.solver.add(Constraint::DimLe(a, b, cause));
    }

    /// `a = b` on rows, because of `operand`: `why`.
    pub fn eq_rows(&mut self, a: RowTerm, b: RowTerm, operand: &str, why: impl Into<Rule>) {
        let cause = self.cause(operand, why);
        self.low.solver.add(Constraint::RowEq(a, b, cause));
    }

    /// Multidirectional (NumPy) broadcasting: every given input among
    /// `inputs` broadcasts to output `out`, whose shape is their join.
    pub fn broadcast(&mut self, inputs: &[usize], out: usize) {
        let Some(out_row) = self.out_row(out) else { return };
        let rows: Vec<(String, RowTerm)> =
            inputs.iter().filter_map(|&i| Some((format!("input {i}"), self.in_row(i)?))).collect();
        self.broadcast_into(out_row, rows, "broadcasts to the output");
    }

    /// NumPy broadcasting of `rows` (each with the operand it comes from) into
    /// `target`, their join: each row broadcasts to it (`RowLe`). When every
    /// row's rank is already known, the target's rank is stated at once (the
    /// largest), so later rules see a closed row before closing.
    pub fn broadcast_into(&mut self, target: RowTerm, rows: Vec<(String, RowTerm)>, why: &'static str) {
        let resolved: Option<Vec<RowTerm>> = rows
            .iter()
            .map(|(_, r)| {
                let r = self.low.solver.resolve_row(r);
                r.var.is_none().then_some(r)
            })
            .collect();
        if let Some(resolved) = resolved {
            let rank = resolved.iter().map(RowTerm::flank_len).max().unwrap_or(0);
            // NumPy's rule: an axis where every operand has 1 (or no axis) is 1.
            // The order alone would leave it free until closing, and rules that
            // read it before (a Reshape's -1, an Expand) would see an unknown.
            let all_units = |k: usize| {
                resolved.iter().all(|r| {
                    let dims: Vec<&DimTerm> = r.leading.iter().chain(&r.trailing).collect();
                    let offset = rank - dims.len();
                    k < offset || matches!(dims[k - offset], DimTerm::Dim(d) if d.is_unit())
                })
            };
            let dims = (0..rank)
                .map(|k| if all_units(k) { DimTerm::Dim(diamond_ir::term::Dim::unit()) } else { self.fresh_dim() })
                .collect();
            let cause = self.cause("output", "has the largest rank of the broadcast operands");
            self.low.solver.add(Constraint::RowEq(target.clone(), RowTerm::closed(dims), cause));
        }
        for (operand, row) in rows {
            let cause = self.cause(&operand, why);
            self.low.solver.add(Constraint::RowLe(row, target.clone(), cause));
        }
    }

    /// Unidirectional broadcasting: input `i` broadcasts to the row `to`.
    pub fn broadcasts_to(&mut self, i: usize, to: RowTerm, why: impl Into<Rule>) {
        let Some(key) = self.inputs.get(i).copied().flatten() else { return };
        let row = self.low.facts[&key].row.clone();
        let cause = self.cause(&format!("input {i}"), why);
        self.low.solver.add(Constraint::RowLe(row, to, cause));
    }

    /// Input `i`'s own (unresolved) row term, to relate it in constraints.
    pub fn in_row(&self, i: usize) -> Option<RowTerm> {
        let key = (*self.inputs.get(i)?)?;
        Some(self.low.facts.get(&key)?.row.clone())
    }

    // ---- diagnostics ----

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
        self.low.solver.report_fact_assuming(code, crate::diagnostic::shorten(message), cause, Vec::new(), assumes);
    }

    /// An `invalid-attribute` error at this node; the message is prefixed with the node.
    pub fn invalid(&mut self, message: impl AsRef<str>) {
        let m = format!("{}: {}", self.label, message.as_ref());
        self.report(Code::InvalidAttribute, m);
    }

    /// A conflict about input `i`'s shape — its rank, or axis `axis` of it —
    /// reported with `code` at that operand (never as `invalid-attribute`:
    /// the offending thing is an input tensor); the message is prefixed
    /// with the node.
    pub fn input_conflict(&mut self, code: Code, i: usize, axis: Option<usize>, message: impl AsRef<str>) {
        let m = crate::diagnostic::shorten(format!("{}: {}", self.label, message.as_ref()));
        let root = self.cause(&format!("input {i}"), "operator rule");
        let cause = match axis {
            Some(a) => self.low.solver.axis_cause(root, a),
            None => root,
        };
        self.low.solver.report_fact(code, m, cause, Vec::new());
    }

    /// A `rank-conflict` error: input `i` has a rank the operator does not take.
    pub fn rank_conflict(&mut self, i: usize, message: impl AsRef<str>) {
        self.input_conflict(Code::RankConflict, i, None, message);
    }

    /// A `dtype-mismatch` error at this node.
    pub fn dtype_mismatch(&mut self, message: impl AsRef<str>) {
        let m = format!("{}: {}", self.label, message.as_ref());
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

    // ---- subgraphs ----

    /// Lowers the graph `g` (held by attribute `attr`) as a subgraph of
    /// this node, with `inputs[i]` the facts of its i-th formal input (an
    /// unknown when `None` and the graph declares nothing). Returns the
    /// facts of its outputs.
    pub fn lower_subgraph(&mut self, attr: &str, g: GraphId, inputs: Vec<Option<Facts>>) -> Vec<Facts> {
        let prefix = self.low.subgraph_prefix(self.inst, self.node, self.nid, attr);
        let instance = Instance {
            graph: g,
            parent: Some(self.inst),
            prefix,
            call: self.low.instances[self.inst as usize].call,
            opsets: self.low.instances[self.inst as usize].opsets,
            reported: self.low.instances[self.inst as usize].reported,
            depth: self.low.instances[self.inst as usize].depth + 1,
        };
        self.low.lower_instance(instance, inputs)
    }

    /// Like [`OpCtx::lower_subgraph`], but the instance's values stay out of
    /// the report: for a body lowered more than once (unrolled iterations,
    /// fixpoint rounds, one lowering per sequence element).
    pub fn lower_subgraph_unreported(&mut self, attr: &str, g: GraphId, inputs: Vec<Option<Facts>>) -> Vec<Facts> {
        let prefix = self.low.subgraph_prefix(self.inst, self.node, self.nid, attr);
        let instance = Instance {
            graph: g,
            parent: Some(self.inst),
            prefix,
            call: self.low.instances[self.inst as usize].call,
            opsets: self.low.instances[self.inst as usize].opsets,
            reported: false,
            depth: self.low.instances[self.inst as usize].depth + 1,
        };
        self.low.lower_instance(instance, inputs)
    }

    /// The number of formal inputs and outputs of graph `g`.
    pub fn graph_arity(&self, g: GraphId) -> (usize, usize) {
        let graph = &self.low.model.graphs[g];
        (graph.inputs.len(), graph.outputs.len())
    }
}
