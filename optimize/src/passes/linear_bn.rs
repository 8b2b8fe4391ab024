//! `fuse-linear-bn`: an inference-mode BatchNormalization over the output
//! channels of a MatMul or Gemm with a stored weight folds into that weight
//! and a bias, as `fuse-conv-bn` does for a Conv. With
//! `s = scale / √(var + ε)` and `t = bias − mean·s`, column `c` of the
//! weight is multiplied by `s[c]`, and `t` is added: a Gemm takes it into
//! its `C` (`C' = β·C·s + t`, `β' = 1`), a MatMul gets an `Add` of `t`
//! after it (which `fuse-gemm` makes a Gemm where the ranks allow).
//!
//! This is how BatchNorm1d after a Linear layer exports (LeViT writes
//! `Flatten(MatMul(x, W))`, normalizes, and reshapes back), so one Flatten
//! or Reshape may stand between the product and the normalization when it
//! keeps the product's last axis as the normalized tensor's axis 1: the
//! normalized tensor is `[N, C]` and the product's last axis is `C`. The
//! normalization then disappears, and the Flatten and the Reshape after it
//! are left to `merge-reshapes` and `noop`.
//!
//! Gates: each intermediate value has one reader and is not part of the
//! model's interface; the weight (`[K, C]`, or `[C, K]` for a Gemm with
//! `transB`), the four normalization operands (`[C]`) and a Gemm's `C` are
//! stored float32 tensors; a Gemm's `C` broadcasts along the rows (`[]`,
//! `[1]`, `[C]` or `[1, C]`). Products are computed in f64, stored as f32.

use super::pattern::{float_or, inference_batch_norm, int_or, stored_floats};
use super::Pass;
use crate::rewrite::{add_initializer, float_attr, float_tensor, node, replace_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::{HashMap, HashSet};

pub(crate) struct LinearBn;

/// One fold: the normalization, the product, the reshaping node between
/// them (if any), and the product's new weight and bias.
struct Fold {
    bn: NodeId,
    product: NodeId,
    between: Option<NodeId>,
    weight: (Vec<usize>, Vec<f64>),
    bias: Vec<f64>,
}

impl Pass for LinearBn {
    fn name(&self) -> &'static str {
        "fuse-linear-bn"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let folds: Vec<Fold> = graph.nodes.iter().filter_map(|(id, _)| fold_of(model, a, id)).collect();
        let count = folds.len();
        if count == 0 {
            return 0;
        }
        apply(model, a, folds);
        count
    }
}

