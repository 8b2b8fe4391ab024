//! `diamond run` end to end: outputs summarized, written as `.npy` and
//! compared with stored ones; fed tensors that contradict the model (type,
//! rank, fixed size, a symbol bound two ways, a bound the model implies)
//! give exit 2 naming the input, the axis and the rule, as do missing inputs
//! and unreadable files; the peak of live bytes is reported beside the
//! plan's prediction; sequence inputs come from directories or
//! SequenceProtos; bfloat16 and float8 outputs are written as float32; a
//! light model agrees with tract on the same input; float16 and bfloat16
//! models run on the simd backend (in f32, converted at the edges) with no
//! float fallback, to onnxruntime's outputs.

mod common;

use diamond_onnx_proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tract_onnx::prelude::*;

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `z = x + y` with x, y: float[batch, 3].
fn add_model(dir: &Path) -> PathBuf {
    let node = NodeProto {
        input: vec!["x".into(), "y".into()],
        output: vec!["z".into()],
        op_type: Some("Add".into()),
        ..Default::default()
    };
    let graph = GraphProto {
        name: Some("add".into()),
        node: vec![node],
        input: vec![common::tensor_info("x", 1, &["batch", "3"]), common::tensor_info("y", 1, &["batch", "3"])],
        output: vec![common::tensor_info("z", 1, &["batch", "3"])],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(13) }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join("add.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

/// A little-endian `.npy` file of `descr` elements.
fn npy(dir: &Path, name: &str, descr: &str, shape: &[usize], data: &[u8]) -> String {
    let shape_text = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

fn f32_npy(dir: &Path, name: &str, shape: &[usize], values: &[f32]) -> String {
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy(dir, name, "<f4", shape, &data)
}

/// The f32 elements of a `.npy` file diamond wrote.
fn read_f32_npy(path: &Path) -> (String, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8_lossy(&bytes[10..10 + len]).into_owned();
    assert!(header.contains("'<f4'"), "{header}");
    let values = bytes[10 + len..].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (header, values)
}

fn input(name: &str, file: &str) -> String {
    format!("{name}={file}")
}

#[test]
fn run_summarizes_writes_and_compares_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let model = add_model(dir.path());
    let x = f32_npy(dir.path(), "x.npy", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = f32_npy(dir.path(), "y.npy", &[2, 3], &[0.5; 6]);
    let out_dir = dir.path().join("out");
    let m = model.to_str().unwrap();
    let out =
        diamond(&["run", m, "--input", &input("x", &x), "--input", &input("y", &y), "-o", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("z: float[2,3]  min 1.500000 max 6.500000 mean 4.000000 nan 0"), "{text}");
    // On the SIMD backend z is written in place of x, which dies at the Add;
    // the reference executor holds x, y and z together.
    assert!(text.contains("peak live bytes: 48 (the reference executor's, predicted: 72)"), "{text}");
    let (header, values) = read_f32_npy(&out_dir.join("z.npy"));
    assert!(header.contains("'shape': (2, 3)"), "{header}");
    assert_eq!(values, vec![1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);
    let names: Vec<String> =
        std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["z.npy"], "only the output, no temporary file");

    // The written outputs compare equal; other stored values do not.
    let ok = diamond(&[
        "run",
        m,
        "--input",
        &input("x", &x),
        "--input",
        &input("y", &y),
        "--compare",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert!(stdout(&ok).contains("(matches stored)"));
    let stored = dir.path().join("stored");
    std::fs::create_dir(&stored).unwrap();
    f32_npy(&stored, "z.npy", &[2, 3], &[1.5, 2.5, 3.5, 4.5, 5.5, 9.0]);
    let bad = diamond(&[
        "run",
        m,
        "--input",
        &input("x", &x),
        "--input",
        &input("y", &y),
        "--compare",
        stored.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    let err = stderr(&bad);
    assert!(err.contains("output 'z'") && err.contains("worst at [1, 2]: 6.5, stored 9"), "{err}");

    // JSON carries the same summary.
    let json = diamond(&["run", m, "--input", &input("x", &x), "--input", &input("y", &y), "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["outputs"][0]["shape"], serde_json::json!([2, 3]));
    assert_eq!(doc["outputs"][0]["dtype"], "float");
    assert_eq!(doc["outputs"][0]["max"], 6.5);
}

/// Runs `args` expecting exit 2, one error line naming `input` and containing `needle`, and no output directory.
fn rejected(args: &[&str], input: &str, needle: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let mut all: Vec<&str> = args.to_vec();
    let out_arg = out_dir.to_str().unwrap().to_string();
    all.extend(["-o", &out_arg]);
    let out = diamond(&all);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "one error line: {err}");
    assert!(err.contains(&format!("'{input}'")), "names input '{input}': {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!out_dir.exists(), "nothing written");
}

#[test]
fn inputs_that_contradict_the_model_are_rejected_naming_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let model = add_model(dir.path());
    let m = model.to_str().unwrap();
    let good = f32_npy(dir.path(), "good.npy", &[2, 3], &[0.0; 6]);
    let three = f32_npy(dir.path(), "three.npy", &[3, 3], &[0.0; 9]);
    let flat = f32_npy(dir.path(), "flat.npy", &[6], &[0.0; 6]);
    let wide = f32_npy(dir.path(), "wide.npy", &[2, 4], &[0.0; 8]);
    let ints = npy(dir.path(), "ints.npy", "<i8", &[2, 3], &[0u8; 48]);
    let junk = dir.path().join("junk.npy");
    std::fs::write(&junk, b"not a tensor").unwrap();
    let junk = junk.to_str().unwrap();

    rejected(&["run", m, "--input", &input("x", &ints), "--input", &input("y", &good)], "x", "element type int64");
    rejected(&["run", m, "--input", &input("x", &flat), "--input", &input("y", &good)], "x", "rank 1");
    rejected(
        &["run", m, "--input", &input("x", &wide), "--input", &input("y", &good)],
        "x",
        "axis 1: size 4 was fed, the model declares 3 (float[batch,3]) [rule: declared-size]",
    );
    rejected(
        &["run", m, "--input", &input("x", &good), "--input", &input("y", &three)],
        "y",
        "axis 0: binds 'batch' to 3, but input 'x' axis 0 bound it to 2 [rule: one-size-per-symbol]",
    );
    rejected(&["run", m, "--input", &input("x", &good)], "y", "missing");
    rejected(&["run", m, "--input", &input("x", junk), "--input", &input("y", &good)], "x", "not a valid tensor file");
    rejected(&["run", m, "--input", &input("w", &good)], "w", "no input");
}

#[test]
fn random_inputs_bind_symbols_from_input_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let model = add_model(dir.path());
    let out = diamond(&["run", model.to_str().unwrap(), "--random", "--seed", "7", "--input-shape", "x=5,3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("z: float[5,3]"), "y takes batch = 5 from x: {}", stdout(&out));
    let again = diamond(&["run", model.to_str().unwrap(), "--random", "--seed", "7", "--input-shape", "x=5,3"]);
    assert_eq!(stdout(&out), stdout(&again), "seeded generation is deterministic");
}

#[test]
fn a_light_model_agrees_with_tract() {
    let path = common::root().join("fixtures/light/light_squeezenet.onnx");
    let dir = tempfile::tempdir().unwrap();
    let shape = [1usize, 3, 224, 224];
    let n: usize = shape.iter().product();
    // a smooth deterministic image in [-1, 1]
    let values: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.001).sin()).collect();
    let x = f32_npy(dir.path(), "x.npy", &shape, &values);
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let graph = model.main_graph().unwrap();
    let initialized: Vec<&str> = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let name = graph
        .inputs
        .iter()
        .map(|i| graph.value_name(i.value.unwrap()))
        .find(|n| !initialized.contains(n))
        .unwrap()
        .to_string();
    let output = graph.value_name(graph.outputs[0].value.unwrap()).to_string();
    let out_dir = dir.path().join("out");
    let out = diamond(&["run", path.to_str().unwrap(), "--input", &input(&name, &x), "-o", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, ours) = read_f32_npy(&out_dir.join(format!("{output}.npy")));

    let plan = tract_onnx::onnx()
        .model_for_path(&path)
        .unwrap()
        .with_input_fact(0, InferenceFact::dt_shape(f32::datum_type(), &shape[..]))
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let input = Tensor::from_shape(&shape, &values).unwrap();
    let result = plan.run(tvec!(input.into_tvalue())).unwrap();
    let theirs = result[0].to_plain_array_view::<f32>().unwrap();
    let theirs: Vec<f32> = theirs.iter().copied().collect();
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!((a - b).abs() <= 1e-4 + 1e-3 * b.abs(), "element {i}: diamond {a}, tract {b}");
    }
}

#[test]
fn light_models_match_their_stored_outputs() {
    // The light models compute their weights with ConstantOfShape, so the
    // stored output does not depend on the (unshipped) input: random inputs
    // reproduce it.
    // The simd backend runs the optimized model by default, the model as it is with --no-optimize.
    for name in ["light_squeezenet", "light_densenet121"] {
        let dir = common::root().join("fixtures/light");
        let model = dir.join(format!("{name}.onnx"));
        let stored = dir.join(format!("{name}_output_0.pb"));
        for flag in [None, Some("--no-optimize")] {
            let mut args = vec!["run", model.to_str().unwrap(), "--random", "--compare", stored.to_str().unwrap()];
            args.extend(flag);
            let out = diamond(&args);
            assert_eq!(out.status.code(), Some(0), "{name} {flag:?}: {}", stderr(&out));
            assert!(stdout(&out).contains("(matches stored)"), "{name} {flag:?}: {}", stdout(&out));
        }
    }
}

#[test]
fn an_export_optimized_for_the_simd_backend_matches_its_stored_output() {
    let dir = common::root().join("fixtures/exports");
    let model = dir.join("bert.legacy.onnx");
    let stored = dir.join("bert.legacy.output_0.npy");
    for flag in [None, Some("--no-optimize")] {
        let mut args: Vec<String> = vec!["run".into(), model.to_str().unwrap().into()];
        args.extend(export_inputs("bert.legacy", &BERT_INPUTS));
        args.extend(["--compare".to_string(), stored.to_str().unwrap().to_string()]);
        args.extend(flag.map(String::from));
        let out = diamond(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(0), "{flag:?}: {}", stderr(&out));
        assert!(stdout(&out).contains("(matches stored)"), "{flag:?}: {}", stdout(&out));
    }
}

#[test]
fn model_local_functions_run_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::root().join("fixtures/check/local_function.onnx");
    // ScaledTranspose(x) = LeakyRelu(Transpose(x) * 2, alpha 0), called twice with different shapes
    let a = f32_npy(dir.path(), "a.npy", &[2, 3], &[1.0, -2.0, 3.0, 4.0, 5.0, -6.0]);
    let b = f32_npy(dir.path(), "b.npy", &[1, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
    let out_dir = dir.path().join("out");
    let out = diamond(&[
        "run",
        model.to_str().unwrap(),
        "--input",
        &input("a", &a),
        "--input",
        &input("b", &b),
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (_, ya) = read_f32_npy(&out_dir.join("ya.npy"));
    assert_eq!(ya, vec![2.0, 8.0, 0.0, 10.0, 6.0, 0.0]);
    let (header, yb) = read_f32_npy(&out_dir.join("yb.npy"));
    assert!(header.contains("'shape': (5, 1)"), "{header}");
    assert_eq!(yb, vec![2.0, 4.0, 6.0, 8.0, 10.0]);
}

#[test]
fn malformed_models_never_crash_the_executor() {
    // Every model of the malformed corpus either runs on random inputs or is
    // refused with exit 2 and one error line; sizes the data asks for
    // (a 2^62-element Range, a 2^80-element Expand) are refused before
    // anything is allocated.
    let dir = common::root().join("fixtures/malformed");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "onnx")) {
        let out = diamond(&["run", file.to_str().unwrap(), "--random"]);
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{}: {err}", file.display());
        match out.status.code() {
            Some(0) => {}
            Some(2) => {
                assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{}: {err}", file.display())
            }
            other => panic!("{}: exit {other:?}: {err}", file.display()),
        }
    }
    let huge = diamond(&["run", dir.join("huge_range.onnx").to_str().unwrap()]);
    assert!(stderr(&huge).contains("exceeds the executor's limit"), "{}", stderr(&huge));
}

#[test]
fn dump_writes_intermediate_values() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::root().join("fixtures/light/light_squeezenet.onnx");
    let out_dir = dir.path().join("out");
    let out = diamond(&["run", model.to_str().unwrap(), "--random", "--dump", "r1", "-o", out_dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (header, values) = read_f32_npy(&out_dir.join("r1.npy"));
    assert!(header.contains("'shape': (1, 64, 111, 111)"), "{header}");
    assert!(values.iter().all(|v| *v >= 0.0), "r1 is a Relu output");
    assert!(out_dir.join("softmaxout_1.npy").is_file());
    let no_dir = diamond(&["run", model.to_str().unwrap(), "--random", "--dump-all"]);
    assert_eq!(no_dir.status.code(), Some(2), "--dump-all needs -o");
}

/// The `--input` arguments feeding an export its sample inputs (`<stem>.input_<i>.npy`, in order).
fn export_inputs(stem: &str, names: &[&str]) -> Vec<String> {
    let dir = common::root().join("fixtures/exports");
    let mut args = Vec::new();
    for (i, name) in names.iter().enumerate() {
        args.push("--input".to_string());
        args.push(input(name, dir.join(format!("{stem}.input_{i}.npy")).to_str().unwrap()));
    }
    args
}

const BERT_INPUTS: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

#[test]
fn the_peak_is_reported_beside_the_plans_prediction() {
    let model = common::root().join("fixtures/exports/bert.legacy.onnx");
    let m = model.to_str().unwrap();
    // The plan predicts the reference executor's peak; the SIMD backend
    // keeps initializers for the next run and reports its own.
    let mut args = vec!["run", m, "--json", "--backend", "reference"];
    let inputs = export_inputs("bert.legacy", &BERT_INPUTS);
    args.extend(inputs.iter().map(String::as_str));
    let simd = diamond(&args.iter().copied().filter(|a| !["--backend", "reference"].contains(a)).collect::<Vec<_>>());
    let simd: serde_json::Value = serde_json::from_slice(&simd.stdout).unwrap();
    assert_eq!(simd["backend"], "simd");
    assert!(simd["peak_bytes"].as_u64().unwrap() > 0);
    let out = diamond(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["backend"], "reference");
    let measured = doc["peak_bytes"].as_u64().unwrap();
    assert!(measured > 0);
    assert_eq!(doc["predicted_peak_bytes"].as_u64(), Some(measured), "{doc}");
    assert_eq!(doc["bindings"], serde_json::json!({ "batch": 2, "seq": 7 }));
    assert_eq!(doc["prediction_partial"], serde_json::json!([]));
    let text = diamond(&args[..args.len()].iter().copied().filter(|a| *a != "--json").collect::<Vec<_>>());
    assert!(
        stdout(&text).contains(&format!("peak live bytes: {measured} (predicted {measured})")),
        "{}",
        stdout(&text)
    );

    // NonZero's output size depends on the data: no prediction, and the reason.
    let case = common::root().join("fixtures/onnx-node/test_nonzero_example");
    let model = case.join("model.onnx");
    let data = case.join("test_data_set_0");
    let out = diamond(&["run", model.to_str().unwrap(), "--input", data.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["peak_bytes"].as_u64().unwrap() > 0);
    assert_eq!(doc["predicted_peak_bytes"], serde_json::Value::Null);
    let why = doc["prediction_partial"][0].as_str().unwrap();
    assert!(why.contains("'result' axis 1: its size depends on the data"), "{why}");
    let text = diamond(&["run", model.to_str().unwrap(), "--input", data.to_str().unwrap()]);
    assert!(
        stdout(&text).contains("(not predicted: 'result' axis 1: its size depends on the data)"),
        "{}",
        stdout(&text)
    );
}

#[test]
fn fed_shapes_that_break_an_implied_bound_exit_2_naming_input_axis_and_rule() {
    // bert's 64-row position table implies seq ≤ 64; seq 65 is refused before running.
    let dir = tempfile::tempdir().unwrap();
    // all ones: a valid token id, attention mask and token type
    let long = npy(dir.path(), "long.npy", "<i8", &[2, 65], &1i64.to_le_bytes().repeat(130));
    let model = common::root().join("fixtures/exports/bert.legacy.onnx");
    let m = model.to_str().unwrap();
    let args: Vec<String> = BERT_INPUTS.iter().flat_map(|n| ["--input".to_string(), input(n, &long)]).collect();
    let mut all = vec!["run", m];
    all.extend(args.iter().map(String::as_str));
    rejected(
        &all,
        "input_ids",
        "axis 1: binds 'seq' to 65, but the model assumes seq ≤ 64 (node '/inner/model/embeddings/Add_1' (Add)",
    );
    let out = diamond(&all);
    assert!(stderr(&out).contains("[rule: implied-bound]"), "{}", stderr(&out));
    // seq 64 runs.
    let at_bound = npy(dir.path(), "at_bound.npy", "<i8", &[2, 64], &1i64.to_le_bytes().repeat(128));
    let args: Vec<String> = BERT_INPUTS.iter().flat_map(|n| ["--input".to_string(), input(n, &at_bound)]).collect();
    let mut all = vec!["run", m];
    all.extend(args.iter().map(String::as_str));
    let out = diamond(&all);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("last_hidden_state: float[2,64,32]"), "{}", stdout(&out));
}

#[test]
fn sequence_inputs_come_from_a_directory_or_a_sequence_proto() {
    let case = common::root().join("fixtures/onnx-node/test_sequence_insert_at_back");
    let model = case.join("model.onnx");
    let m = model.to_str().unwrap();
    let data = case.join("test_data_set_0");
    // The node-test directory, matched as --bind does: input_0.pb is a SequenceProto.
    let out = diamond(&["run", m, "--input", data.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("output_sequence: sequence of 4 int64 tensor(s) [4] [3] [2] [3]"),
        "{}",
        stdout(&out)
    );
    // The same SequenceProto by name, and the inserted tensor from .pb.
    let proto = data.join("input_0.pb");
    let tensor = data.join("input_1.pb");
    let by_name = diamond(&[
        "run",
        m,
        "--input",
        &input("sequence", proto.to_str().unwrap()),
        "--input",
        &input("tensor", tensor.to_str().unwrap()),
    ]);
    assert_eq!(stdout(&by_name), stdout(&out), "{}", stderr(&by_name));
    // A directory of .npy files, in name order (b before c whatever their creation order).
    let dir = tempfile::tempdir().unwrap();
    let seq = dir.path().join("seq");
    std::fs::create_dir(&seq).unwrap();
    npy(&seq, "c.npy", "<i8", &[1], &9i64.to_le_bytes());
    npy(&seq, "b.npy", "<i8", &[2], &[1i64.to_le_bytes(), 2i64.to_le_bytes()].concat());
    let out_dir = dir.path().join("out");
    let out = diamond(&[
        "run",
        m,
        "--input",
        &input("sequence", seq.to_str().unwrap()),
        "--input",
        &input("tensor", tensor.to_str().unwrap()),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["outputs"][0]["length"], 3);
    assert_eq!(doc["outputs"][0]["shapes"], serde_json::json!([[2], [1], [3]]));
    // two fed tensors (2 + 1 elements) and the inserted one (3), then the output sequence (6): 96 bytes
    assert_eq!(doc["peak_bytes"], 96);
    assert_eq!(doc["predicted_peak_bytes"], serde_json::Value::Null, "the output is a sequence");
    assert!(!out_dir.exists());
    // One .npy file is one tensor, not a sequence.
    let one = npy(dir.path(), "one.npy", "<i8", &[1], &9i64.to_le_bytes());
    rejected(
        &["run", m, "--input", &input("sequence", &one), "--input", &input("tensor", tensor.to_str().unwrap())],
        "sequence",
        "a sequence is a directory of tensor files or a .pb SequenceProto",
    );
}

#[test]
fn bfloat16_and_float8_outputs_are_written_as_float32() {
    for (case, dtype) in
        [("test_cast_FLOAT_to_BFLOAT16", "bfloat16"), ("test_cast_FLOAT_to_FLOAT8E4M3FN", "float8e4m3fn")]
    {
        let dir = common::root().join("fixtures/onnx-node").join(case);
        let model = dir.join("model.onnx");
        let m = model.to_str().unwrap();
        let data = dir.join("test_data_set_0");
        let tmp = tempfile::tempdir().unwrap();
        let out_dir = tmp.path().join("out");
        let out = diamond(&["run", m, "--input", data.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{case}: {}", stderr(&out));
        let written = out_dir.join("output.npy");
        let note =
            format!("note: {} holds float32: NumPy has no {dtype} (each value widens exactly)", written.display());
        assert!(stdout(&out).contains(&note), "{case}: {}", stdout(&out));
        // The file is float32 holding exactly the stored values.
        let (header, values) = read_f32_npy(&written);
        let stored = diamond_importers::tensor_file::read_tensor_file(&data.join("output_0.pb")).unwrap();
        let stored = diamond_runtime::Tensor::from_ir(&stored).unwrap();
        let dims: Vec<String> = stored.shape.iter().map(usize::to_string).collect();
        assert!(header.contains(&format!("'shape': ({})", dims.join(", "))), "{header}");
        let stored = stored.to_f64s().unwrap();
        assert_eq!(values.len(), stored.len());
        for (i, (&got, &want)) in values.iter().zip(&stored).enumerate() {
            assert!(
                f64::from(got) == want || (got.is_nan() && want.is_nan()),
                "{case}: element {i}: {got}, stored {want}"
            );
        }
        // The written directory compares equal to a later run; JSON says what the file holds.
        let again = diamond(&["run", m, "--input", data.to_str().unwrap(), "--compare", out_dir.to_str().unwrap()]);
        assert_eq!(again.status.code(), Some(0), "{case}: {}", stderr(&again));
        assert!(stdout(&again).contains("(matches stored)"), "{case}: {}", stdout(&again));
        let json_dir = tmp.path().join("json");
        let json = diamond(&["run", m, "--input", data.to_str().unwrap(), "-o", json_dir.to_str().unwrap(), "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(doc["written"][0]["dtype"], dtype);
        assert_eq!(doc["written"][0]["file_dtype"], "float");
        assert!(doc["written"][0]["note"].as_str().unwrap().contains("widens exactly"), "{doc}");
    }
}

#[test]
fn lower_emits_kernel_programs_and_run_picks_the_backend() {
    let model = common::root().join("fixtures/exports/bert.legacy.onnx");
    let m = model.to_str().unwrap();
    let out = diamond(&["lower", m, "--emit", "kernels"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // the embeddings' sums fuse with their LayerNormalization, though the position
    // embeddings' length is spelt min(max positions, seq) and the space's seq
    assert!(
        text.contains(
            "(Add '/inner/model/embeddings/Add', Add '/inner/model/embeddings/Add_1', LayerNormalization '/inner/model/embeddings/LayerNorm/LayerNormalization')"
        ),
        "{text}"
    );
    assert!(text.contains("space [d0=batch, d1=seq, d2=32] reduce [d2]"), "{text}");
    assert!(text.contains("contraction MatMul"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = diamond(&["lower", m, "-o", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = std::fs::read_to_string(dir.path().join("k0.txt")).unwrap();
    assert!(first.starts_with("kernel k0 "), "{first}");
    assert_eq!(diamond(&["lower", m, "--emit", "ptx"]).status.code(), Some(2));
    assert_eq!(diamond(&["run", m, "--backend", "gpu"]).status.code(), Some(2));
    // The portable code paths (a machine without AVX2) give the same outputs.
    let mut args = vec!["run", m, "--json"];
    let inputs = export_inputs("bert.legacy", &BERT_INPUTS);
    args.extend(inputs.iter().map(String::as_str));
    let simd = diamond(&args);
    let portable = Command::new(env!("CARGO_BIN_EXE_diamond")).args(&args).env("DIAMOND_SIMD", "off").output().unwrap();
    assert_eq!(simd.status.code(), Some(0), "{}", stderr(&simd));
    assert_eq!(portable.status.code(), Some(0), "{}", stderr(&portable));
    let (a, b): (serde_json::Value, serde_json::Value) =
        (serde_json::from_slice(&simd.stdout).unwrap(), serde_json::from_slice(&portable.stdout).unwrap());
    for k in 0..2 {
        for stat in ["min", "max"] {
            let (x, y) = (a["outputs"][k][stat].as_f64().unwrap(), b["outputs"][k][stat].as_f64().unwrap());
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "output {k} {stat}: {x} vs {y}");
        }
    }
}

/// An input declared `[-1, 3, ?, ?]` (open axes, as paddle2onnx writes
/// them) runs at unequal height and width: each open axis binds a symbol
/// of its own (`x.2`, `x.3`), and no kernel program falls back to the
/// reference kernels over them.
#[test]
fn open_input_axes_bind_one_size_each() {
    let model = common::root().join("fixtures/synthetic/unset_dims.onnx");
    let m = model.to_str().unwrap();
    for shape in ["x=1,3,48,192", "x=2,3,64,40"] {
        let mut bound = Vec::new();
        for backend in ["simd", "reference"] {
            let out = diamond(&["run", m, "--random", "--input-shape", shape, "--json", "--backend", backend]);
            assert_eq!(out.status.code(), Some(0), "{shape} on {backend}: {}", stderr(&out));
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if backend == "simd" {
                assert_eq!(doc["fallbacks"], serde_json::json!([]), "{shape}: {doc}");
            }
            if backend == "reference" {
                assert_eq!(doc["predicted_peak_bytes"], doc["peak_bytes"], "{shape}: {doc}");
            }
            bound.push(doc["bindings"].clone());
        }
        let dims: Vec<u64> = shape[2..].split(',').map(|d| d.parse().unwrap()).collect();
        let want = serde_json::json!({ "x.0": dims[0], "x.2": dims[2], "x.3": dims[3] });
        assert_eq!(bound, [want.clone(), want]);
    }
}

/// `fixtures/synthetic/NAME`.
fn synthetic(name: &str) -> String {
    format!("{}/fixtures/synthetic/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn half_precision_models_run_on_the_fast_kernels_to_onnxruntimes_outputs() {
    // float16: the simd backend (f32 inside, converted at the edges) against onnxruntime's stored outputs
    for stem in ["half_resnet18.f16", "half_vit.f16"] {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2 {
            let stored = synthetic(&format!("{stem}.output_{i}.npy"));
            if Path::new(&stored).exists() {
                std::fs::copy(&stored, dir.path().join(format!("output_{i}.npy"))).unwrap();
            }
        }
        let model = synthetic(&format!("{stem}.onnx"));
        let input = format!("pixel_values={}", synthetic(&format!("{stem}.input_0.npy")));
        let compare = dir.path().to_str().unwrap();
        let out =
            diamond(&["run", &model, "--input", &input, "--compare", compare, "--rtol", "1e-2", "--atol", "1e-3"]);
        assert!(out.status.success(), "{stem}: {}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains("float16[2,"), "{stem}: the outputs keep their type: {}", stdout(&out));
        let json = diamond(&["run", &model, "--input", &input, "--json"]);
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let float_fallbacks: Vec<&serde_json::Value> =
            doc["fallbacks"].as_array().unwrap().iter().filter(|f| f["float"] == true).collect();
        assert!(float_fallbacks.is_empty(), "{stem}: {float_fallbacks:?}");
    }
    // bfloat16 (onnxruntime's CPU provider runs few bfloat16 operators): against the reference executor
    let dir = tempfile::tempdir().unwrap();
    let model = synthetic("half_vit.bf16.onnx");
    let out_dir = dir.path().to_str().unwrap();
    let reference = diamond(&["run", &model, "--backend", "reference", "--random", "--seed", "3", "-o", out_dir]);
    assert!(reference.status.success(), "{}", stderr(&reference));
    let simd =
        diamond(&["run", &model, "--random", "--seed", "3", "--compare", out_dir, "--rtol", "0.05", "--atol", "0.02"]);
    assert!(simd.status.success(), "{}{}", stdout(&simd), stderr(&simd));
    assert!(stdout(&simd).contains("bfloat16[1,17,32]"), "{}", stdout(&simd));
}

#[test]
fn if_branches_run_prepared_on_the_simd_backend_and_agree_with_the_reference() {
    let model = synthetic("control_if.onnx");
    let x = format!("x={}", synthetic("control_if.x.npy"));
    for branch in ["then", "else"] {
        let cond = format!("use_conv={}", synthetic(&format!("control_if.{branch}.npy")));
        let dir = tempfile::tempdir().unwrap();
        let stored = dir.path().to_str().unwrap();
        let reference =
            diamond(&["run", &model, "--backend", "reference", "--input", &x, "--input", &cond, "-o", stored]);
        assert!(reference.status.success(), "{branch}: {}", stderr(&reference));
        let simd = diamond(&["run", &model, "--input", &x, "--input", &cond, "--compare", stored, "--json"]);
        assert!(simd.status.success(), "{branch}: {}{}", stdout(&simd), stderr(&simd));
        let doc: serde_json::Value = serde_json::from_slice(&simd.stdout).unwrap();
        assert_eq!(doc["fallbacks"], serde_json::json!([]), "{branch}: {doc}");
        assert_eq!(doc["reference_share"], 0.0, "{branch}: {doc}");
        let bench = diamond(&[
            "bench",
            &model,
            "--input",
            &x,
            "--input",
            &cond,
            "--json",
            "--profile",
            "--runs",
            "2",
            "--strict",
        ]);
        assert!(bench.status.success(), "{branch}: {}", stderr(&bench));
        let doc: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
        assert_eq!(doc["profile_ms"]["steps"][0]["kind"], "simd branch", "{branch}: {doc}");
    }
}

/// Every model of the benchmark zoo's committed sample
/// (`fixtures/bench/zoo/sample/`: an If-graph VAD, a paddle2onnx OCR
/// classifier, a scikit-learn ensemble, a float16 CNN, a small BERT) runs on
/// the simd backend to onnxruntime's stored outputs, with the tolerance of
/// its type, and no float step falls back to the reference kernels.
#[test]
fn the_zoo_sample_runs_on_the_simd_backend_to_onnxruntimes_outputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bench/zoo/sample");
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("index.json")).unwrap()).unwrap();
    let models = index["models"].as_array().expect("a list of models");
    assert!(models.len() >= 5, "{index}");
    for m in models {
        let path = root.join(m["path"].as_str().unwrap());
        let stem = path.to_str().unwrap().trim_end_matches(".onnx").to_string();
        let dir = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = vec!["run".into(), path.to_str().unwrap().into()];
        for (i, input) in m["inputs"].as_array().unwrap().iter().enumerate() {
            args.push("--input".into());
            args.push(format!("{}={stem}.input_{i}.npy", input["name"].as_str().unwrap()));
        }
        for i in 0..m["outputs"].as_array().unwrap().len() {
            std::fs::copy(format!("{stem}.output_{i}.npy"), dir.path().join(format!("output_{i}.npy"))).unwrap();
        }
        let (rtol, atol) = if m["dtype"] == "float16" { ("1e-2", "1e-3") } else { ("1e-3", "1e-5") };
        args.extend(["--compare".into(), dir.path().to_str().unwrap().into(), "--rtol".into(), rtol.into()]);
        args.extend(["--atol".into(), atol.into(), "--json".into()]);
        let out = diamond(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{}: {}{}", m["name"], stdout(&out), stderr(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let float: Vec<&serde_json::Value> =
            doc["fallbacks"].as_array().unwrap().iter().filter(|f| f["float"] == true).collect();
        assert!(float.is_empty(), "{}: {float:?}", m["name"]);
    }
}
