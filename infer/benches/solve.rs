//! Solver throughput on synthetic systems of 10k, 100k and 1M constraints.
//!
//! - `chain`: tensors `t_i = ['a_i, 'b_i]` linked by alternating row
//!   inequalities and equalities, with the first pinned to `[3, 4]`: every
//!   constraint binds variables and wakes the next.
//! - `tree`: a binary broadcast tree of open rows `[..r_i, 'd_i]`, each child
//!   `⊑` its parent, with the leaves' trailing axes pinned: exercises the
//!   bipartite cut, upper bounds and closing.
//!
//! Run with `cargo bench -p diamond-infer`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use diamond_infer::{Constraint, Origin, Solver, TensorKind};
use diamond_ir::term::{Dim, DimTerm, RowTerm};

fn chain(n: usize) -> Solver {
    let mut s = Solver::new();
    let cause = s.cause(Origin::Solver("bench"), "chain");
    let mut rows = Vec::with_capacity(n + 1);
    for i in 0..=n {
        let row = RowTerm::closed(vec![DimTerm::Var(s.fresh_dim(None)), DimTerm::Var(s.fresh_dim(None))]);
        s.add_tensor(&format!("t{i}"), if i == 0 { TensorKind::Leaf } else { TensorKind::Interior }, row.clone(), None);
        rows.push(row);
    }
    s.add(Constraint::RowEq(rows[0].clone(), RowTerm::closed(vec![dim(3), dim(4)]), cause));
    for i in 0..n {
        let c = if i % 2 == 0 {
            Constraint::RowLe(rows[i].clone(), rows[i + 1].clone(), cause)
        } else {
            Constraint::RowEq(rows[i].clone(), rows[i + 1].clone(), cause)
        };
        s.add(c);
    }
    s
}

fn tree(n: usize) -> Solver {
    let mut s = Solver::new();
    let cause = s.cause(Origin::Solver("bench"), "tree");
    let mut rows = Vec::with_capacity(n + 1);
    for i in 0..=n {
        let row = RowTerm::open(s.fresh_row(None), vec![DimTerm::Var(s.fresh_dim(None))]);
        s.add_tensor(&format!("t{i}"), TensorKind::Interior, row.clone(), None);
        rows.push(row);
    }
    // Node i's parent is (i - 1) / 2; n edges in all.
    for i in 1..=n {
        s.add(Constraint::RowLe(rows[i].clone(), rows[(i - 1) / 2].clone(), cause));
    }
    for row in rows.iter().skip(n / 2 + 1) {
        s.add(Constraint::RowEq(row.clone(), RowTerm::closed(vec![dim(2), dim(8)]), cause));
    }
    s
}

fn dim(n: u64) -> DimTerm {
    DimTerm::Dim(Dim::known(n))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve");
    group.sample_size(10);
    for &n in &[10_000usize, 100_000, 1_000_000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("chain", n), &n, |b, &n| {
            b.iter_batched(|| chain(n), |s| s.finish(), criterion::BatchSize::LargeInput)
        });
        group.bench_with_input(BenchmarkId::new("tree", n), &n, |b, &n| {
            b.iter_batched(|| tree(n), |s| s.finish(), criterion::BatchSize::LargeInput)
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
