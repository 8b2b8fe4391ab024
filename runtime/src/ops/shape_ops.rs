//! Shape manipulation and data movement: every kernel here computes, for each
//! output element, which input element it copies, and then takes those
//! elements ([`Data::take`]); so all of them work for every element type,
//! strings included.

use super::{broadcast_index, broadcast_shape, one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{shape_len, strides, Data, Tensor, Value};
use diamond_ir::ElemType;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Identity" => ctx.value(0).cloned().map(|v| vec![Some(v)]).ok_or_else(|| ctx.err("operand 0 is required")),
        "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze" => relabel(ctx),
        "Constant" => constant(ctx),
        "Transpose" => transpose(ctx),
        "Concat" => concat(ctx),
        "Split" => split(ctx),
        "Slice" => slice(ctx),
        "Gather" => gather(ctx),
        "GatherElements" => gather_elements(ctx),
        "GatherND" => gather_nd(ctx),
        "ScatterElements" | "Scatter" => scatter_elements(ctx),
        "ScatterND" => scatter_nd(ctx),
        "TensorScatter" => tensor_scatter(ctx),
        "Expand" => expand(ctx),
        "Tile" => tile(ctx),
        "Pad" => pad(ctx),
        "Shape" => shape(ctx),
        "Size" => ctx.input(0).and_then(|x| one(Tensor::scalar(Data::I64(vec![x.len() as i64])))),
        "ConstantOfShape" => constant_of_shape(ctx),
        "Range" => range(ctx),
        "Trilu" => trilu(ctx),
        "DepthToSpace" => depth_to_space(ctx),
        "SpaceToDepth" => space_to_depth(ctx),
        "OneHot" => one_hot(ctx),
        "NonZero" => non_zero(ctx),
        "Compress" => compress(ctx),
        "ReverseSequence" => reverse_sequence(ctx),
        "EyeLike" => eye_like(ctx),
        "Dropout" => dropout(ctx),
        _ => return None,
    })
}

/// Calls `f` with every multi-index of `shape` in C order.
pub(crate) fn each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.iter().any(|&d| d == 0) {
        return;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        f(&idx);
        let mut a = shape.len();
        loop {
            if a == 0 {
                return;
            }
            a -= 1;
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// The elements of `v` at `base + Σ idx·stride` for each multi-index of
/// `shape`, in row-major order. Axes that are contiguous in the source are
/// merged and size-1 axes dropped first; the offset is then carried from
/// one row to the next (an odometer over the outer axes) and each row along
/// the last axis is copied as a slice when its stride is 1.
fn gather_strided<T: Clone>(v: &[T], shape: &[usize], stride: &[isize], base: isize) -> Vec<T> {
    let n = shape_len(shape).unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    // (extent, stride) with size-1 axes dropped and mergeable neighbours merged.
    let mut axes: Vec<(usize, isize)> = Vec::with_capacity(shape.len());
    for (&e, &st) in shape.iter().zip(stride) {
        if e == 1 {
            continue;
        }
        match axes.last_mut() {
            Some(last) if last.1 == st * e as isize => *last = (last.0 * e, st),
            _ => axes.push((e, st)),
        }
    }
    let Some((&(inner, step), outer)) = axes.split_last() else {
        out.push(v[base as usize].clone());
        return out;
    };
    let mut idx = vec![0usize; outer.len()];
    let mut off = base;
    loop {
        if step == 1 {
            out.extend_from_slice(&v[off as usize..off as usize + inner]);
        } else {
            out.extend((0..inner as isize).map(|i| v[(off + i * step) as usize].clone()));
        }
        let mut a = outer.len();
        loop {
            if a == 0 {
                return out;
            }
            a -= 1;
            idx[a] += 1;
            off += outer[a].1;
            if idx[a] < outer[a].0 {
                break;
            }
            off -= outer[a].1 * outer[a].0 as isize;
            idx[a] = 0;
        }
    }
}

/// `x`'s elements at `base + Σ idx·stride` over the multi-indices of `shape`.
fn strided_tensor(x: &Tensor, shape: Vec<usize>, stride: &[isize], base: isize) -> Tensor {
    let data = crate::each_data!(&x.data, v => crate::tensor::Elem::wrap(gather_strided(v, &shape, stride, base)));
    Tensor { shape, data }
}

fn taken(t: &Tensor, shape: Vec<usize>, idx: &[usize]) -> Tensor {
    Tensor { shape, data: t.data.take(idx) }
}

fn constant(ctx: &NodeCtx<'_>) -> Result<Outs> {
    if let Some(t) = ctx.attr_tensor("value")? {
        return one(t);
    }
    if let Some(f) = ctx.attr_opt_f("value_float") {
        return one(Tensor::scalar(Data::F32(vec![f])));
    }
    if let Some(v) = ctx.attr_floats("value_floats") {
        return one(Tensor { shape: vec![v.len()], data: Data::F32(v) });
    }
    if let Some(i) = ctx.attr_opt_i("value_int") {
        return one(Tensor::scalar(Data::I64(vec![i])));
    }
    if let Some(v) = ctx.attr_ints("value_ints") {
        return one(Tensor::from_i64s(v));
    }
    if let Some(s) = ctx.attr_s("value_string") {
        return one(Tensor::scalar(Data::Str(vec![s.into_bytes()])));
    }
    if let Some(v) = ctx.attr_strings("value_strings") {
        return one(Tensor { shape: vec![v.len()], data: Data::Str(v) });
    }
    Err(ctx.unsupported("no supported value attribute (sparse_value?)"))
}

/// The operators that give their operand's elements, in order, another
/// shape: Reshape, Flatten, Squeeze and Unsqueeze.
fn relabel(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let shape = relabeled_shape(ctx, &x.shape).expect("a relabelling operator")?;
    one(x.clone().reshaped(shape).ok_or_else(|| ctx.err("bad shape"))?)
}

/// The shape a relabelling operator (Reshape, Flatten, Squeeze, Unsqueeze)
/// gives an operand of shape `x` (the node's operand 0), or `None` for
/// another operator: the SIMD session moves the operand's buffer under it
/// instead of copying the elements.
pub(crate) fn relabeled_shape(ctx: &NodeCtx<'_>, x: &[usize]) -> Option<Result<Vec<usize>>> {
    Some(match ctx.op() {
        "Reshape" => reshape(ctx, x),
        "Flatten" => flatten(ctx, x),
        "Squeeze" => squeeze(ctx, x),
        "Unsqueeze" => unsqueeze(ctx, x),
        _ => return None,
    })
}

fn reshape(ctx: &NodeCtx<'_>, x: &[usize]) -> Result<Vec<usize>> {
    let len = shape_len(x).ok_or_else(|| ctx.err("the operand's size overflows"))?;
    let target = match ctx.opt_ints(1)? {
        Some(s) => s,
        None => ctx.attr_ints("shape").ok_or_else(|| ctx.err("no target shape"))?,
    };
    let allow_zero = ctx.attr_i("allowzero", 0) != 0;
    let mut shape = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            0 if !allow_zero => {
                shape.push(*x.get(i).ok_or_else(|| ctx.err(format!("target axis {i} copies a missing axis")))?)
            }
            d if d >= 0 => shape.push(d as usize),
            d => return Err(ctx.err(format!("target size {d} is invalid"))),
        }
    }
    if let Some(i) = infer {
        let rest = shape_len(&shape).unwrap_or(0);
        if rest == 0 || len % rest != 0 {
            return Err(ctx.err(format!("cannot reshape {x:?} to {target:?}")));
        }
        shape[i] = len / rest;
    }
    if shape_len(&shape) != Some(len) {
        return Err(ctx.err(format!("cannot reshape {x:?} ({len} elements) to {target:?}")));
    }
    Ok(shape)
}

