//! `If` branches on the fast path: each branch a run takes is prepared once
//! as a [`Session`] of its own and run prepared, not interpreted.
//!
//! A branch is a graph that reads values of the graph around it by name.
//! `branch_model` makes it a model of its own: the outer values it reads
//! that are initializers become its initializers (copied once), the others
//! its inputs, typed with the shapes this run has. The session's
//! [`PrepareBody`] hook (set by the caller, which owns the optimizer and
//! the lowering) optimizes and lowers that model; a `PreparedBranch`
//! keeps the model and its session, and is prepared again only when the
//! shapes of what the branch reads change. A branch that cannot be
//! prepared (it reads a sequence or map, the hook refuses it) runs on the
//! reference executor, reported as a fallback.

use super::fallback::{FallbackReason, Refusal};
use super::session::Session;
use crate::kernel::LoweredModel;
use crate::plan::Fed;
use crate::tensor::Value;
use diamond_ir::{
    DimDecl, DimValue, Graph, GraphId, GraphOwner, Model, Tensor as IrTensor, TensorShape, TypeInfo, TypeValue,
    ValueInfo,
};
use std::collections::HashSet;
use std::sync::Arc;

/// Optimizes and lowers a control-flow body made a model of its own: the
/// model the body's session runs, and its lowering; `None` to leave the
/// body to the reference executor.
pub type PrepareBody = Arc<dyn Fn(&Model) -> Option<(Model, LoweredModel)> + Send + Sync>;

/// A branch prepared for the shapes it was last run with.
pub(crate) struct PreparedBranch {
    /// Declared before `model`, which it borrows: dropped first.
    pub(crate) session: Session<'static>,
    /// The branch as a model, boxed so that its address stays put.
    _model: Box<Model>,
    /// The outer values fed to it each run, with the shapes it was prepared for.
    pub(crate) fed: Vec<(String, Fed)>,
}

impl PreparedBranch {
    /// Prepares branch `gid` of `model` for the outer values `dynamic`
    /// (read each run) and `constants` (initializers, copied in).
    pub(crate) fn new(
        model: &Model,
        gid: GraphId,
        dynamic: &[(String, &Value)],
        constants: Vec<IrTensor>,
        prepare: &PrepareBody,
        options: &super::Options,
    ) -> Result<PreparedBranch, Refusal> {
        let sub = branch_model(model, gid, dynamic, constants)?;
        let (prepared, lowered) = prepare(&sub).ok_or_else(|| {
            Refusal::new(FallbackReason::Operator, "the branch could not be optimized and lowered on its own")
        })?;
        let boxed = Box::new(prepared);
        // SAFETY: the model lives on the heap in `_model` for as long as the
        // session borrowing it (dropped first, being declared first), and is
        // never moved out or changed.
        let model_ref: &'static Model = unsafe { &*(boxed.as_ref() as *const Model) };
        let fed: Vec<(String, Fed)> = dynamic.iter().map(|(n, v)| (n.clone(), Fed::of(v))).collect();
        let session = Session::new(model_ref, &lowered, &fed, options)
            .map_err(|e| Refusal::new(FallbackReason::Operator, format!("the branch cannot be prepared: {e}")))?;
        Ok(PreparedBranch { session, _model: boxed, fed })
    }
}

/// Branch `gid` of `model` as a model of its own: `dynamic` (outer values
/// read each run) its inputs, typed with the shapes they have, and
/// `constants` its initializers. Graphs nested in the branch keep their
/// ids; the model's other graphs are left empty.
fn branch_model(
    model: &Model,
    gid: GraphId,
    dynamic: &[(String, &Value)],
    constants: Vec<IrTensor>,
) -> Result<Model, Refusal> {
    let mut kept: HashSet<GraphId> = HashSet::new();
    let mut stack = vec![gid];
    while let Some(g) = stack.pop() {
        if kept.insert(g) {
            stack.extend(model.graphs[g].nodes.values().flat_map(|n| n.subgraphs()));
        }
    }
    let mut graphs = diamond_ir::entity::Arena::new();
    for (id, graph) in model.graphs.iter() {
        let copy = if kept.contains(&id) { graph.clone() } else { Graph::new(GraphOwner::Detached) };
        let pushed = graphs.push(copy);
        debug_assert!(pushed == id, "the arena hands out ids in order");
    }
    let branch: &mut Graph = &mut graphs[gid];
    branch.owner = GraphOwner::Main;
    if !branch.inputs.is_empty() {
        return Err(Refusal::new(FallbackReason::Operator, "the graph has inputs of its own (not an If branch)"));
    }
    for (name, value) in dynamic {
        let Value::Tensor(t) = value else {
            return Err(Refusal::new(
                FallbackReason::OperandType,
                format!("the branch reads '{name}', a {}, which a prepared branch does not take", value.kind()),
            ));
        };
        let dims = t.shape.iter().map(|&d| DimDecl { value: Some(DimValue::Known(d as i64)), denotation: None });
        let ty = TypeInfo {
            value: Some(TypeValue::Tensor { elem: Some(t.elem()), shape: Some(TensorShape { dims: dims.collect() }) }),
            denotation: None,
        };
        let value = Some(branch.intern(name));
        branch.inputs.push(ValueInfo { value, ty: Some(ty), ..ValueInfo::default() });
    }
    branch.initializers.extend(constants);
    Ok(Model {
        ir_version: model.ir_version,
        opset_imports: model.opset_imports.clone(),
        graph: Some(gid),
        functions: model.functions.clone(),
        graphs,
        ..Model::default()
    })
}
