//! The SIMD backend against the reference executor: every fixture model
//! (light models and the export, runtime and optimize fixtures) gives the
//! reference's outputs, and every node-suite case the reference executor
//! passes passes on the SIMD backend too, with the AVX2 code paths and with
//! the portable ones (what `DIAMOND_SIMD=off` forces; the light models,
//! whose convolutions run on the reference kernels, only with the first).

mod common;
mod simd;

use diamond_runtime::{Tensor, Value};
use simd::{
    agree, export_inputs, modes, random_inputs, random_inputs_sized, read, run_reference, run_simd, run_simd_counted,
};
use std::path::PathBuf;

/// Node-suite cases that pass on the SIMD backend; raise as it grows.
/// Equal to the cases this harness passes on the reference executor
/// (tensor data only: sequence and optional cases are not read here).
const NODE_RATCHET: usize = 1832;

/// Passing cases in which at least one program ran (the rest run wholly on
/// the reference kernels); raise as more operators fuse.
const FUSED_RATCHET: usize = 560;

/// Model-level tolerance: programs compute in `f32` where the reference
/// rounds each node's `f64` result, so differences of a few ulps per node
/// accumulate over the depth of a network.
const MODEL_RTOL: f64 = 1e-3;
const MODEL_ATOL: f64 = 1e-4;