fn flatten(ctx: &NodeCtx<'_>, x: &[usize]) -> Result<Vec<usize>> {
    let a = ctx.attr_i("axis", 1);
    let a = if a < 0 { a + x.len() as i64 } else { a };
    if a < 0 || a > x.len() as i64 {
        return Err(ctx.err(format!("axis {a} is out of range")));
    }
    let outer: usize = x[..a as usize].iter().product();
    let inner: usize = x[a as usize..].iter().product();
    Ok(vec![outer, inner])
}

fn axes_operand(ctx: &NodeCtx<'_>, input: usize) -> Result<Option<Vec<i64>>> {
    if ctx.opset >= 13 {
        ctx.opt_ints(input)
    } else {
        Ok(ctx.attr_ints("axes"))
    }
}

fn squeeze(ctx: &NodeCtx<'_>, x: &[usize]) -> Result<Vec<usize>> {
    let axes = match axes_operand(ctx, 1)? {
        Some(a) => a.iter().map(|&a| ctx.axis(a, x.len())).collect::<Result<Vec<_>>>()?,
        None => (0..x.len()).filter(|&a| x[a] == 1).collect(),
    };
    for &a in &axes {
        if x[a] != 1 {
            return Err(ctx.err(format!("axis {a} has size {}, not 1", x[a])));
        }
    }
    Ok((0..x.len()).filter(|a| !axes.contains(a)).map(|a| x[a]).collect())
}

fn unsqueeze(ctx: &NodeCtx<'_>, x: &[usize]) -> Result<Vec<usize>> {
    let axes = axes_operand(ctx, 1)?.ok_or_else(|| ctx.err("axes are required"))?;
    let rank = x.len() + axes.len();
    let mut axes = axes.iter().map(|&a| ctx.axis(a, rank)).collect::<Result<Vec<_>>>()?;
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(ctx.err("repeated axis"));
    }
    let mut dims = x.iter();
    Ok((0..rank).map(|a| if axes.contains(&a) { 1 } else { *dims.next().unwrap_or(&1) }).collect())
}

/// `x` with its axes permuted by `perm`.
pub(crate) fn permute(x: &Tensor, perm: &[usize]) -> Tensor {
    let st = strides(&x.shape);
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    let stride: Vec<isize> = perm.iter().map(|&p| st[p] as isize).collect();
    strided_tensor(x, shape, &stride, 0)
}

fn transpose(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let perm: Vec<usize> = match ctx.attr_ints("perm") {
        Some(p) => p.iter().map(|&a| ctx.axis(a, x.rank())).collect::<Result<_>>()?,
        None => (0..x.rank()).rev().collect(),
    };
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..x.rank()).collect::<Vec<_>>() {
        return Err(ctx.err(format!("perm {perm:?} is not a permutation of rank {}", x.rank())));
    }
    one(permute(x, &perm))
}

