//! Rules for operators that build tensors from shapes, scalars and
//! attributes, or enlarge and crop them: `Expand`, `Tile`, `Pad`,
//! `CenterCropPad`, `ConstantOfShape`, `Constant`, `Range`, `OneHot`, and
//! the shape-preserving `Trilu`, `ReverseSequence`, `EyeLike`.

use super::{
    build, dim_of_expr, expr_of, known_sizes, norm_axes, numel, set_small_value, strides, unknown_dims,
    unknown_outputs, vector_len, MAX_ELEMS,
};
use crate::constraint::{Constraint, SizeSum};
use crate::ops::common::{dtype_from, pass_through};
use crate::ops::{OpTable, ONNX};
use crate::rule::{ConstData, ConstValue, Defer, Elem, OpCtx};
use diamond_ir::attribute::AttrValue;
use diamond_ir::term::{DimTerm, RowTerm, SizeExpr};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Expand", 8, expand);
    t.add(ONNX, "Tile", 1, tile);
    t.add(ONNX, "Pad", 1, pad);
    t.add(ONNX, "CenterCropPad", 18, center_crop_pad);
    t.add(ONNX, "ConstantOfShape", 9, constant_of_shape);
    t.add(ONNX, "Constant", 1, constant);
    t.add(ONNX, "Range", 11, range);
    t.add(ONNX, "OneHot", 9, one_hot);
    t.add(ONNX, "Trilu", 14, pass_through);
    t.add(ONNX, "ReverseSequence", 10, pass_through);
    t.add(ONNX, "EyeLike", 9, eye_like);
}

/// The dimension an element of a shape operand names; `None` for a negative one.
fn shape_dim(ctx: &mut OpCtx, e: &Elem) -> Option<DimTerm> {
    match e {
        Elem::Int(n) if *n < 0 => None,
        other => Some(ctx.dim_of_elem(other)),
    }
}

/// `Expand`: the input broadcast with the shape operand (both ways).
fn expand(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let Some(target) = ctx.elems(1) else {
        if let Some(n) = vector_len(ctx, 1) {
            let out = unknown_dims(ctx, n.max(dims.len()));
            ctx.set_dims(0, out);
        } else {
            ctx.set_unknown(0);
        }
        return Ok(());
    };
    let mut tdims = Vec::with_capacity(target.len());
    for e in &target {
        match shape_dim(ctx, e) {
            Some(d) => tdims.push(d),
            None => {
                ctx.invalid(format!("the shape operand holds {e:?}, a negative size"));
                return unknown_outputs(ctx);
            }
        }
    }
    let rank = dims.len().max(tdims.len());
    // Symbolic sizes, or sizes that clash: the solver broadcasts the input
    // with the shape operand, and reports a clash as a `broadcast-conflict`
    // at the operand (the shape is an input, not an attribute).
    let broadcast = |ctx: &mut OpCtx, tdims: Vec<DimTerm>| {
        let Some(out) = ctx.out_row(0) else { return };
        let Some(input) = ctx.in_row(0) else { return };
        // The shape operand's *values* are the row: it is named so that no
        // reader takes the axis for one of input 1's own axes.
        let rows = vec![("input 0".to_string(), input), ("shape values (input 1)".to_string(), RowTerm::closed(tdims))];
        ctx.broadcast_into(out, rows, "broadcasts to the output");
    };
    let (Some(a), Some(b)) = (known_sizes(ctx, &dims), known_sizes(ctx, &tdims)) else {
        broadcast(ctx, tdims);
        return Ok(());
    };
    let mut sizes = vec![0usize; rank];
    for (k, s) in sizes.iter_mut().enumerate() {
        let x = (k + a.len()).checked_sub(rank).map_or(1, |i| a[i]);
        let y = (k + b.len()).checked_sub(rank).map_or(1, |i| b[i]);
        *s = match (x, y) {
            (x, y) if x == y || y == 1 => x,
            (1, y) => y,
            _ => {
                broadcast(ctx, tdims);
                return Ok(());
            }
        };
    }
    let out: Vec<DimTerm> = sizes.iter().map(|&n| ctx.known(n as u64)).collect();
    ctx.set_dims(0, out);
    if let Some(v) = ctx.value(0) {
        let st = strides(&v.shape);
        let offset = rank - v.shape.len();
        let data = build(&v.data, &sizes, |pos| {
            Some(v.shape.iter().enumerate().map(|(i, &n)| if n == 1 { 0 } else { pos[i + offset] } * st[i]).sum())
        });
        if let Some(data) = data {
            set_small_value(ctx, 0, ConstValue { dtype: v.dtype, shape: sizes, data });
        }
    }
    Ok(())
}

