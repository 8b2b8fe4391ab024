//! A fused group under construction: its space, the program body built so
//! far, and each graph value it computes with the space axes the value's
//! dims follow (its frame). A node joins by having its outputs framed in
//! the space, its in-group inputs broadcast into that frame, and its other
//! inputs turned into operand views (uniform ones into constants, the
//! outputs of Transpose, Slice and Reshape-like nodes that only it reads folded
//! into the view of their input).

use super::recipe::{Recipe, Reduction};
use super::Cx;
use diamond_infer::graph::DimReport;
use diamond_ir::{ElemType, NodeId, ValueId};
use diamond_runtime::kernel::{BinaryOp, Combiner, Extent, Inst, Instr, UnaryOp, View, ViewDim};
use std::collections::HashMap;

/// A value computed in the group.
#[derive(Clone, Debug)]
pub(super) struct Val {
    /// The instruction holding it.
    pub inst: usize,
    /// Per dim, the space axis it follows (`None`: a size-1 dim).
    pub frame: Vec<Option<usize>>,
    /// Whether it varies with the reduction axes.
    pub full: bool,
}

/// A fused group.
#[derive(Clone, Debug, Default)]
pub(super) struct Group {
    pub space: Vec<DimReport>,
    pub reduce: Vec<usize>,
    pub operands: Vec<View>,
    pub body: Vec<Instr>,
    /// Values in the order they were computed.
    pub order: Vec<ValueId>,
    pub values: HashMap<ValueId, Val>,
    /// Nodes computed, and movement nodes folded into views.
    pub nodes: Vec<NodeId>,
    pub absorbed: Vec<NodeId>,
    loads: HashMap<usize, usize>,
}

pub(super) fn extent(d: &DimReport) -> Extent {
    match d {
        DimReport::Known(n) => Extent::Known(*n),
        DimReport::Symbolic(s) => Extent::Symbol(s.clone()),
        DimReport::Unknown => Extent::Symbol("?".into()),
    }
}

impl Group {
    fn emit(&mut self, inst: Inst, ty: ElemType) -> usize {
        self.body.push(Instr { inst, ty });
        self.body.len() - 1
    }

    fn identity(&self) -> Vec<Option<usize>> {
        (0..self.space.len()).map(Some).collect()
    }

    fn keep_frame(&self) -> Vec<Option<usize>> {
        (0..self.space.len()).map(|a| (!self.reduce.contains(&a)).then_some(a)).collect()
    }

    fn drop_frame(&self) -> Vec<Option<usize>> {
        (0..self.space.len()).filter(|a| !self.reduce.contains(a)).map(Some).collect()
    }

    /// The shape a value of `frame` has.
    fn shape_of(&self, frame: &[Option<usize>]) -> Vec<DimReport> {
        frame.iter().map(|f| f.map_or(DimReport::Known(1), |a| self.space[a].clone())).collect()
    }

