//! The `Reduce*` operators and `ArgMax`/`ArgMin`: the reduced axes are
//! removed (or kept as size 1 with `keepdims`), from an `axes` attribute
//! (early opsets) or input (`ReduceSum` from 13, the others from 18). Empty
//! or absent axes reduce everything, unless `noop_with_empty_axes` makes
//! the node an identity. Known elements are folded, so a `ReduceProd` of a
//! shape still yields an element count.

use super::{is_integer, set_tensor, unknown_shape};
use crate::rule::{ConstData, ConstValue, Defer, Elem, OpCtx};
use diamond_ir::term::{DimTerm, SizeExpr};
use diamond_ir::ElemType;

/// The most input elements a reduction folds.
const MAX_FOLD: usize = 1 << 20;

/// The most float elements a reduction's input may hold for its result to be computed.
const FLOAT_FOLD_INPUT: u64 = 1 << 16;

/// What the node says about the axes to reduce.
enum Axes {
    /// Every axis.
    All,
    /// The listed axes (possibly negative, not yet checked).
    Listed(Vec<i64>),
    /// Axes given by an input whose elements are not known; `count` when its length is.
    Unknown { count: Option<usize> },
    /// Empty axes with `noop_with_empty_axes`: the output is the input.
    Noop,
}

/// Whether this node's reduction takes its axes as an input.
fn axes_are_input(ctx: &OpCtx) -> bool {
    let since = if ctx.op() == "ReduceSum" { 13 } else { 18 };
    ctx.version() >= since
}

/// Reads the axes from the attribute or the input, as the node's version says.
fn read_axes(ctx: &mut OpCtx) -> Axes {
    let noop = ctx.attr_int("noop_with_empty_axes").unwrap_or(0) != 0;
    let empty = if noop { Axes::Noop } else { Axes::All };
    if !axes_are_input(ctx) {
        return match ctx.attr_ints("axes") {
            Some(v) if !v.is_empty() => Axes::Listed(v),
            _ => Axes::All,
        };
    }
    if !ctx.has_input(1) {
        return empty;
    }
    if let Some(v) = ctx.ints(1) {
        return if v.is_empty() { empty } else { Axes::Listed(v) };
    }
    let count = match ctx.dims(1).as_deref() {
        Some([d]) => ctx.size_of(d).map(|n| n as usize),
        Some([]) => Some(1),
        _ => None,
    };
    match count {
        Some(0) => empty,
        count => Axes::Unknown { count },
    }
}

/// Normalizes listed axes against `rank` into a mask of reduced axes;
/// reports out-of-range or repeated axes.
fn axis_mask(ctx: &mut OpCtx, axes: &[i64], rank: usize, what: &str) -> Option<Vec<bool>> {
    let mut mask = vec![false; rank];
    for &a in axes {
        let i = ctx.axis(a, rank, what)?;
        if mask[i] {
            ctx.invalid(format!("{what} lists axis {a} twice"));
            return None;
        }
        mask[i] = true;
    }
    Some(mask)
}

/// `Reduce*`: see the module documentation.
pub(super) fn reduce(ctx: &mut OpCtx) -> Result<(), Defer> {
    let axes = read_axes(ctx);
    if let Axes::Noop = axes {
        if let Some(f) = ctx.facts(0) {
            ctx.set_facts(0, f);
        }
        return Ok(());
    }
    // the type holds whatever the input's rank turns out to be
    crate::ops::common::dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let dtype = ctx.dtype(0);
    let keepdims = ctx.attr_int("keepdims").unwrap_or(1) != 0;
    let mask = match axes {
        Axes::All | Axes::Noop => vec![true; dims.len()],
        Axes::Listed(v) => match axis_mask(ctx, &v, dims.len(), "axes") {
            Some(m) => m,
            None => {
                unknown_shape(ctx, 0, dtype);
                return Ok(());
            }
        },
        Axes::Unknown { count } => {
            reduce_unknown_axes(ctx, &dims, count, keepdims, dtype);
            return Ok(());
        }
    };
    let out = reduced_dims(ctx, &dims, &mask, keepdims);
    set_tensor(ctx, 0, out, dtype);
    // Reducing a float weight (weight standardization's mean) computes
    // nothing a shape needs; the optimizer folds it on the executor.
    if crate::ops::common::large_float_operand(ctx, 0, FLOAT_FOLD_INPUT) {
        return Ok(());
    }
    if let Some(v) = ctx.value(0) {
        if let Some(folded) = fold_reduce(ctx.op(), &v, &mask, keepdims) {
            ctx.set_value(0, folded);
        }
    }
    Ok(())
}

