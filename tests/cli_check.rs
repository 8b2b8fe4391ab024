//! `diamond check`: exit codes, the JSON schema, diagnostics naming the node,
//! symbolic shapes through shape arithmetic, inputs inferred from use, `--bind`.

use serde_json::Value;
use std::process::{Command, Output};

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).arg("check").args(args).output().expect("runs diamond")
}

fn fixture(name: &str) -> String {
    format!("{}/fixtures/check/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn json(args: &[&str]) -> (Value, i32) {
    let out = check(args);
    let v = serde_json::from_slice(&out.stdout).expect("check --json prints JSON");
    (v, out.status.code().unwrap_or(-1))
}

#[test]
fn a_broadcast_conflict_exits_1_naming_the_node_and_op() {
    let (v, code) = json(&[&fixture("broadcast_conflict.onnx"), "--json"]);
    assert_eq!(code, 1);
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "one root cause, one error: {diags:?}");
    let d = &diags[0];
    assert_eq!(d["severity"], "error");
    assert_eq!(d["code"], "broadcast-conflict");
    assert_eq!(d["node"], "add1");
    assert_eq!(d["op"], "Add");
    assert!(d["chain"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().contains("input 1")));
    assert_eq!(v["inputs"], serde_json::json!(["x", "y"]));
    assert_eq!(v["outputs"], serde_json::json!(["z"]));
    assert_eq!(v["values"]["x"]["dtype"], "float32");
    assert_eq!(v["values"]["x"]["shape"], serde_json::json!([3, 4]));
}

#[test]
fn a_symbolic_batch_survives_reshape_of_shape_arithmetic() {
    let (v, code) = json(&[&fixture("dynamic_reshape.onnx"), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["diagnostics"], serde_json::json!([]));
    assert_eq!(v["values"]["target"]["shape"], serde_json::json!([3]));
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!(["batch", "2*seq", 64]));
    assert_eq!(v["values"]["y"]["dtype"], "float32");
}

#[test]
fn an_unknown_operator_warns_and_leaves_its_outputs_unknown() {
    let (v, code) = json(&[&fixture("custom_op.onnx"), "--json"]);
    assert_eq!(code, 0);
    let d = &v["diagnostics"][0];
    assert_eq!(d["severity"], "warning");
    assert_eq!(d["code"], "unsupported-op");
    assert!(d["message"].as_str().unwrap().contains("Frobnicate"));
    assert_eq!(v["values"]["f"]["shape"], Value::Null);
    assert_eq!(v["values"]["y"]["shape"], Value::Null, "never a silent guess downstream of an unknown");
}

#[test]
fn a_declared_output_shape_is_a_claim_that_is_checked() {
    let (v, code) = json(&[&fixture("declared_mismatch.onnx"), "--json"]);
    assert_eq!(code, 1);
    assert_eq!(v["diagnostics"][0]["code"], "declared-shape-mismatch");
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!([2, 3]));
}

