//! `diamond optimize MODEL -o OUT [--passes LIST] [--stats] [--json]`: runs
//! the optimizer's passes, writes the result atomically, and reports node
//! counts per operator before and after, what each pass did, and how many
//! ones-vectors `inline-ones` folded away.

use crate::Failure;
use diamond::{InputShape, LoadOptions, Model, OptimizeError, OptimizeOptions as Options, Verdict, PASS_NAMES};
use std::fmt::Write;
use std::path::Path;

/// What `optimize` was asked for.
pub struct Request<'a> {
    pub input: &'a Path,
    pub output: &'a Path,
    pub passes: Option<&'a str>,
    /// `--fold-limit` in bytes (the optimizer's default when absent).
    pub fold_limit: Option<u64>,
    /// `--target-opset`.
    pub target_opset: Option<i64>,
    pub stats: bool,
    pub json: bool,
    pub shapes: &'a [InputShape],
    /// Run original and result on the reference executor first (default on).
    pub verify: bool,
    /// On a difference, name the first pass that made it.
    pub bisect: bool,
}

/// `diamond optimize`.
pub fn run(r: &Request<'_>) -> Result<(), Failure> {
    let unreadable = |m: String| Failure { code: 2, message: m };
    let model = Model::open_with(r.input, &LoadOptions { input_shapes: r.shapes.to_vec() })
        .map_err(|e| unreadable(e.to_string()))?;
    let mut options = Options { verify: r.verify, bisect: r.bisect, ..Options::default() };
    options.target_opset = r.target_opset;
    if let Some(limit) = r.fold_limit {
        options.fold_limit = limit;
    }
    if let Some(list) = r.passes {
        options.passes = list.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    }
    let outcome = model.optimize(&options).map_err(|e| match e {
        OptimizeError::ModelErrors(_) => {
            Failure { code: 1, message: format!("{}: {e}; not optimized", r.input.display()) }
        }
        OptimizeError::Verification { pass: None, .. } => {
            Failure { code: 1, message: format!("{}: {e}; not written (--bisect names the pass)", r.input.display()) }
        }
        OptimizeError::Verification { .. } => {
            Failure { code: 1, message: format!("{}: {e}; not written", r.input.display()) }
        }
        OptimizeError::UnknownPass(_) | OptimizeError::Upgrade(_) => unreadable(format!("{}: {e}", r.input.display())),
        OptimizeError::NoGraph => unreadable(format!("{}: {e}", r.input.display())),
    })?;
    outcome.model.write(r.output).map_err(|e| unreadable(e.to_string()))?;
    let nodes = |counts: &std::collections::BTreeMap<String, usize>| counts.values().sum::<usize>();
    let (before, after) = (nodes(&outcome.before), nodes(&outcome.after));
    // Every inline-ones rewrite folds one uniform tensor (or a sum's count) into what reads it.
    let ones_inlined: usize =
        outcome.passes.iter().filter(|run| run.pass == "inline-ones").map(|run| run.rewrites).sum();
    if r.json {
        let report = serde_json::json!({
            "input": r.input.display().to_string(),
            "output": r.output.display().to_string(),
            "nodes_before": before,
            "nodes_after": after,
            "ops_before": outcome.before,
            "ops_after": outcome.after,
            "passes": outcome.passes,
            "bodies_skipped": outcome.skipped,
            "ones_inlined": ones_inlined,
            "verification": verdict_text(outcome.verdict.as_ref()),
        });
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&report).unwrap_or_default()));
        return Ok(());
    }
    let mut text = format!(
        "{}: {before} nodes -> {after} nodes, written to {}; {}\n",
        r.input.display(),
        r.output.display(),
        verdict_text(outcome.verdict.as_ref())
    );
    if r.stats {
        text += "\npass runs (round, pass, rewrites, nodes after):\n";
        for run in &outcome.passes {
            let scope = if run.graph.is_empty() { String::new() } else { format!("  (in {})", run.graph) };
            let _ = writeln!(
                text,
                "  {:>2}  {:<12} {:>6}  {:>6}{scope}",
                run.round, run.pass, run.rewrites, run.nodes_after
            );
        }
        if !outcome.skipped.is_empty() {
            text += "\ncontrol-flow bodies left as they were:\n";
            for s in &outcome.skipped {
                let _ = writeln!(text, "  {}: {}", s.graph, s.why);
            }
        }
        let _ = writeln!(text, "\nones-vectors inlined (inline-ones rewrites): {ones_inlined}");
        text += "\noperators (before -> after):\n";
        let ops: std::collections::BTreeSet<&String> = outcome.before.keys().chain(outcome.after.keys()).collect();
        for op in ops {
            let (b, a) = (outcome.before.get(op).copied().unwrap_or(0), outcome.after.get(op).copied().unwrap_or(0));
            let _ = writeln!(text, "  {op:<28} {b:>6} -> {a:>6}");
        }
        let _ = writeln!(text, "\npasses available: {}", PASS_NAMES.join(", "));
    }
    crate::emit(&text);
    Ok(())
}

/// The verification outcome in words.
fn verdict_text(v: Option<&Verdict>) -> String {
    match v {
        None => "not verified (--no-verify)".into(),
        Some(Verdict::Agrees(n)) => format!("verified: same outputs at {n} symbol setting(s)"),
        Some(Verdict::Skipped(why)) => format!("not verified: {why}"),
        Some(Verdict::Differs(why)) => format!("differs: {why}"),
    }
}

/// A byte size as `--fold-limit` takes it: a number with an optional unit
/// (`B`, `KB`/`MB`/`GB` in powers of 1000, `KiB`/`MiB`/`GiB` in powers of
/// 1024, case-insensitive), or `none` for no limit.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "none" || t == "unlimited" {
        return Ok(u64::MAX);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let number: u64 = digits.parse().map_err(|_| format!("'{text}' is not a size (e.g. 1MiB, 64KiB, 2GB, none)"))?;
    let scale: u64 = match unit.trim() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => return Err(format!("'{other}' is not a size unit (B, KB, MB, GB, KiB, MiB, GiB)")),
    };
    number.checked_mul(scale).ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_with_their_units() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("64kib"), Ok(64 << 10));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("none"), Ok(u64::MAX));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
    }
}
