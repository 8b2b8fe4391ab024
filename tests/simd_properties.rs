//! Property tests of the SIMD backend: random graphs — an input read
//! through a Transpose, a Slice with step 2 or -2, or directly, chains of elementwise operators with
//! broadcasting operands (size-1 and missing leading axes), symbolic
//! sizes, optionally a reduction (ReduceSum/Mean/Max/Min over random axes,
//! Softmax, LayerNormalization) with an elementwise epilogue, and an
//! intermediate value as a second output — are lowered to kernel programs
//! and run on both code paths, and must agree with the reference executor.

mod common;
mod simd;

use diamond_onnx_proto::{
    attribute_proto::AttributeType, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    ValueInfoProto,
};
use diamond_runtime::{Data, SplitMix64, Tensor, Value};
use proptest::prelude::*;
use prost::Message;
use simd::{agree, modes, run_reference, run_simd_counted};

#[derive(Clone, Debug)]
enum Op {
    Unary(usize),
    /// The chain value with extra input `k` (`op`, `k`).
    Binary(usize, usize),
    /// `Where(extra_k > 0, chain, extra_k)`.
    Select(usize),
    Clip(i8, i8),
    /// `Pow(chain, EXPONENTS[k])` (of `Abs(chain)` for fractional exponents,
    /// `Abs(chain) + 1` for negative ones).
    Pow(usize),
}

/// Exponents of the `Pow` ops: the small integers and the square root the
/// tile evaluator computes by multiplication, and one it leaves to `powf`.
const EXPONENTS: &[f32] = &[2.0, 3.0, 4.0, -1.0, 0.5, 1.5];

#[derive(Clone, Debug)]
enum Red {
    Reduce { op: usize, axes: Vec<bool>, keepdims: bool },
    Softmax(usize),
    LayerNorm(usize),
}

#[derive(Clone, Debug)]
struct Case {
    dims: Vec<(usize, bool)>,
    transpose: Option<Vec<usize>>,
    /// Read x through a Slice of axis 0 with step 2 (`true`: -2), when
    /// there is no Transpose and axis 0 has a fixed size.
    slice: Option<bool>,
    extras: Vec<(usize, Vec<bool>)>,
    ops: Vec<Op>,
    red: Option<Red>,
    epilogue: Option<usize>,
    tap: bool,
    seed: u64,
}

const UNARY: &[&str] = &[
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Abs",
    "Neg",
    "Erf",
    "LeakyRelu",
    "HardSigmoid",
    "Softsign",
    "Identity",
    "Sqrt",
];
const BINARY: &[&str] = &["Add", "Sub", "Mul", "Div", "Max", "Min"];
const REDUCE: &[&str] = &["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"];

fn case() -> impl Strategy<Value = Case> {
    let dims = prop::collection::vec((prop::sample::select(vec![1usize, 2, 3, 5, 8, 17, 33]), any::<bool>()), 1..=4);
    dims.prop_flat_map(|dims| {
        let r = dims.len();
        let perm = Just((0..r).collect::<Vec<usize>>()).prop_shuffle();
        let extras = prop::collection::vec((0..=r, prop::collection::vec(any::<bool>(), r)), 1..=3);
        let ops = prop::collection::vec(
            prop_oneof![
                (0..UNARY.len()).prop_map(Op::Unary),
                (0..BINARY.len(), 0..3usize).prop_map(|(o, k)| Op::Binary(o, k)),
                (0..3usize).prop_map(Op::Select),
                (-3i8..0, 0i8..3).prop_map(|(a, b)| Op::Clip(a, b)),
                (0..EXPONENTS.len()).prop_map(Op::Pow),
            ],
            1..=8,
        );
        let red = prop::option::of(prop_oneof![
            (0..REDUCE.len(), prop::collection::vec(any::<bool>(), r), any::<bool>())
                .prop_map(|(op, axes, keepdims)| Red::Reduce { op, axes, keepdims }),
            (0..r).prop_map(Red::Softmax),
            (0..r).prop_map(Red::LayerNorm),
        ]);
        (
            (Just(dims), prop::option::of(perm), prop::option::of(any::<bool>())),
            extras,
            ops,
            red,
            prop::option::of(0..UNARY.len()),
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|((dims, transpose, slice), extras, ops, red, epilogue, tap, seed)| Case {
                dims,
                transpose,
                slice,
                extras,
                ops,
                red,
                epilogue,
                tap,
                seed,
            })
    })
}

