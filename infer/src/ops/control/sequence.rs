//! Sequence operators. A sequence's facts describe every element at once
//! (`row`/`dtype`: their common shape, unknown dims where they differ) and,
//! when its length and elements are known, list them in `items`: then
//! `SequenceAt` with a known position and `SequenceLength` are exact.

use super::facts::{element_of, join_row, unknown, Tops};
use crate::constraint::{Constraint, SizeSum};
use crate::rule::{ConstValue, Defer, Elem, Facts, OpCtx, ValueKind};
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;

/// Most items a sequence lists; a longer one keeps only its common facts.
const MAX_ITEMS: u64 = 4096;
/// Most elements `SequenceMap` lowers its body for, one by one.
const MAX_MAPPED: usize = 16;

/// A sequence of elements of kind `inner` whose common facts are `row`/`dtype`.
fn sequence(inner: ValueKind, row: RowTerm, dtype: Option<ElemType>, items: Option<Vec<Facts>>) -> Facts {
    Facts { kind: ValueKind::Sequence(Box::new(inner)), row, dtype, value: None, items, present: None }
}

/// A sequence listing `items`, its common facts their join.
fn sequence_of(ctx: &mut OpCtx, inner: ValueKind, dtype: Option<ElemType>, items: Vec<Facts>) -> Facts {
    let mut tops = Tops::default();
    let mut row: Option<RowTerm> = None;
    for f in &items {
        row = Some(match row {
            None => super::facts::resolve_row(ctx, &f.row),
            Some(r) => join_row(ctx, &mut tops, &r, &f.row),
        });
    }
    let row = row.unwrap_or_else(|| ctx.unknown_row());
    sequence(inner, row, dtype, Some(items))
}

/// Input `i`'s facts, or an unknown.
fn input_facts(ctx: &mut OpCtx, i: usize) -> Facts {
    ctx.facts(i).unwrap_or_else(|| unknown(ctx))
}

/// The element kind of a sequence's facts (a tensor when not known).
fn element_kind(f: &Facts) -> ValueKind {
    match &f.kind {
        ValueKind::Sequence(k) => (**k).clone(),
        _ => ValueKind::Tensor,
    }
}

/// Input `i`'s single known integer (a position), if any.
fn known_position(ctx: &mut OpCtx, i: usize) -> Option<i64> {
    match ctx.ints(i)?.as_slice() {
        [p] => Some(*p),
        _ => None,
    }
}

/// Normalizes a position against a sequence of length `n`; `end_ok` allows `n` itself (insertion).
fn normalize_position(ctx: &mut OpCtx, p: i64, n: usize, end_ok: bool) -> Option<usize> {
    let n = n as i64;
    let hi = if end_ok { n } else { n - 1 };
    if p < -n || p > hi {
        ctx.invalid(format!("position {p} is out of range for a sequence of length {n} (allowed {}..={hi})", -n));
        return None;
    }
    Some(if p < 0 { (p + n) as usize } else { p as usize })
}

/// `SequenceEmpty`: no elements, of type `dtype` (default float).
pub(crate) fn sequence_empty(ctx: &mut OpCtx) -> Result<(), Defer> {
    let code = ctx.attr_int("dtype").unwrap_or(1);
    let t = i32::try_from(code)
        .map(ElemType::from_code)
        .ok()
        .filter(|t| !matches!(t, ElemType::Unknown(_) | ElemType::Undefined));
    let Some(t) = t else {
        ctx.invalid(format!("dtype {code} is not a tensor element type"));
        return Ok(());
    };
    let row = ctx.unknown_row();
    ctx.set_facts(0, sequence(ValueKind::Tensor, row, Some(t), Some(Vec::new())));
    Ok(())
}

/// `SequenceConstruct`: the inputs, in order; one element type.
pub(crate) fn sequence_construct(ctx: &mut OpCtx) -> Result<(), Defer> {
    let n = ctx.input_count();
    let t = ctx.same_dtype(&(0..n).collect::<Vec<_>>());
    let items: Vec<Facts> = (0..n).map(|i| input_facts(ctx, i)).collect();
    let inner = items.first().map_or(ValueKind::Tensor, |f| f.kind.clone());
    let f = sequence_of(ctx, inner, t, items);
    ctx.set_facts(0, f);
    Ok(())
}

