//! The subcommands' bodies: read, act, report, map errors to exit codes.

use crate::Failure;
use diamond_exporters::inspect::InspectReport;
use diamond_importers::torch::load::{load_any, load_any_mapped};
use diamond_importers::torch::lower::InputShape;
use std::path::Path;

fn unreadable(error: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: error.to_string() }
}

/// `diamond inspect MODEL [--json]`.
pub fn inspect(path: &Path, json: bool) -> Result<(), Failure> {
    let model = load_any(path, &[]).map_err(unreadable)?;
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let report = InspectReport::new(&model, &path.display().to_string(), file_bytes);
    let gain = optimize_gain(&model);
    if json {
        let mut value = serde_json::to_value(&report).map_err(unreadable)?;
        if let Some(map) = value.as_object_mut() {
            let optimize = match &gain {
                Ok((before, after)) => serde_json::json!({ "nodes_before": before, "nodes_after": after }),
                Err(why) => serde_json::json!({ "not_possible": why }),
            };
            map.insert("optimize".into(), optimize);
        }
        let text = serde_json::to_string_pretty(&value).map_err(unreadable)?;
        crate::emit(&format!("{text}\n"));
    } else {
        let mut text = report.render_text();
        match &gain {
            Ok((before, after)) => {
                text += &format!(
                    "optimize: would remove {} of {before} nodes ({after} left; `diamond optimize` verifies)\n",
                    before - after
                )
            }
            Err(why) => text += &format!("optimize: not possible: {why}\n"),
        }
        crate::emit(&text);
    }
    Ok(())
}

/// Main-graph nodes before and after `diamond optimize`'s passes (run
/// without verification: this is the audit's estimate, not a result).
fn optimize_gain(model: &diamond_ir::Model) -> Result<(usize, usize), String> {
    let options = diamond_optimize::Options { verify: false, ..diamond_optimize::Options::default() };
    let outcome = diamond_optimize::optimize(model, &options).map_err(|e| e.to_string())?;
    let nodes = |counts: &std::collections::BTreeMap<String, usize>| counts.values().sum::<usize>();
    Ok((nodes(&outcome.before), nodes(&outcome.after)))
}

/// `diamond solve FILE [--json]`.
pub fn solve(path: &Path, json: bool) -> Result<(), Failure> {
    let source =
        std::fs::read_to_string(path).map_err(|e| unreadable(format!("cannot read {}: {e}", path.display())))?;
    let file = diamond_infer::rows::parse::parse_rows(&source)
        .map_err(|e| unreadable(format!("{}: syntax error at {e}", path.display())))?;
    let solution = diamond_infer::rows::lower::solve_rows(&file);
    if json {
        let tensors: serde_json::Map<String, serde_json::Value> = solution
            .tensors
            .iter()
            .map(|t| {
                let (principal, closed) = (solution.names.row(&t.principal), solution.names.row(&t.closed));
                (t.name.clone(), serde_json::json!({ "principal": principal, "closed": closed }))
            })
            .collect();
        let report = serde_json::json!({ "tensors": tensors, "diagnostics": solution.diagnostics });
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&report).map_err(unreadable)?));
    } else {
        crate::emit(&diamond_infer::rows::render::render_text(&solution, &source));
    }
    let (errors, _) = diamond_infer::rows::render::count(&solution.diagnostics);
    if errors > 0 {
        return Err(Failure {
            code: 1,
            message: format!("{}: {errors} error(s) in the constraint system", path.display()),
        });
    }
    Ok(())
}

