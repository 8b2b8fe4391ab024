//! `fuse-conv-affine`: a per-channel affine step right after a Conv folds
//! into the Conv. `Add`/`Sub` of a constant that varies at most along the
//! channel axis joins the bias (`B' = B ± b`; the weights may be anything);
//! `Mul`/`Div` by such a constant scales a stored weight and the bias
//! (`W'[o] = W[o]·s[o]`, `B' = B·s`). This is how old exporters wrote
//! BatchNormalization (a Mul and an Add) and how many write a Conv bias. A
//! chain of such steps, each the only reader of the one before, folds in one
//! run (so a later `cse` cannot merge the Conv before its steps are in it).
//!
//! Gates: each output in the chain has the next step as its only reader and
//! is not part of the model's interface; the constant's shape, aligned from
//! the right against the Conv output's rank, is 1 on every axis but the
//! channel axis, where it is 1 or the output channel count (so the step
//! changes no shape); the element type is float32. New weights and biases are new initializers
//! computed in f64; the old ones are left for `dead-code`.

use super::Pass;
use crate::rewrite::{add_initializer, float_tensor, remove_nodes, unique_name};
use crate::Analysis;
use diamond_infer::graph::{ConstData, DimReport};
use diamond_ir::{ElemType, Model, NodeId, ValueId};
use std::collections::HashSet;

pub(crate) struct ConvAffine;

/// One fusion: the Conv, the steps it absorbs (in order), and its new
/// weight (when a step scaled it) and bias.
struct Fusion {
    conv: NodeId,
    steps: Vec<NodeId>,
    weight: Option<(Vec<usize>, Vec<f64>)>,
    bias: Vec<f64>,
}

impl Pass for ConvAffine {
    fn name(&self) -> &'static str {
        "fuse-conv-affine"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        let graph = a.graph(model);
        let mut fusions: Vec<Fusion> = Vec::new();
        for (conv_id, conv) in graph.nodes.iter() {
            if conv.op_type() != "Conv" || !conv.domain().is_empty() || conv.outputs.len() != 1 {
                continue;
            }
            // A chain of steps, each the only reader of the one before.
            let mut state: Option<Fusion> = None;
            let mut y = conv.outputs[0];
            loop {
                let Some([step_id]) = a.consumers.get(&y).map(Vec::as_slice) else { break };
                let step = &graph.nodes[*step_id];
                let side = step.inputs.iter().position(|&v| v == y);
                let Some(side) = side.filter(|_| step.inputs.len() == 2) else { break };
                let k = step.inputs[1 - side];
                if side == 1 && !matches!(step.op_type(), "Add" | "Mul") {
                    break;
                }
                let Some(next) = absorb(model, a, conv_id, state.as_ref(), *step_id, y, k) else { break };
                y = step.outputs[0];
                state = Some(next);
            }
            fusions.extend(state);
        }
        let count: usize = fusions.iter().map(|f| f.steps.len()).sum();
        let mut dead = HashSet::new();
        for f in fusions {
            let graph = &mut model.graphs[a.main];
            let last = *f.steps.last().expect("a fusion absorbs a step");
            let out = graph.nodes[last].outputs[0];
            let out_name = graph.value_name(out).to_string();
            let channels = f.bias.len();
            let b_name = unique_name(graph, &format!("{out_name}_fused_bias"));
            let bias = float_tensor(&b_name, &[channels], &f.bias);
            let b_id = graph.intern(&b_name);
            add_initializer(graph, bias, a.initializers_are_constants);
            let w_id = match f.weight {
                Some((shape, values)) => {
                    let w_name = unique_name(graph, &format!("{out_name}_fused_weight"));
                    let weight = float_tensor(&w_name, &shape, &values);
                    let id = graph.intern(&w_name);
                    add_initializer(graph, weight, a.initializers_are_constants);
                    Some(id)
                }
                None => None,
            };
            let conv = &mut graph.nodes[f.conv];
            conv.inputs.truncate(2);
            if let Some(w) = w_id {
                conv.inputs[1] = w;
            }
            conv.inputs.push(b_id);
            conv.outputs[0] = out;
            dead.extend(f.steps);
        }
        remove_nodes(&mut model.graphs[a.main], &dead);
        count
    }
}

