//! Operators of the `ai.onnx.ml` domain on tensors.
//!
//! Element-wise ones keep the input's shape: `CategoryMapper` (strings to
//! integers and back), `Imputer` (the input's type), `Normalizer` and
//! `Scaler` (float). `OneHotEncoder` appends an axis of one slot per
//! category; `FeatureVectorizer` concatenates `[N, C_i]` inputs, each cut or
//! padded to its `inputdimensions` entry. The models map `[N, F]` to `[N]`
//! labels (string or int64, after the class labels) and `[N, E]` float
//! scores: `LinearClassifier` and `LinearRegressor`, `SVMClassifier` and
//! `SVMRegressor`, `TreeEnsembleClassifier` and `TreeEnsembleRegressor`.
//! Where the runtimes disagree (the score count of a one-label tree
//! ensemble, the shape a vector input gives most regressors) the rule
//! leaves the size unknown rather than pick one.

use super::{attr_len, check_choice, check_dtype, count_dim, set_tensor, set_trailing, shaped_like, unknown_shape};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

/// The numeric input types of the classical models.
const NUMERIC: [ElemType; 4] = [ElemType::Float, ElemType::Double, ElemType::Int64, ElemType::Int32];

/// The score transforms the models take.
const POST_TRANSFORMS: [&str; 5] = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"];

/// The kernels of the support vector machines.
const KERNELS: [&str; 4] = ["LINEAR", "POLY", "RBF", "SIGMOID"];

/// `CategoryMapper`: strings become int64 and int64 become strings, shape kept.
pub(super) fn category_mapper(ctx: &mut OpCtx) -> Result<(), Defer> {
    let (ints, strings) = (ctx.attr_ints("cats_int64s"), ctx.attr_strs("cats_strings"));
    match (&ints, &strings) {
        (Some(i), Some(s)) if i.len() != s.len() => {
            ctx.invalid(format!("cats_int64s has {} entries but cats_strings {}; they must match", i.len(), s.len()))
        }
        (Some(_), Some(_)) => {}
        _ => ctx.invalid("CategoryMapper needs both cats_int64s and cats_strings"),
    }
    let t = match ctx.dtype(0) {
        Some(ElemType::String) => Some(ElemType::Int64),
        Some(ElemType::Int64) => Some(ElemType::String),
        Some(other) => {
            ctx.dtype_mismatch(format!("input 0 is {other}; CategoryMapper takes string or int64"));
            None
        }
        None => None,
    };
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    if let Some(t) = t {
        ctx.set_dtype(0, t);
    }
    Ok(())
}

/// `Imputer`: the input's shape and type; the imputed values are one or one per feature.
pub(super) fn imputer(ctx: &mut OpCtx) -> Result<(), Defer> {
    check_dtype(ctx, 0, &NUMERIC);
    let floats = attr_len(ctx, "imputed_value_floats");
    let ints = attr_len(ctx, "imputed_value_int64s");
    let count = match (floats, ints) {
        (0, 0) => {
            ctx.invalid("Imputer needs imputed_value_floats or imputed_value_int64s");
            None
        }
        (n, 0) | (0, n) => Some(n),
        _ => {
            ctx.invalid("Imputer takes only one of imputed_value_floats and imputed_value_int64s");
            None
        }
    };
    if let (Some(n), Some(dims)) = (count, ctx.dims(0)) {
        if let Some(f) = dims.last().and_then(|d| ctx.size_of(d)) {
            if dims.len() == 2 && n != 1 && n as u64 != f {
                ctx.invalid(format!("{n} imputed values for {f} features; give 1 or one per feature"));
            }
        }
    }
    shaped_like(ctx, 0, 0, None);
    Ok(())
}

/// `Normalizer`: the input's shape, float.
pub(super) fn normalizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "norm", "MAX", &["MAX", "L1", "L2"]);
    shaped_like(ctx, 0, 0, Some(ElemType::Float));
    Ok(())
}

/// `Scaler`: the input's shape, float; `offset` and `scale` have one length.
pub(super) fn scaler(ctx: &mut OpCtx) -> Result<(), Defer> {
    check_dtype(ctx, 0, &NUMERIC);
    let (offset, scale) = (attr_len(ctx, "offset"), attr_len(ctx, "scale"));
    if offset > 0 && scale > 0 && offset != scale {
        ctx.invalid(format!("offset has {offset} values but scale {scale}; they must have the same length"));
    }
    shaped_like(ctx, 0, 0, Some(ElemType::Float));
    Ok(())
}