/// `Tile`: each axis repeated (`repeats`, opset 6 on).
fn tile(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    if ctx.version() < 6 {
        return unknown_outputs(ctx);
    }
    let Some(reps) = ctx.elems(1) else {
        let out = unknown_dims(ctx, dims.len());
        ctx.set_dims(0, out);
        return Ok(());
    };
    if reps.len() != dims.len() {
        ctx.invalid(format!("repeats has {} entries for an input of rank {}", reps.len(), dims.len()));
        return unknown_outputs(ctx);
    }
    if let Some(n) = reps.iter().filter_map(Elem::as_int).find(|&n| n < 0) {
        ctx.invalid(format!("repeat {n} is negative"));
        return unknown_outputs(ctx);
    }
    let mut out = Vec::with_capacity(dims.len());
    for (d, rep) in dims.iter().zip(&reps) {
        let t = match (rep, expr_of(ctx, d), rep.as_expr()) {
            (Elem::Int(1), _, _) => d.clone(),
            (_, Some(x), Some(y)) => match x.mul(&y) {
                Some(p) => dim_of_expr(ctx, p),
                None => ctx.unknown_dim(),
            },
            _ => ctx.unknown_dim(),
        };
        out.push(t);
    }
    ctx.set_dims(0, out.clone());
    if let (Some(v), Some(sizes)) = (ctx.value(0), known_sizes(ctx, &out)) {
        let st = strides(&v.shape);
        let data = build(&v.data, &sizes, |pos| {
            pos.iter()
                .zip(&v.shape)
                .zip(&st)
                .try_fold(0usize, |acc, ((&p, &n), &s)| acc.checked_add((p % n.max(1)) * s))
        });
        if let Some(data) = data {
            set_small_value(ctx, 0, ConstValue { dtype: v.dtype, shape: sizes, data });
        }
    }
    Ok(())
}

/// The pads of a `Pad`: the `paddings` (opset 1) or `pads` attribute, input 1 from opset 11.
fn pads_operand(ctx: &mut OpCtx) -> Option<Vec<Elem>> {
    let ints = |v: Vec<i64>| v.into_iter().map(Elem::Int).collect();
    match ctx.version() {
        v if v < 2 => ctx.attr_ints("paddings").map(ints),
        v if v < 11 => ctx.attr_ints("pads").map(ints),
        _ => ctx.elems(1),
    }
}

/// The growth `begin + end` of a padded axis, as a size expression.
fn pad_growth(begin: &Elem, end: &Elem) -> Option<SizeExpr> {
    begin.as_expr()?.add(&end.as_expr()?)
}

/// The size `d + grow` (grow may be negative).
fn grown(ctx: &mut OpCtx, d: &DimTerm, grow: i64, operand: &str) -> DimTerm {
    if grow == 0 {
        return d.clone();
    }
    if let Some(x) = expr_of(ctx, d) {
        return match x.add(&SizeExpr::constant(grow)) {
            Some(e) if e.as_constant().is_none_or(|n| n >= 0) => dim_of_expr(ctx, e),
            _ => ctx.unknown_dim(),
        };
    }
    let out = ctx.unknown_dim();
    let k = ctx.known(grow.unsigned_abs());
    let cause = ctx.cause(operand, "padding adds a fixed number of elements");
    let (total, parts) = if grow > 0 { (out.clone(), vec![d.clone(), k]) } else { (d.clone(), vec![out.clone(), k]) };
    ctx.constrain(Constraint::Sum(Box::new(SizeSum { total, parts, cause })));
    out
}

