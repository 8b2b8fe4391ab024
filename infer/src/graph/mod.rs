//! Checking a whole ONNX model: every node lowered to constraints through
//! its operator rule ([`crate::ops`], seeing its node through
//! [`crate::rule`]), one solve, the closing of seed 000, and a report of
//! every value's kind, element type and shape.
//!
//! Graph inputs are leaves: their stated dims are facts, a missing dim is an
//! opaque variable that closes upward to what its uses require (or stays
//! unknown). `dim_param`s are rigid symbols. Declared `value_info` and
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

use crate::ops::OpTable;
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
pub fn check_model_with(model: &Model, options: &CheckOptions, table: &OpTable) -> CheckReport {
    let (mut low, mut st) = lowering::Lowering::new(model, options, table);
    let Some(main) = model.graph else {
        return CheckReport::default();
    };
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
    report::build(low, st, main)
}
