//! Control flow (`If`, `Loop`, `Scan`), sequences and optionals. Subgraphs
//! run through [`NodeCtx::run_subgraph`], which binds their inputs in order
//! and lets them read the enclosing graph's values by name.

use super::shape_ops::{concat_tensors, narrow};
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Tensor, Value};
use diamond_ir::ElemType;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "If" => if_(ctx),
        "Loop" => loop_(ctx),
        "Scan" => scan(ctx),
        "SequenceEmpty" => {
            let elem = ctx.attr_opt_i("dtype").map_or(ElemType::Float, |c| ElemType::from_code(c as i32));
            Ok(vec![Some(Value::Sequence(elem, Vec::new()))])
        }
        "SequenceConstruct" => sequence_construct(ctx),
        "SequenceLength" => seq(ctx, 0).and_then(|(_, s)| one(Tensor::scalar(Data::I64(vec![s.len() as i64])))),
        "SequenceAt" => sequence_at(ctx),
        "SequenceInsert" => sequence_insert(ctx),
        "SequenceErase" => sequence_erase(ctx),
        "SplitToSequence" => split_to_sequence(ctx),
        "ConcatFromSequence" => concat_from_sequence(ctx),
        "SequenceMap" => sequence_map(ctx),
        "Optional" => Ok(vec![Some(Value::Optional(ctx.value(0).map(|v| Box::new(v.clone()))))]),
        "OptionalHasElement" => {
            let has = match ctx.value(0) {
                None | Some(Value::Optional(None)) => false,
                Some(_) => true,
            };
            one(Tensor::scalar(Data::Bool(vec![has])))
        }
        "OptionalGetElement" => match ctx.value(0) {
            Some(Value::Optional(Some(v))) => Ok(vec![Some((**v).clone())]),
            Some(Value::Optional(None)) | None => Err(ctx.err("the optional is empty")),
            Some(v) => Ok(vec![Some(v.clone())]),
        },
        _ => return None,
    })
}

fn scalar_bool(ctx: &NodeCtx<'_>, t: &Tensor) -> Result<bool> {
    t.to_f64s()
        .and_then(|v| v.first().copied())
        .map(|v| v != 0.0)
        .ok_or_else(|| ctx.err("a scalar condition is required"))
}

fn if_(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let cond = scalar_bool(ctx, ctx.input(0)?)?;
    let branch = ctx
        .attr_graph(if cond { "then_branch" } else { "else_branch" })
        .ok_or_else(|| ctx.err("both branches are required"))?;
    Ok(ctx.run_subgraph(branch, Vec::new())?.into_iter().map(Some).collect())
}

/// `items` stacked along a new axis `axis`.
fn stack(ctx: &NodeCtx<'_>, items: &[Tensor], axis: usize) -> Result<Tensor> {
    let expanded: Vec<Tensor> = items
        .iter()
        .map(|t| {
            let mut s = t.shape.clone();
            s.insert(axis.min(s.len()), 1);
            Tensor { shape: s, data: t.data.clone() }
        })
        .collect();
    let refs: Vec<&Tensor> = expanded.iter().collect();
    concat_tensors(ctx, &refs, axis)
}

fn loop_(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let body = ctx.attr_graph("body").ok_or_else(|| ctx.err("body is required"))?;
    let max = match ctx.opt_input(0)? {
        Some(t) => Some(t.to_i64s().and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("M must be a scalar"))?),
        None => None,
    };
    let mut cond = match ctx.opt_input(1)? {
        Some(t) => scalar_bool(ctx, t)?,
        None => true,
    };
    let mut carried: Vec<Value> = (2..ctx.n_inputs())
        .map(|i| ctx.value(i).cloned().ok_or_else(|| ctx.err(format!("loop-carried operand {i} is missing"))))
        .collect::<Result<_>>()?;
    let n_carried = carried.len();
    let n_scan = ctx.node.outputs.len().saturating_sub(n_carried);
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_scan];
    let mut i: i64 = 0;
    while cond && max.is_none_or(|m| i < m) {
        let mut inputs = vec![
            Value::Tensor(Tensor::scalar(Data::I64(vec![i]))),
            Value::Tensor(Tensor::scalar(Data::Bool(vec![cond]))),
        ];
        inputs.extend(carried.iter().cloned());
        let outs = ctx.run_subgraph(body, inputs)?;
        if outs.len() != 1 + n_carried + n_scan {
            return Err(ctx.err(format!(
                "the body returns {} values, {} expected",
                outs.len(),
                1 + n_carried + n_scan
            )));
        }
        let mut it = outs.into_iter();
        let c = it.next().and_then(|v| v.as_tensor().cloned()).ok_or_else(|| ctx.err("the body's condition"))?;
        cond = scalar_bool(ctx, &c)?;
        carried = it.by_ref().take(n_carried).collect();
        for (k, v) in it.enumerate() {
            match v {
                Value::Tensor(t) => scans[k].push(t),
                _ => return Err(ctx.unsupported("scan outputs that are not tensors")),
            }
        }
        i += 1;
        if i > 10_000_000 {
            return Err(ctx.err("more than 10 million iterations"));
        }
    }
    let mut outs: Outs = carried.into_iter().map(Some).collect();
    for s in scans {
        if s.is_empty() {
            outs.push(Some(Value::Tensor(Tensor { shape: vec![0], data: Data::F32(Vec::new()) })));
        } else {
            outs.push(Some(Value::Tensor(stack(ctx, &s, 0)?)));
        }
    }
    Ok(outs)
}

