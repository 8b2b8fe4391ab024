//! Matrix products: `MatMul` (NumPy `matmul`: 1-D operands promoted and the
//! promoted axis dropped, batch axes broadcast), its quantized forms
//! `MatMulInteger` and `QLinearMatMul`, `Gemm` (2-D, optional transposes, `C`
//! broadcast to the output) and `Det` (batched square matrices).

use super::{broadcast_prefixes, row_then, set_tensor, unknown_shape};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;

/// Input `i` split for a matrix product: its batch prefix, the second-last
/// axis (`None` for a vector) and the last axis. Works on an open row whose
/// trailing flank holds the two matrix axes; defers while the rank is
/// unknown and could be 1. `None` (reported) for a scalar.
fn matrix_parts(ctx: &mut OpCtx, i: usize) -> Result<Option<(RowTerm, Option<DimTerm>, DimTerm)>, Defer> {
    let row = ctx.row(i).ok_or(Defer)?;
    if row.var.is_some() {
        let [prefix @ .., m, k] = row.trailing.as_slice() else { return Err(Defer) };
        let batch = RowTerm { leading: row.leading.clone(), var: row.var, trailing: prefix.to_vec() };
        return Ok(Some((batch, Some(m.clone()), k.clone())));
    }
    let dims: Vec<DimTerm> = row.leading.into_iter().chain(row.trailing).collect();
    Ok(match dims.as_slice() {
        [k] => Some((RowTerm::closed(Vec::new()), None, k.clone())),
        [batch @ .., m, k] => Some((RowTerm::closed(batch.to_vec()), Some(m.clone()), k.clone())),
        [] => None,
    })
}

/// The output row of `matmul(input a, input b)`, with the contraction axes
/// equated and the batch prefixes broadcast; `None` (reported) for a scalar operand.
fn matmul_row(ctx: &mut OpCtx, a: usize, b: usize) -> Result<Option<RowTerm>, Defer> {
    let pa = matrix_parts(ctx, a)?;
    let pb = matrix_parts(ctx, b)?;
    let Some((batch_a, m, ka)) = pa else { return Ok(scalar_operand(ctx, a)) };
    let Some((batch_b, kb_or_n, last)) = pb else { return Ok(scalar_operand(ctx, b)) };
    // For `b` the second-last axis is the contraction one; a vector `b` contracts its only axis.
    let rank_b = batch_b.leading.len() + if kb_or_n.is_some() { 2 } else { 1 };
    let (kb, n) = match kb_or_n {
        Some(k) => (k, Some(last)),
        None => (last, None),
    };
    let why = format!("the contraction axis must match input {a}'s last axis");
    ctx.eq_dims_at(ka, kb, &format!("input {b}"), rank_b.saturating_sub(2), why);
    let prefixes = vec![(format!("input {a}"), batch_a), (format!("input {b}"), batch_b)];
    let batch = broadcast_prefixes(ctx, prefixes, "batch axes broadcast to the output's");
    Ok(Some(row_then(batch, m.into_iter().chain(n).collect())))
}

/// Reports a rank-0 matrix operand.
fn scalar_operand(ctx: &mut OpCtx, i: usize) -> Option<RowTerm> {
    ctx.rank_conflict(i, format!("input {i} is a scalar; matrix product operands need rank at least 1"));
    None
}

/// States output 0 as the product of inputs `a` and `b` with element type `t`.
fn product(ctx: &mut OpCtx, a: usize, b: usize, t: Option<ElemType>) -> Result<(), Defer> {
    match matmul_row(ctx, a, b)? {
        Some(row) => {
            ctx.set_row(0, row);
            if let Some(t) = t {
                ctx.set_dtype(0, t);
            }
        }
        None => unknown_shape(ctx, 0, t),
    }
    Ok(())
}

/// `MatMul`: both operands of one type.
pub(super) fn matmul(ctx: &mut OpCtx) -> Result<(), Defer> {
    matrix_parts(ctx, 0)?;
    matrix_parts(ctx, 1)?;
    let t = ctx.same_dtype(&[0, 1]);
    product(ctx, 0, 1, t)
}

/// `MatMulInteger`: 8-bit operands, int32 result.
pub(super) fn matmul_integer(ctx: &mut OpCtx) -> Result<(), Defer> {
    product(ctx, 0, 1, Some(ElemType::Int32))
}

/// `QLinearMatMul`: `a` is input 0, `b` input 3; the result has the type of `y_zero_point` (input 7).
pub(super) fn qlinear_matmul(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = ctx.dtype(7);
    product(ctx, 0, 3, t)
}

/// `Gemm`: `A'` is `[M, K]`, `B'` is `[K, N]` after the optional
/// transposes, `C` (optional from opset 11) broadcasts to `[M, N]`.
pub(super) fn gemm(ctx: &mut OpCtx) -> Result<(), Defer> {
    let (m, k, n) = (ctx.fresh_dim(), ctx.fresh_dim(), ctx.fresh_dim());
    let trans_a = ctx.attr_int("transA").unwrap_or(0) != 0;
    let trans_b = ctx.attr_int("transB").unwrap_or(0) != 0;
    let a = if trans_a { vec![k.clone(), m.clone()] } else { vec![m.clone(), k.clone()] };
    let b = if trans_b { vec![n.clone(), k] } else { vec![k, n.clone()] };
    for (i, dims) in [(0, a), (1, b)] {
        if let Some(row) = ctx.in_row(i) {
            ctx.eq_rows(row, RowTerm::closed(dims), &format!("input {i}"), "a Gemm operand is a matrix sharing K");
        }
    }
    let out = vec![m, n];
    if ctx.has_input(2) {
        ctx.broadcasts_to(2, RowTerm::closed(out.clone()), "C broadcasts to the output [M, N]");
    }
    let t = ctx.same_dtype(&[0, 1, 2]);
    set_tensor(ctx, 0, out, t);
    Ok(())
}

/// `Det`: `[*, M, M]` to `[*]`.
pub(super) fn det(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = ctx.dtype(0);
    let [batch @ .., rows, cols] = dims.as_slice() else {
        ctx.rank_conflict(0, format!("Det needs an input of rank at least 2, got rank {}", dims.len()));
        unknown_shape(ctx, 0, t);
        return Ok(());
    };
    ctx.eq_dims(rows.clone(), cols.clone(), "input 0", "Det's matrices must be square");
    let out: Vec<DimTerm> = batch.to_vec();
    set_tensor(ctx, 0, out, t);
    Ok(())
}
