//! The CUDA code generator on hand-written kernel programs: each kernel's
//! source, compiled for the CPU with the host shim, computes what a direct
//! loop computes (broadcasting, symbolic axes, strided and transposed
//! views, a nested reduction, 16-bit storage); and the same source compiles
//! with NVRTC and assembles with ptxas for sm_80 and sm_90 without spills.
//! The NVRTC test fails when `REQUIRE_NVRTC=1` and NVRTC is missing, and
//! is skipped with a message otherwise.

use diamond_ir::ElemType;
use diamond_runtime::cuda::{self, host::HostProgram, tensors};
use diamond_runtime::kernel::{BinaryOp, Combiner, Extent, Inst, Instr, Output, Program, UnaryOp, View, ViewDim};
use diamond_runtime::{Data, Tensor};
use std::path::PathBuf;

fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-cache")
}

fn ins(inst: Inst, ty: ElemType) -> Instr {
    Instr { inst, ty }
}

fn view(value: &str, elem: ElemType, dims: Vec<Extent>, view: Vec<ViewDim>) -> View {
    View { value: value.into(), elem, dims, view }
}

fn seq() -> Extent {
    Extent::Symbol("seq".into())
}

/// `y = cond ? relu(x · b + 1) : -x` over (2, seq): `b` broadcast over rows, `cond` over columns.
fn elementwise() -> Program {
    let f = ElemType::Float;
    Program {
        name: "k0".into(),
        axes: vec![Extent::Known(2), seq()],
        reduce: vec![],
        operands: vec![
            view("x", f, vec![Extent::Known(2), seq()], vec![ViewDim::follow(0), ViewDim::follow(1)]),
            view("b", f, vec![seq()], vec![ViewDim::follow(1)]),
            view(
                "cond",
                ElemType::Bool,
                vec![Extent::Known(2), Extent::Known(1)],
                vec![ViewDim::follow(0), ViewDim::fixed()],
            ),
        ],
        body: vec![
            ins(Inst::Load(0), f),
            ins(Inst::Load(1), f),
            ins(Inst::Binary(BinaryOp::Mul, 0, 1), f),
            ins(Inst::Const(1.0), f),
            ins(Inst::Binary(BinaryOp::Add, 2, 3), f),
            ins(Inst::Unary(UnaryOp::Relu, 4), f),
            ins(Inst::Unary(UnaryOp::Neg, 0), f),
            ins(Inst::Load(2), ElemType::Bool),
            ins(Inst::Select(7, 5, 6), f),
        ],
        outputs: vec![Output {
            view: view("y", f, vec![Extent::Known(2), seq()], vec![ViewDim::follow(0), ViewDim::follow(1)]),
            source: 8,
        }],
        nodes: vec![],
    }
}

/// Softmax over the last axis of `x` stored transposed (`xt` is (seq, rows)),
/// and the row maxima as a second output.
fn softmax(rows: u64) -> Program {
    let f = ElemType::Float;
    Program {
        name: "k1".into(),
        axes: vec![Extent::Known(rows), seq()],
        reduce: vec![1],
        operands: vec![view("xt", f, vec![seq(), Extent::Known(rows)], vec![ViewDim::follow(1), ViewDim::follow(0)])],
        body: vec![
            ins(Inst::Load(0), f),
            ins(Inst::Reduce(Combiner::Max, 0), f),
            ins(Inst::Binary(BinaryOp::Sub, 0, 1), f),
            ins(Inst::Unary(UnaryOp::Exp, 2), f),
            ins(Inst::Reduce(Combiner::Sum, 3), f),
            ins(Inst::Binary(BinaryOp::Div, 3, 4), f),
        ],
        outputs: vec![
            Output {
                view: view("p", f, vec![Extent::Known(rows), seq()], vec![ViewDim::follow(0), ViewDim::follow(1)]),
                source: 5,
            },
            Output {
                view: view(
                    "m",
                    f,
                    vec![Extent::Known(rows), Extent::Known(1)],
                    vec![ViewDim::follow(0), ViewDim::fixed()],
                ),
                source: 1,
            },
        ],
        nodes: vec![],
    }
}

/// `y = x · 2 − 0.5` in float16 storage, every other element of `x` (a step-2 slice).
fn half_slice() -> Program {
    let (h, f) = (ElemType::Float16, ElemType::Float16);
    Program {
        name: "k2".into(),
        axes: vec![Extent::Known(5)],
        reduce: vec![],
        operands: vec![view("x", h, vec![Extent::Known(10)], vec![ViewDim { axis: Some(0), start: 1, step: 2 }])],
        body: vec![
            ins(Inst::Load(0), f),
            ins(Inst::Const(2.0), f),
            ins(Inst::Binary(BinaryOp::Mul, 0, 1), f),
            ins(Inst::Const(0.5), f),
            ins(Inst::Binary(BinaryOp::Sub, 2, 3), f),
        ],
        outputs: vec![Output { view: view("y", h, vec![Extent::Known(5)], vec![ViewDim::follow(0)]), source: 4 }],
        nodes: vec![],
    }
}

