//! `diamond bench` end to end: `--json` prints one object with the model,
//! backend, threads, runs, latency statistics (min ≤ median ≤ p90), peak
//! bytes and tract's latency beside it; symbolic inputs take their sizes
//! from `--input-shape`; bad input (no such model, zero runs or threads, an
//! input file that does not exist, a shape the model contradicts) exits 2.
//! Every step that falls back to the reference kernels is reported with
//! its reason (`fixtures/synthetic/fallback_*.onnx`, one per reason), and
//! `--strict` refuses float ones with exit 1.

mod common;

use diamond_onnx_proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

/// `y = Relu(x)` with x: float[batch, 3].
fn relu_model(dir: &Path) -> PathBuf {
    let node = NodeProto {
        input: vec!["x".into()],
        output: vec!["y".into()],
        op_type: Some("Relu".into()),
        ..Default::default()
    };
    let graph = GraphProto {
        name: Some("relu".into()),
        node: vec![node],
        input: vec![common::tensor_info("x", 1, &["batch", "3"])],
        output: vec![common::tensor_info("y", 1, &["batch", "3"])],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(13) }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join("relu.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn json_gives_latency_peak_and_tract_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let model = relu_model(dir.path());
    let args = ["--json", "--runs", "5", "--warmup", "1", "--threads", "2", "--input-shape", "x=64,3"];
    for backend in ["reference", "simd"] {
        let out = diamond(&[&["bench", model.to_str().unwrap(), "--backend", backend][..], &args].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["model"], model.to_str().unwrap());
        assert_eq!(v["backend"], backend);
        assert_eq!(v["threads"], 2);
        assert_eq!(v["runs"], 5);
        for key in ["latency_ms", "tract_latency_ms"] {
            let l = &v[key];
            let (min, median, p90) =
                (l["min"].as_f64().unwrap(), l["median"].as_f64().unwrap(), l["p90"].as_f64().unwrap());
            assert!(0.0 < min && min <= median && median <= p90, "{key}: {l}");
        }
        assert!(v["tract_error"].is_null());
        let peak = v["peak_bytes"].as_u64().unwrap();
        if backend == "reference" {
            // the input (64×3 floats) and the output are live together
            assert!(peak >= 2 * 64 * 3 * 4, "{v}");
        } else {
            // the input dies at the Relu, which writes its output in place
            assert_eq!(peak, 64 * 3 * 4, "{v}");
        }
    }
}

#[test]
fn text_report_names_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let model = relu_model(dir.path());
    let out = diamond(&["bench", model.to_str().unwrap(), "--runs", "2", "--backend", "reference"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("latency: median") && text.contains("tract (1 thread): median"), "{text}");
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let model = relu_model(dir.path());
    let m = model.to_str().unwrap();
    let missing = dir.path().join("missing.onnx");
    let cases: [(&[&str], &str); 5] = [
        (&["bench", missing.to_str().unwrap()], "missing.onnx"),
        (&["bench", m, "--runs", "0"], "--runs"),
        (&["bench", m, "--threads", "0"], "--threads"),
        (&["bench", m, "--input", "x=/no/such.npy"], "x"),
        (&["bench", m, "--input-shape", "x=2,5"], "x"),
    ];
    for (args, needle) in cases {
        let out = diamond(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// `--profile` on a light CNN: every step of the session is listed once,
/// the step times add up to no more than the measured latency allows, and
/// the convolutions show as contraction steps with their node names (and
/// those of the programs folded into them).
#[test]
fn profile_lists_every_step_with_its_kind_and_nodes() {
    let model = common::root().join("fixtures/light/light_squeezenet.onnx");
    let args =
        ["bench", model.to_str().unwrap(), "--json", "--runs", "2", "--warmup", "1", "--threads", "1", "--profile"];
    let out = diamond(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let p = &v["profile_ms"];
    let steps = p["steps"].as_array().expect("steps");
    assert!(steps.len() >= 20, "{p}");
    let mut indices: Vec<u64> = steps.iter().map(|s| s["step"].as_u64().unwrap()).collect();
    indices.sort();
    assert_eq!(indices, (0..steps.len() as u64).collect::<Vec<_>>(), "each step once");
    let ms: Vec<f64> = steps.iter().map(|s| s["ms"].as_f64().unwrap()).collect();
    assert!(ms.windows(2).all(|w| w[0] >= w[1]), "slowest first: {ms:?}");
    let total = p["total"].as_f64().unwrap();
    assert!((total - ms.iter().sum::<f64>()).abs() < 1e-6 * total.max(1.0));
    // the steps run inside the measured runs: their mean cannot exceed the slowest run
    assert!(0.0 < total && total <= v["latency_ms"]["p90"].as_f64().unwrap() * 1.001, "{v}");
    // a convolution with the Relu folded into its epilogue lists both
    let conv = |o: &str| o == "Conv" || o.starts_with("Conv+");
    let convs = steps.iter().filter(|s| s["kind"] == "contraction" && s["ops"].as_str().is_some_and(conv)).count();
    assert!(convs >= 20, "{convs} conv steps: {p}");
    assert!(steps.iter().all(|s| !s["nodes"].as_str().unwrap().is_empty() || s["kind"] != "contraction"));
    let groups: f64 = p["groups"].as_array().unwrap().iter().map(|g| g["ms"].as_f64().unwrap()).sum();
    assert!((groups - total).abs() < 1e-6 * total.max(1.0));

    let text = diamond(&[&args[..2], &["--runs", "1", "--profile"]].concat());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("slowest steps:") && text.contains("contraction Conv"), "{text}");
}

/// `bench --json` on `fixtures/synthetic/fallback_NAME.onnx` (one run, no
/// warm-up, `extra` appended): the exit code and the JSON object.
fn fallback_bench(name: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let model = format!("{}/fixtures/synthetic/fallback_{name}.onnx", env!("CARGO_MANIFEST_DIR"));
    let mut args = vec!["bench", model.as_str(), "--json", "--runs", "1", "--warmup", "0", "--threads", "1"];
    args.extend_from_slice(extra);
    let out = diamond(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{name}: {e}: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), doc)
}

#[test]
fn every_fallback_is_reported_with_its_reason_and_strict_refuses_float_ones() {
    // (fixture, reason of its first fallback or None, whether it is float work)
    let cases = [
        ("unbound_extent", Some("unbound extent"), true),
        ("operand_type", Some("operand type"), false),
        ("empty_reduction", Some("view shape"), true),
        ("operator", None, false),
    ];
    for (name, reason, float) in cases {
        let (code, doc) = fallback_bench(name, &[]);
        assert_eq!(code, 0, "{name}: {doc}");
        let fallbacks = doc["fallbacks"].as_array().expect("a list");
        match reason {
            Some(reason) => {
                assert_eq!(fallbacks[0]["reason"], reason, "{name}: {doc}");
                assert_eq!(fallbacks[0]["float"], float, "{name}: {doc}");
                assert!(fallbacks[0]["detail"].as_str().is_some_and(|d| !d.is_empty()), "{name}: {doc}");
            }
            None => assert!(fallbacks.is_empty(), "{name}: {doc}"),
        }
        // every step of these models runs on the reference kernels but the
        // data-dependent Slice, which the session's own kernels run
        if name == "unbound_extent" {
            let share = doc["reference_share"].as_f64().unwrap();
            assert!(0.0 < share && share < 1.0, "{name}: {doc}");
        } else {
            assert_eq!(doc["reference_share"], 1.0, "{name}: {doc}");
        }
        let (strict, _) = fallback_bench(name, &["--strict"]);
        assert_eq!(strict, if float { 1 } else { 0 }, "{name} under --strict");
    }
    // the profile gives each reference step its reason; an operator no SIMD kernel computes is `operator`
    let (_, doc) = fallback_bench("operator", &["--profile"]);
    assert_eq!(doc["profile_ms"]["steps"][0]["reason"], "operator", "{doc}");
    assert_eq!(doc["profile_ms"]["reference_reasons"][0]["reason"], "operator", "{doc}");
    // --strict names the step and the condition
    let model = format!("{}/fixtures/synthetic/fallback_unbound_extent.onnx", env!("CARGO_MANIFEST_DIR"));
    let out = diamond(&["bench", &model, "--runs", "1", "--warmup", "0", "--strict"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--strict: 2 float step(s) fell back"), "{stderr}");
    assert!(stderr.contains("step #1 Pow [power]: unbound extent: the shape of 'm' is not known"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("note: 2 step(s) of the simd backend ran on the reference kernels"), "{stdout}");
}

#[test]
fn a_model_on_the_fast_kernels_reports_no_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let model = relu_model(dir.path());
    let out = diamond(&[
        "bench",
        model.to_str().unwrap(),
        "--json",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--input-shape",
        "x=64,3",
        "--strict",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["fallbacks"], serde_json::json!([]));
    assert_eq!(doc["reference_share"], 0.0, "{doc}");
}
