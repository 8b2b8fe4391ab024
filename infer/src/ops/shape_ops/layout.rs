//! Rules for operators that compute a shape or reinterpret a tensor's axes:
//! `Shape`, `Size`, `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`,
//! `Transpose`, `Identity`, `DepthToSpace`, `SpaceToDepth`.

use super::{
    build, dim_of_expr, expr_of, known_sizes, norm_axes, product_dim, reshaped, set_small_value, strides, unknown_dims,
    unknown_outputs, vector_len,
};
use crate::constraint::Constraint;
use crate::ops::common::dtype_from;
use crate::ops::{OpTable, ONNX};
use crate::rule::{ConstValue, Defer, Elem, OpCtx};
use diamond_ir::term::{DimTerm, DimVar, RowTerm, SizeExpr};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Shape", 1, shape);
    t.add(ONNX, "Size", 1, size);
    t.add(ONNX, "Reshape", 1, reshape);
    t.add(ONNX, "Flatten", 1, flatten);
    t.add(ONNX, "Squeeze", 1, squeeze);
    t.add(ONNX, "Unsqueeze", 1, unsqueeze);
    t.add(ONNX, "Transpose", 1, transpose);
    t.add(ONNX, "Identity", 1, identity);
    t.add(ONNX, "DepthToSpace", 1, depth_to_space);
    t.add(ONNX, "SpaceToDepth", 1, space_to_depth);
}

/// Sets output 0 to input 0's elements under the output's shape, when both are known.
fn pass_value(ctx: &mut OpCtx, out_dims: &[DimTerm]) {
    let Some(v) = ctx.value(0) else { return };
    let Some(shape) = known_sizes(ctx, out_dims) else { return };
    if let Some(out) = reshaped(&v, shape) {
        set_small_value(ctx, 0, out);
    }
}

/// `Shape`: the input's dims (from `start` to `end` at opset 15) as size terms.
fn shape(ctx: &mut OpCtx) -> Result<(), Defer> {
    // int64 whatever the input's rank turns out to be
    ctx.set_dtype(0, ElemType::Int64);
    let dims = ctx.need_dims(0)?;
    let r = dims.len() as i64;
    let (mut start, mut end) = (0, r);
    if ctx.version() >= 15 {
        start = ctx.attr_int("start").unwrap_or(0);
        end = ctx.attr_int("end").unwrap_or(r);
    }
    let clamp = |x: i64| if x < 0 { x.saturating_add(r).max(0) } else { x.min(r) } as usize;
    let (s, e) = (clamp(start), clamp(end));
    let elems: Vec<Elem> = if s < e { dims[s..e].iter().map(|d| ctx.elem_of_dim(d)).collect() } else { Vec::new() };
    ctx.set_value(0, ConstValue::int_vector(elems));
    Ok(())
}

/// `Size`: an int64 scalar, the product of the input's dims.
fn size(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.set_dims(0, Vec::new());
    ctx.set_dtype(0, ElemType::Int64);
    let Some(dims) = ctx.dims(0) else { return Ok(()) };
    let exprs: Option<Vec<SizeExpr>> = dims.iter().map(|d| expr_of(ctx, d)).collect();
    let product = exprs.and_then(|es| es.iter().try_fold(SizeExpr::constant(1), |acc, e| acc.mul(e)));
    let elem = product.map_or(Elem::Unknown, Elem::from_expr);
    ctx.set_value(0, ConstValue::int_scalar(elem));
    Ok(())
}

/// The target shape of a `Reshape`: the `shape` attribute before opset 5, input 1 after.
fn reshape_target(ctx: &mut OpCtx) -> Option<Vec<Elem>> {
    if ctx.version() < 5 {
        return ctx.attr_ints("shape").map(|v| v.into_iter().map(Elem::Int).collect());
    }
    ctx.elems(1)
}

