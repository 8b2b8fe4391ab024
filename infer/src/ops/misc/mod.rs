//! Operator rules: the operators no other family holds — string processing
//! ([`strings`]: `StringNormalizer`, `StringConcat`, `StringSplit`,
//! `RegexFullMatch`, `TfIdfVectorizer`), `TensorScatter` and `ImageDecoder`
//! ([`tensors`]), the classical machine-learning domain `ai.onnx.ml`
//! ([`ml`]) and the training-preview optimizers ([`training`]). This module
//! holds the registrations and the helpers the submodules share.

pub(super) use super::common::{set_tensor, unknown_shape};
use super::{OpTable, ML, ONNX, TRAINING};
use crate::rule::OpCtx;
use diamond_ir::ElemType;

mod image;
mod ml;
mod strings;
mod tensors;
mod training;

pub(crate) fn register(t: &mut OpTable) {
    t.add(ONNX, "StringNormalizer", 10, strings::string_normalizer);
    t.add(ONNX, "StringConcat", 20, strings::string_concat);
    t.add(ONNX, "StringSplit", 20, strings::string_split);
    t.add(ONNX, "RegexFullMatch", 20, strings::regex_full_match);
    t.add(ONNX, "TfIdfVectorizer", 9, strings::tfidf_vectorizer);
    t.add(ONNX, "TensorScatter", 24, tensors::tensor_scatter);
    t.add(ONNX, "ImageDecoder", 20, image::image_decoder);
    t.add(ML, "ArrayFeatureExtractor", 1, ml::array_feature_extractor);
    t.add(ML, "Binarizer", 1, ml::same_as_input);
    t.add(ML, "LabelEncoder", 1, ml::label_encoder);
    t.add(ML, "TreeEnsemble", 5, ml::tree_ensemble);
    t.add_all(TRAINING, &["Adagrad", "Adam", "Momentum"], 1, training::optimizer);
}

/// Output `j` has input `i`'s shape, and element type `t` (input `i`'s when `None`).
pub(super) fn shaped_like(ctx: &mut OpCtx, j: usize, i: usize, t: Option<ElemType>) {
    if let Some(row) = ctx.in_row(i) {
        ctx.set_row(j, row);
    }
    if let Some(t) = t.or_else(|| ctx.dtype(i)) {
        ctx.set_dtype(j, t);
    }
}
