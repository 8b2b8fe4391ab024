//! Declared dims as exporters write them (`fixtures/check/gen_declared.py`):
//! invented names are unknowns that inference sizes, sympy expressions are
//! compared by normal form, a declaration that holds only under a condition
//! is an assumption, and `convert` writes the inferred sizes.

mod common;

use serde_json::Value;
use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn fixture(name: &str) -> String {
    format!("{}/fixtures/check/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn check_json(name: &str) -> (Value, i32) {
    let out = diamond(&["check", &fixture(name), "--json"]);
    (serde_json::from_slice(&out.stdout).expect("JSON"), out.status.code().unwrap_or(-1))
}

fn with_code<'a>(v: &'a Value, code: &str) -> Vec<&'a Value> {
    v["diagnostics"].as_array().unwrap().iter().filter(|d| d["code"] == code).collect()
}

#[test]
fn invented_names_and_expressions_check_clean() {
    let (v, code) = check_json("declared_dims.onnx");
    assert_eq!(code, 0, "{v:#}");
    let errors: Vec<&Value> =
        v["diagnostics"].as_array().unwrap().iter().filter(|d| d["severity"] == "error").collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Each invented name is sized once, as an info note at its first place.
    let infos: Vec<&str> =
        with_code(&v, "declared-dim-resolved").iter().map(|d| d["message"].as_str().unwrap()).collect();
    assert_eq!(
        infos,
        [
            "'act' axis 0 (unk__2) is batch*seq",
            "'act' axis 1 (Reshape_out0_dim_1) is 8",
            "'flat' axis 0 (Flattenout0_dim_0) is batch",
            "'flat' axis 1 (Flattenout0_dim_1) is 8*seq",
        ]
    );
    assert!(with_code(&v, "declared-dim-resolved").iter().all(|d| d["severity"] == "info"));
    // `((batch*seq**2)//seq)` is batch*seq: no diagnostic about 'rows'.
    assert!(v["diagnostics"].as_array().unwrap().iter().all(|d| !d["message"].as_str().unwrap().contains("'rows'")));
    // `seq` against min(4, seq): an assumption, not an error.
    let bounds = with_code(&v, "implied-bound");
    assert_eq!(bounds.len(), 1, "{bounds:?}");
    assert_eq!(bounds[0]["severity"], "warning");
    assert_eq!(bounds[0]["node"], "slice");
    assert_eq!(bounds[0]["axis"], 1);
    assert!(bounds[0]["message"].as_str().unwrap().ends_with("they agree only when seq ≤ 4"), "{bounds:?}");
    // One invented name proven to be two sizes: a warning naming both.
    let clashes = with_code(&v, "declared-shape-mismatch");
    assert_eq!(clashes.len(), 1, "{clashes:?}");
    assert_eq!(clashes[0]["severity"], "warning");
    assert!(clashes[0]["message"].as_str().unwrap().contains("'unk__1' names one size, but the graph implies seq"));
    // The values report the inferred sizes, never the invented names.
    assert_eq!(v["values"]["flat"]["shape"], serde_json::json!(["batch", "8*seq"]));
    assert_eq!(v["values"]["act"]["shape"], serde_json::json!(["batch*seq", 8]));
}

#[test]
fn contradicting_integers_and_expressions_stay_errors() {
    let (v, code) = check_json("declared_dims_bad.onnx");
    assert_eq!(code, 1);
    let errors: Vec<(&str, &str)> = with_code(&v, "declared-shape-mismatch")
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| (d["node"].as_str().unwrap(), d["message"].as_str().unwrap()))
        .collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors.contains(&(
        "reshape",
        "declared shape of 'rows' disagrees with the graph: axis 0 is stated as 2*batch*seq but the graph implies batch*seq"
    )));
    assert!(errors.contains(&(
        "flatten",
        "declared shape of 'flat' disagrees with the graph: axis 1 is stated as 16 but the graph implies 8*seq"
    )));
    assert!(errors.iter().any(|(node, m)| *node == "slice" && m.contains("max(4, seq)")));
}

/// The declared shape of each named value of the written model's main graph.
fn declared_shapes(path: &std::path::Path) -> std::collections::HashMap<String, String> {
    let model = diamond_importers::onnx::load_model(path).unwrap();
    let graph = model.main_graph().unwrap();
    graph
        .value_info
        .iter()
        .chain(&graph.outputs)
        .filter_map(|vi| Some((graph.value_name(vi.value?).to_string(), common::declared_shape_text(vi.ty.as_ref()?)?)))
        .collect()
}

#[test]
fn convert_writes_inferred_sizes_over_invented_names() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m.onnx");
    let o = diamond(&["convert", &fixture("declared_dims.onnx"), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let shapes = declared_shapes(&out);
    // value_info: the invented names are replaced; a stated expression is kept as the file wrote it.
    assert_eq!(shapes["act"], "[batch*seq, 8]");
    assert_eq!(shapes["rows"], "[((batch*seq**2)//seq), 8]");
    // Outputs keep the file's names by default ...
    assert_eq!(shapes["flat"], "[Flattenout0_dim_0, Flattenout0_dim_1]");
    // ... and take the inferred sizes with --output-dims.
    let out2 = tmp.path().join("m2.onnx");
    let o = diamond(&["convert", &fixture("declared_dims.onnx"), "-o", out2.to_str().unwrap(), "--output-dims"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let shapes = declared_shapes(&out2);
    assert_eq!(shapes["flat"], "[batch, 8*seq]");
    // A name proven to be two sizes keeps each place's own inferred size.
    assert_eq!(shapes["swapped"], "[seq, batch, 8]");
}