/// `OneHotEncoder`: the input's axes then one of the category count, float.
pub(super) fn one_hot_encoder(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &[ElemType::String, ElemType::Int64, ElemType::Int32, ElemType::Float, ElemType::Double]);
    let ints = ctx.attr_ints("cats_int64s");
    let strings = ctx.attr_strs("cats_strings");
    let count = match (&ints, &strings) {
        (Some(c), None) => Some((c.len(), false)),
        (None, Some(c)) => Some((c.len(), true)),
        _ => {
            ctx.invalid("OneHotEncoder needs exactly one of cats_int64s and cats_strings");
            None
        }
    };
    let Some((n, by_string)) = count else {
        unknown_shape(ctx, 0, Some(ElemType::Float));
        return Ok(());
    };
    if let Some(t) = ctx.dtype(0) {
        if (t == ElemType::String) != by_string {
            let which = if by_string { "cats_strings" } else { "cats_int64s" };
            ctx.dtype_mismatch(format!("input 0 is {t} but the categories are {which}"));
        }
    }
    let mut out = dims;
    out.push(count_dim(ctx, n));
    set_tensor(ctx, 0, out, Some(ElemType::Float));
    Ok(())
}

/// `FeatureVectorizer`: `[N, Σ inputdimensions]`, float; a vector input is one row.
pub(super) fn feature_vectorizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    let n_inputs = ctx.input_count();
    let mut all = Vec::with_capacity(n_inputs);
    for i in 0..n_inputs {
        if ctx.has_input(i) {
            all.push(ctx.need_dims(i)?);
        }
    }
    let given: Vec<usize> = (0..n_inputs).filter(|&i| ctx.has_input(i)).collect();
    ctx.same_dtype(&given);
    for &i in &given {
        check_dtype(ctx, i, &NUMERIC);
    }
    let t = Some(ElemType::Float);
    if let Some(bad) = all.iter().position(|d| d.is_empty() || d.len() > 2) {
        ctx.rank_conflict(
            bad,
            format!("input {bad} has rank {}; FeatureVectorizer takes [N, C] or [C]", all[bad].len()),
        );
        unknown_shape(ctx, 0, t);
        return Ok(());
    }
    let width = feature_width(ctx, n_inputs);
    let matrices: Vec<&Vec<DimTerm>> = all.iter().filter(|d| d.len() == 2).collect();
    let batch = match matrices.as_slice() {
        [] => ctx.known(1),
        [first, rest @ ..] if matrices.len() == all.len() => {
            let n = first[0].clone();
            for (k, d) in rest.iter().enumerate() {
                ctx.eq_dims(d[0].clone(), n.clone(), &format!("input {}", k + 1), "every input has the batch");
            }
            n
        }
        _ => ctx.unknown_dim(),
    };
    set_tensor(ctx, 0, vec![batch, width], t);
    Ok(())
}

/// The output width of `FeatureVectorizer`: the sum of `inputdimensions`,
/// one entry per input (an unknown when the attribute is missing or wrong).
fn feature_width(ctx: &mut OpCtx, n_inputs: usize) -> DimTerm {
    let Some(widths) = ctx.attr_ints("inputdimensions") else { return ctx.unknown_dim() };
    if widths.len() != n_inputs {
        ctx.invalid(format!("inputdimensions has {} entries for {n_inputs} inputs", widths.len()));
        return ctx.unknown_dim();
    }
    let mut total: u64 = 0;
    for w in &widths {
        match u64::try_from(*w).ok().and_then(|w| total.checked_add(w)) {
            Some(s) => total = s,
            None => {
                ctx.invalid(format!("inputdimensions {widths:?} must be non-negative sizes"));
                return ctx.unknown_dim();
            }
        }
    }
    ctx.known(total)
}

/// The label type of a classifier: string when the string labels are given, else int64.
fn label_type(ctx: &mut OpCtx, ints: &str, strings: &str) -> ElemType {
    let n_strings = attr_len(ctx, strings);
    if n_strings > 0 && attr_len(ctx, ints) > 0 {
        ctx.invalid(format!("give only one of {ints} and {strings}"));
    }
    if n_strings > 0 {
        ElemType::String
    } else {
        ElemType::Int64
    }
}

/// The batch and features `(N, F)` of a model's input `[N, F]`; a vector
/// `[F]` is one example when `vector_is_row`, of unknown batch otherwise.
/// `None` for another rank.
fn batch_and_features(ctx: &mut OpCtx, dims: &[DimTerm], vector_is_row: bool) -> Option<(DimTerm, DimTerm)> {
    match dims {
        [n, f] => Some((n.clone(), f.clone())),
        [f] if vector_is_row => Some((ctx.known(1), f.clone())),
        [f] => Some((ctx.unknown_dim(), f.clone())),
        _ => None,
    }
}