/// `Reshape`: `0` copies the input's dim (unless `allowzero`), `-1` is
/// whatever keeps the element count.
fn reshape(ctx: &mut OpCtx) -> Result<(), Defer> {
    let allowzero = ctx.version() >= 14 && ctx.attr_int("allowzero").unwrap_or(0) != 0;
    let Some(target) = reshape_target(ctx) else {
        if let Some(n) = vector_len(ctx, 1) {
            let dims = if n == 1 {
                match ctx.dims(0) {
                    Some(input) => vec![product_dim(ctx, &input, "input 0")],
                    None => unknown_dims(ctx, 1),
                }
            } else {
                unknown_dims(ctx, n)
            };
            ctx.set_dims(0, dims);
        } else {
            ctx.set_unknown(0);
        }
        dtype_from(ctx, 0, 0);
        return Ok(());
    };
    let copies = !allowzero && target.contains(&Elem::Int(0));
    let infers = target.contains(&Elem::Int(-1));
    let input = if copies || infers { Some(ctx.need_dims(0)?) } else { ctx.dims(0) };
    dtype_from(ctx, 0, 0);
    if let Err(message) = check_reshape_target(&target, allowzero, input.as_ref().map(Vec::len)) {
        ctx.invalid(message);
        return unknown_outputs(ctx);
    }
    let mut dims = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, e) in target.iter().enumerate() {
        let d = match e {
            Elem::Int(0) if !allowzero => {
                input.as_ref().and_then(|v| v.get(i).cloned()).unwrap_or_else(|| ctx.unknown_dim())
            }
            Elem::Int(-1) => {
                infer_at = Some(i);
                ctx.unknown_dim()
            }
            other => ctx.dim_of_elem(other),
        };
        dims.push(d);
    }
    let mut count_constraint = true;
    if let (Some(at), Some(input)) = (infer_at, input.as_ref()) {
        match inferred_dim(ctx, input, &dims, at) {
            Inferred::Dim(d) => dims[at] = d,
            Inferred::Invalid(message) => {
                ctx.invalid(message);
                return unknown_outputs(ctx);
            }
            Inferred::Assumed(d, message, assumes) => {
                // The element count holds only under the stated divisibility.
                dims[at] = d;
                count_constraint = false;
                ctx.report_assuming(crate::diagnostic::Code::Divisibility, "input 1", message, vec![assumes]);
            }
            Inferred::Unsolvable => count_constraint = false,
            Inferred::Later => {}
        }
    }
    if count_constraint && !has_zero(ctx, input.as_deref().unwrap_or(&[])) && !has_zero(ctx, &dims) {
        if let Some(in_row) = ctx.in_row(0) {
            let cause = ctx.cause("input 1", "a reshape keeps the number of elements");
            ctx.constrain(Constraint::Numel(in_row, RowTerm::closed(dims.clone()), cause));
        }
    }
    ctx.set_dims(0, dims.clone());
    pass_value(ctx, &dims);
    Ok(())
}

/// Checks a reshape target: at most one `-1`, nothing below `-1`, `0`s within the input's rank.
fn check_reshape_target(target: &[Elem], allowzero: bool, rank: Option<usize>) -> Result<(), String> {
    let minus_ones = target.iter().filter(|e| **e == Elem::Int(-1)).count();
    if minus_ones > 1 {
        return Err(format!("the target shape has {minus_ones} dims of -1; at most one may be inferred"));
    }
    if let Some(n) = target.iter().filter_map(Elem::as_int).find(|&n| n < -1) {
        return Err(format!("the target shape has the dim {n}; dims must be -1 or more"));
    }
    if allowzero && minus_ones == 1 && target.contains(&Elem::Int(0)) {
        return Err("with allowzero=1 the target shape cannot hold both 0 and -1".to_string());
    }
    if let Some(r) = rank.filter(|_| !allowzero) {
        if let Some(i) = target.iter().enumerate().skip(r).find(|(_, e)| **e == Elem::Int(0)).map(|(i, _)| i) {
            return Err(format!("the target shape copies dim {i} (a 0) but the input has rank {r}"));
        }
    }
    Ok(())
}

/// What can be said of a reshape's `-1` dim now.
enum Inferred {
    /// Its dimension.
    Dim(DimTerm),
    /// The element counts cannot match.
    Invalid(String),
    /// Symbolic sizes that divide only when a dynamic size is a multiple of
    /// a constant: its dimension, the `divisibility` warning, and its condition.
    Assumed(DimTerm, String, crate::diagnostic::Assumption),
    /// Symbolic sizes that do not divide: nothing is said.
    Unsolvable,
    /// Sizes not known yet: the element-count constraint will solve it.
    Later,
}

/// The size of `d` as an expression in which a dimension not known yet is a
/// placeholder symbol, so that it cancels out of a division.
fn expr_or_placeholder(ctx: &mut OpCtx, d: &DimTerm) -> Option<SizeExpr> {
    match ctx.resolve(d) {
        DimTerm::Var(v) => Some(placeholder(v)),
        other => expr_of(ctx, &other),
    }
}

/// The placeholder symbol standing for the unknown size of `v`.
fn placeholder(v: DimVar) -> SizeExpr {
    SizeExpr::symbol(&format!("{PLACEHOLDER}{}", v.0))
}