    /// Adds node `n` (recipe `r`, data inputs `data`); `None` (and the
    /// group unusable: callers try on a clone) when it does not fit.
    pub(super) fn add(&mut self, cx: &Cx<'_>, me: Option<usize>, n: NodeId, r: &Recipe, data: &[usize]) -> Option<()> {
        let node = &cx.graph.nodes[n];
        let ins: Vec<ValueId> = data.iter().map(|&i| node.inputs[i]).collect();
        let out0 = node.outputs[0];
        let out_shape = cx.a.shape(cx.model, out0)?.to_vec();
        let out_ty = cx.a.dtype(cx.model, out0)?;
        let fresh = self.body.is_empty();
        // The frame of the primary output (and the space, for a new group).
        let frame: Vec<Option<usize>> = if let Some(axes) = r.axes() {
            let x_shape = cx.a.shape(cx.model, ins[0])?.to_vec();
            if fresh {
                self.space = x_shape;
                self.reduce = axes.to_vec();
            } else {
                let x = self.values.get(&ins[0])?;
                if !x.full || x.frame != self.identity() || (!self.reduce.is_empty() && self.reduce != axes) {
                    return None;
                }
                self.reduce = axes.to_vec();
            }
            match r {
                Recipe::Reduce { keepdims: false, .. } => self.drop_frame(),
                Recipe::Reduce { .. } => self.keep_frame(),
                _ => self.identity(),
            }
        } else if fresh {
            self.space = out_shape.clone();
            self.identity()
        } else {
            let any_full = ins.iter().any(|v| self.values.get(v).is_some_and(|x| x.full));
            let keep = self.shape_of(&self.keep_frame());
            if out_shape == self.space && (self.reduce.is_empty() || any_full || out_shape != keep) {
                self.identity()
            } else if !self.reduce.is_empty() && out_shape == keep {
                self.keep_frame()
            } else if !self.reduce.is_empty() && out_shape == self.shape_of(&self.drop_frame()) {
                self.drop_frame()
            } else {
                return None;
            }
        };
        if self.shape_of(&frame) != out_shape {
            return None;
        }
        let full_frame = r.axes().is_some() && !matches!(r, Recipe::Reduce { .. });
        let data_frame = if r.axes().is_some() { self.identity() } else { frame.clone() };
        // Resolve the data inputs.
        let mut args = Vec::new();
        for (k, &v) in ins.iter().enumerate() {
            // Normalization parameters broadcast into the full space.
            let target = if k == 0 {
                &data_frame
            } else if full_frame {
                &data_frame
            } else {
                &frame
            };
            let inst = match self.values.get(&v) {
                Some(x) => {
                    if !fits(&x.frame, target) {
                        return None;
                    }
                    x.inst
                }
                None => self.external(cx, me, n, v, target)?,
            };
            args.push(inst);
        }
        let full = if r.axes().is_some() {
            full_frame
        } else {
            self.reduce.is_empty() || frame.iter().flatten().any(|a| self.reduce.contains(a))
        };
        let ty_of = |me: &Group, i: usize| me.body[i].ty;
        let results: Vec<usize> = match r {
            Recipe::Unary(UnaryOp::Identity) => vec![args[0]],
            Recipe::Unary(op) => vec![self.emit(Inst::Unary(*op, args[0]), out_ty)],
            Recipe::Binary(op) => {
                if ty_of(self, args[0]) != ty_of(self, args[1]) {
                    return None;
                }
                vec![self.emit(Inst::Binary(*op, args[0], args[1]), out_ty)]
            }
            Recipe::Fold(op, mean) => {
                let mut acc = args[0];
                for &b in &args[1..] {
                    acc = self.emit(Inst::Binary(*op, acc, b), out_ty);
                }
                if *mean && args.len() > 1 {
                    let c = self.emit(Inst::Const(args.len() as f64), out_ty);
                    acc = self.emit(Inst::Binary(BinaryOp::Div, acc, c), out_ty);
                }
                vec![acc]
            }
            Recipe::Select => vec![self.emit(Inst::Select(args[0], args[1], args[2]), out_ty)],
            Recipe::Cast => {
                if ty_of(self, args[0]) == out_ty {
                    vec![args[0]]
                } else {
                    vec![self.emit(Inst::Cast(args[0]), out_ty)]
                }
            }
            Recipe::Mish => {
                let sp = self.emit(Inst::Unary(UnaryOp::Softplus, args[0]), out_ty);
                let t = self.emit(Inst::Unary(UnaryOp::Tanh, sp), out_ty);
                vec![self.emit(Inst::Binary(BinaryOp::Mul, args[0], t), out_ty)]
            }
            Recipe::Reduce { kind, .. } => {
                let x = args[0];
                let t = out_ty;
                let red = |g: &mut Group, c: Combiner, a: usize| g.emit(Inst::Reduce(c, a), t);
                let un = |g: &mut Group, op: UnaryOp, a: usize| g.emit(Inst::Unary(op, a), t);
                let y = match kind {
                    Reduction::Sum => red(self, Combiner::Sum, x),
                    Reduction::Mean => red(self, Combiner::Mean, x),
                    Reduction::Max => red(self, Combiner::Max, x),
                    Reduction::Min => red(self, Combiner::Min, x),
                    Reduction::Prod => red(self, Combiner::Prod, x),
                    Reduction::SumSquare => {
                        let s = un(self, UnaryOp::Square, x);
                        red(self, Combiner::Sum, s)
                    }
                    Reduction::L1 => {
                        let s = un(self, UnaryOp::Abs, x);
                        red(self, Combiner::Sum, s)
                    }
                    Reduction::L2 => {
                        let s = un(self, UnaryOp::Square, x);
                        let s = red(self, Combiner::Sum, s);
                        un(self, UnaryOp::Sqrt, s)
                    }
                    Reduction::LogSum => {
                        let s = red(self, Combiner::Sum, x);
                        un(self, UnaryOp::Log, s)
                    }
                    Reduction::LogSumExp => {
                        let m = red(self, Combiner::Max, x);
                        let d = self.emit(Inst::Binary(BinaryOp::Sub, x, m), t);
                        let e = un(self, UnaryOp::Exp, d);
                        let s = red(self, Combiner::Sum, e);
                        let l = un(self, UnaryOp::Log, s);
                        self.emit(Inst::Binary(BinaryOp::Add, l, m), t)
                    }
                };
                vec![y]
            }
            Recipe::Softmax { log, .. } => {
                let t = out_ty;
                let x = args[0];
                let m = self.emit(Inst::Reduce(Combiner::Max, x), t);
                let d = self.emit(Inst::Binary(BinaryOp::Sub, x, m), t);
                let e = self.emit(Inst::Unary(UnaryOp::Exp, d), t);
                let s = self.emit(Inst::Reduce(Combiner::Sum, e), t);
                if *log {
                    let l = self.emit(Inst::Unary(UnaryOp::Log, s), t);
                    vec![self.emit(Inst::Binary(BinaryOp::Sub, d, l), t)]
                } else {
                    vec![self.emit(Inst::Binary(BinaryOp::Div, e, s), t)]
                }
            }
            Recipe::LayerNorm { eps, .. } | Recipe::RmsNorm { eps, .. } => {
                let t = out_ty;
                let x = args[0];
                let layer = matches!(r, Recipe::LayerNorm { .. });
                let (centred, mean) = if layer {
                    let mean = self.emit(Inst::Reduce(Combiner::Mean, x), t);
                    (self.emit(Inst::Binary(BinaryOp::Sub, x, mean), t), Some(mean))
                } else {
                    (x, None)
                };
                let sq = self.emit(Inst::Unary(UnaryOp::Square, centred), t);
                let var = self.emit(Inst::Reduce(Combiner::Mean, sq), t);
                let e = self.emit(Inst::Const(*eps), t);
                let ve = self.emit(Inst::Binary(BinaryOp::Add, var, e), t);
                let sd = self.emit(Inst::Unary(UnaryOp::Sqrt, ve), t);
                let inv = self.emit(Inst::Unary(UnaryOp::Reciprocal, sd), t);
                let norm = self.emit(Inst::Binary(BinaryOp::Mul, centred, inv), t);
                let mut y = self.emit(Inst::Binary(BinaryOp::Mul, norm, args[1]), t);
                if let Some(&b) = args.get(2) {
                    y = self.emit(Inst::Binary(BinaryOp::Add, y, b), t);
                }
                match mean {
                    Some(mean) => vec![y, mean, inv],
                    None => vec![y],
                }
            }
        };
        // Record the named outputs.
        let keep = self.keep_frame();
        for (k, &o) in node.outputs.iter().enumerate() {
            if cx.graph.value_name(o).is_empty() {
                continue;
            }
            let inst = *results.get(k)?;
            let (frame, full) = if k == 0 { (frame.clone(), full) } else { (keep.clone(), false) };
            if cx.a.shape(cx.model, o)? != self.shape_of(&frame).as_slice()
                || cx.a.dtype(cx.model, o)? != self.body[inst].ty
            {
                return None;
            }
            self.order.push(o);
            self.values.insert(o, Val { inst, frame, full });
        }
        self.nodes.push(n);
        Some(())
    }