fn scan(ctx: &NodeCtx<'_>) -> Result<Outs> {
    if ctx.opset < 9 {
        return scan8(ctx);
    }
    let body = ctx.attr_graph("body").ok_or_else(|| ctx.err("body is required"))?;
    let m = ctx.attr_i("num_scan_inputs", 0) as usize;
    let n = ctx.n_inputs().checked_sub(m).ok_or_else(|| ctx.err("num_scan_inputs exceeds the operands"))?;
    let state: Vec<Value> =
        (0..n).map(|i| ctx.value(i).cloned().ok_or_else(|| ctx.err("state operand"))).collect::<Result<_>>()?;
    let scans_in: Vec<&Tensor> = (n..n + m).map(|i| ctx.input(i)).collect::<Result<_>>()?;
    let in_axes = ctx.attr_ints("scan_input_axes").unwrap_or_else(|| vec![0; m]);
    let in_dirs = ctx.attr_ints("scan_input_directions").unwrap_or_else(|| vec![0; m]);
    let k_out = ctx.node.outputs.len().saturating_sub(n);
    let out_axes = ctx.attr_ints("scan_output_axes").unwrap_or_else(|| vec![0; k_out]);
    let out_dirs = ctx.attr_ints("scan_output_directions").unwrap_or_else(|| vec![0; k_out]);
    if in_axes.len() != m || in_dirs.len() != m || out_axes.len() != k_out || out_dirs.len() != k_out {
        return Err(ctx.err("scan axes/directions do not match the operands"));
    }
    let axes: Vec<usize> = scans_in.iter().zip(&in_axes).map(|(t, &a)| ctx.axis(a, t.rank())).collect::<Result<_>>()?;
    let len = scans_in.first().map_or(0, |t| t.shape[axes[0]]);
    if scans_in.iter().zip(&axes).any(|(t, &a)| t.shape[a] != len) {
        return Err(ctx.err("scan inputs differ in length"));
    }
    let mut state = state;
    let mut outs_per: Vec<Vec<Tensor>> = vec![Vec::new(); k_out];
    for step in 0..len {
        let mut inputs = state.clone();
        for (j, t) in scans_in.iter().enumerate() {
            let pos = if in_dirs[j] != 0 { len - 1 - step } else { step };
            let mut s = narrow(t, axes[j], pos, 1);
            s.shape.remove(axes[j]);
            inputs.push(Value::Tensor(s));
        }
        let outs = ctx.run_subgraph(body, inputs)?;
        if outs.len() != n + k_out {
            return Err(ctx.err("the body returns the wrong number of values"));
        }
        let mut it = outs.into_iter();
        state = it.by_ref().take(n).collect();
        for (k, v) in it.enumerate() {
            outs_per[k].push(v.as_tensor().cloned().ok_or_else(|| ctx.err("scan outputs must be tensors"))?);
        }
    }
    let mut result: Outs = state.into_iter().map(Some).collect();
    for (k, mut items) in outs_per.into_iter().enumerate() {
        if out_dirs[k] != 0 {
            items.reverse();
        }
        if items.is_empty() {
            return Err(ctx.unsupported("a scan of length 0"));
        }
        let rank = items[0].rank() + 1;
        let axis = ctx.axis(out_axes[k], rank)?;
        result.push(Some(Value::Tensor(stack(ctx, &items, axis)?)));
    }
    Ok(result)
}

fn seq<'a>(ctx: &NodeCtx<'a>, i: usize) -> Result<(ElemType, &'a Vec<Tensor>)> {
    match ctx.value(i) {
        Some(Value::Sequence(e, s)) => Ok((*e, s)),
        _ => Err(ctx.err(format!("operand {i} must be a sequence"))),
    }
}