/// Marks placeholder symbols (no symbol a model states starts with it).
const PLACEHOLDER: char = '\u{1}';

/// The `-1` dim of a reshape at `at`: the input's element count divided by
/// the other target dims'. Sizes not known yet cancel when they appear on
/// both sides (`[n, 3, 4]` to `[n, -1]` gives 12, to `[-1, 12]` gives `n`).
fn inferred_dim(ctx: &mut OpCtx, input: &[DimTerm], dims: &[DimTerm], at: usize) -> Inferred {
    let others: Vec<DimTerm> = dims.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, d)| d.clone()).collect();
    let total: Option<Vec<SizeExpr>> = input.iter().map(|d| expr_or_placeholder(ctx, d)).collect();
    let rest: Option<Vec<SizeExpr>> = others.iter().map(|d| expr_or_placeholder(ctx, d)).collect();
    let (Some(total), Some(rest)) = (total, rest) else { return Inferred::Later };
    let product = |v: &[SizeExpr]| v.iter().try_fold(SizeExpr::constant(1), |acc, e| acc.mul(e));
    let (Some(total), Some(rest)) = (product(&total), product(&rest)) else { return Inferred::Unsolvable };
    let has_placeholder = |e: &SizeExpr| e.to_string().contains(PLACEHOLDER);
    let pending = has_placeholder(&total) || has_placeholder(&rest);
    match (total.as_constant(), rest.as_constant()) {
        (Some(t), Some(0)) => {
            if t == 0 {
                Inferred::Unsolvable
            } else {
                Inferred::Invalid(format!("cannot infer the -1 dim: {t} elements into a shape holding 0"))
            }
        }
        (Some(t), Some(r)) if t % r != 0 => {
            Inferred::Invalid(format!("cannot reshape {t} elements into a shape whose other dims hold {r}"))
        }
        _ => match total.div_exact(&rest) {
            Some(q) if !has_placeholder(&q) => Inferred::Dim(dim_of_expr(ctx, q)),
            Some(q) => {
                let var = input.iter().chain(&others).find_map(|d| match ctx.resolve(d) {
                    DimTerm::Var(v) if placeholder(v) == q => Some(v),
                    _ => None,
                });
                var.map_or(Inferred::Later, |v| Inferred::Dim(DimTerm::Var(v)))
            }
            None if pending => Inferred::Later,
            None => match divided_assuming(&total, &rest) {
                Some((quotient, dividend, divisor)) => {
                    let message = format!(
                        "{}: the -1 of the target shape is {total} / {rest} = {quotient}: the reshape holds only when \
                         {dividend} is divisible by {divisor}",
                        ctx.label()
                    );
                    let assumes = crate::diagnostic::Assumption::Divisible(dividend, divisor);
                    Inferred::Assumed(dim_of_expr(ctx, quotient), message, assumes)
                }
                None => Inferred::Unsolvable,
            },
        },
    }
}

/// `total / rest` where `rest = k·m` is one monomial that divides `total`
/// symbolically (`total = m·t`) and the constant `k` divides `t` only when a
/// dynamic size is a multiple of it: `[batch, seq, 64]` to `[-1, 32, 64]` is
/// `batch*seq*64 / 2048`, which is `⌊batch*seq / 32⌋` when `batch*seq` is a
/// multiple of 32. Returns the quotient, the dividend after cancelling
/// common factors (`batch*seq`) and the divisor left (32).
fn divided_assuming(total: &SizeExpr, rest: &SizeExpr) -> Option<(SizeExpr, SizeExpr, u64)> {
    let (symbols, k) = rest.monomial_parts()?;
    let k = u64::try_from(k).ok().filter(|&k| k > 1)?;
    let t = total.div_exact(&symbols)?;
    let common = gcd(t.coefficient_gcd(), k);
    let dividend = t.div_exact(&SizeExpr::constant(i64::try_from(common).ok()?))?;
    let divisor = k / common;
    if divisor <= 1 || dividend.as_constant().is_some() {
        return None;
    }
    Some((dividend.floor_div(divisor)?, dividend, divisor))
}

/// The greatest common divisor of `a` and `b`.
fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Whether one of `dims` is known to be 0.
fn has_zero(ctx: &mut OpCtx, dims: &[DimTerm]) -> bool {
    dims.iter().any(|d| ctx.size_of(d) == Some(0))
}

