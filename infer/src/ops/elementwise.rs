//! Operator rules: element-wise operators — unary math and activations
//! (same shape and type as the input), binary arithmetic, comparison and
//! logic with NumPy broadcasting, and the variadic `Sum`/`Mean`/`Max`/`Min`.

use super::{Defer, OpTable, ONNX};
use crate::graph::OpCtx;
use diamond_ir::ElemType;

pub(crate) fn register(t: &mut OpTable) {
    t.add_all(
        ONNX,
        &["Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Sin", "Cos"],
        1,
        same_as_input,
    );
    t.add_all(ONNX, &["Add", "Sub", "Mul", "Div", "Pow"], 1, arithmetic);
    t.add_all(ONNX, &["Equal", "Less", "Greater"], 1, comparison);
}

/// Output 0 has input 0's shape and type.
pub(crate) fn same_as_input(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    if let Some(t) = ctx.dtype(0) {
        ctx.set_dtype(0, t);
    }
    super::fold::fold_into(ctx);
    Ok(())
}

/// Binary arithmetic: both inputs broadcast to the output, one type.
fn arithmetic(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.broadcast(&[0, 1], 0);
    let t = if ctx.op() == "Pow" { ctx.dtype(0) } else { ctx.same_dtype(&[0, 1]) };
    if let Some(t) = t {
        ctx.set_dtype(0, t);
    }
    super::fold::fold_into(ctx);
    Ok(())
}

/// Comparison: inputs broadcast, the output is bool.
fn comparison(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.broadcast(&[0, 1], 0);
    ctx.same_dtype(&[0, 1]);
    ctx.set_dtype(0, ElemType::Bool);
    super::fold::fold_into(ctx);
    Ok(())
}
