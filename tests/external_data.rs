//! Models whose tensors live in external files: converted with their data,
//! lazily loaded, and every broken reference rejected with exit code 2.

mod common;

use diamond_onnx_proto::ModelProto;
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn fixture_dir() -> PathBuf {
    common::root().join("fixtures/synthetic/external")
}

fn decode(path: &Path) -> ModelProto {
    ModelProto::decode(&std::fs::read(path).unwrap()[..]).unwrap()
}

/// Copies the external fixture into a fresh directory, letting `edit` change the model.
fn staged(edit: impl FnOnce(&mut ModelProto), with_data: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut proto = decode(&fixture_dir().join("model.onnx"));
    edit(&mut proto);
    let model = dir.path().join("model.onnx");
    std::fs::write(&model, proto.encode_to_vec()).unwrap();
    if with_data {
        std::fs::copy(fixture_dir().join("weights.bin"), dir.path().join("weights.bin")).unwrap();
    }
    (dir, model)
}

fn set_entry(proto: &mut ModelProto, key: &str, value: &str) {
    let tensor = &mut proto.graph.as_mut().unwrap().initializer[0];
    let entry = tensor.external_data.iter_mut().find(|e| e.key.as_deref() == Some(key)).unwrap();
    entry.value = Some(value.to_string());
}

fn assert_rejected(model: &Path, needle: &str) {
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().join("out.onnx");
    let out = diamond(&["convert", model.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(err.contains(&model.display().to_string()), "names the model: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_dir(out_dir.path()).unwrap().count(), 0, "no partial output");
}

#[test]
fn convert_writes_the_external_data_beside_the_new_model() {
    let out_dir = tempfile::tempdir().unwrap();
    let out_path = out_dir.path().join("sub/converted.onnx");
    std::fs::create_dir_all(out_path.parent().unwrap()).unwrap();
    let input = fixture_dir().join("model.onnx");
    let out = diamond(&["convert", input.to_str().unwrap(), "-o", out_path.to_str().unwrap(), "--no-value-info"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(decode(&input).encode_to_vec(), decode(&out_path).encode_to_vec());
    let original = std::fs::read(fixture_dir().join("weights.bin")).unwrap();
    let copied = std::fs::read(out_dir.path().join("sub/weights.bin")).unwrap();
    assert_eq!(original, copied);

    // The converted model runs in tract (which reads the external data itself)
    // and gives the stored output.
    use tract_onnx::prelude::*;
    let plan = tract_onnx::onnx().model_for_path(&out_path).unwrap().into_optimized().unwrap().into_runnable().unwrap();
    let input_pb = std::fs::read(fixture_dir().join("test_data_set_0/input_0.pb")).unwrap();
    let output_pb = std::fs::read(fixture_dir().join("test_data_set_0/output_0.pb")).unwrap();
    let load = |bytes: &[u8]| {
        let proto: tract_onnx::pb::TensorProto = Message::decode(bytes).unwrap();
        tract_onnx::tensor::load_tensor(&tract_onnx::data_resolver::MmapDataResolver, &proto, None).unwrap()
    };
    let result = plan.run(tvec![load(&input_pb).into_tvalue()]).unwrap();
    let (got, want) = (result[0].clone().into_tensor(), load(&output_pb));
    assert_eq!(got.shape(), want.shape());
    for (a, b) in
        got.to_plain_array_view::<f32>().unwrap().iter().zip(want.to_plain_array_view::<f32>().unwrap().iter())
    {
        assert!((a - b).abs() <= 1e-5 + 1e-3 * b.abs(), "{a} vs {b}");
    }
}

#[test]
fn external_data_is_resolved_at_import_and_loaded_on_demand() {
    let model = diamond_importers::onnx::load_model(&fixture_dir().join("model.onnx")).unwrap();
    let graph = model.main_graph().unwrap();
    let weights = std::fs::read(fixture_dir().join("weights.bin")).unwrap();
    assert!(!graph.initializers.is_empty());
    for tensor in &graph.initializers {
        let ext = tensor.external().expect("every initializer is external");
        let bytes = ext.load().unwrap();
        let (start, end) = (ext.offset as usize, (ext.offset + ext.length) as usize);
        assert_eq!(&bytes[..], &weights[start..end]);
        assert_eq!(tensor.elem_type().raw_size(tensor.element_count().unwrap()), Some(ext.length));
    }
}

#[test]
fn converting_next_to_the_original_leaves_its_data_file_alone() {
    let (dir, model) = staged(|_| {}, true);
    let before = std::fs::metadata(dir.path().join("weights.bin")).unwrap().modified().unwrap();
    let out_path = dir.path().join("again.onnx");
    let out = diamond(&["convert", model.to_str().unwrap(), "-o", out_path.to_str().unwrap(), "--no-value-info"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let after = std::fs::metadata(dir.path().join("weights.bin")).unwrap().modified().unwrap();
    assert_eq!(before, after);
    assert_eq!(decode(&model).encode_to_vec(), decode(&out_path).encode_to_vec());
}

#[test]
fn a_missing_data_file_is_rejected() {
    let (_dir, model) = staged(|_| {}, false);
    assert_rejected(&model, "weights.bin");
}

#[test]
fn an_offset_past_the_end_is_rejected() {
    let (_dir, model) = staged(|p| set_entry(p, "offset", "1000000"), true);
    assert_rejected(&model, "past the end");
}

#[test]
fn a_length_past_the_end_is_rejected() {
    let (_dir, model) = staged(|p| set_entry(p, "length", "18446744073709551615"), true);
    assert_rejected(&model, "past the end");
}

#[test]
fn a_location_outside_the_model_directory_is_rejected() {
    let (_dir, model) = staged(|p| set_entry(p, "location", "../weights.bin"), true);
    assert_rejected(&model, "escapes the model's directory");
}

#[test]
fn a_malformed_offset_is_rejected() {
    let (_dir, model) = staged(|p| set_entry(p, "offset", "twelve"), true);
    assert_rejected(&model, "not a byte count");
}
