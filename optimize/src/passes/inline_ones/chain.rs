//! The nodes a rewrite puts in place of the node it replaces, planned
//! against the unchanged graph: a [`Chain`] starts from one value the graph
//! has and adds one step at a time (a reduction, a pooling, a scale, an
//! Add, an Expand, ...), each reading the previous step's result; the last
//! step writes the replaced node's output. New values and initializers get
//! fresh names derived from the replaced node's name.
//!
//! Each step but an exact one rounds its result to the element type, where
//! the replaced node rounded once. A sum over rounded values (a ReduceSum,
//! AveragePool or Add after a rounding step) can cancel down to its rounding
//! error: in float16 and bfloat16 that error exceeds what the replaced node
//! is allowed to differ by, so such a chain is not made in those types.

use super::Rewrite;
use crate::rewrite::{int64_vector, int_attr, ints_attr, node, scalar_tensor, unique_name};
use diamond_ir::{Attribute, ElemType, Graph, Node, NodeId, Tensor, ValueId};

/// A value a planned node reads or writes: one the graph has, or a new one by name.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ref {
    Old(ValueId),
    New(String),
}

/// A node to add, its new values named until the graph interns them.
pub(crate) struct Planned {
    op: &'static str,
    name: String,
    inputs: Vec<Ref>,
    output: Ref,
    attributes: Vec<Attribute>,
}

impl Planned {
    /// The operator it runs.
    pub(crate) fn op(&self) -> &'static str {
        self.op
    }

    /// The node, its new values interned in `graph`.
    pub(crate) fn build(self, graph: &mut Graph) -> Node {
        let mut id = |r: Ref| match r {
            Ref::Old(v) => v,
            Ref::New(name) => graph.intern(&name),
        };
        let inputs = self.inputs.into_iter().map(&mut id).collect();
        let output = id(self.output);
        node(self.op, &self.name, inputs, vec![output], self.attributes)
    }
}

/// The first ONNX opset whose `op` takes its axes as an input, not an attribute.
fn axes_input_since(op: &str) -> i64 {
    if op == "ReduceSum" {
        13
    } else {
        18
    }
}

/// The replacement of one node, step by step.
pub(crate) struct Chain<'g> {
    graph: &'g Graph,
    base: String,
    taken: Vec<String>,
    current: Ref,
    /// Whether a step has rounded, and whether a sum has followed a rounding.
    rounded: bool,
    cancels: bool,
    planned: Vec<Planned>,
    tensors: Vec<Tensor>,
    opset: i64,
}

