//! `diamond bench --profile`: the SIMD session's per-step times turned
//! into the report a user of onnxruntime's or tract's profiler expects —
//! the mean time per run of each step, totals by how steps ran (fused
//! elementwise and reduction programs, contraction kernels, reference
//! kernels by operator type), and the slowest steps with their nodes.

use diamond_runtime::simd::{StepKind, StepTime};
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

    /// Totals by the way steps ran; reference steps split by operator type.
    /// Each entry: (label, ms, steps), slowest first.
    pub fn groups(&self) -> Vec<(String, f64, usize)> {
        let mut by: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for s in &self.steps {
            let label = match s.step.kind {
                StepKind::Reference => format!("reference {}", s.step.ops),
                StepKind::Fallback => format!("fallback to reference {}", s.step.ops),
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
                    "ms": s.ms,
                })
            })
            .collect();
        json!({ "total": self.total_ms, "groups": groups, "steps": steps })
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

    fn step(index: usize, kind: StepKind, ops: &str, ms: u64) -> StepTime {
        StepTime { index, kind, ops: ops.into(), nodes: format!("n{index}"), total: Duration::from_millis(ms) }
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
    }
}
