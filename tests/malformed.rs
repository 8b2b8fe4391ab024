//! The malformed corpus (`fixtures/malformed/`, made by `gen_malformed.py`,
//! plus the inputs fuzzing found under `fixtures/malformed/fuzz/`): every
//! file is fed to `check` (`solve` for `.rows`) and `convert`. Each must end
//! within 10 s with exit 0, 1 or 2, never a panic, and a failed `convert`
//! leaves no output file. `expected.txt` pins the exit code of the files
//! whose outcome is decided (`name code`); the rest may be any of the three.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one command may take.
const LIMIT: Duration = Duration::from_secs(10);

fn corpus() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if !matches!(p.extension().and_then(|e| e.to_str()), Some("py" | "md"))
                && !p.ends_with("expected.txt")
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&common::root().join("fixtures/malformed"), &mut files);
    files.sort();
    files
}

fn expected() -> HashMap<String, i32> {
    let text = std::fs::read_to_string(common::root().join("fixtures/malformed/expected.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (name, code) = l.split_once(' ')?;
            Some((name.to_string(), code.trim().parse().ok()?))
        })
        .collect()
}

/// Runs diamond with `args`; its exit code and stderr, or a failure after [`LIMIT`].
fn run(args: &[&str]) -> Result<(i32, String), String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_diamond"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Drain stderr as it comes: a full pipe would stall the child.
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut err = String::new();
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            let err = reader.join().unwrap_or_default();
            return Ok((status.code().unwrap_or(-1), err));
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            return Err(format!("diamond {} ran past {LIMIT:?}", args.join(" ")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_malformed_input_is_refused_or_handled_without_a_panic() {
    let files = corpus();
    assert!(files.len() >= 40, "the corpus is there: {}", files.len());
    let expected = expected();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let shown = file.to_str().unwrap();
        let is_rows = name.ends_with(".rows");
        let command = if is_rows { "solve" } else { "check" };
        match run(&[command, shown]) {
            Err(e) => failures.push(e),
            Ok((code, err)) => {
                if err.contains("panicked") || !(0..=2).contains(&code) {
                    failures.push(format!("{command} {name}: exit {code}: {err}"));
                }
                if let Some(&want) = expected.get(&name) {
                    if code != want {
                        failures.push(format!("{command} {name}: exit {code}, expected {want}: {err}"));
                    }
                }
                if code == 2 && !err.contains(&name) {
                    failures.push(format!("{command} {name}: the message does not name the file: {err}"));
                }
            }
        }
        if is_rows {
            continue;
        }
        let out = dir.path().join(format!("{name}.out.onnx"));
        match run(&["convert", shown, "-o", out.to_str().unwrap()]) {
            Err(e) => failures.push(e),
            Ok((code, err)) => {
                if err.contains("panicked") || !(0..=2).contains(&code) {
                    failures.push(format!("convert {name}: exit {code}: {err}"));
                }
                if code != 0 && out.exists() {
                    failures.push(format!("convert {name}: exit {code} but an output was written"));
                }
            }
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    assert!(failures.is_empty(), "{} problem(s):\n{}", failures.len(), failures.join("\n"));
}
