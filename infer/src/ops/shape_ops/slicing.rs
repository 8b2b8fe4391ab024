//! Rules for operators that select or combine parts of tensors: `Concat`,
//! `Split`, `Slice`, `Gather`, `GatherElements`, `GatherND`, the `Scatter`
//! family, and the data-dependent `Compress`, `NonZero`, `Unique`.

use super::{
    build, dim_of_expr, expr_of, known_sizes, norm_axes, numel, product_dim, select, set_small_value, strides,
    unknown_dims, unknown_outputs, MAX_ELEMS,
};
use crate::constraint::{Constraint, SizeSum};
use crate::ops::{OpTable, ONNX};
use crate::rule::{ConstData, ConstValue, Defer, Elem, OpCtx};
use diamond_ir::term::{DimTerm, SizeExpr};
use diamond_ir::ElemType;
use std::sync::Arc;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Concat", 1, concat);
    t.add(ONNX, "Split", 1, split);
    t.add(ONNX, "Slice", 1, slice);
    t.add(ONNX, "Gather", 1, gather);
    t.add(ONNX, "GatherElements", 11, gather_elements);
    t.add(ONNX, "GatherND", 11, gather_nd);
    t.add_all(ONNX, &["Scatter", "ScatterElements"], 9, scatter_elements);
    t.add(ONNX, "ScatterND", 11, same_as_data);
    t.add(ONNX, "Compress", 9, compress);
    t.add(ONNX, "NonZero", 9, nonzero);
    t.add(ONNX, "Unique", 11, unique);
}

/// Copies input 0's element type to output `j`.
fn dtype_to(ctx: &mut OpCtx, j: usize) {
    if let Some(t) = ctx.dtype(0) {
        ctx.set_dtype(j, t);
    }
}

/// The sum of `dims`: computed when every size is known or symbolic,
/// otherwise a new dimension tied to them by a sum constraint.
fn sum_dim(ctx: &mut OpCtx, dims: &[DimTerm], operand: &str) -> DimTerm {
    let exprs: Option<Vec<SizeExpr>> = dims.iter().map(|d| expr_of(ctx, d)).collect();
    if let Some(exprs) = exprs {
        return match exprs.iter().try_fold(SizeExpr::constant(0), |acc, e| acc.add(e)) {
            Some(s) => dim_of_expr(ctx, s),
            None => ctx.unknown_dim(),
        };
    }
    let total = ctx.unknown_dim();
    let cause = ctx.cause(operand, "the output axis is the sum of the parts");
    ctx.constrain(Constraint::Sum(Box::new(SizeSum { total: total.clone(), parts: dims.to_vec(), cause })));
    total
}

/// `Concat`: inputs agree on every axis but `axis`, where their sizes add up.
fn concat(ctx: &mut OpCtx) -> Result<(), Defer> {
    let given: Vec<usize> = (0..ctx.input_count()).filter(|&i| ctx.has_input(i)).collect();
    let mut all = Vec::with_capacity(given.len());
    for &i in &given {
        all.push(ctx.need_dims(i)?);
    }
    if let Some(t) = ctx.same_dtype(&given) {
        ctx.set_dtype(0, t);
    }
    let Some(first) = all.first().cloned() else {
        ctx.invalid("Concat needs at least one input");
        return unknown_outputs(ctx);
    };
    let r = first.len();
    if let Some((k, d)) = all.iter().enumerate().find(|(_, d)| d.len() != r) {
        ctx.rank_conflict(
            given[k],
            format!("input {} has rank {} but input {} has rank {r}", given[k], d.len(), given[0]),
        );
        return unknown_outputs(ctx);
    }
    let axis = match ctx.attr_int("axis") {
        Some(a) => a,
        None if ctx.version() < 4 => 1,
        None => {
            ctx.invalid("axis is required");
            return unknown_outputs(ctx);
        }
    };
    let Some(a) = ctx.axis(axis, r, "axis") else { return unknown_outputs(ctx) };
    for (k, dims) in all.iter().enumerate().skip(1) {
        for j in (0..r).filter(|&j| j != a) {
            let operand = format!("input {}", given[k]);
            ctx.eq_dims_at(dims[j].clone(), first[j].clone(), &operand, j, "concatenated inputs agree off the axis");
        }
    }
    let parts: Vec<DimTerm> = all.iter().map(|d| d[a].clone()).collect();
    let mut out = first.clone();
    out[a] = sum_dim(ctx, &parts, "axis");
    ctx.set_dims(0, out);
    let values: Option<Vec<Arc<ConstValue>>> = given.iter().map(|&i| ctx.value(i)).collect();
    if let Some(v) = values.and_then(|vs| concat_values(&vs, a)) {
        set_small_value(ctx, 0, v);
    }
    Ok(())
}

