//! Elementwise programs over rows longer than a tile: a program whose runs
//! touch no tile register goes a span of many tiles per call, and every
//! output must still hold every point — a run's output written in place,
//! an output copied from a uniform value's register (which holds one
//! tile's points), and the row's last points that fill no whole block.

use diamond_ir::ElemType;
use diamond_runtime::kernel::{BinaryOp, Extent, Inst, Instr, Output, Program, UnaryOp, View, ViewDim};
use diamond_runtime::simd::bind::bind;
use diamond_runtime::simd::elementwise::{self, Order};
use diamond_runtime::simd::tile::{Dst, Src};

fn view(name: &str, dims: &[usize]) -> View {
    View {
        value: name.into(),
        elem: ElemType::Float,
        dims: dims.iter().map(|&d| Extent::Known(d as u64)).collect(),
        view: (0..dims.len()).map(ViewDim::follow).collect(),
    }
}

/// `y = relu(x·2 + 1) − 0.5`, `u = 3` (uniform), `w = x·2 + 1` (kept).
fn program(dims: &[usize]) -> Program {
    let f = ElemType::Float;
    let i = |inst| Instr { inst, ty: f };
    Program {
        name: "span".into(),
        axes: dims.iter().map(|&d| Extent::Known(d as u64)).collect(),
        reduce: vec![],
        operands: vec![view("x", dims)],
        body: vec![
            i(Inst::Load(0)),
            i(Inst::Const(2.0)),
            i(Inst::Binary(BinaryOp::Mul, 0, 1)),
            i(Inst::Const(1.0)),
            i(Inst::Binary(BinaryOp::Add, 2, 3)),
            i(Inst::Unary(UnaryOp::Relu, 4)),
            i(Inst::Const(0.5)),
            i(Inst::Binary(BinaryOp::Sub, 5, 6)),
            i(Inst::Const(3.0)),
        ],
        outputs: vec![
            Output { view: view("y", dims), source: 7 },
            Output { view: view("u", dims), source: 8 },
            Output { view: view("w", dims), source: 4 },
        ],
        nodes: vec![],
    }
}

/// Runs [`program`] over `dims` (without `w` unless `with_w`) with each
/// output `shift` floats past its buffer's start, and holds every point to
/// the scalar arithmetic.
fn check_shifted(dims: &[usize], with_w: bool, simd: bool, shift: usize) {
    let mut p = program(dims);
    if !with_w {
        p.outputs.pop();
    }
    let b = bind(&p, &|_| None).unwrap();
    let order = Order::of(&p);
    let n: usize = dims.iter().product();
    let x: Vec<f32> = (0..n).map(|k| (k % 13) as f32 - 6.0).collect();
    let mut bufs = vec![vec![f32::NAN; n + shift]; p.outputs.len()];
    // SAFETY: each buffer holds `shift` floats more than the output.
    let dsts: Vec<Dst> = bufs.iter_mut().map(|o| Dst::F32(unsafe { o.as_mut_ptr().add(shift) })).collect();
    // SAFETY: x and every output hold the n points the program was bound for.
    unsafe { elementwise::run(&p, &order, &b, &[Src::F32(x.as_ptr())], &dsts, simd) };
    let outs: Vec<&[f32]> = bufs.iter().map(|o| &o[shift..]).collect();
    for o in &bufs {
        assert!(o[..shift].iter().all(|v| v.is_nan()), "{dims:?}: written before the output (shift {shift})");
    }
    for k in 0..n {
        let w = x[k] * 2.0 + 1.0;
        let want = [w.max(0.0) - 0.5, 3.0, w];
        for (o, out) in outs.iter().enumerate() {
            assert_eq!(out[k], want[o], "{dims:?}, output {o}, point {k} (simd {simd}, shift {shift})");
        }
    }
}

fn check(dims: &[usize], with_w: bool, simd: bool) {
    check_shifted(dims, with_w, simd, 0)
}

/// Outputs of 16 MiB and more are written with streaming stores: from the
/// run's registers where a block lies on a cache line (a row's first span
/// is cut short to get there), from a tile register otherwise (the uniform
/// `u`). Every alignment of the outputs' start, on one thread and on two,
/// must still give every point.
#[test]
fn large_outputs_are_streamed_at_any_alignment() {
    let dims = [2, (elementwise::STREAM_BYTES / 8) + 37];
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        for shift in [0, 1, 4, 13] {
            pool.install(|| check_shifted(&dims, true, true, shift));
        }
    }
}

#[test]
fn long_rows_fill_every_output() {
    for dims in [vec![600], vec![3, 700], vec![2, 2048 + 37], vec![5000], vec![255], vec![257]] {
        for with_w in [false, true] {
            for simd in [true, false] {
                check(&dims, with_w, simd);
            }
        }
    }
}