    /// The instruction reading external value `v` (read by node `reader`)
    /// broadcast into `frame`.
    fn external(
        &mut self,
        cx: &Cx<'_>,
        me: Option<usize>,
        reader: NodeId,
        v: ValueId,
        frame: &[Option<usize>],
    ) -> Option<usize> {
        let ty = cx.a.dtype(cx.model, v)?;
        if let Some(u) = crate::uniform::uniform(cx.model, cx.a, v) {
            return Some(self.emit(Inst::Const(u.value), ty));
        }
        let shape = cx.a.shape(cx.model, v)?.to_vec();
        let (m, k) = (shape.len(), frame.len());
        if m > k {
            return None;
        }
        let mut view = Vec::with_capacity(m);
        let mut dims: Vec<Extent> = shape.iter().map(extent).collect();
        for (j, d) in shape.iter().enumerate() {
            if *d == DimReport::Known(1) {
                view.push(ViewDim::fixed());
                continue;
            }
            match frame[j + k - m] {
                Some(a) if self.space[a] == *d => view.push(ViewDim::follow(a)),
                // Two spellings of a size the check takes as equal under an assumption
                // (`min(128, sequence)` against `sequence`): the view is declared at the
                // space's extent, and a run whose operand is not that long (the
                // assumption broken) finds its length differ and runs the nodes instead.
                Some(a) if assumed_equal(&self.space[a], d) => {
                    dims[j] = extent(&self.space[a]);
                    view.push(ViewDim::follow(a));
                }
                _ => return None,
            }
        }
        let mut op = View { value: cx.graph.value_name(v).to_string(), elem: ty, dims, view };
        // Fold the movement nodes only this group reads.
        let (mut value, mut reader) = (v, reader);
        let mut shape_now = shape;
        while let Some((mnode, input)) = cx.absorbable(value, reader, me, &self.absorbed) {
            let mv = &cx.graph.nodes[mnode];
            let in_shape = cx.a.shape(cx.model, input)?.to_vec();
            if mv.op_type() == "Transpose" {
                if op.dims != shape_now.iter().map(extent).collect::<Vec<_>>() {
                    break;
                }
                let r = in_shape.len();
                let perm: Vec<usize> = match mv.attribute("perm").and_then(|a| a.value()) {
                    Some(diamond_ir::AttrValue::Ints(p)) => {
                        p.iter().map(|&i| usize::try_from(i).ok()).collect::<Option<_>>()?
                    }
                    _ => (0..r).rev().collect(),
                };
                if perm.len() != r || op.view.len() != r {
                    break;
                }
                let mut nv = vec![ViewDim::fixed(); r];
                for (i, &p) in perm.iter().enumerate() {
                    nv[p] = op.view[i].clone();
                }
                op.view = nv;
                op.dims = in_shape.iter().map(extent).collect();
            } else if mv.op_type() == "Slice" {
                if op.dims != shape_now.iter().map(extent).collect::<Vec<_>>() || op.view.len() != in_shape.len() {
                    break;
                }
                let Some(per_axis) = slice_steps(cx, mv, &in_shape) else { break };
                for (vd, (start, step)) in op.view.iter_mut().zip(per_axis) {
                    vd.start = start + step * vd.start;
                    vd.step *= step;
                }
                op.dims = in_shape.iter().map(extent).collect();
            }
            op.value = cx.graph.value_name(input).to_string();
            self.absorbed.push(mnode);
            value = input;
            reader = mnode;
            shape_now = in_shape;
        }
        if let Some(k) = self.operands.iter().position(|o| *o == op) {
            if let Some(&i) = self.loads.get(&k) {
                return Some(i);
            }
        }
        self.operands.push(op);
        let k = self.operands.len() - 1;
        let i = self.emit(Inst::Load(k), ty);
        self.loads.insert(k, i);
        Some(i)
    }
}

