//! Optionals: `Optional` wraps a value (present) or makes an empty one of a
//! stated type (absent); `OptionalHasElement` is known when presence is;
//! `OptionalGetElement` unwraps.

use super::facts::unknown;
use crate::rule::{ConstData, ConstValue, Defer, Facts, OpCtx, ValueKind};
use diamond_ir::term::{Basis, Dim, DimTerm, RowTerm, Size, SizeExpr};
use diamond_ir::types::{DimValue, TypeInfo, TypeValue};
use diamond_ir::{AttrValue, ElemType};

/// The facts a declared type states (kind, element shape and type).
fn facts_of_type(ctx: &mut OpCtx, ty: Option<&TypeInfo>) -> Facts {
    let Some(value) = ty.and_then(|t| t.value.as_ref()) else { return unknown(ctx) };
    match value {
        TypeValue::Tensor { elem, shape } | TypeValue::SparseTensor { elem, shape } => {
            let row = match shape {
                Some(s) => {
                    let dims = s
                        .dims
                        .iter()
                        .map(|d| match &d.value {
                            Some(DimValue::Known(n)) if *n >= 0 => ctx.known(*n as u64),
                            Some(DimValue::Param(p)) if !p.is_empty() => DimTerm::Dim(Dim {
                                size: Size::Symbolic(Box::new(SizeExpr::symbol(p))),
                                basis: Basis::Default,
                            }),
                            _ => ctx.unknown_dim(),
                        })
                        .collect();
                    RowTerm::closed(dims)
                }
                None => ctx.unknown_row(),
            };
            let mut f = Facts::tensor(row, elem.filter(|t| *t != ElemType::Undefined));
            if matches!(value, TypeValue::SparseTensor { .. }) {
                f.kind = ValueKind::SparseTensor;
            }
            f
        }
        TypeValue::Sequence(inner) => {
            let mut f = facts_of_type(ctx, inner.as_deref());
            f.kind = ValueKind::Sequence(Box::new(f.kind.clone()));
            f
        }
        TypeValue::Optional(inner) => {
            let mut f = facts_of_type(ctx, inner.as_deref());
            f.kind = ValueKind::Optional(Box::new(f.kind.clone()));
            f
        }
        TypeValue::Map { .. } | TypeValue::Opaque { .. } => unknown(ctx),
    }
}

/// `Optional`: the input wrapped (present), or an empty optional of the `type` attribute.
pub(crate) fn optional(ctx: &mut OpCtx) -> Result<(), Defer> {
    if ctx.has_input(0) {
        let f = ctx.facts(0).unwrap_or_else(|| unknown(ctx));
        let kind = ValueKind::Optional(Box::new(f.kind.clone()));
        ctx.set_facts(0, Facts { kind, present: Some(true), ..f });
        return Ok(());
    }
    let ty = match ctx.attr("type").and_then(|a| a.value()) {
        Some(AttrValue::Type(t)) => t,
        _ => {
            ctx.invalid("an Optional without input needs the type attribute");
            return Ok(());
        }
    };
    let inner = facts_of_type(ctx, Some(ty));
    let kind = ValueKind::Optional(Box::new(inner.kind.clone()));
    ctx.set_facts(0, Facts { kind, value: None, items: None, present: Some(false), ..inner });
    Ok(())
}

/// `OptionalHasElement`: a bool scalar, known when presence is (a plain
/// tensor or sequence, from opset 18, is present; a missing input is not).
pub(crate) fn optional_has_element(ctx: &mut OpCtx) -> Result<(), Defer> {
    let present = if !ctx.has_input(0) {
        Some(false)
    } else {
        match ctx.kind(0) {
            Some(ValueKind::Optional(_)) => ctx.facts(0).and_then(|f| f.present),
            Some(ValueKind::Unknown) | None => None,
            Some(_) => Some(true),
        }
    };
    match present {
        Some(b) => {
            ctx.set_value(0, ConstValue { dtype: ElemType::Bool, shape: Vec::new(), data: ConstData::Bools(vec![b]) })
        }
        None => {
            ctx.set_dims(0, Vec::new());
            ctx.set_dtype(0, ElemType::Bool);
        }
    }
    Ok(())
}

/// `OptionalGetElement`: the value inside (a plain tensor or sequence, from
/// opset 18, passes through).
pub(crate) fn optional_get_element(ctx: &mut OpCtx) -> Result<(), Defer> {
    let f = ctx.facts(0).unwrap_or_else(|| unknown(ctx));
    let f = match &f.kind {
        ValueKind::Optional(inner) => Facts { kind: (**inner).clone(), present: None, ..f.clone() },
        _ => f,
    };
    ctx.set_facts(0, f);
    Ok(())
}
