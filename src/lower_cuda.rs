//! `diamond lower MODEL --target cuda -o DIR`: the artifact a GPU
//! deployment picks up. The model is optimized (and verified), its fusion
//! groups are lowered to kernel programs and generated as CUDA C, compiled
//! by NVRTC to PTX and to CUBINs for sm_80 and sm_90 and assembled by
//! ptxas; DIR receives `model.onnx` (the optimized model), `kernels.cu`
//! and one `.cu` per kernel, `kernels.ptx`, the CUBINs and
//! `manifest.json`. Without NVRTC or ptxas nothing is written (exit 2).

use crate::Failure;
use diamond_ir::{Model, NodeId};
use diamond_runtime::cuda;
use diamond_runtime::kernel::Program;
use std::path::Path;

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// Writes the artifact of `model` (read from `path`) into `dir`.
pub fn run(path: &Path, model: &Model, dir: &Path, label: &dyn Fn(&Model, NodeId) -> String) -> Result<(), Failure> {
    if !cuda::nvrtc::available() {
        return Err(bad(cuda::nvrtc::MISSING));
    }
    let options = diamond_optimize::Options { verify: true, ..Default::default() };
    let outcome = diamond_optimize::optimize(model, &options).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    if let Some(diamond_optimize::verify::Verdict::Differs(why)) = &outcome.verdict {
        return Err(Failure { code: 1, message: format!("{}: the optimized model differs: {why}", path.display()) });
    }
    let optimized = &outcome.model;
    let lowered = diamond_optimize::lower::lower(optimized)
        .ok_or_else(|| bad(format!("{}: the model has no graph", path.display())))?;
    let programs: Vec<&Program> = lowered.programs().collect();
    let kernels = programs
        .iter()
        .map(|p| cuda::generate(p).map_err(|e| bad(format!("{}: program {}: {e}", path.display(), p.name))))
        .collect::<Result<Vec<_>, _>>()?;
    let built = cuda::artifact::build(&kernels, None).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let entries = programs
        .iter()
        .zip(&kernels)
        .map(|(p, k)| {
            let nodes: Vec<String> = p.nodes.iter().map(|&n| label(optimized, n)).collect();
            cuda::artifact::manifest_entry(p, k, &nodes, &built.usage)
        })
        .collect();
    cuda::artifact::write(dir, &kernels, &built, entries).map_err(bad)?;
    diamond_exporters::onnx::write_model(optimized, &dir.join("model.onnx"))
        .map_err(|e| bad(format!("{}: {e}", dir.join("model.onnx").display())))?;
    let spills = built.usage.iter().filter(|u| u.spill_stores > 0 || u.spill_loads > 0).count();
    crate::emit(&format!(
        "{}: {} kernels ({} nodes fused) for sm_80 and sm_90 in {}{}\n",
        path.display(),
        kernels.len(),
        programs.iter().map(|p| p.nodes.len()).sum::<usize>(),
        dir.display(),
        if spills > 0 { format!("; {spills} kernel builds spill registers") } else { String::new() }
    ));
    Ok(())
}
