//! The conditions behind assumption warnings, as structures: every
//! `implied-bound`, `divisibility` and `dynamic-axis-specialized` warning of
//! the fixture models carries the condition its message states
//! ([`Diagnostic::assumes`]), and the condition evaluates at bound symbols
//! as the message says (`seq ≤ 512` holds at 512 and fails at 513). This is
//! what `diamond run` checks a fed shape against.

use diamond_infer::{check_model, Assumption, CheckOptions, Code, Diagnostic};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The warnings with `code` that `check` gives the fixture `file`.
fn warnings(file: &str, code: Code) -> Vec<Diagnostic> {
    let model = diamond_importers::onnx::load_model(&root().join("fixtures").join(file)).unwrap();
    let report = check_model(&model, &CheckOptions::default());
    report.diagnostics.into_iter().filter(|d| d.code == code).collect()
}

/// Whether `a` holds with `bindings` (symbol, size).
fn holds(a: &Assumption, bindings: &[(&str, i64)]) -> Option<bool> {
    a.holds(&|s| bindings.iter().find(|(n, _)| *n == s).map(|&(_, v)| v))
}

#[test]
fn every_assumption_warning_carries_its_condition() {
    let cases = [
        ("check/implied_bound.onnx", Code::ImpliedBound, "seq ≤ 512"),
        ("check/implied_bound_range.onnx", Code::ImpliedBound, "seq ≤ 512"),
        ("check/declared_dims.onnx", Code::ImpliedBound, "seq ≤ 4"),
        ("exports/bert.legacy.onnx", Code::ImpliedBound, "seq ≤ 64"),
        ("exports/gpt2.dynamo.onnx", Code::ImpliedBound, "seq ≤ 64"),
        ("check/dynamic_specialized.onnx", Code::DynamicAxisSpecialized, "8 = batch"),
        ("diagnostics/reshape-divisibility.onnx", Code::Divisibility, "batch*seq is divisible by 2"),
    ];
    for (file, code, condition) in cases {
        let found = warnings(file, code);
        assert!(!found.is_empty(), "{file}: no {code:?} warning");
        for d in &found {
            let texts: Vec<String> = d.assumes.iter().map(Assumption::to_string).collect();
            assert_eq!(texts, vec![condition.to_string()], "{file}: {}", d.message);
            assert!(d.message.contains(condition), "{file}: the message states it: {}", d.message);
        }
    }
}

#[test]
fn conditions_evaluate_at_bound_symbols() {
    let bound = &warnings("check/implied_bound.onnx", Code::ImpliedBound)[0].assumes[0];
    assert_eq!(bound.symbols(), vec!["seq"]);
    assert_eq!(holds(bound, &[("seq", 512)]), Some(true));
    assert_eq!(holds(bound, &[("seq", 513)]), Some(false));
    assert_eq!(holds(bound, &[("batch", 513)]), None, "seq unbound: nothing can be said");

    let divisible = &warnings("diagnostics/reshape-divisibility.onnx", Code::Divisibility)[0].assumes[0];
    assert_eq!(holds(divisible, &[("batch", 3), ("seq", 5)]), Some(false));
    assert_eq!(holds(divisible, &[("batch", 3), ("seq", 4)]), Some(true));

    let specialized = &warnings("check/dynamic_specialized.onnx", Code::DynamicAxisSpecialized)[0].assumes[0];
    assert_eq!(holds(specialized, &[("batch", 8)]), Some(true));
    assert_eq!(holds(specialized, &[("batch", 2)]), Some(false));
}

#[test]
fn a_dynamic_axis_that_may_broadcast_may_also_be_one() {
    use diamond_ir::term::SizeExpr;
    let a = Assumption::EqualOrOne(SizeExpr::symbol("n"), SizeExpr::constant(8));
    assert_eq!(a.to_string(), "n = 8 or n = 1");
    assert_eq!(holds(&a, &[("n", 1)]), Some(true));
    assert_eq!(holds(&a, &[("n", 8)]), Some(true));
    assert_eq!(holds(&a, &[("n", 2)]), Some(false));
    let at_least = Assumption::AtLeast(SizeExpr::symbol("n"), SizeExpr::constant(1));
    assert_eq!(holds(&at_least, &[("n", 0)]), Some(false));
}
