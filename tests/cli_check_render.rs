//! `diamond check`'s presentation: snapshots of the text report on every
//! fixture with diagnostics (colour off, as into a pipe), `--color`,
//! `--max-diagnostics`, `--deny-warnings`, and the SARIF file's structure.
//! Refresh the snapshots with `UPDATE_EXPECT=1`.

mod common;

use expect_test::{expect, Expect};
use serde_json::Value;
use std::process::{Command, Output};

/// Runs `diamond check` from the repository root with `NO_COLOR` unset.
fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond"))
        .current_dir(common::root())
        .env_remove("NO_COLOR")
        .arg("check")
        .args(args)
        .output()
        .expect("runs diamond")
}

/// The fixture's path relative to the repository root (the SARIF test wants the path as given).
fn fixture(name: &str) -> String {
    format!("fixtures/check/{name}")
}

#[track_caller]
fn check_text(name: &str, code: i32, expected: Expect) {
    let out = check(&[&fixture(name)]);
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    expected.assert_eq(&String::from_utf8(out.stdout).unwrap());
}

#[test]
fn a_broadcast_conflict_names_node_operand_axis_and_where_each_size_comes_from() {
    check_text(
        "broadcast_conflict.onnx",
        1,
        expect![[r#"
            x  float [3, 4]
            y  float [5]
            s  float [3, 4]
            z  float [3, 4]

            error[broadcast-conflict]: 5 cannot broadcast to 4: only the claim-free unit `_` broadcasts
             --> node 0 `add1` (Add), input 1, axis 0
              |
              = note: 5 comes from graph input 'y' axis 0
              = note: 4 comes from graph input 'x' axis 1
              = note: required by Add 'add1' (node 0) input 1: broadcasts to the output, axis 0
              = help: see: diamond explain broadcast-conflict

            4 values; 1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_declared_shape_mismatch_carries_help() {
    check_text(
        "declared_mismatch.onnx",
        1,
        expect![[r#"
            x  float [2, 3]
            y  float [2, 3]

            error[declared-shape-mismatch]: declared shape of 'y' disagrees with the graph: axis 1 is stated as 4 but the graph implies 3
             --> node 0 `relu` (Relu), output 0, axis 1
              |
              = note: declared [2, 4], inferred [2, 3]
              = help: fix or remove the declared shape of 'y' (value_info or graph output); see: diamond explain declared-shape-mismatch

            2 values; 1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn an_unsupported_op_is_a_warning_and_exits_0() {
    check_text(
        "custom_op.onnx",
        0,
        expect![[r#"
            x  float [2, 3]
            f  ? ?
            y  ? ?

            warning[unsupported-op]: diamond has no rule for 'Frobnicate' of domain 'com.example'; its outputs are unknown
             --> node 0 `frob` (Frobnicate)
              |
              = help: see: diamond explain unsupported-op

            3 values; 0 error(s), 1 warning(s)
        "#]],
    );
}

#[test]
fn every_invalid_attribute_is_reported_in_one_run() {
    check_text(
        "invalid_attributes.onnx",
        1,
        expect![[r#"
            x   float [2, 6]
            i   int64 [2, 6]
            t   float ?
            c   float ?
            s0  float ?
            s1  float ?
            a   float [2, 6]

            error[invalid-attribute]: perm [0, 0] is not a permutation of the 2 axes
             --> node 0 `bad_perm` (Transpose)
              |
              = help: see: diamond explain invalid-attribute

            error[invalid-attribute]: axis 2 is out of range for rank 2 (allowed -2..=1)
             --> node 1 `bad_axis` (Concat)
              |
              = help: see: diamond explain invalid-attribute

            error[invalid-attribute]: split sizes add up to 5 but the axis has size 6
             --> node 2 `bad_split` (Split)
              |
              = help: see: diamond explain invalid-attribute

            error[dtype-mismatch]: input 0 is float but input 1 is int64; they must have the same type
             --> node 3 `mixed_types` (Add)
              |
              = help: see: diamond explain dtype-mismatch

            8 values (1 initializers not listed; --json has them); 4 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_cycle_is_located_at_its_first_node() {
    check_text(
        "cycle.onnx",
        2,
        expect![[r#"
            x  float [2]
            a  float [2]
            b  float [2]
            y  float [2]

            error[invalid-graph]: the graph has a cycle: 3 node(s) on or after it cannot be ordered: Add 'first' (node 0), Relu 'second' (node 1), Relu 'third' (node 2)
             --> node 0 `first` (Add)
              |
              = help: see: diamond explain invalid-graph

            4 values; 1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_dangling_name_is_located_at_its_reader() {
    check_text(
        "dangling.onnx",
        2,
        expect![[r#"
            x        float [2]
            nowhere  ? ?
            y        float ?

            error[invalid-graph]: input 'nowhere' of Add 'add' (node 0) is not a graph input, an initializer, an outer-scope value or any node's output
             --> node 0 `add` (Add)
              |
              = help: see: diamond explain invalid-graph

            3 values; 1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_specialized_dynamic_axis_is_listed_under_assumptions() {
    check_text(
        "dynamic_specialized.onnx",
        0,
        expect![[r#"
            x  float [batch, 4]
            y  float [8, 4]
            z  float [batch, 4]

            warning[dynamic-axis-specialized]: dynamic axis batch assumed to be 8: `8 ⊑ batch` holds only when 8 = batch
             --> node 0 `add` (Add), input 1, axis 0
              |
              = note: batch comes from Add 'add' (node 0) input 0: broadcasts to the output, axis 0
              = note: required by Add 'add' (node 0) input 1: broadcasts to the output, axis 0
              = help: see: diamond explain dynamic-axis-specialized

            assumptions (the results hold only if these do):
              - dynamic axis batch assumed to be 8: `8 ⊑ batch` holds only when 8 = batch (node 0 `add` (Add), input 1, axis 0)

            3 values; 0 error(s), 1 warning(s)
        "#]],
    );
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let has_ansi = |args: &[&str]| String::from_utf8(check(args).stdout).unwrap().contains("\x1b[");
    let model = fixture("broadcast_conflict.onnx");
    assert!(has_ansi(&[&model, "--color", "always"]));
    assert!(!has_ansi(&[&model, "--color", "never"]));
    assert!(!has_ansi(&[&model]), "stdout is a pipe here: auto means no colour");
    let always = String::from_utf8(check(&[&model, "--color", "always"]).stdout).unwrap();
    assert!(always.contains("\x1b[1;31merror[broadcast-conflict]\x1b[0m"), "{always:?}");
    assert!(always.contains("\x1b[1;34m -->\x1b[0m"), "{always:?}");
    let json = String::from_utf8(check(&[&model, "--json", "--color", "always"]).stdout).unwrap();
    assert!(!json.contains("\x1b["), "JSON is never coloured");
}

#[test]
fn max_diagnostics_renders_the_first_n_and_counts_the_rest() {
    let out = check(&[&fixture("invalid_attributes.onnx"), "--max-diagnostics", "1"]);
    assert_eq!(out.status.code(), Some(1), "the exit code still reflects every error");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("error[").count(), 1, "{text}");
    assert!(text.contains("\n... and 3 more diagnostic(s) not shown (--max-diagnostics 1)"), "{text}");
    assert!(text.ends_with("; 4 error(s), 0 warning(s)\n"), "{text}");
    let all = check(&[&fixture("invalid_attributes.onnx"), "--max-diagnostics", "4"]);
    let text = String::from_utf8(all.stdout).unwrap();
    assert_eq!(text.matches("error[").count(), 4, "{text}");
    assert!(!text.contains("more diagnostic(s)"), "{text}");
    let json = check(&[&fixture("invalid_attributes.onnx"), "--json", "--max-diagnostics", "1"]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["diagnostics"].as_array().unwrap().len(), 4, "--json carries every diagnostic");
}

#[test]
fn deny_warnings_turns_a_warning_into_exit_1() {
    let model = fixture("custom_op.onnx");
    assert_eq!(check(&[&model]).status.code(), Some(0));
    let out = check(&[&model, "--deny-warnings"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: ") && stderr.contains("1 warning(s)"), "{stderr}");
    assert_eq!(check(&[&fixture("dynamic_reshape.onnx"), "--deny-warnings"]).status.code(), Some(0), "clean stays 0");
    let malformed = check(&[&fixture("cycle.onnx"), "--deny-warnings"]);
    assert_eq!(malformed.status.code(), Some(2), "malformed input stays 2");
}

#[test]
fn sarif_has_one_result_per_diagnostic_with_rules_levels_and_locations() {
    let dir = tempfile::tempdir().unwrap();
    for (name, code) in [
        ("broadcast_conflict.onnx", 1),
        ("invalid_attributes.onnx", 1),
        ("custom_op.onnx", 0),
        ("dynamic_reshape.onnx", 0),
    ] {
        let sarif = dir.path().join(format!("{name}.sarif"));
        let model = fixture(name);
        let out = check(&[&model, "--sarif", sarif.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(code), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&std::fs::read(&sarif).unwrap()).unwrap();
        let json: Value = serde_json::from_slice(&check(&[&model, "--json"]).stdout).unwrap();
        assert_sarif(&doc, &json["diagnostics"], &model);
    }
}

/// Checks the SARIF 2.1.0 structure of `doc` against the `--json` diagnostics of the same model.
#[track_caller]
fn assert_sarif(doc: &Value, diagnostics: &Value, model: &str) {
    assert_eq!(doc["version"], "2.1.0");
    assert!(doc["$schema"].as_str().unwrap().contains("sarif-schema-2.1.0"));
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "diamond");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    let rules = driver["rules"].as_array().unwrap();
    let rule_ids: Vec<&str> = rules.iter().map(|r| r["id"].as_str().unwrap()).collect();
    for rule in rules {
        assert!(!rule["shortDescription"]["text"].as_str().unwrap().is_empty());
        assert!(!rule["help"]["text"].as_str().unwrap().is_empty());
    }
    let results = runs[0]["results"].as_array().unwrap();
    let diagnostics = diagnostics.as_array().unwrap();
    assert_eq!(results.len(), diagnostics.len(), "one result per diagnostic");
    let mut used: Vec<&str> = Vec::new();
    for (r, d) in results.iter().zip(diagnostics) {
        let rule_id = r["ruleId"].as_str().unwrap();
        assert_eq!(rule_id, d["code"]);
        assert_eq!(rule_ids[r["ruleIndex"].as_u64().unwrap() as usize], rule_id);
        assert!(["error", "warning"].contains(&r["level"].as_str().unwrap()));
        assert_eq!(r["level"], d["severity"]);
        assert_eq!(r["message"]["text"], d["message"]);
        let at = &r["locations"][0];
        assert_eq!(at["physicalLocation"]["artifactLocation"]["uri"], model, "the path as given");
        let logical = &at["logicalLocations"][0];
        assert_eq!(logical["fullyQualifiedName"], d["node"]);
        assert_eq!(logical["kind"], "function");
        let related = r["relatedLocations"].as_array().unwrap();
        assert_eq!(related.len(), d["chain"].as_array().unwrap().len(), "one related location per note");
        if !used.contains(&rule_id) {
            used.push(rule_id);
        }
    }
    assert_eq!(rule_ids, used, "one rule per code used, in order of first use");
}

#[test]
fn sarif_to_an_unwritable_path_exits_2_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/out.sarif");
    let out = check(&[&fixture("broadcast_conflict.onnx"), "--sarif", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: cannot write SARIF to "), "{stderr}");
    let occupied = dir.path().join("a-directory");
    std::fs::create_dir(&occupied).unwrap();
    let out = check(&[&fixture("broadcast_conflict.onnx"), "--sarif", occupied.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("a-directory")], "no temporary file left behind");
}

/// `auto` colours a terminal unless `NO_COLOR` is set: run under a pseudo-terminal with util-linux `script`
/// (the check is skipped where `script` is missing).
#[test]
fn auto_colours_a_terminal_unless_no_color_is_set() {
    let on_tty = |no_color: Option<&str>| {
        let command = format!("{} check fixtures/check/custom_op.onnx", env!("CARGO_BIN_EXE_diamond"));
        let mut script = Command::new("script");
        script.current_dir(common::root()).env_remove("NO_COLOR").args(["-qec", &command, "/dev/null"]);
        if let Some(value) = no_color {
            script.env("NO_COLOR", value);
        }
        script
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let Some(coloured) = on_tty(None) else { return };
    assert!(coloured.contains("\x1b[1;33mwarning[unsupported-op]"), "{coloured:?}");
    assert!(!on_tty(Some("1")).unwrap().contains("\x1b["), "NO_COLOR=1 turns colour off");
    assert!(on_tty(Some("")).unwrap().contains("\x1b["), "an empty NO_COLOR does not");
}

#[test]
fn a_divisibility_assumption_is_a_warning_listed_with_the_assumptions() {
    let out = check(&["fixtures/diagnostics/reshape-divisibility.onnx"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    expect![[r#"
        x  float [batch, seq, 4]
        y  float [floor(batch*seq/2), 2, 4]

        warning[divisibility]: the -1 of the target shape is 4*batch*seq / 8 = floor(batch*seq/2): the reshape holds only when batch*seq is divisible by 2
         --> node 0 `reshape` (Reshape), input 1
          |
          = help: see: diamond explain divisibility

        assumptions (the results hold only if these do):
          - Reshape 'reshape' (node 0): the -1 of the target shape is 4*batch*seq / 8 = floor(batch*seq/2): the reshape holds only when batch*seq is divisible by 2 (node 0 `reshape` (Reshape), input 1)

        3 values (1 initializers not listed; --json has them); 0 error(s), 1 warning(s)
    "#]].assert_eq(&String::from_utf8(out.stdout).unwrap());
}

#[test]
fn a_wrong_transb_is_one_error_whose_help_names_the_fix() {
    let out = check(&["fixtures/diagnostics/gemm-transb.onnx"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    expect![[r#"
        a  float [2, 3]
        y  float [2, 3]

        error[dim-mismatch]: dimensions differ: 4 must equal 3
         --> node 0 `gemm` (Gemm), input 1, axis 0
          |
          = note: 4 comes from initializer 'b' axis 0
          = note: 3 comes from graph input 'a' axis 1
          = note: required by Gemm 'gemm' (node 0) input 1: a Gemm operand is a matrix sharing K, axis 0
          = note: same cause, also at input 2, axis 0: error[broadcast-conflict] 4 cannot broadcast to 3: only the claim-free unit `_` broadcasts
          = help: set transB=1 (currently 0): B [4, 3] is [N, K]; see: diamond explain dim-mismatch

        4 values (2 initializers not listed; --json has them); 1 error(s), 0 warning(s)
    "#]].assert_eq(&String::from_utf8(out.stdout).unwrap());
}

/// The detector-style stride chain: the warning states its size condition in
/// plain words, the sizes readable; `--json` keeps the exact condition beside it.
#[test]
fn a_stride_chain_condition_is_stated_in_plain_words() {
    check_text(
        "stride_chain.onnx",
        0,
        expect![[r#"
            x      float [1, 3, H, W]
            c1     float [1, 8, floor((H-1)/2)+1, floor((W-1)/2)+1]
            skip   float [1, 8, floor(floor((H-1)/2)/2)+1, floor(floor((W-1)/2)/2)+1]
            c3     float [1, 8, floor(floor(floor((H-1)/2)/2)/2)+1, floor(floor(floor((W-1)/2)/2)/2)+1]
            p4     float [1, 8, floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)+1, floor((floor(floor(floor((W-1)/2)/2)/2)-1)/2)+1]
            deep   float [1, 8, floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+1, floor(floor((floor(floor(floor((W-1)/2)/2)/2)-1)/2)/2)+1]
            up     float [1, 8, 8*floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+8, 8*floor(floor((floor(floor(floor((W-1)/2)/2)/2)-1)/2)/2)+8]
            fused  float [1, 8, floor(floor((H-1)/2)/2)+1, floor(floor((W-1)/2)/2)+1]
            y      float [1, 16, floor(floor((H-1)/2)/2)+1, floor(floor((W-1)/2)/2)+1]

            warning[dynamic-axis-specialized]: dynamic axis 8*ceil((H-8)/32) assumed to be ceil(H/4): `8*ceil((H-8)/32) ⊑ ceil(H/4)` holds only when H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
             --> node 6 `fuse` (Add), input 1, axis 2
              |
              = note: ceil(H/4) comes from Add 'fuse' (node 6) input 0: broadcasts to the output, axis 2
              = note: required by Add 'fuse' (node 6) input 1: broadcasts to the output, axis 2
              = help: see: diamond explain dynamic-axis-specialized

            warning[dynamic-axis-specialized]: dynamic axis 8*ceil((W-8)/32) assumed to be ceil(W/4): `8*ceil((W-8)/32) ⊑ ceil(W/4)` holds only when W mod 32 is 0 or at least 29 (in particular when W is a multiple of 32)
             --> node 6 `fuse` (Add), input 1, axis 3
              |
              = note: ceil(W/4) comes from Add 'fuse' (node 6) input 0: broadcasts to the output, axis 3
              = note: required by Add 'fuse' (node 6) input 1: broadcasts to the output, axis 3
              = help: see: diamond explain dynamic-axis-specialized

            assumptions (the results hold only if these do):
              - dynamic axis 8*ceil((H-8)/32) assumed to be ceil(H/4): `8*ceil((H-8)/32) ⊑ ceil(H/4)` holds only when H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32) (node 6 `fuse` (Add), input 1, axis 2)
              - dynamic axis 8*ceil((W-8)/32) assumed to be ceil(W/4): `8*ceil((W-8)/32) ⊑ ceil(W/4)` holds only when W mod 32 is 0 or at least 29 (in particular when W is a multiple of 32) (node 6 `fuse` (Add), input 1, axis 3)

            14 values (5 initializers not listed; --json has them); 0 error(s), 2 warning(s)
        "#]],
    );
    let out = check(&[&fixture("stride_chain.onnx"), "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &doc["diagnostics"][0];
    let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    expect![[r#"
        keys: severity, code, node, op, node_index, graph, operand, axis, message, chain, help, help_uri, condition, condition_exact
        message: dynamic axis 8*ceil((H-8)/32) assumed to be ceil(H/4): `8*ceil((H-8)/32) ⊑ ceil(H/4)` holds only when H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
        condition: H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)
        condition_exact: 8*floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+8 = floor(floor((H-1)/2)/2)+1 or 8*floor(floor((floor(floor(floor((H-1)/2)/2)/2)-1)/2)/2)+8 = 1
    "#]].assert_eq(&format!(
        "keys: {}\nmessage: {}\ncondition: {}\ncondition_exact: {}\n",
        keys.join(", "),
        d["message"].as_str().unwrap(),
        d["condition"].as_str().unwrap(),
        d["condition_exact"].as_str().unwrap()
    ));
    // A diagnostic without a condition has both keys, null.
    let out = check(&[&fixture("broadcast_conflict.onnx"), "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["diagnostics"][0]["condition"].is_null() && doc["diagnostics"][0]["condition_exact"].is_null());
}
