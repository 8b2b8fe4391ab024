//! Facts of values that flow through control flow: joining what two paths
//! may produce (the branches of an `If`, the iterations of a loop), widening
//! a loop's carried values until the body preserves them, and comparing
//! facts to detect that fixpoint.
//!
//! A join keeps what both sides agree on — equal dimensions, equal element
//! types, equal elements, sequence items of equal count — and makes the rest
//! unknown: a differing dimension becomes `unknown_dim()`, a differing rank an
//! unknown row. An empty sequence or an absent optional has no elements, so
//! its element shape constrains nothing and the other side's is taken.

use crate::rule::{Facts, OpCtx, ValueKind};
use diamond_ir::term::{Basis, Dim, DimTerm, DimVar, RowTerm, RowVar};
use std::collections::HashSet;

/// The dimension and row variables a join made for what differed: they
/// stand for "anything", so a later join keeps them as they are.
#[derive(Default)]
pub(crate) struct Tops {
    dims: HashSet<DimVar>,
    rows: HashSet<RowVar>,
}

impl Tops {
    /// A dimension nothing determines, remembered as "anything".
    fn dim(&mut self, ctx: &mut OpCtx) -> DimTerm {
        let d = ctx.unknown_dim();
        if let DimTerm::Var(v) = d {
            self.dims.insert(v);
        }
        d
    }

    /// A row nothing determines, remembered as "anything".
    fn row(&mut self, ctx: &mut OpCtx) -> RowTerm {
        let r = ctx.unknown_row();
        if let Some(v) = r.var {
            self.rows.insert(v);
        }
        r
    }

    /// Whether `d` (resolved) is one of the "anything" dimensions.
    fn is_top_dim(&self, d: &DimTerm) -> bool {
        matches!(d, DimTerm::Var(v) if self.dims.contains(v))
    }

    /// Whether `r` (resolved) is one of the "anything" rows.
    fn is_top_row(&self, r: &RowTerm) -> bool {
        r.leading.is_empty() && r.trailing.is_empty() && r.var.is_some_and(|v| self.rows.contains(&v))
    }
}

/// `row` with every dimension resolved as far as known now. A row variable
/// stays as it is: `OpCtx` resolves only its inputs' rows, so a subgraph
/// output's row is seen through its dimensions only when it is closed.
pub(crate) fn resolve_row(ctx: &mut OpCtx, row: &RowTerm) -> RowTerm {
    ctx.resolve_row(row)
}

/// The dimensions of `row` when its rank is known (resolving them).
pub(crate) fn closed_dims(ctx: &mut OpCtx, row: &RowTerm) -> Option<Vec<DimTerm>> {
    let r = resolve_row(ctx, row);
    if r.var.is_some() {
        return None;
    }
    let mut dims = r.leading;
    dims.extend(r.trailing);
    Some(dims)
}

/// The facts of a scalar tensor of type `t`, with elements `value` when known.
pub(crate) fn scalar(t: diamond_ir::ElemType, value: Option<crate::rule::ConstValue>) -> Facts {
    let mut f = Facts::tensor(RowTerm::closed(Vec::new()), Some(t));
    f.value = value.map(std::sync::Arc::new);
    f
}

/// Facts of an unknown value (any kind, any shape).
pub(crate) fn unknown(ctx: &mut OpCtx) -> Facts {
    let mut f = Facts::tensor(ctx.unknown_row(), None);
    f.kind = ValueKind::Unknown;
    f
}

/// Whether `f` holds no elements at all: an empty sequence, an absent optional.
fn is_vacuous(f: &Facts) -> bool {
    match &f.kind {
        ValueKind::Sequence(_) => f.items.as_ref().is_some_and(Vec::is_empty),
        ValueKind::Optional(_) => f.present == Some(false),
        _ => false,
    }
}

