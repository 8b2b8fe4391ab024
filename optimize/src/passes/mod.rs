//! The passes, one file each, and the table that names them.

mod constants;
mod conv_bn;
mod cse;
mod dead_code;
mod fold_constants;
mod fold_shapes;
mod inline_ones;

pub(crate) use cse::topological;
pub(crate) use inline_ones::plan as inline_ones_plan;
mod merge_reshapes;
mod merge_transposes;
mod noop;

use crate::Analysis;
use diamond_ir::Model;

/// One graph → graph rewrite.
pub trait Pass: Sync {
    /// The name `--passes` uses.
    fn name(&self) -> &'static str;
    /// Rewrites the main graph of `model`, reading `analysis` (the model as
    /// it was before this pass); returns how many rewrites it made.
    fn run(&self, model: &mut Model, analysis: &Analysis) -> usize;
}

/// The passes in their default order.
pub const PASS_NAMES: &[&str] = &[
    "constants",
    "fold-shapes",
    "noop",
    "inline-ones",
    "fold-constants",
    "cse",
    "merge-reshapes",
    "merge-transposes",
    "fuse-conv-bn",
    "dead-code",
];

/// The pass called `name`.
pub fn pass_named(name: &str) -> Option<&'static dyn Pass> {
    Some(match name {
        "constants" => &constants::Constants,
        "fold-shapes" => &fold_shapes::FoldShapes,
        "noop" => &noop::Noop,
        "inline-ones" => &inline_ones::InlineOnes,
        "fold-constants" => &fold_constants::FoldConstants,
        "cse" => &cse::Cse,
        "merge-reshapes" => &merge_reshapes::MergeReshapes,
        "merge-transposes" => &merge_transposes::MergeTransposes,
        "fuse-conv-bn" => &conv_bn::ConvBn,
        "dead-code" => &dead_code::DeadCode,
        _ => return None,
    })
}

/// Whether a constant holds one value everywhere: `c` for every element
/// (integers, floats and booleans compared as numbers).
pub(crate) fn uniform(value: &diamond_infer::graph::ConstValue, c: f64) -> bool {
    use diamond_infer::graph::ConstData;
    match &value.data {
        ConstData::Ints(v) => v.iter().all(|e| e.as_int().is_some_and(|n| n as f64 == c)),
        ConstData::Floats(v) => v.iter().all(|&f| f == c),
        ConstData::Bools(v) => v.iter().all(|&b| (b as u8) as f64 == c),
        ConstData::Strings(_) => false,
    }
}

/// Operators whose result differs run to run: never merged or folded.
pub(crate) const NONDETERMINISTIC: &[&str] =
    &["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"];