/// Reports a tensor whose type differs from the sequence's.
fn check_element_type(ctx: &mut OpCtx, seq: &Facts, i: usize) -> Option<ElemType> {
    if !matches!(seq.kind, ValueKind::Sequence(_)) {
        return ctx.dtype(i);
    }
    match (seq.dtype, ctx.dtype(i)) {
        (Some(s), Some(t)) if s != t => {
            ctx.dtype_mismatch(format!("the sequence holds {s} but input {i} is {t}"));
            Some(s)
        }
        (s, t) => s.or(t),
    }
}

/// `SequenceInsert`: the tensor inserted at `position` (default: at the end).
pub(crate) fn sequence_insert(ctx: &mut OpCtx) -> Result<(), Defer> {
    let seq = input_facts(ctx, 0);
    let tensor = input_facts(ctx, 1);
    let t = check_element_type(ctx, &seq, 1);
    let position = if ctx.has_input(2) { known_position(ctx, 2).map(Some) } else { Some(None) };
    let mut items = None;
    if let (Some(list), Some(p)) = (&seq.items, position) {
        let at = match p {
            None => Some(list.len()),
            Some(p) => normalize_position(ctx, p, list.len(), true),
        };
        let Some(at) = at else { return Ok(()) };
        if (list.len() as u64) < MAX_ITEMS {
            let mut list = list.clone();
            list.insert(at, tensor.clone());
            items = Some(list);
        }
    }
    let row = if seq.items.as_ref().is_some_and(Vec::is_empty) {
        super::facts::resolve_row(ctx, &tensor.row)
    } else {
        let mut tops = Tops::default();
        join_row(ctx, &mut tops, &seq.row, &tensor.row)
    };
    ctx.set_facts(0, sequence(tensor.kind.clone(), row, t, items));
    Ok(())
}

/// `SequenceErase`: the element at `position` (default: the last) removed.
pub(crate) fn sequence_erase(ctx: &mut OpCtx) -> Result<(), Defer> {
    let seq = input_facts(ctx, 0);
    let position = if ctx.has_input(1) { known_position(ctx, 1) } else { Some(-1) };
    let inner = element_kind(&seq);
    if let Some(list) = &seq.items {
        if list.is_empty() {
            ctx.invalid("cannot erase from an empty sequence");
            return Ok(());
        }
        if let Some(p) = position {
            let Some(at) = normalize_position(ctx, p, list.len(), false) else { return Ok(()) };
            let mut list = list.clone();
            list.remove(at);
            let f = if list.is_empty() {
                let row = ctx.unknown_row();
                sequence(inner, row, seq.dtype, Some(list))
            } else {
                sequence_of(ctx, inner, seq.dtype, list)
            };
            ctx.set_facts(0, f);
            return Ok(());
        }
    }
    ctx.set_facts(0, sequence(inner, seq.row.clone(), seq.dtype, None));
    Ok(())
}

/// `SequenceAt`: the element at `position`.
pub(crate) fn sequence_at(ctx: &mut OpCtx) -> Result<(), Defer> {
    let seq = input_facts(ctx, 0);
    if let (Some(list), Some(p)) = (&seq.items, known_position(ctx, 1)) {
        let Some(at) = normalize_position(ctx, p, list.len(), false) else { return Ok(()) };
        if let Some(f) = list.get(at) {
            ctx.set_facts(0, f.clone());
            return Ok(());
        }
    }
    ctx.set_facts(0, element_of(&seq));
    Ok(())
}

/// `SequenceLength`: an int64 scalar, known when the items are.
pub(crate) fn sequence_length(ctx: &mut OpCtx) -> Result<(), Defer> {
    let seq = input_facts(ctx, 0);
    match &seq.items {
        Some(list) => ctx.set_value(0, ConstValue::int_scalar(Elem::Int(list.len() as i64))),
        None => {
            ctx.set_dims(0, Vec::new());
            ctx.set_dtype(0, ElemType::Int64);
        }
    }
    Ok(())
}

/// How `SplitToSequence` cuts its axis.
enum Cut {
    /// Pieces of size 1 (no `split` input).
    Ones,
    /// Pieces of this size, the last one smaller (a scalar `split`).
    Chunks(i64),
    /// Pieces of these sizes (a 1-D `split`).
    Sizes(Vec<i64>),
    /// A `split` whose elements are not known.
    Unknown,
}