fn position(ctx: &NodeCtx<'_>, i: usize, len: usize, insert: bool) -> Result<Option<usize>> {
    let Some(p) = ctx.opt_ints(i)? else { return Ok(None) };
    let p = *p.first().ok_or_else(|| ctx.err("position must be a scalar"))?;
    let limit = if insert { len as i64 + 1 } else { len as i64 };
    let q = if p < 0 { p + len as i64 } else { p };
    if q < 0 || q >= limit {
        return Err(ctx.err(format!("position {p} is out of range for {len} items")));
    }
    Ok(Some(q as usize))
}

fn sequence_construct(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let items: Vec<Tensor> = (0..ctx.n_inputs()).map(|i| ctx.input(i).cloned()).collect::<Result<_>>()?;
    let elem = items.first().map_or(ElemType::Float, Tensor::elem);
    Ok(vec![Some(Value::Sequence(elem, items))])
}

fn sequence_at(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (_, s) = seq(ctx, 0)?;
    let p = position(ctx, 1, s.len(), false)?.ok_or_else(|| ctx.err("position is required"))?;
    one(s[p].clone())
}

fn sequence_insert(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (e, s) = seq(ctx, 0)?;
    let t = ctx.input(1)?.clone();
    let mut s = s.clone();
    let p = position(ctx, 2, s.len(), true)?.unwrap_or(s.len());
    s.insert(p, t);
    Ok(vec![Some(Value::Sequence(e, s))])
}

fn sequence_erase(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (e, s) = seq(ctx, 0)?;
    let mut s = s.clone();
    if s.is_empty() {
        return Err(ctx.err("erasing from an empty sequence"));
    }
    let p = position(ctx, 1, s.len(), false)?.unwrap_or(s.len() - 1);
    s.remove(p);
    Ok(vec![Some(Value::Sequence(e, s))])
}

fn split_to_sequence(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    let keep = ctx.attr_i("keepdims", 1) != 0;
    let dim = x.shape[axis];
    let mut items = Vec::new();
    match ctx.opt_ints(1)? {
        None => {
            for k in 0..dim {
                let mut t = narrow(x, axis, k, 1);
                if !keep {
                    t.shape.remove(axis);
                }
                items.push(t);
            }
        }
        Some(sizes) => {
            let sizes: Vec<usize> = if ctx.input(1)?.rank() == 0 {
                let c = sizes[0].max(1) as usize;
                (0..dim.div_ceil(c)).map(|k| c.min(dim - k * c)).collect()
            } else {
                sizes.iter().map(|&s| s.max(0) as usize).collect()
            };
            if sizes.iter().sum::<usize>() != dim {
                return Err(ctx.err("split sizes do not add up to the axis"));
            }
            let mut start = 0;
            for s in sizes {
                items.push(narrow(x, axis, start, s));
                start += s;
            }
        }
    }
    Ok(vec![Some(Value::Sequence(x.elem(), items))])
}

fn concat_from_sequence(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (_, s) = seq(ctx, 0)?;
    let first = s.first().ok_or_else(|| ctx.err("the sequence is empty"))?;
    let new_axis = ctx.attr_i("new_axis", 0) != 0;
    let rank = first.rank() + usize::from(new_axis);
    let axis = ctx.axis(ctx.attr_i("axis", 0), rank)?;
    if new_axis {
        return one(stack(ctx, s, axis)?);
    }
    let refs: Vec<&Tensor> = s.iter().collect();
    one(concat_tensors(ctx, &refs, axis)?)
}

/// `SequenceMap`: runs the body once per item of the first sequence; other
/// operands give their item at the same position (sequences) or themselves
/// (tensors). Each body output collects into a sequence.
fn sequence_map(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let body = ctx.attr_graph("body").ok_or_else(|| ctx.err("body is required"))?;
    let (_, first) = seq(ctx, 0)?;
    let n = first.len();
    let operands: Vec<&Value> = (0..ctx.n_inputs())
        .map(|i| ctx.value(i).ok_or_else(|| ctx.err(format!("operand {i} is missing"))))
        .collect::<Result<_>>()?;
    for v in &operands {
        if let Value::Sequence(_, items) = v {
            if items.len() != n {
                return Err(ctx.err("the sequences differ in length"));
            }
        }
    }
    let k = ctx.node.outputs.len();
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    for i in 0..n {
        let inputs = operands
            .iter()
            .map(|v| match v {
                Value::Sequence(_, items) => Value::Tensor(items[i].clone()),
                other => (*other).clone(),
            })
            .collect();
        let results = ctx.run_subgraph(body, inputs)?;
        if results.len() != k {
            return Err(ctx.err(format!("the body returns {} values, {k} expected", results.len())));
        }
        for (j, r) in results.into_iter().enumerate() {
            match r {
                Value::Tensor(t) => outs[j].push(t),
                _ => return Err(ctx.unsupported("body outputs that are not tensors")),
            }
        }
    }
    let body_graph = &ctx.model.graphs[body];
    Ok(outs
        .into_iter()
        .enumerate()
        .map(|(j, items)| {
            let declared =
                body_graph.outputs.get(j).and_then(|o| o.ty.as_ref()).and_then(|t| t.as_tensor()).and_then(|(e, _)| e);
            let elem = items.first().map(Tensor::elem).or(declared).unwrap_or(ElemType::Float);
            Some(Value::Sequence(elem, items))
        })
        .collect())
}

