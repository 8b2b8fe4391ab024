//! Operator rules: the operators onnx 1.23 defines that no other family
//! holds — the fused sequence-model operators of the default domain
//! ([`fused`]: `SwiGLU`, `CausalConvWithState`, `LinearAttention`), the
//! classical machine-learning operators of `ai.onnx.ml` on tensors
//! ([`ml`]: scalers, encoders, linear models, SVMs, tree ensembles) and on
//! maps and sequences of maps ([`ml_maps`]: `CastMap`, `DictVectorizer`,
//! `ZipMap`), and the training-preview `Gradient` ([`gradient`]). This
//! module holds the registrations and the helpers the submodules share.

use super::common::{divided_dim, scaled_dim, set_tensor, unknown_shape};
use super::{OpTable, ML, ONNX, TRAINING};
use crate::rule::OpCtx;
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

mod fused;
mod gradient;
mod ml;
mod ml_maps;

pub(crate) fn register(t: &mut OpTable) {
    t.add(ONNX, "SwiGLU", 28, fused::swiglu);
    t.add(ONNX, "CausalConvWithState", 27, fused::causal_conv_with_state);
    t.add(ONNX, "LinearAttention", 27, fused::linear_attention);
    t.add(ML, "CategoryMapper", 1, ml::category_mapper);
    t.add(ML, "FeatureVectorizer", 1, ml::feature_vectorizer);
    t.add(ML, "Imputer", 1, ml::imputer);
    t.add(ML, "LinearClassifier", 1, ml::linear_classifier);
    t.add(ML, "LinearRegressor", 1, ml::linear_regressor);
    t.add(ML, "Normalizer", 1, ml::normalizer);
    t.add(ML, "OneHotEncoder", 1, ml::one_hot_encoder);
    t.add(ML, "Scaler", 1, ml::scaler);
    t.add(ML, "SVMClassifier", 1, ml::svm_classifier);
    t.add(ML, "SVMRegressor", 1, ml::svm_regressor);
    t.add(ML, "TreeEnsembleClassifier", 1, ml::tree_ensemble_classifier);
    t.add(ML, "TreeEnsembleRegressor", 1, ml::tree_ensemble_regressor);
    t.add(ML, "CastMap", 1, ml_maps::cast_map);
    t.add(ML, "DictVectorizer", 1, ml_maps::dict_vectorizer);
    t.add(ML, "ZipMap", 1, ml_maps::zip_map);
    t.add(TRAINING, "Gradient", 1, gradient::gradient);
}

/// Output `j` has input `i`'s shape, and element type `t` (input `i`'s when `None`).
fn shaped_like(ctx: &mut OpCtx, j: usize, i: usize, t: Option<ElemType>) {
    if let Some(row) = ctx.in_row(i) {
        ctx.set_row(j, row);
    }
    if let Some(t) = t.or_else(|| ctx.dtype(i)) {
        ctx.set_dtype(j, t);
    }
}

/// Output `j` ends in the axes `trailing`, after a prefix of axes nothing
/// determines (not even how many); element type `t` when known.
fn set_trailing(ctx: &mut OpCtx, j: usize, trailing: Vec<DimTerm>, t: Option<ElemType>) {
    let mut row = ctx.unknown_row();
    row.trailing = trailing;
    ctx.set_row(j, row);
    if let Some(t) = t {
        ctx.set_dtype(j, t);
    }
}

/// The dimension of a count taken from an attribute's length.
fn count_dim(ctx: &mut OpCtx, n: usize) -> DimTerm {
    ctx.known(n as u64)
}

/// Reports a `dtype-mismatch` when input `i`'s known element type is not among `allowed`.
fn check_dtype(ctx: &mut OpCtx, i: usize, allowed: &[ElemType]) {
    let Some(t) = ctx.dtype(i) else { return };
    if !allowed.contains(&t) {
        let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
        ctx.dtype_mismatch(format!("input {i} is {t}; {} takes {}", ctx.op(), names.join(", ")));
    }
}

/// Reports `invalid-attribute` when the string attribute `name` (default
/// `default`) is not one of `allowed`; returns its value when it is.
fn check_choice(ctx: &mut OpCtx, name: &str, default: &str, allowed: &[&str]) -> Option<String> {
    let value = ctx.attr_str(name).unwrap_or_else(|| default.to_string());
    if allowed.contains(&value.as_str()) {
        Some(value)
    } else {
        ctx.invalid(format!("attribute {name} is '{value}'; it must be one of {}", allowed.join(", ")));
        None
    }
}

/// The length of a list attribute (ints, floats or strings), 0 when absent.
fn attr_len(ctx: &OpCtx, name: &str) -> usize {
    if let Some(v) = ctx.attr_ints(name) {
        v.len()
    } else if let Some(v) = ctx.attr_floats(name) {
        v.len()
    } else if let Some(v) = ctx.attr_strs(name) {
        v.len()
    } else {
        0
    }
}
