//! The reference kernels, one file per operator family (as `infer/src/ops/`),
//! and what they share: the node context (operands, attributes, errors),
//! axis normalization and NumPy broadcasting.

mod attention;
mod control;
mod elementwise;
mod misc;
mod ml;
pub(crate) mod nn;
mod random;
pub(crate) mod reduce_linalg;
pub(crate) mod resize;
pub(crate) mod rnn;
pub(crate) mod shape_ops;

use crate::error::{Result, RunError};
use crate::exec::{execute, node_label, Frame};
use crate::tensor::{shape_len, strides, Tensor, Value};
use diamond_ir::{AttrValue, Attribute, Graph, GraphId, Model, Node};
use std::cell::Cell;

/// The most elements one tensor may hold (2^30): kernels compute in `f64`,
/// so this bounds a single buffer at 8 GiB.
pub const MAX_ELEMENTS: usize = 1 << 30;

/// A kernel's results, one per node output (`None`: an optional output
/// left uncomputed).
pub type Outs = Vec<Option<Value>>;

/// One output.
pub(crate) fn one(t: Tensor) -> Result<Outs> {
    Ok(vec![Some(Value::Tensor(t))])
}

/// Everything a kernel sees of the node it runs.
pub struct NodeCtx<'a> {
    /// The model (for subgraphs).
    pub model: &'a Model,
    /// The graph holding the node.
    pub graph: &'a Graph,
    /// The node.
    pub node: &'a Node,
    /// The running graph's values (for subgraphs reading enclosing names).
    pub frame: &'a Frame<'a>,
    /// The operands; `None` for an omitted optional one.
    pub inputs: Vec<Option<&'a Value>>,
    /// The opset version of the node's domain.
    pub opset: i64,
    /// The largest peak of live bytes a subgraph run reached.
    pub inner_peak: Cell<u64>,
}