/// The join of two dimensions: equal ones kept, `tops` kept, others unknown.
fn join_dim(ctx: &mut OpCtx, tops: &mut Tops, a: &DimTerm, b: &DimTerm) -> DimTerm {
    let a = ctx.resolve(a);
    let b = ctx.resolve(b);
    if a == b || tops.is_top_dim(&a) {
        return a;
    }
    match (&a, &b) {
        (DimTerm::Dim(x), DimTerm::Dim(y)) if x.size == y.size => {
            // Same size, different claims: the unit if either side is, else a plain size.
            let basis = if x.is_unit() || y.is_unit() { Basis::ClaimFree } else { Basis::Default };
            DimTerm::Dim(Dim { size: x.size.clone(), basis })
        }
        _ => tops.dim(ctx),
    }
}

/// The join of two rows: same rank gives the per-axis join, else an unknown row.
pub(crate) fn join_row(ctx: &mut OpCtx, tops: &mut Tops, a: &RowTerm, b: &RowTerm) -> RowTerm {
    let ra = resolve_row(ctx, a);
    let rb = resolve_row(ctx, b);
    if ra == rb || tops.is_top_row(&ra) {
        return ra;
    }
    match (closed_dims(ctx, &ra), closed_dims(ctx, &rb)) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            let dims = x.iter().zip(&y).map(|(p, q)| join_dim(ctx, tops, p, q)).collect();
            RowTerm::closed(dims)
        }
        _ => tops.row(ctx),
    }
}

/// The join of two kinds: equal kinds kept, otherwise unknown.
fn join_kind(a: &ValueKind, b: &ValueKind) -> ValueKind {
    if a == b {
        a.clone()
    } else {
        ValueKind::Unknown
    }
}

/// The join of everything known about two values.
pub(crate) fn join_facts(ctx: &mut OpCtx, tops: &mut Tops, a: &Facts, b: &Facts) -> Facts {
    let kind = join_kind(&a.kind, &b.kind);
    // An empty sequence / absent optional says nothing about element shapes.
    let (row, dtype) = if kind != ValueKind::Unknown && is_vacuous(a) && !is_vacuous(b) {
        (resolve_row(ctx, &b.row), b.dtype.or(a.dtype).filter(|t| a.dtype.is_none_or(|u| u == *t)))
    } else if kind != ValueKind::Unknown && is_vacuous(b) && !is_vacuous(a) {
        (resolve_row(ctx, &a.row), a.dtype.or(b.dtype).filter(|t| b.dtype.is_none_or(|u| u == *t)))
    } else {
        (join_row(ctx, tops, &a.row, &b.row), if a.dtype == b.dtype { a.dtype } else { None })
    };
    let value = match (&a.value, &b.value) {
        (Some(x), Some(y)) if x == y => Some(x.clone()),
        _ => None,
    };
    let items = match (&a.items, &b.items) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            Some(x.iter().zip(y).map(|(p, q)| join_facts(ctx, tops, p, q)).collect())
        }
        _ => None,
    };
    let present = if a.present == b.present { a.present } else { None };
    Facts { kind, row, dtype, value, items, present }
}

/// Whether two facts say the same (rows compared as resolved terms).
pub(crate) fn same_facts(ctx: &mut OpCtx, a: &Facts, b: &Facts) -> bool {
    if a.kind != b.kind || a.dtype != b.dtype || a.present != b.present || a.value != b.value {
        return false;
    }
    if resolve_row(ctx, &a.row) != resolve_row(ctx, &b.row) {
        return false;
    }
    match (&a.items, &b.items) {
        (None, None) => true,
        (Some(x), Some(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_facts(ctx, p, q)),
        _ => false,
    }
}

/// The element facts of a sequence (or the inner facts of an optional): a
/// tensor (or whatever the inner kind is) with the container's shape and type.
pub(crate) fn element_of(f: &Facts) -> Facts {
    let kind = match &f.kind {
        ValueKind::Sequence(k) | ValueKind::Optional(k) => (**k).clone(),
        _ => ValueKind::Unknown,
    };
    Facts { kind, row: f.row.clone(), dtype: f.dtype, value: None, items: None, present: None }
}