/// The concatenation of known tensors along axis `a`.
fn concat_values(values: &[Arc<ConstValue>], a: usize) -> Option<ConstValue> {
    let first = values.first()?;
    let mut shape = first.shape.clone();
    shape[a] = values.iter().map(|v| v.shape.get(a).copied()).sum::<Option<usize>>()?;
    if numel(&shape)? > MAX_ELEMS {
        return None;
    }
    let outer = numel(&first.shape[..a])?;
    let mut data = empty_like(&first.data);
    for o in 0..outer {
        for v in values {
            let chunk = numel(&v.shape[a..])?;
            extend_range(&mut data, &v.data, o * chunk, (o + 1) * chunk)?;
        }
    }
    Some(ConstValue { dtype: first.dtype, shape, data })
}

/// Empty data of the same kind.
fn empty_like(d: &ConstData) -> ConstData {
    match d {
        ConstData::Ints(_) => ConstData::Ints(Vec::new()),
        ConstData::Floats(_) => ConstData::Floats(Vec::new()),
        ConstData::Bools(_) => ConstData::Bools(Vec::new()),
        ConstData::Strings(_) => ConstData::Strings(Vec::new()),
    }
}

/// Appends `src[from..to]` to `dst`; `None` when the kinds differ or the range is out of bounds.
fn extend_range(dst: &mut ConstData, src: &ConstData, from: usize, to: usize) -> Option<()> {
    match (dst, src) {
        (ConstData::Ints(d), ConstData::Ints(s)) => d.extend_from_slice(s.get(from..to)?),
        (ConstData::Floats(d), ConstData::Floats(s)) => d.extend_from_slice(s.get(from..to)?),
        (ConstData::Bools(d), ConstData::Bools(s)) => d.extend_from_slice(s.get(from..to)?),
        (ConstData::Strings(d), ConstData::Strings(s)) => d.extend_from_slice(s.get(from..to)?),
        _ => return None,
    }
    Some(())
}

/// The split sizes of a `Split`: `Ok(None)` when not given, `Err(())` when given but unknown.
fn split_sizes(ctx: &mut OpCtx) -> Result<Option<Vec<i64>>, ()> {
    let from_input = ctx.version() >= 13 || (ctx.version() < 2 && ctx.has_input(1));
    if from_input {
        if !ctx.has_input(1) {
            return Ok(None);
        }
        return ctx.ints(1).map(Some).ok_or(());
    }
    Ok(ctx.attr_ints("split"))
}

