//! `reshape-targets`: a Reshape whose target is computed from shapes
//! (`Concat(Shape(x)[0], Shape(x)[1], 12, 64)`) gets a stored target when
//! value propagation knows every element as an integer or a symbolic size.
//! A symbolic element equal to the data's size on the same axis becomes `0`
//! (copy that axis); one other symbolic element becomes `-1` (whatever is
//! left); known integers stay. The shape scaffolding that computed the
//! target is then dead. This is the fold that onnx-simplifier and OnnxSlim
//! give up on once two dims are symbolic.
//!
//! Gates: opset 5 or later (a stored target); with `allowzero = 1` (where a
//! `0` is a zero size), a target with no literal 0, rewritten with
//! `allowzero = 0` (a symbolic size that is 0 at run time is copied as 0
//! either way); the data's shape is proven (every dim an integer or a
//! symbolic size); at most one element is left for `-1`, counting a `-1`
//! already in the target. Like every exporter's `-1`, the result cannot tell
//! sizes apart when another axis of the data is 0 at run time.

use super::Pass;
use crate::rewrite::{add_initializer, int64_vector, unique_name};
use crate::Analysis;
use diamond_infer::graph::{ConstData, DimReport, Elem};
use diamond_ir::{AttrValue, Model, NodeId};

pub(crate) struct ReshapeTargets;

impl Pass for ReshapeTargets {
    fn name(&self) -> &'static str {
        "reshape-targets"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 5 {
            return 0;
        }
        let graph = a.graph(model);
        let mut rewrites: Vec<(NodeId, Vec<i64>)> = Vec::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() != "Reshape" || !n.domain().is_empty() || n.inputs.len() != 2 {
                continue;
            }
            let target = n.inputs[1];
            // Already stored: nothing to fold.
            if a.initializers.contains_key(&target) || !a.producer.contains_key(&target) {
                continue;
            }
            if let Some(stored) = stored_target(model, a, n) {
                rewrites.push((nid, stored));
            }
        }
        let count = rewrites.len();
        for (nid, stored) in rewrites {
            let graph = &mut model.graphs[a.main];
            let base = format!("{}_target", graph.value_name(graph.nodes[nid].outputs[0]));
            let name = unique_name(graph, &base);
            let id = graph.intern(&name);
            add_initializer(graph, int64_vector(&name, &stored), a.initializers_are_constants);
            let node = &mut graph.nodes[nid];
            node.inputs[1] = id;
            node.attributes.retain(|at| at.name.as_deref() != Some("allowzero"));
        }
        count
    }
}

/// The stored target for Reshape `n`, when every gate holds.
fn stored_target(model: &Model, a: &Analysis, n: &diamond_ir::Node) -> Option<Vec<i64>> {
    let data = a.shape(model, n.inputs[0])?;
    let known = a.constant(model, n.inputs[1])?;
    let ConstData::Ints(elems) = &known.data else { return None };
    if known.shape.len() != 1 {
        return None;
    }
    let mut stored = Vec::with_capacity(elems.len());
    let allowzero = matches!(n.attribute("allowzero").and_then(|z| z.value()), Some(AttrValue::Int(z)) if z != 0);
    if allowzero && elems.iter().any(|e| matches!(e, Elem::Int(0))) {
        return None;
    }
    let mut rest = elems.iter().filter(|e| matches!(e, Elem::Int(-1))).count();
    for (axis, e) in elems.iter().enumerate() {
        match e {
            Elem::Int(k) => stored.push(*k),
            Elem::Expr(expr) => {
                let text = expr.to_string();
                if matches!(data.get(axis), Some(DimReport::Symbolic(d)) if *d == text) {
                    stored.push(0);
                } else {
                    rest += 1;
                    stored.push(-1);
                }
            }
            Elem::Var(_) | Elem::Unknown => return None,
        }
    }
    (rest <= 1).then_some(stored)
}
