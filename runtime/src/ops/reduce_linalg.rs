//! Reductions (`Reduce*`, `ArgMax`/`ArgMin`, `CumSum`, `TopK`), the softmax
//! family, and linear algebra (`MatMul`, `Gemm`, `Einsum`, `Det`).
//!
//! Everything computes in `f64` (exact for the integer sizes in practice)
//! and converts once to the output type.

use super::elementwise::from_f64s;
use super::shape_ops::each_index;
use super::{broadcast_index, broadcast_shape, one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{strides, Data, Tensor, Value};

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "ReduceSum" => reduce(ctx, Red::Sum, 13),
        "ReduceMean" => reduce(ctx, Red::Mean, 18),
        "ReduceMax" => reduce(ctx, Red::Max, 18),
        "ReduceMin" => reduce(ctx, Red::Min, 18),
        "ReduceProd" => reduce(ctx, Red::Prod, 18),
        "ReduceL1" => reduce(ctx, Red::L1, 18),
        "ReduceL2" => reduce(ctx, Red::L2, 18),
        "ReduceLogSum" => reduce(ctx, Red::LogSum, 18),
        "ReduceLogSumExp" => reduce(ctx, Red::LogSumExp, 18),
        "ReduceSumSquare" => reduce(ctx, Red::SumSquare, 18),
        "ArgMax" => arg(ctx, true),
        "ArgMin" => arg(ctx, false),
        "Softmax" => softmax(ctx, Soft::Softmax),
        "LogSoftmax" => softmax(ctx, Soft::Log),
        "Hardmax" => softmax(ctx, Soft::Hard),
        "CumSum" => cumsum(ctx, false),
        "CumProd" => cumsum(ctx, true),
        "TopK" => topk(ctx),
        "MatMul" => matmul_op(ctx),
        "Gemm" => gemm(ctx),
        "Einsum" => einsum(ctx),
        "Det" => det(ctx),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Red {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// For each element of `shape`, the linear index of its group when the
/// `reduced` axes collapse; and the kept shape (reduced axes as 1).
fn groups(shape: &[usize], reduced: &[bool]) -> (Vec<usize>, Vec<usize>) {
    let kept: Vec<usize> = shape.iter().zip(reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let st = strides(&kept);
    // Axis by axis, outermost first: each group index so far is followed by
    // its offsets along the axis (all 0 along a reduced one), which is
    // row-major order without indexing each element's coordinates.
    let mut g = vec![0usize];
    for ((&d, &r), &s) in shape.iter().zip(reduced).zip(&st) {
        g = g.iter().flat_map(|&base| (0..d).map(move |i| if r { base } else { base + i * s })).collect();
    }
    (g, kept)
}

fn reduce(ctx: &NodeCtx<'_>, red: Red, axes_input_from: i64) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axes = if ctx.opset >= axes_input_from { ctx.opt_ints(1)? } else { ctx.attr_ints("axes") };
    let keep = ctx.attr_i("keepdims", 1) != 0;
    let noop = ctx.attr_i("noop_with_empty_axes", 0) != 0;
    let r = x.rank();
    let mut reduced = vec![false; r];
    match axes {
        Some(a) if !a.is_empty() => {
            for &a in &a {
                reduced[ctx.axis(a, r)?] = true;
            }
        }
        _ if noop => {
            let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
            let v: Vec<f64> = match red {
                Red::L1 => v.iter().map(|a| a.abs()).collect(),
                Red::SumSquare => v.iter().map(|a| a * a).collect(),
                _ => return one(x.clone()),
            };
            return one(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?);
        }
        _ => reduced = vec![true; r],
    }
    // Sums and means over trailing axes of f32 data: each output is one
    // contiguous run, added in the same order (in f64) as below, without
    // widening the whole tensor or indexing every element's group.
    let trailing = reduced.iter().skip_while(|&&r| !r).all(|&r| r);
    if let (true, Red::Sum | Red::Mean, crate::tensor::Data::F32(values)) = (trailing, red, &x.data) {
        let kept: Vec<usize> = x.shape.iter().zip(&reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
        let n_out: usize = kept.iter().product();
        let run: usize = x.shape.iter().zip(&reduced).filter(|(_, &r)| r).map(|(&d, _)| d).product();
        if n_out > 0 && run > 0 {
            let sums: Vec<f32> = values
                .chunks(run)
                .map(|c| {
                    let s = c.iter().fold(0.0f64, |acc, &a| acc + a as f64);
                    (if red == Red::Mean { s / run as f64 } else { s }) as f32
                })
                .collect();
            let shape =
                if keep { kept } else { x.shape.iter().zip(&reduced).filter(|(_, &r)| !r).map(|(&d, _)| d).collect() };
            return one(Tensor::new(shape, crate::tensor::Data::F32(sums)).ok_or_else(|| ctx.unsupported("shape"))?);
        }
    }
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let (g, kept) = groups(&x.shape, &reduced);
    let n_out: usize = kept.iter().product();
    let count = if n_out == 0 { 0 } else { x.len() / n_out };
    let init = match red {
        Red::Max | Red::LogSumExp => f64::NEG_INFINITY,
        Red::Min => f64::INFINITY,
        Red::Prod => 1.0,
        _ => 0.0,
    };
    // LogSumExp subtracts each group's max first.
    let mut gmax = vec![f64::NEG_INFINITY; n_out];
    if red == Red::LogSumExp {
        for (k, &a) in v.iter().enumerate() {
            gmax[g[k]] = gmax[g[k]].max(a);
        }
    }
    let mut acc = vec![init; n_out];
    for (k, &a) in v.iter().enumerate() {
        let o = &mut acc[g[k]];
        *o = match red {
            Red::Sum | Red::Mean | Red::LogSum => *o + a,
            Red::Max => {
                if a.is_nan() || o.is_nan() {
                    f64::NAN
                } else {
                    o.max(a)
                }
            }
            Red::Min => {
                if a.is_nan() || o.is_nan() {
                    f64::NAN
                } else {
                    o.min(a)
                }
            }
            Red::Prod => *o * a,
            Red::L1 => *o + a.abs(),
            Red::L2 | Red::SumSquare => *o + a * a,
            Red::LogSumExp => {
                let m = gmax[g[k]];
                let base = if *o == f64::NEG_INFINITY { 0.0 } else { *o };
                base + if m.is_finite() { (a - m).exp() } else { (a - m).exp().min(1.0) }
            }
        };
    }
    for (k, o) in acc.iter_mut().enumerate() {
        *o = match red {
            Red::Mean => *o / count as f64,
            Red::L2 => o.sqrt(),
            Red::LogSum => o.ln(),
            Red::LogSumExp if count == 0 => f64::NEG_INFINITY,
            Red::LogSumExp => o.ln() + if gmax[k].is_finite() { gmax[k] } else { 0.0 },
            _ => *o,
        };
    }
    // an empty Max/Min of integers is the type's lowest/highest value (the
    // saturating conversion of ∓inf); for bools, false/true
    if x.elem() == diamond_ir::ElemType::Bool {
        for a in &mut acc {
            *a = a.clamp(0.0, 1.0);
        }
    }
    let shape = if keep { kept } else { x.shape.iter().zip(&reduced).filter(|(_, &r)| !r).map(|(&d, _)| d).collect() };
    one(from_f64s(ctx, x.elem(), shape, &acc)?)
}

fn arg(ctx: &NodeCtx<'_>, max: bool) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", 0), x.rank())?;
    let keep = ctx.attr_i("keepdims", 1) != 0;
    let last = ctx.attr_i("select_last_index", 0) != 0;
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let dim = x.shape[axis];
    if dim == 0 {
        return Err(ctx.err("arg over an empty axis"));
    }
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| v[(o * dim + k) * inner + i];
            let mut best = 0;
            for k in 1..dim {
                let (a, b) = (at(k), at(best));
                let better = if max { a > b } else { a < b };
                if better || (last && a == b) {
                    best = k;
                }
            }
            out.push(best as i64);
        }
    }
    let mut shape = x.shape.clone();
    if keep {
        shape[axis] = 1;
    } else {
        shape.remove(axis);
    }
    one(Tensor { shape, data: Data::I64(out) })
}

#[derive(Clone, Copy, PartialEq)]
enum Soft {
    Softmax,
    Log,
    Hard,
}

fn softmax(ctx: &NodeCtx<'_>, kind: Soft) -> Result<Outs> {
    let x = ctx.input(0)?;
    let v = super::elementwise::floats(ctx, x)?;
    let r = x.rank();
    // Before opset 13 the input is coerced to 2-D at `axis` (default 1).
    let (outer, dim, inner) = if ctx.opset < 13 {
        let a = ctx.attr_i("axis", 1);
        let a = if a < 0 { a + r as i64 } else { a };
        if a < 0 || a > r as i64 {
            return Err(ctx.err(format!("axis {a} is out of range")));
        }
        let a = a as usize;
        (x.shape[..a].iter().product::<usize>(), x.shape[a..].iter().product::<usize>(), 1)
    } else {
        let a = ctx.axis(ctx.attr_i("axis", -1), r)?;
        (x.shape[..a].iter().product(), x.shape[a], x.shape[a + 1..].iter().product())
    };
    let mut out = vec![0.0; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * dim + k) * inner + i;
            let m = (0..dim).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            match kind {
                Soft::Hard => {
                    if let Some(best) = (0..dim).find(|&k| v[at(k)] == m) {
                        out[at(best)] = 1.0;
                    }
                }
                _ => {
                    let s: f64 = (0..dim).map(|k| (v[at(k)] - m).exp()).sum();
                    for k in 0..dim {
                        out[at(k)] = if kind == Soft::Log { v[at(k)] - m - s.ln() } else { (v[at(k)] - m).exp() / s };
                    }
                }
            }
        }
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

fn cumsum(ctx: &NodeCtx<'_>, product: bool) -> Result<Outs> {
    let x = ctx.input(0)?;
    let a = ctx.opt_ints(1)?.and_then(|v| v.first().copied()).ok_or_else(|| ctx.err("axis is required"))?;
    let axis = ctx.axis(a, x.rank())?;
    let exclusive = ctx.attr_i("exclusive", 0) != 0;
    let reverse = ctx.attr_i("reverse", 0) != 0;
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let dim = x.shape[axis];
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut out = vec![0.0; v.len()];
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = if product { 1.0 } else { 0.0 };
            for step in 0..dim {
                let k = if reverse { dim - 1 - step } else { step };
                let p = (o * dim + k) * inner + i;
                let next = if product { acc * v[p] } else { acc + v[p] };
                out[p] = if exclusive { acc } else { next };
                acc = next;
            }
        }
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

fn topk(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let k = match ctx.opt_ints(1)? {
        Some(v) => *v.first().ok_or_else(|| ctx.err("K is empty"))?,
        None => ctx.attr_opt_i("k").ok_or_else(|| ctx.err("K is required"))?,
    };
    let axis = ctx.axis(ctx.attr_i("axis", -1), x.rank())?;
    let largest = ctx.attr_i("largest", 1) != 0;
    let dim = x.shape[axis];
    let k = usize::try_from(k).ok().filter(|&k| k <= dim).ok_or_else(|| ctx.err(format!("K {k} is out of range")))?;
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let (src, ind) = top_k_sources(&v, &x.shape, axis, k, largest);
    let mut shape = x.shape.clone();
    shape[axis] = k;
    let values = Tensor { shape: shape.clone(), data: x.data.take(&src) };
    Ok(vec![Some(Value::Tensor(values)), Some(Value::Tensor(Tensor { shape, data: Data::I64(ind) }))])
}

/// TopK's picks over `values` (of `shape`) along `axis`: for each output
/// position, the source position (into `values`) and the index along the
/// axis. The `k` largest (or smallest) of each slice, by value and then by
/// index (NaN above every number, `-0` equal to `0`), found by selection
/// and then sorted: O(n + k log k) a slice. The SIMD session's TopK calls
/// it on `f32` values, the reference on their `f64` widening (the same order).
pub(crate) fn top_k_sources<T: PartialOrd + Copy>(
    values: &[T],
    shape: &[usize],
    axis: usize,
    k: usize,
    largest: bool,
) -> (Vec<usize>, Vec<i64>) {
    let dim = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut src = vec![0usize; outer * k * inner];
    let mut ind = vec![0i64; outer * k * inner];
    let mut order: Vec<usize> = Vec::with_capacity(dim);
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * dim + j) * inner + i;
            let rank = |p: &usize, q: &usize| {
                let (a, b) = (values[at(*p)], values[at(*q)]);
                // a total preorder: NaN above every number
                let up = a.partial_cmp(&b).unwrap_or_else(|| (a != a).cmp(&(b != b)));
                (if largest { up.reverse() } else { up }).then(p.cmp(q))
            };
            order.clear();
            order.extend(0..dim);
            if k < dim {
                order.select_nth_unstable_by(k, rank);
                order.truncate(k);
            }
            order.sort_unstable_by(rank);
            for (r, &j) in order.iter().take(k).enumerate() {
                let p = (o * k + r) * inner + i;
                src[p] = at(j);
                ind[p] = j as i64;
            }
        }
    }
    (src, ind)
}