/// `Split`: parts along `axis`, of the given sizes or equal (the last one
/// smaller at opset 18 when they do not divide).
fn split(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let n_out = ctx.output_count();
    for j in 0..n_out {
        dtype_to(ctx, j);
    }
    let Some(a) = ctx.axis(ctx.attr_int("axis").unwrap_or(0), dims.len(), "axis") else { return unknown_outputs(ctx) };
    let whole = ctx.size_of(&dims[a]);
    let parts: Vec<DimTerm> = match split_sizes(ctx) {
        Err(()) => unknown_dims(ctx, n_out),
        Ok(Some(sizes)) => {
            if sizes.len() != n_out {
                ctx.invalid(format!("split lists {} sizes for {n_out} outputs", sizes.len()));
                return unknown_outputs(ctx);
            }
            if let Some(s) = sizes.iter().find(|&&s| s < 0) {
                ctx.invalid(format!("split size {s} is negative"));
                return unknown_outputs(ctx);
            }
            let total: i64 = sizes.iter().fold(0i64, |acc, &s| acc.saturating_add(s));
            if whole.is_some_and(|w| w as i64 != total) {
                ctx.invalid(format!("split sizes add up to {total} but the axis has size {}", whole.unwrap_or(0)));
                return unknown_outputs(ctx);
            }
            let parts: Vec<DimTerm> = sizes.iter().map(|&s| ctx.known(s as u64)).collect();
            if whole.is_none() && total > 0 {
                let cause = ctx.cause("input 0", "the split sizes add up to the axis");
                let sum = SizeSum { total: dims[a].clone(), parts: parts.clone(), cause };
                ctx.constrain(Constraint::Sum(Box::new(sum)));
            }
            parts
        }
        Ok(None) => {
            let count =
                if ctx.version() >= 18 { ctx.attr_int("num_outputs").unwrap_or(n_out as i64) } else { n_out as i64 };
            if count != n_out as i64 || count < 1 {
                ctx.invalid(format!("num_outputs is {count} but the node has {n_out} outputs"));
                return unknown_outputs(ctx);
            }
            match equal_parts(ctx, &dims[a], n_out) {
                Ok(parts) => parts,
                Err(message) => {
                    ctx.invalid(message);
                    return unknown_outputs(ctx);
                }
            }
        }
    };
    let value = ctx.value(0);
    let mut offset = Some(0usize);
    for (j, part) in parts.into_iter().enumerate() {
        let mut out = dims.clone();
        out[a] = part.clone();
        ctx.set_dims(j, out);
        let len = ctx.size_of(&part).map(|n| n as usize);
        let (Some(v), Some(start), Some(len)) = (value.as_ref(), offset, len) else {
            offset = None;
            continue;
        };
        offset = Some(start + len);
        let mut picks: Vec<Vec<usize>> = v.shape.iter().map(|&n| (0..n).collect()).collect();
        picks[a] = (start..start + len).collect();
        if let Some(p) = select(v, &picks) {
            set_small_value(ctx, j, p);
        }
    }
    Ok(())
}

/// `count` equal parts of an axis (at opset 18 the last may be smaller).
fn equal_parts(ctx: &mut OpCtx, whole: &DimTerm, count: usize) -> Result<Vec<DimTerm>, String> {
    let n = count as u64;
    if let Some(w) = ctx.size_of(whole) {
        if w % n == 0 {
            return Ok((0..count).map(|_| ctx.known(w / n)).collect());
        }
        if ctx.version() < 18 {
            return Err(format!("the axis of size {w} does not split into {count} equal parts"));
        }
        let chunk = w.div_ceil(n);
        let last = w.checked_sub(chunk * (n - 1)).ok_or_else(|| format!("the axis of size {w} leaves no last part"))?;
        return Ok((0..count).map(|j| ctx.known(if j + 1 == count { last } else { chunk })).collect());
    }
    if let Some(e) = expr_of(ctx, whole) {
        if let Some(q) = e.div_exact(&SizeExpr::constant(count as i64)) {
            let d = dim_of_expr(ctx, q);
            return Ok(vec![d; count]);
        }
        return Ok(unknown_dims(ctx, count));
    }
    let part = ctx.unknown_dim();
    if ctx.version() < 18 {
        let cause = ctx.cause("input 0", "equal parts of the axis");
        let parts = diamond_ir::term::RowTerm::closed(vec![ctx.known(n), part.clone()]);
        ctx.constrain(Constraint::Numel(diamond_ir::term::RowTerm::closed(vec![whole.clone()]), parts, cause));
    }
    Ok(vec![part; count])
}

/// The four operands of a `Slice`.
struct SliceArgs {
    starts: Vec<Elem>,
    ends: Vec<Elem>,
    axes: Option<Vec<i64>>,
    steps: Option<Vec<i64>>,
}

