//! `Loop` and `Scan`: the body is lowered as a subgraph of the node.
//!
//! A `Loop` with a known, small trip count and a known starting condition is
//! unrolled: the body is lowered once per iteration with its iteration
//! number known, so every iteration's facts are exact (its values appear
//! once per iteration in the report). Otherwise the body is lowered with the
//! loop-carried values widened to a fixpoint: the first round assumes the
//! initial values; wherever the body's output differs from what it was
//! given, the next round gives the join of both (differing dims unknown,
//! differing ranks an unknown row), until the body preserves what it is
//! given — then those facts hold in every iteration. After a few rounds
//! without a fixpoint the carried shapes become unknown. The body's
//! condition input is `true` (the body only runs while the condition holds).
//! A scan output has one shape in every iteration (its slices are stacked).
//!
//! `Scan` state variables keep their shape across iterations (the body's
//! state outputs are constrained to the state inputs' shapes), so its body is
//! lowered once.

use super::facts::{closed_dims, join_facts, scalar, unknown, Tops};
use crate::rule::{ConstData, ConstValue, Defer, Elem, Facts, OpCtx, ValueKind};
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::{ElemType, GraphId};

/// Most iterations a `Loop` is unrolled for.
const MAX_UNROLL: i64 = 16;
/// Most widening rounds before carried shapes become unknown.
const MAX_ROUNDS: usize = 4;

/// Where a body's loop-carried values sit among its inputs and outputs.
struct Body {
    graph: GraphId,
    /// Inputs before the carried values (iteration number, condition).
    prefix: Vec<Facts>,
    /// Inputs after the carried values (scan slices).
    suffix: Vec<Facts>,
    /// Index of the first carried value among the body's outputs.
    out_offset: usize,
}

/// What the loop produces: final carried values, and per scan output the
/// facts of one iteration's slice (`None` when no iteration ran).
struct Outcome {
    carried: Vec<Facts>,
    slices: Vec<Option<Facts>>,
    outs: Vec<Facts>,
}

/// The boolean a scalar's known elements hold.
fn bool_value(f: &Facts) -> Option<bool> {
    match f.value.as_ref()?.as_i64s()?.as_slice() {
        [b] => Some(*b != 0),
        _ => None,
    }
}

/// Lowers `body` once with `carried` as its loop-carried inputs.
fn lower_body(ctx: &mut OpCtx, body: &Body, carried: &[Facts]) -> Vec<Facts> {
    let inputs = body.prefix.iter().chain(carried).chain(&body.suffix).cloned().map(Some).collect();
    ctx.lower_subgraph("body", body.graph, inputs)
}

/// The carried facts the body outputs (unknown where it outputs too few).
fn carried_outputs(ctx: &mut OpCtx, body: &Body, outs: &[Facts], n: usize) -> Vec<Facts> {
    (0..n).map(|k| outs.get(body.out_offset + k).cloned().unwrap_or_else(|| unknown(ctx))).collect()
}

/// Lowers the body until the carried facts are a fixpoint (see the module documentation).
fn fixpoint(ctx: &mut OpCtx, body: &Body, initial: Vec<Facts>, first_scan: usize, n_scan: usize) -> Outcome {
    let mut tops = Tops::default();
    let mut state = initial;
    let n = state.len();
    for _ in 0..MAX_ROUNDS {
        let outs = lower_body(ctx, body, &state);
        let produced = carried_outputs(ctx, body, &outs, n);
        let next: Vec<Facts> = state.iter().zip(&produced).map(|(a, b)| join_facts(ctx, &mut tops, a, b)).collect();
        let stable = next.iter().zip(&state).all(|(a, b)| super::facts::same_facts(ctx, a, b));
        if stable {
            let slices = (0..n_scan).map(|s| outs.get(first_scan + s).cloned()).collect();
            return Outcome { carried: state, slices, outs };
        }
        state = next;
    }
    let state: Vec<Facts> = state
        .into_iter()
        .map(|f| Facts {
            kind: f.kind,
            row: ctx.unknown_row(),
            dtype: f.dtype,
            value: None,
            items: None,
            present: None,
        })
        .collect();
    let outs = lower_body(ctx, body, &state);
    let slices = (0..n_scan).map(|s| outs.get(first_scan + s).cloned()).collect();
    Outcome { carried: state, slices, outs }
}