impl<'g> Chain<'g> {
    /// A chain starting from `input`, named after node `nid` (or its first output).
    pub(crate) fn new(graph: &'g Graph, nid: NodeId, input: ValueId, opset: i64) -> Chain<'g> {
        let n = &graph.nodes[nid];
        let base = if n.name().is_empty() {
            n.outputs.first().map_or("inlined".to_string(), |&o| graph.value_name(o).to_string())
        } else {
            n.name().to_string()
        };
        Chain {
            graph,
            base,
            taken: Vec::new(),
            current: Ref::Old(input),
            rounded: false,
            cancels: false,
            planned: Vec::new(),
            tensors: Vec::new(),
            opset,
        }
    }

    /// A name derived from the base that neither the graph nor this plan uses.
    fn fresh(&mut self, suffix: &str) -> String {
        self.free(&format!("{}_{suffix}", self.base))
    }

    /// `name`, or a variant of it, that neither the graph nor this plan uses.
    fn free(&mut self, name: &str) -> String {
        let mut name = unique_name(self.graph, name);
        while self.taken.contains(&name) {
            name.push('_');
        }
        self.taken.push(name.clone());
        name
    }

    /// `tensor` as a new initializer named after `suffix`; the value reading it.
    pub(crate) fn constant(&mut self, suffix: &str, tensor: Tensor) -> Ref {
        let name = self.fresh(suffix);
        self.store(name, tensor)
    }

    /// `tensor` as a new initializer named `name` (or a free variant of it).
    pub(crate) fn constant_as(&mut self, name: &str, tensor: Tensor) -> Ref {
        let name = self.free(name);
        self.store(name, tensor)
    }

    fn store(&mut self, name: String, mut tensor: Tensor) -> Ref {
        tensor.name = Some(name.clone());
        self.tensors.push(tensor);
        Ref::New(name)
    }

    /// A step: `op` over the current value (at `position` among `others`).
    pub(crate) fn step(
        &mut self,
        op: &'static str,
        suffix: &str,
        position: usize,
        others: Vec<Ref>,
        attributes: Vec<Attribute>,
    ) {
        let mut inputs = others;
        inputs.insert(position.min(inputs.len()), self.current.clone());
        let output = Ref::New(self.fresh(suffix));
        let name = format!("{}/{suffix}", self.base);
        self.planned.push(Planned { op, name, inputs, output: output.clone(), attributes });
        self.current = output;
        let sums = matches!(op, "ReduceSum" | "ReduceMean" | "AveragePool" | "Add" | "Sub");
        self.cancels |= sums && self.rounded;
        self.rounded |= sums || matches!(op, "Mul" | "Div");
    }

    /// A reduction of the current value over `axes` (an input from the
    /// opset that takes one, an attribute before); nothing for no axes.
    pub(crate) fn reduce(&mut self, op: &'static str, axes: &[i64], keepdims: bool) {
        if axes.is_empty() {
            return;
        }
        let mut attributes = vec![int_attr("keepdims", keepdims as i64)];
        let mut others = Vec::new();
        if self.opset >= axes_input_since(op) {
            others.push(self.constant("axes", int64_vector("", axes)));
        } else {
            attributes.push(ints_attr("axes", axes));
        }
        self.step(op, "sum", 0, others, attributes);
    }

    /// Times `c` (nothing for 1); `None` when `c` cannot be stored as `dtype`.
    pub(crate) fn scale(&mut self, dtype: ElemType, c: f64) -> Option<()> {
        if c == 1.0 {
            return Some(());
        }
        let factor = self.constant("scale", scalar_tensor("", dtype, c)?);
        let rounded = self.rounded;
        self.step("Mul", "scaled", 0, vec![factor], Vec::new());
        // A power of two scales exactly.
        if c.abs().log2().fract() == 0.0 {
            self.rounded = rounded;
        }
        Some(())
    }

    /// Broadcast to the int64 target `shape` (nothing when it is `None`).
    pub(crate) fn expand(&mut self, shape: Option<&[i64]>) {
        let Some(shape) = shape else { return };
        let target = self.constant("repeat", int64_vector("", shape));
        self.step("Expand", "repeated", 0, vec![target], Vec::new());
    }

    /// The plan writing `out` in place of node `replaced`, unless it has
    /// more nodes than the replaced node and the nodes it frees that would
    /// otherwise stay (`budget`): the count never grows.
    pub(crate) fn finish(
        mut self,
        model: &diamond_ir::Model,
        a: &crate::Analysis,
        replaced: NodeId,
        out: ValueId,
    ) -> Option<Rewrite> {
        let coarse = matches!(a.dtype(model, out), Some(ElemType::Float16 | ElemType::Bfloat16));
        if self.cancels && coarse {
            return None;
        }
        if self.planned.is_empty() {
            // The replaced node passes its input through: keep the output's name with an Identity.
            self.step("Identity", "same", 0, Vec::new(), Vec::new());
        }
        let reads: Vec<ValueId> = self
            .planned
            .iter()
            .flat_map(|p| p.inputs.iter())
            .filter_map(|r| match r {
                Ref::Old(v) => Some(*v),
                Ref::New(_) => None,
            })
            .collect();
        let inputs = self.graph.nodes[replaced].inputs.clone();
        let freed = super::budget::exclusive_producers(model, a, &inputs, &reads);
        let paid = super::budget::paying(model, a, &freed);
        if self.planned.len() > 1 + paid {
            return None;
        }
        self.planned.last_mut()?.output = Ref::Old(out);
        Some(Rewrite {
            replaced,
            nodes: self.planned,
            tensors: self.tensors,
            freed,
            paid,
            reads,
            alias: None,
            note: None,
        })
    }
}
