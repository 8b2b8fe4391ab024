//! TorchScript without libtorch: the traced and scripted archives and IR text
//! dumps of `fixtures/torch/` (made by `gen_torch.py` with PyTorch 2.15,
//! with the outputs torch computed) are checked to the shapes torch
//! computed, converted to ONNX that tract runs to torch's numbers, and bad
//! archives are refused with a reason.

mod common;

use diamond_importers::torch::load::load_any;
use diamond_importers::torch::lower::InputShape;
use diamond_infer::graph::{check_model, CheckOptions, CheckReport, DimReport};
use std::path::{Path, PathBuf};
use std::process::Output;

fn torch(name: &str) -> PathBuf {
    common::root().join("fixtures/torch").join(name)
}

fn shapes(specs: &[&str]) -> Vec<InputShape> {
    specs.iter().map(|s| s.parse().unwrap()).collect()
}

fn check(path: &Path, specs: &[&str]) -> CheckReport {
    let model = load_any(path, &shapes(specs)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    check_model(&model, &CheckOptions::default())
}

/// The shape of the model's only output.
fn output_shape(report: &CheckReport) -> Vec<DimReport> {
    assert_eq!(report.outputs.len(), 1, "{:?}", report.outputs);
    report.value(&report.outputs[0]).and_then(|v| v.shape.clone()).expect("the output's shape is known")
}

/// The sizes of a `.npy` file torch wrote.
fn npy_shape(name: &str) -> Vec<DimReport> {
    let t = diamond_importers::npy::read_npy(&torch(name)).unwrap();
    t.dims.iter().map(|&d| DimReport::Known(d as u64)).collect()
}

fn diamond(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().unwrap()
}

#[test]
fn traced_archives_check_to_the_shapes_torch_computed() {
    for name in ["resnet_tiny", "gpt_tiny", "encoder_fastpath"] {
        let report = check(&torch(&format!("{name}.pt")), &[]);
        assert!(report.diagnostics.is_empty(), "{name}: {:#?}", report.diagnostics);
        assert_eq!(output_shape(&report), npy_shape(&format!("{name}.output.npy")), "{name}");
        let holes: Vec<&str> = report
            .values
            .iter()
            .filter(|v| v.shape.as_ref().is_none_or(|s| s.contains(&DimReport::Unknown)))
            .map(|v| v.name.as_str())
            .collect();
        assert!(holes.is_empty(), "{name}: values without a complete shape: {holes:?}");
    }
    // Module paths name the nodes.
    let report = check(&torch("resnet_tiny.pt"), &[]);
    assert!(report.value("layer2.0.downsample.0/Conv_out").is_some(), "nodes are named by module path");
}

#[test]
fn a_scripted_archive_takes_input_shapes_with_symbols() {
    let err = load_any(&torch("scripted_control.pt"), &[]).unwrap_err().to_string();
    assert!(err.contains("--input-shape x="), "{err}");
    let report = check(&torch("scripted_control.pt"), &["x=batch,6"]);
    assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
    assert_eq!(output_shape(&report), vec![DimReport::Symbolic("batch".into()), DimReport::Known(6)]);
}

#[test]
fn a_dynamic_sequence_shows_the_position_table_bound_with_its_source_line() {
    let report = check(&torch("gpt_tiny.pt"), &["ids=batch,seq"]);
    assert_eq!(
        output_shape(&report),
        vec![DimReport::Symbolic("batch".into()), DimReport::Symbolic("seq".into()), DimReport::Known(50)]
    );
    assert_eq!(report.diagnostics.len(), 1, "{:#?}", report.diagnostics);
    let d = &report.diagnostics[0];
    assert_eq!(d.code.as_str(), "implied-bound");
    assert!(d.message.contains("seq ≤ 16"), "{}", d.message);
    assert_eq!(d.node.as_deref(), Some("wpe/Gather"));
    assert!(d.notes.iter().any(|n| n.contains("code/__torch__/torch/nn/modules/sparse")), "{:?}", d.notes);
}

#[test]
fn ir_text_dumps_agree_with_the_shapes_torch_recorded() {
    for name in ["resnet_tiny", "gpt_tiny"] {
        // torch's recorded tensor types become declarations: any disagreement would be an error.
        let report = check(&torch(&format!("{name}.ir.txt")), &[]);
        assert_eq!(report.errors(), 0, "{name}: {:#?}", report.diagnostics);
        assert_eq!(output_shape(&report), npy_shape(&format!("{name}.output.npy")), "{name}");
    }
}

#[test]
fn every_unsupported_operator_is_listed_in_one_error() {
    for file in ["unsupported_ops.pt", "unsupported_ops.ir.txt"] {
        let out = diamond(&["check", torch(file).to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{err}");
        assert!(err.contains("aten::logcumsumexp ×2") && err.contains("aten::erfinv ×1"), "{err}");
        assert!(err.contains("first at"), "{err}");
    }
}

#[test]
fn corrupt_archives_exit_2_with_their_reason() {
    let cases = [
        ("truncated.pt", "truncated"),
        ("bad_pickle.pt", "pickle"),
        ("missing_storage.pt", "missing storage"),
        ("path_traversal.pt", "escapes the archive"),
        ("zip_bomb.pt", "zip bomb"),
        ("plain_checkpoint.pt", "plain torch.save checkpoint"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (file, phrase) in cases {
        let path = torch("corrupt").join(file);
        for command in ["check", "convert"] {
            let out_path = dir.path().join("out.onnx");
            let mut args = vec![command, path.to_str().unwrap()];
            if command == "convert" {
                args.extend(["-o", out_path.to_str().unwrap()]);
            }
            let out = diamond(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command} {file}: {err}");
            assert!(err.contains(phrase) && err.contains(file), "{command} {file}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(!out_path.exists(), "no output on failure");
        }
    }
}

#[test]
fn converted_archives_compute_what_torch_computed_under_tract() {
    use tract_onnx::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    for (name, specs) in
        [("resnet_tiny", vec![]), ("gpt_tiny", vec![]), ("scripted_control", vec!["--input-shape", "x=2,6"])]
    {
        let out_path = dir.path().join(format!("{name}.onnx"));
        let input = torch(&format!("{name}.pt"));
        let mut args = vec!["convert", input.to_str().unwrap(), "-o", out_path.to_str().unwrap()];
        args.extend(specs.iter().copied());
        let out = diamond(&args);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let x = npy_tensor(&format!("{name}.input.npy"));
        let want = npy_tensor(&format!("{name}.output.npy"));
        let plan = tract_onnx::onnx()
            .model_for_path(&out_path)
            .and_then(|m| m.with_input_fact(0, InferenceFact::dt_shape(x.datum_type(), x.shape())))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .unwrap_or_else(|e| panic!("{name}: tract cannot load the converted model: {e:#}"));
        let got = plan.run(tvec![x.into_tvalue()]).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let got = got[0].cast_to::<f32>().unwrap().into_owned();
        assert_eq!(got.shape(), want.shape(), "{name}");
        let (g, w) = (got.to_plain_array_view::<f32>().unwrap(), want.to_plain_array_view::<f32>().unwrap());
        let worst = g.iter().zip(w.iter()).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-4, "{name}: largest difference from torch {worst}");
    }
}

/// A `.npy` fixture of `fixtures/torch/` as a tract tensor.
fn npy_tensor(name: &str) -> tract_onnx::prelude::Tensor {
    common::npy_tensor(&torch(name))
}

#[test]
fn a_batch_converts_pt_archives_to_onnx_files() {
    let dir = tempfile::tempdir().unwrap();
    let zoo = dir.path().join("zoo");
    std::fs::create_dir_all(zoo.join("vision")).unwrap();
    std::fs::copy(torch("resnet_tiny.pt"), zoo.join("vision/resnet_tiny.pt")).unwrap();
    std::fs::copy(torch("gpt_tiny.pt"), zoo.join("gpt_tiny.pt")).unwrap();
    let out = dir.path().join("out");
    let o = diamond(&["convert", zoo.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    for file in ["vision/resnet_tiny.onnx", "gpt_tiny.onnx"] {
        let model = diamond_importers::onnx::load_model(&out.join(file)).unwrap();
        assert!(!model.main_graph().unwrap().value_info.is_empty(), "{file} carries its inferred types");
    }
}

#[test]
fn converted_archives_compute_what_torch_computed_on_the_executor() {
    use diamond_runtime::{run_model, RunOptions, Tensor, Value};
    let dir = tempfile::tempdir().unwrap();
    for (name, specs) in [
        ("resnet_tiny", vec![]),
        ("gpt_tiny", vec![]),
        ("encoder_fastpath", vec![]),
        ("scripted_control", vec!["--input-shape", "x=2,6"]),
    ] {
        let out_path = dir.path().join(format!("{name}.onnx"));
        let input = torch(&format!("{name}.pt"));
        let mut args = vec!["convert", input.to_str().unwrap(), "-o", out_path.to_str().unwrap()];
        args.extend(specs.iter().copied());
        let out = diamond(&args);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let model = diamond_importers::onnx::load_model(&out_path).unwrap();
        let graph = model.main_graph().unwrap();
        let x = diamond_importers::npy::read_npy(&torch(&format!("{name}.input.npy"))).unwrap();
        let first = graph.value_name(graph.inputs[0].value.unwrap()).to_string();
        let result =
            run_model(&model, vec![(first, Value::Tensor(Tensor::from_ir(&x).unwrap()))], &RunOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        let want =
            Tensor::from_ir(&diamond_importers::npy::read_npy(&torch(&format!("{name}.output.npy"))).unwrap()).unwrap();
        let Value::Tensor(got) = &result.outputs[0].1 else { panic!("{name}: not a tensor") };
        assert_eq!(got.shape, want.shape, "{name}");
        let (g, w) = (got.data.to_f64s().unwrap(), want.data.to_f64s().unwrap());
        let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max);
        assert!(worst <= 1e-4, "{name}: the executor differs from torch by {worst}");
    }
}
