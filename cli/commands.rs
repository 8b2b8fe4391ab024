//! The subcommands' bodies: read, act, report, map errors to exit codes.

use crate::Failure;
use diamond::InputShape;
use std::path::Path;

fn unreadable(error: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: error.to_string() }
}

/// `diamond inspect MODEL [--json]`.
pub fn inspect(path: &Path, json: bool) -> Result<(), Failure> {
    let model = diamond::Model::open(path).map_err(unreadable)?;
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let inspection = model.inspect(file_bytes);
    if json {
        let text = serde_json::to_string_pretty(&inspection.to_json()).map_err(unreadable)?;
        crate::emit(&format!("{text}\n"));
    } else {
        crate::emit(&inspection.render_text());
    }
    Ok(())
}

/// `diamond explain [CODE]`: the code's page, or every code with its
/// one-line description.
pub fn explain(code: Option<&str>) -> Result<(), Failure> {
    use diamond::check::Code;
    let Some(text) = code else {
        let lines: String = Code::ALL
            .iter()
            .map(|&c| format!("{:<26} {}\n", c.as_str(), crate::render::rules::short_description(c)))
            .collect();
        crate::emit(&lines);
        return Ok(());
    };
    let code = Code::parse(text).ok_or_else(|| {
        let all: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        unreadable(format!("no diagnostic code '{text}' (codes: {})", all.join(", ")))
    })?;
    crate::emit(diamond::check::explain(code));
    Ok(())
}

/// `diamond solve FILE [--json]`.
pub fn solve(path: &Path, json: bool) -> Result<(), Failure> {
    let source =
        std::fs::read_to_string(path).map_err(|e| unreadable(format!("cannot read {}: {e}", path.display())))?;
    let solved = diamond::rows::solve(&source).map_err(|e| unreadable(format!("{}: {e}", path.display())))?;
    if json {
        crate::emit(&format!("{}\n", serde_json::to_string_pretty(&solved.to_json()).map_err(unreadable)?));
    } else {
        crate::emit(&solved.render_text());
    }
    let errors = solved.errors();
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
    let model =
        diamond::Model::open_with(path, &diamond::LoadOptions { input_shapes: shapes.to_vec() }).map_err(unreadable)?;
    // Only `convert` writes the inferred types back: the report needs none.
    let options = diamond::CheckOptions {
        bind: crate::bind::bind_inputs(model.ir().main_graph().expect("a Model has a main graph"), bind)?,
        strict_units,
        skip_inferred_types: true,
    };
    // The check reads few of the file's bytes: its pages go back while it runs.
    if json && html.is_none() && render.sarif.is_none() {
        let (mut report, notes) = model.check_deferred(&options, true);
        let notes = crate::check_json::write_overlapped(&model, &report, notes, &path.display().to_string());
        report.diagnostics.extend(notes);
        return finish(report, model, path, render);
    }
    let report = model.check_releasing(&options);
    if let Some(out) = html {
        diamond::check::html::write_report(out, model.ir(), &report, path).map_err(unreadable)?;
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
        let written = diamond::check::json::write_check_json(&report, &path.display().to_string(), &mut out)
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
    report: diamond::Report,
    model: diamond::Model,
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
fn verdict(report: &diamond::Report, path: &Path, deny_warnings: bool) -> Result<(), Failure> {
    // A structurally malformed graph (cycle, dangling name, value produced
    // twice) is bad input: exit 2, like an unreadable file.
    let malformed: Vec<&str> = report
        .diagnostics
        .iter()
        .filter(|d| d.code == diamond::check::Code::InvalidGraph)
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
