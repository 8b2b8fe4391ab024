//! The rules, one file per constraint family: dimensions, rows, arithmetic
//! (total elements, affine sizes, sums).

mod arith;
mod dims;
mod rows;

use crate::interned::{D, R};
use crate::store::Store;
use smallvec::SmallVec;

/// The greatest row below both `a` and `b` in the broadcast order: flanks
/// aligned from the outer edges, each kept to the shorter length, pointwise
/// meets (equal terms stay, anything else meets at `_`).
pub(crate) fn meet_rows(store: &mut Store, a: R, b: R) -> R {
    let meet = |x: D, y: D| if x == y { x } else { D::UNIT };
    let (al, bl) = (store.leading(a), store.leading(b));
    let leading: SmallVec<[D; 8]> = al.iter().zip(bl).map(|(&x, &y)| meet(x, y)).collect();
    let (at, bt) = (store.trailing(a), store.trailing(b));
    let trail = at.len().min(bt.len());
    let trailing: SmallVec<[D; 8]> =
        at[at.len() - trail..].iter().zip(&bt[bt.len() - trail..]).map(|(&x, &y)| meet(x, y)).collect();
    store.alloc(&leading, None, &trailing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use diamond_ir::term::{Dim, DimTerm, RowTerm};

    fn d(n: u64) -> DimTerm {
        DimTerm::Dim(Dim::known(n))
    }

    #[test]
    fn meets_align_from_the_outer_edges() {
        let mut store = Store::default();
        let a = store.intern_row(&RowTerm::closed(vec![d(2), d(3), d(4)]));
        let b = store.intern_row(&RowTerm::closed(vec![d(5), d(4)]));
        let m = meet_rows(&mut store, a, b);
        assert_eq!(store.row_term(m).to_string(), "[_, 4]");
        let m = meet_rows(&mut store, a, a);
        assert_eq!(store.row_term(m), store.row_term(a));
    }
}