#[test]
fn input_sizes_missing_from_the_file_are_inferred_from_use() {
    let (v, code) = json(&[&fixture("inferred_from_use.onnx"), "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["values"]["x"]["shape"], serde_json::json!([2, 3]));
    assert_eq!(v["inferred_from_use"], serde_json::json!(["x"]));
}

#[test]
fn text_output_lists_values_and_renders_diagnostics() {
    let out = check(&[&fixture("broadcast_conflict.onnx")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("error[broadcast-conflict]"), "{text}");
    assert!(text.contains("x  float [3, 4]"), "{text}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bind_reads_node_suite_inputs_and_rejects_unmatched_files() {
    let case = format!("{}/fixtures/onnx-node/test_add_bcast", env!("CARGO_MANIFEST_DIR"));
    let (v, code) = json(&[&format!("{case}/model.onnx"), "--json", "--bind", &format!("{case}/test_data_set_0")]);
    assert_eq!(code, 0);
    assert_eq!(v["values"]["sum"]["shape"], serde_json::json!([3, 4, 5]));
    let out = check(&[&fixture("custom_op.onnx"), "--bind", &format!("{case}/test_data_set_0/input_1.pb")]);
    assert_eq!(out.status.code(), Some(2), "input_1 has no counterpart in a one-input model");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no graph input matches"));
}

#[test]
fn unreadable_models_exit_2() {
    let out = check(&["/nonexistent/model.onnx"]);
    assert_eq!(out.status.code(), Some(2));
    let bad = std::env::temp_dir().join(format!("diamond-check-bad-{}.onnx", std::process::id()));
    std::fs::write(&bad, b"\x08\x07\x12\xff\xff").unwrap();
    let out = check(&[bad.to_str().unwrap()]);
    std::fs::remove_file(&bad).unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn model_local_functions_expand_per_call_site() {
    let (v, code) = json(&[&fixture("local_function.onnx"), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["values"]["ya"]["shape"], serde_json::json!([3, 2]));
    assert_eq!(v["values"]["yb"]["shape"], serde_json::json!([5, "n"]));
    assert_eq!(v["values"]["yb"]["dtype"], "float32");
}

#[test]
fn if_outputs_join_their_branches_and_name_subgraph_values() {
    let (v, code) = json(&[&fixture("if_branches.onnx"), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!(["n", null]), "axis 1 is 4 or 8");
    assert_eq!(v["values"]["branch/then_branch/t"]["shape"], serde_json::json!(["n", 4]));
    assert_eq!(v["values"]["branch/else_branch/e"]["shape"], serde_json::json!(["n", 8]));
}

#[test]
fn cycles_and_dangling_names_are_malformed_input_exit_2() {
    for (name, what) in [("cycle.onnx", "cycle"), ("dangling.onnx", "'nowhere'")] {
        let out = check(&[&fixture(name)]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("the graph is malformed") && stderr.contains(what), "{name}: {stderr}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("error[invalid-graph]"), "{name}: {text}");
    }
}

#[test]
fn invalid_attributes_and_types_are_reported_at_their_node() {
    let (v, code) = json(&[&fixture("invalid_attributes.onnx"), "--json"]);
    assert_eq!(code, 1, "{v}");
    let found: Vec<(String, String)> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["code"].as_str().unwrap().to_string(), d["node"].as_str().unwrap_or("").to_string()))
        .collect();
    let want = [
        ("invalid-attribute", "bad_perm"),
        ("invalid-attribute", "bad_axis"),
        ("invalid-attribute", "bad_split"),
        ("dtype-mismatch", "mixed_types"),
    ];
    for (code, node) in want {
        assert!(found.iter().any(|(c, n)| c == code && n == node), "{code} at {node} missing from {found:?}");
    }
    assert_eq!(found.len(), 4, "one diagnostic per fault: {found:?}");
    assert_eq!(v["values"]["t"]["shape"], Value::Null, "no shape is guessed for an invalid node");
}

#[test]
fn slicing_a_fixed_table_by_a_dynamic_length_is_an_implied_bound() {
    let (v, code) = json(&[&fixture("implied_bound.onnx"), "--json"]);
    assert_eq!(code, 0, "an assumption is a warning: {v}");
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["code"], "implied-bound");
    assert_eq!(diags[0]["severity"], "warning");
    assert_eq!(diags[0]["node"], "add_positions");
    assert!(diags[0]["message"].as_str().unwrap().contains("seq ≤ 512"), "{}", diags[0]["message"]);
    assert_eq!(v["values"]["pos_ids"]["shape"], serde_json::json!([1, "min(512, seq)"]));
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!(["batch", "seq", 64]));
}

#[test]
fn strict_units_reports_each_widened_stated_unit_and_only_those() {
    let (v, code) = json(&[&fixture("stated_unit.onnx"), "--json", "--strict-units"]);
    assert_eq!(code, 0, "widening is a warning: {v}");
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "the keepdims 1 of ReduceMean is computed, not stated: {diags:?}");
    assert_eq!(diags[0]["code"], "unit-axis-widened");
    assert_eq!(diags[0]["node"], "add_bias");
    assert_eq!(diags[0]["axis"], 0);
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!([3, 4]));
    let (plain, _) = json(&[&fixture("stated_unit.onnx"), "--json"]);
    assert_eq!(plain["diagnostics"], serde_json::json!([]), "without --strict-units a stated 1 broadcasts");
}

#[test]
fn dim_denotations_are_bases_that_never_meet_another_name() {
    let (v, code) = json(&[&fixture("denoted_axes.onnx"), "--json"]);
    assert_eq!(code, 1, "{v}");
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["code"], "broadcast-conflict");
    assert_eq!(diags[0]["node"], "scale_channels");
    assert_eq!(diags[0]["axis"], 0, "the axis of the scale vector itself");
    let message = diags[0]["message"].as_str().unwrap();
    assert!(message.contains("DATA_FEATURE") && message.contains("DATA_CHANNEL"), "{message}");
    // A denoted axis meets undenoted weights and constants of its size freely.
    let (clean, code) = json(&[&fixture("denoted_axes.clean.onnx"), "--json"]);
    assert_eq!(code, 0, "{clean}");
    assert_eq!(clean["diagnostics"], serde_json::json!([]));
    assert_eq!(clean["values"]["y"]["shape"], serde_json::json!(["batch", 4, 8, 8]));
}

#[test]
fn range_positions_into_a_fixed_table_imply_a_bound_on_the_sequence() {
    let (v, code) = json(&[&fixture("implied_bound_range.onnx"), "--json"]);
    assert_eq!(code, 0, "an assumption is a warning: {v}");
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0]["code"], "implied-bound");
    assert_eq!(diags[0]["node"], "pos_embed");
    assert_eq!(diags[0]["operand"], "input 1");
    assert!(diags[0]["message"].as_str().unwrap().contains("seq ≤ 512"), "{}", diags[0]);
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!(["batch", "seq", 64]));
    let (clean, code) = json(&[&fixture("implied_bound_range.clean.onnx"), "--json"]);
    assert_eq!(code, 0);
    assert_eq!(clean["diagnostics"], serde_json::json!([]), "a static 128 < 512 needs no assumption");
}

