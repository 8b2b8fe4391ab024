//! The subcommands' bodies: read, act, report, map errors to exit codes.

use crate::Failure;
use diamond_exporters::inspect::InspectReport;
use diamond_importers::onnx::load_model;
use std::path::Path;

fn unreadable(error: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: error.to_string() }
}

/// `diamond inspect MODEL [--json]`.
pub fn inspect(path: &Path, json: bool) -> Result<(), Failure> {
    let model = load_model(path).map_err(unreadable)?;
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let report = InspectReport::new(&model, &path.display().to_string(), file_bytes);
    if json {
        let text = serde_json::to_string_pretty(&report).map_err(unreadable)?;
        println!("{text}");
    } else {
        print!("{}", report.render_text());
    }
    Ok(())
}

/// `diamond convert MODEL -o OUT`.
pub fn convert(path: &Path, output: &Path) -> Result<(), Failure> {
    if output.is_dir() {
        return Err(unreadable(format!("output {} is a directory; give a file name", output.display())));
    }
    let model = load_model(path).map_err(unreadable)?;
    let summary = diamond_exporters::onnx::write_model(&model, output).map_err(unreadable)?;
    let mut line = format!("wrote {} ({} bytes)", output.display(), summary.model_bytes);
    if !summary.data_files.is_empty() {
        line += &format!(" and {} external data file(s), {} bytes", summary.data_files.len(), summary.data_bytes);
    }
    eprintln!("{line}");
    Ok(())
}
