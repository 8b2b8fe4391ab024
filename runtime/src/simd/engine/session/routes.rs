//! Each step's route — fused program, contraction, the session's own kernel,
//! branch, or the reference kernels and why — as the profile, the fallbacks
//! and `routes` report it. A child of `session.rs`.

#[allow(unused_imports)]
use super::*;

impl Session<'_> {
    /// Every step that ran on the reference kernels though the fast ones
    /// were meant to run it: the fallbacks known when the session was
    /// prepared ([`Coverage::fallbacks`]) and those the runs so far have
    /// met (operands not what the step was prepared for, a contraction
    /// the fast kernels do not cover), in step order.
    pub fn fallbacks(&self) -> Vec<Fallback> {
        let mut all = self.coverage.fallbacks.clone();
        all.extend(self.late.iter().flatten().cloned());
        // inside prepared branches: under the If's step, the branch named
        let graph = self.frame.graph;
        for (&(n, taken), prepared) in &self.branches {
            let Ok(b) = prepared else { continue };
            let step = self.steps.iter().position(|s| matches!(s, Planned::Branch(m) if *m == n)).unwrap_or(0);
            let side = if taken { "then" } else { "else" };
            for mut f in b.session.fallbacks() {
                f.step = step;
                f.ops = format!("If '{}' {side}: {}", graph.nodes[n].name.as_deref().unwrap_or(""), f.ops);
                all.push(f);
            }
        }
        all.sort_by_key(|f| f.step);
        all
    }

    /// Step `s` (`step`) as a fallback for `refusal`.
    pub(super) fn fallback(
        &self,
        s: usize,
        step: &Planned,
        refusal: Refusal,
        float: bool,
        at_run_time: bool,
    ) -> Fallback {
        let graph = self.frame.graph;
        let nodes = step_nodes(step);
        let ops: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].op_type.as_deref().unwrap_or("?")).collect();
        let names: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].name.as_deref().unwrap_or("")).collect();
        Fallback { step: s, ops: op_list(&ops), nodes: first_names(&names), refusal, float, at_run_time }
    }

    /// Why `step`, prepared for the fast kernels, went to the reference
    /// kernels in a run: an input of a type they lack, else operands not
    /// of the shapes it was prepared for.
    pub(super) fn late_refusal(&self, step: &Planned) -> Refusal {
        let graph = self.frame.graph;
        let node = step_nodes(step).first().map(|&n| &graph.nodes[n]);
        let odd_type =
            node.into_iter().flat_map(|n| &n.inputs).find_map(|&v| match self.frame.values[idx(v)].as_ref() {
                Some(Value::Tensor(t)) if !matches!(t.data, Data::F32(_) | Data::Bool(_)) => Some(t.elem().to_string()),
                Some(v) if !matches!(v, Value::Tensor(_)) => Some("a value that is not a tensor".to_string()),
                _ => None,
            });
        match odd_type {
            Some(ty) => Refusal::new(
                FallbackReason::OperandType,
                format!("an operand is {ty}, which the fast kernels do not compute"),
            ),
            None => Refusal::new(
                FallbackReason::ViewShape,
                "its operands at run time are not of the shapes or layout the fast kernels were prepared for",
            ),
        }
    }

    /// Starts timing every step of the following runs, from zero (a second
    /// call starts over: call it after the warm-up runs).
    pub fn start_profiling(&mut self) {
        self.times = Some(vec![Duration::ZERO; self.steps.len()]);
    }

    /// Each step's total time since [`Session::start_profiling`], in the
    /// session's order; empty when profiling was never started.
    pub fn profile(&self) -> Vec<StepTime> {
        match &self.times {
            Some(times) => {
                self.routes().into_iter().zip(times).map(|(step, &total)| StepTime { total, ..step }).collect()
            }
            None => Vec::new(),
        }
    }

    /// Every step's route — how it runs and, on the reference kernels, why —
    /// as [`Session::profile`] gives it, without times (`total` is zero).
    pub fn routes(&self) -> Vec<StepTime> {
        let graph = self.frame.graph;
        self.steps
            .iter()
            .enumerate()
            .map(|(index, step)| {
                let total = Duration::ZERO;
                let kind = match step {
                    Planned::Program(r) if r.program.reduce.is_empty() => StepKind::Elementwise,
                    Planned::Program(_) => StepKind::Reduction,
                    Planned::Contraction(..) | Planned::Fused(..) | Planned::Folded(..) => StepKind::Contraction,
                    Planned::Native(_) => StepKind::Native,
                    Planned::Branch(_) => StepKind::Branch,
                    Planned::Nodes(_) => StepKind::Reference,
                    Planned::Fallback(..) => StepKind::Fallback,
                };
                let (kind, reason) = match (step, &self.late[index]) {
                    (Planned::Fallback(_, why, _), _) => (kind, Some(why.reason)),
                    (_, Some(late)) => (StepKind::Fallback, Some(late.refusal.reason)),
                    (Planned::Nodes(_), None) => (kind, Some(FallbackReason::Operator)),
                    _ => (kind, None),
                };
                let nodes = step_nodes(step);
                let ops: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].op_type.as_deref().unwrap_or("?")).collect();
                let names: Vec<&str> = nodes.iter().map(|&n| graph.nodes[n].name.as_deref().unwrap_or("")).collect();
                StepTime { index, kind, reason, ops: op_list(&ops), nodes: first_names(&names), total }
            })
            .collect()
    }
}
