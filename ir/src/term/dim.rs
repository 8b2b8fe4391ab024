//! Dimensions, bases and dimension variables.
//!
//! `n_b` is a size with a basis. The claim-free unit `1_∅` ([`Dim::unit`]) is
//! the only dimension without a basis and the bottom of the broadcast order:
//! `d1 ⊑ d2` iff `d1 = 1_∅` or `d1 = d2`. Every other dimension, `1_default`
//! included, is an atom.

use super::size::Size;
use std::fmt;

/// What an axis means.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Basis {
    /// No claim at all: only `1_∅` has it.
    ClaimFree,
    /// A size written without a name.
    Default,
    /// A named tag (`rgb`, `heads`, an ONNX denotation such as `DATA_CHANNEL`).
    Named(Box<str>),
}

/// A dimension: a size with a basis.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dim {
    /// The size.
    pub size: Size,
    /// The basis.
    pub basis: Basis,
}

/// A dimension variable `α`: an unknown the solver may bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DimVar(pub u32);

/// A dimension term: known, or a variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DimTerm {
    /// A dimension.
    Dim(Dim),
    /// A dimension variable.
    Var(DimVar),
}

impl Dim {
    /// The claim-free unit `1_∅`, bottom of the broadcast order.
    pub fn unit() -> Dim {
        Dim { size: Size::Known(1), basis: Basis::ClaimFree }
    }

    /// `n_default`.
    pub fn known(n: u64) -> Dim {
        Dim { size: Size::Known(n), basis: Basis::Default }
    }

    /// Whether this is `1_∅`.
    pub fn is_unit(&self) -> bool {
        self.basis == Basis::ClaimFree
    }

    /// The broadcast order on dimensions: `self ⊑ other`.
    pub fn broadcasts_to(&self, other: &Dim) -> bool {
        self.is_unit() || self == other
    }

    /// The greatest lower bound: `d` for equal dimensions, `1_∅` otherwise.
    pub fn meet(&self, other: &Dim) -> Dim {
        if self == other {
            self.clone()
        } else {
            Dim::unit()
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.basis {
            Basis::ClaimFree => f.write_str("_"),
            Basis::Default => write!(f, "{}", self.size),
            Basis::Named(tag) => write!(f, "{}@{tag}", self.size),
        }
    }
}

impl fmt::Display for DimVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'d{}", self.0)
    }
}

impl fmt::Display for DimTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimTerm::Dim(d) => write!(f, "{d}"),
            DimTerm::Var(v) => write!(f, "{v}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(tag: &str, n: u64) -> Dim {
        Dim { size: Size::Known(n), basis: Basis::Named(tag.into()) }
    }

    #[test]
    fn only_the_claim_free_unit_broadcasts() {
        let dims = [Dim::unit(), Dim::known(1), Dim::known(3), named("rgb", 3), named("mono", 1)];
        for a in &dims {
            for b in &dims {
                let expected = a.is_unit() || a == b;
                assert_eq!(a.broadcasts_to(b), expected, "{a} ⊑ {b}");
            }
        }
        assert!(!named("mono", 1).broadcasts_to(&named("rgb", 3)));
        assert!(!Dim::known(1).broadcasts_to(&Dim::known(3)));
    }

    #[test]
    fn distinct_atoms_meet_at_the_bottom() {
        assert_eq!(Dim::known(3).meet(&Dim::known(5)), Dim::unit());
        assert_eq!(Dim::known(3).meet(&Dim::known(3)), Dim::known(3));
        assert_eq!(format!("{} {} {}", Dim::unit(), Dim::known(4), named("rgb", 3)), "_ 4 3@rgb");
    }
}
