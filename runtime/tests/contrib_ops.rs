//! onnxruntime's quantized operators the executors run, against
//! onnxruntime's stored outputs. The standard `DynamicQuantizeLinear`,
//! `ConvInteger` and `MatMulInteger` (`fixtures/runtime/quantized_ops/`,
//! made by `fixtures/runtime/gen_quantized_ops.py`) give onnxruntime's
//! integers exactly, on the reference executor and on the SIMD session's
//! own kernels. The `com.microsoft` `DynamicQuantizeLSTM`
//! (`fixtures/runtime/quantized_lstm/`, made by
//! `fixtures/runtime/gen_quantized_lstm.py`), forward with per-direction
//! scales and bidirectional with per-column ones, on the reference executor
//! and on the SIMD session's recurrent kernels. onnxruntime quantizes `X`
//! to 8 bits at run time where the executor keeps it in float, so outputs
//! agree within that rounding ([`TOL`]), not exactly.

use diamond_runtime::simd::{Options, Session};
use diamond_runtime::{run_model, Fed, RunOptions, Tensor, Value};
use std::path::PathBuf;

/// Absolute tolerance: X's 8-bit rounding over 4 inputs and 3 steps.
const TOL: f64 = 2e-2;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/runtime/quantized_lstm")
}

fn stored(name: &str) -> Tensor {
    read(&dir().join(name))
}

fn read(path: &std::path::Path) -> Tensor {
    let t = diamond_importers::tensor_file::read_tensor_file(path).unwrap();
    Tensor::from_ir(&t).unwrap()
}

#[test]
fn quantize_and_integer_products_give_onnxruntime_s_integers_exactly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/runtime/quantized_ops");
    let model = diamond_importers::onnx::load_model(&dir.join("quantized_ops.onnx")).unwrap();
    let inputs: Vec<(String, Value)> = ["x", "y", "v", "u"]
        .iter()
        .map(|n| (n.to_string(), Value::Tensor(read(&dir.join(format!("inputs/{n}.npy"))))))
        .collect();
    let run = run_model(&model, inputs.clone(), &RunOptions::default()).unwrap();
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let mut session = Session::new(&model, &lowered, &fed, &Options::default()).unwrap();
    // four DynamicQuantizeLinear, three ConvInteger, two MatMulInteger: all on the session's kernels
    assert_eq!(session.coverage().native_nodes, 9);
    assert_eq!(session.coverage().reference_nodes, 0);
    // twice: the second run takes the weights the first one packed
    for round in 0..2 {
        let simd = session.run(inputs.clone()).unwrap();
        assert!(session.fallbacks().is_empty(), "{:?}", session.fallbacks());
        assert_eq!(run.outputs.len(), 8);
        for (executor, outputs) in [("reference", &run.outputs), ("simd", &simd.outputs)] {
            for (name, got) in outputs {
                let want = read(&dir.join(format!("outputs/{name}.npy")));
                let Value::Tensor(got) = got else { panic!("output {name} is not a tensor") };
                assert_eq!(got.elem(), want.elem(), "{executor}: output {name}");
                assert_eq!(got.shape, want.shape, "{executor}: output {name}");
                assert_eq!(got.to_f64s(), want.to_f64s(), "{executor} (run {round}): output {name}");
            }
        }
    }
}

#[test]
fn dynamic_quantize_lstm_gives_onnxruntime_s_outputs() {
    for case in ["forward", "bidirectional"] {
        let model = diamond_importers::onnx::load_model(&dir().join(format!("{case}.onnx"))).unwrap();
        let inputs: Vec<(String, Value)> = ["X", "initial_h"]
            .iter()
            .map(|n| (n.to_string(), Value::Tensor(stored(&format!("{case}.{n}.npy")))))
            .collect();
        let run = run_model(&model, inputs.clone(), &RunOptions::default()).unwrap_or_else(|e| panic!("{case}: {e}"));
        let lowered = diamond_optimize::lower::lower(&model).unwrap();
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let mut session = Session::new(&model, &lowered, &fed, &Options::default()).unwrap();
        // the node runs on the recurrent kernels, not the reference ones
        assert_eq!(session.coverage().native_nodes, 1, "{case}");
        assert_eq!(session.coverage().reference_nodes, 0, "{case}");
        let simd = session.run(inputs).unwrap_or_else(|e| panic!("{case} on the SIMD session: {e}"));
        assert!(session.fallbacks().is_empty(), "{case}: {:?}", session.fallbacks());
        for (name, got) in run.outputs.iter().chain(&simd.outputs) {
            let want = stored(&format!("{case}.{name}.npy"));
            let Value::Tensor(got) = got else { panic!("{case}: output {name} is not a tensor") };
            assert_eq!(got.shape, want.shape, "{case}: output {name}");
            let (g, w) = (got.to_f64s().unwrap(), want.to_f64s().unwrap());
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst <= TOL, "{case}: output {name} differs by {worst}");
            // and not trivially: the outputs move with the input
            assert!(w.iter().any(|v| v.abs() > 0.05), "{case}: output {name} is near zero");
        }
    }
}