/// `Pad`: each padded axis grows by its begin and end pads.
fn pad(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let r = dims.len();
    let axes_given = ctx.version() >= 18 && ctx.has_input(3);
    let axes: Option<Vec<usize>> = if axes_given {
        match ctx.ints(3) {
            Some(a) => match norm_axes(ctx, &a, r, "axes") {
                Some(a) => Some(a),
                None => return unknown_outputs(ctx),
            },
            None => None,
        }
    } else {
        Some((0..r).collect())
    };
    let (Some(pads), Some(axes)) = (pads_operand(ctx), axes) else {
        let out = unknown_dims(ctx, r);
        ctx.set_dims(0, out);
        return Ok(());
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        ctx.invalid(format!("pads has {} entries but {n} axes are padded (2 each)", pads.len()));
        return unknown_outputs(ctx);
    }
    let mut out = dims.clone();
    for (k, &a) in axes.iter().enumerate() {
        let growth = pad_growth(&pads[k], &pads[k + n]);
        out[a] = match (growth.as_ref().and_then(SizeExpr::as_constant), ctx.size_of(&dims[a])) {
            (Some(grow), Some(size)) => {
                let Some(total) = (size as i64).checked_add(grow).filter(|&t| t >= 0) else {
                    ctx.invalid(format!(
                        "pads {:?} and {:?} remove more than the {size} elements of axis {a}",
                        pads[k],
                        pads[k + n]
                    ));
                    return unknown_outputs(ctx);
                };
                ctx.known(total as u64)
            }
            (Some(grow), None) => grown(ctx, &dims[a], grow, "input 1"),
            (None, _) => match (growth, expr_of(ctx, &dims[a])) {
                (Some(g), Some(x)) => match x.add(&g) {
                    Some(e) => dim_of_expr(ctx, e),
                    None => ctx.unknown_dim(),
                },
                _ => ctx.unknown_dim(),
            },
        };
    }
    ctx.set_dims(0, out);
    Ok(())
}

/// `CenterCropPad`: the listed axes take the sizes of the shape operand.
fn center_crop_pad(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let dims = ctx.need_dims(0)?;
    let r = dims.len();
    let axes = ctx.attr_ints("axes").unwrap_or_else(|| (0..r as i64).collect());
    let Some(axes) = norm_axes(ctx, &axes, r, "axes") else { return unknown_outputs(ctx) };
    let mut out = dims.clone();
    match ctx.elems(1) {
        Some(shape) => {
            if shape.len() != axes.len() {
                ctx.invalid(format!("shape has {} entries for {} axes", shape.len(), axes.len()));
                return unknown_outputs(ctx);
            }
            for (e, &a) in shape.iter().zip(&axes) {
                match shape_dim(ctx, e) {
                    Some(d) => out[a] = d,
                    None => {
                        ctx.invalid(format!("shape holds a negative size {e:?}"));
                        return unknown_outputs(ctx);
                    }
                }
            }
        }
        None => {
            for &a in &axes {
                out[a] = ctx.unknown_dim();
            }
        }
    }
    ctx.set_dims(0, out);
    Ok(())
}

/// The one element of a `value` attribute and its type (float 0 by default).
fn fill_value(ctx: &mut OpCtx) -> (ElemType, Option<ConstData>) {
    let Some(t) = ctx.attr_tensor("value") else { return (ElemType::Float, Some(ConstData::Floats(vec![0.0]))) };
    let dtype = t.elem_type();
    match ctx.attr_tensor_value("value") {
        Some(v) if v.len() == 1 => (dtype, Some(v.data)),
        _ => (dtype, None),
    }
}

/// `count` copies of the single element in `one`.
fn repeat(one: &ConstData, count: usize) -> Option<ConstData> {
    Some(match one {
        ConstData::Ints(v) => ConstData::Ints(vec![v.first()?.clone(); count]),
        ConstData::Floats(v) => ConstData::Floats(vec![*v.first()?; count]),
        ConstData::Bools(v) => ConstData::Bools(vec![*v.first()?; count]),
        ConstData::Strings(v) => ConstData::Strings(vec![v.first()?.clone(); count]),
    })
}

