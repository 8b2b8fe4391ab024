//! `constants`: a `Constant` node becomes the initializer it stands for
//! (`value`, `value_float(s)`, `value_int(s)`), keeping its output's name,
//! so that every later pass sees one kind of constant and the node count
//! says what computes. A Constant whose output is a graph output stays.

use super::Pass;
use crate::rewrite::{add_initializer, remove_nodes};
use crate::Analysis;
use bytes::Bytes;
use diamond_ir::{AttrValue, ElemType, Model, Tensor, TensorData};
use std::collections::HashSet;

pub(crate) struct Constants;

impl Pass for Constants {
    fn name(&self) -> &'static str {
        "constants"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut moved = Vec::new();
        for (nid, n) in graph.nodes.iter() {
            if n.op_type() != "Constant" || !n.domain().is_empty() || n.outputs.len() != 1 || n.attributes.len() != 1 {
                continue;
            }
            let out = n.outputs[0];
            let name = graph.value_name(out);
            if name.is_empty() || a.outputs.contains(&out) {
                continue;
            }
            let Some(mut tensor) = constant_value(&n.attributes[0]) else { continue };
            tensor.name = Some(name.to_string());
            moved.push((nid, tensor));
        }
        let dead: HashSet<_> = moved.iter().map(|(n, _)| *n).collect();
        let graph = &mut model.graphs[a.main];
        remove_nodes(graph, &dead);
        for (_, t) in moved {
            add_initializer(graph, t, a.initializers_are_constants);
        }
        dead.len()
    }
}

/// The tensor a Constant's one attribute states.
fn constant_value(at: &diamond_ir::Attribute) -> Option<Tensor> {
    let raw = |t: ElemType, dims: Vec<i64>, bytes: Vec<u8>| Tensor {
        dims,
        data_type: Some(t),
        data: TensorData { raw: Some(Bytes::from(bytes)), ..TensorData::default() },
        ..Tensor::default()
    };
    match (at.name(), at.value()?) {
        ("value", AttrValue::Tensor(t)) if !t.is_external() => Some(t.clone()),
        ("value_float", AttrValue::Float(f)) => Some(raw(ElemType::Float, vec![], f.to_le_bytes().to_vec())),
        ("value_floats", AttrValue::Floats(v)) => {
            Some(raw(ElemType::Float, vec![v.len() as i64], v.iter().flat_map(|f| f.to_le_bytes()).collect()))
        }
        ("value_int", AttrValue::Int(i)) => Some(raw(ElemType::Int64, vec![], i.to_le_bytes().to_vec())),
        ("value_ints", AttrValue::Ints(v)) => {
            Some(raw(ElemType::Int64, vec![v.len() as i64], v.iter().flat_map(|i| i.to_le_bytes()).collect()))
        }
        _ => None,
    }
}
