//! Decoding a `ModelProto` without holding it: the graphs' wire format is
//! walked here, and each of their entries (node, initializer, declared value)
//! is decoded alone, converted to the IR at once and dropped, so the decoded
//! messages of a 40k-node graph never exist together.
//!
//! Only the fields that hold graphs are walked by hand: `ModelProto.graph`,
//! `GraphProto`'s lists, `NodeProto.attribute` and `AttributeProto.g` /
//! `graphs` (subgraphs stream the same way). Every other field goes to
//! prost's generated code at the level prost would read it (`wire.rs`), so
//! small fields, unknown fields and every check are prost's own. The entries
//! of a graph are converted in the order of [`to_ir::convert_model`]
//! (inputs, outputs, value_info, initializers, sparse initializers, nodes),
//! whatever their order in the file, so value and graph ids match it.
//!
//! Any failure (bytes prost would refuse, a rule of `to_ir` or `limits`)
//! returns [`Refused`]; the caller then runs the whole-message decoder,
//! which fails on the same input and words the error.

use super::to_ir::{self, Converter, Declared};
use super::wire::{self, Budget, Refused};
use bytes::Bytes;
use diamond_ir as ir;
use diamond_ir::{GraphId, GraphOwner, Model};
use diamond_onnx_proto as pb;
use std::collections::HashSet;
use std::path::Path;

/// Field numbers of the walked fields (`proto/onnx.proto`).
mod field {
    pub const MODEL_GRAPH: u32 = 7;
    pub const GRAPH_NODE: u32 = 1;
    pub const GRAPH_INITIALIZER: u32 = 5;
    pub const GRAPH_INPUT: u32 = 11;
    pub const GRAPH_OUTPUT: u32 = 12;
    pub const GRAPH_VALUE_INFO: u32 = 13;
    pub const GRAPH_SPARSE_INITIALIZER: u32 = 15;
    pub const NODE_ATTRIBUTE: u32 = 5;
    pub const ATTRIBUTE_G: u32 = 6;
    pub const ATTRIBUTE_GRAPHS: u32 = 11;
}

/// Decodes and converts the model in `bytes` (the file `path`, external data
/// resolved against `base_dir`), or refuses it.
pub(super) fn decode_model(bytes: Bytes, path: &Path, base_dir: &Path) -> Result<Model, Refused> {
    let budget = Budget::top();
    let mut rest = pb::ModelProto::default();
    // A field given twice is merged by protobuf, which for a message means
    // reading its parts one after the other.
    let mut graph_parts = Vec::new();
    let mut buf = bytes;
    wire::each_field(&mut buf, |tag, wire_type, buf| {
        if tag == field::MODEL_GRAPH {
            graph_parts.push(wire::embedded(wire_type, buf, budget)?);
            Ok(())
        } else {
            wire::hand_over(&mut rest, tag, wire_type, buf, budget)
        }
    })?;
    super::check_header(rest.ir_version, !graph_parts.is_empty(), rest.opset_import.len(), path)?;
    let mut cx = Converter::new(path, base_dir);
    let graph = graph(&mut cx, graph_parts, budget.enter()?, GraphOwner::Main)?;
    Ok(cx.finish(rest, Some(graph))?)
}

/// The payloads of a graph's listed entries, by list, in file order.
#[derive(Default)]
struct GraphEntries {
    nodes: Vec<Bytes>,
    initializers: Vec<Bytes>,
    inputs: Vec<Bytes>,
    outputs: Vec<Bytes>,
    value_info: Vec<Bytes>,
    sparse_initializers: Vec<Bytes>,
}

/// Converts the graph made of `parts` (its fields at the level `budget`).
fn graph(cx: &mut Converter, parts: Vec<Bytes>, budget: Budget, owner: GraphOwner) -> Result<GraphId, Refused> {
    let mut rest = pb::GraphProto::default();
    let mut lists = GraphEntries::default();
    for mut part in parts {
        wire::each_field(&mut part, |tag, wire_type, buf| {
            let list = match tag {
                field::GRAPH_NODE => &mut lists.nodes,
                field::GRAPH_INITIALIZER => &mut lists.initializers,
                field::GRAPH_INPUT => &mut lists.inputs,
                field::GRAPH_OUTPUT => &mut lists.outputs,
                field::GRAPH_VALUE_INFO => &mut lists.value_info,
                field::GRAPH_SPARSE_INITIALIZER => &mut lists.sparse_initializers,
                _ => return wire::hand_over(&mut rest, tag, wire_type, buf, budget),
            };
            list.push(wire::embedded(wire_type, buf, budget)?);
            Ok(())
        })?;
    }
    let (id, mut g) = cx.begin_graph(owner);
    // Refuses a graph at the deepest level even without entries, which prost
    // would take; the whole-message decoder then does.
    let entry = budget.enter()?;
    // About one name per declaration, initializer and node (its output).
    g.reserve_names(
        lists.inputs.len()
            + lists.outputs.len()
            + lists.value_info.len()
            + lists.initializers.len()
            + lists.nodes.len(),
    );
    for (payloads, list) in
        [(lists.inputs, Declared::Input), (lists.outputs, Declared::Output), (lists.value_info, Declared::ValueInfo)]
    {
        for payload in payloads {
            cx.declare(&mut g, wire::decode(payload, entry)?, list)?;
        }
    }
    let mut initializer_names = HashSet::new();
    for payload in lists.initializers {
        cx.add_initializer(&mut g, wire::decode(payload, entry)?, &mut initializer_names)?;
    }
    for payload in lists.sparse_initializers {
        cx.add_sparse_initializer(&mut g, wire::decode(payload, entry)?)?;
    }
    g.nodes.reserve_exact(lists.nodes.len());
    for payload in lists.nodes {
        let node = node(cx, &mut g, id, payload, entry)?;
        g.nodes.push(node);
    }
    cx.end_graph(id, g, rest);
    Ok(id)
}