/// Reads a `Slice`'s operands: attributes before opset 10, inputs after.
/// `None` when starts or ends (or given axes/steps) are not known.
fn slice_args(ctx: &mut OpCtx) -> Option<SliceArgs> {
    let ints = |v: Vec<i64>| v.into_iter().map(Elem::Int).collect::<Vec<_>>();
    if ctx.version() < 10 {
        return Some(SliceArgs {
            starts: ints(ctx.attr_ints("starts")?),
            ends: ints(ctx.attr_ints("ends")?),
            axes: ctx.attr_ints("axes"),
            steps: None,
        });
    }
    let starts = ctx.elems(1)?;
    let ends = ctx.elems(2)?;
    let axes = if ctx.has_input(3) { Some(ctx.ints(3)?) } else { None };
    let steps = if ctx.has_input(4) { Some(ctx.ints(4)?) } else { None };
    Some(SliceArgs { starts, ends, axes, steps })
}

/// The first index and the length of a slice of an axis of known size `dim`.
fn slice_range(dim: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let (dim, start, end, step) = (dim as i128, start as i128, end as i128, step as i128);
    let s = if start < 0 { start + dim } else { start };
    let e = if end < 0 { end + dim } else { end };
    let (s, len) = if step > 0 {
        let (s, e) = (s.clamp(0, dim), e.clamp(0, dim));
        (s, if e > s { (e - s - 1) / step + 1 } else { 0 })
    } else {
        let (s, e) = (s.max(0).min(dim - 1), e.max(-1).min(dim - 1));
        (s, if s > e { (s - e - 1) / (-step) + 1 } else { 0 })
    };
    (s as i64, len as i64)
}

/// An end at or beyond this means "to the end of the axis".
const TO_END: i64 = i32::MAX as i64;

/// The size of a slice of an axis whose size is not a known number.
fn symbolic_slice(ctx: &mut OpCtx, d: &DimTerm, start: &Elem, end: &Elem, step: i64) -> DimTerm {
    if step != 1 {
        return ctx.unknown_dim();
    }
    let size = expr_of(ctx, d);
    match (start, end) {
        (Elem::Int(0), Elem::Int(e)) if *e >= TO_END => d.clone(),
        (Elem::Int(s), Elem::Int(e)) if *s > 0 && *e >= TO_END => minus(ctx, d, size, *s),
        (Elem::Int(0), Elem::Int(e)) if *e < 0 => minus(ctx, d, size, -*e),
        (Elem::Int(s), Elem::Int(e)) if *s < 0 && *e >= TO_END => match size {
            Some(x) => dim_of_expr(ctx, SizeExpr::min(&x, &SizeExpr::constant(-*s))),
            None => ctx.unknown_dim(),
        },
        (Elem::Int(0), end) => {
            let end_dim = match end {
                Elem::Int(0) => return ctx.known(0),
                Elem::Int(e) if *e >= 0 => ctx.known(*e as u64),
                Elem::Expr(_) | Elem::Var(_) => ctx.dim_of_elem(end),
                _ => return ctx.unknown_dim(),
            };
            if ctx.resolve(&end_dim) == ctx.resolve(d) {
                return d.clone();
            }
            match (size, expr_of(ctx, &end_dim)) {
                (Some(x), Some(y)) => dim_of_expr(ctx, SizeExpr::min(&x, &y)),
                _ => ctx.unknown_dim(),
            }
        }
        _ => ctx.unknown_dim(),
    }
}

/// `d - k` for a positive `k`: computed for symbolic sizes, a sum constraint for unknown ones.
fn minus(ctx: &mut OpCtx, d: &DimTerm, size: Option<SizeExpr>, k: i64) -> DimTerm {
    if let Some(x) = size {
        return match x.add(&SizeExpr::constant(-k)) {
            Some(r) => dim_of_expr(ctx, r),
            None => ctx.unknown_dim(),
        };
    }
    let out = ctx.unknown_dim();
    let cause = ctx.cause("input 0", "the slice drops a fixed number of elements");
    let parts = vec![ctx.known(k as u64), out.clone()];
    ctx.constrain(Constraint::Sum(Box::new(SizeSum { total: d.clone(), parts, cause })));
    out
}

