//! The `--html` report of `diamond check`: one self-contained page (inline CSS, inline SVG, no script, nothing
//! fetched) with a summary, the diagnostics — each as the text report words it and with a picture of the graph
//! around its node — the table of values and an operator histogram. This module assembles the document, escapes
//! text and writes the file atomically; `sections` and `diagnostics` write the parts, `neighbourhood` picks
//! what a picture shows, `layout` places it and `svg` draws it.

mod diagnostics;
mod layout;
mod neighbourhood;
mod sections;
mod svg;

use diamond_infer::CheckReport;
use diamond_ir::Model;
use std::fmt::Write;
use std::path::Path;

/// The page's style sheet.
const CSS: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1200px;
  padding: 0 20px 40px; color: #222; }
h1 { font-size: 22px; margin: 20px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
code, pre, td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
  font-size: 13px; }
.model { color: #555; margin: 0; word-break: break-all; }
.counts span { display: inline-block; margin-right: 18px; } .counts b { font-size: 18px; }
.error-count { color: #c62828; } .warning-count { color: #a86400; } .ok { color: #2e7d32; }
table { border-collapse: collapse; margin: 6px 0; } th, td { text-align: left; padding: 2px 10px 2px 0;
  vertical-align: top; } th { border-bottom: 1px solid #ccc; } tr:nth-child(even) td { background: #fafafa; }
.tag { font-size: 11px; padding: 0 5px; border-radius: 3px; margin-left: 6px; background: #e3f2fd; color: #1565c0; }
article.diagnostic { border: 1px solid #ddd; border-left: 5px solid #c62828; border-radius: 4px; margin: 14px 0;
  padding: 8px 12px; } article.warning { border-left-color: #e0a000; }
pre.diag { white-space: pre-wrap; margin: 4px 0 8px; } .sev-error { color: #c62828; font-weight: bold; }
.sev-warning { color: #a86400; font-weight: bold; } .note { color: #555; } .help { color: #1565c0; }
figure { margin: 6px 0; overflow-x: auto; } figcaption { color: #666; font-size: 12px; }
.legend span { margin-right: 12px; } .bar { background: #90a4d4; height: 10px; display: inline-block; }
details summary { cursor: pointer; color: #1565c0; margin: 8px 0; }
"#;

/// The report page for `report` on `model`, read from `model_path`.
pub fn render(model: &Model, report: &CheckReport, model_path: &Path) -> String {
    let path = model_path.display().to_string();
    let mut page = String::with_capacity(64 * 1024 + 200 * report.values.len());
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>diamond check: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n\
         <h1>diamond check</h1>\n<p class=\"model\"><code>{}</code></p>\n",
        escape(&path),
        escape(&path)
    );
    sections::summary(&mut page, model, report);
    diagnostics::section(&mut page, model, report);
    sections::values(&mut page, report);
    sections::operators(&mut page, model);
    page.push_str("</body>\n</html>\n");
    page
}

/// Writes the report page to `out`, atomically: a failure leaves no file (and any previous one as it was).
/// The error is the sentence to show: `cannot write the HTML report OUT: why`.
pub fn write_report(out: &Path, model: &Model, report: &CheckReport, model_path: &Path) -> Result<(), String> {
    let cannot = |why: String| format!("cannot write the HTML report {}: {why}", out.display());
    if out.is_dir() {
        return Err(cannot("it is a directory; give a file name".into()));
    }
    let page = render(model, report, model_path);
    crate::atomic::write_with(out, |file| std::io::Write::write_all(file, page.as_bytes()))
        .map_err(|e| cannot(e.to_string()))
}

/// `text` with the five HTML-special characters escaped, safe in element content and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_both_quotes() {
        assert_eq!(escape(r#"<a href="x">'&'</a>"#), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("plain ← text"), "plain ← text");
    }
}
