//! `check_model` on real architectures: the light models (static shapes,
//! 38 to 1,746 nodes) and the exported-style transformer with dynamic axes,
//! and, when it has been generated (`fixtures/bench/gen_deep_gpt2.py`, too
//! large to commit), the 192-layer GPT-2 graph of ~42k nodes.
//! Times import-free inference: the model is loaded once, outside the timing.
//!
//! Run with `cargo bench -p diamond-infer --bench check`.

use criterion::{criterion_group, criterion_main, Criterion};
use diamond_infer::graph::{check_model, CheckOptions};
use std::path::Path;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut group = c.benchmark_group("check");
    group.sample_size(20);
    for name in [
        "light/light_resnet50.onnx",
        "light/light_densenet121.onnx",
        "light/light_inception_v2.onnx",
        "check/exported_transformer.onnx",
    ] {
        let model = diamond_importers::onnx::load_model(&root.join(name)).expect("fixture loads");
        let options = CheckOptions::default();
        let label = Path::new(name).file_stem().unwrap().to_string_lossy().into_owned();
        group.bench_function(label, |b| b.iter(|| check_model(&model, &options)));
    }
    group.finish();
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("../target"), Into::into);
    let deep = target.join("bench/gpt2_192.onnx");
    if let Ok(model) = diamond_importers::onnx::load_model(&deep) {
        let mut group = c.benchmark_group("check");
        group.sample_size(10);
        let options = CheckOptions::default();
        group.bench_function("gpt2_192", |b| b.iter(|| check_model(&model, &options)));
        group.finish();
    } else {
        eprintln!("{}: not generated; skipping check/gpt2_192", deep.display());
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
