//! The worked facts of seed 000, as `.rows` systems with their expected
//! principal and closed shapes and diagnostics. Refresh the snapshots with
//! `UPDATE_EXPECT=1 cargo test -p diamond-infer` and read the diff.

use diamond_infer::rows::{lower::solve_rows, parse::parse_rows, render::render_text};
use expect_test::{expect, Expect};

#[track_caller]
fn check(input: &str, expected: Expect) {
    let file = parse_rows(input).expect("parses");
    let solution = solve_rows(&file);
    expected.assert_eq(&render_text(&solution, input));
}

#[test]
fn rank_grows_at_the_marker() {
    check("[3 <> 4] <= [3 <> 5, 4]\n", expect![[""]]);
}

#[test]
fn a_stated_unit_is_a_claim_but_the_claim_free_unit_broadcasts() {
    check(
        "[1] <= [3]\n[_] <= [3]\n",
        expect![[r#"

            error[broadcast-conflict]: 1 cannot broadcast to 3: only the claim-free unit `_` broadcasts
             --> line 1
              |
            1 | [1] <= [3]
              |
              = note: required by axis 0 of the row constraint ← line 1 `[1] <= [3]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn two_different_upper_bounds_collapse_to_the_claim_free_unit() {
    check(
        "tensor x : leaf ['a]\nx <= [3]\nx <= [5]\n",
        expect![[r#"
            x  principal [_]  closed [_]
        "#]],
    );
}

#[test]
fn the_empty_row_is_below_every_row() {
    check(
        "[<>] <= [2, 3]\n[] <= [4 <> 5]\ntensor y : [..r]\n[] <= y\n",
        expect![[r#"
        y  principal [..r]  closed []
    "#]],
    );
}

#[test]
fn a_leaf_under_a_row_closes_up_to_it() {
    check(
        "tensor x : leaf [..a]\nx <= [3, 4]\n",
        expect![[r#"
            x  principal [..a]  closed [3, 4]
        "#]],
    );
}

#[test]
fn a_leaf_closes_up_through_an_interior_tensor() {
    check(
        "tensor x : leaf [..a]\ntensor y : [..b]\nx <= y\ny <= [3, 4]\n",
        expect![[r#"
            x  principal [..a]  closed [3, 4]
            y  principal [..b]  closed [3, 4]
        "#]],
    );
}

#[test]
fn a_ones_vector_closes_up_to_the_known_axes_of_the_open_row_it_meets() {
    // The seed's idiom: `ones` (a leaf) broadcasts to `prod`, an interior
    // tensor that only `x` bounds from below; `prod` closes to [2, 7], and
    // `ones` closes upward to it rather than to the empty row.
    check(
        "tensor ones : leaf [..o]\ntensor prod : [..p]\ntensor x : [2, 7]\nones <= prod\nx <= prod\n",
        expect![[r#"
            ones  principal [..o]  closed [2, 7]
            prod  principal [<..p.r> 2, 7]  closed [2, 7]
            x     principal [2, 7]  closed [2, 7]
        "#]],
    );
}

#[test]
fn an_interior_tensor_closes_down() {
    check(
        "tensor y : [..c]\n[2, 3] <= y\n",
        expect![[r#"
            y  principal [<..c.r> 2, 3]  closed [2, 3]
        "#]],
    );
}

#[test]
fn the_bipartite_cut_gives_the_interior_to_the_row_variable() {
    check(
        "tensor m : leaf [3 <..r> 4]\nm <= [3 <> 5, 6, 4]\n[3 <..s> 4] <= [3, 5, 4]\n",
        expect![[r#"
            m  principal [3 <..r> 4]  closed [3 <> 5, 6, 4]

            error[rank-conflict]: rank conflict: the flanks of [3 <..s> 4] (1 leading, 1 trailing axes) do not fit in those of [3, 5, 4] (0, 3)
             --> line 3
              |
            3 | [3 <..s> 4] <= [3, 5, 4]
              |
              = note: required by line 3 `[3 <..s> 4] <= [3, 5, 4]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn an_open_super_row_grows_by_a_template() {
    check(
        "tensor y : [..c]\n[2 <> 3] <= y\n[2 <> 3] <= y\n",
        expect![[r#"
            y  principal [2 <..c.r> 3]  closed [2 <> 3]
        "#]],
    );
}

#[test]
fn a_closed_super_row_that_is_too_short_is_a_rank_conflict() {
    check(
        "[2, 3, 4] <= [3, 4]\n",
        expect![[r#"

            error[rank-conflict]: rank conflict: [2, 3, 4] has 3 axes but [3, 4] has only 2
             --> line 1
              |
            1 | [2, 3, 4] <= [3, 4]
              |
              = note: required by line 1 `[2, 3, 4] <= [3, 4]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_parameter_hole_is_an_error_naming_the_parameter_and_axis() {
    check(
        "tensor w : param ['h, 3]\ntensor x : leaf [..a]\nx <= w\n",
        expect![[r#"
            w  principal ['h, 3]  closed [_, 3]
            x  principal [..a]  closed [_, 3]

            error[undetermined-parameter]: nothing determines dimension 0 ('h) of parameter 'w' ['h, 3]
             --> line 1
              |
            1 | tensor w : param ['h, 3]
              |
              = note: required by closing: parameter 'w' closes upward to what its uses require ← line 1 `tensor w : param ['h, 3]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_parameter_pinned_by_its_use_closes_without_error() {
    check(
        "tensor w : param ['h, 3]\nw <= [5, 3]\n",
        expect![[r#"
            w  principal ['h, 3]  closed [5, 3]
        "#]],
    );
}

#[test]
fn rigid_symbols_are_never_bound_and_specialization_is_a_warning() {
    check(
        "tensor x : leaf [batch, 4]\nx <= [8, 4]\n'k = batch\ntensor y : ['k]\n",
        expect![[r#"
            x  principal [batch, 4]  closed [batch, 4]
            y  principal [batch]  closed [batch]

            warning[dynamic-axis-specialized]: dynamic axis batch assumed to be 8: `batch ⊑ 8` holds only when batch = 8 or batch = 1
             --> line 2
              |
            2 | x <= [8, 4]
              |
              = note: required by axis 0 of the row constraint ← line 2 `x <= [8, 4]`

            0 error(s), 1 warning(s)
        "#]],
    );
}

#[test]
fn symbolic_sizes_compare_by_normal_form() {
    check("[2*b*s] = [s*b*2]\n[(h-1)/2+1] = [floor((h-1)/2)+1]\n", expect![[""]]);
}

#[test]
fn total_elements_solve_the_one_unknown() {
    check(
        "tensor x : ['a, 4]\nnumel x = numel [2, 8]\ntensor y : [batch, 'b]\nnumel y = numel [batch, 3, 4]\n",
        expect![[r#"
            x  principal [4, 4]  closed [4, 4]
            y  principal [batch, 12]  closed [batch, 12]
        "#]],
    );
}

#[test]
fn one_root_cause_gives_one_error() {
    check(
        "tensor x : ['a]\nx = [3]\nx = [5]\nx <= [7]\ntensor y : ['a, 2]\ny <= [9, 2]\n",
        expect![[r#"
            x  principal [3]  closed [3]
            y  principal [3, 2]  closed [3, 2]

            error[dim-mismatch]: dimensions differ: 3 must equal 5
             --> line 3
              |
            3 | x = [5]
              |
              = note: 'a is 3 because of axis 0 of the row constraint ← line 2 `x = [3]`
              = note: required by axis 0 of the row constraint ← line 3 `x = [5]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn bases_keep_different_meanings_apart() {
    check(
        "[3@rgb] <= [3]\n[_] <= [3@rgb]\n",
        expect![[r#"

            error[broadcast-conflict]: axis meanings differ: `3@rgb ⊑ 3` has one size under two bases
             --> line 1
              |
            1 | [3@rgb] <= [3]
              |
              = note: required by axis 0 of the row constraint ← line 1 `[3@rgb] <= [3]`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn a_leaf_closes_up_through_a_long_chain_of_interiors() {
    // Bounds travel along waiting inequalities however long the chain is.
    let mut input = String::from("tensor x : leaf [..a]\nx <= y0\n");
    let mut declarations = String::new();
    for i in 0..200 {
        declarations.push_str(&format!("tensor y{i} : [..b{i}]\n"));
        if i > 0 {
            input.push_str(&format!("y{} <= y{i}\n", i - 1));
        }
    }
    input = format!("{declarations}{input}y199 <= [3, 'k]\n'k = 4\n");
    let solution = solve_rows(&parse_rows(&input).expect("parses"));
    assert!(solution.diagnostics.is_empty(), "{:?}", solution.diagnostics);
    for t in &solution.tensors {
        assert_eq!(solution.names.row(&t.closed), "[3, 4]", "{}", t.name);
    }
}

#[test]
fn windows_and_sums_compute_sizes() {
    check(
        "tensor y : [1, 64, 'h, 'w]\nwindow 'h = 224, kernel=7, stride=2, pads=6\nwindow 'w = h, kernel=3, stride=2, pads=2\n\
         tensor p : ['p]\nwindow 'p = 112, kernel=3, stride=2, ceil\ntensor c : ['k]\nsum 'k = 3, seq, 'h\n\
         window 'q = 2, kernel=5\n",
        expect![[r#"
            y  principal [1, 64, 112, floor((h-1)/2)+1]  closed [1, 64, 112, floor((h-1)/2)+1]
            p  principal [56]  closed [56]
            c  principal [seq+115]  closed [seq+115]

            error[dim-mismatch]: the window (kernel 5, dilation 1, pads 0) does not fit in an input of size 2
             --> line 8
              |
            8 | window 'q = 2, kernel=5
              |
              = note: required by line 8 `window 'q = 2, kernel=5`

            1 error(s), 0 warning(s)
        "#]],
    );
}

#[test]
fn in_rows_files_every_basis_is_its_own_atom() {
    // `.rows` keeps the seed's order: `3` and `3@rgb` are different atoms.
    // (ONNX checking reads the default basis as unnamed; see `cli_check`.)
    check(
        "[3] = [3@rgb]\n",
        expect![[r#"

            error[dim-mismatch]: axis meanings differ: `3 = 3@rgb` has one size under two bases
             --> line 1
              |
            1 | [3] = [3@rgb]
              |
              = note: required by axis 0 of the row constraint ← line 1 `[3] = [3@rgb]`

            1 error(s), 0 warning(s)
        "#]],
    );
}
