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

impl fmt::Display for RowVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

fn write_dims(f: &mut fmt::Formatter<'_>, dims: &[DimTerm]) -> fmt::Result {
    for (i, d) in dims.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{d}")?;
    }
    Ok(())
}

impl fmt::Display for RowTerm {
    /// Row notation: `[3, 4]` (closed, marker at the leading edge),
    /// `[2 <> 3, 4]` (closed, marker after the leading flank), `[2 <..r0> 3]`
    /// (open), `[..r0]` (a bare row variable).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        match self.var {
            None if self.leading.is_empty() => write_dims(f, &self.trailing)?,
            Some(v) if self.leading.is_empty() && self.trailing.is_empty() => write!(f, "..{v}")?,
            var => {
                write_dims(f, &self.leading)?;
                let marker = match var {
                    Some(v) => format!("<..{v}>"),
                    None => "<>".to_string(),
                };
                let before = if self.leading.is_empty() { "" } else { " " };
                let after = if self.trailing.is_empty() { "" } else { " " };
                write!(f, "{before}{marker}{after}")?;
                write_dims(f, &self.trailing)?;
            }
        }
        f.write_str("]")
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