/// States a classifier's outputs: labels `[N]` of type `label`, scores `[N, E]` float.
fn classifier_outputs(ctx: &mut OpCtx, batch: Option<DimTerm>, scores: Option<DimTerm>, label: ElemType) {
    let Some(n) = batch else {
        unknown_shape(ctx, 0, Some(label));
        unknown_shape(ctx, 1, Some(ElemType::Float));
        return;
    };
    let e = scores.unwrap_or_else(|| ctx.unknown_dim());
    set_tensor(ctx, 0, vec![n.clone()], Some(label));
    set_tensor(ctx, 1, vec![n, e], Some(ElemType::Float));
}

/// `LinearClassifier`: labels `[N]`, scores `[N, E]` with one score per
/// intercept (two for one intercept and two labels); a vector is one example.
pub(super) fn linear_classifier(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    let label = label_type(ctx, "classlabels_ints", "classlabels_strings");
    let labels = attr_len(ctx, "classlabels_ints").max(attr_len(ctx, "classlabels_strings"));
    let Some((n, f)) = batch_and_features(ctx, &dims, true) else {
        ctx.rank_conflict(0, format!("X (input 0) has rank {}; LinearClassifier takes [N, F] or [F]", dims.len()));
        classifier_outputs(ctx, None, None, label);
        return Ok(());
    };
    let intercepts = attr_len(ctx, "intercepts");
    let coefficients = attr_len(ctx, "coefficients");
    if let Some(f) = ctx.size_of(&f) {
        if intercepts > 0 && (intercepts as u64).checked_mul(f) != Some(coefficients as u64) {
            ctx.invalid(format!("{coefficients} coefficients for {intercepts} classes of {f} features"));
        }
    }
    let scores = match (intercepts, labels) {
        (0, _) => None,
        (1, 2) => Some(ctx.known(2)),
        (k, _) => Some(count_dim(ctx, k)),
    };
    classifier_outputs(ctx, Some(n), scores, label);
    Ok(())
}

/// `LinearRegressor`: `[N, targets]` float; `coefficients` holds `targets` rows.
pub(super) fn linear_regressor(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    let targets = ctx.attr_int("targets").unwrap_or(1);
    let t = Some(ElemType::Float);
    if targets < 1 {
        ctx.invalid(format!("targets is {targets}; it must be at least 1"));
        unknown_shape(ctx, 0, t);
        return Ok(());
    }
    let coefficients = attr_len(ctx, "coefficients") as u64;
    if !coefficients.is_multiple_of(targets as u64) {
        ctx.invalid(format!("{coefficients} coefficients do not split into {targets} targets"));
    }
    let intercepts = attr_len(ctx, "intercepts") as i64;
    if intercepts > 0 && intercepts != targets {
        ctx.invalid(format!("{intercepts} intercepts for {targets} targets; give none or one per target"));
    }
    let width = ctx.known(targets as u64);
    regression_output(ctx, &dims, width);
    Ok(())
}

/// States a regressor's output: `[N, width]` for `[N, F]`; for a vector
/// input the runtimes disagree on the leading axes, so only the last is stated.
fn regression_output(ctx: &mut OpCtx, dims: &[DimTerm], width: DimTerm) {
    let t = Some(ElemType::Float);
    match dims {
        [n, _] => set_tensor(ctx, 0, vec![n.clone(), width], t),
        [_] => set_trailing(ctx, 0, vec![width], t),
        _ => {
            ctx.rank_conflict(0, format!("X (input 0) has rank {}; {} takes [N, F]", dims.len(), ctx.op()));
            unknown_shape(ctx, 0, t);
        }
    }
}

/// `SVMRegressor`: `[N, 1]` float.
pub(super) fn svm_regressor(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    check_choice(ctx, "kernel_type", "LINEAR", &KERNELS);
    let supports = ctx.attr_int("n_supports").unwrap_or(0);
    if supports < 0 {
        ctx.invalid(format!("n_supports is {supports}; it must not be negative"));
    } else if supports > 0 && !(attr_len(ctx, "support_vectors") as u64).is_multiple_of(supports as u64) {
        ctx.invalid(format!("support_vectors does not split into {supports} vectors"));
    }
    let one = ctx.known(1);
    regression_output(ctx, &dims, one);
    Ok(())
}

