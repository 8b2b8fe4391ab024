//! `--bind`: tensors given on the command line as constant graph inputs.
//!
//! Each argument is a file (`.pb` TensorProto or `.npy`) or a directory of
//! them (the node-test layout `input_0.pb`, `input_1.pb`, ...). A file is
//! matched to a graph input by the tensor's stored name, else by its file
//! stem (`x.npy` binds `x`), else by an `input_N` stem (the N-th graph
//! input that is not an initializer). Files for inputs declared as
//! sequences, maps or optionals are matched and left for `run`, which
//! feeds them: `run --bind` and `run --input FILE|DIR` match by the same
//! rules, so one directory of inputs serves `check` and `run` alike.

use crate::Failure;
use diamond::ir::{Graph, Tensor};
use diamond::values::read_tensor_file;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The bound inputs, by graph-input name.
pub fn bind_inputs(graph: &Graph, args: &[PathBuf]) -> Result<HashMap<String, Tensor>, Failure> {
    let inputs = input_names(graph);
    let mut files = Vec::new();
    for arg in args {
        files.extend(tensor_files(arg)?);
    }
    let mut bound = HashMap::new();
    for file in files {
        let stored = diamond::values::stored_name(&file);
        let name = input_for(&file, stored.as_deref(), &inputs).ok_or_else(|| Failure {
            code: 2,
            message: format!(
                "--bind {}: no graph input matches (inputs: {})",
                file.display(),
                if inputs.is_empty() { "none".to_string() } else { inputs.join(", ") }
            ),
        })?;
        // Sequences, maps and optionals are fed by `run`; the check binds tensors only.
        if !declared_tensor(graph, &name) {
            continue;
        }
        let tensor = read_tensor_file(&file).map_err(|e| Failure { code: 2, message: e.to_string() })?;
        bound.insert(name, tensor);
    }
    Ok(bound)
}

/// Whether graph input `name` is declared as a tensor (or not declared).
fn declared_tensor(graph: &Graph, name: &str) -> bool {
    matches!(graph.declared_input(name), None | Some(diamond::ir::TypeValue::Tensor { .. }))
}

/// The graph inputs that are not initializers, in order: what `input_N` counts.
pub fn input_names(graph: &Graph) -> Vec<String> {
    graph
        .inputs
        .iter()
        .filter_map(|vi| vi.value.map(|v| graph.value_name(v).to_string()))
        .filter(|n| !graph.initializers.iter().any(|t| t.name.as_deref() == Some(n.as_str())))
        .collect()
}

/// The tensor files an argument names: the file itself, or a directory's
/// `.pb`/`.npy` files sorted by name, stored outputs (`output_N`) left out.
pub fn tensor_files(arg: &Path) -> Result<Vec<PathBuf>, Failure> {
    if !arg.is_dir() {
        return Ok(vec![arg.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(arg)
        .map_err(|e| Failure { code: 2, message: format!("cannot read directory {}: {e}", arg.display()) })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pb" || x == "npy"))
        .filter(|p| !p.file_stem().is_some_and(|s| s.to_string_lossy().starts_with("output_")))
        .collect();
    entries.sort();
    Ok(entries)
}

/// The graph input (of `inputs`) that `file` feeds: the one named as the
/// stored tensor is, else the one named as the file's stem, else the N-th
/// for a stem `input_N`.
pub fn input_for(file: &Path, stored_name: Option<&str>, inputs: &[String]) -> Option<String> {
    if let Some(n) = stored_name.filter(|n| inputs.iter().any(|i| i == n)) {
        return Some(n.to_string());
    }
    let stem = file.file_stem()?.to_string_lossy();
    if let Some(i) = inputs.iter().find(|i| **i == stem) {
        return Some(i.clone());
    }
    let index: usize = stem.strip_prefix("input_")?.parse().ok()?;
    inputs.get(index).cloned()
}