/// `ConstantOfShape`: a tensor of the given shape filled with `value`.
fn constant_of_shape(ctx: &mut OpCtx) -> Result<(), Defer> {
    let (dtype, one) = fill_value(ctx);
    ctx.set_dtype(0, dtype);
    let Some(shape) = ctx.elems(0) else {
        if let Some(n) = vector_len(ctx, 0) {
            let out = unknown_dims(ctx, n);
            ctx.set_dims(0, out);
        } else {
            ctx.set_unknown(0);
        }
        return Ok(());
    };
    let mut dims = Vec::with_capacity(shape.len());
    for e in &shape {
        match shape_dim(ctx, e) {
            Some(d) => dims.push(d),
            None => {
                ctx.invalid(format!("the shape holds a negative size {e:?}"));
                return unknown_outputs(ctx);
            }
        }
    }
    ctx.set_dims(0, dims.clone());
    let sizes = known_sizes(ctx, &dims);
    if let (Some(sizes), Some(one)) = (sizes, one) {
        // Float fills are weights more often than shape arithmetic: keep small ones only.
        let cap = if matches!(one, ConstData::Floats(_) | ConstData::Strings(_)) {
            crate::rule::MAX_FLOAT_ELEMS
        } else {
            MAX_ELEMS
        };
        if let Some(data) = numel(&sizes).filter(|&n| n <= cap).and_then(|n| repeat(&one, n)) {
            ctx.set_value(0, ConstValue { dtype, shape: sizes, data });
        }
    }
    Ok(())
}

/// `Constant`: the value of whichever `value*` attribute is set.
fn constant(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(t) = ctx.attr_tensor("value") {
        match ctx.attr_tensor_value("value") {
            Some(v) => ctx.set_value(0, v),
            None => {
                let sizes: Vec<u64> = t.dims.iter().map(|&d| d.max(0) as u64).collect();
                ctx.set_sizes(0, &sizes);
                ctx.set_dtype(0, t.elem_type());
            }
        }
        return Ok(());
    }
    if let Some(AttrValue::SparseTensor(st)) = ctx.attr("sparse_value").and_then(|a| a.value()) {
        let sizes: Vec<u64> = st.dims.iter().map(|&d| d.max(0) as u64).collect();
        ctx.set_sizes(0, &sizes);
        if let Some(values) = &st.values {
            ctx.set_dtype(0, values.elem_type());
        }
        return Ok(());
    }
    let float = |v: Vec<f64>, shape| ConstValue { dtype: ElemType::Float, shape, data: ConstData::Floats(v) };
    let string = |v: Vec<Vec<u8>>, shape| ConstValue { dtype: ElemType::String, shape, data: ConstData::Strings(v) };
    let value = if let Some(f) = ctx.attr_float("value_float") {
        float(vec![f as f64], vec![])
    } else if let Some(fs) = ctx.attr_floats("value_floats") {
        let n = fs.len();
        float(fs.into_iter().map(f64::from).collect(), vec![n])
    } else if let Some(i) = ctx.attr_int("value_int") {
        ConstValue::int_scalar(Elem::Int(i))
    } else if let Some(is) = ctx.attr_ints("value_ints") {
        ConstValue::int_vector(is.into_iter().map(Elem::Int).collect())
    } else if let Some(s) = ctx.attr_str("value_string") {
        string(vec![s.into_bytes()], vec![])
    } else if let Some(ss) = ctx.attr_strs("value_strings") {
        let n = ss.len();
        string(ss.into_iter().map(String::into_bytes).collect(), vec![n])
    } else {
        ctx.invalid("Constant sets none of its value attributes");
        return unknown_outputs(ctx);
    };
    ctx.set_value(0, value);
    Ok(())
}

/// The length of `Range(start, limit, delta)` when it is a size expression.
fn symbolic_range_len(start: &Elem, limit: &Elem, delta: &Elem) -> Option<SizeExpr> {
    let (Elem::Int(s), Elem::Int(d)) = (start, delta) else { return None };
    if *d <= 0 {
        return None;
    }
    let span = limit.as_expr()?.add(&SizeExpr::constant(s.checked_neg()?))?;
    // The span of a well-formed range is a size: no negative term.
    if span.as_constant().is_none() && span.to_string().contains('-') {
        return None;
    }
    span.ceil_div(*d as u64)
}

