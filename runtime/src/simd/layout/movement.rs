//! Data movement on the session's own kernels: **Split**, **Slice**,
//! **Gather** along an axis, **GatherND**, **Pad**, and **Transpose** of
//! the types the `f32` kernel ([`relayout`](super::relayout)) leaves, for tensors of any element type but
//! strings, the `f32` ones written into buffers from the session's pool.
//!
//! The reference kernels build these outputs through an index vector per
//! element (Gather, strided Slice) or runs into freshly allocated vectors,
//! whose pages the kernel must fault in and zero on every run: on the
//! benchmark zoo that made them up to 16% of a model's time (CSPResNet's
//! channel Splits of 128×128 planes 6.5 ms, Swin's `qkv[0]` Gathers 2.4 ms).
//! Here each output is a list of strided blocks ([`Strided`]), copied row by
//! row with `copy_from_slice` where the innermost axis is contiguous.
//!
//! Every operand that is not what the operator's specification allows
//! (indices out of range, sizes that do not add up, a pad mode the
//! reference names an error) returns `None`: the node then runs on the
//! reference kernels, which report it.

use super::contraction::Take;
use crate::ops::shape_ops::slice_range;
use crate::tensor::{Data, Elem, Tensor};
use diamond_ir::{AttrValue, Node};

/// A view of a row-major tensor: element `(i_0, …, i_{r-1})` of the view
/// is element `base + Σ i_a · strides[a]` of the source.
#[derive(Clone, Debug, PartialEq)]
pub struct Strided {
    pub base: isize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
}

impl Strided {
    /// The whole of a tensor of `shape`.
    pub fn whole(shape: &[usize]) -> Strided {
        let mut strides = vec![1isize; shape.len()];
        for a in (0..shape.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * shape[a + 1] as isize;
        }
        Strided { base: 0, shape: shape.to_vec(), strides }
    }

    /// The number of elements of the view.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every element of the view lies in `0..len` of the source.
    fn within(&self, len: usize) -> bool {
        if self.is_empty() {
            return true;
        }
        let (mut lo, mut hi) = (self.base, self.base);
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            let reach = (n as isize - 1) * s;
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        lo >= 0 && (hi as usize) < len
    }

    /// The view with adjacent axes that step through memory as one axis
    /// merged, and axes of size 1 dropped (at least one axis is kept).
    fn merged(&self) -> Strided {
        let mut shape: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut strides: Vec<isize> = Vec::with_capacity(self.shape.len());
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 1 {
                continue;
            }
            match (shape.last_mut(), strides.last_mut()) {
                (Some(pn), Some(ps)) if *ps == s * n as isize => {
                    *pn *= n;
                    *ps = s;
                }
                _ => {
                    shape.push(n);
                    strides.push(s);
                }
            }
        }
        if shape.is_empty() {
            shape.push(1);
            strides.push(1);
        }
        Strided { base: self.base, shape, strides }
    }
}

/// Appends the elements of `view` of `src` to `out`, in row-major order.
/// The caller has checked that the view lies within `src`.
fn append<T: Copy>(src: &[T], view: &Strided, out: &mut Vec<T>) {
    let v = view.merged();
    let rank = v.shape.len();
    let (inner, inner_stride) = (v.shape[rank - 1], v.strides[rank - 1]);
    let rows: usize = v.shape[..rank - 1].iter().product();
    let mut index = vec![0usize; rank - 1];
    let mut at = v.base;
    for _ in 0..rows {
        let start = at as usize;
        if inner_stride == 1 {
            out.extend_from_slice(&src[start..start + inner]);
        } else {
            out.extend((0..inner).map(|k| src[(at + k as isize * inner_stride) as usize]));
        }
        // the next row: the odometer over the outer axes
        for a in (0..rank - 1).rev() {
            index[a] += 1;
            at += v.strides[a];
            if index[a] < v.shape[a] {
                break;
            }
            at -= v.strides[a] * v.shape[a] as isize;
            index[a] = 0;
        }
    }
}

