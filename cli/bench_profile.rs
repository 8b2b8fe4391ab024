//! `diamond bench --profile`: the SIMD session's per-step times turned
//! into the report a user of onnxruntime's or tract's profiler expects —
//! the mean time per run of each step, totals by how steps ran (fused
//! elementwise and reduction programs, contraction kernels, reference
//! kernels by operator type), the share of the time on the reference
//! kernels with why each such step went there, and the slowest steps with
//! their nodes.

use diamond::session::{StepKind, StepTime};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

/// How many of the slowest steps the text report lists.
const SLOWEST: usize = 15;

/// One step's mean time per run.
pub struct StepMean {
    pub step: StepTime,
    pub ms: f64,
}

/// The profile of the measured runs.
pub struct Profile {
    /// Every step, slowest first.
    pub steps: Vec<StepMean>,
    /// The sum over steps of the mean time per run.
    pub total_ms: f64,
}

impl Profile {
    /// The mean per run of `steps` (totals over `runs` runs).
    pub fn of(steps: &[StepTime], runs: usize) -> Profile {
        let runs = runs.max(1) as f64;
        let mut means: Vec<StepMean> =
            steps.iter().map(|s| StepMean { step: s.clone(), ms: s.total.as_secs_f64() * 1e3 / runs }).collect();
        means.sort_by(|a, b| b.ms.total_cmp(&a.ms).then(a.step.index.cmp(&b.step.index)));
        let total_ms = means.iter().map(|s| s.ms).sum();
        Profile { steps: means, total_ms }
    }

    /// The mean time per run on the reference kernels: reference steps and fallbacks.
    pub fn reference_ms(&self) -> f64 {
        // a fold from +0 (an empty `sum` of floats is -0)
        self.steps.iter().filter(|s| on_reference(s.step.kind)).fold(0.0, |t, s| t + s.ms)
    }

    /// The share of the steps' time on the reference kernels, 0 to 1.
    pub fn reference_share(&self) -> f64 {
        if self.total_ms > 0.0 {
            self.reference_ms() / self.total_ms
        } else {
            0.0
        }
    }

    /// Time on the reference kernels by reason (`operator`, `unbound
    /// extent`, ...): (reason, ms, steps), slowest first.
    pub fn reference_reasons(&self) -> Vec<(&'static str, f64, usize)> {
        let mut by: BTreeMap<&'static str, (f64, usize)> = BTreeMap::new();
        for s in self.steps.iter().filter(|s| on_reference(s.step.kind)) {
            let e = by.entry(s.step.reason.map_or("unknown", |r| r.name())).or_default();
            e.0 += s.ms;
            e.1 += 1;
        }
        let mut out: Vec<_> = by.into_iter().map(|(r, (ms, n))| (r, ms, n)).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        out
    }

    /// Totals by the way steps ran; reference steps split by operator type.
    /// Each entry: (label, ms, steps), slowest first.
    pub fn groups(&self) -> Vec<(String, f64, usize)> {
        let mut by: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for s in &self.steps {
            let label = match s.step.kind {
                StepKind::Reference => format!("reference {}", s.step.ops),
                StepKind::Fallback => {
                    format!("fallback to reference {} ({})", s.step.ops, s.step.reason.map_or("unknown", |r| r.name()))
                }
                StepKind::Contraction => format!("contraction {}", s.step.ops),
                StepKind::Native => format!("simd kernel {}", s.step.ops),
                kind => kind.name().to_string(),
            };
            let e = by.entry(label).or_default();
            e.0 += s.ms;
            e.1 += 1;
        }
        let mut groups: Vec<(String, f64, usize)> = by.into_iter().map(|(l, (ms, n))| (l, ms, n)).collect();
        groups.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        groups
    }

