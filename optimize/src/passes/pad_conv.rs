//! `fuse-pad`: a zero Pad of only the spatial axes, read only by a Conv (or
//! an AveragePool that counts padding, `count_include_pad = 1`), becomes
//! that operator's own `pads`: the two pad the same zeros. Exporters write
//! this for `padding="same"` with even kernels and for explicit `F.pad`.
//!
//! Gates: opset 11 or later (pads are an input) and the pads, the optional
//! constant value (0 or absent) and the optional axes (opset 18) stored;
//! mode `constant`; no padding of the batch or channel axis and none
//! negative; the consumer's `auto_pad` unset or `NOTSET`. The Pad is left
//! for `dead-code`.

use super::pattern::{scalar, sole_reader};
use super::Pass;
use crate::rewrite::ints_attr;
use crate::Analysis;
use diamond_ir::{AttrValue, Model, NodeId};

pub(crate) struct PadIntoConv;

impl Pass for PadIntoConv {
    fn name(&self) -> &'static str {
        "fuse-pad"
    }

    fn run(&self, model: &mut Model, a: &Analysis) -> usize {
        if model.opset_version("").unwrap_or(0) < 11 {
            return 0;
        }
        let graph = a.graph(model);
        let mut fusions: Vec<(NodeId, diamond_ir::ValueId, Vec<i64>)> = Vec::new();
        for (pad_id, pad) in graph.nodes.iter() {
            if pad.op_type() != "Pad" || !pad.domain().is_empty() || pad.outputs.len() != 1 {
                continue;
            }
            if let Some((reader, pads)) = fusion(model, a, pad_id) {
                fusions.push((reader, pad.inputs[0], pads));
            }
        }
        let count = fusions.len();
        for (reader, data, pads) in fusions {
            let node = &mut model.graphs[a.main].nodes[reader];
            node.inputs[0] = data;
            node.attributes.retain(|at| at.name.as_deref() != Some("pads"));
            node.attributes.push(ints_attr("pads", &pads));
        }
        count
    }
}

/// The reader of Pad `pad_id` and its new `pads`, when every gate holds.
fn fusion(model: &Model, a: &Analysis, pad_id: NodeId) -> Option<(NodeId, Vec<i64>)> {
    let graph = a.graph(model);
    let pad = &graph.nodes[pad_id];
    let mode = match pad.attribute("mode").and_then(|m| m.value()) {
        Some(AttrValue::String(s)) => s.to_vec(),
        None => b"constant".to_vec(),
        _ => return None,
    };
    if mode != b"constant" {
        return None;
    }
    let named = |i: usize| pad.inputs.get(i).copied().filter(|&v| !graph.value_name(v).is_empty());
    let pads = a.constant(model, named(1)?)?.as_i64s()?;
    if let Some(v) = named(2) {
        (scalar(model, a, v)? == 0.0).then_some(())?;
    }
    let rank = a.rank(model, pad.inputs[0])?;
    let axes: Vec<usize> = match named(3) {
        Some(v) => a
            .constant(model, v)?
            .as_i64s()?
            .iter()
            .map(|&ax| usize::try_from(if ax < 0 { ax + rank as i64 } else { ax }).ok())
            .collect::<Option<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() || rank < 3 {
        return None;
    }
    // Begin and end pads per axis of the data.
    let mut begin = vec![0i64; rank];
    let mut end = vec![0i64; rank];
    for (i, &ax) in axes.iter().enumerate() {
        if ax >= rank {
            return None;
        }
        begin[ax] = pads[i];
        end[ax] = pads[axes.len() + i];
    }
    if begin[..2].iter().chain(&end[..2]).any(|&p| p != 0) || begin.iter().chain(&end).any(|&p| p < 0) {
        return None;
    }
    let reader_id = sole_reader(model, a, pad.outputs[0])?;
    let reader = &graph.nodes[reader_id];
    if !reader.domain().is_empty() || reader.inputs.first() != Some(&pad.outputs[0]) {
        return None;
    }
    let int_attr = |name: &str| match reader.attribute(name).and_then(|x| x.value()) {
        Some(AttrValue::Int(i)) => Some(i),
        _ => None,
    };
    match reader.op_type() {
        "Conv" => {}
        "AveragePool" if int_attr("count_include_pad") == Some(1) => {}
        _ => return None,
    }
    match reader.attribute("auto_pad").and_then(|x| x.value()) {
        None => {}
        Some(AttrValue::String(s)) if s == b"NOTSET" => {}
        _ => return None,
    }
    let spatial = rank - 2;
    let old: Vec<i64> = match reader.attribute("pads").and_then(|x| x.value()) {
        Some(AttrValue::Ints(p)) if p.len() == 2 * spatial => p.to_vec(),
        None => vec![0; 2 * spatial],
        _ => return None,
    };
    let mut merged = old;
    for s in 0..spatial {
        merged[s] += begin[2 + s];
        merged[spatial + s] += end[2 + s];
    }
    Some((reader_id, merged))
}
