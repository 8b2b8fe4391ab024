//! `diamond convert` over many models: the output tree mirrors the inputs,
//! a bad model is recorded and the rest go on, exit codes, `--report`,
//! `--skip-existing`, `--shard`, the plain progress lines, and the inferred
//! types written into `value_info`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn diamond(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fixture(rel: &str) -> PathBuf {
    common::root().join("fixtures").join(rel)
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

/// A zoo: two good models (one nested), a truncated file, a cycle, and a model with a shape error.
fn zoo(dir: &Path) {
    copy(&fixture("light/light_squeezenet.onnx"), &dir.join("vision/squeezenet.onnx"));
    copy(&fixture("check/exported_transformer.onnx"), &dir.join("text/deep/transformer.onnx"));
    let bytes = std::fs::read(fixture("light/light_resnet50.onnx")).unwrap();
    std::fs::write(dir.join("vision/truncated.onnx"), &bytes[..bytes.len() / 2]).unwrap();
    copy(&fixture("check/cycle.onnx"), &dir.join("broken/cycle.onnx"));
    copy(&fixture("diagnostics/dim-mismatch.onnx"), &dir.join("broken/dim_mismatch.onnx"));
    std::fs::write(dir.join("README.txt"), "not a model").unwrap();
}

fn report_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_batch_converts_the_good_models_and_reports_each_bad_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, out, report) = (tmp.path().join("zoo"), tmp.path().join("out"), tmp.path().join("report.jsonl"));
    zoo(&input);
    let o = diamond(&[
        "convert",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-j",
        "2",
        "--report",
        report.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "some models could not be read: {err}");
    // The output tree mirrors the input tree; nothing else is left there.
    assert_eq!(files(&out), vec!["text/deep/transformer.onnx", "vision/squeezenet.onnx"], "{err}");
    // Non-TTY progress: one line per model, then the summary.
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 5, "{err}");
    for (key, status) in [
        ("vision/squeezenet.onnx", "converted"),
        ("text/deep/transformer.onnx", "converted"),
        ("vision/truncated.onnx", "unreadable"),
        ("broken/cycle.onnx", "unreadable"),
        ("broken/dim_mismatch.onnx", "errors"),
    ] {
        let line = lines.iter().find(|l| l.contains(key)).unwrap_or_else(|| panic!("{key}: {err}"));
        assert!(line.contains(&format!("/5] {status}")), "{line}");
    }
    assert!(
        err.contains("converted        2") && err.contains("unreadable       2") && err.contains("errors           1"),
        "{err}"
    );
    let rows = report_lines(&report);
    assert_eq!(rows.len(), 5);
    let row = |suffix: &str| rows.iter().find(|r| r["input"].as_str().unwrap().ends_with(suffix)).unwrap().clone();
    let squeeze = row("squeezenet.onnx");
    assert_eq!(squeeze["status"], "converted");
    assert!(squeeze["nodes"].as_u64().unwrap() > 10 && squeeze["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(squeeze["output"].as_str().unwrap(), out.join("vision/squeezenet.onnx").to_str().unwrap());
    assert_eq!(row("transformer.onnx")["warnings"], 1, "its one assumption");
    assert!(row("truncated.onnx")["message"].as_str().unwrap().contains("not a valid ONNX model"));
    assert!(row("cycle.onnx")["message"].as_str().unwrap().contains("malformed"));
    let mismatch = row("dim_mismatch.onnx");
    assert_eq!((mismatch["status"].as_str(), mismatch["errors"].as_u64()), (Some("errors"), Some(1)));
    assert!(mismatch["message"].as_str().unwrap().contains("dim-mismatch"), "{mismatch}");
}

#[test]
fn errors_alone_exit_1_and_a_clean_batch_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let good = fixture("light/light_squeezenet.onnx");
    let bad = fixture("diagnostics/dim-mismatch.onnx");
    let o = diamond(&["convert", good.to_str().unwrap(), bad.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(files(&out), vec!["light_squeezenet.onnx"]);
    // --allow-errors writes it anyway (without inferred types): exit 0.
    let o = diamond(&["convert", bad.to_str().unwrap(), "-o", out.to_str().unwrap(), "--allow-errors"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(files(&out), vec!["dim-mismatch.onnx", "light_squeezenet.onnx"]);
    let written = diamond_importers::onnx::load_model(&out.join("dim-mismatch.onnx")).unwrap();
    assert!(written.main_graph().unwrap().value_info.is_empty(), "no inferred types on a model with errors");
}

#[test]
fn skip_existing_resumes_without_touching_finished_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, out) = (tmp.path().join("zoo"), tmp.path().join("out"));
    copy(&fixture("light/light_squeezenet.onnx"), &input.join("a.onnx"));
    copy(&fixture("check/exported_cnn.onnx"), &input.join("b.onnx"));
    let first = diamond(&["convert", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    std::fs::write(out.join("a.onnx"), b"left alone").unwrap();
    std::fs::remove_file(out.join("b.onnx")).unwrap();
    let again = diamond(&["convert", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--skip-existing"]);
    let err = stderr(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert!(err.contains("skipped") && err.contains("a.onnx"), "{err}");
    assert_eq!(std::fs::read(out.join("a.onnx")).unwrap(), b"left alone");
    assert!(diamond_importers::onnx::load_model(&out.join("b.onnx")).is_ok(), "the missing one is converted");
}

#[test]
fn shards_cover_every_input_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("zoo");
    for i in 0..12 {
        copy(&fixture("check/exported_cnn.onnx"), &input.join(format!("m{i:02}/model.onnx")));
    }
    let mut seen: Vec<String> = Vec::new();
    for k in 0..3 {
        let out = tmp.path().join(format!("out{k}"));
        let o =
            diamond(&["convert", input.to_str().unwrap(), "-o", out.to_str().unwrap(), "--shard", &format!("{k}/3")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let got = files(&out);
        assert!(!got.is_empty() && got.len() < 12, "shard {k}/3 holds a share: {got:?}");
        seen.extend(got);
    }
    seen.sort();
    let all: Vec<String> = (0..12).map(|i| format!("m{i:02}/model.onnx")).collect();
    assert_eq!(seen, all, "the three shards partition the twelve models");
    let bad = diamond(&["convert", input.to_str().unwrap(), "-o", "x", "--shard", "3/3"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn inferred_shapes_are_written_as_value_info() {
    let tmp = tempfile::tempdir().unwrap();
    let source = fixture("check/exported_transformer.onnx");
    let out = tmp.path().join("t.onnx");
    let o = diamond(&["convert", source.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let original = diamond_importers::onnx::load_model(&source).unwrap();
    let written = diamond_importers::onnx::load_model(&out).unwrap();
    let report = diamond_infer::check_model(&original, &Default::default());
    let graph = written.main_graph().unwrap();
    let declared: std::collections::HashMap<&str, String> = graph
        .value_info
        .iter()
        .chain(&graph.outputs)
        .filter_map(|vi| Some((graph.value_name(vi.value?), shape_text(vi.ty.as_ref()?)?)))
        .collect();
    let interface: Vec<&str> = graph.inputs.iter().filter_map(|vi| Some(graph.value_name(vi.value?))).collect();
    let mut compared = 0;
    for v in &report.values {
        if v.initializer || interface.contains(&v.name.as_str()) {
            continue;
        }
        assert_eq!(declared.get(v.name.as_str()), Some(&v.shape_text()), "{}", v.name);
        compared += 1;
    }
    assert!(compared > 40, "{compared}");
    // Expressions over the symbols are dim_params: the reshaped [batch*seq, 64] of the attention.
    assert!(declared.values().any(|s| s.contains("batch") && s.contains("seq")), "{declared:?}");
    // Nothing but types changed: with value_info and output types set aside, the graphs are equal.
    let strip = |m: &diamond_ir::Model| {
        let mut m = m.clone();
        for g in m.graphs.values_mut() {
            g.value_info.clear();
            for o in &mut g.outputs {
                o.ty = None;
            }
        }
        diamond_exporters::onnx::encode_model(&m).unwrap()
    };
    assert_eq!(strip(&original), strip(&written));
}

fn shape_text(ty: &diamond_ir::TypeInfo) -> Option<String> {
    common::declared_shape_text(ty)
}