/// The number of scores an `SVMClassifier` writes per example, where the
/// implementations agree: one per class for a linear model or with
/// probabilities, one per pair of classes otherwise (two for two classes).
fn svm_score_count(ctx: &mut OpCtx, classes: usize) -> Option<usize> {
    let per_class = ctx.attr_ints("vectors_per_class").unwrap_or_default();
    if per_class.iter().any(|&v| v < 0) {
        ctx.invalid(format!("vectors_per_class {per_class:?} has a negative count"));
        return None;
    }
    let vectors: i64 = per_class.iter().sum();
    if vectors == 0 {
        return Some(classes);
    }
    if per_class.len() != classes {
        ctx.invalid(format!("vectors_per_class has {} entries for {classes} classes", per_class.len()));
        return None;
    }
    let pairs = classes.checked_mul(classes.saturating_sub(1))? / 2;
    let probabilities = attr_len(ctx, "prob_a") > 0;
    match (classes, probabilities) {
        (0 | 1, _) => None,
        (_, true) => Some(classes),
        (2, false) => Some(2),
        (_, false) => Some(pairs),
    }
}

/// `SVMClassifier`: labels `[N]`, scores `[N, E]` (see [`svm_score_count`]).
pub(super) fn svm_classifier(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    check_choice(ctx, "kernel_type", "LINEAR", &KERNELS);
    let label = label_type(ctx, "classlabels_ints", "classlabels_strings");
    if attr_len(ctx, "prob_a") != attr_len(ctx, "prob_b") {
        ctx.invalid("prob_a and prob_b must have the same length");
    }
    let classes = attr_len(ctx, "classlabels_ints").max(attr_len(ctx, "classlabels_strings")).max(1);
    let scores = svm_score_count(ctx, classes).map(|e| count_dim(ctx, e));
    let batch = batch_and_features(ctx, &dims, false).map(|(n, _)| n);
    classifier_outputs(ctx, batch, scores, label);
    Ok(())
}

/// Reports `invalid-attribute` when the given `nodes_*` attributes differ in length.
fn check_node_lists(ctx: &mut OpCtx) {
    let names = [
        "nodes_nodeids",
        "nodes_treeids",
        "nodes_featureids",
        "nodes_modes",
        "nodes_truenodeids",
        "nodes_falsenodeids",
    ];
    let lengths: Vec<(&str, usize)> =
        names.iter().filter(|n| ctx.attr(n).is_some()).map(|n| (*n, attr_len(ctx, n))).collect();
    if let Some((first, n)) = lengths.first().copied() {
        if let Some((other, m)) = lengths.iter().find(|(_, m)| *m != n) {
            ctx.invalid(format!("{first} has {n} entries but {other} {m}; the nodes_* lists must match"));
        }
    }
}

/// Reports `invalid-attribute` when an id of `ids` is not below `count`.
fn check_ids_below(ctx: &mut OpCtx, ids: &str, count: usize, what: &str) {
    let Some(v) = ctx.attr_ints(ids) else { return };
    if let Some(bad) = v.iter().find(|&&i| i < 0 || i as u64 >= count as u64) {
        ctx.invalid(format!("{ids} holds {bad}, outside the {count} {what}"));
    }
}

/// `TreeEnsembleClassifier`: labels `[N]`, scores `[N, E]` with one score
/// per class label (unknown for a single label: the runtimes differ).
pub(super) fn tree_ensemble_classifier(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    check_node_lists(ctx);
    let label = label_type(ctx, "classlabels_int64s", "classlabels_strings");
    let classes = attr_len(ctx, "classlabels_int64s").max(attr_len(ctx, "classlabels_strings"));
    if classes == 0 {
        ctx.invalid("TreeEnsembleClassifier needs classlabels_int64s or classlabels_strings");
    } else {
        check_ids_below(ctx, "class_ids", classes, "classes");
    }
    let scores = (classes >= 2).then(|| count_dim(ctx, classes));
    let batch = batch_and_features(ctx, &dims, false).map(|(n, _)| n);
    classifier_outputs(ctx, batch, scores, label);
    Ok(())
}

/// `TreeEnsembleRegressor`: `[N, n_targets]` float.
pub(super) fn tree_ensemble_regressor(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    check_dtype(ctx, 0, &NUMERIC);
    check_choice(ctx, "post_transform", "NONE", &POST_TRANSFORMS);
    check_choice(ctx, "aggregate_function", "SUM", &["AVERAGE", "SUM", "MIN", "MAX"]);
    check_node_lists(ctx);
    let width = match ctx.attr_int("n_targets") {
        Some(n) if n >= 1 => {
            check_ids_below(ctx, "target_ids", n as usize, "targets");
            ctx.known(n as u64)
        }
        Some(n) => {
            ctx.invalid(format!("n_targets is {n}; it must be at least 1"));
            ctx.unknown_dim()
        }
        None => ctx.unknown_dim(),
    };
    match dims.as_slice() {
        [n, _] => set_tensor(ctx, 0, vec![n.clone(), width], Some(ElemType::Float)),
        [_] => {
            let one = ctx.known(1);
            set_tensor(ctx, 0, vec![one, width], Some(ElemType::Float))
        }
        _ => regression_output(ctx, &dims, width),
    }
    Ok(())
}
