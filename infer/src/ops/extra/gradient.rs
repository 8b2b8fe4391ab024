//! The training-preview `Gradient`: its inputs are the values of the
//! tensors named by `xs` then `zs`, and output `i` is the gradient of `y`
//! with respect to `xs[i]` — shaped and typed like input `i`.

use crate::rule::{Defer, OpCtx};
use diamond_ir::ElemType;

/// `Gradient`: see the module documentation.
pub(super) fn gradient(ctx: &mut OpCtx) -> Result<(), Defer> {
    let xs = ctx.attr_strs("xs").unwrap_or_default();
    let zs = ctx.attr_strs("zs").unwrap_or_default();
    if xs.is_empty() || ctx.attr_str("y").is_none() {
        ctx.invalid("Gradient needs the attributes xs and y");
        return Ok(());
    }
    if ctx.input_count() != xs.len() + zs.len() {
        ctx.invalid(format!(
            "Gradient has {} inputs; it takes one per name of xs ({}) and zs ({})",
            ctx.input_count(),
            xs.len(),
            zs.len()
        ));
        return Ok(());
    }
    if ctx.output_count() > xs.len() {
        ctx.invalid(format!("Gradient has {} outputs but xs names {} tensors", ctx.output_count(), xs.len()));
        return Ok(());
    }
    for j in 0..ctx.output_count() {
        let t = ctx.dtype(j).filter(|t| matches!(t, ElemType::Float16 | ElemType::Float | ElemType::Double));
        if let Some(u) = ctx.dtype(j).filter(|_| t.is_none()) {
            ctx.dtype_mismatch(format!("xs[{j}] (input {j}) is {u}; a gradient is float16, float or double"));
        }
        if let Some(row) = ctx.in_row(j) {
            ctx.set_row(j, row);
        }
        if let Some(t) = t {
            ctx.set_dtype(j, t);
        }
    }
    Ok(())
}