fn info(name: &str, dims: &[String]) -> ValueInfoProto {
    common::tensor_info(name, 1, &dims.iter().map(String::as_str).collect::<Vec<_>>())
}

fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        op_type: Some(op.into()),
        attribute: attrs,
        ..Default::default()
    }
}

fn ints(name: &str, v: Vec<i64>) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(AttributeType::Ints as i32), ints: v, ..Default::default() }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn floats(name: &str, dims: Vec<i64>, v: Vec<f32>) -> TensorProto {
    TensorProto { name: Some(name.into()), dims, data_type: Some(1), float_data: v, ..Default::default() }
}

/// The model and its inputs; also the length of the longest reduction.
fn build(c: &Case) -> (diamond_ir::Model, Vec<(String, Value)>, usize) {
    let r = c.dims.len();
    let text = |i: usize| if c.dims[i].1 { format!("s{i}") } else { c.dims[i].0.to_string() };
    let full: Vec<String> = (0..r).map(text).collect();
    let mut rng = SplitMix64(c.seed);
    let mut rand = |n: usize| -> Vec<f32> { (0..n).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect() };
    let mut nodes = Vec::new();
    let mut inputs = Vec::new();
    let mut feeds = Vec::new();
    let mut inits = Vec::new();
    // x, through a Transpose when asked.
    let mut cur = "x".to_string();
    match &c.transpose {
        Some(p) => {
            let mut in_dims = vec![String::new(); r];
            let mut in_sizes = vec![0usize; r];
            for i in 0..r {
                in_dims[p[i]] = full[i].clone();
                in_sizes[p[i]] = c.dims[i].0;
            }
            inputs.push(info("x", &in_dims));
            feeds.push(("x".to_string(), in_sizes));
            nodes.push(node("Transpose", &["x"], "xt", vec![ints("perm", p.iter().map(|&i| i as i64).collect())]));
            cur = "xt".into();
        }
        None => match c.slice.filter(|_| !c.dims[0].1) {
            Some(backwards) => {
                let mut in_dims = full.clone();
                let mut in_sizes: Vec<usize> = c.dims.iter().map(|d| d.0).collect();
                in_sizes[0] = 2 * c.dims[0].0 + 1;
                in_dims[0] = in_sizes[0].to_string();
                inputs.push(info("x", &in_dims));
                feeds.push(("x".to_string(), in_sizes.clone()));
                let (start, end, step) = if backwards { (-1, 0, -2) } else { (1, in_sizes[0] as i64, 2) };
                for (name, v) in [("sl_starts", start), ("sl_ends", end), ("sl_axes", 0), ("sl_steps", step)] {
                    inits.push(TensorProto {
                        name: Some(name.into()),
                        dims: vec![1],
                        data_type: Some(7),
                        int64_data: vec![v],
                        ..Default::default()
                    });
                }
                nodes.push(node("Slice", &["x", "sl_starts", "sl_ends", "sl_axes", "sl_steps"], "xs", vec![]));
                cur = "xs".into();
            }
            None => {
                inputs.push(info("x", &full));
                feeds.push(("x".to_string(), c.dims.iter().map(|d| d.0).collect()));
            }
        },
    }
    // Extra inputs broadcasting into x: leading axes dropped, others kept or 1.
    for (k, (drop, keep)) in c.extras.iter().enumerate() {
        let name = format!("e{k}");
        let dims: Vec<String> =
            (*drop.min(&(r - 1))..r).map(|i| if keep[i] { full[i].clone() } else { "1".into() }).collect();
        let sizes: Vec<usize> = (*drop.min(&(r - 1))..r).map(|i| if keep[i] { c.dims[i].0 } else { 1 }).collect();
        inputs.push(info(&name, &dims));
        feeds.push((name, sizes));
    }
    let extra = |k: usize| format!("e{}", k % c.extras.len());
    let mut outputs = Vec::new();
    for (i, op) in c.ops.iter().enumerate() {
        let out = format!("v{i}");
        match op {
            Op::Unary(u) => {
                let name = UNARY[*u];
                if name == "Sqrt" {
                    nodes.push(node("Abs", &[&cur], &format!("{out}a"), vec![]));
                    nodes.push(node("Sqrt", &[&format!("{out}a")], &out, vec![]));
                } else {
                    nodes.push(node(name, &[&cur], &out, vec![]));
                }
            }
            Op::Binary(b, k) if BINARY[*b] == "Div" => {
                // A quotient by a value near 0, squared and fed to Exp, is
                // finite in the reference's f64 but overflows f32 (and a
                // LayerNorm of it then differs wholly): divide by |e| + 1.
                let e = extra(*k);
                nodes.push(node("Abs", &[&e], &format!("{out}a"), vec![]));
                inits.push(floats(&format!("{out}o"), vec![], vec![1.0]));
                nodes.push(node("Add", &[&format!("{out}a"), &format!("{out}o")], &format!("{out}d"), vec![]));
                nodes.push(node("Div", &[&cur, &format!("{out}d")], &out, vec![]));
            }
            Op::Binary(b, k) => nodes.push(node(BINARY[*b], &[&cur, &extra(*k)], &out, vec![])),
            Op::Pow(k) => {
                let e = EXPONENTS[*k];
                inits.push(floats(&format!("{out}e"), vec![], vec![e]));
                let base = if e < 0.0 {
                    // 1/x of a value near 0 then fed to Exp overflows f32
                    // (the reference widens to f64): keep the base at least 1.
                    nodes.push(node("Abs", &[&cur], &format!("{out}a"), vec![]));
                    inits.push(floats(&format!("{out}o"), vec![], vec![1.0]));
                    nodes.push(node("Add", &[&format!("{out}a"), &format!("{out}o")], &format!("{out}b"), vec![]));
                    format!("{out}b")
                } else if e.fract() != 0.0 {
                    nodes.push(node("Abs", &[&cur], &format!("{out}a"), vec![]));
                    format!("{out}a")
                } else {
                    cur.clone()
                };
                nodes.push(node("Pow", &[&base, &format!("{out}e")], &out, vec![]));
            }
            Op::Select(k) => {
                let e = extra(*k);
                inits.push(floats(&format!("{out}z"), vec![], vec![0.0]));
                nodes.push(node("Greater", &[&e, &format!("{out}z")], &format!("{out}c"), vec![]));
                nodes.push(node("Where", &[&format!("{out}c"), &cur, &e], &out, vec![]));
            }
            Op::Clip(lo, hi) => {
                inits.push(floats(&format!("{out}lo"), vec![], vec![f32::from(*lo) / 2.0]));
                inits.push(floats(&format!("{out}hi"), vec![], vec![f32::from(*hi) / 2.0]));
                nodes.push(node("Clip", &[&cur, &format!("{out}lo"), &format!("{out}hi")], &out, vec![]));
            }
        }
        cur = out;
        if c.tap && i == 0 && c.ops.len() > 1 {
            outputs.push(cur.clone());
        }
    }
    let mut longest = 1;
    if let Some(red) = &c.red {
        match red {
            Red::Reduce { op, axes, keepdims } => {
                let mut ax: Vec<i64> = (0..r).filter(|&i| axes[i]).map(|i| i as i64).collect();
                if ax.is_empty() {
                    ax.push(0);
                }
                longest = ax.iter().map(|&a| c.dims[a as usize].0).product();
                let keep = int("keepdims", i64::from(*keepdims));
                if REDUCE[*op] == "ReduceSum" {
                    inits.push(TensorProto {
                        name: Some("axes".into()),
                        dims: vec![ax.len() as i64],
                        data_type: Some(7),
                        int64_data: ax,
                        ..Default::default()
                    });
                    nodes.push(node("ReduceSum", &[&cur, "axes"], "red", vec![keep]));
                } else {
                    nodes.push(node(REDUCE[*op], &[&cur], "red", vec![ints("axes", ax), keep]));
                }
            }
            Red::Softmax(a) => {
                longest = c.dims[*a].0;
                nodes.push(node("Softmax", &[&cur], "red", vec![int("axis", *a as i64)]));
            }
            Red::LayerNorm(a) => {
                let n: usize = c.dims[*a..].iter().map(|d| d.0).product();
                longest = n;
                let shape: Vec<i64> = c.dims[*a..].iter().map(|d| d.0 as i64).collect();
                inits.push(floats("scale", shape.clone(), rand(n)));
                inits.push(floats("bias", shape, rand(n)));
                nodes.push(node("LayerNormalization", &[&cur, "scale", "bias"], "red", vec![int("axis", *a as i64)]));
            }
        }
        cur = "red".into();
        if let Some(u) = c.epilogue {
            let name = if UNARY[u] == "Sqrt" { "Abs" } else { UNARY[u] };
            nodes.push(node(name, &[&cur], "epi", vec![]));
            cur = "epi".into();
        }
    }
    outputs.push(cur);
    let graph = GraphProto {
        name: Some("random".into()),
        node: nodes,
        input: inputs,
        initializer: inits,
        output: outputs.iter().map(|o| ValueInfoProto { name: Some(o.clone()), ..Default::default() }).collect(),
        ..Default::default()
    };
    let proto = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(graph),
        ..Default::default()
    };
    let bytes = bytes::Bytes::from(proto.encode_to_vec());
    let model =
        diamond_importers::onnx::decode_model(bytes, std::path::Path::new("random.onnx"), std::path::Path::new("."))
            .expect("the generated model imports");
    let fed = feeds
        .into_iter()
        .map(|(n, shape)| {
            let len = shape.iter().product();
            (n, Value::Tensor(Tensor { shape, data: Data::F32(rand(len)) }))
        })
        .collect();
    (model, fed, longest)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_agree_with_the_reference(c in case()) {
        let (model, inputs, longest) = build(&c);
        let want = run_reference(&model, &inputs).expect("the reference runs the generated model");
        let scale = want
            .iter()
            .filter_map(|(_, v)| v.as_tensor().and_then(Tensor::to_f64s))
            .flatten()
            .filter(|x| x.is_finite())
            .fold(1.0f64, |m, x| m.max(x.abs()));
        let atol = 2e-5 * scale * (longest as f64).sqrt();
        for options in modes() {
            let (got, fused) = run_simd_counted(&model, &inputs, &options, true).map_err(TestCaseError::fail)?;
            // Every node of the chain runs in programs (a Transpose or Slice folds into a view).
            let listing = || {
                let lowered = diamond_optimize::lower::lower(&model).unwrap();
                diamond_runtime::kernel::print::lowered(&lowered, &|n| format!("{n:?}"))
            };
            // (A LayerNormalization whose scale has a fixed size where x has a symbol stays a node.)
            let plain = usize::from(matches!(c.red, Some(Red::LayerNorm(a)) if c.dims[a..].iter().any(|d| d.1)));
            prop_assert!(fused + plain >= model.main_graph().unwrap().nodes.len(), "{} nodes fused:\n{}", fused, listing());
            prop_assert_eq!(got.len(), want.len());
            for ((name, g), (_, w)) in got.iter().zip(&want) {
                if let Err(e) = agree(g, w, 1e-4, atol) {
                    return Err(TestCaseError::fail(format!("output '{name}' (simd {}): {e}", options.simd)));
                }
            }
        }
    }
}

