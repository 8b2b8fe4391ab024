//! `diamond solve` end to end: snapshots of its text output on the `.rows`
//! fixtures, the JSON schema, and the exit codes (0 solved, 1 errors found,
//! 2 unreadable file or syntax error with line and column). Refresh the
//! snapshots with `UPDATE_EXPECT=1`.

mod common;

use expect_test::{expect, Expect};
use std::process::{Command, Output};

fn solve(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).arg("solve").args(args).output().expect("runs diamond")
}

fn fixture(name: &str) -> String {
    common::root().join("fixtures/rows").join(name).display().to_string()
}

#[track_caller]
fn check_stdout(name: &str, code: i32, expected: Expect) {
    let out = solve(&[&fixture(name)]);
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    expected.assert_eq(&String::from_utf8(out.stdout).unwrap());
}

#[test]
fn the_seed_facts_solve_cleanly() {
    check_stdout(
        "seed.rows",
        0,
        expect![[r#"
            x     principal [..a]  closed [3, 4]
            m     principal [3 <..r> 4]  closed [3 <> 5, 6, 4]
            s     principal [_]  closed [_]
            y     principal [<..c.r> 2, 3]  closed [2, 3]
            w     principal [128, 64]  closed [128, 64]
            b     principal [batch, 64]  closed [batch, 64]
            ones  principal [..o]  closed [2, 7]
            prod  principal [<..p.r> 2, 7]  closed [2, 7]
            v     principal [2, 7]  closed [2, 7]
        "#]],
    );
}

#[test]
fn each_conflict_is_reported_once_with_its_provenance() {
    check_stdout(
        "conflicts.rows",
        1,
        expect![[r#"
            x  principal [3]  closed [3]
            z  principal [batch, 4]  closed [batch, 4]
            w  principal ['h, 3]  closed [_, 3]
            d  principal [..e]  closed [_, 3]

            error[broadcast-conflict]: 1 cannot broadcast to 3: only the claim-free unit `_` broadcasts
             --> line 2
              |
            2 | [1] <= [3]
              |
              = note: required by axis 0 of the row constraint ← line 2 `[1] <= [3]`

            error[dim-mismatch]: dimensions differ: 3 must equal 5
             --> line 5
              |
            5 | x = [5]
              |
              = note: 'a is 3 because of axis 0 of the row constraint ← line 4 `x = [3]`
              = note: required by axis 0 of the row constraint ← line 5 `x = [5]`

            error[rank-conflict]: rank conflict: [2, 3, 4] has 3 axes but [3, 4] has only 2
             --> line 7
              |
            7 | [2, 3, 4] <= [3, 4]
              |
              = note: required by line 7 `[2, 3, 4] <= [3, 4]`

            warning[dynamic-axis-specialized]: dynamic axis batch assumed to be 8: `batch ⊑ 8` holds only when batch = 8 or batch = 1
             --> line 9
              |
            9 | z <= [8, 4]
              |
              = note: required by axis 0 of the row constraint ← line 9 `z <= [8, 4]`

            error[element-count-mismatch]: element count mismatch: [2, 3] holds 6 elements but [7] holds 7
              --> line 10
               |
            10 | numel [2, 3] = numel [7]
               |
              = note: required by line 10 `numel [2, 3] = numel [7]`

            error[undetermined-parameter]: nothing determines dimension 0 ('h) of parameter 'w' ['h, 3]
              --> line 11
               |
            11 | tensor w : param ['h, 3]
               |
              = note: required by closing: parameter 'w' closes upward to what its uses require ← line 11 `tensor w : param ['h, 3]`

            5 error(s), 1 warning(s)
        "#]],
    );
}

#[test]
fn json_carries_shapes_and_diagnostics() {
    let out = solve(&[&fixture("conflicts.rows"), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tensors"]["x"]["principal"], "[3]");
    assert_eq!(report["tensors"]["d"]["closed"], "[_, 3]");
    let diagnostics = report["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 6);
    let codes: Vec<&str> = diagnostics.iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes,
        [
            "broadcast-conflict",
            "dim-mismatch",
            "rank-conflict",
            "dynamic-axis-specialized",
            "element-count-mismatch",
            "undetermined-parameter"
        ]
    );
    assert_eq!(diagnostics[1]["severity"], "error");
    assert_eq!(diagnostics[1]["line"], 5);
    assert_eq!(diagnostics[3]["severity"], "warning");
    assert!(diagnostics[1]["notes"][0].as_str().unwrap().contains("line 4"));
}

#[test]
fn a_syntax_error_exits_2_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.rows");
    std::fs::write(&path, "tensor x : [3, 4]\nx <= [3 <> <> 4]\n").unwrap();
    let out = solve(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2, column"), "{err}");
    assert!(err.contains("bad.rows"), "{err}");
}

#[test]
fn a_missing_file_exits_2() {
    let out = solve(&["/nonexistent/system.rows"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/system.rows"));
}