/// NumPy `matmul` of `a` and `b` in `f64`: (result, shape).
pub(crate) fn matmul(
    ctx: &NodeCtx<'_>,
    a: &Tensor,
    b: &Tensor,
    av: &[f64],
    bv: &[f64],
) -> Result<(Vec<f64>, Vec<usize>)> {
    if a.rank() == 0 || b.rank() == 0 {
        return Err(ctx.err("MatMul operands must have rank ≥ 1"));
    }
    let mut ash = a.shape.clone();
    let mut bsh = b.shape.clone();
    let a1 = ash.len() == 1;
    let b1 = bsh.len() == 1;
    if a1 {
        ash.insert(0, 1);
    }
    if b1 {
        bsh.push(1);
    }
    let (m, k) = (ash[ash.len() - 2], ash[ash.len() - 1]);
    let (k2, n) = (bsh[bsh.len() - 2], bsh[bsh.len() - 1]);
    if k != k2 {
        return Err(ctx.err(format!("inner sizes differ: {:?} × {:?}", a.shape, b.shape)));
    }
    let abatch = &ash[..ash.len() - 2];
    let bbatch = &bsh[..bsh.len() - 2];
    let batch = broadcast_shape(&[abatch, bbatch])
        .ok_or_else(|| ctx.err(format!("batch dims {abatch:?} and {bbatch:?} do not broadcast")))?;
    let ia = broadcast_index(&batch, abatch);
    let ib = broadcast_index(&batch, bbatch);
    let mut out = vec![0.0; ia.len() * m * n];
    if bbatch.iter().product::<usize>() == 1 && abatch == batch.as_slice() {
        // one right-hand matrix for every batch: the batches are rows of one
        // product (a [seq, 1, k] · [k, n] is one seq×k·k×n product, not seq
        // vector products each reading the whole matrix)
        product(ia.len() * m, k, n, av, &bv[..k * n], &mut out);
    } else {
        for (bi, (&pa, &pb)) in ia.iter().zip(&ib).enumerate() {
            let lhs = &av[pa * m * k..(pa + 1) * m * k];
            let rhs = &bv[pb * k * n..(pb + 1) * k * n];
            product(m, k, n, lhs, rhs, &mut out[bi * m * n..(bi + 1) * m * n]);
        }
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    if !b1 {
        shape.push(n);
    }
    Ok((out, shape))
}

/// Products at least this many multiply-adds go through the `gemm` crate's
/// blocked `f64` kernel; smaller ones through the plain loop.
const BLOCKED_PRODUCT_WORK: usize = 1 << 15;

/// `out = lhs · rhs` for row-major `m×k` and `k×n` matrices, in `f64`. Large
/// products (a constant `MatMul` folded by `optimize`, a verification run)
/// use the blocked kernel: the plain loop costs seconds on a 512×768×768
/// product. Both follow IEEE arithmetic (`0 · ∞` is NaN); only the order of
/// the additions differs, which `f64` makes invisible at the output types.
pub(super) fn product(m: usize, k: usize, n: usize, lhs: &[f64], rhs: &[f64], out: &mut [f64]) {
    if m * k * n >= BLOCKED_PRODUCT_WORK {
        // SAFETY: `lhs` holds m·k, `rhs` k·n and `out` m·n elements, all
        // row-major with the strides given; the slices do not overlap.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                out.as_mut_ptr(),
                1,
                n as isize,
                false,
                lhs.as_ptr(),
                1,
                k as isize,
                rhs.as_ptr(),
                1,
                n as isize,
                0.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
        return;
    }
    for i in 0..m {
        let o = &mut out[i * n..(i + 1) * n];
        for (kk, &x) in lhs[i * k..(i + 1) * k].iter().enumerate() {
            let row = &rhs[kk * n..(kk + 1) * n];
            for (oj, &y) in o.iter_mut().zip(row) {
                *oj += x * y;
            }
        }
    }
}

fn matmul_op(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.elem() != b.elem() {
        return Err(ctx.err(format!("operand types differ: {} and {}", a.elem(), b.elem())));
    }
    let av = a.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let bv = b.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let (out, shape) = matmul(ctx, a, b, &av, &bv)?;
    one(from_f64s(ctx, a.elem(), shape, &out)?)
}

fn gemm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.rank() != 2 || b.rank() != 2 {
        return Err(ctx.err("Gemm operands must be matrices"));
    }
    let ta = ctx.attr_i("transA", 0) != 0;
    let tb = ctx.attr_i("transB", 0) != 0;
    let alpha = f64::from(ctx.attr_f("alpha", 1.0));
    let beta = f64::from(ctx.attr_f("beta", 1.0));
    let at = if ta { super::shape_ops::permute(a, &[1, 0]) } else { a.clone() };
    let bt = if tb { super::shape_ops::permute(b, &[1, 0]) } else { b.clone() };
    let av = at.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let bv = bt.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let (mut out, shape) = matmul(ctx, &at, &bt, &av, &bv)?;
    for o in &mut out {
        *o *= alpha;
    }
    if let Some(c) = ctx.opt_input(2)? {
        let cv = c.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
        if broadcast_shape(&[&c.shape, &shape]).as_deref() != Some(&shape[..]) {
            return Err(ctx.err(format!("C {:?} does not broadcast to {shape:?}", c.shape)));
        }
        let ic = broadcast_index(&shape, &c.shape);
        for (o, &p) in out.iter_mut().zip(&ic) {
            *o += beta * cv[p];
        }
    }
    one(from_f64s(ctx, a.elem(), shape, &out)?)
}