/// Each axis an input leaves open — no size, `dim_param: "?"`,
/// `dim_value: -1` — is a symbol of its own named by input and axis.
#[test]
fn open_input_axes_are_named_by_input_and_axis() {
    for file in ["unset_dims.onnx", "unset_dims_variants.onnx"] {
        let path = format!("{}/fixtures/synthetic/{file}", env!("CARGO_MANIFEST_DIR"));
        let (v, code) = json(&[&path, "--json"]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["values"]["x"]["shape"], serde_json::json!(["x.0", 3, "x.2", "x.3"]), "{file}");
        assert_eq!(v["values"]["pooled"]["shape"], serde_json::json!(["x.0", 8, 1, 1]), "{file}");
        assert_eq!(v["values"]["mean"]["shape"], serde_json::json!(["x.0", 8]), "{file}");
        assert_eq!(v["inferred_from_use"], serde_json::json!([]), "{file}");
        assert!(v["diagnostics"].as_array().unwrap().is_empty(), "{file}: {v}");
        let y = v["values"]["y"]["shape"].as_array().unwrap();
        assert!(y[2].as_str().unwrap().contains("x.2") && y[3].as_str().unwrap().contains("x.3"), "{file}: {y:?}");
    }
}

#[test]
fn an_einsum_result_broadcasts_from_the_right_like_any_closed_shape() {
    let (v, code) = json(&[&fixture("einsum_broadcast.clean.onnx"), "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["diagnostics"], serde_json::json!([]), "{v}");
    assert_eq!(v["values"]["y"]["shape"], serde_json::json!([1, 64, 2, 49, 49]), "{v}");
}
