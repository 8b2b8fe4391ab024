//! `diamond lower MODEL --target cuda -o DIR`: the artifact a GPU
//! deployment picks up. The model is optimized (and verified), its fusion
//! groups are lowered to kernel programs and generated as CUDA C, its
//! MatMul/Gemm/Conv steps as tiled kernels with their epilogue fused
//! (those the tiled kernel does not cover stay with the reference kernels,
//! their epilogue a program kernel), compiled
//! by NVRTC to PTX and to CUBINs for sm_80 and sm_90 and assembled by
//! ptxas; DIR receives `model.onnx` (the optimized model), `kernels.cu`
//! and one `.cu` per kernel, `kernels.ptx`, the CUBINs and
//! `manifest.json`. Without NVRTC or ptxas nothing is written (exit 2).

use crate::Failure;
use diamond_ir::{Model, NodeId};
use diamond_runtime::cuda;
use diamond_runtime::cuda::contraction::ContractionKernel;
use diamond_runtime::kernel::{Program, Step};
use std::path::Path;

fn bad(message: impl std::fmt::Display) -> Failure {
    Failure { code: 2, message: message.to_string() }
}

/// A kernel made for a step: a program's, or a contraction's with the
/// nodes it replaces.
enum Made<'p> {
    Program(&'p Program, cuda::CudaKernel),
    Contraction(Box<ContractionKernel>, Vec<NodeId>),
}

fn program_kernel(path: &Path, p: &Program) -> Result<cuda::CudaKernel, Failure> {
    cuda::generate(p).map_err(|e| bad(format!("{}: program {}: {e}", path.display(), p.name)))
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
    let graph = optimized.main_graph().ok_or_else(|| bad(format!("{}: the model has no graph", path.display())))?;
    // Per step: a program kernel, or a contraction kernel (and the epilogue
    // as a program kernel when it is not fused or the tiled kernel does not
    // cover the node).
    let mut made: Vec<Made> = Vec::new();
    let mut uncovered = 0;
    for step in &lowered.steps {
        let c = match step {
            Step::Program(p) => {
                made.push(Made::Program(p, program_kernel(path, p)?));
                continue;
            }
            Step::Contraction(c) => c,
            Step::Node(_) => continue,
        };
        let name = format!("c{}", made.iter().filter(|m| matches!(m, Made::Contraction(..))).count());
        match cuda::contraction::generate(c, &graph.nodes[c.node], &name) {
            Ok(k) => {
                let mut nodes = vec![c.node];
                if k.fused {
                    nodes.extend(c.epilogue.iter().flat_map(|p| p.nodes.iter().copied()));
                }
                let fused = k.fused;
                made.push(Made::Contraction(Box::new(k), nodes));
                if !fused {
                    if let Some(p) = &c.epilogue {
                        made.push(Made::Program(p, program_kernel(path, p)?));
                    }
                }
            }
            Err(_) => {
                uncovered += 1;
                if let Some(p) = &c.epilogue {
                    made.push(Made::Program(p, program_kernel(path, p)?));
                }
            }
        }
    }
    let kernels: Vec<cuda::CudaKernel> = made
        .iter()
        .map(|m| match m {
            Made::Program(_, k) => k.clone(),
            Made::Contraction(k, _) => k.kernel.clone(),
        })
        .collect();
    let built = cuda::artifact::build(&kernels, None).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let labels = |nodes: &[NodeId]| -> Vec<String> { nodes.iter().map(|&n| label(optimized, n)).collect() };
    let entries = made
        .iter()
        .map(|m| match m {
            Made::Program(p, k) => cuda::artifact::manifest_entry(p, k, &labels(&p.nodes), &built.usage),
            Made::Contraction(k, nodes) => cuda::artifact::contraction_entry(k, &labels(nodes), &built.usage),
        })
        .collect();
    cuda::artifact::write(dir, &kernels, &built, entries).map_err(bad)?;
    diamond_exporters::onnx::write_model(optimized, &dir.join("model.onnx"))
        .map_err(|e| bad(format!("{}: {e}", dir.join("model.onnx").display())))?;
    let spills = built.usage.iter().filter(|u| u.spill_stores > 0 || u.spill_loads > 0).count();
    let contractions = made.iter().filter(|m| matches!(m, Made::Contraction(..))).count();
    let fused: usize = made
        .iter()
        .map(|m| match m {
            Made::Program(p, _) => p.nodes.len(),
            Made::Contraction(_, nodes) => nodes.len(),
        })
        .sum();
    crate::emit(&format!(
        "{}: {} kernels ({contractions} tiled contractions{}; {fused} nodes replaced) for sm_80 and sm_90 in {}{}\n",
        path.display(),
        kernels.len(),
        if uncovered > 0 { format!(", {uncovered} contractions left to the reference kernels") } else { String::new() },
        dir.display(),
        if spills > 0 { format!("; {spills} kernel builds spill registers") } else { String::new() }
    ));
    Ok(())
}