/// `SplitToSequence`: the input cut along `axis` into a sequence.
pub(crate) fn split_to_sequence(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let Some(axis) = ctx.axis(ctx.attr_int("axis").unwrap_or(0), dims.len(), "axis") else { return Ok(()) };
    let keepdims = ctx.attr_int("keepdims").unwrap_or(1) != 0;
    let t = ctx.dtype(0);
    let cut = if !ctx.has_input(1) {
        Cut::Ones
    } else {
        match ctx.value(1) {
            Some(v) => match (v.shape.len(), v.as_i64s()) {
                (0, Some(s)) if s.len() == 1 => Cut::Chunks(s[0]),
                (1, Some(s)) => Cut::Sizes(s),
                (_, Some(_)) => {
                    ctx.invalid("split must be a scalar or a 1-D tensor");
                    return Ok(());
                }
                _ => Cut::Unknown,
            },
            None => Cut::Unknown,
        }
    };
    let whole = ctx.size_of(&dims[axis]);
    let piece = |d: Option<DimTerm>| {
        let mut p = dims.clone();
        match d {
            Some(d) => p[axis] = d,
            None => {
                p.remove(axis);
            }
        }
        Facts::tensor(RowTerm::closed(p), t)
    };
    let f = match cut {
        Cut::Ones => {
            let d = if keepdims { Some(ctx.known(1)) } else { None };
            let one = piece(d);
            let items = whole.filter(|&n| n <= MAX_ITEMS).map(|n| vec![one.clone(); n as usize]);
            sequence(ValueKind::Tensor, one.row, t, items)
        }
        Cut::Chunks(c) if c <= 0 => {
            ctx.invalid(format!("split {c} must be positive"));
            return Ok(());
        }
        Cut::Chunks(c) => match whole {
            Some(n) if n.div_ceil(c as u64) <= MAX_ITEMS => {
                let c = c as u64;
                let count = n.div_ceil(c);
                let items: Vec<Facts> = (0..count)
                    .map(|k| {
                        let size = c.min(n - k * c);
                        let d = ctx.known(size);
                        piece(Some(d))
                    })
                    .collect();
                sequence_of(ctx, ValueKind::Tensor, t, items)
            }
            _ => {
                let d = ctx.unknown_dim();
                let p = piece(Some(d));
                sequence(ValueKind::Tensor, p.row, t, None)
            }
        },
        Cut::Sizes(sizes) => {
            if let Some(s) = sizes.iter().find(|&&s| s < 0) {
                ctx.invalid(format!("split sizes must not be negative (found {s})"));
                return Ok(());
            }
            if sizes.len() as u64 > MAX_ITEMS {
                let d = ctx.unknown_dim();
                let p = piece(Some(d));
                sequence(ValueKind::Tensor, p.row, t, None)
            } else {
                let parts: Vec<DimTerm> = sizes.iter().map(|&s| ctx.known(s as u64)).collect();
                let total: u64 = sizes.iter().map(|&s| s as u64).fold(0u64, u64::saturating_add);
                if let Some(n) = whole {
                    if n != total {
                        ctx.invalid(format!("split sizes sum to {total} but axis {axis} has size {n}"));
                        return Ok(());
                    }
                } else {
                    let cause = ctx.cause("input 1", "the split sizes sum to the axis");
                    ctx.constrain(Constraint::Sum(Box::new(SizeSum {
                        total: dims[axis].clone(),
                        parts: parts.clone(),
                        cause,
                    })));
                }
                let items: Vec<Facts> = parts.into_iter().map(|d| piece(Some(d))).collect();
                sequence_of(ctx, ValueKind::Tensor, t, items)
            }
        }
        Cut::Unknown => {
            let d = ctx.unknown_dim();
            let p = piece(Some(d));
            sequence(ValueKind::Tensor, p.row, t, None)
        }
    };
    ctx.set_facts(0, f);
    Ok(())
}

/// `ConcatFromSequence`: the elements concatenated along `axis`, or stacked
/// along a new axis (`new_axis` = 1).
pub(crate) fn concat_from_sequence(ctx: &mut OpCtx) -> Result<(), Defer> {
    let mut dims = ctx.need_dims(0)?;
    let seq = input_facts(ctx, 0);
    let new_axis = ctx.attr_int("new_axis").unwrap_or(0);
    if new_axis != 0 && new_axis != 1 {
        ctx.invalid(format!("new_axis {new_axis} must be 0 or 1"));
        return Ok(());
    }
    let Some(axis) = ctx.attr_int("axis") else {
        ctx.invalid("attribute axis is required");
        return Ok(());
    };
    let rank = dims.len() + new_axis as usize;
    let Some(axis) = ctx.axis(axis, rank, "axis") else { return Ok(()) };
    if let Some(t) = seq.dtype {
        ctx.set_dtype(0, t);
    }
    if seq.items.as_ref().is_some_and(Vec::is_empty) {
        ctx.invalid("cannot concatenate an empty sequence");
        return Ok(());
    }
    if new_axis == 1 {
        let d = match &seq.items {
            Some(list) => ctx.known(list.len() as u64),
            None => ctx.unknown_dim(),
        };
        dims.insert(axis, d);
    } else {
        dims[axis] = concat_size(ctx, &seq, axis);
    }
    ctx.set_dims(0, dims);
    Ok(())
}

