//! The rules, one file per constraint family: dimensions, rows, arithmetic
//! (total elements, affine sizes, sums).

mod arith;
mod dims;
mod rows;

use diamond_ir::term::{Dim, DimTerm, RowTerm};

/// The greatest row below both `a` and `b` in the broadcast order: flanks
/// aligned from the outer edges, each kept to the shorter length, pointwise
/// meets (equal terms stay, anything else meets at `_`).
pub(crate) fn meet_rows(a: &RowTerm, b: &RowTerm) -> RowTerm {
    let meet = |x: &DimTerm, y: &DimTerm| if x == y { x.clone() } else { DimTerm::Dim(Dim::unit()) };
    let lead = a.leading.len().min(b.leading.len());
    let trail = a.trailing.len().min(b.trailing.len());
    let leading = (0..lead).map(|i| meet(&a.leading[i], &b.leading[i])).collect();
    let trailing = (0..trail)
        .map(|i| {
            let (x, y) = (&a.trailing[a.trailing.len() - trail + i], &b.trailing[b.trailing.len() - trail + i]);
            meet(x, y)
        })
        .collect();
    RowTerm { leading, var: None, trailing }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(n: u64) -> DimTerm {
        DimTerm::Dim(Dim::known(n))
    }

    #[test]
    fn meets_align_from_the_outer_edges() {
        let a = RowTerm::closed(vec![d(2), d(3), d(4)]);
        let b = RowTerm::closed(vec![d(5), d(4)]);
        assert_eq!(meet_rows(&a, &b).to_string(), "[_, 4]");
        assert_eq!(meet_rows(&a, &a), a);
    }
}