/// `Flatten`: `[prod(dims[..axis]), prod(dims[axis..])]`.
fn flatten(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let r = dims.len() as i64;
    let axis = ctx.attr_int("axis").unwrap_or(1);
    let lowest = if ctx.version() >= 11 { -r } else { 0 };
    if axis < lowest || axis > r {
        ctx.invalid(format!("axis {axis} is out of range for rank {r} (allowed {lowest}..={r})"));
        return unknown_outputs(ctx);
    }
    let a = if axis < 0 { axis + r } else { axis } as usize;
    let outer = product_dim(ctx, &dims[..a], "input 0");
    let inner = product_dim(ctx, &dims[a..], "input 0");
    let out = vec![outer, inner];
    ctx.set_dims(0, out.clone());
    pass_value(ctx, &out);
    Ok(())
}

/// The `axes` of `Squeeze`/`Unsqueeze`: an attribute before opset 13, input 1 from 13.
/// `Ok(None)` when not given; `Err(())` when given but not known.
fn axes_operand(ctx: &mut OpCtx) -> Result<Option<Vec<i64>>, ()> {
    if ctx.version() < 13 {
        return Ok(ctx.attr_ints("axes"));
    }
    if !ctx.has_input(1) {
        return Ok(None);
    }
    ctx.ints(1).map(Some).ok_or(())
}

/// `Squeeze`: removes the listed axes of size 1, or every axis of size 1.
fn squeeze(ctx: &mut OpCtx) -> Result<(), Defer> {
    // the type holds whatever the input's rank turns out to be
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let axes = match axes_operand(ctx) {
        Ok(a) => a,
        Err(()) => {
            dtype_from(ctx, 0, 0);
            if let Some(n) = vector_len(ctx, 1).filter(|&n| n <= dims.len()) {
                let out = squeeze_unknown_axes(ctx, &dims, n);
                ctx.set_dims(0, out);
            } else {
                ctx.set_unknown(0);
            }
            return Ok(());
        }
    };
    let sizes: Vec<Option<u64>> = dims.iter().map(|d| ctx.size_of(d)).collect();
    let keep: Vec<bool> = match axes {
        None => {
            if dims.iter().zip(&sizes).any(|(d, s)| s.is_none() && matches!(d, DimTerm::Var(_))) {
                return Err(Defer);
            }
            dtype_from(ctx, 0, 0);
            if sizes.iter().any(Option::is_none) {
                return unknown_outputs(ctx);
            }
            sizes.iter().map(|s| *s != Some(1)).collect()
        }
        Some(axes) => {
            dtype_from(ctx, 0, 0);
            let Some(axes) = norm_axes(ctx, &axes, dims.len(), "axes") else { return unknown_outputs(ctx) };
            if let Some(&a) = axes.iter().find(|&&a| sizes[a].is_some_and(|n| n != 1)) {
                ctx.invalid(format!("axis {a} has size {} and cannot be squeezed", sizes[a].unwrap_or(0)));
                return unknown_outputs(ctx);
            }
            (0..dims.len()).map(|a| !axes.contains(&a)).collect()
        }
    };
    let out: Vec<DimTerm> = dims.into_iter().zip(keep).filter(|(_, k)| *k).map(|(d, _)| d).collect();
    ctx.set_dims(0, out.clone());
    pass_value(ctx, &out);
    Ok(())
}

/// The result of squeezing `n` axes not known: exact when exactly `n`
/// axes have size 1 (only they can be squeezed), otherwise unknown dims.
fn squeeze_unknown_axes(ctx: &mut OpCtx, dims: &[DimTerm], n: usize) -> Vec<DimTerm> {
    if let Some(sizes) = known_sizes(ctx, dims) {
        if sizes.iter().filter(|&&s| s == 1).count() == n {
            return dims.iter().zip(&sizes).filter(|(_, &s)| s != 1).map(|(d, _)| d.clone()).collect();
        }
    }
    unknown_dims(ctx, dims.len() - n)
}

/// `Unsqueeze`: inserts axes of size 1 at the listed output positions.
fn unsqueeze(ctx: &mut OpCtx) -> Result<(), Defer> {
    // The type is the input's whether or not its rank is ever known.
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let axes = match axes_operand(ctx) {
        Ok(Some(a)) => a,
        Ok(None) => {
            ctx.invalid("Unsqueeze needs axes");
            return unknown_outputs(ctx);
        }
        Err(()) => {
            if let Some(n) = vector_len(ctx, 1) {
                let out = unknown_dims(ctx, dims.len() + n);
                ctx.set_dims(0, out);
            } else {
                ctx.set_unknown(0);
            }
            return Ok(());
        }
    };
    let rank = dims.len() + axes.len();
    let Some(axes) = norm_axes(ctx, &axes, rank, "axes") else { return unknown_outputs(ctx) };
    let mut rest = dims.into_iter();
    let out: Vec<DimTerm> = (0..rank)
        .map(|a| if axes.contains(&a) { Some(ctx.known(1)) } else { rest.next() })
        .collect::<Option<_>>()
        .unwrap_or_default();
    ctx.set_dims(0, out.clone());
    pass_value(ctx, &out);
    Ok(())
}

