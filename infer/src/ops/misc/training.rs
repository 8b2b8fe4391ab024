//! The `ai.onnx.preview.training` optimizers `Adagrad`, `Adam` and
//! `Momentum`: inputs are `R`, `T`, then `n` tensors of each group (`X`,
//! `G`, and the optimizer's state: `H` for Adagrad, `V` for Momentum, `V` and
//! `H` for Adam); outputs are the new `X` and the new state, each shaped
//! and typed like the tensor it replaces.

use super::shaped_like;
use crate::rule::{Defer, OpCtx};

/// The number of input groups after `R` and `T`: `X`, `G` and the state tensors.
fn input_groups(op: &str) -> usize {
    match op {
        "Adam" => 4,
        _ => 3,
    }
}

/// The optimizer rule: output `j` of group `g` (new `X`, then new state)
/// is shaped like the `j`-th tensor of the matching input group.
pub(super) fn optimizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    let groups = input_groups(ctx.op());
    let given = ctx.input_count().saturating_sub(2);
    if given == 0 || !given.is_multiple_of(groups) {
        ctx.invalid(format!(
            "{} takes R, T and {groups} groups of equally many tensors; it has {} inputs",
            ctx.op(),
            ctx.input_count()
        ));
        return Ok(());
    }
    let n = given / groups;
    for j in 0..ctx.output_count() {
        let (group, i) = (j / n, j % n);
        let input_group = if group == 0 { 0 } else { group + 1 };
        if input_group >= groups {
            continue;
        }
        shaped_like(ctx, j, 2 + input_group * n + i, None);
    }
    Ok(())
}
