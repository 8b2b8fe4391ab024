//! What a session works out once, when it is prepared: the Shape nodes the
//! fed shapes fix, and the steps whose inputs are all constant (hoisted,
//! their results kept resident). A child of `session.rs`.

#[allow(unused_imports)]
use super::*;

impl Session<'_> {
    /// Computes now each Shape node whose input's shape the plan fixes from
    /// the fed shapes (the check infers it, finding no error): its output is
    /// the same in every run, so it is held like an initializer and its step
    /// dropped — which lets [`Self::hoist_constants`] fold what reads it
    /// (position indices, masks, Reshape targets), as tract and onnxruntime
    /// do for a model loaded with concrete input shapes.
    pub(super) fn fold_shapes(&mut self, plan: &Plan) {
        let graph = self.frame.graph;
        let mut kept = Vec::with_capacity(self.steps.len());
        for step in std::mem::take(&mut self.steps) {
            let folded = match &step {
                Planned::Nodes(nodes) if nodes.len() == 1 => shape_value(&graph.nodes[nodes[0]], plan),
                Planned::Native(n) => shape_value(&graph.nodes[*n], plan),
                _ => None,
            };
            let Some(value) = folded else {
                kept.push(step);
                continue;
            };
            let out = graph.nodes[step_nodes(&step)[0]].outputs[0];
            self.resident += value.byte_size();
            self.initializer[idx(out)] = true;
            self.frame.values[idx(out)] = Some(Value::Tensor(value));
            self.coverage.folded_shapes += 1;
        }
        self.steps = kept;
    }

    /// Runs, once and now, every step whose inputs are all constant
    /// (initializers that no fed input overrides, or what earlier such steps
    /// made) and that draws no random numbers, as onnxruntime and tract fold
    /// constants when they load a model, but with no size limit: the results
    /// stay resident like initializers, each run skips those steps, and
    /// constants that no remaining step or output reads are dropped.
    pub(super) fn hoist_constants(&mut self) -> Result<()> {
        const RANDOM: [&str; 7] = [
            "RandomUniform",
            "RandomNormal",
            "RandomUniformLike",
            "RandomNormalLike",
            "Bernoulli",
            "Multinomial",
            "Dropout",
        ];
        let (model, graph) = (self.model, self.frame.graph);
        // An initializer is constant unless this session is fed a value for it (a graph input's default).
        let mut constant = self.initializer.clone();
        // Shape-free: stored initializers (and values a replanned session
        // kept), not folded shapes.
        let mut free = vec![false; constant.len()];
        for t in &graph.initializers {
            if let Some(id) = graph.value_named(t.name.as_deref().unwrap_or("")) {
                free[idx(id)] = true;
            }
        }
        for (i, f) in free.iter_mut().enumerate() {
            *f |= self.shape_free.get(i).copied().unwrap_or(false) && constant[i];
        }
        for (name, _) in &self.fed {
            if let Some(id) = graph.value_named(name) {
                constant[idx(id)] = false;
                free[idx(id)] = false;
            }
        }
        let (mut hoisted, mut kept, mut held_steps) = (Vec::new(), Vec::new(), 0);
        for step in std::mem::take(&mut self.steps) {
            let nodes = step_nodes(&step);
            let random = nodes.iter().any(|&n| {
                let node = &graph.nodes[n];
                node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx")
                    && RANDOM.contains(&node.op_type.as_deref().unwrap_or(""))
            });
            let reads = step_reads(model, &step);
            if !random && !nodes.is_empty() && reads.iter().all(|&v| constant[idx(v)]) {
                let step_free = reads.iter().all(|&v| free[idx(v)]);
                let outputs: Vec<ValueId> = nodes.iter().flat_map(|&n| graph.nodes[n].outputs.clone()).collect();
                for &o in &outputs {
                    constant[idx(o)] = true;
                    free[idx(o)] = step_free;
                }
                // computed by the plan this session was prepared from before
                let held =
                    outputs.iter().all(|&o| graph.value_name(o).is_empty() || self.frame.values[idx(o)].is_some());
                if held {
                    held_steps += 1;
                } else {
                    hoisted.push(step);
                }
            } else {
                kept.push(step);
            }
        }
        self.steps = kept;
        self.shape_free = free;
        self.coverage.hoisted_steps = hoisted.len() + held_steps;
        if hoisted.is_empty() {
            return Ok(());
        }
        self.frees = vec![Vec::new(); hoisted.len()];
        let (mut live, mut peak) = (self.resident, self.resident);
        self.run_each(&hoisted, &mut live, &mut peak, false)?;
        let mut needed: HashSet<ValueId> = self.outputs.iter().copied().collect();
        for step in &self.steps {
            needed.extend(step_reads(model, step));
        }
        for step in &hoisted {
            for n in step_nodes(step) {
                for &o in &graph.nodes[n].outputs {
                    let Some(value) = self.frame.values[idx(o)].take() else { continue };
                    if needed.contains(&o) {
                        self.resident += value.byte_size();
                        self.initializer[idx(o)] = true;
                        self.frame.values[idx(o)] = Some(value);
                    }
                }
            }
        }
        Ok(())
    }
}