/// `Transpose`: permutes the axes by `perm` (reversed by default).
fn transpose(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let r = dims.len();
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        None => (0..r).rev().collect(),
        Some(p) => {
            let mut seen = vec![false; r];
            let ok = p.len() == r
                && p.iter().all(|&a| {
                    usize::try_from(a).ok().filter(|&a| a < r).is_some_and(|a| !std::mem::replace(&mut seen[a], true))
                });
            if !ok {
                ctx.invalid(format!("perm {p:?} is not a permutation of the {r} axes"));
                return unknown_outputs(ctx);
            }
            p.iter().map(|&a| a as usize).collect()
        }
    };
    let out: Vec<DimTerm> = perm.iter().map(|&a| dims[a].clone()).collect();
    ctx.set_dims(0, out);
    if let Some(v) = ctx.value(0) {
        let st = strides(&v.shape);
        let shape: Vec<usize> = perm.iter().filter_map(|&a| v.shape.get(a).copied()).collect();
        let data = build(&v.data, &shape, |pos| {
            pos.iter().zip(&perm).try_fold(0usize, |acc, (&p, &a)| acc.checked_add(p.checked_mul(*st.get(a)?)?))
        });
        if let Some(data) = data.filter(|_| shape.len() == r) {
            set_small_value(ctx, 0, ConstValue { dtype: v.dtype, shape, data });
        }
    }
    Ok(())
}

/// `Identity`: the output is the input (tensor, sequence or optional).
fn identity(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.pass_through(0, 0);
    Ok(())
}

/// The `blocksize` attribute, at least 1.
fn blocksize(ctx: &mut OpCtx) -> Option<u64> {
    match ctx.attr_int("blocksize") {
        Some(b) if b >= 1 => Some(b as u64),
        Some(b) => {
            ctx.invalid(format!("blocksize {b} must be at least 1"));
            None
        }
        None => {
            ctx.invalid("blocksize is required");
            None
        }
    }
}

/// `DepthToSpace`: `[N, C, H, W]` → `[N, C/b², H·b, W·b]`.
fn depth_to_space(ctx: &mut OpCtx) -> Result<(), Defer> {
    space_depth(ctx, true)
}

/// `SpaceToDepth`: `[N, C, H, W]` → `[N, C·b², H/b, W/b]`.
fn space_to_depth(ctx: &mut OpCtx) -> Result<(), Defer> {
    space_depth(ctx, false)
}

/// Shared rule of `DepthToSpace` (`to_space`) and `SpaceToDepth`.
fn space_depth(ctx: &mut OpCtx, to_space: bool) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let Some(b) = blocksize(ctx) else { return unknown_outputs(ctx) };
    if dims.len() != 4 {
        ctx.rank_conflict(0, format!("the input must have rank 4, not {}", dims.len()));
        return unknown_outputs(ctx);
    }
    let bb = SizeExpr::constant(b as i64);
    let b2 = SizeExpr::constant((b * b) as i64);
    let scale = |ctx: &mut OpCtx, d: &DimTerm, grow: bool, by: &SizeExpr| -> Option<DimTerm> {
        let e = expr_of(ctx, d)?;
        let r = if grow { e.mul(by)? } else { e.div_exact(by)? };
        Some(dim_of_expr(ctx, r))
    };
    let mut out = vec![dims[0].clone()];
    let c = scale(ctx, &dims[1], !to_space, &b2);
    if c.is_none() && to_space && expr_of(ctx, &dims[1]).is_some_and(|e| e.as_constant().is_some()) {
        ctx.invalid(format!("the channel count is not divisible by blocksize² = {}", b * b));
        return unknown_outputs(ctx);
    }
    out.push(c.unwrap_or_else(|| ctx.unknown_dim()));
    for d in &dims[2..] {
        let s = scale(ctx, d, to_space, &bb);
        if s.is_none() && !to_space && expr_of(ctx, d).is_some_and(|e| e.as_constant().is_some()) {
            ctx.invalid(format!("a spatial size is not divisible by blocksize {b}"));
            return unknown_outputs(ctx);
        }
        out.push(s.unwrap_or_else(|| ctx.unknown_dim()));
    }
    ctx.set_dims(0, out);
    Ok(())
}
