//! Kernel programs: the intermediate representation fused groups of graph
//! nodes are lowered to, which the execution backends run.
//!
//! A [`Program`] is an iteration space (axes with extents that are integers
//! or symbolic sizes bound when the fed shapes are known), operands that are
//! strided views of whole tensors (a stride 0 broadcasts; Transpose, Slice,
//! Expand and Reshape fold into the view rather than copy), an expression
//! body in SSA form ([`expr`]), reduction axes with combiners, and the
//! tensors written. A multi-phase reduction (Softmax: a max, then a sum of
//! exponentials, then the quotient) is one program whose reductions nest:
//! the executor sweeps the reduction axes once per nesting depth and writes
//! the full-space outputs in a last sweep.
//!
//! A [`LoweredModel`] is the main graph as a list of [`Step`]s: programs,
//! contractions (MatMul, Gemm, Conv) with the elementwise program that
//! follows them as their epilogue, and plain nodes the reference kernels
//! run. [`verify`] checks a program's consistency; [`print`](mod@print) writes the
//! stable text form `diamond lower --emit kernels` shows.

pub mod expr;
pub mod print;
pub mod program;
pub mod refusal;
pub mod verify;

pub use expr::{BinaryOp, Combiner, Inst, Instr, Level, UnaryOp};
pub use program::{Extent, Output, Program, View, ViewDim};
pub use refusal::{FallbackReason, Refusal};

use diamond_ir::NodeId;

/// A contraction node and the elementwise program applied to its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Contraction {
    /// Which operator.
    pub op: ContractionOp,
    /// The node.
    pub node: NodeId,
    /// The elementwise program that reads the node's result as one of its
    /// operands (bias, activation, residual, scale), when one was fused.
    pub epilogue: Option<Program>,
    /// The node's inputs as the shape analysis knows them (`None`: an
    /// omitted optional input; empty when some input's shape is unknown),
    /// for backends that generate code ahead of the fed shapes.
    pub inputs: Vec<Option<Declared>>,
    /// The node's result, when its shape is known.
    pub output: Option<Declared>,
}

/// A tensor a contraction reads or writes: its value, element type and
/// dims (symbolic where the model's sizes are).
#[derive(Clone, Debug, PartialEq)]
pub struct Declared {
    /// The graph value.
    pub value: String,
    /// Its element type.
    pub elem: diamond_ir::ElemType,
    /// Its dims.
    pub dims: Vec<Extent>,
}

/// The operators with a fast contraction kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum ContractionOp {
    MatMul,
    Gemm,
    Conv,
}

/// One step of a lowered graph.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A fused group.
    Program(Program),
    /// A contraction with its epilogue.
    Contraction(Contraction),
    /// A node the reference kernels run.
    Node(NodeId),
}

/// A main graph as steps in an order that respects every dependency.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoweredModel {
    /// The steps.
    pub steps: Vec<Step>,
    /// The nodes of an operator that fused groups compute which the
    /// lowering left as plain nodes, with why (a type the fused kernels
    /// lack, a shape not known before the run).
    pub unfused: Vec<Unfused>,
}

/// A node of a fusible operator left out of the fused groups.
#[derive(Clone, Debug, PartialEq)]
pub struct Unfused {
    /// The node.
    pub node: NodeId,
    /// Why.
    pub refusal: Refusal,
    /// Whether it computes floating-point values.
    pub float: bool,
}

impl LoweredModel {
    /// The programs, epilogues included.
    pub fn programs(&self) -> impl Iterator<Item = &Program> {
        self.steps.iter().filter_map(|s| match s {
            Step::Program(p) => Some(p),
            Step::Contraction(c) => c.epilogue.as_ref(),
            Step::Node(_) => None,
        })
    }
}
