//! `merge-parallel-matmuls`: several MatMuls of one input by stored
//! weights — the query, key and value projections of an attention layer —
//! become one MatMul by the weights side by side, then a Split of the
//! product's last axis: `x·W₁, x·W₂, x·W₃` is `Split(x·[W₁ W₂ W₃])`. When
//! every product is read only by an Add of its own stored bias over the
//! last axis, the biases are joined too and added once before the Split.
//!
//! Gates: opset 13 or later (Split's sizes are an input); `x` is float32
//! and on the left of each MatMul; each weight is a stored float32 matrix
//! `[K, Nᵢ]` with one `K`; the node count falls (three or more MatMuls, or
//! two with their bias Adds). The Split writes the original outputs, so
//! every reader, graph output and dim name is kept. The merged nodes take
//! the places of group members; the driver's final sort restores the
//! order.

use super::Pass;
use crate::rewrite::{add_initializer, float_tensor, int64_vector, int_attr, node, remove_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::{ElemType, Model, NodeId, Tensor, ValueId};
use std::collections::{HashMap, HashSet};

pub(crate) struct ParallelMatMuls;

/// One product of the group: the MatMul, its stored weight, and its bias Add.
/// Weights are read only for a group that merges.
struct Member {
    matmul: NodeId,
    weight: ValueId,
    width: usize,
    bias: Option<(NodeId, Vec<f64>)>,
}

impl Pass for ParallelMatMuls {
    fn name(&self) -> &'static str {
        "merge-parallel-matmuls"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 13 {
            return 0;
        }
        let graph = a.graph(model);
        // MatMuls by stored weights, grouped by their left operand and K, in node order.
        let mut index: HashMap<(ValueId, usize), usize> = HashMap::new();
        let mut groups: Vec<((ValueId, usize), Vec<Member>)> = Vec::new();
        for (id, n) in graph.nodes.iter() {
            if n.op_type() != "MatMul" || !n.domain().is_empty() || n.inputs.len() != 2 || n.outputs.len() != 1 {
                continue;
            }
            let x = n.inputs[0];
            if a.dtype(model, x) != Some(ElemType::Float) || a.rank(model, x).is_none_or(|r| r < 1) {
                continue;
            }
            let Some((k, width)) = matrix_shape(model, a, n.inputs[1]) else { continue };
            let weight = n.inputs[1];
            let bias = bias_add(model, a, n.outputs[0], width);
            let slot = *index.entry((x, k)).or_insert_with(|| {
                groups.push(((x, k), Vec::new()));
                groups.len() - 1
            });
            groups[slot].1.push(Member { matmul: id, weight, width, bias });
        }
        let mut count = 0;
        let mut dead = HashSet::new();
        for ((x, k), members) in groups {
            let with_bias = members.iter().all(|m| m.bias.is_some());
            let saves = if with_bias { 2 * members.len() as i64 - 3 } else { members.len() as i64 - 2 };
            if members.len() < 2 || saves < 1 {
                continue;
            }
            if merge(model, a, x, k, &members, with_bias, &mut dead).is_some() {
                count += 1;
            }
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}

/// K and N of a stored float32 matrix `[K, N]`, from its stored dims.
fn matrix_shape(model: &Model, a: &Analysis, w: ValueId) -> Option<(usize, usize)> {
    let t = &a.graph(model).initializers[*a.initializers.get(&w)?];
    if a.inputs.contains(&w) && !a.initializers_are_constants {
        return None;
    }
    match t.dims.as_slice() {
        &[k, n] if t.data_type == Some(ElemType::Float) && k > 0 && n > 0 => Some((k as usize, n as usize)),
        _ => None,
    }
}

/// The members' weights side by side, `[K, ΣNᵢ]` row-major: the stored
/// little-endian bytes joined row by row (no element decoded), or, for a
/// weight stored another way, from its decoded elements.
fn joined_weight(model: &Model, a: &Analysis, name: &str, k: usize, members: &[Member]) -> Option<Tensor> {
    let graph = a.graph(model);
    let stored: Vec<&Tensor> = members.iter().map(|m| &graph.initializers[a.initializers[&m.weight]]).collect();
    let raw: Option<Vec<&[u8]>> = stored
        .iter()
        .zip(members)
        .map(|(t, m)| t.data.raw.as_deref().filter(|r| !t.is_external() && r.len() == k * m.width * 4))
        .collect();
    let total: usize = members.iter().map(|m| m.width).sum();
    if let Some(raw) = raw {
        let mut bytes = Vec::with_capacity(k * total * 4);
        for r in 0..k {
            for (data, m) in raw.iter().zip(members) {
                bytes.extend_from_slice(&data[r * m.width * 4..(r + 1) * m.width * 4]);
            }
        }
        let mut t = float_tensor(name, &[k, total], &[]);
        t.data.raw = Some(bytes::Bytes::from(bytes));
        return Some(t);
    }
    let mut weights = Vec::with_capacity(members.len());
    for m in members {
        let c = a.constant(model, m.weight)?;
        match &c.data {
            ConstData::Floats(f) if f.len() == k * m.width => weights.push(c.clone()),
            _ => return None,
        }
    }
    let mut joined = Vec::with_capacity(k * total);
    for r in 0..k {
        for (c, m) in weights.iter().zip(members) {
            let ConstData::Floats(f) = &c.data else { return None };
            joined.extend_from_slice(&f[r * m.width..(r + 1) * m.width]);
        }
    }
    Some(float_tensor(name, &[k, total], &joined))
}

/// The Add of a stored `[width]` float32 bias that is the only reader of `product`.
fn bias_add(model: &Model, a: &Analysis, product: ValueId, width: usize) -> Option<(NodeId, Vec<f64>)> {
    let &[add_id] = a.consumers.get(&product)?.as_slice() else { return None };
    if !a.is_internal(model, product) {
        return None;
    }
    let add = &a.graph(model).nodes[add_id];
    if add.op_type() != "Add" || !add.domain().is_empty() || add.inputs.len() != 2 {
        return None;
    }
    let b = if add.inputs[0] == product { add.inputs[1] } else { add.inputs[0] };
    let k = a.constant(model, b)?;
    match &k.data {
        ConstData::Floats(f) if k.dtype == ElemType::Float && k.shape == [width] => Some((add_id, f.clone())),
        _ => None,
    }
}

/// Rewrites one group: the joined MatMul (and Add) in the first members'
/// places, the Split in another member's, the rest dead.
fn merge(
    model: &mut Model,
    a: &Analysis,
    x: ValueId,
    k: usize,
    members: &[Member],
    with_bias: bool,
    dead: &mut HashSet<NodeId>,
) -> Option<()> {
    let total: usize = members.iter().map(|m| m.width).sum();
    let base = a.graph(model).value_name(x).to_string();
    let w_name = unique_name(a.graph(model), &format!("{base}_joined_weight"));
    let joined = joined_weight(model, a, &w_name, k, members)?;
    let graph = &mut model.graphs[a.main];
    // What the group computes, read before any node is replaced.
    let adds: Vec<NodeId> = members.iter().filter_map(|m| m.bias.as_ref().map(|(id, _)| *id)).collect();
    let last: Vec<NodeId> = if with_bias { adds.clone() } else { members.iter().map(|m| m.matmul).collect() };
    let outputs: Vec<ValueId> = last.iter().map(|&id| graph.nodes[id].outputs[0]).collect();
    let label = |graph: &diamond_ir::Graph, id: NodeId| graph.nodes[id].name.clone().unwrap_or_default();
    add_initializer(graph, joined, a.initializers_are_constants);
    let w = graph.intern(&w_name);
    let sizes_name = unique_name(graph, &format!("{base}_split_sizes"));
    let widths: Vec<i64> = members.iter().map(|m| m.width as i64).collect();
    add_initializer(graph, int64_vector(&sizes_name, &widths), a.initializers_are_constants);
    let sizes = graph.intern(&sizes_name);
    let product_name = unique_name(graph, &format!("{base}_joined_product"));
    let product = graph.intern(&product_name);
    let first = members[0].matmul;
    graph.nodes[first] = node("MatMul", &label(graph, first), vec![x, w], vec![product], Vec::new());
    let mut free: Vec<NodeId> = members.iter().skip(1).map(|m| m.matmul).collect();
    let split_input = if with_bias {
        let joined_bias: Vec<f64> =
            members.iter().filter_map(|m| m.bias.as_ref()).flat_map(|(_, b)| b.iter().copied()).collect();
        let b_name = unique_name(graph, &format!("{base}_joined_bias"));
        add_initializer(graph, float_tensor(&b_name, &[total], &joined_bias), a.initializers_are_constants);
        let b = graph.intern(&b_name);
        let sum_name = unique_name(graph, &format!("{base}_joined_sum"));
        let sum = graph.intern(&sum_name);
        graph.nodes[adds[0]] = node("Add", &label(graph, adds[0]), vec![product, b], vec![sum], Vec::new());
        free.extend(adds.iter().skip(1));
        sum
    } else {
        product
    };
    let split_slot = free.pop().expect("a group frees a node for the Split");
    let split = node("Split", &label(graph, split_slot), vec![split_input, sizes], outputs, vec![int_attr("axis", -1)]);
    graph.nodes[split_slot] = split;
    dead.extend(free);
    Some(())
}