fn floats(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed;
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) * 4.0 - 2.0
        })
        .collect();
    Tensor::new(shape.to_vec(), Data::F32(v)).unwrap()
}

fn as_f32(t: &Tensor) -> Vec<f32> {
    t.to_f64s().unwrap().into_iter().map(|x| x as f32).collect()
}

fn close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * (1.0 + w.abs()), "element {i}: {g} vs {w}");
    }
}

#[test]
fn generated_kernels_run_on_the_host_shim_as_direct_loops_compute() {
    let programs = [elementwise(), softmax(3), half_slice()];
    let kernels: Vec<_> = programs.iter().map(|p| cuda::generate(p).unwrap()).collect();
    let host = HostProgram::build(&kernels, &cache()).unwrap();
    let seq_len = 37usize; // fewer columns than a block has threads: some threads stay idle in the reduction
    let value_of = |s: &str| (s == "seq").then_some(seq_len as i64);

    // Elementwise, with broadcasting.
    let x = floats(&[2, seq_len], 1);
    let b = floats(&[seq_len], 2);
    let cond = Tensor::new(vec![2, 1], Data::Bool(vec![true, false])).unwrap();
    let (job0, outs0) = tensors::job(&programs[0], &kernels[0], 0, &[&x, &b, &cond], &value_of).unwrap();
    // Softmax over a transposed operand.
    let xt = floats(&[seq_len, 3], 3);
    let (job1, outs1) = tensors::job(&programs[1], &kernels[1], 1, &[&xt], &value_of).unwrap();
    // float16, strided.
    let xh: Vec<half::f16> = (0..10).map(|i| half::f16::from_f32(i as f32 * 0.37 - 1.0)).collect();
    let xh = Tensor::new(vec![10], Data::F16(xh)).unwrap();
    let (job2, outs2) = tensors::job(&programs[2], &kernels[2], 2, &[&xh], &value_of).unwrap();

    let results = host.run(vec![job0, job1, job2]).unwrap();
    let out = |r: usize, k: usize, outs: &[(ElemType, Vec<usize>)], n_in: usize| {
        let (elem, shape) = outs[k].clone();
        tensors::from_bytes(elem, shape, &results[r][n_in + k]).unwrap()
    };

    let (xv, bv) = (as_f32(&x), as_f32(&b));
    let want: Vec<f32> = (0..2 * seq_len)
        .map(|i| {
            let (r, c) = (i / seq_len, i % seq_len);
            if r == 0 {
                (xv[i] * bv[c] + 1.0).max(0.0)
            } else {
                -xv[i]
            }
        })
        .collect();
    close(&as_f32(&out(0, 0, &outs0, 3)), &want, 0.0);

    let xtv = as_f32(&xt);
    let mut want_p = vec![0.0f32; 3 * seq_len];
    let mut want_m = vec![0.0f32; 3];
    for r in 0..3 {
        let row: Vec<f32> = (0..seq_len).map(|c| xtv[c * 3 + r]).collect();
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f32 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..seq_len {
            want_p[r * seq_len + c] = (row[c] - m).exp() / sum;
        }
        want_m[r] = m;
    }
    close(&as_f32(&out(1, 0, &outs1, 1)), &want_p, 1e-5);
    close(&as_f32(&out(1, 1, &outs1, 1)), &want_m, 0.0);

    let xhv = as_f32(&xh);
    let want_h: Vec<f32> = (0..5).map(|i| half::f16::from_f32(xhv[2 * i + 1] * 2.0 - 0.5).to_f32()).collect();
    close(&as_f32(&out(2, 0, &outs2, 1)), &want_h, 0.0);
}

#[test]
fn generated_kernels_compile_with_nvrtc_and_assemble_without_spills() {
    if !cuda::nvrtc::available() {
        assert!(std::env::var("REQUIRE_NVRTC").as_deref() != Ok("1"), "{}", cuda::nvrtc::MISSING);
        eprintln!("skipped: {}", cuda::nvrtc::MISSING);
        return;
    }
    let programs = [elementwise(), softmax(3), half_slice()];
    let kernels: Vec<_> = programs.iter().map(|p| cuda::generate(p).unwrap()).collect();
    let built = cuda::artifact::build(&kernels, Some(&cache())).unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&built.ptx).contains(".entry k1"));
    for arch in cuda::artifact::ARCHS {
        for k in &kernels {
            let u = built.usage.iter().find(|u| u.kernel == k.name && u.arch == arch);
            let u = u.unwrap_or_else(|| panic!("ptxas reported nothing for {} on {arch}", k.name));
            assert!(u.registers > 0 && u.spill_stores == 0 && u.spill_loads == 0, "{u:?}");
        }
    }
    let reduction = built.usage.iter().find(|u| u.kernel == "k1").unwrap();
    assert_eq!(reduction.shared_bytes, 256 * 4, "the block's shared buffer");
}