/// A tensor of `shape` holding, for each view in turn, its elements of
/// `x`: `f32` data in a buffer from `take`, other types in a new vector.
/// `None` for strings or a view outside `x`.
fn copied(x: &Tensor, shape: Vec<usize>, views: &[Strided], take: Take<'_>) -> Option<Tensor> {
    if !views.iter().all(|v| v.within(x.data.len())) {
        return None;
    }
    let total: usize = views.iter().map(Strided::len).sum();
    fn fill<T: Copy>(src: &[T], views: &[Strided], mut out: Vec<T>) -> Vec<T> {
        out.clear();
        for v in views.iter().filter(|v| !v.is_empty()) {
            append(src, v, &mut out);
        }
        out
    }
    let data = match &x.data {
        Data::F32(v) => Data::F32(fill(v, views, take(total))),
        Data::Str(_) => return None,
        other => crate::each_num!(other, v => Elem::wrap(fill(v, views, Vec::with_capacity(total))), _ => return None),
    };
    Tensor::new(shape, data)
}

/// The integer values of an index or size operand (`None` for floats).
fn ints(t: &Tensor) -> Option<Vec<i64>> {
    (!t.is_float()).then(|| t.to_i64s()).flatten()
}

fn ints_attr(node: &Node, name: &str) -> Option<Vec<i64>> {
    match node.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Ints(v)) => Some(v.to_vec()),
        _ => None,
    }
}

fn int_attr(node: &Node, name: &str) -> Option<i64> {
    match node.attribute(name).and_then(|a| a.value()) {
        Some(AttrValue::Int(v)) => Some(v),
        _ => None,
    }
}

/// `axis` of a tensor of rank `rank`, negative counting from the end.
fn axis_of(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    (-r..r).contains(&axis).then(|| axis.rem_euclid(r.max(1)) as usize)
}

/// The operand at `k` when the node names it.
fn operand<'t>(inputs: &[Option<&'t Tensor>], k: usize) -> Option<&'t Tensor> {
    inputs.get(k).copied().flatten()
}

/// The sizes a Split cuts its axis of size `dim` into, for `outputs` outputs:
/// the `split` operand (opset 13 on), else the `split` attribute, else
/// `num_outputs` parts of `ceil(dim / n)` (opset 18), else equal parts.
fn split_sizes(node: &Node, inputs: &[Option<&Tensor>], dim: usize, outputs: usize) -> Option<Vec<usize>> {
    let given = match operand(inputs, 1) {
        Some(t) => Some(ints(t)?),
        None => ints_attr(node, "split"),
    };
    let sizes: Vec<usize> = match given {
        Some(s) => s.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<_>>()?,
        None => {
            let parts = match int_attr(node, "num_outputs") {
                Some(n) => usize::try_from(n).ok()?,
                None if outputs > 0 && dim % outputs == 0 => outputs,
                None => return None,
            };
            if parts == 0 {
                return None;
            }
            let chunk = dim.div_ceil(parts);
            (0..parts).map(|k| chunk.min(dim.saturating_sub(k * chunk))).collect()
        }
    };
    (sizes.len() == outputs && sizes.iter().sum::<usize>() == dim).then_some(sizes)
}