/// `diamond check MODEL [--json] [--bind DIR|FILE...] [--strict-units] [--input-shape NAME=D0,D1...]
/// [--sarif FILE] [--deny-warnings] [--max-diagnostics N] [--color WHEN] [--html FILE]`.
pub fn check(
    path: &Path,
    json: bool,
    bind: &[std::path::PathBuf],
    strict_units: bool,
    shapes: &[InputShape],
    html: Option<&Path>,
    render: &crate::render::Options,
) -> Result<(), Failure> {
    let (model, file) = load_any_mapped(path, shapes).map_err(unreadable)?;
    let graph = model.main_graph().ok_or_else(|| unreadable(format!("{}: the model has no graph", path.display())))?;
    // Only `convert` writes the inferred types back: the report needs none.
    let options = diamond_infer::CheckOptions {
        bind: crate::bind::bind_inputs(graph, bind)?,
        strict_units,
        skip_inferred_types: true,
    };
    // The check reads few of the file's bytes: its pages go back before it runs.
    let release = || file.iter().for_each(|f| f.release_pages());
    if json && html.is_none() && render.sarif.is_none() {
        let (mut report, ones) = diamond_optimize::audit::check_releasing_deferred(&model, &options, release);
        let notes = crate::check_json::write_overlapped(&model, &report, ones, &path.display().to_string());
        report.diagnostics.extend(notes);
        return finish(report, model, path, render);
    }
    let report = diamond_optimize::audit::check_releasing(&model, &options, release);
    if let Some(out) = html {
        diamond_exporters::report::html::write_report(out, &model, &report, path).map_err(unreadable)?;
    }
    if let Some(sarif) = &render.sarif {
        let document = crate::render::sarif::document(&report, path);
        crate::render::sarif::write(sarif, &document)
            .map_err(|e| unreadable(format!("cannot write SARIF to {}: {e}", sarif.display())))?;
    }
    if json {
        // Streamed straight to the output: no document tree in memory.
        use std::io::Write;
        let stdout = std::io::stdout().lock();
        let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout);
        let written = diamond_exporters::report::json::write_check_json(&report, &path.display().to_string(), &mut out)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        // Like `emit`: a closed pipe (`| head`) is not the model's problem.
        drop(written);
    } else {
        let painter = crate::render::colour::Painter::new(render.color.enabled());
        crate::emit(&crate::render::text::render(&report, painter, render.max_diagnostics));
    }
    finish(report, model, path, render)
}

/// `check`'s exit status for `report`, leaving the report and the model to
/// the process's exit.
fn finish(
    report: diamond_infer::CheckReport,
    model: diamond_ir::Model,
    path: &Path,
    render: &crate::render::Options,
) -> Result<(), Failure> {
    let outcome = verdict(&report, path, render.deny_warnings);
    // The process exits next: the model and the report are not freed block
    // by block (on the 42k-node GPT-2 that saved ~1% of the whole process).
    std::mem::forget(report);
    std::mem::forget(model);
    outcome
}

/// The exit status `check` owes its report: 2 for a malformed graph, 1 for
/// errors (or warnings under `--deny-warnings`), success otherwise.
fn verdict(report: &diamond_infer::CheckReport, path: &Path, deny_warnings: bool) -> Result<(), Failure> {
    // A structurally malformed graph (cycle, dangling name, value produced
    // twice) is bad input: exit 2, like an unreadable file.
    let malformed: Vec<&str> = report
        .diagnostics
        .iter()
        .filter(|d| d.code == diamond_infer::Code::InvalidGraph)
        .map(|d| d.message.as_str())
        .collect();
    if let Some(first) = malformed.first() {
        let more = if malformed.len() > 1 { format!(" (and {} more)", malformed.len() - 1) } else { String::new() };
        return Err(Failure { code: 2, message: format!("{}: the graph is malformed: {first}{more}", path.display()) });
    }
    if report.errors() > 0 {
        return Err(Failure {
            code: 1,
            message: format!("{}: {} error(s) in the model", path.display(), report.errors()),
        });
    }
    if deny_warnings && report.warnings() > 0 {
        return Err(Failure {
            code: 1,
            message: format!("{}: {} warning(s) in the model (--deny-warnings)", path.display(), report.warnings()),
        });
    }
    Ok(())
}
