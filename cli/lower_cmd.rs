//! `diamond lower MODEL --emit kernels`: the fusion groups of a model as
//! kernel programs in text form (the nodes left to the reference kernels
//! listed between them), printed or written one file per program; with
//! `--target cuda -o DIR`, the CUDA artifact ([`diamond::Model::lower_cuda`]).

use crate::Failure;
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
    shapes: &[diamond::InputShape],
) -> Result<(), Failure> {
    if emit != "kernels" {
        return Err(bad(format!("--emit {emit}: only `kernels` is emitted")));
    }
    if target != "cpu" && target != "cuda" {
        return Err(bad(format!("--target {target}: the targets are `cpu` and `cuda`")));
    }
    let model =
        diamond::Model::open_with(path, &diamond::LoadOptions { input_shapes: shapes.to_vec() }).map_err(bad)?;
    if target == "cuda" {
        let dir = output.ok_or_else(|| bad("--target cuda writes an artifact: give its folder with -o DIR"))?;
        let made = model.lower_cuda(dir).map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
        let uncovered = match made.uncovered {
            0 => String::new(),
            n => format!(", {n} contractions left to the reference kernels"),
        };
        let spills = match made.spills {
            0 => String::new(),
            n => format!("; {n} kernel builds spill registers"),
        };
        crate::emit(&format!(
            "{}: {} kernels ({} tiled contractions{uncovered}; {} nodes replaced) for sm_80 and sm_90 in {}{spills}\n",
            path.display(),
            made.kernels,
            made.contractions,
            made.fused_nodes,
            dir.display(),
        ));
        return Ok(());
    }
    let kernels = model.lower_kernels().map_err(bad)?;
    match output {
        None => crate::emit(&kernels.text()),
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| bad(format!("{}: {e}", dir.display())))?;
            for (name, text) in kernels.programs() {
                let file = dir.join(format!("{name}.txt"));
                diamond::io::write_bytes(&file, text.as_bytes())
                    .map_err(|e| bad(format!("{}: {e}", file.display())))?;
            }
        }
    }
    Ok(())
}