/// `Slice`: per listed axis, the elements from `start` towards `end` by `step`.
fn slice(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    dtype_to(ctx, 0);
    let r = dims.len();
    let Some(args) = slice_args(ctx) else {
        let axes = if ctx.version() < 10 {
            ctx.attr_ints("axes")
        } else if ctx.has_input(3) {
            ctx.ints(3)
        } else {
            None
        };
        let mut out = dims.clone();
        for (a, d) in out.iter_mut().enumerate() {
            let kept = axes.as_ref().is_some_and(|v| !v.iter().any(|&x| x == a as i64 || x + r as i64 == a as i64));
            if !kept {
                *d = ctx.unknown_dim();
            }
        }
        ctx.set_dims(0, out);
        return Ok(());
    };
    let n = args.starts.len();
    let axes = args.axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = args.steps.unwrap_or_else(|| vec![1; n]);
    if args.ends.len() != n || axes.len() != n || steps.len() != n {
        ctx.invalid(format!(
            "starts, ends, axes and steps have different lengths ({n}, {}, {}, {})",
            args.ends.len(),
            axes.len(),
            steps.len()
        ));
        return unknown_outputs(ctx);
    }
    if steps.contains(&0) {
        ctx.invalid("a step is 0");
        return unknown_outputs(ctx);
    }
    let Some(axes) = norm_axes(ctx, &axes, r, "axes") else { return unknown_outputs(ctx) };
    let mut out = dims.clone();
    let mut firsts: Vec<Option<(i64, i64)>> = vec![Some((0, 1)); r];
    for k in 0..n {
        let a = axes[k];
        let (start, end, step) = (&args.starts[k], &args.ends[k], steps[k]);
        match (ctx.size_of(&dims[a]), start.as_int(), end.as_int()) {
            (Some(size), Some(s), Some(e)) => {
                let (first, len) = slice_range(size as i64, s, e, step);
                out[a] = ctx.known(len as u64);
                firsts[a] = Some((first, step));
            }
            _ => {
                out[a] = symbolic_slice(ctx, &dims[a], start, end, step);
                firsts[a] = None;
            }
        }
    }
    ctx.set_dims(0, out.clone());
    if let (Some(v), Some(sizes)) = (ctx.value(0), known_sizes(ctx, &out)) {
        let picks: Option<Vec<Vec<usize>>> = firsts
            .iter()
            .zip(&sizes)
            .map(|(f, &len)| {
                let (first, step) = (*f)?;
                (0..len).map(|i| usize::try_from(first as i128 + i as i128 * step as i128).ok()).collect()
            })
            .collect();
        if let Some(p) = picks.and_then(|p| select(&v, &p)) {
            set_small_value(ctx, 0, p);
        }
    }
    Ok(())
}

/// Normalizes gather indices against an axis of size `dim`; `Err` names the first out of range.
fn norm_indices(indices: &[i64], dim: usize) -> Result<Vec<usize>, i64> {
    let d = dim as i64;
    indices
        .iter()
        .map(|&i| if i < -d || i >= d { Err(i) } else { Ok(if i < 0 { i + d } else { i } as usize) })
        .collect()
}

/// `Gather`: `data[:axis] ++ indices ++ data[axis+1:]`.
fn gather(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let idims = ctx.need_dims(1)?;
    dtype_to(ctx, 0);
    let Some(a) = ctx.axis(ctx.attr_int("axis").unwrap_or(0), dims.len(), "axis") else { return unknown_outputs(ctx) };
    let indices = ctx.ints(1);
    let size = ctx.size_of(&dims[a]);
    let mut normalized = None;
    if let (Some(ix), Some(size)) = (indices.as_ref(), size) {
        match norm_indices(ix, size as usize) {
            Ok(v) => normalized = Some(v),
            Err(i) => {
                ctx.invalid(format!("index {i} is out of range for an axis of size {size}"));
                return unknown_outputs(ctx);
            }
        }
    }
    let mut out: Vec<DimTerm> = dims[..a].to_vec();
    out.extend(idims.iter().cloned());
    out.extend(dims[a + 1..].iter().cloned());
    ctx.set_dims(0, out.clone());
    if indices.is_none() {
        gathered_within(ctx, &dims[a], a);
    }
    let (Some(v), Some(ix), Some(sizes)) = (ctx.value(0), normalized, known_sizes(ctx, &out)) else { return Ok(()) };
    let mut picks: Vec<Vec<usize>> = v.shape.iter().map(|&n| (0..n).collect()).collect();
    if a < picks.len() {
        picks[a] = ix;
    }
    if let Some(g) = select(&v, &picks) {
        if let Some(g) = super::reshaped(&g, sizes) {
            set_small_value(ctx, 0, g);
        }
    }
    Ok(())
}

