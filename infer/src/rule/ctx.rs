//! [`OpCtx`]: what an operator rule sees of its node — the node, its
//! inputs, its attributes — and [`Defer`], what a rule returns while an
//! input fact it needs is not known yet. The rest of `OpCtx` is in the
//! sibling files: stating outputs (`outputs.rs`), terms and constraints
//! (`terms.rs`), diagnostics (`diagnostics.rs`), subgraphs (`subgraph.rs`)
//! and index bounds (`bounds.rs`).
//!
//! Inputs are read as resolved solver rows (so a rule sees every fact the
//! nodes before it established), element types and known elements.
//! Outputs are stated as constraints on the output rows, each with a cause
//! naming the node and operand. An output a rule leaves untouched becomes an
//! unknown that closing never fills in.

use super::facts::{ConstData, ConstValue, Elem, Facts, ValueKind};
use super::host::{Host, NodeAt};
use super::state::LoweringState;
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::{AttrValue, Attribute, ElemType, GraphId, Node, Tensor};
use std::sync::Arc;

/// The rule lacks a fact it needs (usually an input's rank): try again later.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defer;

/// A rule's view of one node. See the module documentation.
pub struct OpCtx<'l, 'm> {
    /// The lowering's state, lent for the node.
    pub(super) st: &'l mut LoweringState<'m>,
    /// The lowering, for what the state does not hold.
    pub(super) host: &'l mut dyn Host<'m>,
    pub(super) at: NodeAt<'m>,
    /// Which outputs the rule has stated something about.
    pub(super) touched: Vec<bool>,
    version: i64,
}

impl<'l, 'm> OpCtx<'l, 'm> {
    pub(crate) fn new(
        st: &'l mut LoweringState<'m>,
        host: &'l mut dyn Host<'m>,
        at: NodeAt<'m>,
        version: i64,
    ) -> OpCtx<'l, 'm> {
        let touched = vec![false; at.outputs.len()];
        OpCtx { st, host, at, touched, version }
    }

    /// Marks untouched outputs unknown. Called by the lowering after the rule.
    pub(crate) fn finish(self) {
        for (j, touched) in self.touched.iter().enumerate() {
            if !touched {
                self.host.make_unknown(self.st, self.at.inst, self.at.node, j);
            }
        }
        self.st.carry_index_bound(&self.at.inputs, &self.at.outputs, self.at.node);
    }

    // ---- the node ----

    /// The opset version of the node's domain.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// The node.
    pub fn node(&self) -> &'m Node {
        self.at.node
    }

    /// The operator type.
    pub fn op(&self) -> &'m str {
        self.at.node.op_type()
    }

    /// `Add 'fc1' (node 3)`.
    pub fn label(&self) -> &str {
        self.at.label.get_or_init(|| self.at.site.to_string())
    }

    /// Whether `--strict-units` is on (stated 1s are claims).
    pub fn strict_units(&self) -> bool {
        self.st.strict_units
    }

    // ---- inputs ----

    /// Number of inputs the node lists (omitted optional ones included).
    pub fn input_count(&self) -> usize {
        self.at.inputs.len()
    }

    /// Whether input `i` is given (listed and not the empty name).
    pub fn has_input(&self, i: usize) -> bool {
        matches!(self.at.inputs.get(i), Some(Some(_)))
    }

    /// Everything known about input `i`, its row resolved.
    pub fn facts(&mut self, i: usize) -> Option<Facts> {
        let key = (*self.at.inputs.get(i)?)?;
        let value = self.value(i);
        let mut f = self.st.facts.get(&key)?.clone();
        f.row = self.st.solver.resolve_row(&f.row);
        f.value = value;
        Some(f)
    }

    /// The kind of input `i`.
    pub fn kind(&self, i: usize) -> Option<ValueKind> {
        let key = (*self.at.inputs.get(i)?)?;
        Some(self.st.facts.get(&key)?.kind.clone())
    }

    /// Input `i`'s shape (for a sequence: its elements' shape), resolved.
    pub fn row(&mut self, i: usize) -> Option<RowTerm> {
        let key = (*self.at.inputs.get(i)?)?;
        let row = self.st.facts.get(&key)?.row.clone();
        Some(self.st.solver.resolve_row(&row))
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
        let key = (*self.at.inputs.get(i)?)?;
        self.st.facts.get(&key)?.dtype
    }

    /// Input `i`'s elements, when known; integer elements that were axis
    /// sizes not yet known are resolved against what is known now.
    pub fn value(&mut self, i: usize) -> Option<Arc<ConstValue>> {
        let key = (*self.at.inputs.get(i)?)?;
        let value = self.st.value(key)?;
        let has_var = value.int_elems().is_some_and(|e| e.iter().any(|x| matches!(x, Elem::Var(_))));
        if !has_var {
            return Some(value);
        }
        let mut v = (*value).clone();
        if let ConstData::Ints(elems) = &mut v.data {
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
        attribute(&*self.host, self.at.inst, self.at.node, name)
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
}

/// The attribute `name` of `node` in instance `inst`, following a function
/// body's references to its caller's attributes (and the function's
/// defaults); the host is asked only when there is a reference.
fn attribute<'m>(host: &dyn Host<'m>, inst: u32, node: &'m Node, name: &str) -> Option<&'m Attribute> {
    let attr = node.attribute(name)?;
    let Some(reference) = attr.ref_attr_name.as_deref() else { return Some(attr) };
    let (caller_inst, caller, function) = host.call(inst)?;
    match attribute(host, caller_inst, caller, reference) {
        Some(a) => Some(a),
        None => function.attribute_protos.iter().find(|a| a.name() == reference),
    }
}
