//! Lowering: a model's fusion groups as kernel programs — what the SIMD
//! backend compiles and the CUDA backend generates C for — with the nodes
//! left to the reference kernels between them. [`Model::lower_kernels`]
//! gives them as text (`diamond lower --emit kernels`);
//! [`Model::lower_cuda`] (`cuda.rs`) builds the CUDA artifact a GPU
//! deployment picks up.

mod cuda;

use crate::error::{Error, Result};
use crate::model::Model;
use diamond_ir::NodeId;
use diamond_runtime::kernel::{print, LoweredModel, Step};

pub use cuda::CudaArtifact;

/// A model's fusion groups lowered to kernel programs.
pub struct Kernels<'m> {
    model: &'m Model,
    lowered: LoweredModel,
}

impl Model {
    /// Lowers the main graph's fusion groups to kernel programs (the model
    /// as it is: optimize it first for the groups the backends run).
    pub fn lower_kernels(&self) -> Result<Kernels<'_>> {
        let lowered = diamond_optimize::lower::lower(&self.ir)
            .ok_or_else(|| Error::Read(format!("{}: the model has no graph", self.label)))?;
        Ok(Kernels { model: self, lowered })
    }
}

impl Kernels<'_> {
    /// Every step in order: each program's text, each node left to the
    /// reference kernels as a line naming it.
    pub fn text(&self) -> String {
        print::lowered(&self.lowered, &|n| node_label(self.model, n))
    }

    /// Each program (a fused group's, or a contraction's epilogue) as its
    /// name and its text, in order.
    pub fn programs(&self) -> Vec<(String, String)> {
        self.lowered
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Program(p) => Some(p),
                Step::Contraction(c) => c.epilogue.as_ref(),
                Step::Node(_) => None,
            })
            .map(|p| (p.name.clone(), print::program(p, &|n| node_label(self.model, n))))
            .collect()
    }
}

/// `Add 'name'` for a main-graph node.
fn node_label(model: &Model, n: NodeId) -> String {
    let graph = model.graph();
    let node = &graph.nodes[n];
    format!("{} '{}'", node.op_type(), diamond_runtime::exec::node_label(graph, node))
}