/// `parts` joined along `axis`.
pub(crate) fn concat_tensors(ctx: &NodeCtx<'_>, parts: &[&Tensor], axis: usize) -> Result<Tensor> {
    let first = parts.first().ok_or_else(|| ctx.err("nothing to concatenate"))?;
    let rank = first.rank();
    for p in parts {
        if p.rank() != rank || p.elem() != first.elem() || (0..rank).any(|a| a != axis && p.shape[a] != first.shape[a])
        {
            return Err(ctx.err(format!("cannot concatenate {:?} and {:?} on axis {axis}", first.shape, p.shape)));
        }
    }
    let outer: usize = first.shape[..axis].iter().product();
    let inner: usize = first.shape[axis + 1..].iter().product();
    let mut shape = first.shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    // The common element types: each part's blocks copied straight into place.
    macro_rules! direct {
        ($variant:ident) => {
            if let Some(slices) =
                parts.iter().map(|p| if let Data::$variant(v) = &p.data { Some(&v[..]) } else { None }).collect()
            {
                let blocks: Vec<usize> = parts.iter().map(|p| p.shape[axis] * inner).collect();
                return Ok(Tensor { shape, data: Data::$variant(interleave_blocks(slices, &blocks, outer)) });
            }
        };
    }
    direct!(F32);
    direct!(I64);
    let all = Data::concat(&parts.iter().map(|p| &p.data).collect::<Vec<_>>()).ok_or_else(|| ctx.err("type"))?;
    let mut offsets = Vec::new();
    let mut off = 0;
    for p in parts {
        offsets.push(off);
        off += p.len();
    }
    let mut idx = Vec::with_capacity(off);
    for o in 0..outer {
        for (p, &base) in parts.iter().zip(&offsets) {
            let block = p.shape[axis] * inner;
            idx.extend(base + o * block..base + (o + 1) * block);
        }
    }
    Ok(Tensor { shape, data: all.take(&idx) })
}

/// Block `o` of every part in turn, for `o` in `0..outer`: a concatenation
/// along the axis whose blocks (that axis and the ones after it) are `blocks`.
fn interleave_blocks<T: Copy>(parts: Vec<&[T]>, blocks: &[usize], outer: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(blocks.iter().sum::<usize>() * outer);
    interleave_blocks_into(&mut out, &parts, blocks, outer);
    out
}

/// Appends to `out`, for each of the `outer` blocks, each part's block
/// (`blocks[i]` values of part `i`) in turn: Concat's layout.
pub(crate) fn interleave_blocks_into<T: Copy>(out: &mut Vec<T>, parts: &[&[T]], blocks: &[usize], outer: usize) {
    for o in 0..outer {
        for (part, &block) in parts.iter().zip(blocks) {
            out.extend_from_slice(&part[o * block..(o + 1) * block]);
        }
    }
}

fn concat(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let parts = (0..ctx.n_inputs()).map(|i| ctx.input(i)).collect::<Result<Vec<_>>>()?;
    let first = parts.first().ok_or_else(|| ctx.err("no operands"))?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), first.rank())?;
    one(concat_tensors(ctx, &parts, axis)?)
}

/// Elements `start..start+len` of `axis`.
pub(crate) fn narrow(x: &Tensor, axis: usize, start: usize, len: usize) -> Tensor {
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let dim = x.shape[axis];
    let runs: Vec<(usize, usize)> = (0..outer).map(|o| ((o * dim + start) * inner, len * inner)).collect();
    let mut shape = x.shape.clone();
    shape[axis] = len;
    Tensor { shape, data: x.data.take_runs(&runs) }
}