/// Indices known only by their bound (`Range(0, seq)`: all below `seq`)
/// stay inside an axis of size `table` only when `seq ≤ table`: reported as
/// the `implied-bound` the model relies on, unless it provably holds.
fn gathered_within(ctx: &mut OpCtx, table: &DimTerm, axis: usize) {
    let (Some(bound), Some(size)) = (ctx.index_bound(1), crate::ops::common::size_expr(ctx, table)) else { return };
    let holds = bound == size
        || matches!((bound.as_constant(), size.as_constant()), (Some(b), Some(s)) if b <= s)
        || bound.min_operands().is_some_and(|ops| {
            ops.iter()
                .any(|o| *o == size || matches!((o.as_constant(), size.as_constant()), (Some(b), Some(s)) if b <= s))
        });
    if holds {
        return;
    }
    if let (Some(b), Some(s)) = (bound.as_constant(), size.as_constant()) {
        ctx.invalid(format!("indices run up to {} but input 0's axis {axis} has {s} entries", b - 1));
        return;
    }
    let message = format!(
        "{}: the indices (input 1) are all below {bound}, and stay within the {size} entries of input 0's axis {axis} only when {bound} ≤ {size}: the model assumes it",
        ctx.label()
    );
    let assumes = vec![crate::diagnostic::Assumption::AtMost(bound, size)];
    ctx.report_assuming(crate::diagnostic::Code::ImpliedBound, "input 1", message, assumes);
}

/// `GatherElements`: the output has the indices' shape.
fn gather_elements(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let idims = ctx.need_dims(1)?;
    dtype_to(ctx, 0);
    if dims.len() != idims.len() {
        ctx.rank_conflict(1, format!("data has rank {} but indices have rank {}", dims.len(), idims.len()));
        return unknown_outputs(ctx);
    }
    let Some(a) = ctx.axis(ctx.attr_int("axis").unwrap_or(0), dims.len(), "axis") else { return unknown_outputs(ctx) };
    ctx.set_dims(0, idims.clone());
    let (Some(v), Some(ix), Some(ishape)) = (ctx.value(0), ctx.ints(1), known_sizes(ctx, &idims)) else {
        return Ok(());
    };
    let st = strides(&v.shape);
    let ist = strides(&ishape);
    let data = build(&v.data, &ishape, |pos| {
        let flat = pos.iter().zip(&ist).map(|(p, s)| p * s).sum::<usize>();
        let d = *v.shape.get(a)? as i64;
        let i = *ix.get(flat)?;
        let i = if i < 0 { i + d } else { i };
        if i < 0 || i >= d {
            return None;
        }
        Some(pos.iter().enumerate().map(|(k, &p)| if k == a { i as usize } else { p } * st[k]).sum())
    });
    if let Some(data) = data {
        set_small_value(ctx, 0, ConstValue { dtype: v.dtype, shape: ishape, data });
    }
    Ok(())
}