/// Lowers a `Scan` body once: its state outputs have the state inputs'
/// shapes and types (a state keeps its shape), and their elements are not
/// assumed.
fn lower_scan_body(ctx: &mut OpCtx, body: &Body, states: Vec<Facts>, n_scan: usize) -> Outcome {
    let given: Vec<Facts> = states.into_iter().map(|f| Facts { value: None, items: None, ..f }).collect();
    let outs = lower_body(ctx, body, &given);
    for (i, (f, o)) in given.iter().zip(&outs).enumerate() {
        let why = "a Scan state keeps its shape in every iteration";
        ctx.eq_rows(f.row.clone(), o.row.clone(), &format!("output {i}"), why);
        if let (Some(a), Some(b)) = (f.dtype, o.dtype) {
            if a != b {
                ctx.dtype_mismatch(format!("state {i} is {a} but the body outputs {b}; a state keeps its type"));
            }
        }
    }
    let slices = (0..n_scan).map(|s| outs.get(given.len() + s).cloned()).collect();
    Outcome { carried: given, slices, outs }
}

/// `row` with `d` inserted at `axis` (0 works for any row; others need the rank).
fn insert_axis(ctx: &mut OpCtx, row: &RowTerm, axis: usize, d: DimTerm) -> Option<RowTerm> {
    if axis == 0 {
        let mut leading = vec![d];
        leading.extend(row.leading.iter().cloned());
        return Some(RowTerm { leading, var: row.var, trailing: row.trailing.clone() });
    }
    let mut dims = closed_dims(ctx, row)?;
    if axis > dims.len() {
        return None;
    }
    dims.insert(axis, d);
    Some(RowTerm::closed(dims))
}

/// States a scan output: `slice`'s facts with the iteration axis `d` inserted at `axis`
/// (negative counts from the end of the output's rank).
fn set_scan_output(ctx: &mut OpCtx, j: usize, slice: Option<&Facts>, axis: i64, d: DimTerm) {
    let Some(slice) = slice else {
        let row = RowTerm { leading: vec![d], ..ctx.unknown_row() };
        ctx.set_row(j, row);
        return;
    };
    let axis = if axis >= 0 {
        Some(axis as usize)
    } else {
        closed_dims(ctx, &slice.row).and_then(|dims| usize::try_from(axis + dims.len() as i64 + 1).ok())
    };
    match axis.and_then(|a| insert_axis(ctx, &slice.row, a, d)) {
        Some(row) => ctx.set_row(j, row),
        None => {
            let row = ctx.unknown_row();
            ctx.set_row(j, row);
        }
    }
    if let Some(t) = slice.dtype {
        ctx.set_dtype(j, t);
    }
    ctx.set_kind(j, ValueKind::Tensor);
}

/// The facts of the body's iteration-number input.
fn iteration(i: Option<i64>) -> Facts {
    scalar(ElemType::Int64, i.map(|i| ConstValue::int_scalar(Elem::Int(i))))
}

/// The facts of the body's condition input: `true`, since the body only runs while it holds.
fn condition_true() -> Facts {
    scalar(
        ElemType::Bool,
        Some(ConstValue { dtype: ElemType::Bool, shape: Vec::new(), data: ConstData::Bools(vec![true]) }),
    )
}

