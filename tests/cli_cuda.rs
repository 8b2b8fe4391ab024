//! The CUDA commands end to end: `lower --target cuda -o DIR` writes the
//! optimized model, the kernels' CUDA C (the MatMul/Gemm steps as tiled
//! contraction kernels with their epilogues fused), PTX, sm_80/sm_90
//! CUBINs and a manifest naming each kernel's nodes, arguments, launch and
//! ptxas resources (it fails rather than skips when `REQUIRE_NVRTC=1` and NVRTC
//! is missing); without a folder it is a usage error; `run --backend cuda`
//! and `bench --backend cuda` on a machine without a GPU exit 2 saying what
//! is missing.

mod common;

use std::process::{Command, Output};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn model() -> String {
    common::root().join("fixtures/exports/bert.legacy.onnx").to_string_lossy().into_owned()
}

#[test]
fn lower_target_cuda_writes_the_artifact_and_its_manifest() {
    if !diamond_runtime::cuda::nvrtc::available() {
        assert!(std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"), "{}", diamond_runtime::cuda::nvrtc::MISSING);
        eprintln!("skipped: {}", diamond_runtime::cuda::nvrtc::MISSING);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = diamond(&["lower", &model(), "--target", "cuda", "-o", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for file in
        ["model.onnx", "kernels.cu", "kernels.ptx", "kernels.sm_80.cubin", "kernels.sm_90.cubin", "manifest.json"]
    {
        assert!(dir.path().join(file).is_file(), "{file} not written");
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap()).unwrap();
    let kernels = manifest["kernels"].as_array().unwrap();
    assert!(kernels.len() >= 10, "{} kernels", kernels.len());
    for k in kernels {
        let name = k["name"].as_str().unwrap();
        assert!(dir.path().join(format!("{name}.cu")).is_file(), "{name}.cu not written");
        assert!(!k["replaces"].as_array().unwrap().is_empty(), "{name} replaces no node");
        assert!(k["arguments"].as_array().unwrap().iter().any(|a| a["kind"] == "output"), "{name} writes nothing");
        assert_eq!(k["launch"]["block"], 256);
        let resources = k["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 2, "{name}: one report per architecture");
        for r in resources {
            assert_eq!(r["spill_stores"], 0, "{name} spills: {r}");
            assert!(r["registers"].as_u64().unwrap() > 0);
        }
    }
    // The MatMul/Gemm steps are tiled kernels: the contraction node and its
    // fused epilogue's nodes replaced, the tile recorded, both panels of a
    // K step staged in shared memory, the sizes as arguments.
    let tiled: Vec<&serde_json::Value> = kernels.iter().filter(|k| k["kind"] == "contraction").collect();
    assert!(tiled.len() >= 10, "{} contraction kernels", tiled.len());
    let fused = tiled.iter().filter(|k| k["epilogue_fused"] == true).count();
    assert!(fused >= 1, "{fused} contraction kernels with their epilogue fused");
    for k in &tiled {
        let name = k["name"].as_str().unwrap();
        let replaces: Vec<&str> = k["replaces"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
        assert!(replaces[0].starts_with("MatMul") || replaces[0].starts_with("Gemm"), "{name}: {replaces:?}");
        assert_eq!(replaces.len() > 1, k["epilogue_fused"] == true, "{name}: {replaces:?}");
        assert_eq!(k["launch"]["tile"]["m"], 64, "{name}");
        let staged = k["launch"]["shared_bytes"].as_u64().unwrap();
        for r in k["resources"].as_array().unwrap() {
            assert!(r["shared_bytes"].as_u64().unwrap() >= staged, "{name}: {r}");
        }
        let names: Vec<&str> = k["arguments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["kind"] == "size")
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert!(["M", "N", "K"].iter().all(|s| names.contains(s)), "{name}: {names:?}");
    }
    // The symbolic sizes are kernel arguments.
    let sizes: Vec<&str> = kernels
        .iter()
        .flat_map(|k| k["arguments"].as_array().unwrap())
        .filter(|a| a["kind"] == "size")
        .filter_map(|a| a["symbol"].as_str())
        .collect();
    assert!(sizes.contains(&"batch") && sizes.contains(&"seq"), "{sizes:?}");
    // Without -o there is nowhere to write: a usage error.
    let out = diamond(&["lower", &model(), "--target", "cuda"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o DIR"));
}

#[test]
fn run_and_bench_on_cuda_say_what_is_missing() {
    // Without a GPU: no driver; with one: the device launch that is not written yet.
    let why = diamond_runtime::cuda::device::unavailable();
    let m = model();
    for args in [vec!["run", &m, "--backend", "cuda", "--random"], vec!["bench", &m, "--backend", "cuda"]] {
        let out = diamond(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&why) && why.contains("lower --target cuda"), "{args:?}: {err}");
    }
}