    /// The profile as `--json` prints it under `profile_ms`.
    pub fn json(&self) -> serde_json::Value {
        let groups: Vec<serde_json::Value> = self
            .groups()
            .into_iter()
            .map(|(label, ms, steps)| json!({ "group": label, "ms": ms, "steps": steps }))
            .collect();
        let steps: Vec<serde_json::Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({
                    "step": s.step.index,
                    "kind": s.step.kind.name(),
                    "ops": s.step.ops,
                    "nodes": s.step.nodes,
                    "reason": s.step.reason.map(|r| r.name()),
                    "ms": s.ms,
                })
            })
            .collect();
        let reasons: Vec<serde_json::Value> = self
            .reference_reasons()
            .into_iter()
            .map(|(reason, ms, steps)| json!({ "reason": reason, "ms": ms, "steps": steps }))
            .collect();
        json!({
            "total": self.total_ms,
            "reference_share": self.reference_share(),
            "reference_reasons": reasons,
            "groups": groups,
            "steps": steps,
        })
    }

    /// The text report: groups, then the slowest steps.
    pub fn text(&self, median: Duration) -> String {
        let median_ms = median.as_secs_f64() * 1e3;
        let share = |ms: f64| if self.total_ms > 0.0 { 100.0 * ms / self.total_ms } else { 0.0 };
        let mut out = format!(
            "  profile: {} steps, {:.3} ms a run in steps of the {:.3} ms median (mean per run)\n",
            self.steps.len(),
            self.total_ms,
            median_ms
        );
        for (label, ms, n) in self.groups() {
            out.push_str(&format!("  {ms:>10.3} ms {:>5.1}%  {label} ({n} step{})\n", share(ms), plural(n)));
        }
        let reasons = self.reference_reasons();
        let why: Vec<String> =
            reasons.iter().map(|(r, ms, n)| format!("{r} {:.1}% in {n} step{}", share(*ms), plural(*n))).collect();
        out.push_str(&format!(
            "  on the reference kernels: {:.1}% of the time{}\n",
            100.0 * self.reference_share(),
            if why.is_empty() { String::new() } else { format!(" ({})", why.join("; ")) }
        ));
        out.push_str("  slowest steps:\n");
        for s in self.steps.iter().take(SLOWEST) {
            out.push_str(&format!(
                "  {:>10.3} ms {:>5.1}%  #{} {} {}  [{}]\n",
                s.ms,
                share(s.ms),
                s.step.index,
                s.step.kind.name(),
                s.step.ops,
                s.step.nodes
            ));
        }
        out
    }
}

/// Whether a step of this kind runs on the reference kernels.
fn on_reference(kind: StepKind) -> bool {
    matches!(kind, StepKind::Reference | StepKind::Fallback)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diamond::session::FallbackReason;

    fn step(index: usize, kind: StepKind, ops: &str, ms: u64) -> StepTime {
        let reason = match kind {
            StepKind::Reference => Some(FallbackReason::Operator),
            StepKind::Fallback => Some(FallbackReason::UnboundExtent),
            _ => None,
        };
        StepTime { index, kind, reason, ops: ops.into(), nodes: format!("n{index}"), total: Duration::from_millis(ms) }
    }

    #[test]
    fn means_are_per_run_and_groups_split_reference_steps_by_operator() {
        let steps = [
            step(0, StepKind::Contraction, "Conv", 40),
            step(1, StepKind::Elementwise, "Add+Relu", 10),
            step(2, StepKind::Reference, "Transpose", 6),
            step(3, StepKind::Reference, "Transpose", 4),
            step(4, StepKind::Reference, "Gather", 20),
        ];
        let p = Profile::of(&steps, 2);
        assert_eq!(p.steps.iter().map(|s| s.step.index).collect::<Vec<_>>(), [0, 4, 1, 2, 3]);
        assert!((p.total_ms - 40.0).abs() < 1e-9);
        let groups = p.groups();
        assert_eq!(groups[0], ("contraction Conv".to_string(), 20.0, 1));
        assert_eq!(groups[1], ("reference Gather".to_string(), 10.0, 1));
        assert_eq!(groups[2].0, "reference Transpose");
        assert!((groups[2].1 - 5.0).abs() < 1e-9 && groups[2].2 == 2);
        let text = p.text(Duration::from_millis(41));
        assert!(text.contains("5 steps, 40.000 ms a run"), "{text}");
        assert!(text.contains("#4 reference Gather  [n4]"), "{text}");
        assert_eq!(p.json()["steps"][0]["ops"], "Conv");
        assert!((p.reference_share() - 0.375).abs() < 1e-9);
        assert!(text.contains("on the reference kernels: 37.5% of the time (operator 37.5% in 3 steps)"), "{text}");
    }

    #[test]
    fn fallbacks_are_grouped_with_their_reason() {
        let steps = [step(0, StepKind::Elementwise, "Add", 10), step(1, StepKind::Fallback, "Mul+Add", 30)];
        let p = Profile::of(&steps, 1);
        assert_eq!(p.groups()[0].0, "fallback to reference Mul+Add (unbound extent)");
        assert_eq!(p.json()["reference_reasons"][0]["reason"], "unbound extent");
        assert_eq!(p.json()["steps"][0]["reason"], "unbound extent");
        assert!((p.reference_share() - 0.75).abs() < 1e-9);
    }
}
