//! The streaming ONNX decoder (`decode_model`) against the decoder of whole
//! messages (`decode_model_whole`): on every fixture model, on corrupted
//! copies of models with subgraphs, on fields out of order or given twice,
//! and at prost's nesting limit, both give the same model or the same error.

use bytes::Bytes;
use diamond_importers::onnx::{decode_model, decode_model_whole};
use diamond_onnx_proto as pb;
use prost::Message;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// Both decoders' outcome on `bytes`, or what differs between them.
fn compare(bytes: &[u8]) -> Result<bool, String> {
    let path = Path::new("model.onnx");
    let streamed = decode_model(Bytes::copy_from_slice(bytes), path, Path::new("."));
    let whole = decode_model_whole(Bytes::copy_from_slice(bytes), path, Path::new("."));
    match (streamed, whole) {
        // NaNs in tensors make equal models unequal; their printouts agree.
        (Ok(a), Ok(b)) if a == b || format!("{a:?}") == format!("{b:?}") => Ok(true),
        (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(false),
        (a, b) => Err(format!("streamed: {:?}\nwhole: {:?}", a.map(|_| "a model"), b.map(|_| "a model"))),
    }
}

fn onnx_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            onnx_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "onnx") {
            out.push(path);
        }
    }
}

#[test]
fn every_fixture_model_decodes_alike() {
    let mut files = Vec::new();
    onnx_files(&fixtures(), &mut files);
    assert!(files.len() > 2000, "found {} models", files.len());
    let mut failures = Vec::new();
    let mut refused = 0;
    for file in &files {
        match compare(&std::fs::read(file).unwrap()) {
            Ok(true) => {}
            Ok(false) => refused += 1,
            Err(e) => failures.push(format!("{}: {e}", file.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The malformed corpus at least.
    assert!(refused >= 20, "{refused} refused");
}

#[test]
fn corrupted_models_with_subgraphs_decode_alike() {
    for model in ["onnx-node/test_loop11/model.onnx", "onnx-node/test_if_seq/model.onnx", "synthetic/every_field.onnx"]
    {
        let original = std::fs::read(fixtures().join(model)).unwrap();
        let mut imported = 0;
        for cut in 0..original.len() {
            imported += compare(&original[..cut]).map_err(|e| format!("{model} cut at {cut}: {e}")).unwrap() as usize;
        }
        for position in 0..original.len() {
            for bit in [0, 3, 7] {
                let mut bytes = original.clone();
                bytes[position] ^= 1 << bit;
                let outcome = compare(&bytes).map_err(|e| format!("{model}: bit {bit} at {position}: {e}")).unwrap();
                imported += outcome as usize;
            }
        }
        assert!(imported > 0, "{model}: some flips only change a value");
    }
}

fn value(name: &str, ty: pb::TypeProto) -> pb::ValueInfoProto {
    pb::ValueInfoProto { name: Some(name.into()), r#type: Some(ty), ..Default::default() }
}

fn float_tensor() -> pb::TypeProto {
    let tensor = pb::type_proto::Tensor { elem_type: Some(1), shape: None };
    pb::TypeProto { value: Some(pb::type_proto::Value::TensorType(tensor)), ..Default::default() }
}

fn model(graph: pb::GraphProto) -> pb::ModelProto {
    let opset = pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) };
    pb::ModelProto { ir_version: Some(8), opset_import: vec![opset], graph: Some(graph), ..Default::default() }
}

fn relu(x: &str, y: &str) -> pb::NodeProto {
    pb::NodeProto { op_type: Some("Relu".into()), input: vec![x.into()], output: vec![y.into()], ..Default::default() }
}

#[test]
fn fields_out_of_order_or_given_twice_decode_alike() {
    let a = pb::GraphProto {
        name: Some("first".into()),
        node: vec![relu("y", "z")],
        input: vec![value("x", float_tensor())],
        ..Default::default()
    };
    let b = pb::GraphProto {
        name: Some("second".into()),
        node: vec![relu("x", "y")],
        output: vec![value("z", float_tensor())],
        initializer: vec![pb::TensorProto {
            name: Some("w".into()),
            dims: vec![1],
            data_type: Some(1),
            raw_data: Some(vec![0, 0, 128, 63].into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    // The graph field twice (protobuf merges the parts), the header after it,
    // an unknown field at every level, and the node list before the inputs.
    let mut bytes = Vec::new();
    let unknown = [0xf8, 0x07, 0x01]; // field 127, varint 1
    for part in [&a, &b] {
        let mut graph = part.encode_to_vec();
        graph.extend_from_slice(&unknown);
        prost::encoding::encode_key(7, prost::encoding::WireType::LengthDelimited, &mut bytes);
        prost::encoding::encode_varint(graph.len() as u64, &mut bytes);
        bytes.extend_from_slice(&graph);
    }
    let mut header = model(pb::GraphProto::default());
    header.graph = None;
    bytes.extend_from_slice(&header.encode_to_vec());
    bytes.extend_from_slice(&unknown);
    assert_eq!(compare(&bytes), Ok(true));
    let m = decode_model(Bytes::from(bytes), Path::new("m.onnx"), Path::new(".")).unwrap();
    let g = &m.graphs[m.graph.unwrap()];
    assert_eq!(g.name.as_deref(), Some("second"));
    assert_eq!(g.nodes.len(), 2);
    assert_eq!((g.inputs.len(), g.outputs.len(), g.initializers.len()), (1, 1, 1));
}

/// A Loop whose body holds a Loop, `loops` deep, the innermost body's input
/// a sequence `sequences` deep.
fn nested(loops: usize, sequences: usize) -> Vec<u8> {
    let mut ty = float_tensor();
    for _ in 0..sequences {
        let sequence = pb::type_proto::Sequence { elem_type: Some(Box::new(ty)) };
        ty = pb::TypeProto {
            value: Some(pb::type_proto::Value::SequenceType(Box::new(sequence))),
            ..Default::default()
        };
    }
    let mut graph = pb::GraphProto { input: vec![value("s", ty)], node: vec![relu("x", "y")], ..Default::default() };
    for _ in 0..loops {
        let body =
            pb::AttributeProto { name: Some("body".into()), g: Some(graph), r#type: Some(5), ..Default::default() };
        let node = pb::NodeProto { op_type: Some("Loop".into()), attribute: vec![body], ..Default::default() };
        graph = pb::GraphProto { node: vec![node], ..Default::default() };
    }
    model(graph).encode_to_vec()
}

#[test]
fn nesting_at_prosts_limit_decodes_alike() {
    let (mut accepted, mut refused) = (0, 0);
    // Each loop is three levels (node, attribute, graph), each sequence two;
    // these reach the limit of 100 levels at every offset.
    for loops in 28..=34 {
        for sequences in 0..=6 {
            match compare(&nested(loops, sequences)) {
                Ok(true) => accepted += 1,
                Ok(false) => refused += 1,
                Err(e) => panic!("{loops} loops, {sequences} sequences: {e}"),
            }
        }
    }
    assert!(accepted > 0 && refused > 0, "{accepted} accepted, {refused} refused");
}
