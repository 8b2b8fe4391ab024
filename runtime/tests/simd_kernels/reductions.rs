//! Reductions that run as one flat span ([`diamond_runtime::simd::reduce_flat`]):
//! `y = x·sigmoid(x)` kept for every point and its mean (or max, or min) over the
//! last two axes, over rows shorter and longer than a tile and rows that
//! cross tiles, on one thread and on two, against the same arithmetic in
//! `f64` — tighter than the model tests' tolerance, so that a value off by
//! a part in ten thousand fails.

use diamond_ir::ElemType;
use diamond_runtime::kernel::{BinaryOp, Combiner, Extent, Inst, Instr, Output, Program, UnaryOp, View, ViewDim};
use diamond_runtime::simd::bind::bind;
use diamond_runtime::simd::reduce;
use diamond_runtime::simd::tile::{Dst, Src};

fn view(name: &str, dims: &[usize], pooled: bool) -> View {
    View {
        value: name.into(),
        elem: ElemType::Float,
        dims: dims
            .iter()
            .enumerate()
            .map(|(a, &d)| Extent::Known(if pooled && a >= 2 { 1 } else { d } as u64))
            .collect(),
        view: (0..dims.len()).map(|a| if pooled && a >= 2 { ViewDim::fixed() } else { ViewDim::follow(a) }).collect(),
    }
}

/// Over `[n, c, h, w]`: `y = x·sigmoid(x)` (every point) and `m = combine(y)` over `h, w`.
fn program(dims: &[usize], combiner: Combiner) -> Program {
    let f = ElemType::Float;
    let i = |inst| Instr { inst, ty: f };
    Program {
        name: "silu_pool".into(),
        axes: dims.iter().map(|&d| Extent::Known(d as u64)).collect(),
        reduce: vec![2, 3],
        operands: vec![view("x", dims, false)],
        body: vec![
            i(Inst::Load(0)),
            i(Inst::Unary(UnaryOp::Sigmoid, 0)),
            i(Inst::Binary(BinaryOp::Mul, 0, 1)),
            i(Inst::Reduce(combiner, 2)),
        ],
        outputs: vec![
            Output { view: view("y", dims, false), source: 2 },
            Output { view: view("m", dims, true), source: 3 },
        ],
        nodes: vec![],
    }
}

fn check(dims: [usize; 4], combiner: Combiner, threads: usize) {
    let p = program(&dims, combiner);
    let b = bind(&p, &|_| None).unwrap();
    let ph = reduce::phases(&p);
    let (rows, count) = (dims[0] * dims[1], dims[2] * dims[3]);
    let x: Vec<f32> = (0..rows * count).map(|k| ((k * 7919) % 613) as f32 / 61.3 - 5.0).collect();
    let (mut y, mut m) = (vec![f32::NAN; rows * count], vec![f32::NAN; rows]);
    let dsts = [Dst::F32(y.as_mut_ptr()), Dst::F32(m.as_mut_ptr())];
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    // SAFETY: x, y and m hold what the program was bound for.
    pool.install(|| unsafe { reduce::run(&p, &ph, &b, &[Src::F32(x.as_ptr())], &dsts, true) });
    for r in 0..rows {
        let want: Vec<f64> =
            x[r * count..(r + 1) * count].iter().map(|&v| f64::from(v) / (1.0 + (-f64::from(v)).exp())).collect();
        for (k, &w) in want.iter().enumerate() {
            let got = f64::from(y[r * count + k]);
            assert!((got - w).abs() <= 1e-6 * (1.0 + w.abs()), "{dims:?}: y at row {r}, point {k}: {got} vs {w}");
        }
        let pooled = match combiner {
            Combiner::Max => want.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Combiner::Min => want.iter().copied().fold(f64::INFINITY, f64::min),
            _ => want.iter().sum::<f64>() / count as f64,
        };
        let got = f64::from(m[r]);
        assert!(
            (got - pooled).abs() <= 2e-6 * (1.0 + pooled.abs()),
            "{dims:?} {combiner:?}: row {r}: {got} vs {pooled}"
        );
    }
}

#[test]
fn pools_after_an_activation_run_as_one_span() {
    for dims in [[2, 8, 16, 16], [2, 48, 8, 8], [2, 144, 2, 2], [1, 1000, 13, 13], [3, 5, 17, 19], [1, 3, 1, 1]] {
        for combiner in [Combiner::Mean, Combiner::Max, Combiner::Min] {
            for threads in [1, 2] {
                check(dims, combiner, threads);
            }
        }
    }
}

/// A NaN anywhere in a row — among its whole vectors or its last values —
/// makes that row's max and mean NaN, and no other row's.
#[test]
fn a_nan_in_a_row_makes_only_its_pool_nan() {
    let dims = [1, 4, 9, 9];
    let (rows, count) = (4, 81);
    for combiner in [Combiner::Max, Combiner::Min, Combiner::Mean] {
        let p = program(&dims, combiner);
        let b = bind(&p, &|_| None).unwrap();
        let ph = reduce::phases(&p);
        let mut x: Vec<f32> = (0..rows * count).map(|k| (k % 17) as f32 - 8.0).collect();
        x[2 * count + 40] = f32::NAN;
        x[3 * count + 80] = f32::NAN;
        let (mut y, mut m) = (vec![0f32; rows * count], vec![0f32; rows]);
        let dsts = [Dst::F32(y.as_mut_ptr()), Dst::F32(m.as_mut_ptr())];
        // SAFETY: x, y and m hold what the program was bound for.
        unsafe { reduce::run(&p, &ph, &b, &[Src::F32(x.as_ptr())], &dsts, true) };
        let nan: Vec<bool> = m.iter().map(|v| v.is_nan()).collect();
        assert_eq!(nan, [false, false, true, true], "{combiner:?}: {m:?}");
    }
}

/// Identical rows pool to bitwise-identical values wherever they start
/// relative to the tiles: SqueezeNet's head over 1000 identical channels
/// of 13² (rows that tiles of 256 cut at every offset) and rows longer
/// than a tile, values of 1e9 to 4e9, so that a different summation order
/// can round to a different `f32` (folded in the segments the tiles cut,
/// 7 of these 20 rows did); one thread and two.
#[test]
fn identical_rows_pool_to_identical_values() {
    for dims in [[1, 1000, 13, 13], [1, 40, 23, 29]] {
        let p = program(&dims, Combiner::Mean);
        let b = bind(&p, &|_| None).unwrap();
        let ph = reduce::phases(&p);
        let (rows, count) = (dims[0] * dims[1], dims[2] * dims[3]);
        for seed in 0..20 {
            let mut rng = diamond_runtime::SplitMix64(seed);
            let row: Vec<f32> = (0..count).map(|_| (1e9 + rng.unit() * 3e9) as f32).collect();
            let x: Vec<f32> = (0..rows).flat_map(|_| row.iter().copied()).collect();
            for threads in [1, 2] {
                let (mut y, mut m) = (vec![f32::NAN; rows * count], vec![f32::NAN; rows]);
                let dsts = [Dst::F32(y.as_mut_ptr()), Dst::F32(m.as_mut_ptr())];
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                // SAFETY: x, y and m hold what the program was bound for.
                pool.install(|| unsafe { reduce::run(&p, &ph, &b, &[Src::F32(x.as_ptr())], &dsts, true) });
                for (r, v) in m.iter().enumerate() {
                    let first = m[0];
                    assert_eq!(
                        v.to_bits(),
                        first.to_bits(),
                        "{dims:?}, seed {seed}, {threads} thread(s): row {r} pooled {v}, row 0 {first}"
                    );
                }
            }
        }
    }
}
