//! Every fixture model survives import and export field for field:
//! `parse(write(import(b))) == parse(b)`, compared as canonical protobuf
//! encodings (prost writes fields in number order, so equal messages encode to
//! equal bytes, and NaNs compare by their bits).

mod common;

use diamond_onnx_proto::ModelProto;
use prost::Message;
use std::path::Path;

fn canonical(bytes: &[u8]) -> Vec<u8> {
    ModelProto::decode(bytes).expect("decodes").encode_to_vec()
}

fn round_trip(path: &Path) -> Result<(), String> {
    let original = std::fs::read(path).unwrap();
    let model = diamond_importers::onnx::load_model(path).map_err(|e| e.to_string())?;
    let written = diamond_exporters::onnx::encode_model(&model).map_err(|e| e.to_string())?;
    if canonical(&written) != canonical(&original) {
        let a = ModelProto::decode(&original[..]).unwrap();
        let b = ModelProto::decode(&written[..]).unwrap();
        return Err(format!("messages differ:\n{}", first_difference(&format!("{a:#?}"), &format!("{b:#?}"))));
    }
    Ok(())
}

fn first_difference(a: &str, b: &str) -> String {
    let line = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
    let window = |s: &str| s.lines().skip(line.saturating_sub(3)).take(6).collect::<Vec<_>>().join("\n");
    format!("original:\n{}\nwritten:\n{}", window(a), window(b))
}

#[test]
fn every_fixture_model_round_trips_field_for_field() {
    let models = common::all_models();
    let failures: Vec<String> =
        models.iter().filter_map(|m| round_trip(m).err().map(|e| format!("{}: {e}", m.display()))).collect();
    assert!(failures.is_empty(), "{} of {} models changed:\n{}", failures.len(), models.len(), failures.join("\n"));
}

#[test]
fn the_proto_schema_keeps_fields_it_does_not_interpret() {
    // A model using fields diamond does not act on (training info, device
    // configurations, sharding, metadata everywhere, segments, opaque types)
    // must still come back intact.
    let path = common::root().join("fixtures/synthetic/every_field.onnx");
    round_trip(&path).unwrap();
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    assert_eq!(model.training_info.len(), 1);
    assert_eq!(model.configurations.len(), 1);
    assert_eq!(model.functions.len(), 1);
}

#[test]
fn initializer_bytes_are_slices_of_the_file_buffer_not_copies() {
    let path = common::root().join("fixtures/light/light_resnet50.onnx");
    let buffer = diamond_importers::onnx::read_file(&path).unwrap();
    let range = buffer.as_ptr() as usize..buffer.as_ptr() as usize + buffer.len();
    let model = diamond_importers::onnx::decode_model(buffer.clone(), &path, path.parent().unwrap()).unwrap();
    let graph = model.main_graph().unwrap();
    let raw: Vec<_> = graph.initializers.iter().filter_map(|t| t.data.raw.as_ref()).collect();
    // Weights stay slices of the map; data of at most 64 bytes (shapes,
    // axes, scalars) is copied, so that `check` may give the file's pages
    // back and still read it.
    assert!(raw.iter().any(|bytes| bytes.len() > 64));
    for bytes in raw {
        let inside = range.contains(&(bytes.as_ptr() as usize));
        if bytes.len() > 64 {
            assert!(inside, "raw_data was copied out of the mapped file");
        } else {
            assert!(!inside || bytes.is_empty(), "small raw_data was left in the mapped file");
        }
    }
}
