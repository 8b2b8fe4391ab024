//! Shape facts the rewrites decide on, read from the analysis: known axis
//! sizes, symbolic sizes as size expressions (so that `8*seq` computed by
//! `Shape` arithmetic compares equal to the product of two axes), NumPy
//! broadcasting of inferred shapes, and the Expand target that widens one
//! inferred shape to another.

use crate::Analysis;
use diamond_infer::graph::DimReport;
use diamond_ir::term::SizeExpr;
use diamond_ir::{Model, ValueId};

/// A known size of a value's axis (negative from the end).
pub(super) fn known_dim(model: &Model, a: &Analysis, v: ValueId, axis: isize) -> Option<u64> {
    let shape = a.shape(model, v)?;
    let k = if axis < 0 { shape.len() as isize + axis } else { axis };
    match shape.get(usize::try_from(k).ok()?)? {
        DimReport::Known(n) => Some(*n),
        _ => None,
    }
}

/// The inferred shape of `v` with every dim known or symbolic, owned.
pub(super) fn shape_of(model: &Model, a: &Analysis, v: ValueId) -> Option<Vec<DimReport>> {
    a.shape(model, v).map(<[DimReport]>::to_vec)
}

/// A dim as a size expression.
pub(super) fn size_expr(d: &DimReport) -> Option<SizeExpr> {
    match d {
        DimReport::Known(n) => Some(SizeExpr::constant(i64::try_from(*n).ok()?)),
        DimReport::Symbolic(text) => SizeExpr::parse(text).ok(),
        DimReport::Unknown => None,
    }
}

/// The product of `dims` as a size expression.
pub(super) fn product(dims: &[&DimReport]) -> Option<SizeExpr> {
    dims.iter().try_fold(SizeExpr::constant(1), |acc, d| acc.mul(&size_expr(d)?))
}

/// The product of `dims` when all are known.
pub(super) fn known_product(dims: &[&DimReport]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, d| match d {
        DimReport::Known(n) => acc.checked_mul(*n),
        _ => None,
    })
}

/// Two dims that are the same size for every value of the symbols.
pub(super) fn same(p: &DimReport, q: &DimReport) -> bool {
    p == q || size_expr(p).zip(size_expr(q)).is_some_and(|(x, y)| x == y)
}

/// NumPy broadcasting of two inferred shapes; `None` when it depends on
/// symbol values (a symbolic dim against a different one).
pub(super) fn broadcast(p: &[DimReport], q: &[DimReport]) -> Option<Vec<DimReport>> {
    let rank = p.len().max(q.len());
    let at = |s: &[DimReport], i: usize| (i + s.len()).checked_sub(rank).map_or(DimReport::Known(1), |j| s[j].clone());
    (0..rank)
        .map(|i| {
            let (x, y) = (at(p, i), at(q, i));
            match (&x, &y) {
                _ if same(&x, &y) => Some(x),
                (DimReport::Known(1), _) => Some(y),
                (_, DimReport::Known(1)) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// How `Expand` widens `from` to `to`: `Some(None)` when they are the same
/// shape, `Some(Some(target))` with a target holding 1 where the dims
/// agree already and the known size where `from` has 1 (or lacks the
/// axis), `None` when `to` does not follow from `from` that way (or a
/// widened size is symbolic).
pub(super) fn expand_target(from: &[DimReport], to: &[DimReport]) -> Option<Option<Vec<i64>>> {
    if from.len() > to.len() {
        return None;
    }
    let lead = to.len() - from.len();
    let mut target = Vec::with_capacity(to.len());
    for (i, d) in to.iter().enumerate() {
        let f = i.checked_sub(lead).map(|j| &from[j]);
        match (f, d) {
            (Some(f), d) if same(f, d) => target.push(1),
            (None | Some(DimReport::Known(1)), DimReport::Known(n)) => target.push(i64::try_from(*n).ok()?),
            _ => return None,
        }
    }
    Some((lead > 0 || target.iter().any(|&t| t != 1)).then_some(target))
}

/// A dim as it reads in a note (`4`, `seq`).
pub(super) fn text(d: &DimReport) -> String {
    d.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(text: &[&str]) -> Vec<DimReport> {
        text.iter()
            .map(|t| match t.parse::<u64>() {
                Ok(n) => DimReport::Known(n),
                Err(_) => DimReport::Symbolic(t.to_string()),
            })
            .collect()
    }

    #[test]
    fn symbolic_sizes_compare_as_polynomials() {
        assert!(same(&DimReport::Symbolic("seq*batch".into()), &DimReport::Symbolic("batch*seq".into())));
        assert!(!same(&DimReport::Symbolic("batch".into()), &DimReport::Symbolic("seq".into())));
        let product = product(&[&DimReport::Symbolic("seq".into()), &DimReport::Known(8)]).unwrap();
        assert_eq!(product, SizeExpr::parse("8*seq").unwrap());
        assert_eq!(known_product(&[&DimReport::Known(3), &DimReport::Known(4)]), Some(12));
        assert_eq!(known_product(&[&DimReport::Known(3), &DimReport::Symbolic("b".into())]), None);
    }

    #[test]
    fn broadcasting_needs_ones_or_equal_sizes() {
        assert_eq!(broadcast(&dims(&["b", "1"]), &dims(&["4"])), Some(dims(&["b", "4"])));
        assert_eq!(broadcast(&dims(&["1", "8"]), &dims(&["b", "1", "1"])), Some(dims(&["b", "1", "8"])));
        // Which of two symbols wins depends on their values: no answer.
        assert_eq!(broadcast(&dims(&["b"]), &dims(&["s"])), None);
    }

    #[test]
    fn expand_targets_hold_ones_where_the_sizes_agree() {
        assert_eq!(expand_target(&dims(&["b", "1"]), &dims(&["b", "6"])), Some(Some(vec![1, 6])));
        assert_eq!(expand_target(&dims(&["b"]), &dims(&["3", "b"])), Some(Some(vec![3, 1])));
        // Adding a leading axis of 1 still takes an Expand.
        assert_eq!(expand_target(&dims(&["b"]), &dims(&["1", "b"])), Some(Some(vec![1, 1])));
        assert_eq!(expand_target(&dims(&["b", "4"]), &dims(&["b", "4"])), Some(None));
        // A symbolic size to widen to, or a size that is not 1, cannot be reached.
        assert_eq!(expand_target(&dims(&["1"]), &dims(&["s"])), None);
        assert_eq!(expand_target(&dims(&["2"]), &dims(&["4"])), None);
        assert_eq!(expand_target(&dims(&["b", "4"]), &dims(&["4"])), None);
    }
}
