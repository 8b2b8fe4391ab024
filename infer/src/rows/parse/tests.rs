//! Tests of the `.rows` parser: statements, errors with their positions,
//! and properties over generated input.

use super::*;
use crate::rows::syntax::*;
use diamond_ir::term::{Basis, Size, SizeExpr};
use proptest::prelude::*;

/// One line per statement, `Variant: statement`, or `error: …`.
fn summary(input: &str) -> String {
    match parse_rows(input) {
        Ok(file) => file
            .statements
            .iter()
            .map(|s| {
                let variant = match &s.kind {
                    StatementKind::Tensor { .. } => "Tensor",
                    StatementKind::RowLe(..) => "RowLe",
                    StatementKind::RowEq(..) => "RowEq",
                    StatementKind::DimLe(..) => "DimLe",
                    StatementKind::DimEq(..) => "DimEq",
                    StatementKind::NumelEq(..) => "NumelEq",
                    StatementKind::Sum { .. } => "Sum",
                    StatementKind::Window(..) => "Window",
                };
                format!("{variant}: {}", s.kind)
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("error: {e}"),
    }
}

#[track_caller]
fn check(input: &str, expected: &str) {
    assert_eq!(summary(input), expected.trim(), "input:\n{input}");
}

/// The only statement of `input`, which must parse.
#[track_caller]
fn only(input: &str) -> StatementKind {
    let mut file = parse_rows(input).unwrap_or_else(|e| panic!("{input}: {e}"));
    assert_eq!(file.statements.len(), 1, "{input}");
    file.statements.remove(0).kind
}

/// The dimension `text` as parsed in a dimension statement `text = 1`.
#[track_caller]
fn dim(text: &str) -> DimSyntax {
    match only(&format!("{text} = 1")) {
        StatementKind::DimEq(d, _) => d,
        other => panic!("{text}: {other:?}"),
    }
}

/// The row `text` as declared for a tensor.
#[track_caller]
fn row(text: &str) -> RowSyntax {
    match only(&format!("tensor t : {text}")) {
        StatementKind::Tensor { row, .. } => row,
        other => panic!("{text}: {other:?}"),
    }
}

fn known(n: u64) -> DimSyntax {
    DimSyntax::Known { size: Size::Known(n), basis: Basis::Default }
}

fn named(n: u64, tag: &str) -> DimSyntax {
    DimSyntax::Known { size: Size::Known(n), basis: Basis::Named(tag.into()) }
}

fn symbolic(e: SizeExpr) -> DimSyntax {
    DimSyntax::Known { size: Size::Symbolic(Box::new(e)), basis: Basis::Default }
}

fn s(name: &str) -> SizeExpr {
    SizeExpr::symbol(name)
}

fn c(n: i64) -> SizeExpr {
    SizeExpr::constant(n)
}

fn var(name: &str) -> DimSyntax {
    DimSyntax::Var(name.into())
}

const SAMPLE: &str = "\
# a sample file: every statement form
tensor x : leaf [..a]            # a leaf (data or graph input): closes upward
tensor w : param ['h, 3]         # a parameter: a hole is an error
tensor y : [..c]                 # an interior tensor: closes downward
tensor z : [2 <..r> 3@rgb, _, batch*seq, (h-1)/2+1]

x <= y                           # row inequality between two tensors' shapes
y = [2, 'k]                      # row equality with a literal row
[3 <> 4] <= [3 <> 5, 4]          # literal rows
y >= [<> ceil(s/2), min(a, b)]
'h <= 7                          # dimension constraint
'h = batch                       # dimension equality
batch >= seq
numel x = numel y                # total elements
numel [2, 3] = numel z
";

#[test]
fn sample_file() {
    check(
        SAMPLE,
        "
Tensor: tensor x : leaf [..a]
Tensor: tensor w : param ['h, 3]
Tensor: tensor y : [..c]
Tensor: tensor z : [2 <..r> 3@rgb, _, batch*seq, floor((h-1)/2)+1]
RowLe: x <= y
RowEq: y = [2, 'k]
RowLe: [3 <> 4] <= [3 <> 5, 4]
RowLe: [ceil(s/2), min(a, b)] <= y
DimLe: 'h <= 7
DimEq: 'h = batch
DimLe: seq <= batch
NumelEq: numel x = numel y
NumelEq: numel [2, 3] = numel z
",
    );
}

#[test]
fn spans_and_texts() {
    let file = parse_rows("\n  # only a comment\n\t tensor x : [3]   # shape\n   x = [3]\n").unwrap();
    let got: Vec<_> = file.statements.iter().map(|s| (s.span, s.text.as_str())).collect();
    assert_eq!(got, vec![(Span { line: 3, column: 3 }, "tensor x : [3]"), (Span { line: 4, column: 4 }, "x = [3]"),]);
    assert_eq!(file.statements[0].span.to_string(), "3:3");
}

#[test]
fn blank_and_comment_only_files() {
    assert_eq!(parse_rows("").unwrap(), RowsFile { statements: vec![] });
    assert_eq!(parse_rows("\n \n# x <= y\n\t\r\n").unwrap(), RowsFile { statements: vec![] });
    check("tensor x : [3]\r\nx = [3]\r\n", "Tensor: tensor x : [3]\nRowEq: x = [3]");
}

#[test]
fn tensor_kinds() {
    assert_eq!(
        only("tensor x : leaf [..a]"),
        StatementKind::Tensor {
            name: "x".into(),
            kind: TensorKind::Leaf,
            row: RowSyntax { leading: vec![], var: Some("a".into()), trailing: vec![] },
        }
    );
    assert_eq!(
        only("tensor w : param ['h, 3]"),
        StatementKind::Tensor {
            name: "w".into(),
            kind: TensorKind::Param,
            row: RowSyntax { leading: vec![], var: None, trailing: vec![var("h"), known(3)] },
        }
    );
    assert_eq!(
        only("tensor y.0_a : []"),
        StatementKind::Tensor { name: "y.0_a".into(), kind: TensorKind::Interior, row: RowSyntax::empty() }
    );
    // Keywords are ordinary names where a name is expected.
    check("tensor leaf : leaf [1]\ntensor numel : [2]", "Tensor: tensor leaf : leaf [1]\nTensor: tensor numel : [2]");
}

#[test]
fn row_forms() {
    let r = |leading: Vec<DimSyntax>, v: Option<&str>, trailing: Vec<DimSyntax>| RowSyntax {
        leading,
        var: v.map(String::from),
        trailing,
    };
    assert_eq!(row("[]"), r(vec![], None, vec![]));
    assert_eq!(row("[..r]"), r(vec![], Some("r"), vec![]));
    assert_eq!(row("[3, 4]"), r(vec![], None, vec![known(3), known(4)]));
    assert_eq!(row("[<> 3, 4]"), r(vec![], None, vec![known(3), known(4)]));
    assert_eq!(row("[3 <>]"), r(vec![known(3)], None, vec![]));
    assert_eq!(row("[<>]"), r(vec![], None, vec![]));
    assert_eq!(row("[<..r> 3]"), r(vec![], Some("r"), vec![known(3)]));
    assert_eq!(row("[3 <..r>]"), r(vec![known(3)], Some("r"), vec![]));
    assert_eq!(row("[<..r>]"), r(vec![], Some("r"), vec![]));
    assert_eq!(row("[1, 2 <> 3]"), r(vec![known(1), known(2)], None, vec![known(3)]));
    assert_eq!(row("[1, 2 <..rho> 3, 4]"), r(vec![known(1), known(2)], Some("rho"), vec![known(3), known(4)]));
    assert_eq!(row("[ 1 ,2<>3 ]"), r(vec![known(1), known(2)], None, vec![known(3)]));
    assert_eq!(row("['a, _, 3@rgb]"), r(vec![], None, vec![var("a"), DimSyntax::Unit, named(3, "rgb")]));
}

#[test]
fn rows_print_as_parsed() {
    for text in ["[]", "[..r]", "[3, 4]", "[3 <>]", "[<..r> 3]", "[3 <..r>]", "[1, 2 <> 3, 4]", "[_, 'a <..r> b@c]"] {
        assert_eq!(row(text).to_string(), text);
    }
    assert_eq!(row("[<> 3]").to_string(), "[3]");
    assert_eq!(row("[<>]").to_string(), "[]");
    assert_eq!(row("[<..r>]").to_string(), "[..r]");
}

#[test]
fn dimensions() {
    assert_eq!(dim("3"), known(3));
    assert_eq!(dim("3@rgb"), named(3, "rgb"));
    assert_eq!(dim("3 @ DATA_CHANNEL"), named(3, "DATA_CHANNEL"));
    assert_eq!(dim("3@default"), named(3, "default"));
    assert_eq!(dim("_"), DimSyntax::Unit);
    assert_eq!(dim("'a"), var("a"));
    assert_eq!(dim("'a.b_1"), var("a.b_1"));
    assert_eq!(
        dim("batch@seq"),
        DimSyntax::Known { size: Size::Symbolic(Box::new(s("batch"))), basis: Basis::Named("seq".into()) }
    );
    assert_eq!(dim("_x"), symbolic(s("_x")));
    assert_eq!(dim("9223372036854775807@big"), named(i64::MAX.unsigned_abs(), "big"));
    check("x = 18446744073709551615", "error: line 1, column 5: size overflows");
}

#[test]
fn constant_expressions_fold() {
    assert_eq!(dim("2*3"), known(6));
    assert_eq!(dim("(7-1)/2"), known(3));
    assert_eq!(dim("7/2"), known(3));
    assert_eq!(dim("ceil(7/2)"), known(4));
    assert_eq!(dim("floor(7/2)"), known(3));
    assert_eq!(dim("min(3, 5)"), known(3));
    assert_eq!(dim("max(3, 5)@rgb"), named(5, "rgb"));
    assert_eq!(dim("-(-4)"), known(4));
    assert_eq!(dim("1+2*3-4"), known(3));
    assert_eq!(dim("(1+2)*3"), known(9));
    assert_eq!(dim("b-b+1"), known(1));
    assert_eq!(dim("12/2/3"), known(2));
    assert_eq!(dim("9223372036854775807"), known(i64::MAX.unsigned_abs()));
}

#[test]
fn symbolic_expressions() {
    let mul = |a: &SizeExpr, b: &SizeExpr| a.mul(b).unwrap();
    let add = |a: &SizeExpr, b: &SizeExpr| a.add(b).unwrap();
    assert_eq!(dim("batch"), symbolic(s("batch")));
    assert_eq!(dim("batch*seq"), symbolic(mul(&s("batch"), &s("seq"))));
    assert_eq!(dim("seq*batch"), dim("batch*seq"));
    assert_eq!(dim("2*b+b"), symbolic(mul(&c(3), &s("b"))));
    assert_eq!(dim("-b+2*b"), symbolic(s("b")));
    assert_eq!(dim("b-1+2"), symbolic(add(&s("b"), &c(1))));
    let h_minus_1 = add(&s("h"), &c(-1));
    assert_eq!(dim("(h-1)/2+1"), symbolic(add(&h_minus_1.floor_div(2).unwrap(), &c(1))));
    assert_eq!(dim("floor((h-1)/2)+1"), dim("(h-1)/2+1"));
    assert_eq!(dim("floor(x/2)"), dim("x/2"));
    assert_eq!(dim("ceil(x/2)"), symbolic(s("x").ceil_div(2).unwrap()));
    assert_eq!(dim("ceil(2*x/4)"), symbolic(mul(&c(2), &s("x")).ceil_div(4).unwrap()));
    assert_eq!(dim("x/(1+1)"), dim("x/2"));
    assert_eq!(dim("x/1"), dim("x"));
    assert_eq!(dim("min(a, b)"), symbolic(SizeExpr::min(&s("a"), &s("b"))));
    assert_eq!(dim("max(b,a)"), symbolic(SizeExpr::max(&s("a"), &s("b"))));
    assert_eq!(dim("min(a, a)"), dim("a"));
    assert_eq!(dim("(a+1)*(a-1)"), symbolic(add(&mul(&s("a"), &s("a")), &c(-1))));
    // `ceil`, `floor`, `min` and `max` are symbols unless called.
    assert_eq!(dim("ceil+min"), symbolic(add(&s("ceil"), &s("min"))));
    assert_eq!(dim("(h-1)/2+1").to_string(), "floor((h-1)/2)+1");
}

#[test]
fn row_statements() {
    let decls = "tensor x : [3]\ntensor y : [..r]\n";
    check(&format!("{decls}x <= y"), "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nRowLe: x <= y");
    assert_eq!(
        parse_rows(&format!("{decls}x >= y")).unwrap().statements[2].kind,
        StatementKind::RowLe(Operand::Tensor("y".into()), Operand::Tensor("x".into()))
    );
    assert_eq!(
        parse_rows(&format!("{decls}y = [2, 'k]")).unwrap().statements[2].kind,
        StatementKind::RowEq(
            Operand::Tensor("y".into()),
            Operand::Row(RowSyntax { leading: vec![], var: None, trailing: vec![known(2), var("k")] })
        )
    );
    assert_eq!(
        only("[3 <> 4] <= [3 <> 5, 4]"),
        StatementKind::RowLe(
            Operand::Row(RowSyntax { leading: vec![known(3)], var: None, trailing: vec![known(4)] }),
            Operand::Row(RowSyntax { leading: vec![known(3)], var: None, trailing: vec![known(5), known(4)] }),
        )
    );
    check("[] = []", "RowEq: [] = []");
    check("[..a] >= [..b]", "RowLe: [..b] <= [..a]");
    check(
        &format!("{decls}[3] <= x\nx = [..q]"),
        "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nRowLe: [3] <= x\nRowEq: x = [..q]",
    );
    check(
        "tensor a:[1]\ntensor b:[1]\na<=b\na=b\na>=b",
        "Tensor: tensor a : [1]\nTensor: tensor b : [1]\nRowLe: a <= b\nRowEq: a = b\nRowLe: b <= a",
    );
}

#[test]
fn dim_statements() {
    assert_eq!(only("'h <= 7"), StatementKind::DimLe(var("h"), known(7)));
    assert_eq!(only("'h = batch"), StatementKind::DimEq(var("h"), symbolic(s("batch"))));
    assert_eq!(only("'h >= 'w"), StatementKind::DimLe(var("w"), var("h")));
    assert_eq!(only("batch = seq"), StatementKind::DimEq(symbolic(s("batch")), symbolic(s("seq"))));
    assert_eq!(only("_ <= 3@rgb"), StatementKind::DimLe(DimSyntax::Unit, named(3, "rgb")));
    check("batch*seq >= 4\n3 = n\nn = 3\n(n) = m", "DimLe: 4 <= batch*seq\nDimEq: 3 = n\nDimEq: n = 3\nDimEq: n = m");
    // A name is a tensor only once declared: before, it is a symbol.
    check(
        "x = y\ntensor x : [1]\ntensor y : [1]\nx = y",
        "DimEq: x = y\nTensor: tensor x : [1]\nTensor: tensor y : [1]\nRowEq: x = y",
    );
    // `tensor` and `numel` followed by an operator are symbols.
    check("tensor = 3\nnumel <= numel", "DimEq: tensor = 3\nDimLe: numel <= numel");
}

#[test]
fn numel_statements() {
    let decls = "tensor x : [3]\ntensor y : [..r]\n";
    assert_eq!(
        parse_rows(&format!("{decls}numel x = numel y")).unwrap().statements[2].kind,
        StatementKind::NumelEq(Operand::Tensor("x".into()), Operand::Tensor("y".into()))
    );
    check("numel [2, 3] = numel [6]", "NumelEq: numel [2, 3] = numel [6]");
    check(
        &format!("{decls}numel [..a]=numel x"),
        "Tensor: tensor x : [3]\nTensor: tensor y : [..r]\nNumelEq: numel [..a] = numel x",
    );
}

#[test]
fn sum_and_window_statements() {
    check("sum 'c = 'a, 3, seq", "Sum: sum 'c = 'a, 3, seq");
    check(
        "window 'o = 224, kernel=7, stride=2, pads=6",
        "Window: window 'o = 224, kernel=7, stride=2, pads=6, dilation=1",
    );
    check(
        "window 'o = h, kernel='k, dilation=2, ceil",
        "Window: window 'o = h, kernel='k, stride=1, pads=0, dilation=2, ceil",
    );
    check("window 'o = 8", "error: line 1, column 14: a window needs kernel=K");
    check("window 'o = 8, kernel=3, stride=0", "error: line 1, column 33: stride must be at least 1");
    check(
        "window 'o = 8, size=3",
        "error: line 1, column 16: unknown window parameter 'size'; expected kernel, stride, pads, dilation or ceil",
    );
    check("sum 'c 'a", "error: line 1, column 8: expected '=' after the total of a sum, found dimension variable 'a");
    check("sum = 3", "DimEq: sum = 3");
}

#[test]
fn lexical_errors() {
    check("x = $", "error: line 1, column 5: unexpected character '$'");
    check("x = é", "error: line 1, column 5: unexpected character 'é'");
    check("é = 1 # ignored", "error: line 1, column 1: unexpected character 'é'");
    check("[.. a] = []", "error: line 1, column 4: expected a row variable name after '..', found ' '");
    check("[..] = []", "error: line 1, column 4: expected a row variable name after '..', found ']'");
    check("[.] = []", "error: line 1, column 2: unexpected character '.'");
    check("[<..> 3] = []", "error: line 1, column 5: expected a row variable name after '<..', found '>'");
    check("[<..r 3] = []", "error: line 1, column 6: expected '>' to close the marker '<..r', found ' '");
    check("[<..r", "error: line 1, column 6: expected '>' to close the marker '<..r', found end of line");
    check("[<.r>] = []", "error: line 1, column 3: expected '<..r>', '<>' or '<=' after '<', found '.'");
    check("' = 3", "error: line 1, column 2: expected a dimension variable name after ''', found ' '");
    check("'3 = 3", "error: line 1, column 2: expected a dimension variable name after ''', found '3'");
    check("x = 18446744073709551616", "error: line 1, column 5: size overflows");
}

#[test]
fn row_errors() {
    check("[3 > 4] = []", "error: line 1, column 4: expected ']' or ',' after dimension, found '>'");
    check("[3, 4", "error: line 1, column 6: expected ']' or ',' after dimension, found end of line");
    check("[", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found end of line");
    check("[, 3] = []", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found ','");
    check("[3,] = []", "error: line 1, column 4: expected a dimension after ',', found ']'");
    check("[3 4] = []", "error: line 1, column 4: expected ']' or ',' after dimension, found '4'");
    check(
        "[3, <> 4] = []",
        "error: line 1, column 5: expected a dimension after ',', found '<>' \
         (the marker stands between dimensions, without commas: '[2 <> 3]')",
    );
    check("[3 <> 4 <> 5] = []", "error: line 1, column 9: a row has at most one marker");
    check("[3 <> 4 <..r>] = []", "error: line 1, column 9: a row has at most one marker");
    check("[<> <>] = []", "error: line 1, column 5: expected a dimension or ']' after the marker, found '<>'");
    check("[<> ,3] = []", "error: line 1, column 5: expected a dimension or ']' after the marker, found ','");
    check(
        "[..r, 3] = []",
        "error: line 1, column 5: expected ']' after '..r' (an open row with dimensions is written '[<..r> 3]'), found ','",
    );
    check("[3, ..r] = []", "error: line 1, column 5: expected a dimension after ',', found '..r'");
    check("[[3]] = []", "error: line 1, column 2: expected a dimension, a marker or ']' after '[', found '['");
}

#[test]
fn dimension_errors() {
    check("x = 0", "error: line 1, column 5: a dimension's size must be at least 1, found 0");
    check("[3, (2-3)] = []", "error: line 1, column 5: a dimension's size must be at least 1, found '(2-3)' = -1");
    check("[b-b] = []", "error: line 1, column 2: a dimension's size must be at least 1, found 'b-b' = 0");
    check("['a@rgb] = []", "error: line 1, column 4: a dimension variable cannot have a basis");
    check("[_@rgb] = []", "error: line 1, column 3: the unit '_' cannot have a basis");
    check("['a*2] = []", "error: line 1, column 2: a dimension variable cannot appear inside a size expression");
    check("'a + 1 = 3", "error: line 1, column 1: a dimension variable cannot appear inside a size expression");
    check("[2*'a] = []", "error: line 1, column 4: a dimension variable cannot appear inside a size expression");
    check("x = min('a, 3)", "error: line 1, column 9: a dimension variable cannot appear inside a size expression");
    check("[_+1] = []", "error: line 1, column 2: the unit '_' cannot appear inside a size expression");
    check("[1+_] = []", "error: line 1, column 4: the unit '_' cannot appear inside a size expression");
    check("[3@] = []", "error: line 1, column 4: expected a basis name after '@', found ']'");
    check("[3@4] = []", "error: line 1, column 4: expected a basis name after '@', found '4'");
    check("[3@rgb@x] = []", "error: line 1, column 7: expected ']' or ',' after dimension, found '@'");
}

#[test]
fn expression_errors() {
    check("x = 1 +", "error: line 1, column 8: expected a number, a symbol or '(' after '+', found end of line");
    check("x = (h", "error: line 1, column 7: expected ')' to close '(', found end of line");
    check("x = h/0", "error: line 1, column 7: division by zero");
    check("x = h/n", "error: line 1, column 7: the divisor of '/' must be a positive integer constant, found 'n'");
    check("x = h/-2", "error: line 1, column 7: the divisor of '/' must be a positive integer constant, found '-2'");
    check("x = h/(1-1)", "error: line 1, column 7: division by zero");
    check("x = ceil(h)", "error: line 1, column 10: 'ceil' takes a division: write 'ceil(EXPR / INT)', found 'h'");
    check(
        "x = floor(h/2*3)",
        "error: line 1, column 11: 'floor' takes a division: write 'floor(EXPR / INT)', found 'h/2*3'",
    );
    check(
        "x = ceil(1 + h/2)",
        "error: line 1, column 10: 'ceil' takes a division: write 'ceil(EXPR / INT)', found '1 + h/2'",
    );
    check(
        "x = ceil(h/n)",
        "error: line 1, column 12: the divisor of '/' must be a positive integer constant, found 'n'",
    );
    check("x = min(a)", "error: line 1, column 5: 'min' takes 2 arguments, found 1");
    check("x = max(a, b, c)", "error: line 1, column 5: 'max' takes 2 arguments, found 3");
    check("x = ceil(a/2, b)", "error: line 1, column 5: 'ceil' takes 1 argument, found 2");
    check("x = min(a b)", "error: line 1, column 11: expected ',' or ')' in the arguments of 'min', found 'b'");
    check("x = sqrt(a)", "error: line 1, column 5: unknown function 'sqrt'; expected ceil, floor, min or max");
    check("x = +3", "error: line 1, column 5: expected a row, a tensor name or a dimension after '=', found '+'");
    check("x = 9223372036854775808", "error: line 1, column 5: size overflows");
    check("x = 9223372036854775807 + 1", "error: line 1, column 27: size overflows");
    check("x = 4294967296 * 4294967296", "error: line 1, column 18: size overflows");
    check("x = 3 * (2 * h) @ rgb @", "error: line 1, column 23: expected end of statement, found '@'");
}

#[test]
fn statement_errors() {
    let decls = "tensor x : [3]\ntensor y : [..r]\n";
    let at3 = |input: &str, expected: &str| check(&format!("{decls}{input}"), &format!("error: line 3, {expected}"));
    at3("x <= q", "column 6: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("q = x", "column 1: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("[3] <= q", "column 8: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("q <= [3]", "column 1: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("numel x = numel q", "column 17: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("numel q = numel x", "column 7: unknown tensor 'q'; declare it with `tensor q : ...`");
    at3("x <= 7", "column 6: expected a row or a tensor after '<=' (the left side is tensor 'x'), found dimension '7'");
    at3("'a = x", "column 6: expected a dimension after '=' (the left side is a dimension), found tensor 'x'");
    at3(
        "[3] >= 2*h",
        "column 8: expected a row or a tensor after '>=' (the left side is a row), found dimension '2*h'",
    );
    at3("3@rgb = [3]", "column 9: expected a dimension after '=' (the left side is a dimension), found row '[3]'");
    at3("tensor x : [4]", "column 8: tensor 'x' is already declared on line 1");
    at3("numel x <= numel y", "column 9: a numel statement compares with '=' only, found '<='");
    at3("numel x numel y", "column 9: expected '=' after the first numel operand, found 'numel'");
    at3("numel x = y", "column 11: expected 'numel' after '=', found 'y'");
    at3("numel 3 = numel x", "column 7: expected a tensor name or a row after 'numel', found '3'");
    at3("x < y", "column 3: expected '<=', '>=' or '=' after 'x', found '<'");
    at3("x == y", "column 4: expected a row, a tensor name or a dimension after '=', found '='");
    at3("x", "column 2: expected '<=', '>=' or '=' after 'x', found end of line");
    at3("[3] 4 = x", "column 5: expected '<=', '>=' or '=' after '[3]', found '4'");
    at3("x = y z", "column 7: expected end of statement, found 'z'");
    at3("] = x", "column 1: expected a statement, found ']'");
    at3("x = ", "column 4: expected a row, a tensor name or a dimension after '=', found end of line");
    // The line of an error counts blank lines and comments.
    check(
        "# header\n\ntensor x : [1]\n\n  x = q  # q is unknown",
        "error: line 5, column 7: unknown tensor 'q'; declare it with `tensor q : ...`",
    );
}

#[test]
fn tensor_declaration_errors() {
    check("tensor", "error: line 1, column 7: expected a tensor name after 'tensor', found end of line");
    check("tensor : [3]", "error: line 1, column 8: expected a tensor name after 'tensor', found ':'");
    check("tensor _ : [3]", "error: line 1, column 8: expected a tensor name after 'tensor', found '_'");
    check("tensor x [3]", "error: line 1, column 10: expected ':' after the tensor name 'x', found '['");
    check(
        "tensor x :",
        "error: line 1, column 11: expected 'leaf', 'param' or a row '[...]' after ':', found end of line",
    );
    check(
        "tensor x : input [3]",
        "error: line 1, column 12: expected 'leaf', 'param' or a row '[...]' after ':', found 'input'",
    );
    check("tensor x : leaf", "error: line 1, column 16: expected a row '[...]' after 'leaf', found end of line");
    check("tensor x : param y", "error: line 1, column 18: expected a row '[...]' after 'param', found 'y'");
    check("tensor x : [3] [4]", "error: line 1, column 16: expected end of statement, found '['");
    check("tensor x : [3]\n\ntensor x : leaf [3]", "error: line 3, column 8: tensor 'x' is already declared on line 1");
}

/// Every prefix of the sample, and of each of its lines, parses or fails
/// without panicking; an error is always inside the input.
#[test]
fn every_prefix_parses_or_fails_cleanly() {
    let mut inputs: Vec<String> = Vec::new();
    for (i, _) in SAMPLE.char_indices() {
        inputs.push(SAMPLE[..i].to_string());
    }
    for line in SAMPLE.lines() {
        let declared = "tensor x : [1]\ntensor y : [1]\ntensor z : [1]\n";
        for (i, _) in line.char_indices() {
            inputs.push(format!("{declared}{}", &line[..i]));
            inputs.push(format!("{declared}{}", &line[i..]));
        }
    }
    for input in &inputs {
        if let Err(e) = parse_rows(input) {
            let lines = input.lines().count().max(1);
            assert!(e.line >= 1 && (e.line as usize) <= lines, "{input:?}: {e}");
            assert!(e.column >= 1, "{input:?}: {e}");
            assert!(!e.message.is_empty());
        }
    }
}

#[test]
fn deep_and_long_inputs_are_bounded() {
    let deep = format!("x = {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    check(&deep, "error: line 1, column 69: size expression nested too deeply");
    let negations = format!("x = {}1", "-".repeat(100_000));
    assert!(parse_rows(&negations).unwrap_err().message.contains("nested too deeply"));
    let calls = format!("x = {}a, 1{}", "min(".repeat(10_000), ")".repeat(10_000));
    assert!(parse_rows(&calls).unwrap_err().message.contains("nested too deeply"));
    // Nested to the limit is fine.
    let fine = format!("x = {}1{}", "(".repeat(60), ")".repeat(60));
    check(&fine, "DimEq: x = 1");
    // Long flat sums and products do not nest.
    let sum = format!("x = {}", vec!["1"; 100_000].join("+"));
    check(&sum, "DimEq: x = 100000");
    let product = format!("x = {}", vec!["1"; 100_000].join("*"));
    check(&product, "DimEq: x = 1");
    let overflow = format!("x = {}", vec!["2"; 64].join("*"));
    check(&overflow, "error: line 1, column 129: size overflows");
    // Expansion is bounded: (a0+b0)*(a1+b1)*… would have 2^n terms.
    let factors: Vec<String> = (0..40).map(|i| format!("(a{i}+b{i})")).collect();
    let blowup = format!("x = {}", factors.join("*"));
    check(&blowup, "error: line 1, column 5: size expression too large");
    let terms: Vec<String> = (0..5000).map(|i| format!("a{i}")).collect();
    check(&format!("x = {}", terms.join("+")), "error: line 1, column 5: size expression too large");
    let wide_row = format!("tensor t : [{}]", vec!["3"; 10_000].join(", "));
    assert_eq!(row(&wide_row["tensor t : ".len()..]).trailing.len(), 10_000);
}

proptest! {
    /// Random text over the format's alphabet never makes the parser panic.
    #[test]
    fn random_text_never_panics(text in "[\\[\\]<>=.,'@_a-c0-9 ()+*/#:\n-]{0,60}") {
        let _ = parse_rows(&text);
    }

    /// Neither does arbitrary text.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
        let _ = parse_rows(&text);
    }

    /// Random statements built from tokens never make the parser panic.
    #[test]
    fn random_token_soup_never_panics(tokens in proptest::collection::vec(
        prop::sample::select(vec![
            "tensor", "numel", "leaf", "param", "x", "y", "b", "ceil", "min", "[", "]", "<>", "<..r>", "..r",
            "'a", "_", "3", "0", "@", "rgb", ",", "(", ")", "+", "-", "*", "/", "<=", ">=", "=", ":", "\n",
        ]),
        0..24,
    )) {
        let text = format!("tensor x : [1]\ntensor y : [..r]\n{}", tokens.join(" "));
        let _ = parse_rows(&text);
    }

    /// Printed statements parse back to themselves.
    #[test]
    fn printed_statements_parse_back(mut kinds in proptest::collection::vec(statement_kind(), 1..8)) {
        for (i, kind) in kinds.iter_mut().enumerate() {
            if let StatementKind::Tensor { name, .. } = kind {
                *name = format!("{name}_{i}");
            }
        }
        let mut text = String::from("tensor t0 : [1]\ntensor t1 : leaf [..r]\n");
        for kind in &kinds {
            text.push_str(&kind.to_string());
            text.push('\n');
        }
        let file = parse_rows(&text).map_err(|e| TestCaseError::fail(format!("{text}\n{e}")))?;
        let parsed: Vec<_> = file.statements.into_iter().skip(2).map(|s| s.kind).collect();
        prop_assert_eq!(parsed, kinds, "{}", text);
    }
}

fn size_expr() -> impl Strategy<Value = SizeExpr> {
    let leaf = prop_oneof![
        prop::sample::select(vec!["batch", "seq", "h", "w.1"]).prop_map(SizeExpr::symbol),
        (-3i64..6).prop_map(SizeExpr::constant),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_filter_map("overflow", |(a, b)| a.add(&b)),
            (inner.clone(), inner.clone()).prop_filter_map("overflow", |(a, b)| a.mul(&b)),
            (inner.clone(), 1u64..4).prop_filter_map("overflow", |(a, d)| a.floor_div(d)),
            (inner.clone(), 1u64..4).prop_filter_map("overflow", |(a, d)| a.ceil_div(d)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| SizeExpr::min(&a, &b)),
            (inner.clone(), inner).prop_map(|(a, b)| SizeExpr::max(&a, &b)),
        ]
    })
}

fn dim_syntax() -> impl Strategy<Value = DimSyntax> {
    let basis = prop_oneof![
        Just(Basis::Default),
        prop::sample::select(vec!["rgb", "DATA_BATCH", "h"]).prop_map(|t| Basis::Named(t.into()))
    ];
    let size = prop_oneof![
        (1u64..8).prop_map(Size::Known),
        size_expr().prop_map(|e| match e.as_constant() {
            Some(n) if n >= 1 => Size::Known(n.unsigned_abs()),
            Some(_) => Size::Known(1),
            None => Size::Symbolic(Box::new(e)),
        }),
    ];
    prop_oneof![
        (size, basis).prop_map(|(size, basis)| DimSyntax::Known { size, basis }),
        Just(DimSyntax::Unit),
        prop::sample::select(vec!["a", "k", "x.y"]).prop_map(|n| DimSyntax::Var(n.into())),
    ]
}

fn row_syntax() -> impl Strategy<Value = RowSyntax> {
    let dims = || proptest::collection::vec(dim_syntax(), 0..3);
    let var = proptest::option::of(prop::sample::select(vec!["r", "s"]).prop_map(String::from));
    (dims(), var, dims()).prop_map(|(leading, var, trailing)| RowSyntax { leading, var, trailing })
}

fn operand() -> impl Strategy<Value = Operand> {
    prop_oneof![
        prop::sample::select(vec!["t0", "t1"]).prop_map(|n| Operand::Tensor(n.into())),
        row_syntax().prop_map(Operand::Row),
    ]
}

fn statement_kind() -> impl Strategy<Value = StatementKind> {
    let kind = prop_oneof![Just(TensorKind::Leaf), Just(TensorKind::Param), Just(TensorKind::Interior)];
    prop_oneof![
        (prop::sample::select(vec!["u0", "u1", "u2"]), kind, row_syntax())
            .prop_map(|(name, kind, row)| { StatementKind::Tensor { name: name.into(), kind, row } }),
        (operand(), operand()).prop_map(|(a, b)| StatementKind::RowLe(a, b)),
        (operand(), operand()).prop_map(|(a, b)| StatementKind::RowEq(a, b)),
        (dim_syntax(), dim_syntax()).prop_map(|(a, b)| StatementKind::DimLe(a, b)),
        (dim_syntax(), dim_syntax()).prop_map(|(a, b)| StatementKind::DimEq(a, b)),
        (operand(), operand()).prop_map(|(a, b)| StatementKind::NumelEq(a, b)),
    ]
}
