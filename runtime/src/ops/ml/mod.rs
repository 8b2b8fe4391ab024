//! The `ai.onnx.ml` operators, one file per family: tree ensembles
//! (`trees.rs`), linear models (`linear.rs`), support vector machines
//! (`svm.rs`), preprocessing (`preprocess.rs`), encoders (`encode.rs`),
//! feature assembly (`features.rs`) and the operators on maps (`maps.rs`).
//!
//! The models follow onnxruntime where the specification is vague (which
//! label a two-class model picks, how a single score becomes two): the
//! fixtures of `fixtures/ml/` are onnxruntime's outputs. What they share is
//! here: the input read as `[N, F]` rows of `f64`, the class labels, and the
//! score transforms, computed in `f32` as onnxruntime computes them so the
//! probabilities agree to the last few bits.

mod encode;
mod features;
mod linear;
mod maps;
mod preprocess;
mod svm;
mod trees;

use super::{NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Tensor, Value};

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "TreeEnsembleClassifier" => trees::classifier(ctx),
        "TreeEnsembleRegressor" => trees::regressor(ctx),
        "TreeEnsemble" => trees::tree_ensemble(ctx),
        "LinearClassifier" => linear::classifier(ctx),
        "LinearRegressor" => linear::regressor(ctx),
        "SVMClassifier" => svm::classifier(ctx),
        "SVMRegressor" => svm::regressor(ctx),
        "Scaler" => preprocess::scaler(ctx),
        "Normalizer" => preprocess::normalizer(ctx),
        "Binarizer" => preprocess::binarizer(ctx),
        "Imputer" => preprocess::imputer(ctx),
        "OneHotEncoder" => encode::one_hot_encoder(ctx),
        "LabelEncoder" => encode::label_encoder(ctx),
        "CategoryMapper" => encode::category_mapper(ctx),
        "ArrayFeatureExtractor" => features::array_feature_extractor(ctx),
        "FeatureVectorizer" => features::feature_vectorizer(ctx),
        "DictVectorizer" => maps::dict_vectorizer(ctx),
        "ZipMap" => maps::zip_map(ctx),
        "CastMap" => maps::cast_map(ctx),
        _ => return None,
    })
}

/// A model's input as rows: `[F]` is one row, `[N, F, ...]` is `N` rows of
/// the remaining elements.
pub(crate) struct Rows {
    /// The number of rows.
    pub n: usize,
    /// The features per row.
    pub f: usize,
    /// `n * f` values, row after row.
    pub x: Vec<f64>,
}

impl Rows {
    /// Row `r`.
    pub fn row(&self, r: usize) -> &[f64] {
        &self.x[r * self.f..(r + 1) * self.f]
    }
}

/// Input `i` as rows of numbers.
pub(crate) fn rows(ctx: &NodeCtx<'_>, i: usize) -> Result<Rows> {
    let t = ctx.input(i)?;
    let x = t.to_f64s().ok_or_else(|| ctx.err(format!("input {i} must be numeric, not {}", t.elem())))?;
    let n = match t.rank() {
        0 => return Err(ctx.err(format!("input {i} is a scalar; a vector or a matrix was expected"))),
        1 => 1,
        _ => t.shape[0],
    };
    let f = if n == 0 { t.shape[1..].iter().product() } else { x.len() / n };
    Ok(Rows { n, f, x })
}

/// A classifier's labels: int64 or strings.
pub(crate) enum Labels {
    Ints(Vec<i64>),
    Strings(Vec<Vec<u8>>),
}

impl Labels {
    /// The labels from `<ints>` or `classlabels_strings`; an error when neither is given.
    pub fn read(ctx: &NodeCtx<'_>, ints: &str) -> Result<Labels> {
        match (ctx.attr_ints(ints), ctx.attr_strings("classlabels_strings")) {
            (_, Some(s)) if !s.is_empty() => Ok(Labels::Strings(s)),
            (Some(i), _) if !i.is_empty() => Ok(Labels::Ints(i)),
            _ => Err(ctx.err(format!("{ints} or classlabels_strings is required"))),
        }
    }

    /// Whether the labels are strings.
    pub fn are_strings(&self) -> bool {
        matches!(self, Labels::Strings(_))
    }

    /// The number of labels.
    pub fn len(&self) -> usize {
        match self {
            Labels::Ints(v) => v.len(),
            Labels::Strings(v) => v.len(),
        }
    }

    /// The labels of `picks` as a `[N]` tensor.
    pub fn tensor(&self, picks: &[Pick]) -> Tensor {
        let data = match self {
            Labels::Ints(v) => Data::I64(
                picks
                    .iter()
                    .map(|p| match *p {
                        Pick::Index(i) => v.get(i).copied().unwrap_or_default(),
                        Pick::Value(x) => x,
                    })
                    .collect(),
            ),
            Labels::Strings(v) => Data::Str(
                picks
                    .iter()
                    .map(|p| match *p {
                        Pick::Index(i) => v.get(i).cloned().unwrap_or_default(),
                        Pick::Value(x) => x.to_string().into_bytes(),
                    })
                    .collect(),
            ),
        };
        Tensor { shape: vec![picks.len()], data }
    }
}

