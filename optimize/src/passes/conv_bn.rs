//! `fuse-conv-bn`: an inference-mode BatchNormalization whose only input is
//! a Conv's output folds into that Conv's weights and bias:
//! `W'[o] = W[o]·s[o]`, `B'[o] = (B[o] − mean[o])·s[o] + bias[o]` with
//! `s = scale / √(var + ε)`. Every operand must be a stored float32 tensor of
//! the shapes the operators require; the products are computed in f64 and
//! stored as f32.

use super::pattern::{float_or, inference_batch_norm, stored_floats};
use super::Pass;
use crate::rewrite::{add_initializer, float_tensor, remove_nodes, unique_name as unique};
use crate::Analysis;
use diamond_ir::{Model, NodeId};
use std::collections::HashSet;

pub(crate) struct ConvBn;

impl Pass for ConvBn {
    fn name(&self) -> &'static str {
        "fuse-conv-bn"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut fused: Vec<(NodeId, NodeId, diamond_ir::Tensor, diamond_ir::Tensor)> = Vec::new();
        for (bn_id, bn) in graph.nodes.iter() {
            if !inference_batch_norm(graph, bn) {
                continue;
            }
            let x = bn.inputs[0];
            let Some(&conv_id) = a.producer.get(&x) else { continue };
            let conv = &graph.nodes[conv_id];
            if conv.op_type() != "Conv" || !conv.domain().is_empty() || conv.outputs.len() != 1 {
                continue;
            }
            if !a.is_internal(model, x) || a.consumers.get(&x).map_or(0, Vec::len) != 1 {
                continue;
            }
            let epsilon = float_or(bn, "epsilon", 1e-5);
            let floats = |v: diamond_ir::ValueId| stored_floats(model, a, v);
            let Some((w, w_shape)) = conv.inputs.get(1).and_then(|&v| floats(v)) else { continue };
            let Some(&out_channels) = w_shape.first() else { continue };
            let per_channel = |i: usize| {
                floats(bn.inputs[i]).filter(|(v, s)| v.len() == out_channels && s.len() == 1).map(|(v, _)| v)
            };
            let (Some(scale), Some(bias), Some(mean), Some(var)) =
                (per_channel(1), per_channel(2), per_channel(3), per_channel(4))
            else {
                continue;
            };
            let conv_bias = match conv.inputs.get(2).filter(|&&v| !graph.value_name(v).is_empty()) {
                Some(&v) => match floats(v) {
                    Some((b, _)) if b.len() == out_channels => b,
                    _ => continue,
                },
                None => vec![0.0; out_channels],
            };
            let s: Vec<f64> = (0..out_channels).map(|o| scale[o] / (var[o] + epsilon).sqrt()).collect();
            let per_out = w.len() / out_channels.max(1);
            let new_w: Vec<f64> = w.iter().enumerate().map(|(i, &x)| x * s[i / per_out.max(1)]).collect();
            let new_b: Vec<f64> = (0..out_channels).map(|o| (conv_bias[o] - mean[o]) * s[o] + bias[o]).collect();
            let out_name = graph.value_name(bn.outputs[0]);
            let w_name = unique(graph, &format!("{out_name}_fused_weight"));
            let b_name = unique(graph, &format!("{out_name}_fused_bias"));
            fused.push((
                conv_id,
                bn_id,
                float_tensor(&w_name, &w_shape, &new_w),
                float_tensor(&b_name, &[out_channels], &new_b),
            ));
        }
        let count = fused.len();
        let mut dead = HashSet::new();
        for (conv_id, bn_id, w, b) in fused {
            let graph = &mut model.graphs[a.main];
            let out = graph.nodes[bn_id].outputs[0];
            let (w_id, b_id) =
                (graph.intern(w.name.as_deref().unwrap_or("")), graph.intern(b.name.as_deref().unwrap_or("")));
            let conv = &mut graph.nodes[conv_id];
            conv.inputs.truncate(2);
            conv.inputs[1] = w_id;
            conv.inputs.push(b_id);
            conv.outputs[0] = out;
            add_initializer(graph, w, a.initializers_are_constants);
            add_initializer(graph, b, a.initializers_are_constants);
            dead.insert(bn_id);
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}
