//! Checking a whole ONNX model: every node lowered to constraints through
//! its operator rule ([`crate::ops`], seeing its node through
//! [`crate::rule`]), one solve, the closing of seed 000, and a report of
//! every value's kind, element type and shape.
//!
//! Graph inputs are leaves: their stated dims are facts and `dim_param`s
//! rigid symbols. An axis the file leaves open (no size, `?`, `-1`) is a
//! rigid symbol of its own on a main-graph input (`x.2`,
//! [`diamond_ir::InputDims`]), made the size its uses require when they
//! require one (a second pass, [`check_model_with`]); on a subgraph's
//! input it is an opaque variable that closes upward to what its uses
//! require (or stays unknown). Declared `value_info` and
//! graph-output shapes are claims: checked against what the graph implies
//! (`declared-shape-mismatch`) and used only for values inference cannot
//! determine.

pub mod claims;
mod declared;
mod grouping;
pub mod inferred;
mod lowering;
mod provenance;
mod report;

// Known elements as the report holds them, and their decoding from stored
// tensors: defined by the rule interface, and found here by the crates above.
pub use crate::rule::{decode, ConstData, ConstValue, Elem};
pub use inferred::{annotate, annotate_with, AnnotateOptions, InferredTypes};
pub use report::{json_dtype as report_json_dtype, CheckReport, DimReport, ValueReport};

use crate::diagnostic::{Assumption, Code, Diagnostic, Severity};
use crate::ops::OpTable;
use diamond_ir::term::SizeExpr;
use diamond_ir::{Model, Tensor};
use std::collections::HashMap;

/// How to check a model.
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    /// Graph inputs bound to constant tensors (`--bind`), by name.
    pub bind: HashMap<String, Tensor>,
    /// Stated size-1 axes are claims (`1_default`), not the claim-free unit.
    pub strict_units: bool,
    /// Leave [`CheckReport::inferred`] empty: the ONNX types of every value
    /// are built only for writing them back (`convert`, the plan of `run`),
    /// and a caller that only reports (`diamond check`) skips that work.
    pub skip_inferred_types: bool,
}

/// Checks `model`: infers every value's shape and element type and reports
/// what is wrong. Never panics on any model.
pub fn check_model(model: &Model, options: &CheckOptions) -> CheckReport {
    let table = OpTable::standard();
    check_model_with(model, options, &table)
}

/// [`check_model`] with a given operator table.
///
/// A main-graph input axis the file leaves open is a rigid symbol of its
/// own (`x.2`, [`diamond_ir::InputDims`]). Where the graph uses one as a
/// fixed size or as another size (`Add(x, w)` with `w` of `[2, 3]`), the
/// check is run again with the axis standing for that size, as a stated
/// size would, so the input is inferred from use; the first pass's
/// `dynamic-axis-specialized` diagnostic stays as an `info` carrying the
/// condition (`x.0 = 2`), which `run` checks against the fed shape. At most
/// `MAX_PASSES` passes; a model with no open axis, or none specialized,
/// is checked once.
pub fn check_model_with(model: &Model, options: &CheckOptions, table: &OpTable) -> CheckReport {
    let Some(main) = model.graph else {
        return CheckReport::default();
    };
    let mut specialized: HashMap<String, SizeExpr> = HashMap::new();
    let mut found: Vec<Diagnostic> = Vec::new();
    for pass in 1..=MAX_PASSES {
        let (mut low, mut st) = lowering::Lowering::new(model, options, table, specialized.clone());
        let instance = lowering::Instance {
            graph: main,
            parent: None,
            prefix: String::new(),
            call: None,
            opsets: &model.opset_imports,
            reported: true,
            depth: 0,
        };
        low.lower_instance(&mut st, instance, Vec::new());
        let input_dims = if low.input_dims.none_open() { None } else { Some(low.input_dims.clone()) };
        let mut report = report::build(low, st, main);
        let Some(input_dims) = input_dims.filter(|_| pass < MAX_PASSES) else {
            return with_found(report, found);
        };
        let before = specialized.len();
        report.diagnostics.retain(|d| {
            let Some((symbol, to)) = specialization(d, &input_dims).filter(|(s, _)| !specialized.contains_key(s))
            else {
                return true;
            };
            let mut d = d.clone();
            d.severity = Severity::Info;
            d.message = format!("input axis {symbol}, which the file leaves open, is inferred from use: {}", d.message);
            found.push(d);
            specialized.insert(symbol, to);
            false
        });
        if specialized.len() == before {
            return with_found(report, found);
        }
    }
    unreachable!("the last pass returns")
}

/// How many times [`check_model_with`] checks a model at most.
const MAX_PASSES: usize = 4;

/// `report` with the specializations of open input axes found in earlier
/// passes listed first, as `info`s.
fn with_found(mut report: CheckReport, mut found: Vec<Diagnostic>) -> CheckReport {
    if !found.is_empty() {
        found.append(&mut report.diagnostics);
        report.diagnostics = found;
    }
    report
}

/// The open input axis `d` specializes and what to, when `d` is a
/// `dynamic-axis-specialized` equating one generated symbol with a size that
/// does not mention it.
fn specialization(d: &Diagnostic, input_dims: &diamond_ir::InputDims) -> Option<(String, SizeExpr)> {
    if d.code != Code::DynamicAxisSpecialized {
        return None;
    }
    let [assumption] = d.assumes.as_slice() else { return None };
    let (lhs, rhs, symmetric) = match assumption {
        Assumption::Equal(a, b) => (a, b, true),
        Assumption::EqualOrOne(a, b) => (a, b, false),
        _ => return None,
    };
    let own = |e: &SizeExpr| match e.symbols().as_slice() {
        [s] if input_dims.is_generated(s) && *e == SizeExpr::symbol(s) => Some(s.to_string()),
        _ => None,
    };
    let free = |e: &SizeExpr, s: &str| !e.symbols().contains(&s);
    if let Some(s) = own(lhs).filter(|s| free(rhs, s)) {
        return Some((s, rhs.clone()));
    }
    own(rhs).filter(|s| symmetric && free(lhs, s)).map(|s| (s, lhs.clone()))
}
