//! Operator rules: shape manipulation. Operators that compute shapes
//! (`Shape`, `Size`), rearrange or reinterpret a tensor's axes (`Reshape`,
//! `Flatten`, `Squeeze`, `Transpose`, ...), select or combine parts of
//! tensors (`Slice`, `Gather`, `Concat`, `Split`, ...), and build tensors
//! from shapes and scalars (`Expand`, `ConstantOfShape`, `Range`, ...).
//!
//! Besides shapes and element types, every rule computes its output's
//! elements when its inputs' elements are known and the result is small, so
//! integer tensors that compute shapes carry their elements as size terms
//! ([`Elem`]) and a symbolic `batch` survives `Shape → Gather → Concat →
//! Reshape`. This module holds the registration and the helpers the
//! submodules share: element selection, size arithmetic on dimensions.

mod fill;
mod layout;
mod slicing;

pub(super) use super::common::is_int_elem_type as is_int_type;
use super::OpTable;
use crate::constraint::Constraint;
use crate::rule::{ConstData, ConstValue, Elem, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm, SizeExpr};

/// The most elements a rule computes for one output.
pub(super) const MAX_ELEMS: usize = 1 << 20;

pub(crate) fn register(t: &mut OpTable) {
    layout::register(t);
    slicing::register(t);
    fill::register(t);
}

/// The number of elements of a shape; `None` on overflow.
pub(super) fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Row-major strides of a shape.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1].saturating_mul(shape[a + 1]);
    }
    s
}

/// The elements of `data` at the flat positions `idx`; `None` if one is out of range.
pub(super) fn take(data: &ConstData, idx: &[usize]) -> Option<ConstData> {
    fn pick<T: Clone>(v: &[T], idx: &[usize]) -> Option<Vec<T>> {
        idx.iter().map(|&i| v.get(i).cloned()).collect()
    }
    Some(match data {
        ConstData::Ints(v) => ConstData::Ints(pick(v, idx)?),
        ConstData::Floats(v) => ConstData::Floats(pick(v, idx)?),
        ConstData::Bools(v) => ConstData::Bools(pick(v, idx)?),
        ConstData::Strings(v) => ConstData::Strings(pick(v, idx)?),
    })
}

/// Builds a tensor of shape `out_shape` whose element at each multi-index is
/// the element of `data` at the flat position `src` gives for it. `None`
/// when the result is too large or `src` fails.
pub(super) fn build(
    data: &ConstData,
    out_shape: &[usize],
    mut src: impl FnMut(&[usize]) -> Option<usize>,
) -> Option<ConstData> {
    let n = numel(out_shape)?;
    if n > MAX_ELEMS {
        return None;
    }
    let mut positions = Vec::with_capacity(n);
    let mut pos = vec![0usize; out_shape.len()];
    for _ in 0..n {
        positions.push(src(&pos)?);
        for a in (0..pos.len()).rev() {
            pos[a] += 1;
            if pos[a] < out_shape[a] {
                break;
            }
            pos[a] = 0;
        }
    }
    take(data, &positions)
}

/// The elements of `v` selected by one list of indices per axis (the
/// cartesian product, row-major): the core of `Slice`, `Gather`, `Split`.
pub(super) fn select(v: &ConstValue, picks: &[Vec<usize>]) -> Option<ConstValue> {
    if picks.len() != v.shape.len() {
        return None;
    }
    let st = strides(&v.shape);
    let out_shape: Vec<usize> = picks.iter().map(Vec::len).collect();
    let data = build(&v.data, &out_shape, |pos| {
        pos.iter()
            .zip(picks)
            .zip(&st)
            .try_fold(0usize, |acc, ((&p, pick), &s)| acc.checked_add(pick.get(p)?.checked_mul(s)?))
    })?;
    Some(ConstValue { dtype: v.dtype, shape: out_shape, data })
}

