//! `--target-opset N`: moves a model to a later default-domain opset before
//! the passes run, so fusions into operators that only exist there
//! (Gelu at 20, RMSNormalization at 23) become possible.
//!
//! Only exact upgrades are made. From opset 13 on, almost every operator
//! change up to 23 adds element types or optional inputs and attributes
//! whose defaults keep the old meaning, so the node is unchanged. The
//! exceptions are handled one by one:
//! - crossing 18, the Reduce operators (but ReduceSum) take `axes` as an
//!   input instead of an attribute: the attribute becomes a stored input;
//!   Split without a `split` input gets `num_outputs` (18 requires one);
//! - crossing 20, GridSample renamed its modes and DFT's axis became an
//!   input; crossing 21, GroupNormalization's scale and bias became per
//!   channel instead of per group: such a model is refused, naming the node.
//!
//! A model below opset 13 is refused (the axes of Squeeze, Unsqueeze and
//! Split moved to inputs there; re-export it at a later opset). The IR
//! version is raised to the least the new opset requires. Subgraphs of the
//! main graph are upgraded with it; model-local functions keep their own
//! opset imports. `optimize`'s verification runs the original, not the
//! upgraded model, against the result, so the upgrade is checked too.

use crate::rewrite::{int64_vector, int_attr, unique_name};
use diamond_ir::{AttrValue, GraphId, GraphOwner, Model, NodeId};

/// The latest opset an upgrade may target.
pub const MAX_TARGET_OPSET: i64 = 23;

/// The earliest opset an upgrade starts from.
pub const MIN_SOURCE_OPSET: i64 = 13;

/// Reduce operators whose `axes` moved from attribute to input at opset 18.
const REDUCE_AXES_AT_18: &[&str] = &[
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
];

/// `model` moved to default-domain opset `target`, or why it cannot be.
pub fn upgrade(model: &Model, target: i64) -> Result<Model, String> {
    let current = model.opset_version("").ok_or("the model imports no default-domain opset")?;
    if target < current {
        return Err(format!("the model is at opset {current}; --target-opset {target} would downgrade it"));
    }
    if target > MAX_TARGET_OPSET {
        return Err(format!("--target-opset {target}: upgrades go up to opset {MAX_TARGET_OPSET}"));
    }
    let mut out = model.clone();
    if target == current {
        return Ok(out);
    }
    if current < MIN_SOURCE_OPSET {
        return Err(format!(
            "the model is at opset {current}; upgrades start at opset {MIN_SOURCE_OPSET} (re-export it at a later opset)"
        ));
    }
    let crosses = |version: i64| current < version && version <= target;
    let graphs: Vec<GraphId> = out.graphs.iter().map(|(id, _)| id).filter(|&g| under_main(&out, g)).collect();
    for gid in graphs {
        let nodes: Vec<NodeId> = out.graphs[gid].nodes.iter().map(|(id, _)| id).collect();
        for nid in nodes {
            let node = &out.graphs[gid].nodes[nid];
            if !matches!(node.domain(), "" | "ai.onnx") {
                continue;
            }
            let op = node.op_type().to_string();
            let label = node.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| op.clone());
            let refuse =
                |why: &str| Err(format!("cannot upgrade {op} '{label}' from opset {current} to {target}: {why}"));
            match op.as_str() {
                "GroupNormalization" if crosses(21) => {
                    return refuse("its scale and bias are per channel from opset 21, per group before");
                }
                "GridSample" if crosses(20) => return refuse("its mode names changed at opset 20"),
                "DFT" if crosses(20) => return refuse("its axis became an input at opset 20"),
                _ if crosses(18) && REDUCE_AXES_AT_18.contains(&op.as_str()) => axes_to_input(&mut out, gid, nid),
                "Split" if crosses(18) => {
                    let node = &mut out.graphs[gid].nodes[nid];
                    let has_split = node.inputs.len() > 1;
                    if !has_split && node.attribute("num_outputs").is_none() {
                        let count = node.outputs.len() as i64;
                        node.attributes.push(int_attr("num_outputs", count));
                    }
                }
                _ => {}
            }
        }
    }
    for import in &mut out.opset_imports {
        if matches!(import.domain.as_deref(), None | Some("") | Some("ai.onnx")) {
            import.version = Some(target);
        }
    }
    let ir = match target {
        ..=18 => 8,
        19..=20 => 9,
        21..=22 => 10,
        _ => 11,
    };
    out.ir_version = Some(out.ir_version.unwrap_or(0).max(ir));
    Ok(out)
}

/// Whether graph `g` is the main graph or nested in it.
fn under_main(model: &Model, mut g: GraphId) -> bool {
    loop {
        match model.graphs[g].owner {
            GraphOwner::Main => return true,
            GraphOwner::Attribute { graph, .. } => g = graph,
            _ => return false,
        }
    }
}

/// Moves a Reduce node's `axes` attribute into a stored second input.
fn axes_to_input(model: &mut Model, gid: GraphId, nid: NodeId) {
    let graph = &mut model.graphs[gid];
    let axes: Option<Vec<i64>> = match graph.nodes[nid].attribute("axes").and_then(|a| a.value()) {
        Some(AttrValue::Ints(axes)) => Some(axes.to_vec()),
        _ => None,
    };
    let Some(axes) = axes else { return };
    let out = graph.value_name(graph.nodes[nid].outputs[0]).to_string();
    let name = unique_name(graph, &format!("{out}_axes"));
    let id = graph.intern(&name);
    graph.initializers.push(int64_vector(&name, &axes));
    let node = &mut graph.nodes[nid];
    node.attributes.retain(|a| a.name.as_deref() != Some("axes"));
    node.inputs.truncate(1);
    node.inputs.push(id);
}
