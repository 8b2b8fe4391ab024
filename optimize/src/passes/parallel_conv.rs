//! `merge-parallel-convs`: a sum of Convs of one input (and inference
//! BatchNormalizations of it, the identity branch) becomes one Conv — the
//! structural re-parameterization RepVGG, MobileOne and FastViT apply when
//! deployed, which an export of the training form leaves undone.
//!
//! The sum is a tree of `Add`s whose every inner value has the next `Add`
//! as its only reader. Each leaf is a Conv of `x` with a stored weight (and
//! bias), or a BatchNormalization of `x` with stored operands. The Convs
//! share `group`, `strides` and `dilations`, have explicit `pads` and as
//! many output channels; a smaller kernel sits centred in the largest one,
//! which must leave every branch reading the same input window: for each
//! spatial axis, `pad_begin + offset·dilation` and
//! `pad_end + (K − k − offset)·dilation` agree across branches
//! (`offset = (K − k) / 2`). A normalization is the kernel that is `s[c]` at
//! the centre of channel `c`'s own input channel and zero elsewhere
//! (`s = scale / √(var + ε)`, bias `shift − mean·s`); it needs as many
//! input as output channels, unit strides, and a centre that reads the
//! output position itself. Weights and biases add up; every value is
//! float32, computed in f64.

use super::pattern::{float_or, inference_batch_norm, int_or, stored_floats};
use super::Pass;
use crate::rewrite::{add_initializer, float_tensor, node, replace_nodes, unique_name};
use crate::Analysis;
use diamond_ir::{AttrValue, ElemType, Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};

pub(crate) struct ParallelConvs;

/// A sum to merge: its Adds (the root last), leaves, and the merged Conv.
struct Merge {
    adds: Vec<NodeId>,
    leaves: Vec<NodeId>,
    template: NodeId,
    x: ValueId,
    weight: (Vec<usize>, Vec<f64>),
    bias: Vec<f64>,
    pads: Vec<i64>,
}

impl Pass for ParallelConvs {
    fn name(&self) -> &'static str {
        "merge-parallel-convs"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let merges: Vec<Merge> = graph.nodes.iter().filter_map(|(id, _)| merge_at(model, a, id)).collect();
        let count = merges.iter().map(|m| m.leaves.len() - 1).sum();
        if count > 0 {
            apply(model, a, merges);
        }
        count
    }
}

fn ints(node: &diamond_ir::Node, name: &str) -> Option<Vec<i64>> {
    match node.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Ints(v)) => Some(v.to_vec()),
        _ => None,
    }
}

