//! How each kind of step runs: nodes on the reference kernels, contractions
//! (alone, with their elementwise program fused after them or folded into
//! their epilogue), nodes on the session's own kernels, quantized products,
//! relabelings, programs on the tile evaluator; and the buffers the steps
//! take from and give back to the session's pool. A child of `session.rs`
//! (the session's fields are private to it).

#[allow(unused_imports)]
use super::*;

impl Session<'_> {
    /// Runs `nodes` on the reference kernels; the bytes they added.
    pub(super) fn run_nodes(&mut self, nodes: &[NodeId], peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        self.on_reference = true;
        let mut made = 0;
        for &n in nodes {
            let (computed, inner) = run_one(self.model, graph, &graph.nodes[n], &self.frame)?;
            *peak = (*peak).max(live + made + inner);
            for (o, value) in computed {
                made += value.byte_size();
                if let Some(old) = self.frame.values[idx(o)].replace(value) {
                    made -= old.byte_size();
                }
            }
        }
        Ok(made)
    }

    /// Runs contraction `n` on the fast kernels, or on the reference kernels
    /// when they do not cover its operands; the bytes it added.
    /// A convolution whose weight is constant keeps what the kernels derive
    /// from it ([`Prepared`]) from run to run, resident like the weight.
    pub(super) fn run_contraction(&mut self, n: NodeId, op: ContractionOp, peak: &mut u64, live: u64) -> Result<u64> {
        let (mut slot, before) = self.take_filters(n);
        let made = self.run_on_own_kernels(n, peak, live, &mut |node, inputs, take| {
            contraction::compute(op, node, inputs, take, slot.as_mut(), Epilogue::default())
        })?;
        Ok(made + self.keep_filters(n, slot, before))
    }

    /// For a contraction with a constant weight (a convolution's filters, a
    /// MatMul's or Gemm's B), the slot of what its kernels derive from the
    /// weight ([`Prepared`], taken out of the session for the call) and the
    /// bytes it held; `None` otherwise.
    pub(super) fn take_filters(&mut self, n: NodeId) -> (Option<Option<Prepared>>, u64) {
        let weight = self.frame.graph.nodes[n].inputs.get(1).copied();
        let constant = weight.is_some_and(|w| self.initializer[idx(w)]);
        let slot = constant.then(|| self.filters.remove(&n));
        let before = slot.as_ref().and_then(|s| s.as_ref()).map_or(0, Prepared::byte_size);
        (slot, before)
    }

    /// Puts back what [`Self::take_filters`] took (now filled, if the call
    /// derived it), held like the weight; the bytes it grew by.
    pub(super) fn keep_filters(&mut self, n: NodeId, slot: Option<Option<Prepared>>, before: u64) -> u64 {
        keep_derived(&mut self.resident, &mut self.filters, n, slot, before, Prepared::byte_size)
    }

    /// Where each operand of program `r` lies (operand `skip`, if any, a
    /// null placeholder), or `None` when one is missing or not what `r`
    /// was bound for.
    pub(super) fn operand_srcs(&self, r: &Ready, skip: Option<usize>) -> Option<Vec<Src>> {
        let mut srcs = Vec::with_capacity(r.operands.len());
        for (k, &id) in r.operands.iter().enumerate() {
            if Some(k) == skip {
                srcs.push(Src::F32(std::ptr::null()));
                continue;
            }
            let Some(Value::Tensor(t)) = self.frame.values[idx(id)].as_ref() else { return None };
            srcs.push(match (&t.data, r.program.operands[k].elem) {
                (Data::F32(v), ElemType::Float) if v.len() == r.bound.operand_lens[k] => Src::F32(v.as_ptr()),
                (Data::Bool(v), ElemType::Bool) if v.len() == r.bound.operand_lens[k] => Src::Bool(v.as_ptr()),
                _ => return None,
            });
        }
        Some(srcs)
    }

    /// Runs contraction `n` with program `r` over each finished tile of its
    /// result (operand `k` of `r`); the bytes it added. The program writes
    /// over the result where the result dies at this step (and is no graph
    /// output); otherwise the result is kept as a value too. Where the fast
    /// kernels do not cover the contraction, or its result is not the size
    /// `r` was bound for, the two run one after the other as unfused steps.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_fused(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        r: &Ready,
        k: usize,
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let Schedule::Elementwise(order) = &r.schedule else { unreachable!("fusable() takes elementwise programs") };
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let result = node.outputs[0];
        let unfused = |session: &mut Self, peak: &mut u64| session.run_unfused(n, op, r, step, peak, live);
        let Some(srcs) = self.operand_srcs(r, Some(k)) else { return unfused(self, peak) };
        let dies = self.frees.get(step).is_some_and(|f| f.contains(&result));
        let over = fused_post::writable_over(&r.program, &r.bound, k)
            .filter(|&j| dies && self.frame.values[idx(r.outputs[j])].is_none());
        let mut bufs: Vec<Option<Data>> = Vec::with_capacity(r.outputs.len());
        let mut dsts = Vec::with_capacity(r.outputs.len());
        for (j, out) in r.program.outputs.iter().enumerate() {
            let len: usize = r.bound.output_shapes[j].iter().product();
            if Some(j) == over {
                dsts.push(Dst::F32(std::ptr::null_mut()));
                bufs.push(None);
                continue;
            }
            let mut data = match out.view.elem {
                ElemType::Float => Data::F32(take_from(&mut self.pool, len)),
                _ => Data::Bool(vec![false; len]),
            };
            dsts.push(match &mut data {
                Data::F32(v) => Dst::F32(v.as_mut_ptr()),
                Data::Bool(v) => Dst::Bool(v.as_mut_ptr()),
                _ => unreachable!("made above"),
            });
            bufs.push(Some(data));
        }
        let post = fused_post::ProgramPost::new(&r.program, order, &r.bound, srcs, dsts, k, over, self.simd);
        let (mut slot, before) = self.take_filters(n);
        let computed = node_inputs(&self.frame, node).and_then(|inputs| {
            let pool = &mut self.pool;
            let ep = Epilogue { post: Some(&post), ..Epilogue::default() };
            contraction::compute(op, node, &inputs, &mut |len| take_from(pool, len), slot.as_mut(), ep)
        });
        let added = self.keep_filters(n, slot, before);
        let covered = computed.filter(|t| !post.overran() && t.data.len() == r.bound.operand_lens[k]);
        drop(post);
        let Some(t) = covered else {
            for data in bufs.into_iter().flatten() {
                self.recycle(Value::Tensor(Tensor { shape: Vec::new(), data }));
            }
            return Ok(added + unfused(self, peak)?);
        };
        let mut made = added;
        let mut result_data = Some(t.data);
        if over.is_none() {
            let value = Value::Tensor(Tensor { shape: t.shape, data: result_data.take().expect("kept above") });
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(result)].replace(value) {
                made -= old.byte_size();
            }
        }
        let written = bufs.into_iter().map(|data| match data {
            Some(d) => d,
            None => result_data.take().expect("one output is written over the result"),
        });
        // SAFETY: the program wrote every element of its outputs (they are
        // dense over its space, which the tiles covered).
        made += unsafe { self.hold_outputs(r, written) };
        *peak = (*peak).max(live + made);
        Ok(made)
    }

    /// Runs contraction `n`, then program `r` after it, as two steps; the bytes they added.
    pub(super) fn run_unfused(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        r: &Ready,
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let made = self.run_contraction(n, op, peak, live)?;
        let after = match self.run_program(r, step)? {
            Some(m) => m,
            None => self.run_nodes(&r.program.nodes, peak, live + made)?,
        };
        Ok(made + after)
    }

    /// Runs contraction `n` with program `r` (operand `k` its result)
    /// folded into its epilogue as `f`; the bytes it added. The program's
    /// output takes the result's buffer, so the result must die at this
    /// step; else the program runs over the contraction's tiles where that
    /// `pays`, or after it. Where the fast kernels do not cover the
    /// contraction, or a size is not what `r` was bound for, the two run
    /// unfused.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_folded(
        &mut self,
        n: NodeId,
        op: ContractionOp,
        (r, k): (&Ready, usize),
        (f, pays): (Fold, bool),
        step: usize,
        peak: &mut u64,
        live: u64,
    ) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let result = node.outputs[0];
        let dies = self.frees.get(step).is_some_and(|f| f.contains(&result));
        if !dies || self.frame.values[idx(r.outputs[0])].is_some() {
            return match pays {
                true => self.run_fused(n, op, r, k, step, peak, live),
                false => self.run_unfused(n, op, r, step, peak, live),
            };
        }
        let len = r.bound.operand_lens[k];
        let (mut slot, before) = self.take_filters(n);
        // Operand `j` of the program, `Some(None)` for none, `None` when it is not as bound.
        let operand = |j: Option<usize>| match j.map(|j| (j, self.frame.values[idx(r.operands[j])].as_ref())) {
            None => Some(None),
            Some((j, Some(Value::Tensor(Tensor { data: Data::F32(v), .. })))) if v.len() == r.bound.operand_lens[j] => {
                Some(Some(&v[..]))
            }
            Some(_) => None,
        };
        let (residual, bias) = (operand(f.residual), operand(f.bias));
        let computed = residual.zip(bias).and_then(|(residual, bias)| {
            let inputs = node_inputs(&self.frame, node)?;
            // a bias as long as the MatMul's rows: checked when planned (`row_length`)
            let bias = bias.map_or(Bias::None, Bias::PerCol);
            let ep = Epilogue { bias, activation: f.activation, residual, after: f.after, ..Epilogue::default() };
            let pool = &mut self.pool;
            contraction::compute(op, node, &inputs, &mut |len| take_from(pool, len), slot.as_mut(), ep)
        });
        let added = self.keep_filters(n, slot, before);
        let t = match computed {
            Some(t) if t.data.len() == len => t,
            other => {
                if let Some(t) = other {
                    self.recycle(Value::Tensor(t));
                }
                return Ok(added + self.run_unfused(n, op, r, step, peak, live)?);
            }
        };
        // SAFETY: the contraction wrote all `len` elements, as many as the output holds.
        let made = added + unsafe { self.hold_outputs(r, std::iter::once(t.data)) };
        *peak = (*peak).max(live + made);
        Ok(made)
    }

    /// Runs node `n` on the session's own kernels ([`native`]); the bytes it added.
    pub(super) fn run_native(&mut self, n: NodeId, step: usize, peak: &mut u64, live: u64) -> Result<u64> {
        if relayout::relabels(&self.frame.graph.nodes[n]) {
            return self.run_relabel(n, step, peak, live);
        }
        if recurrent::quantized(&self.frame.graph.nodes[n]) {
            return self.run_quantized(n, peak, live);
        }
        if recurrent::covers(&self.frame.graph.nodes[n]) {
            return self.run_several(n, peak, live, &mut |node, inputs, _| recurrent::compute(node, inputs));
        }
        if self.frame.graph.nodes[n].op_type() == "Split" {
            return self.run_several(n, peak, live, &mut movement::split);
        }
        if self.frame.graph.nodes[n].op_type() == "TopK" {
            return self.run_several(n, peak, live, &mut |node, inputs, _| selection::top_k(node, inputs));
        }
        if quantized::covers(&self.frame.graph.nodes[n]) {
            return self.run_quantized(n, peak, live);
        }
        self.run_on_own_kernels(n, peak, live, &mut native::compute)
    }

    /// Runs quantized node `n` ([`quantized`], or a `DynamicQuantizeLSTM`
    /// through [`recurrent`]); the bytes it added. A node whose weights
    /// and their scales and zero points are initializers keeps what it
    /// derives from them ([`quantized::Weights`]), resident like the weights.
    pub(super) fn run_quantized(&mut self, n: NodeId, peak: &mut u64, live: u64) -> Result<u64> {
        let simd = self.simd;
        let node = &self.frame.graph.nodes[n];
        if node.op_type() == "DynamicQuantizeLinear" {
            return self.run_several(n, peak, live, &mut |_, inputs, _| quantized::dynamic_quantize(inputs, simd));
        }
        let lstm = recurrent::quantized(node);
        let weights: &[usize] = if lstm { &[1, 2, 8, 9, 10, 11] } else { &[1, 3] };
        let constant = weights.iter().all(|&i| {
            node.inputs.get(i).is_none_or(|&v| self.initializer[idx(v)] || self.frame.graph.value_name(v).is_empty())
        });
        let mut slot = constant.then(|| self.quantized.remove(&n));
        let before = slot.as_ref().and_then(|s| s.as_ref()).map_or(0, quantized::Weights::byte_size);
        let made = if lstm {
            let mut kept = match slot.take() {
                Some(Some(quantized::Weights::Lstm(kept))) => Some(Some(*kept)),
                Some(_) => Some(None),
                None => None,
            };
            let made = self.run_several(n, peak, live, &mut |node, inputs, _| {
                recurrent::compute_keeping(node, inputs, kept.as_mut())
            })?;
            slot = kept.map(|k| k.map(|kept| quantized::Weights::Lstm(Box::new(kept))));
            made
        } else {
            let conv = node.op_type() == "ConvInteger";
            self.run_on_own_kernels(n, peak, live, &mut |node, inputs, _| {
                if conv {
                    quantized::conv_integer(node, inputs, slot.as_mut(), simd)
                } else {
                    quantized::matmul_integer(inputs, slot.as_mut(), simd)
                }
            })?
        };
        Ok(made + keep_derived(&mut self.resident, &mut self.quantized, n, slot, before, quantized::Weights::byte_size))
    }

    /// Runs relabelling node `n` (Reshape, Flatten, Squeeze, Unsqueeze) of
    /// an `f32` operand: the output takes the operand's buffer when the
    /// operand dies at this step (and is no initializer), else a pooled
    /// copy; the bytes it added. Other operands, and shapes the reference
    /// rejects, go to the reference kernels (which report them).
    pub(super) fn run_relabel(&mut self, n: NodeId, step: usize, peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let (Some(&x), Some(&y)) = (node.inputs.first(), node.outputs.first()) else {
            return self.run_nodes(&[n], peak, live);
        };
        let Some(Value::Tensor(t)) = self.frame.values[idx(x)].as_ref() else {
            return self.run_nodes(&[n], peak, live);
        };
        let shape = match crate::exec::relabeled_shape(self.model, graph, node, &self.frame, &t.shape) {
            Some(Ok(shape)) if shape.iter().product::<usize>() == t.data.len() => shape,
            _ => return self.run_nodes(&[n], peak, live),
        };
        let moves = x != y && !self.initializer[idx(x)] && self.frees.get(step).is_some_and(|f| f.contains(&x));
        let (data, moved) = if moves {
            let Some(Value::Tensor(t)) = self.frame.values[idx(x)].take() else { unreachable!("checked above") };
            let bytes = t.byte_size();
            (t.data, bytes)
        } else if let Data::F32(data) = &t.data {
            let mut copy = take_from(&mut self.pool, data.len());
            copy.clear();
            copy.extend_from_slice(data);
            (Data::F32(copy), 0)
        } else {
            // Index and mask tensors: small, copied as they are.
            (t.data.clone(), 0)
        };
        let value = Value::Tensor(Tensor { shape, data });
        let mut made = value.byte_size();
        if let Some(old) = self.frame.values[idx(y)].replace(value) {
            made -= old.byte_size();
        }
        Ok(made.saturating_sub(moved))
    }

    /// Runs node `n` of several outputs (LSTM, GRU, RNN, Split) through
    /// `compute` (its inputs, and buffers from the pool), or on the
    /// reference kernels where `compute` does not cover it; the bytes it
    /// added. Outputs the graph leaves unnamed are dropped.
    pub(super) fn run_several(
        &mut self,
        n: NodeId,
        peak: &mut u64,
        live: u64,
        compute: &mut SeveralKernel<'_>,
    ) -> Result<u64> {
        let node = &self.frame.graph.nodes[n];
        let Some(inputs) = node_inputs(&self.frame, node) else { return self.run_nodes(&[n], peak, live) };
        let pool = &mut self.pool;
        let Some(outs) = compute(node, &inputs, &mut |len| take_from(pool, len)) else {
            return self.run_nodes(&[n], peak, live);
        };
        let mut made = 0u64;
        for (&id, t) in node.outputs.iter().zip(outs) {
            if self.frame.graph.value_name(id).is_empty() {
                continue;
            }
            let value = Value::Tensor(t);
            let added = value.byte_size();
            let old = self.frame.values[idx(id)].replace(value).map_or(0, |v| v.byte_size());
            made += added.saturating_sub(old);
        }
        Ok(made)
    }

    /// Runs node `n` through `compute` (its inputs, and buffers from the
    /// pool), or on the reference kernels where `compute` does not cover it;
    /// the bytes it added.
    pub(super) fn run_on_own_kernels(
        &mut self,
        n: NodeId,
        peak: &mut u64,
        live: u64,
        compute: &mut OwnKernel<'_>,
    ) -> Result<u64> {
        let node = &self.frame.graph.nodes[n];
        let Some(inputs) = node_inputs(&self.frame, node) else { return self.run_nodes(&[n], peak, live) };
        let pool = &mut self.pool;
        let Some(t) = compute(node, &inputs, &mut |len| take_from(pool, len)) else {
            return self.run_nodes(&[n], peak, live);
        };
        let value = Value::Tensor(t);
        let mut made = value.byte_size();
        if let Some(old) = self.frame.values[idx(node.outputs[0])].replace(value) {
            made -= old.byte_size();
        }
        Ok(made)
    }

    /// Runs a bound program; `None` when its operands are not what it was
    /// bound for (the caller runs its nodes instead).
    pub(super) fn run_program(&mut self, r: &Ready, step: usize) -> Result<Option<u64>> {
        let Some(srcs) = self.operand_srcs(r, None) else { return Ok(None) };
        let mut bufs: Vec<Data> = Vec::with_capacity(r.outputs.len());
        let mut dsts = Vec::with_capacity(r.outputs.len());
        let (mut donors, mut donated) = (Vec::new(), 0u64);
        for (j, out) in r.program.outputs.iter().enumerate() {
            let len: usize = r.bound.output_shapes[j].iter().product();
            match out.view.elem {
                ElemType::Float => {
                    let donor = self.donor(r, j, step, &donors);
                    let mut v = match donor.and_then(|k| self.frame.values[idx(r.operands[k])].take()) {
                        Some(Value::Tensor(Tensor { data: Data::F32(mut v), .. })) => {
                            donors.extend(donor);
                            donated += (v.len() * 4) as u64;
                            v.clear();
                            v
                        }
                        _ => self.take_buffer(len),
                    };
                    dsts.push(Dst::F32(v.as_mut_ptr()));
                    bufs.push(Data::F32(v));
                }
                _ => {
                    let mut v = vec![false; len];
                    dsts.push(Dst::Bool(v.as_mut_ptr()));
                    bufs.push(Data::Bool(v));
                }
            }
        }
        // SAFETY: the bound program's views were checked against these
        // lengths; each output buffer has capacity for its elements, and
        // every element is written (outputs are dense over their axes).
        unsafe {
            match &r.schedule {
                Schedule::Elementwise(order) => elementwise::run(&r.program, order, &r.bound, &srcs, &dsts, self.simd),
                Schedule::Reduce(phases) => reduce::run(&r.program, phases, &r.bound, &srcs, &dsts, self.simd),
                Schedule::Norm(norm) => norm.run(&r.bound, &srcs, &dsts),
            }
        }
        // SAFETY: the program wrote every element of its outputs.
        let made = unsafe { self.hold_outputs(r, bufs.into_iter()) };
        Ok(Some(made.saturating_sub(donated)))
    }

    /// Holds `data` (one buffer per output of program `r`, in order) as the
    /// outputs' values, each `f32` buffer's length set to its output's
    /// size; the bytes added.
    ///
    /// # Safety
    /// Each `f32` buffer has its output's elements written.
    pub(super) unsafe fn hold_outputs(&mut self, r: &Ready, data: impl Iterator<Item = Data>) -> u64 {
        let mut made = 0;
        for (j, mut data) in data.enumerate() {
            let shape = r.bound.output_shapes[j].clone();
            let len: usize = shape.iter().product();
            if let Data::F32(v) = &mut data {
                // SAFETY: the caller's promise.
                unsafe { v.set_len(len) };
            }
            let value = Value::Tensor(Tensor { shape, data });
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(r.outputs[j])].replace(value) {
                made -= old.byte_size();
            }
        }
        made
    }

    /// The operand of elementwise program `r` whose buffer output `j` can
    /// take over (written in place), if any: an `f32` value that
    /// - dies at this step and is no initializer;
    /// - is read by the program once, through the very view the output is
    ///   written by (so each point reads its element before writing it, and
    ///   no other point reads it);
    /// - is not the source of an output by a bare load (that output would be
    ///   stored from memory the in-place output has overwritten);
    /// - is not already taken (`taken`), while the output's value is not yet
    ///   held (so the bytes the step adds stay its outputs less its donors).
    pub(super) fn donor(&self, r: &Ready, j: usize, step: usize, taken: &[usize]) -> Option<usize> {
        if !matches!(r.schedule, Schedule::Elementwise(_)) {
            return None;
        }
        let out = &r.bound.outputs[j];
        let len: usize = r.bound.output_shapes[j].iter().product();
        let dies = self.frees.get(step)?;
        (0..r.operands.len()).find(|&k| {
            let id = r.operands[k];
            let view = &r.bound.operands[k];
            !taken.contains(&k)
                && id != r.outputs[j]
                && self.frame.values[idx(r.outputs[j])].is_none()
                && !r.program.outputs.iter().any(|o| matches!(r.program.body[o.source].inst, Inst::Load(l) if l == k))
                && !self.initializer[idx(id)]
                && dies.contains(&id)
                && r.operands.iter().filter(|&&o| o == id).count() == 1
                && view.offset == out.offset
                && view.strides == out.strides
                && matches!(&self.frame.values[idx(id)],
                    Some(Value::Tensor(Tensor { data: Data::F32(v), .. })) if v.len() == len)
        })
    }

    /// A buffer with capacity for `len` floats, from the pool when one fits
    /// ([`take_from`]).
    pub(super) fn take_buffer(&mut self, len: usize) -> Vec<f32> {
        take_from(&mut self.pool, len)
    }

    /// Keeps a dead value's `f32` buffer for reuse. Steps on the reference
    /// kernels allocate their own results, so more buffers come back than
    /// are taken: past [`POOL_BUFFERS`] the smallest is let go, which keeps
    /// the pool (and the process) from growing run after run.
    pub(super) fn recycle(&mut self, v: Value) {
        if let Value::Tensor(Tensor { data: Data::F32(buf), .. }) = v {
            if buf.capacity() > 0 {
                self.pool.push(buf);
                if self.pool.len() > POOL_BUFFERS {
                    let smallest = (0..self.pool.len()).min_by_key(|&i| self.pool[i].capacity()).unwrap_or(0);
                    self.pool.swap_remove(smallest);
                }
            }
        }
    }
}