/// `GatherND`: `indices[:-1] ++ data[batch_dims + indices[-1]:]`.
fn gather_nd(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let idims = ctx.need_dims(1)?;
    let Some(last) = idims.last() else {
        dtype_to(ctx, 0);
        ctx.rank_conflict(1, "indices must have rank 1 or more");
        return unknown_outputs(ctx);
    };
    let Some(k) = ctx.size_of(last) else { return Err(Defer) };
    dtype_to(ctx, 0);
    let b = ctx.attr_int("batch_dims").unwrap_or(0);
    let (q, r) = (idims.len() as i64, dims.len() as i64);
    let k = k as i64;
    if b < 0 || b >= q.min(r) || b + k > r {
        ctx.invalid(format!("batch_dims {b} with index tuples of length {k} do not fit data of rank {r}"));
        return unknown_outputs(ctx);
    }
    let mut out: Vec<DimTerm> = idims[..idims.len() - 1].to_vec();
    out.extend(dims[(b + k) as usize..].iter().cloned());
    for j in 0..b as usize {
        ctx.eq_dims_at(idims[j].clone(), dims[j].clone(), "input 1", j, "batch axes of data and indices agree");
    }
    ctx.set_dims(0, out);
    Ok(())
}

/// `Scatter`/`ScatterElements`: the output is the data; indices and updates share a shape.
fn scatter_elements(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let (Some(i), Some(u)) = (ctx.in_row(1), ctx.in_row(2)) {
        ctx.eq_rows(i, u, "input 2", "updates have the indices' shape");
    }
    same_as_data(ctx)
}

/// Output 0 has input 0's shape and type.
fn same_as_data(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    dtype_to(ctx, 0);
    Ok(())
}

/// `Compress`: the slices (or, without `axis`, the elements) whose condition is true.
fn compress(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    dtype_to(ctx, 0);
    let cond = ctx.ints(1);
    let axis = ctx.attr_int("axis");
    let a = match axis {
        Some(x) => match ctx.axis(x, dims.len(), "axis") {
            Some(a) => Some(a),
            None => return unknown_outputs(ctx),
        },
        None => None,
    };
    let limit = match a {
        Some(a) => ctx.size_of(&dims[a]).map(|n| n as usize),
        None => known_sizes(ctx, &dims).and_then(|s| numel(&s)),
    };
    let kept: Option<Vec<usize>> = cond.as_ref().map(|c| {
        c.iter().enumerate().take(limit.unwrap_or(usize::MAX)).filter(|(_, &b)| b != 0).map(|(i, _)| i).collect()
    });
    let count = match &kept {
        Some(k) => ctx.known(k.len() as u64),
        None => ctx.unknown_dim(),
    };
    let out = match a {
        Some(a) => {
            let mut out = dims.clone();
            out[a] = count;
            out
        }
        None => vec![count],
    };
    ctx.set_dims(0, out);
    let (Some(v), Some(kept)) = (ctx.value(0), kept) else { return Ok(()) };
    let result = match a {
        Some(a) => {
            let mut picks: Vec<Vec<usize>> = v.shape.iter().map(|&n| (0..n).collect()).collect();
            picks[a] = kept;
            select(&v, &picks)
        }
        None => super::take(&v.data, &kept).map(|data| ConstValue { dtype: v.dtype, shape: vec![kept.len()], data }),
    };
    if let Some(r) = result {
        set_small_value(ctx, 0, r);
    }
    Ok(())
}

/// Whether each element of `v` is non-zero; `None` when one is not known.
fn nonzero_mask(v: &ConstValue) -> Option<Vec<bool>> {
    match &v.data {
        ConstData::Ints(e) => e.iter().map(|x| x.as_int().map(|n| n != 0)).collect(),
        ConstData::Floats(f) => Some(f.iter().map(|&x| x != 0.0).collect()),
        ConstData::Bools(b) => Some(b.clone()),
        ConstData::Strings(s) => Some(s.iter().map(|x| !x.is_empty()).collect()),
    }
}

