//! Edits of a graph that the passes share: rewiring readers, dropping
//! nodes, and constants written as initializers.

use bytes::Bytes;
use diamond_infer::graph::{ConstData, ConstValue};
use diamond_ir::entity::Arena;
use diamond_ir::{ElemType, Graph, NodeId, Tensor, TensorData, ValueId};
use std::collections::HashSet;

/// Makes every main-graph node that reads `from` read `to` instead.
pub fn replace_uses(graph: &mut Graph, from: ValueId, to: ValueId) {
    for node in graph.nodes.values_mut() {
        for input in &mut node.inputs {
            if *input == from {
                *input = to;
            }
        }
    }
}

/// Drops the nodes in `dead`, keeping the others in order.
pub fn remove_nodes(graph: &mut Graph, dead: &HashSet<NodeId>) {
    if dead.is_empty() {
        return;
    }
    let old = std::mem::take(&mut graph.nodes);
    let mut nodes = Arena::new();
    for (id, node) in old.iter() {
        if !dead.contains(&id) {
            nodes.push(node.clone());
        }
    }
    graph.nodes = nodes;
}

/// `value` as an initializer named `name`, when its elements are all known
/// numbers (integers, booleans, floats) of an element type it can be stored as.
pub fn constant_tensor(name: &str, value: &ConstValue) -> Option<Tensor> {
    let mut raw: Vec<u8> = Vec::new();
    match (&value.data, value.dtype) {
        (ConstData::Ints(elems), t) => {
            let ints: Vec<i64> = elems.iter().map(|e| e.as_int()).collect::<Option<_>>()?;
            for n in ints {
                match t {
                    ElemType::Int64 => raw.extend_from_slice(&n.to_le_bytes()),
                    ElemType::Int32 => raw.extend_from_slice(&i32::try_from(n).ok()?.to_le_bytes()),
                    ElemType::Int16 => raw.extend_from_slice(&i16::try_from(n).ok()?.to_le_bytes()),
                    ElemType::Int8 => raw.extend_from_slice(&i8::try_from(n).ok()?.to_le_bytes()),
                    ElemType::Uint8 => raw.push(u8::try_from(n).ok()?),
                    ElemType::Uint16 => raw.extend_from_slice(&u16::try_from(n).ok()?.to_le_bytes()),
                    ElemType::Uint32 => raw.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes()),
                    ElemType::Uint64 => raw.extend_from_slice(&u64::try_from(n).ok()?.to_le_bytes()),
                    _ => return None,
                }
            }
        }
        (ConstData::Bools(bs), ElemType::Bool) => raw.extend(bs.iter().map(|&b| b as u8)),
        (ConstData::Floats(fs), ElemType::Float) => {
            for &f in fs {
                raw.extend_from_slice(&(f as f32).to_le_bytes());
            }
        }
        (ConstData::Floats(fs), ElemType::Double) => {
            for &f in fs {
                raw.extend_from_slice(&f.to_le_bytes());
            }
        }
        _ => return None,
    }
    Some(Tensor {
        name: Some(name.to_string()),
        dims: value.shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(value.dtype),
        data: TensorData { raw: Some(Bytes::from(raw)), ..TensorData::default() },
        ..Tensor::default()
    })
}

/// A float32 initializer named `name` of shape `dims` from `values`.
pub fn float_tensor(name: &str, dims: &[usize], values: &[f64]) -> Tensor {
    let mut raw = Vec::with_capacity(values.len() * 4);
    for &v in values {
        raw.extend_from_slice(&(v as f32).to_le_bytes());
    }
    Tensor {
        name: Some(name.to_string()),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(ElemType::Float),
        data: TensorData { raw: Some(Bytes::from(raw)), ..TensorData::default() },
        ..Tensor::default()
    }
}

/// Adds `tensor` as an initializer of `graph`; before IR 4
/// (`listed_as_inputs`) every initializer is also listed as a graph input.
pub fn add_initializer(graph: &mut Graph, tensor: Tensor, listed_as_inputs: bool) {
    let id = graph.intern(tensor.name.as_deref().unwrap_or(""));
    if listed_as_inputs {
        use diamond_ir::{DimDecl, DimValue, TensorShape, TypeInfo, TypeValue, ValueInfo};
        let dims = tensor.dims.iter().map(|&d| DimDecl { value: Some(DimValue::Known(d)), denotation: None }).collect();
        let ty = TypeInfo {
            value: Some(TypeValue::Tensor { elem: tensor.data_type, shape: Some(TensorShape { dims }) }),
            denotation: None,
        };
        graph.inputs.push(ValueInfo { value: Some(id), ty: Some(ty), ..ValueInfo::default() });
    }
    graph.initializers.push(tensor);
}