/// The concatenated size along `axis`: the sum of the items' sizes, when listed.
fn concat_size(ctx: &mut OpCtx, seq: &Facts, axis: usize) -> DimTerm {
    let Some(list) = &seq.items else { return ctx.unknown_dim() };
    let mut parts = Vec::with_capacity(list.len());
    for f in list {
        match super::facts::closed_dims(ctx, &f.row).and_then(|d| d.get(axis).cloned()) {
            Some(d) => parts.push(d),
            None => return ctx.unknown_dim(),
        }
    }
    let total = ctx.fresh_dim();
    let cause = ctx.cause("input 0", "the concatenated axis is the sum of the elements' axes");
    ctx.constrain(Constraint::Sum(Box::new(SizeSum { total: total.clone(), parts, cause })));
    total
}

/// `SequenceMap`: the body applied to each element of the input sequences
/// (tensor inputs passed whole); each output is a sequence.
pub(crate) fn sequence_map(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(g) = ctx.attr_graph("body") else {
        ctx.invalid("attribute body must be a graph");
        return Ok(());
    };
    let n = ctx.input_count();
    let (n_in, n_out) = ctx.graph_arity(g);
    if n_in != n || n_out != ctx.output_count() {
        let m = ctx.output_count();
        ctx.invalid(format!("the body has {n_in} inputs and {n_out} outputs but the node has {n} and {m}"));
        return Ok(());
    }
    let inputs: Vec<Facts> = (0..n).map(|i| input_facts(ctx, i)).collect();
    let is_seq = |f: &Facts| matches!(f.kind, ValueKind::Sequence(_));
    let lengths: Vec<Option<usize>> =
        inputs.iter().filter(|f| is_seq(f)).map(|f| f.items.as_ref().map(Vec::len)).collect();
    let len = lengths.first().copied().flatten();
    if let Some(l) = len {
        if let Some(other) = lengths.iter().flatten().find(|&&m| m != l) {
            ctx.invalid(format!("the input sequences have different lengths ({l} and {other})"));
            return Ok(());
        }
    }
    let all_listed = lengths.iter().all(Option::is_some);
    match len {
        Some(l) if all_listed && l <= MAX_MAPPED => map_each(ctx, g, &inputs, l, n_out),
        _ => map_once(ctx, g, &inputs, n_out),
    }
    Ok(())
}

/// Lowers the body once per element, listing every output's items.
fn map_each(ctx: &mut OpCtx, g: diamond_ir::GraphId, inputs: &[Facts], len: usize, n_out: usize) {
    let mut per_output: Vec<Vec<Facts>> = vec![Vec::with_capacity(len); n_out];
    for k in 0..len {
        let args = inputs
            .iter()
            .map(|f| match (&f.kind, &f.items) {
                (ValueKind::Sequence(_), Some(list)) => list.get(k).cloned(),
                _ => Some(f.clone()),
            })
            .collect();
        let outs = ctx.lower_subgraph("body", g, args);
        for (j, f) in outs.into_iter().enumerate().take(n_out) {
            per_output[j].push(f);
        }
    }
    for (j, items) in per_output.into_iter().enumerate() {
        let inner = items.first().map_or(ValueKind::Tensor, |f| f.kind.clone());
        let mut dtype = items.first().and_then(|f| f.dtype);
        if items.iter().any(|f| f.dtype != dtype) {
            dtype = None;
        }
        let f = if items.is_empty() {
            let row = ctx.unknown_row();
            sequence(inner, row, None, Some(items))
        } else {
            sequence_of(ctx, inner, dtype, items)
        };
        ctx.set_facts(j, f);
    }
}

/// Lowers the body once with each sequence's common element facts.
fn map_once(ctx: &mut OpCtx, g: diamond_ir::GraphId, inputs: &[Facts], n_out: usize) {
    let args = inputs
        .iter()
        .map(|f| Some(if matches!(f.kind, ValueKind::Sequence(_)) { element_of(f) } else { f.clone() }))
        .collect();
    let outs = ctx.lower_subgraph("body", g, args);
    for (j, f) in outs.into_iter().enumerate().take(n_out) {
        ctx.set_facts(j, sequence(f.kind.clone(), f.row.clone(), f.dtype, None));
    }
}