fn einsum(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let eq: String = ctx
        .attr_s("equation")
        .ok_or_else(|| ctx.err("equation is required"))?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let ops: Vec<&Tensor> = (0..ctx.n_inputs()).map(|i| ctx.input(i)).collect::<Result<_>>()?;
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ops.len() {
        return Err(ctx.err(format!("the equation has {} operands, the node {}", terms.len(), ops.len())));
    }
    // '...' becomes placeholder labels '0'..'9', aligned at the right.
    let mut ell = 0usize;
    for (t, op) in terms.iter().zip(&ops) {
        if t.contains("...") {
            let letters = t.replace("...", "").chars().count();
            ell = ell.max(op.rank().checked_sub(letters).ok_or_else(|| ctx.err("operand rank below its labels"))?);
        }
    }
    let placeholders: Vec<char> = (0..ell).map(|i| char::from(b'0' + i as u8)).collect();
    let expand = |t: &str, rank: usize| -> Vec<char> {
        if let Some((l, r)) = t.split_once("...") {
            let n = rank.saturating_sub(l.chars().count() + r.chars().count());
            l.chars().chain(placeholders[ell - n..].iter().copied()).chain(r.chars()).collect()
        } else {
            t.chars().collect()
        }
    };
    let labels: Vec<Vec<char>> = terms.iter().zip(&ops).map(|(t, op)| expand(t, op.rank())).collect();
    let mut sizes: std::collections::BTreeMap<char, usize> = Default::default();
    for (ls, op) in labels.iter().zip(&ops) {
        if ls.len() != op.rank() {
            return Err(ctx.err(format!("term {:?} does not fit rank {}", ls.iter().collect::<String>(), op.rank())));
        }
        for (&c, &d) in ls.iter().zip(&op.shape) {
            let e = sizes.entry(c).or_insert(d);
            if *e == 1 {
                *e = d;
            } else if d != 1 && *e != d {
                return Err(ctx.err(format!("label '{c}' has sizes {e} and {d}")));
            }
        }
    }
    let out: Vec<char> = match &rhs {
        Some(r) => {
            if r.contains("...") {
                let (l, rr) = r.split_once("...").unwrap_or((r, ""));
                l.chars().chain(placeholders.iter().copied()).chain(rr.chars()).collect()
            } else {
                r.chars().collect()
            }
        }
        None => {
            let mut counts: std::collections::BTreeMap<char, usize> = Default::default();
            for ls in &labels {
                for &c in ls {
                    *counts.entry(c).or_default() += 1;
                }
            }
            placeholders
                .iter()
                .copied()
                .chain(counts.iter().filter(|(c, &n)| n == 1 && !c.is_ascii_digit()).map(|(&c, _)| c))
                .collect()
        }
    };
    let summed: Vec<char> = sizes.keys().copied().filter(|c| !out.contains(c)).collect();
    let all: Vec<char> = out.iter().chain(&summed).copied().collect();
    let dims: Vec<usize> = all
        .iter()
        .map(|c| sizes.get(c).copied().ok_or_else(|| ctx.err(format!("label '{c}' is unknown"))))
        .collect::<Result<_>>()?;
    let vals: Vec<Vec<f64>> =
        ops.iter().map(|o| o.to_f64s().ok_or_else(|| ctx.unsupported("string data"))).collect::<Result<_>>()?;
    // per operand: stride of each label in `all` (0 where absent or broadcast)
    let op_strides: Vec<Vec<usize>> = labels
        .iter()
        .zip(&ops)
        .map(|(ls, op)| {
            let st = strides(&op.shape);
            all.iter()
                .map(|c| {
                    ls.iter()
                        .enumerate()
                        .filter(|(_, l)| *l == c)
                        .map(|(a, _)| if op.shape[a] == 1 { 0 } else { st[a] })
                        .sum()
                })
                .collect()
        })
        .collect();
    let out_dims = &dims[..out.len()];
    let n_out: usize = out_dims.iter().product();
    let mut result = vec![0.0; n_out];
    let mut k = 0;
    each_index(&dims, |m| {
        let mut p = 1.0;
        for (v, st) in vals.iter().zip(&op_strides) {
            let off: usize = m.iter().zip(st).map(|(&i, &s)| i * s).sum();
            p *= v[off];
        }
        let o: usize = m[..out.len()].iter().zip(strides(out_dims)).map(|(&i, s)| i * s).sum();
        result[o] += p;
        k += 1;
    });
    one(from_f64s(ctx, ops[0].elem(), out_dims.to_vec(), &result)?)
}

