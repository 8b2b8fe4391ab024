//! Values of every kind through `diamond run`: string tensors, sequences
//! and optionals written with `-o` and compared back with `--compare`;
//! OptionalProto, SequenceProto and MapProto `.pb` inputs read (and refused
//! with the reason where they do not fit: a map fed to a tensor input, a
//! sequence mixing element types); `run --bind` and `check --bind` taking
//! the same directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/onnx-node").join(name)
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a node case with its inputs, writes the outputs under a fresh
/// directory, and compares that directory with the stored outputs and with
/// itself read back; returns the directory.
fn round_trip(name: &str) -> (tempfile::TempDir, Output) {
    let dir = case(name);
    let (model, data) = (dir.join("model.onnx"), dir.join("test_data_set_0"));
    let out = tempfile::tempdir().unwrap();
    let written = diamond(&["run", arg(&model), "--input", arg(&data), "--compare", arg(&data), "-o", arg(out.path())]);
    assert!(written.status.success(), "{name}: {}", text(&written.stderr));
    let back = diamond(&["run", arg(&model), "--bind", arg(&data), "--compare", arg(out.path()), "--json"]);
    assert!(back.status.success(), "{name}: the written outputs read back differ: {}", text(&back.stderr));
    (out, written)
}

fn npy_header(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    String::from_utf8_lossy(&bytes[10..10 + len]).into_owned()
}

#[test]
fn string_tensors_are_written_as_numpy_str_arrays() {
    let (out, _) = round_trip("test_string_concat_utf8");
    let file = std::fs::read_dir(out.path()).unwrap().next().unwrap().unwrap().path();
    assert_eq!(file.extension().unwrap(), "npy");
    let header = npy_header(&file);
    assert!(header.contains("'descr': '<U"), "{header}");
    round_trip("test_string_concat_zero_dimensional");
}

#[test]
fn sequences_are_written_as_directories_of_element_files() {
    let (out, written) = round_trip("test_split_to_sequence_1");
    assert!(text(&written.stdout).contains("sequence of"), "{}", text(&written.stdout));
    let seq: Vec<PathBuf> = std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(seq.len(), 1, "{seq:?}");
    assert!(seq[0].is_dir(), "{seq:?}");
    let mut items: Vec<String> =
        std::fs::read_dir(&seq[0]).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    items.sort();
    assert_eq!(items[0], "0000.npy");
    assert!(items.len() >= 2, "{items:?}");
    // writing again replaces the directory whole, leaving nothing beside it
    round_trip("test_sequence_insert_at_back");
}

#[test]
fn optionals_are_read_from_optional_protos_and_written_as_what_they_hold() {
    // input_0.pb is an OptionalProto holding a sequence
    round_trip("test_optional_get_element_optional_sequence");
    round_trip("test_optional_has_element_optional_input");
    // an empty optional input and output
    round_trip("test_optional_has_element_empty_optional_input");
    let (out, written) = round_trip("test_identity_opt");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_some());
    assert!(written.status.success());
}

/// The bytes of a protobuf field with a length-delimited payload.
fn field(tag: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(tag << 3 | 2) as u8];
    let mut n = payload.len();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(payload);
    out
}

fn varint_field(tag: u32, value: u8) -> Vec<u8> {
    vec![(tag << 3) as u8, value]
}

/// A TensorProto: 1-D, `data_type` code, raw little-endian bytes.
fn tensor_proto(elem: u8, count: u8, raw: &[u8]) -> Vec<u8> {
    let mut t = varint_field(1, count);
    t.extend(varint_field(2, elem));
    t.extend(field(9, raw));
    t
}

#[test]
fn values_that_do_not_fit_the_input_are_refused_with_the_reason() {
    let dir = case("test_abs");
    let model = dir.join("model.onnx");
    let tmp = tempfile::tempdir().unwrap();
    // a MapProto {key_type: int64, keys: [1], values: [tensor]} fed to the tensor input x
    let mut map = varint_field(2, 7);
    map.extend(field(3, &[1]));
    let mut values = varint_field(2, 1);
    values.extend(field(3, &tensor_proto(1, 1, &1.0f32.to_le_bytes())));
    map.extend(field(5, &values));
    let map_file = tmp.path().join("map.pb");
    std::fs::write(&map_file, &map).unwrap();
    let out = diamond(&["run", arg(&model), "--input", &format!("x={}", arg(&map_file))]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("MapProto") && err.contains("declared a tensor"), "{err}");

    // a SequenceProto mixing float and int64 tensors fed to a sequence input
    let seq_case = case("test_sequence_insert_at_back");
    let mut seq = varint_field(2, 1);
    seq.extend(field(3, &tensor_proto(1, 1, &1.0f32.to_le_bytes())));
    seq.extend(field(3, &tensor_proto(7, 1, &1i64.to_le_bytes())));
    let seq_file = tmp.path().join("seq.pb");
    std::fs::write(&seq_file, &seq).unwrap();
    let data = seq_case.join("test_data_set_0");
    let out = diamond(&[
        "run",
        arg(&seq_case.join("model.onnx")),
        "--input",
        &format!("sequence={}", arg(&seq_file)),
        "--input",
        &format!("tensor={}", arg(&data.join("input_1.pb"))),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("mixes float (element 0) and int64 (element 1)"), "{}", text(&out.stderr));
}

#[test]
fn check_and_run_take_the_same_bind_directory() {
    let dir = case("test_sequence_insert_at_back");
    let (model, data) = (dir.join("model.onnx"), dir.join("test_data_set_0"));
    let check = diamond(&["check", arg(&model), "--bind", arg(&data)]);
    assert_eq!(check.status.code(), Some(0), "{}{}", text(&check.stdout), text(&check.stderr));
    let run = diamond(&["run", arg(&model), "--bind", arg(&data), "--compare", arg(&data)]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let bench = diamond(&["bench", arg(&model), "--bind", arg(&data), "--runs", "1", "--warmup", "0", "--json"]);
    assert!(bench.status.success(), "{}", text(&bench.stderr));
}

fn ml_case(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/ml").join(name)
}

#[test]
fn maps_are_read_from_map_protos_and_written_as_json() {
    // MapProto inputs
    for name in ["dict_vectorizer", "cast_map_dense"] {
        let dir = ml_case(name);
        let data = dir.join("test_data_set_0");
        let out = diamond(&["run", arg(&dir.join("model.onnx")), "--input", arg(&data), "--compare", arg(&data)]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    }
    // ZipMap's sequence of maps: one JSON object per row
    let dir = ml_case("logreg_pipeline");
    let data = dir.join("test_data_set_0");
    let tmp = tempfile::tempdir().unwrap();
    let out = diamond(&[
        "run",
        arg(&dir.join("model.onnx")),
        "--bind",
        arg(&data),
        "--compare",
        arg(&data),
        "-o",
        arg(tmp.path()),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let row = std::fs::read_to_string(tmp.path().join("output_probability").join("0000.json")).unwrap();
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&row).unwrap();
    assert_eq!(map.len(), 3, "{row}");
    let total: f64 = map.values().map(|v| v.as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-5, "{row}");
}
