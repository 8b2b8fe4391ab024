//! `diamond run` end to end: outputs summarized, written as `.npy` and
//! compared with stored ones; fed tensors that contradict the model's
//! declarations (type, rank, fixed size, a symbol bound two ways), missing
//! inputs and unreadable files give exit 2 naming the input; a light model
//! agrees with tract on the same input.

mod common;

use diamond_onnx_proto::tensor_shape_proto::{dimension, Dimension};
use diamond_onnx_proto::{
    type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
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

fn tensor_info(name: &str, elem: i32, dims: &[&str]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            denotation: None,
            value: Some(match d.parse::<i64>() {
                Ok(n) => dimension::Value::DimValue(n),
                Err(_) => dimension::Value::DimParam(d.to_string()),
            }),
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
        }),
        ..Default::default()
    }
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
        input: vec![tensor_info("x", 1, &["batch", "3"]), tensor_info("y", 1, &["batch", "3"])],
        output: vec![tensor_info("z", 1, &["batch", "3"])],
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
    assert!(text.contains("peak live bytes: 72"), "x, y and z live together: {text}");
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
    rejected(&["run", m, "--input", &input("x", &wide), "--input", &input("y", &good)], "x", "axis 1 has size 4");
    rejected(
        &["run", m, "--input", &input("x", &good), "--input", &input("y", &three)],
        "y",
        "binds 'batch' to 3, but input 'x' axis 0 bound it to 2",
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
    for name in ["light_squeezenet", "light_densenet121"] {
        let dir = common::root().join("fixtures/light");
        let model = dir.join(format!("{name}.onnx"));
        let stored = dir.join(format!("{name}_output_0.pb"));
        let out = diamond(&["run", model.to_str().unwrap(), "--random", "--compare", stored.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert!(stdout(&out).contains("(matches stored)"), "{name}: {}", stdout(&out));
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
