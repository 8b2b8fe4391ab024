//! The `ai.onnx.ml` operators the node suite uses: `Binarizer`,
//! `ArrayFeatureExtractor` and `LabelEncoder`.

use super::elementwise::from_f64s;
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Tensor};
use diamond_ir::ElemType;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Binarizer" => binarizer(ctx),
        "ArrayFeatureExtractor" => array_feature_extractor(ctx),
        "LabelEncoder" => label_encoder(ctx),
        "TreeEnsemble" => tree_ensemble(ctx),
        _ => return None,
    })
}

fn binarizer(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["threshold"])?;
    let x = ctx.input(0)?;
    let t = f64::from(ctx.attr_f("threshold", 0.0));
    let v = x.to_f64s().ok_or_else(|| ctx.err("numeric input required"))?;
    let out: Vec<f64> = v.iter().map(|&a| if a > t { 1.0 } else { 0.0 }).collect();
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

/// Picks the given positions of the last axis.
fn array_feature_extractor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let last = *x.shape.last().ok_or_else(|| ctx.err("X must have rank ≥ 1"))?;
    let iv = ind.to_i64s().filter(|_| !ind.is_float()).ok_or_else(|| ctx.err("indices must be integers"))?;
    let picks: Vec<usize> = iv
        .iter()
        .map(|&i| {
            usize::try_from(i).ok().filter(|&i| i < last).ok_or_else(|| ctx.err(format!("index {i} is out of range")))
        })
        .collect::<Result<_>>()?;
    let rows = x.len() / last.max(1);
    let idx: Vec<usize> = (0..rows).flat_map(|r| picks.iter().map(move |&p| r * last + p)).collect();
    let mut shape = if x.rank() == 1 { vec![1] } else { x.shape[..x.rank() - 1].to_vec() };
    shape.push(picks.len());
    one(Tensor { shape, data: x.data.take(&idx) })
}

/// A list of keys or values: from `<name>_strings`, `_int64s`, `_floats`
/// or `<name>_tensor`.
fn table(ctx: &NodeCtx<'_>, name: &str) -> Result<Option<Data>> {
    if let Some(v) = ctx.attr_strings(&format!("{name}_strings")) {
        return Ok(Some(Data::Str(v)));
    }
    if let Some(v) = ctx.attr_ints(&format!("{name}_int64s")) {
        return Ok(Some(Data::I64(v)));
    }
    if let Some(v) = ctx.attr_floats(&format!("{name}_floats")) {
        return Ok(Some(Data::F32(v)));
    }
    Ok(ctx.attr_tensor(&format!("{name}_tensor"))?.map(|t| t.data))
}

fn label_encoder(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let keys = table(ctx, "keys")?.ok_or_else(|| ctx.err("keys are required"))?;
    let values = table(ctx, "values")?.ok_or_else(|| ctx.err("values are required"))?;
    if keys.len() != values.len() {
        return Err(ctx.err("keys and values differ in length"));
    }
    let default = match values.elem() {
        ElemType::String => {
            Data::Str(vec![ctx.attr_s("default_string").unwrap_or_else(|| "_Unused".into()).into_bytes()])
        }
        ElemType::Int64 => Data::I64(vec![ctx.attr_i("default_int64", -1)]),
        ElemType::Float => Data::F32(vec![ctx.attr_f("default_float", -0.0)]),
        other => match ctx.attr_tensor("default_tensor")? {
            Some(t) if t.elem() == other && t.len() == 1 => t.data,
            _ => Data::from_f64s(other, &[0.0]).ok_or_else(|| ctx.unsupported(format!("values of {other}")))?,
        },
    };
    let default = match ctx.attr_tensor("default_tensor")? {
        Some(t) if t.elem() == values.elem() && t.len() == 1 => t.data,
        _ => default,
    };
    if keys.elem() != x.elem() {
        return Err(ctx.err(format!("keys are {}, the input {}", keys.elem(), x.elem())));
    }
    // match by value: strings by bytes, numbers by f64 (NaN keys match NaN)
    let position = |i: usize| -> Option<usize> {
        match (&keys, &x.data) {
            (Data::Str(k), Data::Str(v)) => k.iter().position(|s| *s == v[i]),
            _ => {
                let kv = keys.to_f64s()?;
                let a = x.data.take(&[i]).to_f64s()?[0];
                kv.iter().position(|&b| b == a || (a.is_nan() && b.is_nan()))
            }
        }
    };
    let all =
        Data::concat(&[&values, &default]).ok_or_else(|| ctx.err("the default's type differs from the values'"))?;
    let n = values.len();
    let idx: Vec<usize> = (0..x.len()).map(|i| position(i).unwrap_or(n)).collect();
    one(Tensor { shape: x.shape.clone(), data: all.take(&idx) })
}

