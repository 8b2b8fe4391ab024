//! [`Model::lower_cuda`]: the artifact a GPU deployment picks up. The
//! model is optimized (and verified), its fusion groups are lowered to
//! kernel programs and generated as CUDA C, its MatMul/Gemm/Conv steps as
//! tiled kernels with their epilogue fused (those the tiled kernel does not
//! cover stay with the reference kernels, their epilogue a program
//! kernel), compiled by NVRTC to PTX and to CUBINs for sm_80 and sm_90 and
//! assembled by ptxas. The folder receives `model.onnx` (the optimized
//! model), `kernels.cu` and one `.cu` per kernel, `kernels.ptx`, the
//! CUBINs and `manifest.json`. Without NVRTC or ptxas nothing is written.

use super::node_label;
use crate::error::{Error, Result};
use crate::model::Model;
use diamond_ir::NodeId;
use diamond_runtime::cuda;
use diamond_runtime::cuda::contraction::ContractionKernel;
use diamond_runtime::kernel::{Program, Step};
use std::path::Path;

/// What [`Model::lower_cuda`] wrote.
#[derive(Clone, Debug)]
pub struct CudaArtifact {
    /// Kernels built (programs and tiled contractions).
    pub kernels: usize,
    /// Of those, tiled contractions.
    pub contractions: usize,
    /// Contractions the tiled kernel does not cover, left to the reference kernels.
    pub uncovered: usize,
    /// Nodes the kernels replace.
    pub fused_nodes: usize,
    /// Kernel builds that spill registers.
    pub spills: usize,
}

/// A kernel made for a step: a program's, or a contraction's with the
/// nodes it replaces.
enum Made<'p> {
    Program(&'p Program, cuda::CudaKernel),
    Contraction(Box<ContractionKernel>, Vec<NodeId>),
}

impl Model {
    /// Optimizes (verified), lowers and compiles the model for CUDA into
    /// the folder `dir`. NVRTC or ptxas missing is [`Error::Unavailable`];
    /// an optimized model that computes something else is [`Error::Model`].
    pub fn lower_cuda(&self, dir: &Path) -> Result<CudaArtifact> {
        let label = &self.label;
        if !cuda::nvrtc::available() {
            return Err(Error::Unavailable(cuda::nvrtc::MISSING.to_string()));
        }
        let options = diamond_optimize::Options { verify: true, ..Default::default() };
        let optimized = self.optimize(&options).map_err(|e| Error::from(e).labelled(label))?;
        if let Some(diamond_optimize::verify::Verdict::Differs(why)) = &optimized.verdict {
            return Err(Error::Model(format!("{label}: the optimized model differs: {why}")));
        }
        let optimized = optimized.model;
        let lowered = diamond_optimize::lower::lower(&optimized.ir)
            .ok_or_else(|| Error::Read(format!("{label}: the model has no graph")))?;
        let graph = optimized.graph();
        let program_kernel = |p: &Program| {
            cuda::generate(p).map_err(|e| Error::Unsupported(format!("{label}: program {}: {e}", p.name)))
        };
        // Per step: a program kernel, or a contraction kernel (and the epilogue
        // as a program kernel when it is not fused or the tiled kernel does not
        // cover the node).
        let mut made: Vec<Made> = Vec::new();
        let mut uncovered = 0;
        for step in &lowered.steps {
            let c = match step {
                Step::Program(p) => {
                    made.push(Made::Program(p, program_kernel(p)?));
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
                            made.push(Made::Program(p, program_kernel(p)?));
                        }
                    }
                }
                Err(_) => {
                    uncovered += 1;
                    if let Some(p) = &c.epilogue {
                        made.push(Made::Program(p, program_kernel(p)?));
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
        let built = cuda::artifact::build(&kernels, None).map_err(|e| Error::Unavailable(format!("{label}: {e}")))?;
        let labels = |nodes: &[NodeId]| -> Vec<String> { nodes.iter().map(|&n| node_label(&optimized, n)).collect() };
        let entries = made
            .iter()
            .map(|m| match m {
                Made::Program(p, k) => cuda::artifact::manifest_entry(p, k, &labels(&p.nodes), &built.usage),
                Made::Contraction(k, nodes) => cuda::artifact::contraction_entry(k, &labels(nodes), &built.usage),
            })
            .collect();
        cuda::artifact::write(dir, &kernels, &built, entries).map_err(|e| Error::Write(e.to_string()))?;
        let model_path = dir.join("model.onnx");
        diamond_exporters::onnx::write_model(&optimized.ir, &model_path)
            .map_err(|e| Error::Write(format!("{}: {e}", model_path.display())))?;
        Ok(CudaArtifact {
            kernels: kernels.len(),
            contractions: made.iter().filter(|m| matches!(m, Made::Contraction(..))).count(),
            uncovered,
            fused_nodes: made
                .iter()
                .map(|m| match m {
                    Made::Program(p, _) => p.nodes.len(),
                    Made::Contraction(_, nodes) => nodes.len(),
                })
                .sum(),
            spills: built.usage.iter().filter(|u| u.spill_stores > 0 || u.spill_loads > 0).count(),
        })
    }
}