fn det(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let v = super::elementwise::floats(ctx, x)?;
    let r = x.rank();
    if r < 2 || x.shape[r - 1] != x.shape[r - 2] {
        return Err(ctx.err("Det needs square matrices"));
    }
    let n = x.shape[r - 1];
    let batch: usize = x.shape[..r - 2].iter().product();
    let mut out = Vec::with_capacity(batch);
    for b in 0..batch {
        let mut m: Vec<f64> = v[b * n * n..(b + 1) * n * n].to_vec();
        let mut d = 1.0;
        for c in 0..n {
            let p = (c..n).max_by(|&i, &j| m[i * n + c].abs().total_cmp(&m[j * n + c].abs())).unwrap_or(c);
            if m[p * n + c] == 0.0 {
                d = 0.0;
                break;
            }
            if p != c {
                for j in 0..n {
                    m.swap(p * n + j, c * n + j);
                }
                d = -d;
            }
            d *= m[c * n + c];
            for i in c + 1..n {
                let f = m[i * n + c] / m[c * n + c];
                for j in c..n {
                    m[i * n + j] -= f * m[c * n + j];
                }
            }
        }
        out.push(d);
    }
    one(from_f64s(ctx, x.elem(), x.shape[..r - 2].to_vec(), &out)?)
}
