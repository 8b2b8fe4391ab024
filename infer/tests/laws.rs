//! Property tests: the order laws on ground rows, and the solver's laws —
//! its verdict on ground rows is the order's, its closed solution satisfies
//! every constraint, re-solving a solved system changes nothing, and the
//! order of constraints does not change the closed shapes.

use diamond_infer::{Constraint, Diagnostic, Origin, Severity, Solver, TensorKind};
use diamond_ir::term::{Basis, Dim, DimTerm, RowTerm, Size};
use proptest::prelude::*;

fn ground_dim() -> impl Strategy<Value = Dim> {
    prop_oneof![
        Just(Dim::unit()),
        (1u64..4).prop_map(Dim::known),
        Just(Dim { size: Size::Known(3), basis: Basis::Named("rgb".into()) }),
    ]
}

fn ground_row() -> impl Strategy<Value = RowTerm> {
    (prop::collection::vec(ground_dim(), 0..2), prop::collection::vec(ground_dim(), 0..4)).prop_map(|(l, r)| RowTerm {
        leading: l.into_iter().map(DimTerm::Dim).collect(),
        var: None,
        trailing: r.into_iter().map(DimTerm::Dim).collect(),
    })
}

/// A ground row in NumPy's form: every axis in the trailing flank, the
/// marker (the broadcast point) at the front. The ONNX lowering states every
/// closed row this way.
fn numpy_row() -> impl Strategy<Value = RowTerm> {
    prop::collection::vec(ground_dim(), 0..4).prop_map(|r| RowTerm {
        leading: Vec::new(),
        var: None,
        trailing: r.into_iter().map(DimTerm::Dim).collect(),
    })
}

fn le(a: &RowTerm, b: &RowTerm) -> bool {
    a.broadcasts_to(b).expect("ground rows")
}

fn errors(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|d| d.severity == Severity::Error).count()
}

/// A random system over `n` tensors: each an open or closed row with its own
/// variables or small sizes; constraints between tensors and literal rows.
#[derive(Clone, Debug)]
struct System {
    tensors: Vec<(bool, usize, Vec<Option<u64>>)>,
    constraints: Vec<(bool, usize, usize)>,
    pins: Vec<(usize, RowTerm)>,
}

fn system() -> impl Strategy<Value = System> {
    let tensor = (any::<bool>(), 0usize..2, prop::collection::vec(prop::option::of(1u64..4), 0..3));
    (2usize..6)
        .prop_flat_map(move |n| {
            (
                prop::collection::vec(tensor.clone(), n),
                prop::collection::vec((any::<bool>(), 0..n, 0..n), 0..8),
                prop::collection::vec((0..n, numpy_row()), 0..3),
            )
        })
        .prop_map(|(tensors, constraints, pins)| System { tensors, constraints, pins })
}

/// Builds the solver for `system`, with constraints in `order`; returns it
/// and every constraint as (is_equality, sub row, sup row) for checking.
/// A constraint to check on the closed shapes: (is equality, sub tensor or
/// `usize::MAX`, literal sub row, sup tensor).
type Check = (bool, usize, Option<RowTerm>, usize);

fn build(system: &System, order: &[usize]) -> (Solver, Vec<Check>) {
    let mut s = Solver::new();
    let cause = s.cause(Origin::Solver("proptest"), "random");
    let mut rows = Vec::new();
    for (i, (open, kind, dims)) in system.tensors.iter().enumerate() {
        let trailing = dims
            .iter()
            .map(|d| match d {
                Some(n) => DimTerm::Dim(Dim::known(*n)),
                None => DimTerm::Var(s.fresh_dim(None)),
            })
            .collect();
        let var = open.then(|| s.fresh_row(None));
        let row = RowTerm { leading: Vec::new(), var, trailing };
        let kind = [TensorKind::Leaf, TensorKind::Interior][*kind];
        s.add_tensor(&format!("t{i}"), kind, row.clone(), None);
        rows.push(row);
    }
    let mut all: Vec<Constraint> = Vec::new();
    let mut check = Vec::new();
    for &(eq, a, b) in &system.constraints {
        all.push(if eq {
            Constraint::RowEq(rows[a].clone(), rows[b].clone(), cause)
        } else {
            Constraint::RowLe(rows[a].clone(), rows[b].clone(), cause)
        });
        check.push((eq, a, None, b));
    }
    for (t, row) in &system.pins {
        all.push(Constraint::RowLe(row.clone(), rows[*t].clone(), cause));
        check.push((false, usize::MAX, Some(row.clone()), *t));
    }
    for &i in order {
        if let Some(c) = all.get(i) {
            s.add(c.clone());
        }
    }
    (s, check)
}

fn identity(n: usize) -> Vec<usize> {
    (0..n).collect()
}

