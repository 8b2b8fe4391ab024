//! A kernel program: an iteration space, strided operand views onto whole
//! tensors, an expression body, and the values it writes.
//!
//! The space is a list of axes whose extents are integers or size
//! expressions over the model's symbols (`batch`, `seq*4`), bound when the
//! fed shapes are known. Some axes may be reduction axes: a
//! [`super::Inst::Reduce`] combines over them, and what it yields is one
//! value per point of the other (outer) axes. Every operand and output is a
//! view: a tensor's dims and, per dim, the space axis it follows (or none:
//! a size-1 dim, or a dim held at a fixed index) with a start and a step,
//! so Transpose is a permutation of that map, Slice a start and step,
//! broadcasting an axis the view does not follow (stride 0), and Reshape a
//! different list of dims over the same contiguous elements.

use super::expr::{Inst, Instr, Level};
use diamond_ir::term::SizeExpr;
use diamond_ir::{ElemType, NodeId};
use std::fmt;

/// The extent of an axis or the size of a dim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A fixed size.
    Known(u64),
    /// A size expression over the model's symbols, in the solver's text form.
    Symbol(String),
}

impl Extent {
    /// The size once the symbols are bound (`None`: some symbol is not).
    pub fn eval(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<u64> {
        match self {
            Extent::Known(n) => Some(*n),
            Extent::Symbol(s) => {
                let v = match value_of(s) {
                    Some(v) => v,
                    None => SizeExpr::parse(s).ok()?.eval(value_of)?,
                };
                u64::try_from(v).ok()
            }
        }
    }
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Known(n) => write!(f, "{n}"),
            Extent::Symbol(s) => f.write_str(s),
        }
    }
}

/// How one dim of a viewed tensor is indexed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewDim {
    /// The space axis whose index it follows; `None`: it stays at `start`.
    pub axis: Option<usize>,
    /// The index at axis index 0.
    pub start: i64,
    /// The index step per step of the axis (negative: backwards).
    pub step: i64,
}

impl ViewDim {
    /// A dim following `axis` one to one.
    pub fn follow(axis: usize) -> ViewDim {
        ViewDim { axis: Some(axis), start: 0, step: 1 }
    }

    /// A size-1 dim (or one held at index 0).
    pub fn fixed() -> ViewDim {
        ViewDim { axis: None, start: 0, step: 1 }
    }
}

/// A tensor seen from the space: the named value, laid out densely in C
/// order over `dims`, indexed per dim as `view` says.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// The graph value.
    pub value: String,
    /// Its element type.
    pub elem: ElemType,
    /// The dims its elements are laid out over (a Reshape's dims when the
    /// view reads through one).
    pub dims: Vec<Extent>,
    /// Per dim, how the space indexes it.
    pub view: Vec<ViewDim>,
}

impl View {
    /// The space axes the view follows.
    pub fn axes(&self) -> impl Iterator<Item = usize> + '_ {
        self.view.iter().filter_map(|d| d.axis)
    }
}

/// A value the program writes: view `view` of a new tensor, from
/// instruction `source`.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// The tensor written, as a view (dims that follow no axis are size 1).
    pub view: View,
    /// The instruction whose values are written.
    pub source: usize,
}

/// A kernel program.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// A name for listings (`k3`).
    pub name: String,
    /// The iteration space.
    pub axes: Vec<Extent>,
    /// The reduction axes, increasing.
    pub reduce: Vec<usize>,
    /// The tensors read.
    pub operands: Vec<View>,
    /// The body.
    pub body: Vec<Instr>,
    /// The tensors written.
    pub outputs: Vec<Output>,
    /// The graph nodes the program computes, in graph order (a backend that
    /// cannot run the program runs these).
    pub nodes: Vec<NodeId>,
}

impl Program {
    /// How far each instruction varies.
    pub fn levels(&self) -> Vec<Level> {
        let mut levels = Vec::with_capacity(self.body.len());
        for ins in &self.body {
            let level = match ins.inst {
                Inst::Load(k) => match self.operands.get(k) {
                    Some(op) if op.axes().any(|a| self.reduce.contains(&a)) => Level::Full,
                    Some(op) if op.axes().next().is_some() => Level::Outer,
                    _ => Level::Uniform,
                },
                Inst::Const(_) => Level::Uniform,
                Inst::Reduce(_, a) => levels.get(a).copied().unwrap_or(Level::Uniform).min(Level::Outer),
                ref other => other
                    .args()
                    .iter()
                    .map(|&a| levels.get(a).copied().unwrap_or(Level::Uniform))
                    .max()
                    .unwrap_or(Level::Uniform),
            };
            levels.push(level);
        }
        levels
    }

    /// Per instruction, the number of reductions nested in it (a
    /// reduction of something that reads a reduction is depth 2): the
    /// executor sweeps the reduction axes once per depth.
    pub fn depths(&self) -> Vec<usize> {
        let mut depths: Vec<usize> = Vec::with_capacity(self.body.len());
        for ins in &self.body {
            let inner = ins.inst.args().iter().map(|&a| depths.get(a).copied().unwrap_or(0)).max().unwrap_or(0);
            depths.push(inner + usize::from(matches!(ins.inst, Inst::Reduce(..))));
        }
        depths
    }
}
