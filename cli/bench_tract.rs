//! tract, beside `diamond bench`: the same model and inputs, optimized with
//! the inputs fixed to the fed shapes, run single-threaded in this process.

use crate::latency::Latency;
use diamond::values::{Data, Tensor, Value};
use std::path::Path;
use std::time::Instant;
use tract_onnx::prelude::*;

/// Latency of `warmup + runs` runs of `path` in tract (the last `runs` measured), or why tract
/// could not run it.
pub fn measure(path: &Path, fed: &[(String, Value)], warmup: usize, runs: usize) -> Result<Latency, String> {
    // A panic inside tract is its answer for this model, reported as the reason, not printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(path, fed, warmup, runs)));
    std::panic::set_hook(hook);
    attempt.unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(format!("tract panicked: {}", what.chars().take(200).collect::<String>()))
    })
}

fn run(path: &Path, fed: &[(String, Value)], warmup: usize, runs: usize) -> Result<Latency, String> {
    let short = |e: anyhow::Error| format!("{e:#}").lines().next().unwrap_or("").chars().take(200).collect::<String>();
    let mut model = tract_onnx::onnx().model_for_path(path).map_err(short)?;
    let outlets = model.input_outlets().map_err(short)?.to_vec();
    let mut inputs = TVec::new();
    for (i, outlet) in outlets.iter().enumerate() {
        let name = model.node(outlet.node).name.clone();
        let value =
            fed.iter().find(|(n, _)| *n == name).map(|(_, v)| v).ok_or_else(|| format!("input '{name}' not fed"))?;
        let Value::Tensor(t) = value else { return Err(format!("input '{name}' is not a tensor")) };
        let tensor = convert(t).ok_or_else(|| format!("input '{name}': {} tensors are not converted", t.elem()))?;
        model.set_input_fact(i, InferenceFact::dt_shape(tensor.datum_type(), tensor.shape())).map_err(short)?;
        inputs.push(tensor.into_tvalue());
    }
    let plan = model.into_optimized().and_then(|m| m.into_runnable()).map_err(short)?;
    let mut times = Vec::with_capacity(runs);
    for i in 0..warmup + runs {
        let feed = inputs.clone();
        let start = Instant::now();
        plan.run(feed).map_err(short)?;
        if i >= warmup {
            times.push(start.elapsed());
        }
    }
    Ok(Latency::of(times))
}

/// Our tensor as tract's, for the element types inputs use.
fn convert(t: &Tensor) -> Option<tract_onnx::prelude::Tensor> {
    fn array<T: Datum + Clone>(shape: &[usize], v: &[T]) -> Option<tract_onnx::prelude::Tensor> {
        tract_ndarray::ArrayD::from_shape_vec(shape, v.to_vec()).ok().map(|a| a.into_tensor())
    }
    let s = &t.shape[..];
    match &t.data {
        Data::F32(v) => array(s, v),
        Data::F64(v) => array(s, v),
        Data::F16(v) => array(s, &v.iter().map(|x| tract_onnx::prelude::f16::from_f32(x.to_f32())).collect::<Vec<_>>()),
        Data::I8(v) => array(s, v),
        Data::I16(v) => array(s, v),
        Data::I32(v) => array(s, v),
        Data::I64(v) => array(s, v),
        Data::U8(v) => array(s, v),
        Data::U16(v) => array(s, v),
        Data::U32(v) => array(s, v),
        Data::U64(v) => array(s, v),
        Data::Bool(v) => array(s, v),
        _ => None,
    }
}
