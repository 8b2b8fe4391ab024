//! `diamond check --html`: what the page says, that it is written whole or not at all, and that its pictures render
//! in a real browser (headless Chromium, driven through `--dump-dom`: a probe script appended to a copy of the page
//! measures every picture and writes the numbers into the DOM, which Chromium prints).
//!
//! Without a browser the rendering test fails and says to run `.ci/run` (which installs Chromium);
//! `DIAMOND_SKIP_BROWSER_TEST=1` skips that part only.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn diamond(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_diamond")).args(args).output().expect("runs diamond")
}

fn fixture(path: &str) -> String {
    format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// Checks `model` with `--html` into `dir`; returns the page, the `--json` report and the exit code.
fn report(model: &str, dir: &Path) -> (String, Value, i32) {
    let page = dir.join(format!("{}.html", Path::new(model).file_stem().unwrap().to_string_lossy()));
    let out = diamond(&["check", &fixture(model), "--json", "--html", page.to_str().unwrap()]);
    let json: Value = serde_json::from_slice(&out.stdout).expect("--json still prints JSON with --html");
    let html = std::fs::read_to_string(&page).expect("the page is written");
    (html, json, out.status.code().unwrap_or(-1))
}

/// `text` as it appears in the page's markup.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

fn diagnostics(json: &Value) -> &Vec<Value> {
    json["diagnostics"].as_array().expect("diagnostics")
}

#[test]
fn the_page_words_each_diagnostic_and_draws_one_picture_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (html, json, code) = report("check/broadcast_conflict.onnx", dir.path());
    assert_eq!(code, 1, "errors still exit 1");
    let d = &diagnostics(&json)[0];
    assert!(html.contains("error[broadcast-conflict]"));
    assert!(html.contains(&escaped(d["message"].as_str().unwrap())));
    for note in d["chain"].as_array().unwrap() {
        assert!(html.contains(&format!("= note: {}", escaped(note.as_str().unwrap()))), "{note}");
    }
    assert!(html.contains("--&gt; Add &#39;add1&#39; (node 0), input 1, axis 0"));
    assert_eq!(html.matches("<svg").count(), 1, "one picture per diagnostic");
    // The node is highlighted, and so are the operand y = [5] (its only axis) and the output axis it must match.
    assert!(html.contains(r#"<g class="op focus"><title>Add 'add1'</title>"#));
    assert!(html.contains(r##"float [<tspan class="axis" font-weight="bold" fill="#c62828">5</tspan>]"##));
    assert!(html.contains(r##"float [3, <tspan class="axis" font-weight="bold" fill="#c62828">4</tspan>]"##));
    // Self-contained: nothing is fetched.
    for external in ["<script", "<link", "src=", "@import", "url(http"] {
        assert!(!html.contains(external), "the page must not load anything: found {external}");
    }
}

#[test]
fn several_diagnostics_get_several_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let (html, json, code) = report("check/invalid_attributes.onnx", dir.path());
    assert_eq!(code, 1);
    let count = diagnostics(&json).len();
    assert!(count >= 4);
    assert_eq!(html.matches("<svg").count(), count);
    assert_eq!(html.matches("<article class=\"diagnostic").count(), count);
}

#[test]
fn a_clean_model_lists_its_values_and_no_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let (html, json, code) = report("check/exported_cnn.onnx", dir.path());
    assert_eq!(code, 0);
    assert!(diagnostics(&json).is_empty());
    assert_eq!(html.matches("<svg").count(), 0);
    assert!(html.contains("No errors or warnings."));
    assert!(html.contains("inputs") || html.contains("Inputs"));
    for (name, _) in json["values"].as_object().unwrap() {
        assert!(html.contains(&format!(">{}<", escaped(name))), "value {name} is listed");
    }
    assert!(html.contains("<details><summary>Initializers"));
}

#[test]
fn the_text_report_and_exit_code_are_unchanged_by_html() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("r.html");
    let model = fixture("check/broadcast_conflict.onnx");
    let plain = diamond(&["check", &model]);
    let with = diamond(&["check", &model, "--html", page.to_str().unwrap()]);
    assert_eq!(plain.stdout, with.stdout);
    assert_eq!(plain.status.code(), with.status.code());
    assert!(page.exists());
}

#[test]
fn an_unwritable_path_is_exit_2_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("check/broadcast_conflict.onnx");
    for target in [dir.path().join("missing/r.html"), dir.path().to_path_buf()] {
        let out = diamond(&["check", &model, "--html", target.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{target:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("error: cannot write the HTML report "), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no partial file, no temporary");
}

// ---- the browser ----

/// Measures every picture and reads the rendered text; runs as the page's last script.
const PROBE: &str = r#"<script>
(() => {
  const svgs = [...document.querySelectorAll('svg')].map(svg => {
    const r = svg.getBoundingClientRect();
    const ops = [...svg.querySelectorAll('g.op rect')].map(rect => rect.getBBox());
    const texts = [...svg.querySelectorAll('text')].map(t => t.getComputedTextLength());
    return { width: r.width, height: r.height, ops: ops.length,
             opsSized: ops.every(b => b.width > 0 && b.height > 0),
             textsSized: texts.length > 0 && texts.every(w => w > 0),
             focus: svg.querySelectorAll('g.op.focus').length,
             axis: [...svg.querySelectorAll('tspan.axis')].map(t => t.textContent) };
  });
  const articles = [...document.querySelectorAll('article.diagnostic')].map(a => a.innerText);
  const probe = document.createElement('pre');
  probe.id = 'probe';
  probe.textContent = JSON.stringify({ svgs, articles, body: document.body.innerText });
  document.body.appendChild(probe);
})();
</script>"#;

/// The first browser found on `PATH` or in `/usr/bin`.
fn browser() -> Option<PathBuf> {
    let names = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]).collect();
    names.iter().flat_map(|n| dirs.iter().map(move |d| d.join(n))).find(|p| p.is_file())
}

/// Renders `page` (with the probe appended) in headless Chromium and returns what the probe measured.
fn render(browser: &Path, page: &str, dir: &Path) -> Value {
    let probed = dir.join("probed.html");
    let at = page.rfind("</body>").expect("the page has a body");
    std::fs::write(&probed, format!("{}{PROBE}\n{}", &page[..at], &page[at..])).unwrap();
    let dumped = dir.join("dom.html");
    let mut child = Command::new(browser)
        .args(["--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", probed.display()))
        .stdout(Stdio::from(std::fs::File::create(&dumped).unwrap()))
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the browser");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{} did not finish within 120 s", browser.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{} failed: {status}", browser.display());
    let dom = std::fs::read_to_string(&dumped).unwrap();
    let start =
        dom.find(r#"<pre id="probe">"#).expect("the probe ran and wrote its element") + r#"<pre id="probe">"#.len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text =
        dom[start..end].replace("&lt;", "<").replace("&gt;", ">").replace("&nbsp;", "\u{a0}").replace("&amp;", "&");
    serde_json::from_str(&text).expect("the probe wrote JSON")
}

#[test]
fn the_pictures_render_in_headless_chromium() {
    let Some(browser) = browser() else {
        if std::env::var("DIAMOND_SKIP_BROWSER_TEST").as_deref() == Ok("1") {
            eprintln!("no Chromium found; DIAMOND_SKIP_BROWSER_TEST=1, so the browser check is skipped");
            return;
        }
        panic!(
            "no Chromium found (tried chromium, chromium-browser, google-chrome on PATH and in /usr/bin): run `.ci/run`, \
             which installs it, or set DIAMOND_SKIP_BROWSER_TEST=1 to skip this browser check"
        );
    };
    let dir = tempfile::tempdir().unwrap();
    for model in ["check/broadcast_conflict.onnx", "check/invalid_attributes.onnx", "light/light_squeezenet.onnx"] {
        let (html, json, _) = report(model, dir.path());
        let seen = render(&browser, &html, dir.path());
        let diags = diagnostics(&json);
        let svgs = seen["svgs"].as_array().unwrap();
        assert_eq!(svgs.len(), diags.len(), "{model}: one rendered picture per diagnostic");
        for svg in svgs {
            assert!(svg["width"].as_f64().unwrap() > 0.0 && svg["height"].as_f64().unwrap() > 0.0, "{model}: {svg}");
            assert!(svg["ops"].as_u64().unwrap() >= 1 && svg["opsSized"] == true && svg["textsSized"] == true, "{svg}");
            assert_eq!(svg["focus"], 1, "{model}: the diagnostic's node is highlighted: {svg}");
        }
        let articles = seen["articles"].as_array().unwrap();
        for (d, article) in diags.iter().zip(articles) {
            let shown = article.as_str().unwrap();
            let code = d["code"].as_str().unwrap();
            assert!(shown.contains(&format!(
                "{}[{code}]: {}",
                d["severity"].as_str().unwrap(),
                d["message"].as_str().unwrap()
            )));
            for note in d["chain"].as_array().unwrap() {
                assert!(shown.contains(note.as_str().unwrap()), "{model}: {note} is shown");
            }
        }
        let body = seen["body"].as_str().unwrap();
        assert!(body.contains(" nodes") && body.contains("Values ("), "{model}");
        for input in json["inputs"].as_array().unwrap() {
            assert!(body.contains(input.as_str().unwrap()), "{model}: input {input} is shown");
        }
        if model.contains("broadcast") {
            assert_eq!(svgs[0]["axis"], serde_json::json!(["5", "4"]), "the clashing dims are marked");
        }
    }
}