proptest! {
    // Most random systems are inconsistent; the laws about closed solutions
    // skip those, so the reject budget is many times the case count.
    #![proptest_config(ProptestConfig { max_global_rejects: 100_000, ..ProptestConfig::with_cases(400) })]

    #[test]
    fn the_order_is_reflexive(r in ground_row()) {
        prop_assert!(le(&r, &r));
    }

    #[test]
    fn the_order_is_antisymmetric(a in ground_row(), b in ground_row()) {
        if le(&a, &b) && le(&b, &a) {
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn the_order_is_transitive(a in ground_row(), b in ground_row(), c in ground_row()) {
        if le(&a, &b) && le(&b, &c) {
            prop_assert!(le(&a, &c));
        }
    }

    #[test]
    fn distinct_atoms_meet_at_the_bottom(a in ground_dim(), b in ground_dim()) {
        let m = a.meet(&b);
        prop_assert!(m.broadcasts_to(&a) && m.broadcasts_to(&b));
        if a != b {
            prop_assert_eq!(m, Dim::unit());
        }
    }

    #[test]
    fn the_solver_agrees_with_the_order_on_ground_rows(a in ground_row(), b in ground_row()) {
        let mut s = Solver::new();
        let cause = s.cause(Origin::Solver("proptest"), "ground");
        s.add(Constraint::RowLe(a.clone(), b.clone(), cause));
        let solution = s.finish();
        prop_assert_eq!(errors(&solution.diagnostics) == 0, le(&a, &b), "{} ⊑ {}", a, b);
    }

    #[test]
    fn a_closed_solution_satisfies_every_constraint(system in system()) {
        let (solver, checks) = build(&system, &identity(64));
        let solution = solver.finish();
        prop_assume!(errors(&solution.diagnostics) == 0);
        for (eq, a, literal, b) in checks {
            let sub = literal.unwrap_or_else(|| solution.tensors[a].closed.clone());
            let sup = &solution.tensors[b].closed;
            prop_assert!(sub.is_ground() && sup.is_ground(), "closed shapes are ground: {} {}", sub, sup);
            if eq {
                // Equal closed rows are the same sequence of axes; the marker
                // of a closed row does not matter for equality.
                let flat = |r: &RowTerm| r.leading.iter().chain(&r.trailing).cloned().collect::<Vec<_>>();
                prop_assert_eq!(flat(&sub), flat(sup), "{} = {}", sub, sup);
            } else {
                prop_assert!(le(&sub, sup), "{} ⊑ {}", sub, sup);
            }
        }
    }

    #[test]
    fn solving_a_solved_system_changes_nothing(system in system()) {
        let (solver, checks) = build(&system, &identity(64));
        let solution = solver.finish();
        prop_assume!(errors(&solution.diagnostics) == 0);
        let mut again = Solver::new();
        let cause = again.cause(Origin::Solver("proptest"), "re-solve");
        for (i, t) in solution.tensors.iter().enumerate() {
            again.add_tensor(&format!("t{i}"), TensorKind::Interior, t.closed.clone(), None);
        }
        for (eq, a, literal, b) in checks {
            let sub = literal.unwrap_or_else(|| solution.tensors[a].closed.clone());
            let sup = solution.tensors[b].closed.clone();
            again.add(if eq { Constraint::RowEq(sub, sup, cause) } else { Constraint::RowLe(sub, sup, cause) });
        }
        let resolved = again.finish();
        prop_assert!(resolved.diagnostics.is_empty(), "{:?}", resolved.diagnostics);
        let closed = |s: &diamond_infer::Solution| s.tensors.iter().map(|t| t.closed.clone()).collect::<Vec<_>>();
        prop_assert_eq!(closed(&resolved), closed(&solution));
    }

    #[test]
    fn constraint_order_does_not_change_the_closed_shapes(system in system(), seed in any::<u64>()) {
        let n = system.constraints.len() + system.pins.len();
        let (first, _) = build(&system, &identity(n));
        let mut order = identity(n);
        // A seeded Fisher–Yates shuffle.
        let mut state = seed | 1;
        for i in (1..n).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let (second, _) = build(&system, &order);
        let (a, b) = (first.finish(), second.finish());
        // The verdict does not depend on the order either: a system that is
        // inconsistent in one order is inconsistent in every order.
        let (bad_a, bad_b) = (errors(&a.diagnostics) > 0, errors(&b.diagnostics) > 0);
        prop_assert_eq!(bad_a, bad_b, "order {:?}: {:?} against {:?}", order, a.diagnostics, b.diagnostics);
        if !bad_a {
            let closed = |s: &diamond_infer::Solution| s.tensors.iter().map(|t| t.closed.clone()).collect::<Vec<_>>();
            prop_assert_eq!(closed(&a), closed(&b));
        }
    }
}
