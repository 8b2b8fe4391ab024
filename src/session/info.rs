//! [`ValueInfo`]: what a session says about each of its inputs and outputs
//! — the element type and shape the file declares, and those the checker
//! infers (an exporter often leaves output shapes out, or writes `unk__3`
//! where the checker knows `batch`).

use diamond_infer::graph::DimReport;
use diamond_infer::CheckReport;
use diamond_ir::{DimValue, ElemType, Graph, ValueId};

/// One axis of a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Known(u64),
    /// A symbol (`batch`) or an expression over symbols (`2*seq`).
    Symbol(String),
    /// Not stated (declared) or not determined (inferred).
    Unknown,
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// An input or output of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueInfo {
    /// The graph value's name (what a feed or an output is keyed by).
    pub name: String,
    /// The element type the file declares, if it declares one.
    pub declared_elem: Option<ElemType>,
    /// The shape the file declares; `None` when it states no rank.
    pub declared_shape: Option<Vec<Dim>>,
    /// The element type the checker infers.
    pub elem: Option<ElemType>,
    /// The shape the checker infers; `None` when even the rank is unknown.
    pub shape: Option<Vec<Dim>>,
}

/// Each of `values` (main-graph values), with its declaration in `graph`
/// (`declared` finds it) and its entry in `report`.
pub(crate) fn describe<'g>(
    graph: &Graph,
    values: impl Iterator<Item = (ValueId, Option<&'g diamond_ir::TypeInfo>)>,
    report: &CheckReport,
) -> Vec<ValueInfo> {
    values
        .map(|(id, ty)| {
            let name = graph.value_name(id).to_string();
            let (declared_elem, declared_shape) = match ty.and_then(|t| t.as_tensor()) {
                Some((elem, shape)) => {
                    (elem, shape.map(|s| s.dims.iter().map(|d| declared_dim(d.value.as_ref())).collect()))
                }
                None => (None, None),
            };
            let inferred = report.values.iter().find(|v| v.value == Some(id));
            let elem = inferred.and_then(|v| v.dtype).or(declared_elem);
            let shape = inferred
                .and_then(|v| v.shape.as_ref())
                .map(|dims| dims.iter().map(inferred_dim).collect())
                .or_else(|| declared_shape.clone());
            ValueInfo { name, declared_elem, declared_shape, elem, shape }
        })
        .collect()
}

fn declared_dim(value: Option<&DimValue>) -> Dim {
    match value {
        Some(DimValue::Known(n)) if *n >= 0 => Dim::Known(*n as u64),
        Some(DimValue::Param(p)) if !p.is_empty() => Dim::Symbol(p.clone()),
        _ => Dim::Unknown,
    }
}

fn inferred_dim(dim: &DimReport) -> Dim {
    match dim {
        DimReport::Known(n) => Dim::Known(*n),
        DimReport::Symbolic(s) => Dim::Symbol(s.clone()),
        DimReport::Unknown => Dim::Unknown,
    }
}
