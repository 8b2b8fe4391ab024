//! `If`: when the condition's value is known only the taken branch is
//! lowered and gives the outputs (the other may not even be valid for these
//! inputs: function expansions branch on rank); otherwise both branches are
//! lowered and each output is their join.

use super::facts::{join_facts, Tops};
use crate::rule::{Defer, Facts, OpCtx};
use diamond_ir::ElemType;

/// `If` (every version).
pub(crate) fn if_rule(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(t) = ctx.dtype(0) {
        if t != ElemType::Bool {
            ctx.dtype_mismatch(format!("the condition is {t}; it must be bool"));
        }
    }
    let (Some(then_g), Some(else_g)) = (ctx.attr_graph("then_branch"), ctx.attr_graph("else_branch")) else {
        ctx.invalid("then_branch and else_branch must both be graphs");
        return Ok(());
    };
    match known_condition(ctx) {
        Some(taken) => {
            let (attr, g) = if taken { ("then_branch", then_g) } else { ("else_branch", else_g) };
            let outs = ctx.lower_subgraph(attr, g, Vec::new());
            check_arity(ctx, attr, outs.len());
            for (j, f) in outs.into_iter().enumerate().take(ctx.output_count()) {
                ctx.set_facts(j, f);
            }
        }
        None => {
            let then_outs = ctx.lower_subgraph("then_branch", then_g, Vec::new());
            let else_outs = ctx.lower_subgraph("else_branch", else_g, Vec::new());
            check_arity(ctx, "then_branch", then_outs.len());
            check_arity(ctx, "else_branch", else_outs.len());
            for (j, (a, b)) in then_outs.iter().zip(&else_outs).enumerate().take(ctx.output_count()) {
                check_same_dtype(ctx, j, a, b);
                let mut tops = Tops::default();
                let f = join_facts(ctx, &mut tops, a, b);
                ctx.set_facts(j, f);
            }
        }
    }
    Ok(())
}

/// The condition's value, when known (a single element).
fn known_condition(ctx: &mut OpCtx) -> Option<bool> {
    match ctx.ints(0)?.as_slice() {
        [c] => Some(*c != 0),
        _ => None,
    }
}

/// Reports a branch whose output count differs from the node's.
fn check_arity(ctx: &mut OpCtx, attr: &str, n: usize) {
    if n != ctx.output_count() {
        let m = ctx.output_count();
        ctx.invalid(format!("{attr} has {n} outputs but the node has {m}"));
    }
}

/// Reports branches whose `j`-th outputs have different element types.
fn check_same_dtype(ctx: &mut OpCtx, j: usize, a: &Facts, b: &Facts) {
    if let (Some(x), Some(y)) = (a.dtype, b.dtype) {
        if x != y && a.kind == b.kind {
            ctx.dtype_mismatch(format!(
                "output {j} is {x} in then_branch but {y} in else_branch; both branches must agree"
            ));
        }
    }
}