impl<'a> NodeCtx<'a> {
    /// The context of `node` with its operands.
    pub fn new(
        model: &'a Model,
        graph: &'a Graph,
        node: &'a Node,
        frame: &'a Frame<'a>,
        inputs: Vec<Option<&'a Value>>,
    ) -> NodeCtx<'a> {
        let default = if node.domain().is_empty() { 23 } else { 1 };
        let opset = model.opset_version(node.domain()).unwrap_or(default);
        NodeCtx { model, graph, node, frame, inputs, opset, inner_peak: Cell::new(0) }
    }

    /// The operator name.
    pub fn op(&self) -> &str {
        self.node.op_type()
    }

    /// An error in the node's operands or attributes.
    pub fn err(&self, problem: impl std::fmt::Display) -> RunError {
        RunError::Kernel {
            node: node_label(self.graph, self.node),
            op: self.op().to_string(),
            problem: problem.to_string(),
        }
    }

    /// A refusal: something this executor does not implement.
    pub fn unsupported(&self, reason: impl std::fmt::Display) -> RunError {
        RunError::Unsupported {
            node: node_label(self.graph, self.node),
            op: self.op().to_string(),
            reason: reason.to_string(),
        }
    }

    /// The number of operands written (omitted trailing ones not counted).
    pub fn n_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Operand `i` as any value, if present.
    pub fn value(&self, i: usize) -> Option<&'a Value> {
        self.inputs.get(i).copied().flatten()
    }

    /// Operand `i`, which must be present and a tensor.
    pub fn input(&self, i: usize) -> Result<&'a Tensor> {
        self.opt_input(i)?.ok_or_else(|| self.err(format!("operand {i} is required")))
    }

    /// Operand `i` if present; it must be a tensor.
    pub fn opt_input(&self, i: usize) -> Result<Option<&'a Tensor>> {
        match self.value(i) {
            None => Ok(None),
            Some(Value::Tensor(t)) => Ok(Some(t)),
            Some(other) => Err(self.err(format!("operand {i} is a {}, a tensor was expected", other.kind()))),
        }
    }

    /// Operand `i` as a list of integers (an axes/shape/sizes operand), if present.
    pub fn opt_ints(&self, i: usize) -> Result<Option<Vec<i64>>> {
        match self.opt_input(i)? {
            None => Ok(None),
            Some(t) => {
                if t.is_float() {
                    return Err(self.err(format!("operand {i} must be an integer tensor, not {}", t.elem())));
                }
                t.to_i64s().map(Some).ok_or_else(|| self.err(format!("operand {i} must be numeric")))
            }
        }
    }

    /// The attribute `name`, if set with a value. Inside a model-local
    /// function, a reference (`ref_attr_name`) resolves to the call's
    /// attribute or the function's default.
    pub fn attr(&self, name: &str) -> Option<AttrValue<'a>> {
        let a = self.node.attribute(name)?;
        match &a.ref_attr_name {
            Some(r) => self.frame.call_attrs?.get(r).and_then(Attribute::value),
            None => a.value(),
        }
    }

    /// An integer attribute.
    pub fn attr_i(&self, name: &str, default: i64) -> i64 {
        match self.attr(name) {
            Some(AttrValue::Int(i)) => i,
            _ => default,
        }
    }

    /// An integer attribute that may be missing.
    pub fn attr_opt_i(&self, name: &str) -> Option<i64> {
        match self.attr(name) {
            Some(AttrValue::Int(i)) => Some(i),
            _ => None,
        }
    }

    /// A float attribute.
    pub fn attr_f(&self, name: &str, default: f32) -> f32 {
        match self.attr(name) {
            Some(AttrValue::Float(f)) => f,
            _ => default,
        }
    }

    /// A float attribute that may be missing.
    pub fn attr_opt_f(&self, name: &str) -> Option<f32> {
        match self.attr(name) {
            Some(AttrValue::Float(f)) => Some(f),
            _ => None,
        }
    }

    /// An integer-list attribute.
    pub fn attr_ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.attr(name) {
            Some(AttrValue::Ints(v)) => Some(v.to_vec()),
            _ => None,
        }
    }

    /// A float-list attribute.
    pub fn attr_floats(&self, name: &str) -> Option<Vec<f32>> {
        match self.attr(name) {
            Some(AttrValue::Floats(v)) => Some(v.to_vec()),
            _ => None,
        }
    }

    /// A string attribute (lossy UTF-8).
    pub fn attr_s(&self, name: &str) -> Option<String> {
        match self.attr(name) {
            Some(AttrValue::String(s)) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    /// A string-list attribute.
    pub fn attr_strings(&self, name: &str) -> Option<Vec<Vec<u8>>> {
        match self.attr(name) {
            Some(AttrValue::Strings(v)) => Some(v.iter().map(|s| s.to_vec()).collect()),
            _ => None,
        }
    }

    /// A tensor attribute, decoded.
    pub fn attr_tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.attr(name) {
            Some(AttrValue::Tensor(t)) => {
                Tensor::from_ir(t).map(Some).map_err(|e| self.unsupported(format!("attribute '{name}': {e}")))
            }
            _ => Ok(None),
        }
    }

    /// A graph attribute.
    pub fn attr_graph(&self, name: &str) -> Option<GraphId> {
        match self.attr(name) {
            Some(AttrValue::Graph(g)) => Some(g),
            _ => None,
        }
    }

    /// Runs subgraph `gid` with `inputs` bound to its declared inputs in
    /// order; returns its outputs.
    pub fn run_subgraph(&self, gid: GraphId, inputs: Vec<Value>) -> Result<Vec<Value>> {
        let sub = &self.model.graphs[gid];
        if inputs.len() != sub.inputs.len() {
            return Err(self.err(format!("the subgraph declares {} inputs, {} given", sub.inputs.len(), inputs.len())));
        }
        let bound = sub.inputs.iter().zip(inputs).filter_map(|(info, v)| info.value.map(|id| (id, v))).collect();
        let run = execute(self.model, gid, Some(self.frame), bound, None)?;
        self.inner_peak.set(self.inner_peak.get().max(run.peak_bytes));
        Ok(run.outputs)
    }

    /// What `make` derives from this node's attributes, made once per frame
    /// (`crate::exec::Frame::prepared`: once per session for a SIMD
    /// session's nodes). `make` must read nothing but the attributes.
    pub fn prepared<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<std::sync::Arc<T>> {
        let key = self.node as *const Node as usize;
        let held = self.frame.prepared.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some(done) = held.and_then(|d| d.downcast::<T>().ok()) {
            return Ok(done);
        }
        let made = std::sync::Arc::new(make()?);
        if let Ok(mut m) = self.frame.prepared.lock() {
            m.insert(key, made.clone());
        }
        Ok(made)
    }

    /// Refuses attributes outside `known`: an attribute this executor does not
    /// read would change the result silently.
    pub fn only_attrs(&self, known: &[&str]) -> Result<()> {
        match self.node.attributes.iter().find(|a| !known.contains(&a.name())) {
            Some(a) => Err(self.unsupported(format!("attribute '{}'", a.name()))),
            None => Ok(()),
        }
    }

    /// The element count of an output of `shape`, refused past
    /// [`MAX_ELEMENTS`] (a bound checked before anything is allocated for a
    /// size the model's data asks for).
    pub fn check_size(&self, shape: &[usize]) -> Result<usize> {
        match shape_len(shape) {
            Some(n) if n <= MAX_ELEMENTS => Ok(n),
            _ => Err(self.unsupported(format!(
                "an output of shape {shape:?} exceeds the executor's limit of {MAX_ELEMENTS} elements"
            ))),
        }
    }

    /// Axis `axis` (negative counts from the end) of a rank-`rank` tensor.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        norm_axis(axis, rank).ok_or_else(|| self.err(format!("axis {axis} is out of range for rank {rank}")))
    }
}

