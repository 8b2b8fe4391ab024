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
        (ConstData::Floats(fs), ElemType::Float16) => {
            for &f in fs {
                raw.extend_from_slice(&half::f16::from_f64(f).to_le_bytes());
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

/// Replaces node `at` by `replacement`, in its place (the file's node order stays topological).
pub fn splice_nodes(graph: &mut Graph, at: NodeId, replacement: Vec<diamond_ir::Node>) {
    let old = std::mem::take(&mut graph.nodes);
    let mut nodes = Arena::new();
    let mut replacement = Some(replacement);
    for (id, node) in old.iter() {
        if id == at {
            for n in replacement.take().into_iter().flatten() {
                nodes.push(n);
            }
        } else {
            nodes.push(node.clone());
        }
    }
    graph.nodes = nodes;
}

/// Rebuilds `graph`'s node list in order: a node in `dead` is dropped, one
/// in `replacements` becomes its list of nodes (itself among them if it
/// stays), the rest are kept.
pub fn replace_nodes(
    graph: &mut Graph,
    dead: &HashSet<NodeId>,
    mut replacements: std::collections::HashMap<NodeId, Vec<diamond_ir::Node>>,
) {
    let old = std::mem::take(&mut graph.nodes);
    for (id, n) in old.iter() {
        if dead.contains(&id) {
            continue;
        }
        match replacements.remove(&id) {
            Some(nodes) => nodes.into_iter().for_each(|n| {
                graph.nodes.push(n);
            }),
            None => {
                graph.nodes.push(n.clone());
            }
        }
    }
}

/// A default-domain node.
pub fn node(
    op: &str,
    name: &str,
    inputs: Vec<ValueId>,
    outputs: Vec<ValueId>,
    attributes: Vec<diamond_ir::Attribute>,
) -> diamond_ir::Node {
    diamond_ir::Node {
        name: Some(name.to_string()),
        op_type: Some(op.to_string()),
        inputs,
        outputs,
        attributes,
        ..diamond_ir::Node::default()
    }
}

/// An `int` attribute.
pub fn int_attr(name: &str, value: i64) -> diamond_ir::Attribute {
    diamond_ir::Attribute {
        name: Some(name.to_string()),
        attr_type: Some(diamond_ir::AttrType::Int),
        i: Some(value),
        ..diamond_ir::Attribute::default()
    }
}

/// An `ints` attribute.
pub fn ints_attr(name: &str, values: &[i64]) -> diamond_ir::Attribute {
    diamond_ir::Attribute {
        name: Some(name.to_string()),
        attr_type: Some(diamond_ir::AttrType::Ints),
        ints: values.to_vec(),
        ..diamond_ir::Attribute::default()
    }
}

/// A `float` attribute.
pub fn float_attr(name: &str, value: f32) -> diamond_ir::Attribute {
    diamond_ir::Attribute {
        name: Some(name.to_string()),
        attr_type: Some(diamond_ir::AttrType::Float),
        f: Some(value),
        ..diamond_ir::Attribute::default()
    }
}

/// A `string` attribute.
pub fn string_attr(name: &str, value: &str) -> diamond_ir::Attribute {
    diamond_ir::Attribute {
        name: Some(name.to_string()),
        attr_type: Some(diamond_ir::AttrType::String),
        s: Some(Bytes::from(value.to_string())),
        ..diamond_ir::Attribute::default()
    }
}

/// An int64 vector initializer.
pub fn int64_vector(name: &str, values: &[i64]) -> Tensor {
    Tensor {
        name: Some(name.to_string()),
        dims: vec![values.len() as i64],
        data_type: Some(ElemType::Int64),
        data: TensorData {
            raw: Some(Bytes::from(values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())),
            ..TensorData::default()
        },
        ..Tensor::default()
    }
}

/// A scalar initializer holding `value` as `dtype`: floats (rounded to the
/// type), integers that are whole and in range, booleans 0/1.
pub fn scalar_tensor(name: &str, dtype: ElemType, value: f64) -> Option<Tensor> {
    let whole = |lo: f64, hi: f64| (value.fract() == 0.0 && (lo..=hi).contains(&value)).then_some(value);
    let raw: Vec<u8> = match dtype {
        ElemType::Float => (value as f32).to_le_bytes().to_vec(),
        ElemType::Double => value.to_le_bytes().to_vec(),
        ElemType::Float16 => half::f16::from_f64(value).to_le_bytes().to_vec(),
        ElemType::Bfloat16 => half::bf16::from_f64(value).to_le_bytes().to_vec(),
        ElemType::Int64 => (whole(-9.0e18, 9.0e18)? as i64).to_le_bytes().to_vec(),
        ElemType::Int32 => (whole(i32::MIN as f64, i32::MAX as f64)? as i32).to_le_bytes().to_vec(),
        ElemType::Int16 => (whole(i16::MIN as f64, i16::MAX as f64)? as i16).to_le_bytes().to_vec(),
        ElemType::Int8 => (whole(i8::MIN as f64, i8::MAX as f64)? as i8).to_le_bytes().to_vec(),
        ElemType::Uint64 => (whole(0.0, 1.8e19)? as u64).to_le_bytes().to_vec(),
        ElemType::Uint32 => (whole(0.0, u32::MAX as f64)? as u32).to_le_bytes().to_vec(),
        ElemType::Uint16 => (whole(0.0, u16::MAX as f64)? as u16).to_le_bytes().to_vec(),
        ElemType::Uint8 => vec![whole(0.0, u8::MAX as f64)? as u8],
        ElemType::Bool if value == 0.0 || value == 1.0 => vec![value as u8],
        _ => return None,
    };
    Some(Tensor {
        name: Some(name.to_string()),
        dims: Vec::new(),
        data_type: Some(dtype),
        data: TensorData { raw: Some(Bytes::from(raw)), ..TensorData::default() },
        ..Tensor::default()
    })
}

/// `base`, or `base_2`, `base_3`, ...: a name no value of the graph has.
pub fn unique_name(graph: &Graph, base: &str) -> String {
    if graph.value_named(base).is_none() {
        return base.to_string();
    }
    (2..).map(|i| format!("{base}_{i}")).find(|n| graph.value_named(n).is_none()).expect("a free name")
}

/// Puts the main graph's nodes in an order where every producer comes
/// before its readers (names that a node's subgraphs read from the main
/// graph included), keeping the current order wherever it already is one.
/// Passes rewire readers freely (a merged duplicate may sit after some of
/// the readers it inherits); this restores the order ONNX requires. On a
/// cycle the graph is left as it is and `false` returned.
pub fn sort_topologically(model: &mut diamond_ir::Model) -> bool {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};
    let Some(main) = model.graph else { return true };
    let graph = &model.graphs[main];
    let ids: Vec<NodeId> = graph.nodes.iter().map(|(id, _)| id).collect();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, &id) in ids.iter().enumerate() {
        for &v in &graph.nodes[id].outputs {
            let name = graph.value_name(v);
            if !name.is_empty() {
                producer.insert(name, i);
            }
        }
    }
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    let mut waiting: Vec<usize> = vec![0; ids.len()];
    for (i, &id) in ids.iter().enumerate() {
        let node = &graph.nodes[id];
        let mut names: rustc_hash::FxHashSet<String> =
            node.inputs.iter().map(|&v| graph.value_name(v).to_string()).collect();
        for sub in node.subgraphs() {
            crate::analysis::collect_refs(model, sub, &mut names);
        }
        let deps: HashSet<usize> = names.iter().filter_map(|n| producer.get(n.as_str()).copied()).collect();
        for d in deps.into_iter().filter(|&d| d != i) {
            readers[d].push(i);
            waiting[i] += 1;
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..ids.len()).filter(|&i| waiting[i] == 0).map(Reverse).collect();
    let mut order = Vec::with_capacity(ids.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &r in &readers[i] {
            waiting[r] -= 1;
            if waiting[r] == 0 {
                ready.push(Reverse(r));
            }
        }
    }
    if order.len() != ids.len() {
        return false;
    }
    if order.iter().enumerate().all(|(k, &i)| k == i) {
        return true;
    }
    let old = std::mem::take(&mut model.graphs[main].nodes);
    let mut nodes = Arena::new();
    for i in order {
        nodes.push(old[ids[i]].clone());
    }
    model.graphs[main].nodes = nodes;
    true
}