/// `state` (the Conv as fused so far, `None` for the Conv as stored) with
/// `step` absorbed — the step reads the current output `y` and the operand
/// `k` — when every gate holds.
fn absorb(
    model: &Model,
    a: &Analysis,
    conv_id: NodeId,
    state: Option<&Fusion>,
    step_id: NodeId,
    y: ValueId,
    k: ValueId,
) -> Option<Fusion> {
    let graph = a.graph(model);
    let conv = &graph.nodes[conv_id];
    let step = &graph.nodes[step_id];
    let op = step.op_type();
    if !step.domain().is_empty() || step.outputs.len() != 1 || !matches!(op, "Add" | "Sub" | "Mul" | "Div") {
        return None;
    }
    if !a.is_internal(model, y) {
        return None;
    }
    if a.dtype(model, y) != Some(ElemType::Float) || a.dtype(model, step.outputs[0]) != Some(ElemType::Float) {
        return None;
    }
    let y_shape = a.shape(model, y)?;
    let rank = y_shape.len();
    let channels = match y_shape.get(1)? {
        DimReport::Known(c) => *c as usize,
        _ => return None,
    };
    let constant = a.constant(model, k)?;
    if constant.dtype != ElemType::Float || constant.shape.len() > rank {
        return None;
    }
    let ConstData::Floats(values) = &constant.data else { return None };
    // Right-aligned against the Conv output: 1 everywhere but the channel axis.
    let offset = rank - constant.shape.len();
    for (i, &d) in constant.shape.iter().enumerate() {
        let axis = offset + i;
        if d != 1 && !(axis == 1 && d == channels) {
            return None;
        }
    }
    let factor: Vec<f64> = (0..channels).map(|c| if values.len() == 1 { values[0] } else { values[c] }).collect();
    let (weight, bias) = match state {
        Some(f) => (f.weight.clone(), f.bias.clone()),
        None => {
            let bias = match conv.inputs.get(2).filter(|&&b| !graph.value_name(b).is_empty()) {
                Some(&b) => {
                    let stored = a.constant(model, b)?;
                    match &stored.data {
                        ConstData::Floats(f) if f.len() == channels && stored.dtype == ElemType::Float => f.clone(),
                        _ => return None,
                    }
                }
                None => vec![0.0; channels],
            };
            (None, bias)
        }
    };
    let (weight, bias) = match op {
        "Add" => (weight, bias.iter().zip(&factor).map(|(b, k)| b + k).collect()),
        "Sub" => (weight, bias.iter().zip(&factor).map(|(b, k)| b - k).collect()),
        _ => {
            if op == "Div" && factor.iter().any(|&k| k == 0.0 || !k.is_finite()) {
                return None;
            }
            let scale: Vec<f64> = if op == "Mul" { factor } else { factor.iter().map(|k| 1.0 / k).collect() };
            let (shape, stored) = match weight {
                Some(w) => w,
                None => {
                    let w = a.constant(model, *conv.inputs.get(1)?)?;
                    let ConstData::Floats(wv) = &w.data else { return None };
                    if w.dtype != ElemType::Float {
                        return None;
                    }
                    (w.shape.clone(), wv.clone())
                }
            };
            if shape.first() != Some(&channels) || stored.is_empty() {
                return None;
            }
            let per_out = stored.len() / channels;
            let scaled: Vec<f64> = stored.iter().enumerate().map(|(i, &x)| x * scale[i / per_out]).collect();
            let bias = bias.iter().zip(&scale).map(|(b, s)| b * s).collect();
            (Some((shape, scaled)), bias)
        }
    };
    let mut steps = state.map(|f| f.steps.clone()).unwrap_or_default();
    steps.push(step_id);
    Some(Fusion { conv: conv_id, steps, weight, bias })
}