/// The merge rooted at Add `root`: `None` unless `root` is the top of a sum
/// tree whose leaves all merge.
fn merge_at(model: &Model, a: &Analysis, root: NodeId) -> Option<Merge> {
    let graph = a.graph(model);
    let is_add = |id: NodeId| {
        let n = &graph.nodes[id];
        n.op_type() == "Add" && n.domain().is_empty() && n.inputs.len() == 2 && n.outputs.len() == 1
    };
    let only_reader = |v: ValueId| a.is_internal(model, v) && a.consumers.get(&v).map_or(0, Vec::len) == 1;
    if !is_add(root) {
        return None;
    }
    // the root is not itself an inner Add of a larger sum
    let out = graph.nodes[root].outputs[0];
    if only_reader(out) && a.consumers.get(&out).is_some_and(|c| is_add(c[0])) {
        return None;
    }
    let (mut adds, mut leaves, mut stack) = (Vec::new(), Vec::new(), vec![root]);
    while let Some(id) = stack.pop() {
        adds.push(id);
        for &v in &graph.nodes[id].inputs {
            let &p = a.producer.get(&v)?;
            if !only_reader(v) {
                return None;
            }
            if is_add(p) {
                stack.push(p);
            } else {
                leaves.push(p);
            }
        }
    }
    adds.reverse();
    if a.dtype(model, out) != Some(ElemType::Float) {
        return None;
    }
    let convs: Vec<NodeId> = leaves.iter().copied().filter(|&l| graph.nodes[l].op_type() == "Conv").collect();
    let &template = convs.first()?;
    let t = &graph.nodes[template];
    let x = *t.inputs.first()?;
    let same_x =
        leaves.iter().all(|&l| graph.nodes[l].inputs.first() == Some(&x) && graph.nodes[l].domain().is_empty());
    if !same_x || leaves.len() < 2 {
        return None;
    }
    let group = int_or(t, "group", 1);
    let rank = a.rank(model, x)?;
    let spatial = rank.checked_sub(2).filter(|&s| s >= 1)?;
    let ones = vec![1i64; spatial];
    let strides = ints(t, "strides").unwrap_or_else(|| ones.clone());
    let dilations = ints(t, "dilations").unwrap_or_else(|| ones.clone());
    // each Conv leaf: weight, bias, kernel, pads
    let mut kernels: Vec<(Vec<f64>, Vec<usize>, Vec<f64>, Vec<i64>)> = Vec::new();
    for &l in &convs {
        let c = &graph.nodes[l];
        let auto_pad = c.attribute("auto_pad").and_then(|v| v.value());
        if !matches!(auto_pad, None | Some(AttrValue::String(_))) {
            return None;
        }
        if matches!(&auto_pad, Some(AttrValue::String(s)) if s != b"NOTSET") {
            return None;
        }
        if int_or(c, "group", 1) != group
            || ints(c, "strides").unwrap_or_else(|| ones.clone()) != strides
            || ints(c, "dilations").unwrap_or_else(|| ones.clone()) != dilations
        {
            return None;
        }
        let (w, shape) = stored_floats(model, a, *c.inputs.get(1)?)?;
        if shape.len() != rank {
            return None;
        }
        let bias = match c.inputs.get(2).filter(|&&v| !graph.value_name(v).is_empty()) {
            Some(&b) => stored_floats(model, a, b)?.0,
            None => vec![0.0; shape[0]],
        };
        let pads = ints(c, "pads").unwrap_or_else(|| vec![0; 2 * spatial]);
        if bias.len() != shape[0] || pads.len() != 2 * spatial {
            return None;
        }
        kernels.push((w, shape, bias, pads));
    }
    let (out_ch, per_group_in) = (kernels[0].1[0], kernels[0].1[1]);
    if kernels.iter().any(|k| k.1[0] != out_ch || k.1[1] != per_group_in) {
        return None;
    }
    let big: Vec<usize> = (0..spatial).map(|d| kernels.iter().map(|k| k.1[2 + d]).max().unwrap_or(1)).collect();
    // the merged pads, which every branch must agree on
    let mut pads: Option<Vec<i64>> = None;
    let mut agree = |p: Vec<i64>| match &pads {
        Some(q) => *q == p,
        None => {
            pads = Some(p);
            true
        }
    };
    for k in &kernels {
        let mut p = vec![0i64; 2 * spatial];
        for d in 0..spatial {
            let extra = big[d] - k.1[2 + d];
            if extra % 2 != 0 {
                return None;
            }
            let off = (extra / 2) as i64;
            p[d] = k.3[d] + off * dilations[d];
            p[spatial + d] = k.3[spatial + d] + (extra as i64 - off) * dilations[d];
        }
        if !agree(p) {
            return None;
        }
    }
    let bns: Vec<NodeId> =
        leaves.iter().copied().filter(|&l| graph.nodes[l].op_type() == "BatchNormalization").collect();
    if convs.len() + bns.len() != leaves.len() {
        return None;
    }
    let in_ch = per_group_in * group as usize;
    if !bns.is_empty() {
        // the identity reads the output position: centre taps, unit strides
        let centre: Vec<i64> = (0..spatial).map(|d| ((big[d] - 1) / 2) as i64 * dilations[d]).collect();
        let centred = big.iter().all(|k| k % 2 == 1)
            && pads.as_ref().is_some_and(|p| (0..spatial).all(|d| p[d] == centre[d] && p[spatial + d] == centre[d]));
        if !centred || strides.iter().any(|&s| s != 1) || in_ch != out_ch {
            return None;
        }
    }
    // the merged weight and bias
    let tap_count: usize = big.iter().product();
    let mut weight = vec![0.0; out_ch * per_group_in * tap_count];
    let mut bias = vec![0.0; out_ch];
    for (w, shape, b, _) in &kernels {
        let small: Vec<usize> = shape[2..].to_vec();
        let taps: usize = small.iter().product();
        for (o, bo) in bias.iter_mut().enumerate() {
            *bo += b[o];
        }
        for (flat, &value) in w.iter().enumerate() {
            let (oi, tap) = (flat / taps, flat % taps);
            // the tap's coordinates in the small kernel, then in the large one
            let mut rest = tap;
            let mut big_tap = 0;
            for d in 0..spatial {
                let stride_small: usize = small[d + 1..].iter().product();
                let coord = rest / stride_small;
                rest %= stride_small;
                let stride_big: usize = big[d + 1..].iter().product();
                big_tap += (coord + (big[d] - small[d]) / 2) * stride_big;
            }
            weight[oi * tap_count + big_tap] += value;
        }
    }
    let centre_tap: usize = (0..spatial).map(|d| (big[d] - 1) / 2 * big[d + 1..].iter().product::<usize>()).sum();
    for &l in &bns {
        let bn = &graph.nodes[l];
        if !inference_batch_norm(graph, bn) {
            return None;
        }
        let per_channel =
            |i: usize| stored_floats(model, a, bn.inputs[i]).map(|(v, _)| v).filter(|v| v.len() == out_ch);
        let (scale, shift, mean, var) = (per_channel(1)?, per_channel(2)?, per_channel(3)?, per_channel(4)?);
        let epsilon = float_or(bn, "epsilon", 1e-5);
        for o in 0..out_ch {
            let s = scale[o] / (var[o] + epsilon).sqrt();
            let i = o % per_group_in;
            weight[(o * per_group_in + i) * tap_count + centre_tap] += s;
            bias[o] += shift[o] - mean[o] * s;
        }
    }
    let mut shape = vec![out_ch, per_group_in];
    shape.extend(&big);
    Some(Merge { adds, leaves, template, x, weight: (shape, weight), bias, pads: pads? })
}

