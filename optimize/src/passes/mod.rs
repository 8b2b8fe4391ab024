//! The passes, one file each, and the table that names them.

mod constants;
mod contiguous_gather;
mod conv_affine;
mod conv_bn;
mod cse;
mod dead_code;
mod fold_constants;
mod fold_if;
mod fold_shapes;
mod fuse_attention;
mod fuse_gelu;
mod fuse_hard_swish;
mod fuse_layer_norm;
mod fuse_rms_norm;
mod hoist_invariants;
mod inline_functions;
mod inline_ones;
mod linear_bn;
mod linear_reshape;
mod matmul_add;

pub(crate) use cse::topological;
pub(crate) use inline_ones::plan as inline_ones_plan;
mod merge_reshapes;
mod merge_slices;
mod merge_transposes;
mod noop;
mod pad_conv;
mod parallel_conv;
mod parallel_matmul;
mod pattern;
mod reshape_targets;

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
    "inline-functions",
    "constants",
    "fold-shapes",
    "reshape-targets",
    "contiguous-gather",
    "noop",
    "inline-ones",
    "fold-constants",
    "fold-if",
    "hoist-invariants",
    "fuse-conv-bn",
    "fuse-conv-affine",
    "merge-parallel-convs",
    "fuse-linear-bn",
    "unflatten-linear",
    "fuse-gemm",
    "merge-parallel-matmuls",
    "fuse-pad",
    "fuse-hard-swish",
    "fuse-gelu",
    "fuse-layer-norm",
    "fuse-rms-norm",
    "fuse-attention",
    "cse",
    "merge-reshapes",
    "merge-slices",
    "merge-transposes",
    "dead-code",
];

/// The pass called `name`.
pub fn pass_named(name: &str) -> Option<&'static dyn Pass> {
    Some(match name {
        "inline-functions" => &inline_functions::InlineFunctions,
        "constants" => &constants::Constants,
        "fold-shapes" => &fold_shapes::FoldShapes,
        "reshape-targets" => &reshape_targets::ReshapeTargets,
        "contiguous-gather" => &contiguous_gather::ContiguousGather,
        "noop" => &noop::Noop,
        "inline-ones" => &inline_ones::InlineOnes,
        "fold-constants" => &fold_constants::FoldConstants,
        "fold-if" => &fold_if::FoldIf,
        "hoist-invariants" => &hoist_invariants::HoistInvariants,
        "cse" => &cse::Cse,
        "merge-reshapes" => &merge_reshapes::MergeReshapes,
        "merge-slices" => &merge_slices::MergeSlices,
        "merge-transposes" => &merge_transposes::MergeTransposes,
        "fuse-conv-bn" => &conv_bn::ConvBn,
        "fuse-conv-affine" => &conv_affine::ConvAffine,
        "merge-parallel-convs" => &parallel_conv::ParallelConvs,
        "fuse-linear-bn" => &linear_bn::LinearBn,
        "unflatten-linear" => &linear_reshape::LinearReshape,
        "fuse-gemm" => &matmul_add::MatMulAdd,
        "merge-parallel-matmuls" => &parallel_matmul::ParallelMatMuls,
        "fuse-pad" => &pad_conv::PadIntoConv,
        "fuse-hard-swish" => &fuse_hard_swish::FuseHardSwish,
        "fuse-gelu" => &fuse_gelu::FuseGelu,
        "fuse-layer-norm" => &fuse_layer_norm::FuseLayerNorm,
        "fuse-rms-norm" => &fuse_rms_norm::FuseRmsNorm,
        "fuse-attention" => &fuse_attention::FuseAttention,
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
