//! The elementwise goal of the SIMD backend: a fused chain of 8 operators
//! over 16M floats against the machine's copy bandwidth measured in the
//! same run (a memcpy of the same bytes: 64 MiB read, 64 MiB written), on
//! 1 thread and on every core, the copy and the chain run in turn. `cargo bench -p diamond-runtime --bench
//! simd_elementwise`; besides criterion's report it prints one summary
//! line per thread count: each one's GB/s and the chain's share of the
//! copy bandwidth.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use diamond_ir::ElemType;
use diamond_runtime::kernel::{BinaryOp, Extent, Inst, Instr, Output, Program, UnaryOp, View, ViewDim};
use diamond_runtime::simd::bind::{bind, Bound};
use diamond_runtime::simd::elementwise;
use diamond_runtime::simd::tile::{Dst, Src};
use rayon::prelude::*;
use std::time::Instant;

const N: usize = 16 << 20;

/// `y = sub(max(min(mul(add(relu(add(mul(x, 1.5), 0.25)), 0.5), 0.75), 4), -4), 0.125)`: 8 operators.
fn chain() -> Program {
    let f = ElemType::Float;
    let view = |name: &str| View {
        value: name.into(),
        elem: f,
        dims: vec![Extent::Known(N as u64)],
        view: vec![ViewDim::follow(0)],
    };
    let mut body = vec![Instr { inst: Inst::Load(0), ty: f }];
    let mut push = |inst: Inst| {
        body.push(Instr { inst, ty: f });
        body.len() - 1
    };
    let mut cur = 0;
    for (op, c) in [
        (BinaryOp::Mul, 1.5),
        (BinaryOp::Add, 0.25),
        (BinaryOp::Add, 0.5),
        (BinaryOp::Mul, 0.75),
        (BinaryOp::Min, 4.0),
        (BinaryOp::Max, -4.0),
        (BinaryOp::Sub, 0.125),
    ] {
        let k = push(Inst::Const(c));
        cur = push(Inst::Binary(op, cur, k));
        if op == BinaryOp::Add && c == 0.25 {
            cur = push(Inst::Unary(UnaryOp::Relu, cur));
        }
    }
    Program {
        name: "chain8".into(),
        axes: vec![Extent::Known(N as u64)],
        reduce: vec![],
        operands: vec![view("x")],
        body,
        outputs: vec![Output { view: view("y"), source: cur }],
        nodes: vec![],
    }
}

fn run_chain(p: &Program, b: &Bound, x: &[f32], y: &mut [f32], simd: bool) {
    // SAFETY: x and y hold N floats, what the program was bound for.
    let order = elementwise::Order::of(p);
    unsafe { elementwise::run(p, &order, b, &[Src::F32(x.as_ptr())], &[Dst::F32(y.as_mut_ptr())], simd) }
}

fn copy(x: &[f32], y: &mut [f32]) {
    if rayon::current_num_threads() == 1 {
        y.copy_from_slice(x);
    } else {
        y.par_chunks_mut(elementwise::CHUNK)
            .zip(x.par_chunks(elementwise::CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s));
    }
}

/// Medians of `f`'s and `g`'s times and of their ratio `g/f`, the two run
/// in turn 15 times: on a shared machine a pair sees the same load, so the
/// ratio is steadier than either time.
fn paired_seconds(mut f: impl FnMut(), mut g: impl FnMut()) -> (f64, f64, f64) {
    fn time(h: &mut dyn FnMut()) -> f64 {
        let s = Instant::now();
        h();
        s.elapsed().as_secs_f64()
    }
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }
    f();
    g();
    let runs: Vec<(f64, f64)> = (0..15).map(|_| (time(&mut f), time(&mut g))).collect();
    (
        median(runs.iter().map(|r| r.0).collect()),
        median(runs.iter().map(|r| r.1).collect()),
        median(runs.iter().map(|r| r.1 / r.0).collect()),
    )
}

fn median_seconds(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..15)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}

fn elementwise_goal(c: &mut Criterion) {
    let p = chain();
    diamond_runtime::kernel::verify::verify(&p).unwrap();
    let b = bind(&p, &|_| None).unwrap();
    let simd = diamond_runtime::simd::Options::from_env().use_simd();
    let x: Vec<f32> = (0..N).map(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0).collect();
    let mut y = vec![0f32; N];
    let bytes = (2 * N * 4) as u64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = vec![1];
    if cores > 1 {
        threads.push(cores);
    }
    for t in threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
        let mut group = c.benchmark_group(format!("elementwise_16M_{t}t"));
        group.throughput(Throughput::Bytes(bytes));
        group.sample_size(10);
        group.bench_function("memcpy", |bench| bench.iter(|| pool.install(|| copy(&x, &mut y))));
        group.bench_function("chain8", |bench| bench.iter(|| pool.install(|| run_chain(&p, &b, &x, &mut y, simd))));
        group.finish();
        let mut z = vec![0f32; N];
        let (tc, tk, ratio) = paired_seconds(
            || pool.install(|| copy(&x, &mut y)),
            || pool.install(|| run_chain(&p, &b, &x, &mut z, simd)),
        );
        let gb = |s: f64| bytes as f64 / s / 1e9;
        // The same chain over 16K floats (in L2), as often: what the compute alone costs.
        let small = {
            let mut q = chain();
            let m = elementwise::CHUNK as u64;
            q.axes = vec![Extent::Known(m)];
            q.operands[0].dims = vec![Extent::Known(m)];
            q.outputs[0].view.dims = vec![Extent::Known(m)];
            q
        };
        let bs = bind(&small, &|_| None).unwrap();
        let tin = median_seconds(|| {
            for k in 0..N / elementwise::CHUNK {
                let at = (k % 4) * elementwise::CHUNK;
                let (xs, ys) = (&x[at..at + elementwise::CHUNK], &mut y[at..at + elementwise::CHUNK]);
                run_chain(&small, &bs, xs, ys, simd);
            }
        });
        println!("summary {t} thread(s): chain8 in cache {:.2} GB/s", gb(tin));
        println!(
            "summary {t} thread(s), avx2 {simd}: memcpy {:.2} GB/s, chain8 {:.2} GB/s = {:.0}% of copy bandwidth (median of the paired runs' ratios)",
            gb(tc),
            gb(tk),
            100.0 / ratio
        );
    }
}

criterion_group!(benches, elementwise_goal);
criterion_main!(benches);
