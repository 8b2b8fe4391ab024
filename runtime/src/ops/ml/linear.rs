//! Linear models: `LinearClassifier` and `LinearRegressor`, both `x · Wᵀ + b`
//! with `W` the `coefficients` as rows of `F` values, one row per class or
//! target. A classifier with one row and two labels scores `[1 - s, s]` and
//! picks the second label when `s > 0`, as onnxruntime does.

use super::{finish_scores, floats, score_tensor, two, Labels, Pick, Rows, Second, Transform};
use crate::error::Result;
use crate::ops::Outs;
use crate::ops::{one, NodeCtx};

/// Every row's scores `x · W_kᵀ + b_k` for the `k` rows of `w`.
fn scores(ctx: &NodeCtx<'_>, rows: &Rows, w: &[f64], b: &[f64], k: usize) -> Result<Vec<Vec<f64>>> {
    if w.len() != k * rows.f {
        return Err(ctx.err(format!("coefficients has {} values for {k} rows of {} features", w.len(), rows.f)));
    }
    if !b.is_empty() && b.len() != k {
        return Err(ctx.err(format!("intercepts has {} values for {k} rows", b.len())));
    }
    Ok((0..rows.n)
        .map(|r| {
            let x = rows.row(r);
            (0..k)
                .map(|j| {
                    let dot: f64 = w[j * rows.f..(j + 1) * rows.f].iter().zip(x).map(|(a, b)| a * b).sum();
                    dot + b.get(j).copied().unwrap_or(0.0)
                })
                .collect()
        })
        .collect())
}

/// `LinearClassifier`: labels `[N]`, scores `[N, classes]`.
pub(super) fn classifier(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let labels = Labels::read(ctx, "classlabels_ints")?;
    let transform = Transform::read(ctx)?;
    let w = floats(ctx, "coefficients")?.ok_or_else(|| ctx.err("coefficients are required"))?;
    let b = floats(ctx, "intercepts")?.unwrap_or_default();
    let rows = super::rows(ctx, 0)?;
    let k = if b.is_empty() { w.len() / rows.f.max(1) } else { b.len() };
    let all = scores(ctx, &rows, &w, &b, k)?;
    let pair = k == 1 && labels.len() == 2;
    let second = if pair { Second::Complement } else { Second::Alone };
    let mut picks = Vec::with_capacity(rows.n);
    let mut out = Vec::with_capacity(rows.n);
    for s in &all {
        picks.push(match (k, pair) {
            (1, true) => Pick::Index(usize::from(s[0] > 0.0)),
            (1, false) => Pick::Value(i64::from(s[0] > 0.0)),
            _ => {
                let best = (1..k).fold(0, |m, j| if (s[j] as f32) > (s[m] as f32) { j } else { m });
                Pick::Index(best)
            }
        });
        out.push(finish_scores(s, transform, second));
    }
    let width = if pair { 2 } else { k };
    two(labels.tensor(&picks), score_tensor(&out, width))
}

/// `LinearRegressor`: `[N, targets]` float.
pub(super) fn regressor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let transform = Transform::read(ctx)?;
    let targets = usize::try_from(ctx.attr_i("targets", 1))
        .ok()
        .filter(|&t| t >= 1)
        .ok_or_else(|| ctx.err("targets must be at least 1"))?;
    let w = floats(ctx, "coefficients")?.ok_or_else(|| ctx.err("coefficients are required"))?;
    let b = floats(ctx, "intercepts")?.unwrap_or_default();
    let rows = super::rows(ctx, 0)?;
    let all = scores(ctx, &rows, &w, &b, targets)?;
    let out: Vec<Vec<f32>> = all.iter().map(|s| finish_scores(s, transform, Second::Alone)).collect();
    one(score_tensor(&out, targets))
}