/// Axis `axis` of rank `rank`, negative from the end; `None` out of range.
pub(crate) fn norm_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// The NumPy broadcast of `shapes`; `None` when two sizes clash.
pub(crate) fn broadcast_shape(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// For each element of `out` (C order), the linear index of the element of
/// a tensor of shape `input` it reads under broadcasting.
pub(crate) fn broadcast_index(out: &[usize], input: &[usize]) -> Vec<usize> {
    let n = shape_len(out).unwrap_or(0);
    let off = out.len() - input.len();
    let in_strides = strides(input);
    // stride per output axis; 0 where the input is broadcast
    let st: Vec<usize> =
        (0..out.len()).map(|a| if a < off || input[a - off] == 1 { 0 } else { in_strides[a - off] }).collect();
    let mut idx = Vec::with_capacity(n);
    let mut counter = vec![0usize; out.len()];
    let mut pos = 0usize;
    for _ in 0..n {
        idx.push(pos);
        for a in (0..out.len()).rev() {
            counter[a] += 1;
            pos += st[a];
            if counter[a] < out[a] {
                break;
            }
            pos -= st[a] * counter[a];
            counter[a] = 0;
        }
    }
    idx
}

/// Runs a call of a model-local function: its body with the operands bound
/// to its formal inputs (an omitted optional operand stays unbound) and the
/// call's attributes for the body's references. A body sees only its
/// parameters, never the caller's values.
fn call_function(ctx: &NodeCtx<'_>, f: &diamond_ir::Function) -> Result<Outs> {
    thread_local! {
        static DEPTH: Cell<usize> = const { Cell::new(0) };
    }
    /// Counts a call for as long as it runs.
    struct Nested;
    impl Drop for Nested {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
        }
    }
    if DEPTH.with(|d| d.get()) >= 64 {
        return Err(ctx.err("model-local functions nest more than 64 deep (a recursive function?)"));
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let _nested = Nested;
    let bound: Vec<(diamond_ir::ValueId, Value)> =
        f.inputs.iter().zip(&ctx.inputs).filter_map(|(&id, v)| v.map(|v| (id, v.clone()))).collect();
    let call = crate::exec::CallAttrs { call: &ctx.node.attributes, defaults: &f.attribute_protos };
    // the body's frame has no parent: functions see only their parameters
    let run = crate::exec::execute_with(ctx.model, f.body, None, bound, None, Some(call), &f.outputs)?;
    ctx.inner_peak.set(ctx.inner_peak.get().max(run.peak_bytes));
    Ok(run.outputs.into_iter().map(Some).collect())
}

/// The model-local function a node calls: the one of its (domain, op type,
/// overload), if the model defines it.
pub fn model_function<'m>(model: &'m Model, node: &Node) -> Option<&'m diamond_ir::Function> {
    model.functions.iter().find(|f| {
        f.name.as_deref() == Some(node.op_type())
            && f.domain.as_deref().unwrap_or("") == node.domain()
            && f.overload.as_deref().unwrap_or("") == node.rare().overload.as_deref().unwrap_or("")
    })
}

/// Runs the node.
pub fn run_node(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let domain = ctx.node.domain();
    if let Some(f) = model_function(ctx.model, ctx.node) {
        return call_function(ctx, f);
    }
    if domain == "ai.onnx.preview" && ctx.op() == "FlexAttention" {
        return attention::flex_attention(ctx);
    }
    if domain == "ai.onnx.ml" {
        return ml::dispatch(ctx).unwrap_or_else(|| Err(ctx.unsupported("operator not implemented (ai.onnx.ml)")));
    }
    if domain == "ai.onnx.preview.training" {
        return misc::training(ctx).unwrap_or_else(|| Err(ctx.unsupported("operator not implemented (training)")));
    }
    if domain == "com.microsoft" && ctx.op() == "DynamicQuantizeLSTM" {
        return rnn::quantized_lstm(ctx);
    }
    if !domain.is_empty() {
        return Err(ctx.unsupported(format!("domain '{domain}' is not supported")));
    }
    if let Some(result) = elementwise::dispatch(ctx) {
        return result;
    }
    if let Some(result) = shape_ops::dispatch(ctx) {
        return result;
    }
    if let Some(result) = reduce_linalg::dispatch(ctx) {
        return result;
    }
    if let Some(result) = nn::dispatch(ctx) {
        return result;
    }
    if let Some(result) = rnn::dispatch(ctx) {
        return result;
    }
    if let Some(result) = resize::dispatch(ctx) {
        return result;
    }
    if let Some(result) = misc::dispatch(ctx) {
        return result;
    }
    if let Some(result) = attention::dispatch(ctx) {
        return result;
    }
    if let Some(result) = control::dispatch(ctx) {
        return result;
    }
    if let Some(result) = random::dispatch(ctx) {
        return result;
    }
    Err(ctx.unsupported("operator not implemented"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_aligns_trailing_axes() {
        assert_eq!(broadcast_shape(&[&[2, 1, 3], &[4, 1]]), Some(vec![2, 4, 3]));
        assert_eq!(broadcast_shape(&[&[2], &[3]]), None);
        assert_eq!(broadcast_index(&[2, 3], &[3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(broadcast_index(&[2, 3], &[2, 1]), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(broadcast_index(&[], &[]), vec![0]);
        assert_eq!(norm_axis(-1, 3), Some(2));
        assert_eq!(norm_axis(3, 3), None);
    }
}
