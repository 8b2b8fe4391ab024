//! Rows with a broadcast marker, and row variables.
//!
//! A row is `l · ◇ · r`: a leading flank, the marker, a trailing flank. An open
//! row `l · ⟨ρ⟩ · r` has a row variable at the marker. Substituting
//! `ρ := l' · ⟨ρ'⟩ · r'` splices `l'` inside `l` and `r'` inside `r`
//! ([`RowTerm::splice`]): rank grows only at the marker.

use super::dim::DimTerm;
use std::fmt;

/// A row variable `ρ`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowVar(pub u32);

/// A row term: flanks around a closed marker or a row variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowTerm {
    /// The leading flank, outermost first.
    pub leading: Vec<DimTerm>,
    /// The row variable at the marker; `None` for a closed row.
    pub var: Option<RowVar>,
    /// The trailing flank, outermost last.
    pub trailing: Vec<DimTerm>,
}

impl RowTerm {
    /// The closed row `[] ◇ dims` — how a NumPy-broadcasting operand of known
    /// rank looks (marker at the leading edge).
    pub fn closed(dims: Vec<DimTerm>) -> RowTerm {
        RowTerm { leading: Vec::new(), var: None, trailing: dims }
    }

    /// The open row `[] ⟨var⟩ dims`.
    pub fn open(var: RowVar, dims: Vec<DimTerm>) -> RowTerm {
        RowTerm { leading: Vec::new(), var: Some(var), trailing: dims }
    }

    /// The number of axes in the flanks (the rank, for a closed row).
    pub fn flank_len(&self) -> usize {
        self.leading.len() + self.trailing.len()
    }

    /// Replaces this row's variable by `value`: `value.leading` joins the inner
    /// side of the leading flank, `value.trailing` the inner side of the
    /// trailing flank, and `value`'s own variable (if any) becomes the marker.
    /// A closed row is returned unchanged.
    pub fn splice(&self, value: &RowTerm) -> RowTerm {
        if self.var.is_none() {
            return self.clone();
        }
        let leading = self.leading.iter().chain(&value.leading).cloned().collect();
        let trailing = value.trailing.iter().chain(&self.trailing).cloned().collect();
        RowTerm { leading, var: value.var, trailing }
    }
}

impl RowTerm {
    /// The broadcast order on variable-free rows: `self ⊑ other` iff the
    /// flanks fit (`|l1| ≤ |l2|`, `|r1| ≤ |r2|`) and `self`, widened by
    /// claim-free units at its marker, broadcasts pointwise to `other`.
    /// `None` when either row has a variable.
    pub fn broadcasts_to(&self, other: &RowTerm) -> Option<bool> {
        if self.var.is_some() || other.var.is_some() {
            return None;
        }
        let ground = |t: &DimTerm| match t {
            DimTerm::Dim(d) => Some(d.clone()),
            DimTerm::Var(_) => None,
        };
        let (l1, r1) = (self.leading.len(), self.trailing.len());
        let (l2, r2) = (other.leading.len(), other.trailing.len());
        if l1 > l2 || r1 > r2 {
            return Some(false);
        }
        let lead = self.leading.iter().zip(&other.leading);
        let trail = self.trailing.iter().zip(&other.trailing[r2 - r1..]);
        for (a, b) in lead.chain(trail) {
            if !ground(a)?.broadcasts_to(&ground(b)?) {
                return Some(false);
            }
        }
        Some(true)
    }

    /// Whether the row has no variable at all.
    pub fn is_ground(&self) -> bool {
        self.var.is_none() && self.leading.iter().chain(&self.trailing).all(|d| matches!(d, DimTerm::Dim(_)))
    }
}

impl fmt::Display for RowVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// Writes a row in row notation — `[3, 4]` (closed, marker at the leading
/// edge), `[2 <> 3, 4]`, `[2 <..r> 3]` (open), `[..r]` (a bare row variable) —
/// for any kind of dimension and any way of naming the row variable. The one
/// printer behind every row display, so that all of them parse back alike.
pub fn write_row<W, D, V>(out: &mut W, leading: &[D], var: Option<V>, trailing: &[D]) -> fmt::Result
where
    W: fmt::Write,
    D: fmt::Display,
    V: fmt::Display,
{
    fn dims<W: fmt::Write, D: fmt::Display>(out: &mut W, dims: &[D]) -> fmt::Result {
        for (i, d) in dims.iter().enumerate() {
            if i > 0 {
                out.write_str(", ")?;
            }
            write!(out, "{d}")?;
        }
        Ok(())
    }
    out.write_str("[")?;
    match var {
        None if leading.is_empty() => dims(out, trailing)?,
        Some(v) if leading.is_empty() && trailing.is_empty() => write!(out, "..{v}")?,
        var => {
            dims(out, leading)?;
            if !leading.is_empty() {
                out.write_str(" ")?;
            }
            match var {
                Some(v) => write!(out, "<..{v}>")?,
                None => out.write_str("<>")?,
            }
            if !trailing.is_empty() {
                out.write_str(" ")?;
            }
            dims(out, trailing)?;
        }
    }
    out.write_str("]")
}

impl fmt::Display for RowTerm {
    /// Row notation (see [`write_row`]), variables by id (`r0`, `'d3`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_row(f, &self.leading, self.var, &self.trailing)
    }
}

#[cfg(test)]
mod tests {
    use super::super::dim::Dim;
    use super::*;

    fn d(n: u64) -> DimTerm {
        DimTerm::Dim(Dim::known(n))
    }

    #[test]
    fn the_seed_worked_example_holds() {
        let sub = RowTerm { leading: vec![d(3)], var: None, trailing: vec![d(4)] };
        let sup = RowTerm { leading: vec![d(3)], var: None, trailing: vec![d(5), d(4)] };
        assert_eq!(sub.broadcasts_to(&sup), Some(true));
        assert_eq!(sup.broadcasts_to(&sub), Some(false));
        let empty = RowTerm::closed(vec![]);
        assert_eq!(empty.broadcasts_to(&sup), Some(true));
    }

    #[test]
    fn splicing_grows_the_row_at_the_marker() {
        let host = RowTerm { leading: vec![d(1)], var: Some(RowVar(0)), trailing: vec![d(4)] };
        let value = RowTerm { leading: vec![d(2)], var: Some(RowVar(1)), trailing: vec![d(3)] };
        let spliced = host.splice(&value);
        assert_eq!(spliced.to_string(), "[1, 2 <..r1> 3, 4]");
        let closed = spliced.splice(&RowTerm::closed(vec![d(5)]));
        assert_eq!(closed.to_string(), "[1, 2 <> 5, 3, 4]");
        assert_eq!(closed.flank_len(), 5);
        assert_eq!(RowTerm::closed(vec![d(3), d(4)]).to_string(), "[3, 4]");
        assert_eq!(RowTerm::open(RowVar(2), vec![]).to_string(), "[..r2]");
        assert_eq!(RowTerm::open(RowVar(2), vec![d(3)]).to_string(), "[<..r2> 3]");
    }
}