/// `TreeEnsemble` (opset 5): every tree routes the row from its root by
/// the node comparisons (LEQ, LT, GTE, GT, EQ, NEQ, MEMBER; NaN goes where
/// `nodes_missing_value_tracks_true` says) to a leaf, whose weight adds to
/// its target; trees combine by the aggregate function, then the post
/// transform applies.
fn tree_ensemble(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let xv = x.to_f64s().filter(|_| x.is_float()).ok_or_else(|| ctx.err("X must be a float tensor"))?;
    let ints = |name: &str| ctx.attr_ints(name).unwrap_or_default();
    let tensor = |name: &str| -> Result<Vec<f64>> {
        match ctx.attr_tensor(name)? {
            Some(t) => t.to_f64s().ok_or_else(|| ctx.err(format!("{name} must be numeric"))),
            None => Ok(Vec::new()),
        }
    };
    let (feat, modes, splits) = (ints("nodes_featureids"), tensor("nodes_modes")?, tensor("nodes_splits")?);
    let (t_ids, f_ids, t_leaf, f_leaf) =
        (ints("nodes_truenodeids"), ints("nodes_falsenodeids"), ints("nodes_trueleafs"), ints("nodes_falseleafs"));
    let missing = ints("nodes_missing_value_tracks_true");
    let members = tensor("membership_values")?;
    let (leaf_targets, leaf_weights) = (ints("leaf_targetids"), tensor("leaf_weights")?);
    let roots = ints("tree_roots");
    let n_targets = ctx.attr_i("n_targets", 1).max(1) as usize;
    let nodes = feat.len();
    if [modes.len(), splits.len(), t_ids.len(), f_ids.len(), t_leaf.len(), f_leaf.len()].iter().any(|&l| l != nodes)
        || leaf_targets.len() != leaf_weights.len()
    {
        return Err(ctx.err("the node and leaf attribute lists differ in length"));
    }
    // the membership set of each MEMBER node, in node order, NaN-separated
    let mut sets: Vec<Vec<f64>> = vec![Vec::new(); nodes];
    let mut chunks = members.split(|v| v.is_nan());
    for i in 0..nodes {
        if modes[i] as i64 == 6 {
            sets[i] = chunks.next().unwrap_or(&[]).to_vec();
        }
    }
    let cols = *x.shape.last().ok_or_else(|| ctx.err("X must have rank ≥ 1"))?;
    let rows = if x.rank() == 1 { 1 } else { x.len() / cols.max(1) };
    let agg = ctx.attr_i("aggregate_function", 1);
    let mut out = vec![0.0; rows * n_targets];
    for r in 0..rows {
        let row = &xv[r * cols..(r + 1) * cols];
        let mut acc: Vec<Option<f64>> = vec![None; n_targets];
        for &root in &roots {
            let mut i = usize::try_from(root).map_err(|_| ctx.err("negative root"))?;
            let mut steps = 0;
            let leaf = loop {
                if i >= nodes || steps > nodes {
                    return Err(ctx.err("a tree refers past its nodes (or loops)"));
                }
                steps += 1;
                let f = usize::try_from(feat[i])
                    .ok()
                    .filter(|&f| f < cols)
                    .ok_or_else(|| ctx.err("feature id out of range"))?;
                let v = row[f];
                let s = splits[i];
                let go_true = if v.is_nan() {
                    missing.get(i).copied().unwrap_or(0) != 0
                } else {
                    match modes[i] as i64 {
                        0 => v <= s,
                        1 => v < s,
                        2 => v >= s,
                        3 => v > s,
                        4 => v == s,
                        5 => v != s,
                        6 => sets[i].contains(&v),
                        m => return Err(ctx.err(format!("node mode {m}"))),
                    }
                };
                let (next, is_leaf) = if go_true { (t_ids[i], t_leaf[i] != 0) } else { (f_ids[i], f_leaf[i] != 0) };
                let next = usize::try_from(next).map_err(|_| ctx.err("negative node id"))?;
                if is_leaf {
                    break next;
                }
                i = next;
            };
            let t = leaf_targets.get(leaf).and_then(|&t| usize::try_from(t).ok()).filter(|&t| t < n_targets);
            let t = t.ok_or_else(|| ctx.err("leaf or target id out of range"))?;
            let w = leaf_weights[leaf];
            acc[t] = Some(match (acc[t], agg) {
                (None, _) => w,
                (Some(a), 2) => a.min(w),
                (Some(a), 3) => a.max(w),
                (Some(a), _) => a + w,
            });
        }
        for t in 0..n_targets {
            let v = acc[t].unwrap_or(0.0);
            out[r * n_targets + t] = if agg == 0 { v / roots.len().max(1) as f64 } else { v };
        }
    }
    match ctx.attr_i("post_transform", 0) {
        0 => {}
        2 => out.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
        p => return Err(ctx.unsupported(format!("post_transform {p}"))),
    }
    let elem = ctx.attr_tensor("leaf_weights")?.map_or(x.elem(), |t| t.elem());
    one(from_f64s(ctx, elem, vec![rows, n_targets], &out)?)
}