/// `Scan` before opset 9: operand 0 is the optional sequence lengths, and
/// every state and scan operand has a batch axis 0 (scan inputs iterate on
/// axis 1); each batch item is scanned on its own and the results stacked.
fn scan8(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let body = ctx.attr_graph("body").ok_or_else(|| ctx.err("body is required"))?;
    let m = ctx.attr_i("num_scan_inputs", 0) as usize;
    let n = ctx.n_inputs().checked_sub(1 + m).ok_or_else(|| ctx.err("num_scan_inputs exceeds the operands"))?;
    let states: Vec<&Tensor> = (1..1 + n).map(|i| ctx.input(i)).collect::<Result<_>>()?;
    let scans: Vec<&Tensor> = (1 + n..1 + n + m).map(|i| ctx.input(i)).collect::<Result<_>>()?;
    let dirs = ctx.attr_ints("directions").unwrap_or_else(|| vec![0; m]);
    let batch = states.first().or(scans.first()).map_or(0, |t| t.shape.first().copied().unwrap_or(0));
    if dirs.len() != m
        || states.iter().chain(&scans).any(|t| t.rank() < 1 || t.shape[0] != batch)
        || scans.iter().any(|t| t.rank() < 2)
    {
        return Err(ctx.err("every operand needs the batch axis (scan inputs also a sequence axis)"));
    }
    let len = scans.first().map_or(0, |t| t.shape[1]);
    if let Some(l) = ctx.opt_ints(0)? {
        if l.iter().any(|&v| v != len as i64) {
            return Err(ctx.unsupported("sequence lengths shorter than the sequence"));
        }
    }
    let item = |t: &Tensor, b: usize| {
        let mut s = narrow(t, 0, b, 1);
        s.shape.remove(0);
        s
    };
    let k_out = ctx.node.outputs.len().saturating_sub(n);
    let mut final_states: Vec<Vec<Tensor>> = vec![Vec::new(); n];
    let mut scan_outs: Vec<Vec<Tensor>> = vec![Vec::new(); k_out];
    for b in 0..batch {
        let mut st: Vec<Value> = states.iter().map(|t| Value::Tensor(item(t, b))).collect();
        let mut per_step: Vec<Vec<Tensor>> = vec![Vec::new(); k_out];
        for step in 0..len {
            let mut inputs = st.clone();
            for (j, t) in scans.iter().enumerate() {
                let pos = if dirs[j] != 0 { len - 1 - step } else { step };
                let mut s = item(t, b);
                s = narrow(&s, 0, pos, 1);
                s.shape.remove(0);
                inputs.push(Value::Tensor(s));
            }
            let outs = ctx.run_subgraph(body, inputs)?;
            if outs.len() != n + k_out {
                return Err(ctx.err("the body returns the wrong number of values"));
            }
            let mut it = outs.into_iter();
            st = it.by_ref().take(n).collect();
            for (k, v) in it.enumerate() {
                per_step[k].push(v.as_tensor().cloned().ok_or_else(|| ctx.err("scan outputs must be tensors"))?);
            }
        }
        for (k, v) in st.into_iter().enumerate() {
            final_states[k].push(v.as_tensor().cloned().ok_or_else(|| ctx.err("states must be tensors"))?);
        }
        for (k, items) in per_step.into_iter().enumerate() {
            if items.is_empty() {
                return Err(ctx.unsupported("a scan of length 0"));
            }
            scan_outs[k].push(stack(ctx, &items, 0)?);
        }
    }
    let mut result: Outs = Vec::new();
    for items in final_states.iter().chain(&scan_outs) {
        if items.is_empty() {
            return Err(ctx.unsupported("an empty batch"));
        }
        result.push(Some(Value::Tensor(stack(ctx, items, 0)?)));
    }
    Ok(result)
}