/// `Range`: `max(ceil((limit - start) / delta), 0)` elements.
fn range(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dtype = ctx.same_dtype(&[0, 1, 2]);
    if let Some(t) = dtype {
        ctx.set_dtype(0, t);
    }
    let is_int = dtype.is_some_and(super::is_int_type);
    if is_int {
        if let (Some(s), Some(l), Some(d)) = (ctx.ints(0), ctx.ints(1), ctx.ints(2)) {
            let (Some(&s), Some(&l), Some(&d)) = (s.first(), l.first(), d.first()) else { return unknown_outputs(ctx) };
            if d == 0 {
                ctx.invalid("delta is 0");
                return unknown_outputs(ctx);
            }
            let (s128, l128, d128) = (s as i128, l as i128, d as i128);
            let span = l128 - s128;
            let len = if (span > 0) == (d > 0) && span != 0 { (span.abs() + d128.abs() - 1) / d128.abs() } else { 0 };
            let len = u64::try_from(len).unwrap_or(u64::MAX);
            if len as usize <= MAX_ELEMS {
                let elems = (0..len as i64).map(|i| Elem::Int(s + i * d)).collect();
                ctx.set_value(0, ConstValue::ints(dtype.unwrap_or(ElemType::Int64), vec![len as usize], elems));
            } else {
                ctx.set_sizes(0, &[len]);
            }
            return Ok(());
        }
        let elems = (ctx.elems(0), ctx.elems(1), ctx.elems(2));
        if let (Some(s), Some(l), Some(d)) = elems {
            if let (Some(s), Some(l), Some(d)) = (s.first(), l.first(), d.first()) {
                if let Some(len) = symbolic_range_len(s, l, d) {
                    let dim = dim_of_expr(ctx, len);
                    ctx.set_dims(0, vec![dim]);
                    // `Range(s ≥ 0, limit, d > 0)`: every element is in [0, limit).
                    if let (Elem::Int(0..), Some(limit)) = (s, l.as_expr()) {
                        ctx.set_index_bound(0, limit);
                    }
                    return Ok(());
                }
            }
        }
    } else if let (Some(s), Some(l), Some(d)) = (ctx.floats(0), ctx.floats(1), ctx.floats(2)) {
        let (Some(&s), Some(&l), Some(&d)) = (s.first(), l.first(), d.first()) else { return unknown_outputs(ctx) };
        if d == 0.0 || !(s.is_finite() && l.is_finite() && d.is_finite()) {
            ctx.invalid("delta is 0 or an operand is not finite");
            return unknown_outputs(ctx);
        }
        let len = ((l - s) / d).ceil().max(0.0);
        if len <= MAX_ELEMS as f64 {
            let n = len as usize;
            let values = (0..n).map(|i| s + i as f64 * d).collect();
            let t = dtype.unwrap_or(ElemType::Float);
            ctx.set_value(0, ConstValue { dtype: t, shape: vec![n], data: ConstData::Floats(values) });
        } else {
            ctx.set_sizes(0, &[len as u64]);
        }
        return Ok(());
    }
    let d = ctx.unknown_dim();
    ctx.set_dims(0, vec![d]);
    Ok(())
}

/// `OneHot`: the indices' shape with an axis of size `depth` inserted at `axis`.
fn one_hot(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    if let Some(t) = ctx.dtype(2) {
        ctx.set_dtype(0, t);
    }
    let rank = dims.len() + 1;
    let Some(a) = ctx.axis(ctx.attr_int("axis").unwrap_or(-1), rank, "axis") else { return unknown_outputs(ctx) };
    let depth = match ctx.floats(1).and_then(|v| v.first().copied()) {
        Some(d) if (1.0..1e15).contains(&d) => ctx.known(d.trunc() as u64),
        Some(d) => {
            ctx.invalid(format!("depth {d} must be at least 1"));
            return unknown_outputs(ctx);
        }
        None => match ctx.elems(1).and_then(|v| v.first().cloned()) {
            Some(e @ (Elem::Expr(_) | Elem::Var(_))) => ctx.dim_of_elem(&e),
            _ => ctx.unknown_dim(),
        },
    };
    let mut out = dims;
    out.insert(a, depth);
    ctx.set_dims(0, out);
    Ok(())
}

/// `EyeLike`: the input's 2-D shape, of type `dtype` (the input's by default).
fn eye_like(ctx: &mut OpCtx) -> Result<(), Defer> {
    if let Some(row) = ctx.in_row(0) {
        ctx.set_row(0, row);
    }
    match ctx.attr_int("dtype") {
        Some(code) => ctx.set_dtype(0, ElemType::from_code(code as i32)),
        None => dtype_from(ctx, 0, 0),
    }
    Ok(())
}