/// Whether an operand dim `d` may follow a space axis of extent `axis`
/// though the two are spelt differently: both are sizes the check knows
/// (a symbol or expression, or a number against one), not two different
/// numbers, and neither is unknown. Bound programs check each operand's
/// length when they run, so a pair that turns out unequal falls back.
fn assumed_equal(axis: &DimReport, d: &DimReport) -> bool {
    matches!(
        (axis, d),
        (DimReport::Symbolic(_), DimReport::Symbolic(_) | DimReport::Known(_))
            | (DimReport::Known(_), DimReport::Symbolic(_))
    )
}

/// Per axis of a Slice's input, the first index it reads and its step
/// (`(0, 1)` for axes it keeps whole); `None` unless its starts, axes and
/// steps are constants and the sliced axes have known sizes.
fn slice_steps(cx: &Cx<'_>, n: &diamond_ir::Node, in_shape: &[DimReport]) -> Option<Vec<(i64, i64)>> {
    let r = in_shape.len();
    let opset = cx.model.opset_version("").unwrap_or(23);
    let ints_attr = |name: &str| match n.attribute(name).and_then(|a| a.value()) {
        Some(diamond_ir::AttrValue::Ints(v)) => Some(v.to_vec()),
        _ => None,
    };
    let input = |i: usize| -> Option<Option<Vec<i64>>> {
        match n.inputs.get(i).copied().filter(|&v| !cx.graph.value_name(v).is_empty()) {
            None => Some(None),
            Some(v) => Some(Some(cx.a.constant(cx.model, v)?.as_i64s()?)),
        }
    };
    let (starts, axes, steps) =
        if opset < 10 { (ints_attr("starts")?, ints_attr("axes"), None) } else { (input(1)??, input(3)?, input(4)?) };
    let axes: Vec<i64> = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps: Vec<i64> = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if axes.len() != starts.len() || steps.len() != starts.len() {
        return None;
    }
    let mut out = vec![(0i64, 1i64); r];
    for ((&a, &s), &k) in axes.iter().zip(&starts).zip(&steps) {
        let a = usize::try_from(if a < 0 { a + r as i64 } else { a }).ok().filter(|&a| a < r)?;
        let DimReport::Known(d) = in_shape[a] else { return None };
        let d = i64::try_from(d).ok()?;
        if k == 0 {
            return None;
        }
        let s = if s < 0 { s.saturating_add(d) } else { s };
        let s = if k > 0 { s.clamp(0, d) } else { s.clamp(0, d - 1) };
        out[a] = (s, k);
    }
    Some(out)
}

/// Whether a value of frame `inner` broadcasts into `outer` (right-aligned).
fn fits(inner: &[Option<usize>], outer: &[Option<usize>]) -> bool {
    if inner.len() > outer.len() {
        return false;
    }
    let off = outer.len() - inner.len();
    inner.iter().enumerate().all(|(j, f)| match (f, outer[j + off]) {
        (None, _) => true,
        (Some(a), Some(b)) => *a == b,
        (Some(_), None) => false,
    })
}