/// One Conv in each sum's root place; the branches and inner Adds removed.
fn apply(model: &mut Model, a: &Analysis, merges: Vec<Merge>) {
    let graph = &mut model.graphs[a.main];
    let mut dead: HashSet<NodeId> = HashSet::new();
    let mut replacement: HashMap<NodeId, Vec<diamond_ir::Node>> = HashMap::new();
    for m in merges {
        let root = *m.adds.last().expect("a sum has an Add");
        let out = graph.nodes[root].outputs[0];
        let out_name = graph.value_name(out).to_string();
        let w_name = unique_name(graph, &format!("{out_name}_merged_weight"));
        add_initializer(graph, float_tensor(&w_name, &m.weight.0, &m.weight.1), a.initializers_are_constants);
        let b_name = unique_name(graph, &format!("{out_name}_merged_bias"));
        add_initializer(graph, float_tensor(&b_name, &[m.bias.len()], &m.bias), a.initializers_are_constants);
        let (w, b) = (graph.intern(&w_name), graph.intern(&b_name));
        let template = &graph.nodes[m.template];
        let mut attributes: Vec<diamond_ir::Attribute> = template
            .attributes
            .iter()
            .filter(|at| !matches!(at.name(), "pads" | "kernel_shape" | "auto_pad"))
            .cloned()
            .collect();
        attributes.push(crate::rewrite::ints_attr("pads", &m.pads));
        let kernel: Vec<i64> = m.weight.0[2..].iter().map(|&k| k as i64).collect();
        attributes.push(crate::rewrite::ints_attr("kernel_shape", &kernel));
        let name = template.name.clone().unwrap_or_default();
        replacement.insert(root, vec![node("Conv", &format!("{name}_merged"), vec![m.x, w, b], vec![out], attributes)]);
        dead.extend(m.adds.iter().copied().filter(|&id| id != root));
        dead.extend(m.leaves);
    }
    replace_nodes(graph, &dead, replacement);
}
