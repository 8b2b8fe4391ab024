//! Declared types (`TypeProto` claims) turned into facts: the rows and
//! element types of graph inputs, and of `value_info`/outputs when inference
//! has nothing better.

use super::claims::{classify, DeclaredDim};
use crate::rule::{expr_dim, size_dim, Facts, ValueKind};
use crate::solver::Solver;
use diamond_ir::input_dims::is_open;
use diamond_ir::term::{Basis, Dim, DimTerm, RowTerm, Size, SizeExpr};
use diamond_ir::types::{DimValue, TensorShape, TypeInfo, TypeValue};
use std::collections::HashSet;

/// Where a declaration comes from, which decides what its `dim_param`s mean.
#[derive(Clone, Copy)]
pub enum Declared<'a> {
    /// A graph input: every `dim_param` is a rigid symbol. The slice holds,
    /// per axis, what an axis the file leaves open stands for
    /// ([`diamond_ir::InputDims`]: a rigid symbol of its own, `x.2`, or what
    /// an earlier pass found it specialized to); it is empty for the inputs
    /// of subgraphs, whose open axes are opaque variables.
    Input(&'a [Option<Dim>]),
    /// `value_info` or a graph output: a `dim_param` is a size over these
    /// input symbols, or a name the exporter made up (an unknown).
    Claim(&'a HashSet<String>),
}

/// The row a declared shape states: `dim_value`s as sizes, `dim_param`s as
/// rigid symbols (or, in a claim, sizes over them; invented names are
/// unknowns), a main-graph input's open axes as what [`Declared::Input`]
/// gives for them, other missing dims as opaque variables. A dim's `denotation`
/// (`DATA_CHANNEL`, ...) is its basis, except on a size 1 that is the
/// claim-free unit (without `--strict-units`).
pub fn shape_row(solver: &mut Solver, shape: &TensorShape, strict_units: bool, from: Declared<'_>) -> RowTerm {
    let dims = shape
        .dims
        .iter()
        .enumerate()
        .map(|(axis, d)| {
            let open = match from {
                Declared::Input(open) => open.get(axis).cloned().flatten(),
                Declared::Claim(_) => None,
            };
            let dim = match &d.value {
                _ if open.is_some() => open.expect("tested"),
                Some(DimValue::Known(n)) if *n >= 0 => size_dim(*n as u64, strict_units),
                Some(DimValue::Param(p)) if !is_open(d.value.as_ref()) => match from {
                    Declared::Input(_) => {
                        Dim { size: Size::Symbolic(Box::new(SizeExpr::symbol(p))), basis: Basis::Default }
                    }
                    Declared::Claim(symbols) => match classify(p, symbols) {
                        DeclaredDim::Size(n) => size_dim(n, strict_units),
                        DeclaredDim::Expr(e) => match expr_dim(e) {
                            Some(d) => d,
                            None => return DimTerm::Var(solver.fresh_opaque_dim()),
                        },
                        DeclaredDim::Unknown(_) => return DimTerm::Var(solver.fresh_opaque_dim()),
                    },
                },
                _ => return DimTerm::Var(solver.fresh_opaque_dim()),
            };
            DimTerm::Dim(with_denotation(dim, d.denotation.as_deref()))
        })
        .collect();
    RowTerm::closed(dims)
}

/// `dim` with the basis its ONNX denotation names, if any.
fn with_denotation(dim: Dim, denotation: Option<&str>) -> Dim {
    match denotation.map(str::trim) {
        Some(tag) if !tag.is_empty() && !dim.is_unit() => Dim { basis: Basis::Named(tag.into()), ..dim },
        _ => dim,
    }
}

/// Facts from a declared type: the kind, the (inner) shape and element type.
pub fn facts_from_type(solver: &mut Solver, ty: Option<&TypeInfo>, strict_units: bool, from: Declared<'_>) -> Facts {
    let unknown_row =
        |solver: &mut Solver| RowTerm { leading: vec![], var: Some(solver.fresh_opaque_row()), trailing: vec![] };
    let Some(value) = ty.and_then(|t| t.value.as_ref()) else {
        let mut f = Facts::tensor(unknown_row(solver), None);
        f.kind = ValueKind::Tensor;
        return f;
    };
    match value {
        TypeValue::Tensor { elem, shape } | TypeValue::SparseTensor { elem, shape } => {
            let row = match shape {
                Some(s) => shape_row(solver, s, strict_units, from),
                None => unknown_row(solver),
            };
            let mut f = Facts::tensor(row, elem.filter(|e| *e != diamond_ir::ElemType::Undefined));
            if matches!(value, TypeValue::SparseTensor { .. }) {
                f.kind = ValueKind::SparseTensor;
            }
            f
        }
        TypeValue::Sequence(inner) => {
            let mut f = facts_from_type(solver, inner.as_deref(), strict_units, from);
            f.kind = ValueKind::Sequence(Box::new(f.kind.clone()));
            f
        }
        TypeValue::Optional(inner) => {
            let mut f = facts_from_type(solver, inner.as_deref(), strict_units, from);
            f.kind = ValueKind::Optional(Box::new(f.kind.clone()));
            f
        }
        TypeValue::Map { key, value } => {
            let mut f = facts_from_type(solver, value.as_deref(), strict_units, from);
            f.kind = ValueKind::Map(key.unwrap_or(diamond_ir::ElemType::Undefined), Box::new(f.kind.clone()));
            f
        }
        TypeValue::Opaque { .. } => {
            let mut f = Facts::tensor(unknown_row(solver), None);
            f.kind = ValueKind::Unknown;
            f
        }
    }
}

/// Whether a declared type states a tensor shape (the rank at least).
pub fn states_shape(ty: Option<&TypeInfo>) -> bool {
    match ty.and_then(|t| t.value.as_ref()) {
        Some(TypeValue::Tensor { shape, .. }) | Some(TypeValue::SparseTensor { shape, .. }) => shape.is_some(),
        Some(TypeValue::Sequence(i)) | Some(TypeValue::Optional(i)) => states_shape(i.as_deref()),
        Some(TypeValue::Map { value, .. }) => states_shape(value.as_deref()),
        _ => false,
    }
}