/// The same elements under another shape (Reshape, Squeeze, Flatten, ...).
pub(super) fn reshaped(v: &ConstValue, shape: Vec<usize>) -> Option<ConstValue> {
    (numel(&shape)? == v.len()).then(|| ConstValue { dtype: v.dtype, shape, data: v.data.clone() })
}

/// Sets output `j`'s elements when there are at most [`MAX_ELEMS`] of them.
pub(super) fn set_small_value(ctx: &mut OpCtx, j: usize, v: ConstValue) {
    if v.len() <= MAX_ELEMS && numel(&v.shape) == Some(v.len()) {
        ctx.set_value(j, v);
    }
}

/// The sizes of `dims`, when all are known numbers.
pub(super) fn known_sizes(ctx: &mut OpCtx, dims: &[DimTerm]) -> Option<Vec<usize>> {
    dims.iter().map(|d| ctx.size_of(d).and_then(|n| usize::try_from(n).ok())).collect()
}

/// The size of `d` as an expression (a known number or over rigid symbols).
pub(super) fn expr_of(ctx: &mut OpCtx, d: &DimTerm) -> Option<SizeExpr> {
    ctx.elem_of_dim(d).as_expr()
}

/// The dimension of size `e` (an unknown dimension when it is negative).
pub(super) fn dim_of_expr(ctx: &mut OpCtx, e: SizeExpr) -> DimTerm {
    ctx.dim_of_elem(&Elem::from_expr(e))
}

/// The dimension whose size is the product of `dims`: computed when every
/// size is a known number or expression, otherwise a new dimension tied to
/// them by an element-count constraint.
pub(super) fn product_dim(ctx: &mut OpCtx, dims: &[DimTerm], operand: &str) -> DimTerm {
    let exprs: Option<Vec<SizeExpr>> = dims.iter().map(|d| expr_of(ctx, d)).collect();
    if let Some(exprs) = exprs {
        let product = exprs.iter().try_fold(SizeExpr::constant(1), |acc, e| acc.mul(e));
        return match product {
            Some(p) => dim_of_expr(ctx, p),
            None => ctx.unknown_dim(),
        };
    }
    let out = ctx.unknown_dim();
    let cause = ctx.cause(operand, "the output axis holds as many elements as the input axes it merges");
    ctx.constrain(Constraint::Numel(RowTerm::closed(dims.to_vec()), RowTerm::closed(vec![out.clone()]), cause));
    out
}

/// Every output is unknown (keeping any element type already set): for
/// invalid operands, and operands whose elements are not known.
pub(super) fn unknown_outputs(ctx: &mut OpCtx) -> Result<(), crate::rule::Defer> {
    for j in 0..ctx.output_count() {
        ctx.set_unknown(j);
    }
    Ok(())
}

/// `count` dimensions nothing determines.
pub(super) fn unknown_dims(ctx: &mut OpCtx, count: usize) -> Vec<DimTerm> {
    (0..count).map(|_| ctx.unknown_dim()).collect()
}

/// The length of a rank-1 input whose elements are not known (its only axis' size), bounded.
pub(super) fn vector_len(ctx: &mut OpCtx, i: usize) -> Option<usize> {
    if !ctx.has_input(i) {
        return None;
    }
    let dims = ctx.dims(i)?;
    match dims.as_slice() {
        [d] => ctx.size_of(d).and_then(|n| usize::try_from(n).ok()).filter(|&n| n <= 64),
        _ => None,
    }
}

/// Normalizes the axes in `axes` against `rank`, reporting out-of-range and
/// repeated ones; `None` when one is invalid.
pub(super) fn norm_axes(ctx: &mut OpCtx, axes: &[i64], rank: usize, what: &str) -> Option<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = ctx.axis(a, rank, what)?;
        if out.contains(&n) {
            ctx.invalid(format!("{what} lists axis {a} twice"));
            return None;
        }
        out.push(n);
    }
    Some(out)
}
