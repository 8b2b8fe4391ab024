//! `If` nodes on the fast path: the branch a run takes, prepared once as a
//! session of its own (or why it could not be) and run. A child of `session.rs`.

#[allow(unused_imports)]
use super::*;

impl Session<'_> {
    /// Runs `If` node `n` with its branch prepared ([`PreparedBranch`]),
    /// prepared again when the shapes of the outer values it reads change;
    /// the bytes it added. A branch that cannot be prepared runs on the
    /// reference executor, and why is kept for the fallback report.
    pub(super) fn run_branch(&mut self, n: NodeId, peak: &mut u64, live: u64) -> Result<u64> {
        let graph = self.frame.graph;
        let node = &graph.nodes[n];
        let cond = match node.inputs.first().and_then(|&c| self.frame.values[idx(c)].as_ref()) {
            Some(Value::Tensor(t)) if t.data.len() == 1 => t.to_f64s().and_then(|v| v.first().copied()),
            _ => None,
        };
        let branch = cond.map(|c| c != 0.0).and_then(|taken| {
            let name = if taken { "then_branch" } else { "else_branch" };
            Some((taken, node.attribute(name)?.g?))
        });
        // a condition that is not one number, or a branch missing: the reference executor says what is wrong
        let Some((taken, gid)) = branch else { return self.run_nodes(&[n], peak, live) };
        let value_fed = |name: &str| -> Option<Fed> {
            graph.value_named(name).and_then(|id| self.frame.values[idx(id)].as_ref()).map(Fed::of)
        };
        let fresh = match self.branches.get(&(n, taken)) {
            Some(Ok(b)) => !b.fed.iter().all(|(name, f)| value_fed(name).as_ref() == Some(f)),
            Some(Err(_)) => false,
            None => true,
        };
        if fresh {
            let prepared = self.prepare_branch(gid);
            self.branches.insert((n, taken), prepared);
        }
        let inputs: Option<Vec<(String, Value)>> = match self.branches.get(&(n, taken)) {
            Some(Ok(b)) => b
                .fed
                .iter()
                .map(|(name, _)| {
                    let id = graph.value_named(name)?;
                    Some((name.clone(), self.frame.values[idx(id)].clone()?))
                })
                .collect(),
            Some(Err(why)) => {
                self.branch_refusal = Some(why.clone());
                None
            }
            None => None,
        };
        let Some(inputs) = inputs else { return self.run_nodes(&[n], peak, live) };
        let Some(Ok(b)) = self.branches.get_mut(&(n, taken)) else { unreachable!("prepared above") };
        let run = b.session.run(inputs)?;
        if run.outputs.len() != node.outputs.len() {
            return Err(RunError::InvalidModel(format!(
                "If '{}': the branch gives {} outputs, the node has {}",
                node.name.as_deref().unwrap_or(""),
                run.outputs.len(),
                node.outputs.len()
            )));
        }
        *peak = (*peak).max(live + run.peak_bytes);
        let mut made = 0;
        for (&o, (_, value)) in node.outputs.iter().zip(run.outputs) {
            made += value.byte_size();
            if let Some(old) = self.frame.values[idx(o)].replace(value) {
                made -= old.byte_size();
            }
        }
        Ok(made)
    }

    /// Prepares branch `gid` for the outer values it reads as they are now:
    /// initializers no fed input overrides are copied in as its own, the
    /// rest fed each run.
    pub(super) fn prepare_branch(&self, gid: diamond_ir::GraphId) -> std::result::Result<PreparedBranch, Refusal> {
        let graph = self.frame.graph;
        let Some(prepare) = self.options.prepare_body.as_ref() else {
            return Err(Refusal::new(FallbackReason::Operator, "no way to prepare branches was given"));
        };
        let mut free: Vec<String> = crate::schedule::free_names(self.model, gid).into_iter().collect();
        free.sort();
        let (mut dynamic, mut constants) = (Vec::new(), Vec::new());
        for name in free {
            let missing =
                || Refusal::new(FallbackReason::Operator, format!("the branch reads '{name}', which is not there"));
            let id = graph.value_named(&name).ok_or_else(missing)?;
            let overridden = self.fed.iter().any(|(n, _)| *n == name);
            let stored = graph.initializers.iter().find(|t| t.name.as_deref() == Some(name.as_str()));
            match stored {
                Some(t) if self.initializer[idx(id)] && !overridden => constants.push(t.clone()),
                _ => {
                    let value = self.frame.values[idx(id)].as_ref().ok_or_else(missing)?;
                    dynamic.push((name, value));
                }
            }
        }
        PreparedBranch::new(self.model, gid, &dynamic, constants, prepare, &self.options)
    }
}
