//! The reference executor against the ONNX backend node suite
//! (`fixtures/onnx-node/*`): every case is run on its stored inputs and its
//! outputs compared with the stored ones (rtol 1e-3, atol 1e-7, NaNs equal,
//! integers, bools and strings exactly).
//!
//! Each case is a pass, a refusal (the executor says what it lacks, or the
//! stored data is not a tensor it can read), or wrong (it ran and disagreed).
//! The test demands no wrong case and at least [`PASS_RATCHET`] passes; raise
//! the ratchet when more pass. The refusal reasons, grouped, go to stderr;
//! with `DIAMOND_UPDATE_RUN_STATUS=1` the per-case classification and the
//! grouped summary are written to `fixtures/onnx-node-run-status.txt`.

use diamond_runtime::{run_model, RunOptions, Tensor, Value};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Cases that must pass; raise it as the executor grows.
const PASS_RATCHET: usize = 1435;

const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-7;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

enum Outcome {
    Pass,
    Refused(String),
    Wrong(String),
}

fn data_files(case: &Path, prefix: &str) -> Vec<PathBuf> {
    let dir = case.join("test_data_set_0");
    (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.is_file()).collect()
}

fn read(path: &Path) -> Result<Tensor, String> {
    let t = diamond_importers::tensor_file::read_tensor_file(path).map_err(|_| "stored data is not a tensor (sequence/optional)".to_string())?;
    Tensor::from_ir(&t).map_err(|e| format!("stored data: {e}"))
}

/// Whether `got` equals `want` within the tolerances; the first bad element otherwise.
pub fn compare(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.elem() != want.elem() {
        return Err(format!("type {}, stored {}", got.elem(), want.elem()));
    }
    if got.shape != want.shape {
        return Err(format!("shape {:?}, stored {:?}", got.shape, want.shape));
    }
    if got.is_float() {
        // rtol 1e-3 is finer than one unit in the last place (ulp) of the
        // 16-bit types (bfloat16 keeps 8 significant bits, float16 11):
        // there two ulps of the stored value are allowed too, since rounding
        // intermediates in another order is not an error.
        let mantissa = match got.elem() {
            diamond_ir::ElemType::Bfloat16 => Some(7),
            diamond_ir::ElemType::Float16 => Some(10),
            _ => None,
        };
        let (g, w) = (got.to_f64s().unwrap_or_default(), want.to_f64s().unwrap_or_default());
        for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
            let mut tol = ATOL + RTOL * b.abs();
            if let Some(m) = mantissa.filter(|_| b != 0.0 && b.is_finite()) {
                tol = tol.max(2.0 * 2f64.powi(b.abs().log2().floor() as i32 - m));
            }
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol;
            if !ok {
                return Err(format!("element {i}: {a}, stored {b}"));
            }
        }
        return Ok(());
    }
    if got.data != want.data {
        return Err("values differ".into());
    }
    Ok(())
}

fn evaluate(case: &Path) -> Outcome {
    let model = match diamond_importers::onnx::load_model(&case.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return Outcome::Refused(format!("import: {e}")),
    };
    let graph = model.main_graph().expect("node cases have a main graph");
    let initialized: std::collections::HashSet<&str> =
        graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let names: Vec<String> = graph
        .inputs
        .iter()
        .filter_map(|i| i.value)
        .map(|v| graph.value_name(v).to_string())
        .filter(|n| !initialized.contains(n.as_str()))
        .collect();
    let mut inputs = Vec::new();
    for (i, path) in data_files(case, "input").iter().enumerate() {
        match read(path) {
            Ok(t) => inputs.push((names.get(i).cloned().unwrap_or_default(), Value::Tensor(t))),
            Err(e) => return Outcome::Refused(e),
        }
    }
    let mut expected = Vec::new();
    for path in data_files(case, "output") {
        match read(&path) {
            Ok(t) => expected.push(t),
            Err(e) => return Outcome::Refused(e),
        }
    }
    let result = match run_model(&model, inputs, &RunOptions::default()) {
        Ok(r) => r,
        Err(e) if e.is_refusal() => return Outcome::Refused(e.group()),
        Err(e) => return Outcome::Refused(format!("error: {}", e.group())),
    };
    if result.outputs.len() != expected.len() {
        return Outcome::Wrong(format!("{} outputs, stored {}", result.outputs.len(), expected.len()));
    }
    for (k, ((_, got), want)) in result.outputs.iter().zip(&expected).enumerate() {
        let Value::Tensor(got) = got else { return Outcome::Wrong(format!("output {k} is a {}", got.kind())) };
        if let Err(e) = compare(got, want) {
            return Outcome::Wrong(format!("output {k}: {e}"));
        }
    }
    Outcome::Pass
}

#[test]
fn node_suite_runs_without_wrong_results() {
    std::panic::set_hook(Box::new(|_| {}));
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root().join("fixtures/onnx-node"))
        .expect("fixtures/onnx-node exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    let filter = std::env::var("NODE_FILTER").ok();
    let (mut pass, mut wrong, mut refused) = (0, Vec::new(), 0);
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lines = String::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        match evaluate(case) {
            Outcome::Pass => {
                pass += 1;
                writeln!(lines, "{name} pass").unwrap();
            }
            Outcome::Refused(r) => {
                refused += 1;
                let short: String = r.lines().next().unwrap_or("").chars().take(100).collect();
                writeln!(lines, "{name} refused {short}").unwrap();
                reasons.entry(short).or_default().push(name);
            }
            Outcome::Wrong(w) => {
                writeln!(lines, "{name} WRONG {w}").unwrap();
                wrong.push(format!("{name}: {w}"));
            }
        }
    }
    let mut groups: Vec<(&String, &Vec<String>)> = reasons.iter().collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let mut summary = format!(
        "# diamond run on fixtures/onnx-node: {pass} pass, {} wrong, {refused} refused (of {})\n",
        wrong.len(),
        pass + wrong.len() + refused
    );
    summary.push_str("# refusals by reason (count, reason, first cases)\n");
    for (reason, names) in &groups {
        let first: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
        writeln!(summary, "# {:4} {reason}  [{}]", names.len(), first.join(", ")).unwrap();
    }
    eprintln!("{summary}");
    for w in &wrong {
        eprintln!("WRONG {w}");
    }
    if std::env::var_os("DIAMOND_UPDATE_RUN_STATUS").is_some() && filter.is_none() {
        let text = format!("{summary}{lines}");
        std::fs::write(root().join("fixtures/onnx-node-run-status.txt"), text).unwrap();
    }
    assert!(wrong.is_empty(), "{} cases ran and disagreed with the stored outputs:\n{}", wrong.len(), wrong.join("\n"));
    if filter.is_none() {
        assert!(pass >= PASS_RATCHET, "{pass} cases pass, fewer than the ratchet {PASS_RATCHET}");
    }
}