/// Split: each output a block of the axis.
pub(crate) fn split(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Vec<Tensor>> {
    let x = operand(inputs, 0)?;
    let axis = axis_of(int_attr(node, "axis").unwrap_or(0), x.rank())?;
    let sizes = split_sizes(node, inputs, x.shape[axis], node.outputs.len())?;
    let whole = Strided::whole(&x.shape);
    let mut start = 0;
    let mut outs = Vec::with_capacity(sizes.len());
    for s in sizes {
        let mut view = whole.clone();
        view.base = start as isize * whole.strides[axis];
        view.shape[axis] = s;
        outs.push(copied(x, view.shape.clone(), std::slice::from_ref(&view), take)?);
        start += s;
    }
    Some(outs)
}

/// Slice: `starts`, `ends`, `axes` and `steps` from the operands (opset 10
/// on) or the attributes (before), clamped as NumPy clamps.
pub(crate) fn slice(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = operand(inputs, 0)?;
    let (starts, ends, axes, steps) = if node.attribute("starts").is_some() {
        (ints_attr(node, "starts")?, ints_attr(node, "ends")?, ints_attr(node, "axes"), None)
    } else {
        // an operand left out is `Some(None)`; one that holds no integers, `None`
        let opt = |k: usize| match operand(inputs, k) {
            None => Some(None),
            Some(t) => ints(t).map(Some),
        };
        (ints(operand(inputs, 1)?)?, ints(operand(inputs, 2)?)?, opt(3)?, opt(4)?)
    };
    let n = starts.len();
    let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || axes.len() != n || steps.len() != n {
        return None;
    }
    let mut view = Strided::whole(&x.shape);
    let mut seen = vec![false; x.rank()];
    for k in 0..n {
        let a = axis_of(axes[k], x.rank())?;
        if steps[k] == 0 || std::mem::replace(&mut seen[a], true) {
            return None;
        }
        let (first, len) = slice_range(starts[k], ends[k], steps[k], x.shape[a]);
        if len > 0 {
            view.base += first as isize * view.strides[a];
        }
        view.shape[a] = len;
        view.strides[a] *= steps[k] as isize;
    }
    if view.is_empty() {
        view.base = 0;
    }
    copied(x, view.shape.clone(), std::slice::from_ref(&view), take)
}

/// Gather along an axis: for each outer point, the block of each index.
pub(crate) fn gather(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let (x, indices) = (operand(inputs, 0)?, operand(inputs, 1)?);
    let axis = axis_of(int_attr(node, "axis").unwrap_or(0), x.rank())?;
    let dim = x.shape[axis] as i64;
    let picked: Vec<i64> = ints(indices)?
        .into_iter()
        .map(|i| if i < 0 { i + dim } else { i })
        .map(|i| (0..dim).contains(&i).then_some(i))
        .collect::<Option<_>>()?;
    let whole = Strided::whole(&x.shape);
    // the output: the axis replaced by the indices' axes; as views, for
    // each index, the outer axes with the axis fixed, the inner ones whole
    let shape = [&x.shape[..axis], &indices.shape[..], &x.shape[axis + 1..]].concat();
    if picked.len() == 1 || x.shape[..axis].iter().product::<usize>() == 1 {
        // one view per index, in the output's order
        let views: Vec<Strided> = picked
            .iter()
            .map(|&i| {
                let mut v = whole.clone();
                v.base = i as isize * whole.strides[axis];
                v.shape[axis] = 1;
                v
            })
            .collect();
        return copied(x, shape, &views, take);
    }
    // several indices under several outer points: one view per (outer, index)
    let outer: usize = x.shape[..axis].iter().product();
    let inner = Strided { base: 0, shape: x.shape[axis + 1..].to_vec(), strides: whole.strides[axis + 1..].to_vec() };
    let outer_stride = whole.strides[axis] * dim as isize;
    let mut views = Vec::with_capacity(outer * picked.len());
    for o in 0..outer {
        for &i in &picked {
            let mut v = inner.clone();
            v.base = o as isize * outer_stride + i as isize * whole.strides[axis];
            views.push(v);
        }
    }
    copied(x, shape, &views, take)
}

/// GatherND: for every index tuple (the last axis of `indices`, after
/// `batch_dims` axes shared with the data), the block of the data it
/// names; one view per tuple. Negative indices count from the end.
pub(crate) fn gather_nd(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let (x, indices) = (operand(inputs, 0)?, operand(inputs, 1)?);
    let batch = usize::try_from(int_attr(node, "batch_dims").unwrap_or(0)).ok()?;
    let (r, q) = (x.rank(), indices.rank());
    let k = *indices.shape.last()?;
    if q < 1 || batch >= q || batch + k > r || x.shape[..batch] != indices.shape[..batch] {
        return None;
    }
    let whole = Strided::whole(&x.shape);
    // the trailing axes of a row-major tensor: one contiguous block
    let block: usize = x.shape[batch + k..].iter().product();
    let batch_stride = if batch == 0 { 0 } else { whole.strides[batch - 1] as usize };
    let picked = ints(indices)?;
    let tuples: usize = indices.shape[..q - 1].iter().product();
    let per_batch: usize = indices.shape[batch..q - 1].iter().product();
    // tuples of no index (each naming a whole batch block) go to the reference
    if k == 0 || picked.len() != tuples * k {
        return None;
    }
    let mut starts = Vec::with_capacity(tuples);
    for (t, tuple) in picked.chunks_exact(k).enumerate() {
        let mut at = t / per_batch * batch_stride;
        for (a, &i) in tuple.iter().enumerate() {
            let dim = x.shape[batch + a] as i64;
            let i = if i < 0 { i + dim } else { i };
            if !(0..dim).contains(&i) {
                return None;
            }
            at += i as usize * whole.strides[batch + a] as usize;
        }
        starts.push(at);
    }
    let shape = [&indices.shape[..q - 1], &x.shape[batch + k..]].concat();
    fn fill<T: Copy>(src: &[T], starts: &[usize], block: usize, mut out: Vec<T>) -> Vec<T> {
        out.clear();
        for &at in starts {
            out.extend_from_slice(&src[at..at + block]);
        }
        out
    }
    let total = starts.len() * block;
    let data = match &x.data {
        Data::F32(v) => Data::F32(fill(v, &starts, block, take(total))),
        Data::Str(_) => return None,
        other => {
            crate::each_num!(other, v => Elem::wrap(fill(v, &starts, block, Vec::with_capacity(total))), _ => return None)
        }
    };
    Tensor::new(shape, data)
}

/// Transpose of a tensor of any type: one view, its strides permuted.
pub(crate) fn transpose(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = operand(inputs, 0)?;
    let perm = super::relayout::permutation(node, x.rank())?;
    let whole = Strided::whole(&x.shape);
    let view = Strided {
        base: 0,
        shape: perm.iter().map(|&a| x.shape[a]).collect(),
        strides: perm.iter().map(|&a| whole.strides[a]).collect(),
    };
    copied(x, view.shape.clone(), &[view], take)
}

/// Where an output position along one padded axis reads: a source index,
/// or the constant.
fn source_index(out: i64, before: i64, dim: i64, mode: &str) -> Option<Option<usize>> {
    let i = out - before;
    if (0..dim).contains(&i) {
        return Some(Some(i as usize));
    }
    Some(match mode {
        "constant" => None,
        "edge" => Some(i.clamp(0, dim - 1) as usize),
        "wrap" => Some(i.rem_euclid(dim) as usize),
        "reflect" if dim >= 2 => {
            let period = 2 * (dim - 1);
            let r = i.rem_euclid(period);
            Some((if r < dim { r } else { period - r }) as usize)
        }
        _ => return None,
    })
}

/// Pad of an `f32` tensor: `constant` (with its value), `edge`, `reflect`
/// and `wrap`, pads from the operand (opset 11 on, with `axes` from 18) or
/// the attribute (before); negative pads crop.
pub(crate) fn pad(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = operand(inputs, 0)?;
    let Data::F32(src) = &x.data else { return None };
    let rank = x.rank();
    let mode = match node.attribute("mode").and_then(|a| a.value()) {
        Some(AttrValue::String(s)) => String::from_utf8(s.to_vec()).ok()?,
        None => "constant".to_string(),
        _ => return None,
    };
    let (pads, value) = match node.attribute("pads") {
        Some(_) => (ints_attr(node, "pads")?, super::contraction::float_attr(node, "value", 0.0)?),
        None => {
            let pads = ints(operand(inputs, 1)?)?;
            let value = match operand(inputs, 2) {
                Some(Tensor { data: Data::F32(v), .. }) if v.len() == 1 => v[0],
                Some(t) if t.len() == 0 => 0.0,
                None => 0.0,
                Some(_) => return None,
            };
            (pads, value)
        }
    };
    // pads per axis: (before, after), over the axes the `axes` operand names
    let axes: Vec<usize> = match operand(inputs, 3) {
        Some(t) => ints(t)?.into_iter().map(|a| axis_of(a, rank)).collect::<Option<_>>()?,
        None => (0..rank).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return None;
    }
    let mut around = vec![(0i64, 0i64); rank];
    for (k, &a) in axes.iter().enumerate() {
        around[a] = (pads[k], pads[k + axes.len()]);
    }
    let mut shape = Vec::with_capacity(rank);
    for (a, &(before, after)) in around.iter().enumerate() {
        let n = x.shape[a] as i64 + before + after;
        if n < 0 {
            return None;
        }
        if n > 0 && x.shape[a] == 0 && (before > 0 || after > 0) && mode != "constant" {
            return None;
        }
        shape.push(n as usize);
    }
    let total: usize = shape.iter().product();
    if rank == 0 || total == 0 {
        return Tensor::new(shape, Data::F32(Vec::new()));
    }
    // each axis' map from output positions to source positions
    let maps: Vec<Vec<Option<usize>>> = (0..rank)
        .map(|a| {
            (0..shape[a] as i64)
                .map(|o| source_index(o, around[a].0, x.shape[a] as i64, &mode))
                .collect::<Option<Vec<_>>>()
        })
        .collect::<Option<_>>()?;
    let strides = Strided::whole(&x.shape).strides;
    let last = rank - 1;
    let runs = runs_of(&maps[last]);
    let mut out = take(total);
    out.clear();
    let rows = total / shape[last];
    let mut index = vec![0usize; last];
    for _ in 0..rows {
        let mut row = Some(0usize);
        for a in 0..last {
            row = row.zip(maps[a][index[a]]).map(|(r, i)| r + i * strides[a] as usize);
        }
        match row {
            None => out.resize(out.len() + shape[last], value),
            Some(row) => {
                for &(from, len) in &runs {
                    match from {
                        Some(i) => out.extend_from_slice(&src[row + i..row + i + len]),
                        None => out.resize(out.len() + len, value),
                    }
                }
            }
        }
        for a in (0..last).rev() {
            index[a] += 1;
            if index[a] < shape[a] {
                break;
            }
            index[a] = 0;
        }
    }
    Tensor::new(shape, Data::F32(out))
}

/// The last axis' map as runs: (first source index or the constant,
/// length), consecutive source indices merged.
fn runs_of(map: &[Option<usize>]) -> Vec<(Option<usize>, usize)> {
    let mut runs: Vec<(Option<usize>, usize)> = Vec::new();
    for &m in map {
        match (runs.last_mut(), m) {
            (Some((Some(i), len)), Some(j)) if *i + *len == j => *len += 1,
            (Some((None, len)), None) => *len += 1,
            _ => runs.push((m, 1)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjacent_contiguous_axes_merge_and_unit_axes_drop() {
        let v = Strided::whole(&[2, 1, 3, 4]);
        assert_eq!(v.merged(), Strided { base: 0, shape: vec![24], strides: vec![1] });
        let mut s = Strided::whole(&[4, 6]);
        s.shape[1] = 3;
        assert_eq!(s.merged().shape, vec![4, 3]);
    }

    #[test]
    fn a_strided_view_copies_rows_and_steps() {
        let src: Vec<i32> = (0..24).collect();
        // [2, 3, 4]: every other column, rows reversed
        let view = Strided { base: 8, shape: vec![2, 3, 2], strides: vec![12, -4, 2] };
        assert!(view.within(src.len()));
        let mut out = Vec::new();
        append(&src, &view, &mut out);
        assert_eq!(out, vec![8, 10, 4, 6, 0, 2, 20, 22, 16, 18, 12, 14]);
        let outside = Strided { base: 20, shape: vec![2], strides: vec![4] };
        assert!(!outside.within(src.len()));
    }

    #[test]
    fn pad_runs_merge_consecutive_sources() {
        let map = [None, None, Some(0), Some(1), Some(2), Some(1), None];
        assert_eq!(runs_of(&map), vec![(None, 2), (Some(0), 3), (Some(1), 1), (None, 1)]);
        assert_eq!(source_index(-1, 0, 4, "reflect"), Some(Some(1)));
        assert_eq!(source_index(4, 0, 4, "reflect"), Some(Some(2)));
        assert_eq!(source_index(5, 0, 4, "reflect"), Some(Some(1)));
        assert_eq!(source_index(5, 0, 4, "edge"), Some(Some(3)));
        assert_eq!(source_index(5, 0, 4, "wrap"), Some(Some(1)));
        assert_eq!(source_index(5, 0, 1, "reflect"), None);
    }

    fn node(op: &str, attrs: Vec<(&str, i64)>) -> Node {
        let attributes = attrs
            .into_iter()
            .map(|(name, v)| diamond_ir::Attribute {
                name: Some(name.into()),
                attr_type: Some(diamond_ir::AttrType::Int),
                i: Some(v),
                ..Default::default()
            })
            .collect();
        Node { op_type: Some(op.into()), attributes, ..Default::default() }
    }

    fn take(len: usize) -> Vec<f32> {
        Vec::with_capacity(len)
    }

    #[test]
    fn gather_nd_takes_the_named_blocks_per_batch() {
        // data [2, 3, 2] int64, batch_dims 1, indices [2, 2, 1]: rows of each batch
        let data = Tensor::new(vec![2, 3, 2], Data::I64((0..12).collect())).unwrap();
        let indices = Tensor::new(vec![2, 2, 1], Data::I64(vec![2, 0, -1, 1])).unwrap();
        let n = node("GatherND", vec![("batch_dims", 1)]);
        let out = gather_nd(&n, &[Some(&data), Some(&indices)], &mut take).unwrap();
        assert_eq!(out.shape, vec![2, 2, 2]);
        assert_eq!(out.data, Data::I64(vec![4, 5, 0, 1, 10, 11, 8, 9]));
        // no batch axes, whole tuples: single elements of f32 data
        let data = Tensor::new(vec![2, 2], Data::F32(vec![1.0, 2.0, 3.0, 4.0])).unwrap();
        let indices = Tensor::new(vec![3, 2], Data::I64(vec![1, 0, 0, 1, 1, 1])).unwrap();
        let out = gather_nd(&node("GatherND", vec![]), &[Some(&data), Some(&indices)], &mut take).unwrap();
        assert_eq!((out.shape, out.data), (vec![3], Data::F32(vec![3.0, 2.0, 4.0])));
        // an index out of range goes to the reference, which reports it
        let bad = Tensor::new(vec![1, 2], Data::I64(vec![2, 0])).unwrap();
        assert!(gather_nd(&node("GatherND", vec![]), &[Some(&data), Some(&bad)], &mut take).is_none());
    }

    #[test]
    fn transpose_of_integers() {
        let x = Tensor::new(vec![2, 3], Data::I64(vec![0, 1, 2, 3, 4, 5])).unwrap();
        let t = transpose(&node("Transpose", vec![]), &[Some(&x)], &mut take).unwrap();
        assert_eq!((t.shape, t.data), (vec![3, 2], Data::I64(vec![0, 3, 1, 4, 2, 5])));
    }
}