/// The label a classifier writes for one row: the label at an index, or
/// (onnxruntime's two-class fallbacks) the value 1 or 0 itself (as text
/// when the labels are strings).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pick {
    Index(usize),
    Value(i64),
}

/// The score transforms of the models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transform {
    None,
    Softmax,
    Logistic,
    SoftmaxZero,
    Probit,
}

impl Transform {
    /// The `post_transform` attribute.
    pub fn read(ctx: &NodeCtx<'_>) -> Result<Transform> {
        let s = ctx.attr_s("post_transform").unwrap_or_else(|| "NONE".into());
        Ok(match s.as_str() {
            "NONE" => Transform::None,
            "SOFTMAX" => Transform::Softmax,
            "LOGISTIC" => Transform::Logistic,
            "SOFTMAX_ZERO" => Transform::SoftmaxZero,
            "PROBIT" => Transform::Probit,
            other => {
                return Err(ctx.err(format!(
                    "post_transform '{other}' is not one of NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT"
                )))
            }
        })
    }
}

/// How a single score becomes two (onnxruntime's `add_second_class`):
/// `Complement` writes `[1 - s, s]`, `Negation` `[-s, s]` (each through the
/// logistic function under LOGISTIC), `Alone` leaves one score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Second {
    Alone,
    Complement,
    Negation,
}

pub(crate) fn logistic(v: f32) -> f32 {
    let e = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 {
        1.0 - e
    } else {
        e
    }
}

/// onnxruntime's approximation of the inverse error function (Winitzki's, a = 0.147).
fn erf_inv(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = (1.0 - x) * (1.0 + x);
    let ln = x.ln();
    let v = 2.0 / (std::f32::consts::PI * 0.147) + 0.5 * ln;
    let v2 = 1.0 / 0.147 * ln;
    sign * (-v + (v * v - v2).sqrt()).sqrt()
}

pub(crate) fn probit(v: f32) -> f32 {
    std::f32::consts::SQRT_2 * erf_inv(2.0 * v - 1.0)
}

fn softmax(v: &mut [f32], skip_zeros: bool) {
    let max = v.iter().fold(-f32::MAX, |m, &x| m.max(x));
    let mut sum = 0.0f32;
    for x in v.iter_mut() {
        if skip_zeros && x.abs() <= 1e-7 {
            *x *= (-max).exp();
        } else {
            *x = (*x - max).exp();
            sum += *x;
        }
    }
    v.iter_mut().for_each(|x| *x /= sum);
}

/// One row's scores after the transform (onnxruntime's `write_scores`):
/// several scores are transformed together; a single one is PROBIT's, or
/// becomes two as `second` says.
pub(crate) fn finish_scores(scores: &[f64], t: Transform, second: Second) -> Vec<f32> {
    let mut v: Vec<f32> = scores.iter().map(|&s| s as f32).collect();
    if v.len() >= 2 {
        match t {
            Transform::Probit => v.iter_mut().for_each(|x| *x = probit(*x)),
            Transform::Logistic => v.iter_mut().for_each(|x| *x = logistic(*x)),
            Transform::Softmax => softmax(&mut v, false),
            Transform::SoftmaxZero => softmax(&mut v, true),
            Transform::None => {}
        }
        return v;
    }
    let Some(&s) = v.first() else { return v };
    match (t, second) {
        (Transform::Probit, _) => vec![probit(s)],
        (_, Second::Complement) => vec![1.0 - s, s],
        (Transform::Logistic, Second::Negation) => vec![logistic(-s), logistic(s)],
        (_, Second::Negation) => vec![-s, s],
        (_, Second::Alone) => vec![s],
    }
}

/// `[N, width]` float scores from rows of possibly fewer scores (a missing
/// score is 0, as the runtime's buffer leaves it).
pub(crate) fn score_tensor(rows: &[Vec<f32>], width: usize) -> Tensor {
    let mut out = vec![0.0f32; rows.len() * width];
    for (r, s) in rows.iter().enumerate() {
        let n = s.len().min(width);
        out[r * width..r * width + n].copy_from_slice(&s[..n]);
    }
    Tensor { shape: vec![rows.len(), width], data: Data::F32(out) }
}

/// A classifier's two outputs.
pub(crate) fn two(labels: Tensor, scores: Tensor) -> Result<Outs> {
    Ok(vec![Some(Value::Tensor(labels)), Some(Value::Tensor(scores))])
}

/// A float attribute list, or the float/double tensor `<name>_as_tensor`.
pub(crate) fn floats(ctx: &NodeCtx<'_>, name: &str) -> Result<Option<Vec<f64>>> {
    if let Some(v) = ctx.attr_floats(name) {
        return Ok(Some(v.into_iter().map(f64::from).collect()));
    }
    match ctx.attr_tensor(&format!("{name}_as_tensor"))? {
        Some(t) => t.to_f64s().map(Some).ok_or_else(|| ctx.err(format!("{name}_as_tensor must be numeric"))),
        None => Ok(None),
    }
}
