//! The arithmetic constraints through the solver API: affine window sizes
//! (Conv/Pool), sums (Concat/Split/Pad) and total elements, forward and
//! backward, with symbols, and their conflicts.

use diamond_infer::{AffineSize, Code, Constraint, Origin, SizeSum, Solver, TensorKind};
use diamond_ir::term::{Dim, DimTerm, RowTerm, Size, SizeExpr};

fn d(n: u64) -> DimTerm {
    DimTerm::Dim(Dim::known(n))
}

fn sym(e: SizeExpr) -> DimTerm {
    DimTerm::Dim(Dim { size: Size::Symbolic(Box::new(e)), basis: diamond_ir::term::Basis::Default })
}

/// Solves with one tensor `[out]` and the constraint `make(out)`; returns its
/// closed shape and the diagnostic codes.
fn solve_one(make: impl FnOnce(&mut Solver, DimTerm, diamond_infer::CauseId) -> Constraint) -> (String, Vec<Code>) {
    let mut s = Solver::new();
    let cause = s.cause(Origin::Solver("test"), "test");
    let out = DimTerm::Var(s.fresh_dim(Some("out")));
    s.add_tensor("t", TensorKind::Interior, RowTerm::closed(vec![out.clone()]), None);
    let c = make(&mut s, out, cause);
    s.add(c);
    let solution = s.finish();
    let shape = solution.names.row(&solution.tensors[0].closed);
    (shape, solution.diagnostics.iter().map(|d| d.code).collect())
}

#[allow(clippy::too_many_arguments)]
fn affine(
    out: DimTerm,
    input: DimTerm,
    kernel: DimTerm,
    pads: i64,
    stride: u64,
    dilation: u64,
    ceil: bool,
    cause: diamond_infer::CauseId,
) -> Constraint {
    Constraint::Affine(Box::new(AffineSize { out, input, kernel, pads, stride, dilation, ceil, cause }))
}

#[test]
fn conv_output_sizes_follow_the_floor_and_ceil_forms() {
    // 224 input, 7x7 kernel, stride 2, pads 3+3: (224 + 6 - 6 - 1)/2 + 1 = 112.
    assert_eq!(solve_one(|_, out, c| affine(out, d(224), d(7), 6, 2, 1, false, c)), ("[112]".into(), vec![]));
    // Pool 3, stride 2 on 112 without padding: floor 55, ceil 56.
    assert_eq!(solve_one(|_, out, c| affine(out, d(112), d(3), 0, 2, 1, false, c)).0, "[55]");
    assert_eq!(solve_one(|_, out, c| affine(out, d(112), d(3), 0, 2, 1, true, c)).0, "[56]");
    // Dilation 2 widens a 3-kernel to 5: 10 - 5 + 1 = 6.
    assert_eq!(solve_one(|_, out, c| affine(out, d(10), d(3), 0, 1, 2, false, c)).0, "[6]");
}

#[test]
fn symbolic_inputs_give_symbolic_outputs() {
    let h = SizeExpr::symbol("h");
    let (shape, codes) = solve_one(|_, out, c| affine(out, sym(h.clone()), d(3), 2, 2, 1, false, c));
    assert_eq!(shape, "[floor((h-1)/2)+1]");
    assert!(codes.is_empty());
}

#[test]
fn stride_one_windows_solve_backward() {
    let mut s = Solver::new();
    let cause = s.cause(Origin::Solver("test"), "test");
    let input = DimTerm::Var(s.fresh_dim(Some("in")));
    s.add_tensor("x", TensorKind::Leaf, RowTerm::closed(vec![input.clone()]), None);
    s.add(affine(d(30), input, d(3), 2, 1, 1, false, cause));
    let solution = s.finish();
    assert_eq!(solution.names.row(&solution.tensors[0].closed), "[30]");
}

#[test]
fn a_window_larger_than_its_input_is_reported() {
    let (_, codes) = solve_one(|_, out, c| affine(out, d(2), d(5), 0, 1, 1, false, c));
    assert_eq!(codes, vec![Code::DimMismatch]);
}

#[test]
fn sums_add_up_forward_and_solve_one_missing_part() {
    let sum = |total, parts, cause| Constraint::Sum(Box::new(SizeSum { total, parts, cause }));
    assert_eq!(solve_one(|_, out, c| sum(out, vec![d(3), d(4)], c)).0, "[7]");
    let (shape, codes) = solve_one(|_, out, c| sum(d(10), vec![d(3), out], c));
    assert_eq!((shape.as_str(), codes.len()), ("[7]", 0));
    let (_, codes) = solve_one(|_, out, c| sum(d(3), vec![d(3), out], c));
    assert_eq!(codes, vec![Code::DimMismatch]);
    let seq = SizeExpr::symbol("seq");
    assert_eq!(solve_one(|_, out, c| sum(out, vec![sym(seq.clone()), d(1)], c)).0, "[seq+1]");
}

#[test]
fn element_counts_with_symbols_divide_exactly() {
    let b = SizeExpr::symbol("b");
    let (shape, codes) = solve_one(|_, out, c| {
        Constraint::Numel(
            RowTerm::closed(vec![sym(b.clone()), out]),
            RowTerm::closed(vec![sym(b.clone()), d(4), d(16)]),
            c,
        )
    });
    assert_eq!((shape.as_str(), codes.len()), ("[64]", 0));
    let (_, codes) =
        solve_one(|_, out, c| Constraint::Numel(RowTerm::closed(vec![d(5), out]), RowTerm::closed(vec![d(12)]), c));
    assert_eq!(codes, vec![Code::ElementCountMismatch]);
}