fn split(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    let dim = x.shape[axis];
    let n = ctx.node.outputs.len();
    let sizes: Vec<usize> = match if ctx.opset >= 13 { ctx.opt_ints(1)? } else { ctx.attr_ints("split") } {
        Some(s) => {
            s.iter().map(|&d| usize::try_from(d).map_err(|_| ctx.err("negative split"))).collect::<Result<_>>()?
        }
        None => {
            let parts = ctx.attr_opt_i("num_outputs").map_or(n, |k| k as usize);
            if parts == 0 {
                return Err(ctx.err("no outputs"));
            }
            let chunk = dim.div_ceil(parts);
            if ctx.attr_opt_i("num_outputs").is_none() && dim % parts != 0 {
                return Err(ctx.err(format!("axis size {dim} does not split into {parts} equal parts")));
            }
            (0..parts).map(|k| chunk.min(dim.saturating_sub(k * chunk))).collect()
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        return Err(ctx.err(format!("split sizes {sizes:?} do not add up to {dim}")));
    }
    let mut start = 0;
    let mut outs = Vec::new();
    for s in sizes {
        outs.push(Some(Value::Tensor(narrow(x, axis, start, s))));
        start += s;
    }
    Ok(outs)
}

/// The elements a slice `start:end:step` selects in an axis of size `dim`:
/// its first index and its length (NumPy's clamping).
pub(crate) fn slice_range(start: i64, end: i64, step: i64, dim: usize) -> (i64, usize) {
    let d = dim as i64;
    let adj = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (adj(start), adj(end));
    if step > 0 {
        let (s, e) = (s.clamp(0, d), e.clamp(0, d));
        let n = if e > s { (e - s + step - 1) / step } else { 0 };
        (s, n as usize)
    } else {
        let (s, e) = (s.clamp(-1, d - 1), e.clamp(-1, d - 1));
        let n = if s > e { (s - e + (-step) - 1) / (-step) } else { 0 };
        (s, n as usize)
    }
}

fn slice(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let (starts, ends, axes, steps) = if ctx.opset < 10 {
        (
            ctx.attr_ints("starts").ok_or_else(|| ctx.err("starts are required"))?,
            ctx.attr_ints("ends").ok_or_else(|| ctx.err("ends are required"))?,
            ctx.attr_ints("axes"),
            None,
        )
    } else {
        (
            ctx.opt_ints(1)?.ok_or_else(|| ctx.err("starts are required"))?,
            ctx.opt_ints(2)?.ok_or_else(|| ctx.err("ends are required"))?,
            ctx.opt_ints(3)?,
            ctx.opt_ints(4)?,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err("starts, ends, axes and steps differ in length"));
    }
    let st = strides(&x.shape);
    let mut shape = x.shape.clone();
    let mut stride: Vec<isize> = st.iter().map(|&s| s as isize).collect();
    let mut first = vec![0i64; x.rank()];
    for k in 0..starts.len() {
        let a = ctx.axis(axes[k], x.rank())?;
        if steps[k] == 0 {
            return Err(ctx.err("step 0"));
        }
        let (s, n) = slice_range(starts[k], ends[k], steps[k], x.shape[a]);
        shape[a] = n;
        first[a] = s;
        stride[a] = st[a] as isize * steps[k] as isize;
    }
    if shape_len(&shape) == Some(0) {
        return one(taken(x, shape, &[]));
    }
    let base: isize = first.iter().zip(&st).map(|(&f, &s)| f as isize * s as isize).sum();
    one(strided_tensor(x, shape, &stride, base))
}

/// An index operand's values normalized into `0..dim`.
fn indices(ctx: &NodeCtx<'_>, t: &Tensor, dim: usize) -> Result<Vec<usize>> {
    let v = t.to_i64s().filter(|_| !t.is_float()).ok_or_else(|| ctx.err("indices must be integers"))?;
    v.iter()
        .map(|&i| {
            let j = if i < 0 { i + dim as i64 } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| j < dim)
                .ok_or_else(|| ctx.err(format!("index {i} is out of range for size {dim}")))
        })
        .collect()
}

fn gather(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    let dim = x.shape[axis];
    let ix = indices(ctx, ind, dim)?;
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut idx = Vec::with_capacity(outer * ix.len() * inner);
    for o in 0..outer {
        for &j in &ix {
            let base = (o * dim + j) * inner;
            idx.extend(base..base + inner);
        }
    }
    let shape = [&x.shape[..axis], &ind.shape[..], &x.shape[axis + 1..]].concat();
    one(taken(x, shape, &idx))
}

fn gather_elements(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    if ind.rank() != x.rank() {
        return Err(ctx.err("indices and data differ in rank"));
    }
    let ix = indices(ctx, ind, x.shape[axis])?;
    let st = strides(&x.shape);
    let mut idx = Vec::with_capacity(ix.len());
    let mut k = 0;
    each_index(&ind.shape, |m| {
        let off: usize = m.iter().enumerate().map(|(a, &i)| if a == axis { ix[k] } else { i } * st[a]).sum();
        idx.push(off);
        k += 1;
    });
    if idx.iter().any(|&i| i >= x.len()) {
        return Err(ctx.err("indices reach past the data"));
    }
    one(taken(x, ind.shape.clone(), &idx))
}

fn gather_nd(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.attr_i("batch_dims", 0) as usize;
    let q = ind.rank();
    let k = *ind.shape.last().ok_or_else(|| ctx.err("indices must have rank ≥ 1"))?;
    if b >= q || b + k > x.rank() || ind.shape[..b] != x.shape[..b] {
        return Err(ctx.err("indices do not fit the data"));
    }
    let iv = ind.to_i64s().ok_or_else(|| ctx.err("indices must be integers"))?;
    let batch: usize = x.shape[..b].iter().product();
    let inner: usize = x.shape[b + k..].iter().product();
    let per_batch: usize = x.shape[b..].iter().product();
    let st = strides(&x.shape[b..]);
    let tuples = iv.len() / k.max(1);
    let tuples_per_batch = tuples / batch.max(1);
    let mut idx = Vec::new();
    for t in 0..tuples {
        let bi = t / tuples_per_batch.max(1);
        let mut off = bi * per_batch;
        for j in 0..k {
            let dim = x.shape[b + j] as i64;
            let mut v = iv[t * k + j];
            if v < 0 {
                v += dim;
            }
            if v < 0 || v >= dim {
                return Err(ctx.err(format!("index {} is out of range", iv[t * k + j])));
            }
            off += v as usize * st[j];
        }
        idx.extend(off..off + inner);
    }
    let shape = [&ind.shape[..q - 1], &x.shape[b + k..]].concat();
    one(taken(x, shape, &idx))
}