fn models(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(common::root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

#[test]
fn fixture_models_agree_with_the_reference() {
    let mut ran = 0;
    let mut failures = Vec::new();
    let all: Vec<PathBuf> = ["fixtures/light", "fixtures/exports", "fixtures/runtime", "fixtures/optimize"]
        .iter()
        .flat_map(|d| models(d))
        .collect();
    for path in &all {
        let Ok(model) = diamond_importers::onnx::load_model(path) else { continue };
        let inputs = match export_inputs(&model, path) {
            Some(i) if path.to_string_lossy().contains("exports") => Some(i),
            _ => random_inputs(&model, 7),
        };
        let Some(inputs) = inputs else { continue };
        let Ok(want) = run_reference(&model, &inputs) else { continue };
        ran += 1;
        // The light models' convolutions run on the reference kernels and
        // take most of the time: their portable run is left to the
        // property tests and the other fixtures.
        let light = path.to_string_lossy().contains("fixtures/light");
        for options in modes().into_iter().filter(|o| o.simd || !light) {
            match run_simd(&model, &inputs, &options) {
                Err(e) => failures.push(format!("{} (simd {}): {e}", path.display(), options.simd)),
                Ok(got) => {
                    for ((name, g), (_, w)) in got.iter().zip(&want) {
                        if let Err(e) = agree(g, w, MODEL_RTOL, MODEL_ATOL) {
                            failures.push(format!("{} (simd {}) output '{name}': {e}", path.display(), options.simd));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} disagreement(s):\n{}", failures.len(), failures.join("\n"));
    assert!(ran >= 80, "only {ran} fixture models ran on the reference executor");
}

/// The node suite's comparison with stored outputs (rtol 1e-3, atol 1e-7,
/// two ulps of the 16-bit floats).
fn matches_stored(got: &Value, want: &Tensor) -> bool {
    let Value::Tensor(g) = got else { return false };
    if g.elem() != want.elem() || g.shape != want.shape {
        return false;
    }
    if !g.is_float() {
        return g.data == want.data;
    }
    let mantissa = match g.elem() {
        diamond_ir::ElemType::Bfloat16 => Some(7),
        diamond_ir::ElemType::Float16 => Some(10),
        _ => None,
    };
    let (a, b) = (g.to_f64s().unwrap_or_default(), want.to_f64s().unwrap_or_default());
    a.iter().zip(&b).all(|(&x, &y)| {
        let mut tol = 1e-7 + 1e-3 * y.abs();
        if let Some(m) = mantissa.filter(|_| y != 0.0 && y.is_finite()) {
            tol = tol.max(2.0 * 2f64.powi(y.abs().log2().floor() as i32 - m));
        }
        (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol
    })
}

/// Stored outputs with an absolute noise floor above 1e-7 (as the reference's node-suite test).
const FLOAT32_NOISE: &[&str] = &["test_dft_inverse", "test_dft_inverse_opset19"];

#[test]
fn node_suite_cases_the_reference_passes_pass_on_the_simd_backend() {
    std::panic::set_hook(Box::new(|_| {}));
    let (mut reference_pass, mut simd_pass, mut fused_cases) = (0, 0, 0);
    let mut wrong = Vec::new();
    for case in common::node_cases() {
        let name = common::case_name(&case);
        if FLOAT32_NOISE.contains(&name.as_str())
            || name.starts_with("test_bernoulli")
            || name.contains("training_dropout")
        {
            continue;
        }
        let Ok(model) = diamond_importers::onnx::load_model(&case.join("model.onnx")) else { continue };
        let Some(graph) = model.main_graph() else { continue };
        let initialized: Vec<&str> = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
        let names: Vec<String> = graph
            .inputs
            .iter()
            .filter_map(|i| i.value)
            .map(|v| graph.value_name(v).to_string())
            .filter(|n| !initialized.contains(&n.as_str()))
            .collect();
        let Ok(inputs) = common::data_files(&case, "input")
            .iter()
            .zip(&names)
            .map(|(p, n)| read(p).map(|t| (n.clone(), Value::Tensor(t))))
            .collect::<Result<Vec<_>, _>>()
        else {
            continue;
        };
        let Ok(expected) = common::data_files(&case, "output").iter().map(|p| read(p)).collect::<Result<Vec<_>, _>>()
        else {
            continue;
        };
        let passes = |outs: &[(String, Value)]| {
            outs.len() == expected.len() && outs.iter().zip(&expected).all(|((_, g), w)| matches_stored(g, w))
        };
        match run_reference(&model, &inputs) {
            Ok(outs) if passes(&outs) => reference_pass += 1,
            _ => continue,
        }
        let mut ok = true;
        for options in modes() {
            match run_simd_counted(&model, &inputs, &options, true) {
                Ok((outs, fused)) if passes(&outs) => fused_cases += usize::from(fused > 0 && options.simd),
                Ok(_) => {
                    ok = false;
                    wrong.push(format!("{name} (simd {}): outputs differ from the stored ones", options.simd));
                }
                Err(e) => {
                    ok = false;
                    wrong.push(format!("{name} (simd {}): {e}", options.simd));
                }
            }
        }
        simd_pass += usize::from(ok);
    }
    eprintln!(
        "node suite: reference {reference_pass} pass, simd {simd_pass} pass, {fused_cases} of them with fused programs"
    );
    for w in &wrong {
        eprintln!("WRONG {w}");
    }
    assert!(wrong.is_empty(), "{} case(s) fail on the SIMD backend:\n{}", wrong.len(), wrong.join("\n"));
    assert_eq!(simd_pass, reference_pass);
    assert!(fused_cases >= FUSED_RATCHET, "{fused_cases} cases ran fused programs, fewer than {FUSED_RATCHET}");
    assert!(simd_pass >= NODE_RATCHET, "{simd_pass} cases pass, fewer than the ratchet {NODE_RATCHET}");
}

/// A light model computes its weights with ConstantOfShape from constant
/// shapes: the session computes those steps once, when it is prepared, and
/// its runs — the first and a second on pooled buffers — still give the
/// reference executor's outputs. An initializer that a fed input overrides
/// is not a constant: feeding one keeps the steps that read it.
#[test]
fn constant_steps_are_computed_once_when_the_session_is_prepared() {
    use diamond_runtime::simd::{Options, Session};
    use diamond_runtime::Fed;
    let path = common::root().join("fixtures/light/light_squeezenet.onnx");
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let inputs = random_inputs(&model, 7).unwrap();
    let want = run_reference(&model, &inputs).unwrap();
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    let options = Options::from_env();
    let mut session = Session::new(&model, &lowered, &fed, &options).unwrap();
    let constant_of_shape =
        model.main_graph().unwrap().nodes.values().filter(|n| n.op_type.as_deref() == Some("ConstantOfShape")).count();
    assert_eq!(constant_of_shape, 39);
    assert_eq!(session.coverage().hoisted_steps, constant_of_shape);
    for _ in 0..2 {
        let got = session.run(inputs.clone()).unwrap();
        agree(&got.outputs[0].1, &want[0].1, MODEL_RTOL, MODEL_ATOL).unwrap();
    }
    // The shape initializers are graph inputs (IR version 3): feeding one of
    // them makes the ConstantOfShape that reads it an ordinary step.
    let graph = model.main_graph().unwrap();
    let shape_input = graph
        .nodes
        .values()
        .find(|n| n.op_type.as_deref() == Some("ConstantOfShape"))
        .map(|n| graph.value_name(n.inputs[0]).to_string())
        .unwrap();
    assert!(graph.inputs.iter().any(|i| i.value.is_some_and(|v| graph.value_name(v) == shape_input)));
    let t = graph.initializers.iter().find(|t| t.name.as_deref() == Some(shape_input.as_str())).unwrap();
    let mut fed2 = fed.clone();
    fed2.push((shape_input.clone(), Fed::of(&Value::Tensor(Tensor::from_ir(t).unwrap()))));
    let readers =
        graph.nodes.values().filter(|n| n.inputs.first().is_some_and(|&v| graph.value_name(v) == shape_input)).count();
    let session = Session::new(&model, &lowered, &fed2, &options).unwrap();
    assert!(readers >= 1);
    assert_eq!(session.coverage().hoisted_steps, constant_of_shape - readers);
}

/// A session prepared again for other input shapes (`replan`) keeps the
/// weights it decoded and works out the rest anew: on a transformer whose
/// batch and sequence are symbols, each shape set gives the reference
/// executor's outputs and the coverage a fresh session at those shapes has,
/// back and forth between the sizes; its decoded weights then prepare
/// another session without decoding.
#[test]
fn a_replanned_session_runs_new_shapes_as_a_fresh_one() {
    use diamond_runtime::simd::{Options, Session};
    use diamond_runtime::Fed;
    let path = common::root().join("fixtures/exports/bert.legacy.onnx");
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    let options = Options::from_env();
    let fed_of = |inputs: &[(String, Value)]| -> Vec<(String, Fed)> {
        inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect()
    };
    // token ids, token types and the mask: 0 or 1 is in range for each
    let inputs_at = |seed: u64, size: usize| -> Vec<(String, Value)> {
        let mut inputs = random_inputs_sized(&model, seed, size).unwrap();
        for (_, v) in &mut inputs {
            if let Value::Tensor(Tensor { data: diamond_runtime::Data::I64(ids), .. }) = v {
                ids.iter_mut().for_each(|i| *i %= 2);
            }
        }
        inputs
    };
    let first = inputs_at(3, 2);
    let mut session = Session::new(&model, &lowered, &fed_of(&first), &options).unwrap();
    for (seed, size) in [(4, 5), (5, 1), (3, 2)] {
        let inputs = inputs_at(seed, size);
        let fed = fed_of(&inputs);
        assert_ne!(session.fed(), fed.as_slice(), "size {size}: the shapes change");
        session = session.replan(&lowered, &fed).unwrap();
        let fresh = Session::new(&model, &lowered, &fed, &options).unwrap();
        assert_eq!(session.coverage(), fresh.coverage(), "size {size}");
        let got = session.run(inputs.clone()).unwrap();
        let want = run_reference(&model, &inputs).unwrap();
        assert_eq!(got.outputs.len(), want.len());
        for ((name, g), (_, w)) in got.outputs.iter().zip(&want) {
            agree(g, w, MODEL_RTOL, MODEL_ATOL).unwrap_or_else(|e| panic!("size {size}, output '{name}': {e}"));
        }
    }
    // Its decoded weights prepare another session of the same model: every
    // one is taken, none decoded again, and the outputs are the same.
    let inputs = inputs_at(3, 2);
    let want = session.run(inputs.clone()).unwrap().outputs;
    let mut decoded = session.into_decoded();
    let initializers = model.main_graph().unwrap().initializers.len();
    assert_eq!(decoded.len(), initializers);
    let mut again = Session::new_reusing(&model, &lowered, &fed_of(&inputs), &options, &mut decoded).unwrap();
    assert!(decoded.is_empty(), "{} weights left untaken", decoded.len());
    let got = again.run(inputs).unwrap().outputs;
    for ((name, g), (_, w)) in got.iter().zip(&want) {
        agree(g, w, 0.0, 0.0).unwrap_or_else(|e| panic!("output '{name}' after reuse: {e}"));
    }
}

/// A Shape node whose input's shape the fed shapes fix is computed when
/// the session is prepared (and what reads it, hoisted with it); one
/// reading NonZero's output, whose shape follows the data, runs each time:
/// two runs on different data give the reference's two answers.
#[test]
fn shapes_fixed_by_the_fed_shapes_fold_and_data_dependent_ones_do_not() {
    use diamond_runtime::simd::Session;
    use diamond_runtime::{Data, Fed};
    let path = common::root().join("fixtures/runtime/shapes.onnx");
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    let x = |v: Vec<f32>| vec![("x".to_string(), Value::Tensor(Tensor::new(vec![2, 4], Data::F32(v)).unwrap()))];
    let first = x(vec![1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 4.0]);
    let second = x(vec![1.0, 1.0, 2.0, 5.0, 6.0, 0.0, 3.0, 4.0]);
    let fed: Vec<(String, Fed)> = first.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    for options in modes() {
        let mut session = Session::new(&model, &lowered, &fed, &options).unwrap();
        assert_eq!(session.coverage().folded_shapes, 1, "only the Shape of x folds");
        assert!(session.coverage().hoisted_steps >= 1, "the Reshape target built from it is hoisted");
        for inputs in [&first, &second, &first] {
            let got = session.run(inputs.clone()).unwrap();
            let want = run_reference(&model, inputs).unwrap();
            for ((name, g), (_, w)) in got.outputs.iter().zip(&want) {
                agree(g, w, 0.0, 0.0).unwrap_or_else(|e| panic!("output '{name}': {e}"));
            }
        }
    }
}

/// A session run from inside a pool of several threads keeps the pool's
/// other threads spinning for its parallel steps (`simd::hot_pool`): runs
/// there, one after another, give the reference's outputs and return (no
/// helper left spinning, none waited on by the thread it would block).
/// The fused-epilogue fixture's tiles are then cut across the threads.
#[test]
fn sessions_run_inside_a_pool_of_threads_agree_and_return() {
    // UNet's export: its Resize's planes in parallel (2×16 of 32²); ShuffleNet: grouped 1×1
    // convolutions with their groups side by side, channel shuffles written in parallel slices
    for name in [
        "fixtures/runtime/fused_epilogues.onnx",
        "fixtures/light/light_squeezenet.onnx",
        "fixtures/exports/unet.legacy.onnx",
        "fixtures/light/light_shufflenet.onnx",
    ] {
        let path = common::root().join(name);
        let model = diamond_importers::onnx::load_model(&path).expect("the fixture loads");
        let inputs = random_inputs(&model, 3).expect("random inputs for the fixture");
        let want = run_reference(&model, &inputs).expect("the reference runs the fixture");
        for threads in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
            let options = diamond_runtime::simd::Options { simd: true, ..Default::default() };
            let got = pool
                .install(|| run_simd_counted(&model, &inputs, &options, true))
                .unwrap_or_else(|e| panic!("{name} on {threads} threads: {e}"));
            for ((out, g), (_, w)) in got.0.iter().zip(&want) {
                agree(g, w, MODEL_RTOL, MODEL_ATOL)
                    .unwrap_or_else(|e| panic!("{name} on {threads} threads, '{out}': {e}"));
            }
        }
    }
}

/// Elementwise programs that are their contraction's activation, residual
/// add and activation after it run as part of the contraction's epilogue
/// (`simd::fold`): on the folded-epilogue fixture (small results, on every
/// kernel route: direct, pointwise, depthwise, strided, 1×1 planes, Gemm,
/// MatMul; Relu, residual + Relu, Clip, HardSigmoid, HardSwish, residual
/// first, Tanh, LeakyRelu, SiLU, a MatMul's bias with GELU spelt out two
/// ways and with a residual) twelve fold and three (Exp, a convolution's
/// per-channel Add, a mask over a MatMul's rows and columns) do not, and every output is the reference's, on one thread and
/// two, twice on pooled buffers, with the AVX2 paths and the portable ones.
#[test]
fn epilogue_programs_fold_into_their_contractions() {
    use diamond_runtime::simd::Session;
    use diamond_runtime::Fed;
    let path = common::root().join("fixtures/runtime/folded_epilogues.onnx");
    let model = diamond_importers::onnx::load_model(&path).expect("the fixture loads");
    let inputs = random_inputs(&model, 5).expect("random inputs for the fixture");
    let want = run_reference(&model, &inputs).expect("the reference runs the fixture");
    let lowered = diamond_optimize::lower::lower(&model).expect("the fixture lowers");
    let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
    for options in modes() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
            pool.install(|| {
                let mut session = Session::new(&model, &lowered, &fed, &options).expect("a session");
                assert_eq!(session.coverage().folded_epilogues, 12, "the programs that fold");
                for run in 0..2 {
                    let got = session.run(inputs.clone()).expect("the session runs");
                    assert_eq!(got.outputs.len(), want.len());
                    for ((out, g), (_, w)) in got.outputs.iter().zip(&want) {
                        agree(g, w, MODEL_RTOL, MODEL_ATOL).unwrap_or_else(|e| {
                            panic!("simd {}, {threads} thread(s), run {run}, '{out}': {e}", options.simd)
                        });
                    }
                }
            });
        }
    }
}

/// `fixtures/synthetic/unset_dims*.onnx` declare `x: [-1, 3, ?, ?]` (absent
/// dims, then `dim_param: "?"`): each open axis is its own symbol, so
/// unequal heights and widths bind, and the programs over them bind too
/// (none falls back to the reference kernels) and agree with the reference.
#[test]
fn open_input_axes_bind_apart_and_fuse() {
    for file in ["unset_dims.onnx", "unset_dims_variants.onnx"] {
        let path = common::root().join("fixtures/synthetic").join(file);
        let model = diamond_importers::onnx::load_model(&path).unwrap();
        for (shape, seed) in [([1, 3, 48, 192], 3u64), ([2, 3, 64, 40], 5)] {
            let mut rng = diamond_runtime::SplitMix64(seed);
            let n: usize = shape.iter().product();
            let data = diamond_runtime::Data::F32((0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect());
            let inputs = vec![("x".to_string(), Value::Tensor(Tensor { shape: shape.to_vec(), data }))];
            let want = run_reference(&model, &inputs).unwrap_or_else(|e| panic!("{file} {shape:?}: {e}"));
            let lowered = diamond_optimize::lower::lower(&model).unwrap();
            let fed: Vec<(String, diamond_runtime::Fed)> =
                inputs.iter().map(|(n, v)| (n.clone(), diamond_runtime::Fed::of(v))).collect();
            for options in modes() {
                let mut session = diamond_runtime::simd::Session::new(&model, &lowered, &fed, &options).unwrap();
                let coverage = session.coverage().clone();
                assert!(coverage.fallbacks.is_empty(), "{file} {shape:?}: {:?}", coverage.fallbacks);
                assert!(coverage.programs > 0, "{file}: some program runs over the open axes: {coverage:?}");
                let got = session.run(inputs.clone()).unwrap().outputs;
                for ((name, g), (_, w)) in got.iter().zip(&want) {
                    agree(g, w, MODEL_RTOL, MODEL_ATOL).unwrap_or_else(|e| panic!("{file} {shape:?} '{name}': {e}"));
                }
            }
            let plan = diamond_runtime::Plan::new(&model, &fed).unwrap();
            let bound: Vec<(&str, u64)> = plan.bindings().iter().map(|b| (b.symbol.as_str(), b.size)).collect();
            assert_eq!(bound, [("x.0", shape[0] as u64), ("x.2", shape[2] as u64), ("x.3", shape[3] as u64)]);
        }
    }
}

/// Float nodes whose shapes are known only at run time — after an `If`
/// whose branches differ in rank, as in silero-vad's decoder — run on the
/// session's own run-time kernels: with either branch taken, the
/// reference's outputs, no fallback, and nothing but the `If` itself on the
/// reference kernels (no branch preparation is given here).
#[test]
fn float_nodes_of_run_time_shapes_run_on_the_sessions_own_kernels() {
    use diamond_runtime::simd::{Session, StepKind};
    use diamond_runtime::{Data, Fed};
    let path = common::root().join("fixtures/runtime/late_shapes.onnx");
    let model = diamond_importers::onnx::load_model(&path).unwrap();
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    for wide in [true, false] {
        let x = Tensor::new(vec![3, 4], Data::F32((0..12).map(|v| v as f32 * 0.5 - 2.5).collect())).unwrap();
        let cond = Tensor::new(Vec::new(), Data::Bool(vec![wide])).unwrap();
        let inputs = vec![("X".to_string(), Value::Tensor(x)), ("wide".to_string(), Value::Tensor(cond))];
        let want = run_reference(&model, &inputs).unwrap();
        let fed: Vec<(String, Fed)> = inputs.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        for options in modes() {
            let mut session = Session::new(&model, &lowered, &fed, &options).unwrap();
            assert!(session.coverage().fallbacks.is_empty(), "{:?}", session.coverage().fallbacks);
            session.start_profiling();
            let got = session.run(inputs.clone()).unwrap();
            assert_eq!(got.outputs.len(), want.len());
            for ((name, g), (_, w)) in got.outputs.iter().zip(&want) {
                agree(g, w, 1e-6, 1e-6).unwrap_or_else(|e| panic!("wide={wide}, output {name}: {e}"));
            }
            assert!(session.fallbacks().is_empty(), "{:?}", session.fallbacks());
            let on_reference: Vec<String> = session
                .profile()
                .iter()
                .filter(|s| matches!(s.kind, StepKind::Reference | StepKind::Fallback))
                .map(|s| s.ops.clone())
                .collect();
            assert_eq!(on_reference, ["If"], "wide={wide}");
        }
    }
}