/// Converts the node in `payload` (its fields at the level `budget`), the
/// next of `graph`.
fn node(
    cx: &mut Converter,
    graph: &mut ir::Graph,
    graph_id: GraphId,
    mut payload: Bytes,
    budget: Budget,
) -> Result<ir::Node, Refused> {
    let mut rest = pb::NodeProto::default();
    let mut attribute_payloads = Vec::new();
    wire::each_field(&mut payload, |tag, wire_type, buf| {
        if tag == field::NODE_ATTRIBUTE {
            attribute_payloads.push(wire::embedded(wire_type, buf, budget)?);
            Ok(())
        } else {
            wire::hand_over(&mut rest, tag, wire_type, buf, budget)
        }
    })?;
    let owner = to_ir::attribute_owner(graph, graph_id);
    let mut attributes = Vec::with_capacity(attribute_payloads.len());
    for payload in attribute_payloads {
        attributes.push(attribute(cx, payload, budget.enter()?, owner)?);
    }
    Ok(to_ir::node_parts(graph, rest, attributes))
}

/// Converts the attribute in `payload` (its fields at the level `budget`),
/// whose subgraphs belong to `owner`.
fn attribute(
    cx: &mut Converter,
    mut payload: Bytes,
    budget: Budget,
    owner: GraphOwner,
) -> Result<ir::Attribute, Refused> {
    let mut rest = pb::AttributeProto::default();
    let mut g_parts = Vec::new();
    let mut graph_payloads = Vec::new();
    wire::each_field(&mut payload, |tag, wire_type, buf| match tag {
        field::ATTRIBUTE_G => {
            g_parts.push(wire::embedded(wire_type, buf, budget)?);
            Ok(())
        }
        field::ATTRIBUTE_GRAPHS => {
            graph_payloads.push(wire::embedded(wire_type, buf, budget)?);
            Ok(())
        }
        _ => wire::hand_over(&mut rest, tag, wire_type, buf, budget),
    })?;
    let g = if g_parts.is_empty() { None } else { Some(graph(cx, g_parts, budget.enter()?, owner)?) };
    let graphs =
        graph_payloads.into_iter().map(|p| graph(cx, vec![p], budget.enter()?, owner)).collect::<Result<_, _>>()?;
    Ok(cx.attribute_parts(rest, g, graphs)?)
}

#[cfg(test)]
mod tests {
    use super::field;
    use diamond_onnx_proto as pb;
    use prost::Message;
    use std::path::Path;

    #[test]
    fn well_formed_models_stream_without_falling_back() {
        // `tests/onnx_stream.rs` compares the two decoders through
        // `decode_model`, which falls back; here the streaming one must
        // succeed on its own.
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        for model in [
            "light/light_squeezenet.onnx",
            "onnx-node/test_loop11/model.onnx",
            "onnx-node/test_if_seq/model.onnx",
            "onnx-node/test_scan9_sum/model.onnx",
            "synthetic/every_field.onnx",
        ] {
            let path = fixtures.join(model);
            let bytes = bytes::Bytes::from(std::fs::read(&path).unwrap());
            let streamed = super::decode_model(bytes.clone(), &path, path.parent().unwrap());
            let whole = super::super::decode_model_whole(bytes, &path, path.parent().unwrap()).unwrap();
            assert!(streamed.is_ok_and(|m| format!("{m:?}") == format!("{whole:?}")), "{model}");
        }
    }

    /// The field number of the only field `message` encodes.
    fn number(message: impl Message) -> u32 {
        let bytes = message.encode_to_vec();
        let (tag, _) = prost::encoding::decode_key(&mut bytes.as_slice()).unwrap();
        tag
    }

    #[test]
    fn the_walked_field_numbers_are_the_schemas() {
        let graph = pb::GraphProto::default();
        assert_eq!(number(pb::ModelProto { graph: Some(graph.clone()), ..Default::default() }), field::MODEL_GRAPH);
        let node = pb::NodeProto { attribute: vec![Default::default()], ..Default::default() };
        assert_eq!(number(pb::GraphProto { node: vec![node.clone()], ..Default::default() }), field::GRAPH_NODE);
        let g = |f: fn(&mut pb::GraphProto)| {
            let mut g = pb::GraphProto::default();
            f(&mut g);
            number(g)
        };
        assert_eq!(g(|g| g.initializer = vec![Default::default()]), field::GRAPH_INITIALIZER);
        assert_eq!(g(|g| g.input = vec![Default::default()]), field::GRAPH_INPUT);
        assert_eq!(g(|g| g.output = vec![Default::default()]), field::GRAPH_OUTPUT);
        assert_eq!(g(|g| g.value_info = vec![Default::default()]), field::GRAPH_VALUE_INFO);
        assert_eq!(g(|g| g.sparse_initializer = vec![Default::default()]), field::GRAPH_SPARSE_INITIALIZER);
        assert_eq!(number(node), field::NODE_ATTRIBUTE);
        let a = pb::AttributeProto { g: Some(graph.clone()), ..Default::default() };
        assert_eq!(number(a), field::ATTRIBUTE_G);
        let a = pb::AttributeProto { graphs: vec![graph], ..Default::default() };
        assert_eq!(number(a), field::ATTRIBUTE_GRAPHS);
    }
}