/// Writes `updates` into a copy of `x` at the linear positions `targets`,
/// combining with `reduction` (`none`, `add`, `mul`, `max`, `min`).
fn scatter_into(ctx: &NodeCtx<'_>, x: &Tensor, updates: &Tensor, targets: &[usize]) -> Result<Tensor> {
    let reduction = ctx.attr_s("reduction").unwrap_or_else(|| "none".into());
    if reduction == "none" {
        let n = x.len();
        let mut src: Vec<usize> = (0..n).collect();
        for (u, &t) in targets.iter().enumerate() {
            src[t] = n + u;
        }
        let all = Data::concat(&[&x.data, &updates.data]).ok_or_else(|| ctx.err("data and updates differ in type"))?;
        return Ok(Tensor { shape: x.shape.clone(), data: all.take(&src) });
    }
    let mut out = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let up = updates.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    for (u, &t) in targets.iter().enumerate() {
        let (a, b) = (out[t], up[u]);
        out[t] = match reduction.as_str() {
            "add" => a + b,
            "mul" => a * b,
            "max" => a.max(b),
            "min" => a.min(b),
            other => return Err(ctx.unsupported(format!("reduction '{other}'"))),
        };
    }
    super::elementwise::from_f64s(ctx, x.elem(), x.shape.clone(), &out)
}

fn scatter_elements(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    if ind.shape != upd.shape || ind.rank() != x.rank() {
        return Err(ctx.err("indices and updates must have the data's rank and one shape"));
    }
    let ix = indices(ctx, ind, x.shape[axis])?;
    let st = strides(&x.shape);
    let mut targets = Vec::with_capacity(ix.len());
    let mut k = 0;
    let mut bad = false;
    each_index(&ind.shape, |m| {
        let mut off = 0;
        for (a, &i) in m.iter().enumerate() {
            let c = if a == axis { ix[k] } else { i };
            bad |= c >= x.shape[a];
            off += c * st[a];
        }
        targets.push(off);
        k += 1;
    });
    if bad {
        return Err(ctx.err("indices reach past the data"));
    }
    one(scatter_into(ctx, x, upd, &targets)?)
}

fn scatter_nd(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let k = *ind.shape.last().ok_or_else(|| ctx.err("indices must have rank ≥ 1"))?;
    if k > x.rank() {
        return Err(ctx.err("index tuples longer than the data's rank"));
    }
    let iv = ind.to_i64s().ok_or_else(|| ctx.err("indices must be integers"))?;
    let inner: usize = x.shape[k..].iter().product();
    let st = strides(&x.shape);
    let tuples = if k == 0 { ind.len() } else { iv.len() / k };
    if upd.len() != tuples * inner {
        return Err(ctx.err("updates do not match the indices"));
    }
    let mut targets = Vec::with_capacity(upd.len());
    for t in 0..tuples {
        let mut off = 0;
        for j in 0..k {
            let dim = x.shape[j] as i64;
            let v = iv[t * k + j];
            let v = if v < 0 { v + dim } else { v };
            if v < 0 || v >= dim {
                return Err(ctx.err(format!("index {} is out of range", iv[t * k + j])));
            }
            off += v as usize * st[j];
        }
        targets.extend(off..off + inner);
    }
    one(scatter_into(ctx, x, upd, &targets)?)
}

fn expand(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let target: Vec<usize> = ctx
        .opt_ints(1)?
        .ok_or_else(|| ctx.err("shape is required"))?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ctx.err("negative size")))
        .collect::<Result<_>>()?;
    let shape = broadcast_shape(&[&x.shape, &target])
        .ok_or_else(|| ctx.err(format!("{:?} does not broadcast to {target:?}", x.shape)))?;
    ctx.check_size(&shape)?;
    let idx = broadcast_index(&shape, &x.shape);
    one(taken(x, shape, &idx))
}

fn tile(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let reps = ctx.opt_ints(1)?.ok_or_else(|| ctx.err("repeats are required"))?;
    if reps.len() != x.rank() || reps.iter().any(|&r| r < 0) {
        return Err(ctx.err("repeats must be non-negative, one per axis"));
    }
    let shape: Vec<usize> = x
        .shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.checked_mul(r as usize).ok_or_else(|| ctx.err("the tiled size overflows")))
        .collect::<Result<_>>()?;
    ctx.check_size(&shape)?;
    // Row-major over (r0, d0, r1, d1, …) with stride 0 on each repeat axis
    // is the tiled tensor: rows are copied whole, nothing indexes an element.
    let st = strides(&x.shape);
    let view: Vec<usize> = reps.iter().zip(&x.shape).flat_map(|(&r, &d)| [r as usize, d]).collect();
    let stride: Vec<isize> = st.iter().flat_map(|&s| [0, s as isize]).collect();
    let mut tiled = strided_tensor(x, view, &stride, 0);
    tiled.shape = shape;
    one(tiled)
}

