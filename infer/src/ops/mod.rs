//! Operator rules: one file per operator family, and the table from
//! (domain, operator, opset version) to the rule that lowers a node of that
//! operator into constraints, element types and known values.
//!
//! A rule is a plain function over an [`OpCtx`] (from [`crate::rule`]: all
//! a rule sees of the lowering). It reads what is known of the node's
//! inputs (shapes as solver rows, element types, elements of
//! shape-computing tensors) and attributes, validates them
//! (`invalid-attribute`, `dtype-mismatch`), and states its outputs: shapes
//! as constraints, element types, and elements where it can compute them.
//! A rule that needs a fact not yet known (an input's rank) returns
//! [`Defer`] before stating anything; the lowering retries it once other
//! nodes have been lowered.

use crate::rule::{Defer, OpCtx};
use inline_key::InlineKey;
use rustc_hash::FxHashMap as HashMap;

mod common;
mod control;
mod elementwise;
mod extra;
mod fold;
mod inline_key;
mod misc;
mod nn;
mod reduce_linalg;
mod shape_ops;

/// A rule: lowers one node.
pub type Rule = fn(&mut OpCtx<'_, '_>) -> Result<(), Defer>;

/// The default ONNX domain.
pub const ONNX: &str = "";
/// The classical machine-learning domain.
pub const ML: &str = "ai.onnx.ml";
/// The training-operator preview domain.
pub const TRAINING: &str = "ai.onnx.preview.training";
/// The preview domain of operators on their way into the standard.
pub const PREVIEW: &str = "ai.onnx.preview";
/// ONNX Runtime's contrib domain (the fused operators its optimizers write).
pub const MICROSOFT: &str = "com.microsoft";

/// The table from (domain, operator) to the rules of its versions.
#[derive(Default)]
pub struct OpTable {
    rules: HashMap<(&'static str, &'static str), Vec<(i64, Rule)>>,
    /// The same rules by inline key, for [`OpTable::lookup`] (every
    /// registered key fits inline; a longer name asked for is not in it).
    by_inline_key: HashMap<InlineKey, Vec<(i64, Rule)>>,
}

impl OpTable {
    /// Every rule diamond has.
    pub fn standard() -> OpTable {
        let mut t = OpTable::default();
        elementwise::register(&mut t);
        shape_ops::register(&mut t);
        nn::register(&mut t);
        reduce_linalg::register(&mut t);
        control::register(&mut t);
        misc::register(&mut t);
        extra::register(&mut t);
        t
    }

    /// Registers `rule` for `op` of `domain` from opset version `since` on
    /// (until a later registration of the same op takes over).
    pub fn add(&mut self, domain: &'static str, op: &'static str, since: i64, rule: Rule) {
        let versions = self.rules.entry((domain, op)).or_default();
        versions.push((since, rule));
        versions.sort_by_key(|(v, _)| *v);
        let key = InlineKey::new(domain, op).expect("a registered operator's domain and name fit inline");
        self.by_inline_key.insert(key, versions.clone());
    }

    /// Registers one rule for several operators, each from `since` on.
    pub fn add_all(&mut self, domain: &'static str, ops: &[&'static str], since: i64, rule: Rule) {
        for op in ops {
            self.add(domain, op, since, rule);
        }
    }

    /// The rule for `op` of `domain` at opset `version`: the latest
    /// registration at or below it. `None` when the operator is unknown, or
    /// the model's opset predates it.
    pub fn lookup(&self, domain: &str, op: &str, version: i64) -> Option<Rule> {
        let domain = if domain == "ai.onnx" { ONNX } else { domain };
        let versions = self.by_inline_key.get(&InlineKey::new(domain, op)?)?;
        versions.iter().rev().find(|(since, _)| *since <= version).map(|(_, r)| *r)
    }

    /// Whether any version of `op` in `domain` has a rule.
    pub fn knows(&self, domain: &str, op: &str) -> bool {
        let domain = if domain == "ai.onnx" { ONNX } else { domain };
        self.rules.contains_key(&(domain, op))
    }

    /// Number of (domain, operator) pairs with rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}
