//! Assembling feature rows: `ArrayFeatureExtractor` (the given positions of
//! the last axis; a vector is one row) and `FeatureVectorizer` (`[N, C_i]`
//! inputs, each cut or zero-padded to its `inputdimensions` entry, side by
//! side as one float `[N, Σ]`).

use crate::error::Result;
use crate::ops::{one, NodeCtx, Outs};
use crate::tensor::{Data, Tensor};

/// `ArrayFeatureExtractor`.
pub(super) fn array_feature_extractor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let last = *x.shape.last().ok_or_else(|| ctx.err("X must have rank ≥ 1"))?;
    let iv = ind.to_i64s().filter(|_| !ind.is_float()).ok_or_else(|| ctx.err("indices must be integers"))?;
    let picks: Vec<usize> = iv
        .iter()
        .map(|&i| {
            usize::try_from(i).ok().filter(|&i| i < last).ok_or_else(|| ctx.err(format!("index {i} is out of range")))
        })
        .collect::<Result<_>>()?;
    let rows = x.len() / last.max(1);
    let idx: Vec<usize> = (0..rows).flat_map(|r| picks.iter().map(move |&p| r * last + p)).collect();
    let mut shape = if x.rank() == 1 { vec![1] } else { x.shape[..x.rank() - 1].to_vec() };
    shape.push(picks.len());
    one(Tensor { shape, data: x.data.take(&idx) })
}

/// `FeatureVectorizer`.
pub(super) fn feature_vectorizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let widths = ctx.attr_ints("inputdimensions").unwrap_or_default();
    let inputs: Vec<super::Rows> = (0..ctx.n_inputs()).map(|i| super::rows(ctx, i)).collect::<Result<_>>()?;
    if widths.len() != inputs.len() {
        return Err(ctx.err(format!("inputdimensions has {} entries for {} inputs", widths.len(), inputs.len())));
    }
    let widths: Vec<usize> = widths
        .iter()
        .map(|&w| usize::try_from(w).map_err(|_| ctx.err(format!("inputdimensions holds {w}"))))
        .collect::<Result<_>>()?;
    let n = inputs.first().map_or(1, |r| r.n);
    if let Some(bad) = inputs.iter().position(|r| r.n != n) {
        return Err(ctx.err(format!("input {bad} has {} rows, input 0 {n}", inputs[bad].n)));
    }
    let total: usize = widths.iter().sum();
    let mut out = vec![0.0f32; n * total];
    for r in 0..n {
        let mut at = r * total;
        for (input, &w) in inputs.iter().zip(&widths) {
            for (o, &v) in out[at..at + w].iter_mut().zip(input.row(r)) {
                *o = v as f32;
            }
            at += w;
        }
    }
    one(Tensor { shape: vec![n, total], data: Data::F32(out) })
}