fn pad(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let r = x.rank();
    let (pads, value, axes) = if ctx.opset < 11 {
        let pads = ctx.attr_ints("pads").ok_or_else(|| ctx.err("pads are required"))?;
        let v = f64::from(ctx.attr_f("value", 0.0));
        (pads, Data::from_f64s(x.elem(), &[v]), None)
    } else {
        let pads = ctx.opt_ints(1)?.ok_or_else(|| ctx.err("pads are required"))?;
        let value = match ctx.opt_input(2)? {
            Some(t) if !t.is_empty() => Some(t.data.take(&[0])),
            _ => Data::from_f64s(x.elem(), &[0.0]).or_else(|| Some(Data::Str(vec![Vec::new()]))),
        };
        (pads, value, ctx.opt_ints(3)?)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&a| ctx.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(ctx.err(format!("{} pads for {} axes", pads.len(), axes.len())));
    }
    let mut before = vec![0i64; r];
    let mut after = vec![0i64; r];
    for (k, &a) in axes.iter().enumerate() {
        before[a] = pads[k];
        after[a] = pads[k + axes.len()];
    }
    let shape: Vec<usize> = (0..r)
        .map(|a| {
            usize::try_from(x.shape[a] as i64 + before[a] + after[a])
                .map_err(|_| ctx.err("pads remove more than the axis"))
        })
        .collect::<Result<_>>()?;
    ctx.check_size(&shape)?;
    let mode = ctx.attr_s("mode").unwrap_or_else(|| "constant".into());
    let st = strides(&x.shape);
    let n = x.len();
    let mut idx = Vec::new();
    let mut bad = false;
    each_index(&shape, |m| {
        let mut off = 0;
        for a in 0..r {
            let d = x.shape[a] as i64;
            let mut i = m[a] as i64 - before[a];
            if i < 0 || i >= d {
                i = match mode.as_str() {
                    "edge" => i.clamp(0, d - 1),
                    "wrap" => i.rem_euclid(d.max(1)),
                    "reflect" if d > 1 => {
                        let period = 2 * (d - 1);
                        let j = i.rem_euclid(period);
                        if j >= d {
                            period - j
                        } else {
                            j
                        }
                    }
                    "reflect" => 0,
                    _ => {
                        off = usize::MAX;
                        break;
                    }
                };
                if d == 0 {
                    bad = true;
                }
            }
            off += i as usize * st[a];
        }
        idx.push(if off == usize::MAX { n } else { off });
    });
    if bad {
        return Err(ctx.err("cannot pad an empty axis in this mode"));
    }
    if !["constant", "edge", "wrap", "reflect"].contains(&mode.as_str()) {
        return Err(ctx.unsupported(format!("mode '{mode}'")));
    }
    let value = value.ok_or_else(|| ctx.unsupported(format!("element type {}", x.elem())))?;
    let all =
        Data::concat(&[&x.data, &value]).ok_or_else(|| ctx.err("the pad value's type differs from the data's"))?;
    one(Tensor { shape, data: all.take(&idx) })
}

fn shape(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let r = x.rank() as i64;
    let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clampi(ctx.attr_i("start", 0));
    let end = clampi(ctx.attr_i("end", r));
    let dims: Vec<i64> = if start < end { x.shape[start..end].iter().map(|&d| d as i64).collect() } else { Vec::new() };
    one(Tensor::from_i64s(dims))
}

fn constant_of_shape(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let shape: Vec<usize> = ctx
        .opt_ints(0)?
        .ok_or_else(|| ctx.err("shape is required"))?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ctx.err("negative size")))
        .collect::<Result<_>>()?;
    let value = ctx.attr_tensor("value")?.unwrap_or(Tensor { shape: vec![1], data: Data::F32(vec![0.0]) });
    if value.len() != 1 {
        return Err(ctx.err("value must hold one element"));
    }
    let n = ctx.check_size(&shape)?;
    one(Tensor { shape, data: value.data.take(&vec![0; n]) })
}

fn range(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (s, l, d) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let elem = s.elem();
    if s.is_float() {
        let get = |t: &Tensor| t.to_f64s().and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("scalar operands"));
        let (s, l, d) = (get(s)?, get(l)?, get(d)?);
        let n = ((l - s) / d).ceil().max(0.0);
        if !n.is_finite() {
            return Err(ctx.err("the range is not finite"));
        }
        let n = ctx.check_size(&[n.min(usize::MAX as f64) as usize])?;
        // NumPy/ONNX accumulate in the element type: start + i*delta
        let vals: Vec<f64> = (0..n).map(|i| s + i as f64 * d).collect();
        return one(super::elementwise::from_f64s(ctx, elem, vec![n], &vals)?);
    }
    let get = |t: &Tensor| t.data.to_i128s().and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("scalar operands"));
    let (s, l, d) = (get(s)?, get(l)?, get(d)?);
    if d == 0 {
        return Err(ctx.err("delta 0"));
    }
    let span = l - s;
    let n = if (span > 0) == (d > 0) && span != 0 { (span.abs() + d.abs() - 1) / d.abs() } else { 0 };
    let n = ctx.check_size(&[usize::try_from(n).unwrap_or(usize::MAX)])?;
    let vals: Vec<i128> = (0..n as i128).map(|i| s + i * d).collect();
    let data = Data::from_i128s(elem, &vals).ok_or_else(|| ctx.unsupported(format!("element type {elem}")))?;
    one(Tensor { shape: vec![n], data })
}

fn trilu(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err("rank must be at least 2"));
    }
    let k = ctx.opt_ints(1)?.and_then(|v| v.first().copied()).unwrap_or(0);
    let upper = ctx.attr_i("upper", 1) != 0;
    let (rows, cols) = (x.shape[x.rank() - 2], x.shape[x.rank() - 1]);
    let zero = Data::from_f64s(x.elem(), &[0.0]).ok_or_else(|| ctx.unsupported("element type"))?;
    let all = Data::concat(&[&x.data, &zero]).ok_or_else(|| ctx.err("type"))?;
    let n = x.len();
    let idx: Vec<usize> = (0..n)
        .map(|p| {
            let (i, j) = (((p / cols) % rows) as i64, (p % cols) as i64);
            let keep = if upper { j - i >= k } else { j - i <= k };
            if keep {
                p
            } else {
                n
            }
        })
        .collect();
    one(Tensor { shape: x.shape.clone(), data: all.take(&idx) })
}