/// `Loop` (every version).
pub(crate) fn loop_rule(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(g) = ctx.attr_graph("body") else {
        ctx.invalid("attribute body must be a graph");
        return Ok(());
    };
    let (n_in, n_out) = ctx.graph_arity(g);
    let n = ctx.input_count().saturating_sub(2);
    if n_in != n + 2 || n_out < n + 1 {
        ctx.invalid(format!(
            "the body has {n_in} inputs and {n_out} outputs; with {n} loop-carried values it needs {} inputs and at least {} outputs",
            n + 2,
            n + 1
        ));
        return Ok(());
    }
    let n_scan = n_out - 1 - n;
    let initial: Vec<Facts> = (0..n).map(|k| ctx.facts(2 + k).unwrap_or_else(|| unknown(ctx))).collect();
    let trips =
        if ctx.has_input(0) { ctx.elems(0).and_then(|e| e.first().cloned().filter(|_| e.len() == 1)) } else { None };
    let start = if ctx.has_input(1) { ctx.ints(1).and_then(|v| (v.len() == 1).then(|| v[0] != 0)) } else { Some(true) };
    let unrolled = match (&trips, start) {
        (Some(Elem::Int(m)), Some(s)) if *m <= MAX_UNROLL => unroll(ctx, g, &initial, if s { *m } else { 0 }, n_scan),
        _ => None,
    };
    let (outcome, count) = match unrolled {
        Some((o, ran)) => {
            let d = ctx.known(ran);
            (o, d)
        }
        None => {
            let body =
                Body { graph: g, prefix: vec![iteration(None), condition_true()], suffix: Vec::new(), out_offset: 1 };
            let o = fixpoint(ctx, &body, initial, 1 + n, n_scan);
            let runs_all = start == Some(true) && o.outs.first().and_then(bool_value) == Some(true);
            let d = match (&trips, runs_all, start) {
                (_, _, Some(false)) | (Some(Elem::Int(0)), _, _) => ctx.known(0),
                (Some(Elem::Int(m)), true, _) if *m > 0 => ctx.known(*m as u64),
                (Some(e @ (Elem::Expr(_) | Elem::Var(_))), true, _) => ctx.dim_of_elem(e),
                _ => ctx.unknown_dim(),
            };
            (o, d)
        }
    };
    for (k, f) in outcome.carried.into_iter().enumerate() {
        ctx.set_facts(k, f);
    }
    for s in 0..n_scan {
        set_scan_output(ctx, n + s, outcome.slices.get(s).and_then(Option::as_ref), 0, count.clone());
    }
    Ok(())
}

/// Lowers the body for each of `m` iterations in turn. Gives up (`None`)
/// when an iteration's condition output is not known.
fn unroll(ctx: &mut OpCtx, g: GraphId, initial: &[Facts], m: i64, n_scan: usize) -> Option<(Outcome, u64)> {
    let n = initial.len();
    let mut state = initial.to_vec();
    let mut slices: Vec<Option<Facts>> = vec![None; n_scan];
    let mut ran = 0u64;
    let mut last = Vec::new();
    for i in 0..m.max(0) {
        let body =
            Body { graph: g, prefix: vec![iteration(Some(i)), condition_true()], suffix: Vec::new(), out_offset: 1 };
        let outs = lower_body(ctx, &body, &state);
        let cond = outs.first().and_then(bool_value)?;
        state = carried_outputs(ctx, &body, &outs, n);
        for (s, slot) in slices.iter_mut().enumerate() {
            let Some(f) = outs.get(1 + n + s) else { continue };
            match slot {
                None => *slot = Some(f.clone()),
                Some(first) => {
                    let why = "a scan output has the same shape in every iteration";
                    ctx.eq_rows(first.row.clone(), f.row.clone(), &format!("output {}", n + s), why);
                    if first.dtype != f.dtype {
                        first.dtype = None;
                    }
                }
            }
        }
        ran += 1;
        last = outs;
        if !cond {
            break;
        }
    }
    Some((Outcome { carried: state, slices, outs: last }, ran))
}

