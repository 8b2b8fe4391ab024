//! The losses `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss`:
//! scores `[N, C, d1, ..., dk]`, targets `[N, d1, ..., dk]`, optional
//! weights `[C]`. The loss is per element (`reduction = "none"`) or a
//! scalar (`mean`, the default, or `sum`); `SoftmaxCrossEntropyLoss` may also
//! return the log-probabilities, shaped like the scores.

use super::{set_tensor, unknown_shape};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm};

/// The loss's dimensions for scores `dims` (targets and weights constrained
/// to match), or `None` (reported) for a bad rank or reduction.
fn loss_dims(ctx: &mut OpCtx, dims: &[DimTerm]) -> Option<Vec<DimTerm>> {
    let reduction = ctx.attr_str("reduction").unwrap_or_else(|| "mean".into());
    if !matches!(reduction.as_str(), "none" | "mean" | "sum") {
        ctx.invalid(format!("reduction '{reduction}' is not one of none, mean, sum"));
        return None;
    }
    let [n, c, rest @ ..] = dims else {
        ctx.rank_conflict(
            0,
            format!("the scores (input 0) have rank {}; at least 2 ([N, C, ...]) is needed", dims.len()),
        );
        return None;
    };
    let target: Vec<DimTerm> = std::iter::once(n.clone()).chain(rest.iter().cloned()).collect();
    if let Some(row) = ctx.in_row(1) {
        ctx.eq_rows(row, RowTerm::closed(target.clone()), "input 1", "the targets are shaped [N, d1, ..., dk]");
    }
    if let Some(row) = ctx.in_row(2).filter(|_| ctx.has_input(2)) {
        ctx.eq_rows(row, RowTerm::closed(vec![c.clone()]), "input 2", "the weights are shaped [C]");
    }
    Some(if reduction == "none" { target } else { Vec::new() })
}

/// `NegativeLogLikelihoodLoss`.
pub(super) fn nll_loss(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    match loss_dims(ctx, &dims) {
        Some(out) => set_tensor(ctx, 0, out, t),
        None => unknown_shape(ctx, 0, t),
    }
    Ok(())
}

/// `SoftmaxCrossEntropyLoss`: the loss, and optionally the log-probabilities.
pub(super) fn softmax_cross_entropy(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    match loss_dims(ctx, &dims) {
        Some(out) => set_tensor(ctx, 0, out, t),
        None => unknown_shape(ctx, 0, t),
    }
    if ctx.has_output(1) {
        set_tensor(ctx, 1, dims, t);
    }
    Ok(())
}