fn depth_to_space(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let b = ctx.attr_i("blocksize", 0) as usize;
    if x.rank() != 4 || b == 0 || x.shape[1] % (b * b) != 0 {
        return Err(ctx.err("needs NCHW data and a blocksize dividing C"));
    }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let c2 = c / (b * b);
    let crd = ctx.attr_s("mode").as_deref() == Some("CRD");
    let (shape6, perm) =
        if crd { (vec![n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3]) } else { (vec![n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2]) };
    let t = permute(&x.clone().reshaped(shape6).ok_or_else(|| ctx.err("shape"))?, &perm);
    one(t.reshaped(vec![n, c2, h * b, w * b]).ok_or_else(|| ctx.err("shape"))?)
}

fn space_to_depth(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let b = ctx.attr_i("blocksize", 0) as usize;
    if x.rank() != 4 || b == 0 || x.shape[2] % b != 0 || x.shape[3] % b != 0 {
        return Err(ctx.err("needs NCHW data and a blocksize dividing H and W"));
    }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let t = x.clone().reshaped(vec![n, c, h / b, b, w / b, b]).ok_or_else(|| ctx.err("shape"))?;
    // DCR (the default): block offsets outermost in the new depth; CRD: channels outermost
    let crd = ctx.attr_s("mode").as_deref() == Some("CRD");
    let t = permute(&t, if crd { &[0, 1, 3, 5, 2, 4] } else { &[0, 3, 5, 1, 2, 4] });
    one(t.reshaped(vec![n, c * b * b, h / b, w / b]).ok_or_else(|| ctx.err("shape"))?)
}

fn one_hot(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (ind, depth, values) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let depth = depth.to_f64s().and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("depth"))? as i64;
    if depth <= 0 || values.len() != 2 {
        return Err(ctx.err("depth must be positive and values hold [off, on]"));
    }
    let rank = ind.rank() + 1;
    let axis = ctx.axis(ctx.attr_i("axis", -1), rank)?;
    let iv = ind.to_f64s().ok_or_else(|| ctx.err("indices"))?;
    let d = depth as usize;
    let mut out_shape = ind.shape.clone();
    out_shape.insert(axis, d);
    ctx.check_size(&out_shape)?;
    let outer: usize = ind.shape[..axis].iter().product();
    let inner: usize = ind.shape[axis..].iter().product();
    let mut idx = Vec::with_capacity(iv.len() * d);
    for o in 0..outer {
        for k in 0..d {
            for i in 0..inner {
                let mut v = iv[o * inner + i] as i64;
                if v < 0 {
                    v += depth;
                }
                idx.push(usize::from(v == k as i64));
            }
        }
    }
    let mut shape = ind.shape.clone();
    shape.insert(axis, d);
    one(Tensor { shape, data: values.data.take(&idx) })
}

fn non_zero(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let mut coords: Vec<Vec<i64>> = vec![Vec::new(); x.rank()];
    let mut k = 0;
    let mut count = 0;
    each_index(&x.shape, |m| {
        if v[k] != 0.0 {
            for (a, &i) in m.iter().enumerate() {
                coords[a].push(i as i64);
            }
            count += 1;
        }
        k += 1;
    });
    if x.rank() == 0 {
        count = usize::from(v.first().is_some_and(|&a| a != 0.0));
    }
    one(Tensor { shape: vec![x.rank(), count], data: Data::I64(coords.concat()) })
}

fn compress(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, cond) = (ctx.input(0)?, ctx.input(1)?);
    let Data::Bool(c) = &cond.data else { return Err(ctx.err("condition must be bool")) };
    match ctx.attr_opt_i("axis") {
        None => {
            let idx: Vec<usize> = (0..x.len().min(c.len())).filter(|&i| c[i]).collect();
            one(taken(x, vec![idx.len()], &idx))
        }
        Some(a) => {
            let axis = ctx.axis(a, x.rank())?;
            let keep: Vec<usize> = (0..x.shape[axis].min(c.len())).filter(|&i| c[i]).collect();
            let outer: usize = x.shape[..axis].iter().product();
            let inner: usize = x.shape[axis + 1..].iter().product();
            let mut idx = Vec::new();
            for o in 0..outer {
                for &j in &keep {
                    let base = (o * x.shape[axis] + j) * inner;
                    idx.extend(base..base + inner);
                }
            }
            let mut shape = x.shape.clone();
            shape[axis] = keep.len();
            one(taken(x, shape, &idx))
        }
    }
}