/// `Scan` (opset 8: with a batch axis; 9 on: scan axes and directions).
pub(crate) fn scan_rule(ctx: &mut OpCtx) -> Result<(), Defer> {
    if ctx.version() < 9 {
        scan8(ctx)
    } else {
        scan9(ctx)
    }
}

/// The body and the counts of state and scan inputs, validated.
fn scan_shape(ctx: &mut OpCtx, first: usize) -> Option<(GraphId, usize, usize, usize)> {
    let Some(g) = ctx.attr_graph("body") else {
        ctx.invalid("attribute body must be a graph");
        return None;
    };
    let given = ctx.input_count().saturating_sub(first);
    let m = ctx.attr_int("num_scan_inputs").unwrap_or(-1);
    if m < 1 || m as usize > given {
        ctx.invalid(format!("num_scan_inputs {m} must be between 1 and the {given} state and scan inputs"));
        return None;
    }
    let m = m as usize;
    let n_state = given - m;
    let (n_in, n_out) = ctx.graph_arity(g);
    if n_in != given || n_out < n_state {
        ctx.invalid(format!(
            "the body has {n_in} inputs and {n_out} outputs; with {n_state} state and {m} scan inputs it needs {given} inputs and at least {n_state} outputs"
        ));
        return None;
    }
    Some((g, n_state, m, n_out - n_state))
}

/// Reads an `ints` attribute of `len` entries, `default` when absent; reports a wrong length.
fn per_value_attr(ctx: &mut OpCtx, name: &str, len: usize, default: i64) -> Option<Vec<i64>> {
    match ctx.attr_ints(name) {
        None => Some(vec![default; len]),
        Some(v) if v.len() == len => Some(v),
        Some(v) => {
            ctx.invalid(format!("{name} has {} entries but there are {len} values", v.len()));
            None
        }
    }
}

/// Checks that every direction is 0 (forward) or 1 (reverse).
fn check_directions(ctx: &mut OpCtx, name: &str, v: &[i64]) -> bool {
    if let Some(d) = v.iter().find(|&&d| d != 0 && d != 1) {
        ctx.invalid(format!("{name} entry {d} must be 0 (forward) or 1 (reverse)"));
        return false;
    }
    true
}

/// A tensor's facts with the given shape and input `i`'s type.
fn slice_facts(ctx: &OpCtx, i: usize, dims: Vec<DimTerm>) -> Facts {
    Facts::tensor(RowTerm::closed(dims), ctx.dtype(i))
}

/// `Scan` from opset 9: scan inputs sliced along `scan_input_axes`, scan
/// outputs stacked along `scan_output_axes`.
fn scan9(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some((g, n_state, m, k)) = scan_shape(ctx, 0) else { return Ok(()) };
    let mut in_dims = Vec::with_capacity(m);
    for j in 0..m {
        in_dims.push(ctx.need_dims(n_state + j)?);
    }
    let Some(in_axes) = per_value_attr(ctx, "scan_input_axes", m, 0) else { return Ok(()) };
    let Some(out_axes) = per_value_attr(ctx, "scan_output_axes", k, 0) else { return Ok(()) };
    let Some(in_dirs) = per_value_attr(ctx, "scan_input_directions", m, 0) else { return Ok(()) };
    let Some(out_dirs) = per_value_attr(ctx, "scan_output_directions", k, 0) else { return Ok(()) };
    if !check_directions(ctx, "scan_input_directions", &in_dirs)
        || !check_directions(ctx, "scan_output_directions", &out_dirs)
    {
        return Ok(());
    }
    let mut slices = Vec::with_capacity(m);
    let mut length: Option<DimTerm> = None;
    for (j, mut dims) in in_dims.into_iter().enumerate() {
        let Some(a) = ctx.axis(in_axes[j], dims.len(), "scan_input_axes entry") else { return Ok(()) };
        let d = dims.remove(a);
        match &length {
            None => length = Some(d),
            Some(l) => {
                ctx.eq_dims(l.clone(), d, &format!("input {}", n_state + j), "scan inputs share the sequence length")
            }
        }
        slices.push(slice_facts(ctx, n_state + j, dims));
    }
    let length = length.unwrap_or_else(|| ctx.unknown_dim());
    let initial: Vec<Facts> = (0..n_state).map(|i| ctx.facts(i).unwrap_or_else(|| unknown(ctx))).collect();
    let body = Body { graph: g, prefix: Vec::new(), suffix: slices, out_offset: 0 };
    let outcome = lower_scan_body(ctx, &body, initial, k);
    for (i, f) in outcome.carried.into_iter().enumerate() {
        ctx.set_facts(i, f);
    }
    for (s, &axis) in out_axes.iter().enumerate().take(k) {
        set_scan_output(ctx, n_state + s, outcome.slices.get(s).and_then(Option::as_ref), axis, length.clone());
    }
    Ok(())
}

