//! Execution of the light models (`fixtures/light/`): diamond's reference
//! executor against tract in the same process, on the same random input.
//! `cargo bench -p diamond-runtime --bench light`. No speed goal here: the
//! reference kernels are written to be obviously correct; speed is the SIMD
//! backend's job. The figures say how far there is to go.

use criterion::{criterion_group, criterion_main, Criterion};
use diamond_ir::{DimValue, TypeValue};
use diamond_runtime::{run_model, Data, RunOptions, Tensor, Value};
use std::path::Path;
use tract_onnx::prelude::*;

fn light(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/light");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".onnx").map(str::to_string))
        .collect();
    names.sort();
    let mut group = c.benchmark_group("light");
    group.sample_size(10);
    for name in names {
        let path = dir.join(format!("{name}.onnx"));
        let model = diamond_importers::onnx::load_model(&path).unwrap();
        let graph = model.main_graph().unwrap();
        let input = graph.required_inputs()[0];
        let Some(TypeValue::Tensor { shape: Some(shape), .. }) = input.ty.as_ref().and_then(|t| t.value.as_ref())
        else {
            continue;
        };
        let dims: Vec<usize> = shape
            .dims
            .iter()
            .map(|d| match d.value {
                Some(DimValue::Known(n)) => n as usize,
                _ => 1,
            })
            .collect();
        let n: usize = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0).collect();
        let input_name = graph.value_name(input.value.unwrap()).to_string();
        let ours = Tensor::new(dims.clone(), Data::F32(values.clone())).unwrap();
        group.bench_function(format!("{name}/diamond"), |b| {
            b.iter(|| {
                run_model(&model, vec![(input_name.clone(), Value::Tensor(ours.clone()))], &RunOptions::default())
                    .unwrap()
            })
        });
        let theirs = tract_ndarray::ArrayD::from_shape_vec(dims.clone(), values).unwrap().into_tensor();
        let plan = tract_onnx::onnx()
            .model_for_path(&path)
            .and_then(|m| m.with_input_fact(0, InferenceFact::dt_shape(f32::datum_type(), &dims)))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .unwrap();
        group.bench_function(format!("{name}/tract"), |b| {
            b.iter(|| plan.run(tvec![theirs.clone().into_tvalue()]).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, light);
criterion_main!(benches);