/// The input's dimensions with the masked ones made 1 (`keepdims`) or removed.
fn reduced_dims(ctx: &OpCtx, dims: &[DimTerm], mask: &[bool], keepdims: bool) -> Vec<DimTerm> {
    let mut out = Vec::with_capacity(dims.len());
    for (d, &reduced) in dims.iter().zip(mask) {
        if !reduced {
            out.push(d.clone());
        } else if keepdims {
            out.push(ctx.known(1));
        }
    }
    out
}

/// Axes from an input with unknown elements: with `keepdims` the rank stays
/// and only unit axes are known; without it the rank is known when the
/// number of axes is.
fn reduce_unknown_axes(
    ctx: &mut OpCtx,
    dims: &[DimTerm],
    count: Option<usize>,
    keepdims: bool,
    dtype: Option<ElemType>,
) {
    let unit = ctx.known(1);
    if keepdims {
        let out = dims.iter().map(|d| if ctx.resolve(d) == unit { unit.clone() } else { ctx.unknown_dim() }).collect();
        return set_tensor(ctx, 0, out, dtype);
    }
    match count {
        Some(n) if n <= dims.len() => {
            let out = (0..dims.len() - n).map(|_| ctx.unknown_dim()).collect();
            set_tensor(ctx, 0, out, dtype);
        }
        _ => unknown_shape(ctx, 0, dtype),
    }
}

/// `ArgMax`/`ArgMin`: the `axis` is removed or kept as 1; int64 indices.
pub(super) fn arg_extremum(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let keepdims = ctx.attr_int("keepdims").unwrap_or(1) != 0;
    let axis = ctx.attr_int("axis").unwrap_or(0);
    let Some(axis) = ctx.axis(axis, dims.len(), "axis") else {
        unknown_shape(ctx, 0, Some(ElemType::Int64));
        return Ok(());
    };
    let mut mask = vec![false; dims.len()];
    mask[axis] = true;
    let out = reduced_dims(ctx, &dims, &mask, keepdims);
    set_tensor(ctx, 0, out, Some(ElemType::Int64));
    let last = ctx.attr_int("select_last_index").unwrap_or(0) != 0;
    if let Some(v) = ctx.value(0) {
        if let Some(folded) = fold_arg(ctx.op() == "ArgMax", &v, axis, keepdims, last) {
            ctx.set_value(0, folded);
        }
    }
    Ok(())
}

/// The output shape, and for each output element the input flat indices it reduces.
fn groups(shape: &[usize], mask: &[bool], keepdims: bool) -> Option<(Vec<usize>, Vec<Vec<usize>>)> {
    let total: usize = shape.iter().try_fold(1usize, |a, &n| a.checked_mul(n))?;
    if total > MAX_FOLD || shape.len() != mask.len() {
        return None;
    }
    let kept: Vec<usize> = shape.iter().zip(mask).map(|(&n, &r)| if r { 1 } else { n }).collect();
    let out_count = kept.iter().try_fold(1usize, |a, &n| a.checked_mul(n)).filter(|&n| n <= MAX_FOLD)?;
    let mut out_shape = Vec::new();
    for (&n, &r) in kept.iter().zip(mask) {
        if !r || keepdims {
            out_shape.push(n);
        }
    }
    let mut groups = vec![Vec::new(); out_count];
    for flat in 0..total {
        let mut rest = flat;
        let mut out_flat = 0;
        let mut stride = 1;
        for (i, &n) in shape.iter().enumerate().rev() {
            let idx = rest % n;
            rest /= n;
            if !mask[i] {
                out_flat += idx * stride;
                stride *= n;
            }
        }
        groups[out_flat].push(flat);
    }
    Some((out_shape, groups))
}