/// `Scan` at opset 8: every input and output has a leading batch axis; scan
/// inputs and outputs have the sequence axis next.
fn scan8(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some((g, n_state, m, k)) = scan_shape(ctx, 1) else { return Ok(()) };
    let mut all_dims = Vec::with_capacity(n_state + m);
    for i in 0..n_state + m {
        all_dims.push(ctx.need_dims(1 + i)?);
    }
    let Some(dirs) = per_value_attr(ctx, "directions", m, 0) else { return Ok(()) };
    if !check_directions(ctx, "directions", &dirs) {
        return Ok(());
    }
    let mut batch: Option<DimTerm> = None;
    let mut length: Option<DimTerm> = None;
    let mut states = Vec::with_capacity(n_state);
    let mut slices = Vec::with_capacity(m);
    for (i, dims) in all_dims.into_iter().enumerate() {
        let is_scan = i >= n_state;
        let need = if is_scan { 2 } else { 1 };
        if dims.len() < need {
            let what = if is_scan { "a batch and a sequence axis" } else { "a batch axis" };
            ctx.rank_conflict(1 + i, format!("input {} has rank {} but needs {what}", 1 + i, dims.len()));
            return Ok(());
        }
        let operand = format!("input {}", 1 + i);
        match &batch {
            None => batch = Some(dims[0].clone()),
            Some(b) => ctx.eq_dims(b.clone(), dims[0].clone(), &operand, "inputs share the batch size"),
        }
        if is_scan {
            match &length {
                None => length = Some(dims[1].clone()),
                Some(l) => ctx.eq_dims(l.clone(), dims[1].clone(), &operand, "scan inputs share the sequence length"),
            }
            slices.push(slice_facts(ctx, 1 + i, dims[2..].to_vec()));
        } else {
            states.push(slice_facts(ctx, 1 + i, dims[1..].to_vec()));
        }
    }
    let batch = batch.unwrap_or_else(|| ctx.unknown_dim());
    // With sequence_lens, sequences may be shorter than the inputs' axis; the
    // outputs' sequence axis is then not determined here.
    let length = match length {
        Some(l) if !ctx.has_input(0) => l,
        _ => ctx.unknown_dim(),
    };
    let body = Body { graph: g, prefix: Vec::new(), suffix: slices, out_offset: 0 };
    let outcome = lower_scan_body(ctx, &body, states, k);
    for (i, f) in outcome.carried.into_iter().enumerate() {
        let row = RowTerm { leading: [vec![batch.clone()], f.row.leading.clone()].concat(), ..f.row.clone() };
        ctx.set_row(i, row);
        if let Some(t) = f.dtype {
            ctx.set_dtype(i, t);
        }
    }
    for s in 0..k {
        let slice = outcome.slices.get(s).and_then(Option::as_ref).map(|f| Facts {
            row: RowTerm { leading: [vec![length.clone()], f.row.leading.clone()].concat(), ..f.row.clone() },
            ..f.clone()
        });
        set_scan_output(ctx, n_state + s, slice.as_ref(), 0, batch.clone());
    }
    Ok(())
}