/// The lowering of a chain fuses it: one program, no reference node.
#[test]
fn a_chain_with_a_softmax_is_one_program() {
    let c = Case {
        dims: vec![(4, true), (33, false)],
        transpose: Some(vec![1, 0]),
        slice: None,
        extras: vec![(1, vec![true, true])],
        ops: vec![Op::Unary(0), Op::Binary(0, 0), Op::Unary(1)],
        red: Some(Red::Softmax(1)),
        epilogue: Some(5),
        tap: false,
        seed: 3,
    };
    let (model, _, _) = build(&c);
    let lowered = diamond_optimize::lower::lower(&model).unwrap();
    let text = diamond_runtime::kernel::print::lowered(&lowered, &|n| format!("{n:?}"));
    assert_eq!(lowered.steps.len(), 1, "{text}");
    let p = lowered.programs().next().unwrap();
    diamond_runtime::kernel::verify::verify(p).unwrap();
    assert_eq!(p.reduce, vec![1], "{text}");
    assert!(text.contains("'x': float[33, s0] at [d1, d0]"), "the Transpose folds into the view: {text}");
}

/// On a processor with AVX-512 the tests above run the tile evaluator's
/// AVX-512 instance; this runs the random programs again in a process held
/// to the AVX2 one (`DIAMOND_SIMD=avx2`), so that both are checked there.
#[test]
fn the_avx2_instance_agrees_too_where_avx512_is_present() {
    if std::env::var_os("DIAMOND_SIMD").is_some() || !diamond_runtime::simd::cpu::avx512() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["random_programs_agree_with_the_reference", "--exact", "--test-threads", "1"])
        .env("DIAMOND_SIMD", "avx2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// A LayerNormalization of a transposed input (ConvNeXt's `Transpose` +
/// `LayerNormalization`: NCHW normalized over C, written NHWC) is a
/// program of its own that the SIMD backend runs with the outer points in
/// vector lanes (`simd::norm_lanes`): random scale and bias, inner extents
/// under, at and past a multiple of 16, a symbolic batch, and an input
/// whose innermost outer axis is strided too (`[B, C, A]` read as `[A, B, C]`);
/// one large enough for the blocks to run in parallel.
#[test]
fn layer_norms_over_a_transposed_axis_agree_with_the_reference() {
    let cases: [(&[(usize, bool)], &[usize]); 6] = [
        (&[(2, false), (8, false), (8, false), (16, false)], &[0, 2, 3, 1]),
        // 131,072 values: blocks in parallel
        (&[(2, false), (32, false), (32, false), (64, false)], &[0, 2, 3, 1]),
        (&[(1, false), (5, false), (7, false), (24, false)], &[0, 2, 3, 1]),
        (&[(3, true), (4, false), (16, false), (9, false)], &[0, 2, 3, 1]),
        (&[(6, false), (5, false), (16, false)], &[2, 0, 1]),
        (&[(40, false), (33, false)], &[1, 0]),
    ];
    for (seed, (dims, perm)) in cases.into_iter().enumerate() {
        let c = Case {
            dims: dims.to_vec(),
            transpose: Some(perm.to_vec()),
            slice: None,
            extras: vec![],
            ops: vec![],
            red: Some(Red::LayerNorm(dims.len() - 1)),
            epilogue: None,
            tap: false,
            seed: seed as u64,
        };
        let (model, inputs, longest) = build(&c);
        let want = run_reference(&model, &inputs).expect("the reference runs the generated model");
        for options in modes() {
            let (got, _) = run_simd_counted(&model, &inputs, &options, true).expect("the SIMD backend runs it");
            for ((name, g), (_, w)) in got.iter().zip(&want) {
                let atol = 2e-5 * (longest as f64).sqrt();
                agree(g, w, 1e-4, atol).unwrap_or_else(|e| panic!("{dims:?} perm {perm:?}: output '{name}': {e}"));
            }
        }
    }
}

/// Softmax over rows longer than the lane-wise runner takes
/// (`simd::softmax_rows`): a plain contiguous one (the operand's rows
/// straight into the output's), one after a chain with an epilogue and a
/// broadcast operand (the row buffer, instructions after the division),
/// rows read through a Transpose (strided), a symbolic row count, rows of
/// 1500 (Whisper's attention), and enough of them to run in parallel.
#[test]
fn softmax_over_long_rows_agrees_with_the_reference() {
    let plain = |dims: &[(usize, bool)]| Case {
        dims: dims.to_vec(),
        transpose: None,
        slice: None,
        extras: vec![],
        ops: vec![],
        red: Some(Red::Softmax(dims.len() - 1)),
        epilogue: None,
        tap: false,
        seed: 11,
    };
    let chained = Case {
        extras: vec![(0, vec![false, true])],
        ops: vec![Op::Binary(0, 0), Op::Unary(1)],
        epilogue: Some(2),
        ..plain(&[(5, false), (257, false)])
    };
    let transposed = Case { transpose: Some(vec![1, 0]), ..plain(&[(7, false), (300, false)]) };
    let cases = [
        plain(&[(3, false), (129, false)]),
        chained,
        transposed,
        plain(&[(4, true), (200, false)]),
        plain(&[(2, false), (1500, false)]),
        plain(&[(96, false), (640, false)]),
    ];
    for c in cases {
        let (model, inputs, _) = build(&c);
        let want = run_reference(&model, &inputs).expect("the reference runs the generated model");
        for options in modes() {
            let (got, fused) = run_simd_counted(&model, &inputs, &options, true).expect("the SIMD backend runs it");
            assert!(fused >= model.main_graph().unwrap().nodes.len(), "{c:?}: every node in programs");
            for ((name, g), (_, w)) in got.iter().zip(&want) {
                // probabilities of 1/1500 and less: a tolerance of their size
                agree(g, w, 1e-4, 1e-7).unwrap_or_else(|e| panic!("{c:?}: output '{name}': {e}"));
            }
        }
    }
}
