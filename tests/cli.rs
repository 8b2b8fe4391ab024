//! The CLI end to end: `inspect` and `convert` on good models, and bad input
//! of every kind giving exit code 2, one clear message naming the file and the
//! problem, no panic, and no output file.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn light(name: &str) -> PathBuf {
    common::root().join("fixtures/light").join(name)
}

/// Runs `convert` on `input` and checks the failure contract; returns stderr.
fn convert_fails(input: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("out.onnx");
    let out = diamond(&["convert", input.to_str().unwrap(), "-o", out_path.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "exit code for {}; stderr: {err}", input.display());
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "one error line: {err}");
    assert!(err.contains(&input.display().to_string()), "message names the file: {err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no output or temporary file left");
    let inspect = diamond(&["inspect", input.to_str().unwrap()]);
    assert_eq!(inspect.status.code(), Some(2), "inspect exit code; stderr: {}", stderr(&inspect));
    err
}

fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn inspect_reports_what_the_model_declares() {
    let out = diamond(&["inspect", light("light_resnet50.onnx").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ir_version"), "{text}");
    assert!(text.contains("Conv"), "{text}");
    assert!(text.contains("float[1,3,224,224]"), "{text}");
}

#[test]
fn inspect_json_counts_nodes_per_operator_and_weights() {
    let path = light("light_resnet50.onnx");
    let out = diamond(&["inspect", path.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let graph = model.main_graph().unwrap();
    let conv_nodes = graph.nodes.values().filter(|n| n.op_type() == "Conv").count();
    let ops = report["op_types"].as_array().unwrap();
    let conv = ops.iter().find(|o| o["op_type"] == "Conv").unwrap();
    assert_eq!(conv["count"].as_u64(), Some(conv_nodes as u64));
    assert_eq!(report["main_graph_nodes"].as_u64(), Some(graph.nodes.len() as u64));
    assert_eq!(report["initializers"]["count"].as_u64(), Some(graph.initializers.len() as u64));
    let bytes: u64 = graph.initializers.iter().map(|t| t.data_bytes()).sum();
    assert_eq!(report["initializers"]["bytes"].as_u64(), Some(bytes));
    assert_eq!(report["inputs"][0]["shape"], serde_json::json!(["1", "3", "224", "224"]));
}

#[test]
fn convert_round_trips_a_light_model_byte_for_byte_in_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("resnet.onnx");
    let input = light("light_resnet50.onnx");
    let out = diamond(&["convert", input.to_str().unwrap(), "-o", out_path.to_str().unwrap(), "--no-value-info"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    use prost::Message;
    let decode = |p: &Path| diamond_onnx_proto::ModelProto::decode(&std::fs::read(p).unwrap()[..]).unwrap();
    assert_eq!(decode(&input).encode_to_vec(), decode(&out_path).encode_to_vec());
}

#[test]
fn an_empty_file_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let err = convert_fails(&write_temp(dir.path(), "empty.onnx", b""));
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn truncated_files_are_rejected_at_every_cut() {
    let bytes = std::fs::read(light("light_squeezenet.onnx")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for cut in [1, 7, 100, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        let path = write_temp(dir.path(), &format!("cut{cut}.onnx"), &bytes[..cut]);
        let err = convert_fails(&path);
        assert!(err.contains("not a valid ONNX model"), "cut at {cut}: {err}");
    }
}

#[test]
fn a_bit_flip_in_a_length_prefix_is_rejected() {
    let mut bytes = std::fs::read(light("light_squeezenet.onnx")).unwrap();
    // The graph field (number 7, length-delimited) starts with tag byte 0x3a;
    // setting the top bit of its first length byte breaks the framing.
    let graph_tag = bytes.iter().position(|&b| b == 0x3a).unwrap();
    bytes[graph_tag + 1] ^= 0x80;
    let dir = tempfile::tempdir().unwrap();
    let err = convert_fails(&write_temp(dir.path(), "flipped.onnx", &bytes));
    assert!(err.contains("protobuf decoding failed"), "{err}");
}

#[test]
fn a_text_file_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let err = convert_fails(&write_temp(dir.path(), "notes.onnx", b"this is not a model, it is a note\n"));
    assert!(err.contains("not a valid ONNX model"), "{err}");
}

#[test]
fn random_bytes_are_rejected() {
    // A fixed xorshift stream: deterministic garbage.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    convert_fails(&write_temp(dir.path(), "noise.onnx", &bytes));
}

#[test]
fn a_directory_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model.onnx");
    std::fs::create_dir(&model_dir).unwrap();
    // `convert` takes directories (a batch over the models inside): an empty one is an error.
    let err = convert_fails(&model_dir);
    assert!(err.contains("holds no .onnx or .pt file"), "{err}");
    let inspect = diamond(&["inspect", model_dir.to_str().unwrap()]);
    assert!(stderr(&inspect).contains("is a directory"), "{}", stderr(&inspect));
}

#[test]
fn a_missing_file_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let err = convert_fails(&dir.path().join("absent.onnx"));
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    let out = diamond(&["convert", "model.onnx"]);
    assert_eq!(out.status.code(), Some(2));
    let out = diamond(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn convert_can_overwrite_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.onnx");
    std::fs::copy(light("light_squeezenet.onnx"), &path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let out = diamond(&["convert", path.to_str().unwrap(), "-o", path.to_str().unwrap(), "--no-value-info"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left behind");
}

#[test]
fn inspect_counts_subgraphs_functions_and_sparse_weights() {
    let path = common::root().join("fixtures/synthetic/every_field.onnx");
    let out = diamond(&["inspect", "--json", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let subgraphs =
        model.graphs.values().filter(|g| matches!(g.owner, diamond_ir::GraphOwner::Attribute { .. })).count();
    assert!(subgraphs > 0);
    assert_eq!(report["subgraphs"].as_u64(), Some(subgraphs as u64));
    assert_eq!(report["functions"].as_u64(), Some(1));
    assert_eq!(report["training_infos"].as_u64(), Some(1));
    assert_eq!(report["initializers"]["sparse_count"].as_u64(), Some(1));
    assert_eq!(report["opsets"].as_array().unwrap().len(), model.opset_imports.len());
    let total: usize = model.graphs.values().map(|g| g.nodes.len()).sum();
    assert_eq!(report["total_nodes"].as_u64(), Some(total as u64));
}

/// The command and the Python extension are front ends of the `diamond`
/// library: argument parsing and rendering, no pipeline of their own. Their
/// sources name no lower crate (the library re-exports the data types and
/// renderers they show), and the extension's manifest depends on none.
#[test]
fn the_front_ends_import_only_the_library() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lower = [
        "diamond_ir",
        "diamond_importers",
        "diamond_infer",
        "diamond_exporters",
        "diamond_optimize",
        "diamond_runtime",
    ];
    let mut found = Vec::new();
    let mut folders = vec![root.join("cli"), root.join("python/src")];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (n, line) in text.lines().enumerate() {
                    if let Some(name) = lower.iter().find(|c| line.contains(&format!("{c}::"))) {
                        found.push(format!("{}:{}: {name}", path.strip_prefix(root).unwrap().display(), n + 1));
                    }
                }
            }
        }
    }
    let manifest = std::fs::read_to_string(root.join("python/Cargo.toml")).unwrap();
    for name in lower {
        if manifest.contains(&name.replace('_', "-")) {
            found.push(format!("python/Cargo.toml depends on {}", name.replace('_', "-")));
        }
    }
    assert!(found.is_empty(), "front ends reaching past the library:\n{}", found.join("\n"));
}

/// `diamond explain CODE` prints the code's page (`docs/diagnostics/CODE.md`,
/// one source for the command and the docs), every page says what the code
/// means, shows a committed model and the command that reports it, and says
/// how to fix it — and that command does report the code. Without CODE every
/// code is listed; an unknown one is exit 2, naming the codes there are.
#[test]
fn every_code_is_explained_and_its_example_reports_it() {
    let root = common::root();
    let listing = diamond(&["explain"]);
    assert!(listing.status.success(), "{}", stderr(&listing));
    let listed: Vec<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs/diagnostics"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && !p.ends_with("README.md"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, pages, "one page per code, and no other");
    for code in &listed {
        let out = diamond(&["explain", code]);
        assert!(out.status.success(), "{code}: {}", stderr(&out));
        let page = String::from_utf8_lossy(&out.stdout).into_owned();
        let file = std::fs::read_to_string(root.join(format!("docs/diagnostics/{code}.md"))).unwrap();
        assert_eq!(page, file, "{code}: the command prints the page");
        assert!(page.starts_with(&format!("# `{code}` — ")), "{code}: a title with the severity");
        for section in ["## What it means", "## A minimal model", "## How to fix it"] {
            assert!(page.contains(section), "{code}: no '{section}'");
        }
        let example =
            page.lines().find_map(|l| l.strip_prefix("    diamond ")).unwrap_or_else(|| panic!("{code}: no command"));
        let args: Vec<&str> = example.split_whitespace().collect();
        let run = Command::new(env!("CARGO_BIN_EXE_diamond")).args(&args).current_dir(&root).output().unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&run.stdout), stderr(&run));
        assert!(
            said.contains(&format!("[{code}]")) || said.contains(&format!("\"{code}\"")),
            "{code}: `diamond {example}` does not report it:\n{said}"
        );
    }
    let unknown = diamond(&["explain", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("no diagnostic code 'nope'") && stderr(&unknown).contains("divisibility"));
}