/// The fold that removes normalization `bn`, when every gate holds.
fn fold_of(model: &Model, a: &Analysis, bn_id: NodeId) -> Option<Fold> {
    let graph = a.graph(model);
    let bn = &graph.nodes[bn_id];
    if !inference_batch_norm(graph, bn) {
        return None;
    }
    let only_reader = |v: ValueId| a.is_internal(model, v) && a.consumers.get(&v).map_or(0, Vec::len) == 1;
    let x = bn.inputs[0];
    if a.dtype(model, x) != Some(ElemType::Float) || a.rank(model, x) != Some(2) || !only_reader(x) {
        return None;
    }
    // The product, maybe behind one Flatten or Reshape that keeps its last axis.
    let mut product_out = x;
    let mut between = None;
    let &first = a.producer.get(&x)?;
    if matches!(graph.nodes[first].op_type(), "Flatten" | "Reshape") && graph.nodes[first].domain().is_empty() {
        let input = *graph.nodes[first].inputs.first()?;
        if !only_reader(input) {
            return None;
        }
        let (Some(before), Some(after)) = (a.shape(model, input), a.shape(model, x)) else { return None };
        let last_kept =
            matches!((before.last(), after.last()), (Some(DimReport::Known(p)), Some(DimReport::Known(q))) if p == q);
        if !last_kept {
            return None;
        }
        between = Some(first);
        product_out = input;
    }
    let &product_id = a.producer.get(&product_out)?;
    let product = &graph.nodes[product_id];
    if !product.domain().is_empty() || product.outputs.len() != 1 {
        return None;
    }
    let trans_b = match product.op_type() {
        "MatMul" if product.inputs.len() == 2 => false,
        "Gemm" if between.is_none() => int_or(product, "transB", 0) != 0,
        _ => return None,
    };
    let (w, w_shape) = stored_floats(model, a, *product.inputs.get(1)?)?;
    if w_shape.len() != 2 {
        return None;
    }
    let channels = if trans_b { w_shape[0] } else { w_shape[1] };
    let per_channel =
        |i: usize| stored_floats(model, a, bn.inputs[i]).filter(|(v, _)| v.len() == channels).map(|(v, _)| v);
    let (scale, beta, mean, var) = (per_channel(1)?, per_channel(2)?, per_channel(3)?, per_channel(4)?);
    let epsilon = float_or(bn, "epsilon", 1e-5);
    let s: Vec<f64> = (0..channels).map(|c| scale[c] / (var[c] + epsilon).sqrt()).collect();
    let t: Vec<f64> = (0..channels).map(|c| beta[c] - mean[c] * s[c]).collect();
    let weight: Vec<f64> = w
        .iter()
        .enumerate()
        .map(|(i, &v)| v * s[if trans_b { i / w_shape[1].max(1) } else { i % channels.max(1) }])
        .collect();
    let bias = if product.op_type() == "Gemm" {
        let old = match product.inputs.get(2).filter(|&&v| !graph.value_name(v).is_empty()) {
            None => vec![0.0; channels],
            Some(&c) => {
                let (values, shape) = stored_floats(model, a, c)?;
                let per_row = shape.iter().rev().skip(1).all(|&d| d == 1);
                match values.len() {
                    1 => vec![values[0]; channels],
                    n if n == channels && per_row => values,
                    _ => return None,
                }
            }
        };
        let gemm_beta = float_or(product, "beta", 1.0);
        (0..channels).map(|c| gemm_beta * old[c] * s[c] + t[c]).collect()
    } else {
        t
    };
    Some(Fold { bn: bn_id, product: product_id, between, weight: (w_shape, weight), bias })
}

/// Rewrites the graph: new weights and biases, a Gemm's `C`, a MatMul's
/// `Add` placed right after it, and the normalizations removed (their
/// output now written by the node before them).
fn apply(model: &mut Model, a: &Analysis, folds: Vec<Fold>) {
    let graph = &mut model.graphs[a.main];
    let mut dead: HashSet<NodeId> = HashSet::new();
    let mut adds: HashMap<NodeId, diamond_ir::Node> = HashMap::new();
    for f in folds {
        let bn_out = graph.nodes[f.bn].outputs[0];
        let out_name = graph.value_name(bn_out).to_string();
        let w_name = unique_name(graph, &format!("{out_name}_fused_weight"));
        add_initializer(graph, float_tensor(&w_name, &f.weight.0, &f.weight.1), a.initializers_are_constants);
        let b_name = unique_name(graph, &format!("{out_name}_fused_bias"));
        add_initializer(graph, float_tensor(&b_name, &[f.bias.len()], &f.bias), a.initializers_are_constants);
        let (w_id, b_id) = (graph.intern(&w_name), graph.intern(&b_name));
        dead.insert(f.bn);
        // the node before the normalization now writes its output
        match f.between {
            Some(r) => graph.nodes[r].outputs[0] = bn_out,
            None => {}
        }
        let product = &mut graph.nodes[f.product];
        product.inputs[1] = w_id;
        if product.op_type() == "Gemm" {
            product.inputs.truncate(2);
            product.inputs.push(b_id);
            product.attributes.retain(|at| at.name() != "beta");
            product.attributes.push(float_attr("beta", 1.0));
            if f.between.is_none() {
                product.outputs[0] = bn_out;
            }
            continue;
        }
        let sum = if f.between.is_some() { product.outputs[0] } else { bn_out };
        let name = product.name.clone().unwrap_or_default();
        let raw_name = unique_name(graph, &format!("{out_name}_unbiased"));
        let raw = graph.intern(&raw_name);
        graph.nodes[f.product].outputs[0] = raw;
        adds.insert(f.product, node("Add", &format!("{name}_bias"), vec![raw, b_id], vec![sum], Vec::new()));
    }
    let replacements =
        adds.into_iter().map(|(product, add)| (product, vec![graph.nodes[product].clone(), add])).collect();
    replace_nodes(graph, &dead, replacements);
}
