//! Helpers several operator families share: size arithmetic on dimensions
//! (scaling, exact division, expressions over rigid symbols), stating an
//! output's shape and type in one call, and element-type classes.

use crate::rule::{Elem, OpCtx};
use diamond_ir::term::{DimTerm, SizeExpr};
use diamond_ir::ElemType;

/// The size of `d` as an expression over rigid symbols, when it is not an unknown.
pub(crate) fn size_expr(ctx: &mut OpCtx, d: &DimTerm) -> Option<SizeExpr> {
    ctx.elem_of_dim(d).as_expr()
}

/// The dimension of size `e`; `None` for a negative constant.
pub(crate) fn expr_dim(ctx: &mut OpCtx, e: SizeExpr) -> Option<DimTerm> {
    match e.as_constant() {
        Some(n) if n >= 0 => Some(ctx.known(n as u64)),
        Some(_) => None,
        None => Some(ctx.dim_of_elem(&Elem::Expr(e))),
    }
}

/// `a * k` for a constant `k`, as a dimension (an unknown when `a` is).
pub(crate) fn scaled_dim(ctx: &mut OpCtx, a: &DimTerm, k: i64) -> DimTerm {
    if k == 1 {
        return ctx.resolve(a);
    }
    match size_expr(ctx, a).and_then(|e| e.mul(&SizeExpr::constant(k))).and_then(|e| expr_dim(ctx, e)) {
        Some(d) => d,
        None => ctx.unknown_dim(),
    }
}

/// `a / k` for a constant `k` when it divides exactly (`None` otherwise).
pub(crate) fn divided_dim(ctx: &mut OpCtx, a: &DimTerm, k: i64) -> Option<DimTerm> {
    if k == 1 {
        return Some(ctx.resolve(a));
    }
    size_expr(ctx, a).and_then(|e| e.div_exact(&SizeExpr::constant(k))).and_then(|e| expr_dim(ctx, e))
}

/// Output `j` has input `i`'s shape.
pub(crate) fn same_shape(ctx: &mut OpCtx, i: usize, j: usize) {
    if let Some(row) = ctx.in_row(i) {
        ctx.set_row(j, row);
    }
}

/// Output `j` has input `i`'s element type, when known.
pub(crate) fn dtype_from(ctx: &mut OpCtx, j: usize, i: usize) {
    if let Some(t) = ctx.dtype(i) {
        ctx.set_dtype(j, t);
    }
}

/// Output 0 has input 0's shape and element type (no elements computed).
pub(crate) fn pass_through(ctx: &mut OpCtx) -> Result<(), crate::rule::Defer> {
    same_shape(ctx, 0, 0);
    dtype_from(ctx, 0, 0);
    Ok(())
}

/// Output `j` has a rank nothing determines, and element type `t` when known.
pub(crate) fn unknown_shape(ctx: &mut OpCtx, j: usize, t: Option<ElemType>) {
    let row = ctx.unknown_row();
    ctx.set_row(j, row);
    if let Some(t) = t {
        ctx.set_dtype(j, t);
    }
}

/// Output `j` has dimensions `dims` and element type `t` when known.
pub(crate) fn set_tensor(ctx: &mut OpCtx, j: usize, dims: Vec<DimTerm>, t: Option<ElemType>) {
    ctx.set_dims(j, dims);
    if let Some(t) = t {
        ctx.set_dtype(j, t);
    }
}

/// Whether `t` is an integer type of at least 8 bits: the types whose
/// elements the lowering keeps as [`Elem`] size terms.
pub(crate) fn is_int_elem_type(t: ElemType) -> bool {
    matches!(
        t,
        ElemType::Int8
            | ElemType::Int16
            | ElemType::Int32
            | ElemType::Int64
            | ElemType::Uint8
            | ElemType::Uint16
            | ElemType::Uint32
            | ElemType::Uint64
    )
}

/// Whether input `i` holds more than `limit` float (or string) elements by
/// its known shape: value propagation keeps no float result that large
/// ([`crate::rule::MAX_FLOAT_ELEMS`]), so a rule skips decoding and
/// computing such an operand — a weight — rather than discard the result.
pub(crate) fn large_float_operand(ctx: &mut OpCtx, i: usize, limit: u64) -> bool {
    let float = ctx.dtype(i).is_some_and(|t| !is_int_elem_type(t) && t != ElemType::Bool);
    if !float {
        return false;
    }
    let Some(dims) = ctx.dims(i) else { return false };
    let mut count: u64 = 1;
    for d in &dims {
        match size_expr(ctx, d).and_then(|e| e.as_constant()) {
            Some(n) => count = count.saturating_mul(n.max(0) as u64),
            None => return false,
        }
    }
    count > limit
}
