//! `diamond lower MODEL --emit kernels`: the fusion groups of a model as
//! kernel programs in text form (the nodes left to the reference kernels
//! listed between them), printed or written one file per program; with
//! `--target cuda`, the CUDA artifact (`lower_cuda.rs`).

use crate::Failure;
use diamond_ir::{Model, NodeId};
use diamond_runtime::kernel::{print, Step};
use std::path::Path;

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// Runs the command.
pub fn run(
    path: &Path,
    emit: &str,
    target: &str,
    output: Option<&Path>,
    shapes: &[diamond_importers::torch::lower::InputShape],
) -> Result<(), Failure> {
    if emit != "kernels" {
        return Err(bad(format!("--emit {emit}: only `kernels` is emitted")));
    }
    if target != "cpu" && target != "cuda" {
        return Err(bad(format!("--target {target}: the targets are `cpu` and `cuda`")));
    }
    let model = diamond_importers::torch::load::load_any(path, shapes).map_err(bad)?;
    if target == "cuda" {
        let dir = output.ok_or_else(|| bad("--target cuda writes an artifact: give its folder with -o DIR"))?;
        return crate::lower_cuda::run(path, &model, dir, &label);
    }
    let lowered = diamond_optimize::lower::lower(&model)
        .ok_or_else(|| bad(format!("{}: the model has no graph", path.display())))?;
    let label = |n: NodeId| label(&model, n);
    match output {
        None => crate::emit(&print::lowered(&lowered, &label)),
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| bad(format!("{}: {e}", dir.display())))?;
            for step in &lowered.steps {
                let p = match step {
                    Step::Program(p) => p,
                    Step::Contraction(c) => match &c.epilogue {
                        Some(p) => p,
                        None => continue,
                    },
                    Step::Node(_) => continue,
                };
                let file = dir.join(format!("{}.txt", p.name));
                let text = print::program(p, &label);
                use std::io::Write;
                diamond_exporters::atomic::write_with(&file, |w| w.write_all(text.as_bytes()))
                    .map_err(|e| bad(format!("{}: {e}", file.display())))?;
            }
        }
    }
    Ok(())
}

/// `Add 'name'` for a main-graph node.
fn label(model: &Model, n: NodeId) -> String {
    match model.main_graph() {
        Some(g) => {
            let node = &g.nodes[n];
            format!("{} '{}'", node.op_type(), diamond_runtime::exec::node_label(g, node))
        }
        None => String::new(),
    }
}