fn reverse_sequence(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, lens) = (ctx.input(0)?, ctx.input(1)?);
    let batch_axis = ctx.attr_i("batch_axis", 1) as usize;
    let time_axis = ctx.attr_i("time_axis", 0) as usize;
    if x.rank() < 2 || batch_axis >= x.rank() || time_axis >= x.rank() {
        return Err(ctx.err("bad axes"));
    }
    let lv = lens.to_i64s().ok_or_else(|| ctx.err("lengths"))?;
    let steps = x.shape[time_axis] as i64;
    if lv.len() != x.shape[batch_axis] || lv.iter().any(|&l| l < 0 || l > steps) {
        return Err(ctx.err(format!("sequence_lens {lv:?} must hold one length in 0..={steps} per batch item")));
    }
    let st = strides(&x.shape);
    let mut idx = Vec::new();
    each_index(&x.shape, |m| {
        let b = m[batch_axis];
        let t = m[time_axis];
        let l = lv.get(b).copied().unwrap_or(0).max(0) as usize;
        let src_t = if t < l { l - 1 - t } else { t };
        idx.push(m.iter().enumerate().map(|(a, &i)| if a == time_axis { src_t } else { i } * st[a]).sum());
    });
    one(taken(x, x.shape.clone(), &idx))
}

fn eye_like(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() != 2 {
        return Err(ctx.err("rank must be 2"));
    }
    let k = ctx.attr_i("k", 0);
    let elem = ctx.attr_opt_i("dtype").map_or(x.elem(), |c| ElemType::from_code(c as i32));
    let (r, c) = (x.shape[0], x.shape[1]);
    let vals: Vec<f64> = (0..r * c).map(|p| f64::from(u8::from((p % c) as i64 - (p / c) as i64 == k))).collect();
    one(super::elementwise::from_f64s(ctx, elem, vec![r, c], &vals)?)
}

fn dropout(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let training = match ctx.opt_input(2)? {
        Some(t) => t.to_f64s().and_then(|v| v.first().copied()).unwrap_or(0.0) != 0.0,
        None => false,
    };
    let ratio = match ctx.opt_input(1)? {
        Some(t) => t.to_f64s().and_then(|v| v.first().copied()).unwrap_or(0.5),
        None => f64::from(ctx.attr_f("ratio", 0.5)),
    };
    if training && ratio != 0.0 {
        if ctx.opset < 12 {
            return Err(ctx.err("training mode is an input only from opset 12"));
        }
        return super::random::dropout_training(ctx, x, ratio);
    }
    // Before opset 10 the mask has the input's type (ones where kept); from
    // opset 10 it is bool.
    let data = if ctx.opset < 10 {
        Data::from_f64s(x.elem(), &vec![1.0; x.len()])
            .ok_or_else(|| ctx.err(format!("a mask of {} before opset 10", x.elem())))?
    } else {
        Data::Bool(vec![true; x.len()])
    };
    let mask = Tensor { shape: x.shape.clone(), data };
    Ok(vec![Some(Value::Tensor(x.clone())), Some(Value::Tensor(mask))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_clamp_like_numpy() {
        assert_eq!(slice_range(0, 3, 1, 5), (0, 3));
        assert_eq!(slice_range(-2, i64::MAX, 1, 5), (3, 2));
        assert_eq!(slice_range(4, -6, -1, 5), (4, 5));
        assert_eq!(slice_range(i64::MAX, i64::MIN, -2, 5), (4, 3));
        assert_eq!(slice_range(3, 1, 1, 5), (3, 0));
    }
}

/// `TensorScatter`: writes each batch's update into the cache along the
/// sequence axis starting at its write index (`circular`: wrapping around).
fn tensor_scatter(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["mode", "axis"])?;
    let (cache, update) = (ctx.input(0)?, ctx.input(1)?);
    let r = cache.rank();
    let axis = ctx.axis(ctx.attr_i("axis", -2), r)?;
    if r < 2 || axis == 0 || update.rank() != r || (0..r).any(|a| a != axis && update.shape[a] != cache.shape[a]) {
        return Err(ctx.err(format!("update {:?} does not fit cache {:?} on axis {axis}", update.shape, cache.shape)));
    }
    let circular = match ctx.attr_s("mode").as_deref().unwrap_or("linear") {
        "linear" => false,
        "circular" => true,
        other => return Err(ctx.err(format!("mode '{other}'"))),
    };
    let b = cache.shape[0];
    let starts = match ctx.opt_ints(2)? {
        Some(w) if w.len() == b => w,
        Some(w) => return Err(ctx.err(format!("{} write indices for batch {b}", w.len()))),
        None => vec![0; b],
    };
    let len = cache.shape[axis] as i64;
    let st = strides(&cache.shape);
    let mut targets: Vec<usize> = Vec::with_capacity(update.len());
    let mut bad = None;
    each_index(&update.shape, |m| {
        let mut pos = starts[m[0]] + m[axis] as i64;
        if circular {
            pos = pos.rem_euclid(len.max(1));
        }
        if pos < 0 || pos >= len {
            bad = Some(pos);
        }
        let p = pos.clamp(0, (len - 1).max(0)) as usize;
        targets.push(m.iter().enumerate().map(|(a, &i)| if a == axis { p } else { i } * st[a]).sum());
    });
    if let Some(pos) = bad {
        return Err(ctx.err(format!("write position {pos} is outside the cache's {len}")));
    }
    let n = cache.len();
    let mut src: Vec<usize> = (0..n).collect();
    for (u, &t) in targets.iter().enumerate() {
        src[t] = n + u;
    }
    let all = Data::concat(&[&cache.data, &update.data]).ok_or_else(|| ctx.err("cache and update differ in type"))?;
    one(Tensor { shape: cache.shape.clone(), data: all.take(&src) })
}
