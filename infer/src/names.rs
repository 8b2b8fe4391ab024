//! Printing variables by the names the user gave them.
//!
//! Named variables come from `.rows` files (`'h`, `..r`); a template's fresh
//! variables are named after the row variable they grew from (`c.0`, `c.r`);
//! anything else prints as `'_7` / `.._3`. When two classes merge, the new
//! representative inherits a name, so looking up a representative suffices.

use diamond_ir::term::{write_row, DimTerm, DimVar, RowTerm, RowVar};
use rustc_hash::FxHashMap;

/// Variable names by variable id.
#[derive(Clone, Debug, Default)]
pub struct Names {
    pub(crate) dims: FxHashMap<u32, String>,
    pub(crate) rows: FxHashMap<u32, String>,
}

impl Names {
    /// The printed form of dimension variable `v` (a representative).
    pub fn dim(&self, v: DimVar) -> String {
        match self.dims.get(&v.0) {
            Some(name) => format!("'{name}"),
            None => format!("'_{}", v.0),
        }
    }

    /// The name of row variable `v` (a representative), without the `..`.
    fn row_name(&self, v: RowVar) -> String {
        match self.rows.get(&v.0) {
            Some(name) => name.clone(),
            None => format!("_{}", v.0),
        }
    }

    /// A dimension term in row notation.
    pub fn dim_term(&self, t: &DimTerm) -> String {
        match t {
            DimTerm::Dim(d) => d.to_string(),
            DimTerm::Var(v) => self.dim(*v),
        }
    }

    /// A row term in row notation: `[3, 4]`, `[2 <> 3]`, `[2 <..r> 3]`, `[..r]`.
    pub fn row(&self, r: &RowTerm) -> String {
        let dims = |ds: &[DimTerm]| ds.iter().map(|d| self.dim_term(d)).collect::<Vec<_>>();
        let mut out = String::new();
        let _ = write_row(&mut out, &dims(&r.leading), r.var.map(|v| self.row_name(v)), &dims(&r.trailing));
        out
    }
}