/// `NonZero`: int64 `[rank, count]`, the coordinates of the non-zero elements.
fn nonzero(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    ctx.set_dtype(0, ElemType::Int64);
    let r = dims.len();
    let rank = ctx.known(r as u64);
    let v = ctx.value(0);
    let Some((v, mask)) = v.and_then(|v| nonzero_mask(&v).map(|m| (v, m))) else {
        let count = ctx.unknown_dim();
        ctx.set_dims(0, vec![rank, count]);
        return Ok(());
    };
    let hits: Vec<usize> = mask.iter().enumerate().filter(|(_, &b)| b).map(|(i, _)| i).collect();
    let count = ctx.known(hits.len() as u64);
    ctx.set_dims(0, vec![rank, count]);
    if hits.len().saturating_mul(r.max(1)) > MAX_ELEMS {
        return Ok(());
    }
    let st = strides(&v.shape);
    let mut elems = Vec::with_capacity(r * hits.len());
    for (&n, &s) in v.shape.iter().zip(&st) {
        for &h in &hits {
            let coord = if n == 0 || s == 0 { 0 } else { (h / s) % n };
            elems.push(Elem::Int(coord as i64));
        }
    }
    set_small_value(ctx, 0, ConstValue::ints(ElemType::Int64, vec![r, hits.len()], elems));
    Ok(())
}

/// A hashable key for one element, so equal elements compare equal.
fn elem_key(d: &ConstData, i: usize) -> Option<Vec<u8>> {
    Some(match d {
        ConstData::Ints(v) => v.get(i)?.as_int()?.to_le_bytes().to_vec(),
        ConstData::Floats(v) => {
            let x = *v.get(i)?;
            (if x == 0.0 { 0.0f64 } else { x }).to_bits().to_le_bytes().to_vec()
        }
        ConstData::Bools(v) => vec![*v.get(i)? as u8],
        ConstData::Strings(v) => v.get(i)?.clone(),
    })
}

/// The number of distinct elements of `v`, or of distinct slices along `axis`.
fn distinct_count(v: &ConstValue, axis: Option<usize>) -> Option<usize> {
    let mut seen = std::collections::HashSet::new();
    match axis {
        None => {
            for i in 0..v.len() {
                seen.insert(vec![elem_key(&v.data, i)?]);
            }
        }
        Some(a) => {
            let st = strides(&v.shape);
            let n = *v.shape.get(a)?;
            let others: Vec<usize> = (0..v.len()).filter(|&f| (f / st[a]).is_multiple_of(n.max(1))).collect();
            for k in 0..n {
                let slice: Option<Vec<Vec<u8>>> = others.iter().map(|&f| elem_key(&v.data, f + k * st[a])).collect();
                seen.insert(slice?);
            }
        }
    }
    Some(seen.len())
}

/// `Unique`: the distinct elements (or slices along `axis`), the first
/// index of each, the inverse indices, and the counts.
fn unique(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    dtype_to(ctx, 0);
    for j in 1..4 {
        ctx.set_dtype(j, ElemType::Int64);
    }
    let a = match ctx.attr_int("axis") {
        Some(x) => match ctx.axis(x, dims.len(), "axis") {
            Some(a) => Some(a),
            None => return unknown_outputs(ctx),
        },
        None => None,
    };
    let count = ctx.value(0).and_then(|v| distinct_count(&v, a));
    let u = match count {
        Some(n) => ctx.known(n as u64),
        None => ctx.unknown_dim(),
    };
    let (y, inverse) = match a {
        Some(a) => {
            let mut y = dims.clone();
            y[a] = u.clone();
            (y, dims[a].clone())
        }
        None => (vec![u.clone()], product_dim(ctx, &dims, "input 0")),
    };
    ctx.set_dims(0, y);
    ctx.set_dims(1, vec![u.clone()]);
    ctx.set_dims(2, vec![inverse]);
    ctx.set_dims(3, vec![u]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slice_range;

    #[test]
    fn slice_ranges_clamp_like_onnx() {
        assert_eq!(slice_range(10, 0, 3, 1), (0, 3));
        assert_eq!(slice_range(10, -3, i64::MAX, 1), (7, 3));
        assert_eq!(slice_range(10, 20, 30, 1), (10, 0));
        assert_eq!(slice_range(10, -1, i64::MIN, -1), (9, 10));
        assert_eq!(slice_range(10, 8, 1, -3), (8, 3));
        assert_eq!(slice_range(0, 0, -1, -1), (-1, 0));
        assert_eq!(slice_range(10, 0, 10, i64::MAX), (0, 1));
    }
}