/// The folded result of reduction `op` over `v`, when its elements allow it.
fn fold_reduce(op: &str, v: &ConstValue, mask: &[bool], keepdims: bool) -> Option<ConstValue> {
    let (shape, groups) = groups(&v.shape, mask, keepdims)?;
    if groups.iter().any(Vec::is_empty) {
        return None;
    }
    let data = match &v.data {
        ConstData::Ints(e) => {
            ConstData::Ints(groups.iter().map(|g| fold_ints(op, g.iter().map(|&i| &e[i]))).collect::<Option<_>>()?)
        }
        ConstData::Floats(f) if !is_integer(v.dtype) => {
            ConstData::Floats(groups.iter().map(|g| fold_floats(op, g.iter().map(|&i| f[i]))).collect::<Option<_>>()?)
        }
        ConstData::Bools(b) => {
            let all = op == "ReduceMin";
            if !all && op != "ReduceMax" {
                return None;
            }
            ConstData::Bools(
                groups.iter().map(|g| if all { g.iter().all(|&i| b[i]) } else { g.iter().any(|&i| b[i]) }).collect(),
            )
        }
        _ => return None,
    };
    Some(ConstValue { dtype: v.dtype, shape, data })
}

/// One integer reduction over size terms (`Sum`, `Prod`, `Max`, `Min`,
/// `SumSquare`, `L1`); `None` for the others or unknown elements.
fn fold_ints<'a>(op: &str, mut elems: impl Iterator<Item = &'a Elem>) -> Option<Elem> {
    let first = elems.next()?.as_expr()?;
    let step = |acc: SizeExpr, x: SizeExpr| -> Option<SizeExpr> {
        match op {
            "ReduceSum" => acc.add(&x),
            "ReduceProd" => acc.mul(&x),
            "ReduceMax" => Some(SizeExpr::max(&acc, &x)),
            "ReduceMin" => Some(SizeExpr::min(&acc, &x)),
            "ReduceSumSquare" => acc.add(&x.mul(&x)?),
            "ReduceL1" => acc.add(&SizeExpr::constant(x.as_constant()?.checked_abs()?)),
            _ => None,
        }
    };
    let first = match op {
        "ReduceSumSquare" => first.mul(&first)?,
        "ReduceL1" => SizeExpr::constant(first.as_constant()?.checked_abs()?),
        _ => first,
    };
    let mut acc = first;
    for e in elems {
        acc = step(acc, e.as_expr()?)?;
    }
    Some(Elem::from_expr(acc))
}

/// One floating-point reduction.
fn fold_floats(op: &str, xs: impl Iterator<Item = f64>) -> Option<f64> {
    let xs: Vec<f64> = xs.collect();
    let sum = |f: &dyn Fn(f64) -> f64| xs.iter().map(|&x| f(x)).sum::<f64>();
    Some(match op {
        "ReduceSum" => sum(&|x| x),
        "ReduceMean" => sum(&|x| x) / xs.len() as f64,
        "ReduceMax" => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "ReduceMin" => xs.iter().copied().fold(f64::INFINITY, f64::min),
        "ReduceProd" => xs.iter().product(),
        "ReduceL1" => sum(&f64::abs),
        "ReduceL2" => sum(&|x| x * x).sqrt(),
        "ReduceLogSum" => sum(&|x| x).ln(),
        "ReduceLogSumExp" => sum(&f64::exp).ln(),
        "ReduceSumSquare" => sum(&|x| x * x),
        _ => return None,
    })
}

/// The folded indices of `ArgMax`/`ArgMin` over `axis`, when every element is known.
fn fold_arg(max: bool, v: &ConstValue, axis: usize, keepdims: bool, last: bool) -> Option<ConstValue> {
    let xs = v.as_f64s()?;
    let mut mask = vec![false; v.shape.len()];
    *mask.get_mut(axis)? = true;
    let (shape, groups) = groups(&v.shape, &mask, keepdims)?;
    let mut out = Vec::with_capacity(groups.len());
    for g in &groups {
        let mut best: Option<(usize, f64)> = None;
        for (k, &i) in g.iter().enumerate() {
            let x = *xs.get(i)?;
            let better = match best {
                None => true,
                Some((_, b)) if last => (max && x >= b) || (!max && x <= b),
                Some((_, b)) => (max && x > b) || (!max && x < b),
            };
            if better {
                best = Some((k, x));
            }
        }
        out.push(Elem::Int(best?.0 as i64));
    }
    Some(ConstValue::ints(ElemType::Int64, shape, out))
}
