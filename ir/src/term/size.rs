//! Sizes and symbolic size expressions in normal form.
//!
//! A [`SizeExpr`] is an integer polynomial over rigid symbols: a map from
//! monomials (sorted multisets of atoms) to non-zero coefficients. Because the
//! map is ordered, two expressions that are equal as polynomials are equal as
//! values (`2*b*s` = `s*b*2`) and print identically. Floor/ceil division by a
//! positive constant, `min` and `max` enter as atoms over normalized operands.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A size: a known positive number, or an expression over rigid symbols.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Size {
    /// A number.
    Known(u64),
    /// An expression with at least one symbol (boxed: rare, and it keeps
    /// every dimension term small).
    Symbolic(Box<SizeExpr>),
}

/// An atom of a monomial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Atom {
    Symbol(String),
    FloorDiv(Box<SizeExpr>, u64),
    CeilDiv(Box<SizeExpr>, u64),
    Min(Vec<SizeExpr>),
    Max(Vec<SizeExpr>),
}

/// A polynomial over rigid symbols with integer coefficients, in normal form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SizeExpr {
    /// Monomial (sorted atoms, empty for the constant) to non-zero coefficient;
    /// shared, so that copying a dimension copies no polynomial (an expression
    /// is never changed in place: arithmetic builds a new one).
    pub(super) terms: Arc<BTreeMap<Vec<Atom>, i64>>,
}

impl SizeExpr {
    /// The constant `n`.
    pub fn constant(n: i64) -> SizeExpr {
        SizeExpr::from_monomial(Vec::new(), n)
    }

    /// The rigid symbol `name`.
    pub fn symbol(name: &str) -> SizeExpr {
        SizeExpr::from_monomial(vec![Atom::Symbol(name.to_string())], 1)
    }

    pub(super) fn from_monomial(atoms: Vec<Atom>, coefficient: i64) -> SizeExpr {
        let mut terms = BTreeMap::new();
        if coefficient != 0 {
            terms.insert(atoms, coefficient);
        }
        SizeExpr { terms: Arc::new(terms) }
    }

    /// The value when the expression has no symbols.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// `self + other`; `None` on overflow.
    pub fn add(&self, other: &SizeExpr) -> Option<SizeExpr> {
        if other.terms.is_empty() {
            return Some(self.clone());
        }
        let mut terms = (*self.terms).clone();
        for (monomial, &c) in other.terms.iter() {
            let sum = terms.get(monomial).copied().unwrap_or(0).checked_add(c)?;
            if sum == 0 {
                terms.remove(monomial);
            } else {
                terms.insert(monomial.clone(), sum);
            }
        }
        Some(SizeExpr { terms: Arc::new(terms) })
    }

    /// `self * other`; `None` on overflow.
    pub fn mul(&self, other: &SizeExpr) -> Option<SizeExpr> {
        let mut product = SizeExpr::default();
        for (m1, &c1) in self.terms.iter() {
            for (m2, &c2) in other.terms.iter() {
                let mut atoms: Vec<Atom> = m1.iter().chain(m2).cloned().collect();
                atoms.sort();
                product = product.add(&SizeExpr::from_monomial(atoms, c1.checked_mul(c2)?))?;
            }
        }
        Some(product)
    }

    /// `self / divisor` when the divisor divides `self` exactly as
    /// polynomials with integer coefficients (`(32*b*p+32*b*s)/(8*p+8*s)` is
    /// `4*b`); `None` otherwise. Multivariate division by one polynomial
    /// under a graded monomial order leaves no remainder exactly when the
    /// divisor divides.
    pub fn div_exact(&self, divisor: &SizeExpr) -> Option<SizeExpr> {
        let (d_atoms, d_coeff) = divisor.leading()?;
        let mut remainder = self.clone();
        let mut quotient = SizeExpr::default();
        // Each step removes the remainder's leading monomial; the bound only guards pathological inputs.
        for _ in 0..256 {
            let Some((r_atoms, r_coeff)) = remainder.leading() else { return Some(quotient) };
            if r_coeff % d_coeff != 0 {
                return None;
            }
            let mut rest = r_atoms.clone();
            for atom in d_atoms {
                let at = rest.iter().position(|a| a == atom)?;
                rest.remove(at);
            }
            let step = SizeExpr::from_monomial(rest, r_coeff / d_coeff);
            quotient = quotient.add(&step)?;
            remainder = remainder.add(&step.mul(divisor)?.mul(&SizeExpr::constant(-1))?)?;
        }
        None
    }

    /// The leading term under the graded order: highest degree first, then
    /// (smaller atoms counting as more significant) the lexicographically
    /// smallest sorted atom list. `None` for zero.
    fn leading(&self) -> Option<(&Vec<Atom>, i64)> {
        self.terms
            .iter()
            .max_by(|(m1, _), (m2, _)| m1.len().cmp(&m2.len()).then_with(|| m2.cmp(m1)))
            .map(|(m, &c)| (m, c))
    }

    /// The greatest common divisor of the coefficients (0 for the zero expression).
    pub fn coefficient_gcd(&self) -> u64 {
        self.terms.values().fold(0u64, |g, &c| gcd(g, c.unsigned_abs()))
    }

    /// For a single monomial `c·m`: `m` (coefficient 1) and `c`. `None` for
    /// zero or a sum of several monomials.
    pub fn monomial_parts(&self) -> Option<(SizeExpr, i64)> {
        if self.terms.len() != 1 {
            return None;
        }
        let (atoms, &c) = self.terms.iter().next()?;
        Some((SizeExpr::from_monomial(atoms.clone(), 1), c))
    }

    /// `⌊self / divisor⌋` for a positive divisor, folded when constant.
    pub fn floor_div(&self, divisor: u64) -> Option<SizeExpr> {
        self.divide(divisor, false)
    }

    /// `⌈self / divisor⌉` for a positive divisor, folded when constant.
    pub fn ceil_div(&self, divisor: u64) -> Option<SizeExpr> {
        self.divide(divisor, true)
    }

    fn divide(&self, divisor: u64, ceil: bool) -> Option<SizeExpr> {
        let d = i64::try_from(divisor).ok().filter(|&d| d > 0)?;
        if d == 1 {
            return Some(self.clone());
        }
        if let Some(n) = self.as_constant() {
            let q = if ceil { n.div_euclid(d) + i64::from(n.rem_euclid(d) != 0) } else { n.div_euclid(d) };
            return Some(SizeExpr::constant(q));
        }
        let atom = if ceil {
            Atom::CeilDiv(Box::new(self.clone()), divisor)
        } else {
            Atom::FloorDiv(Box::new(self.clone()), divisor)
        };
        Some(SizeExpr::from_monomial(vec![atom], 1))
    }

    /// `min(a, b)`, folded when both are constant or equal.
    pub fn min(a: &SizeExpr, b: &SizeExpr) -> SizeExpr {
        SizeExpr::extremum(a, b, true)
    }

    /// `max(a, b)`, folded when both are constant or equal.
    pub fn max(a: &SizeExpr, b: &SizeExpr) -> SizeExpr {
        SizeExpr::extremum(a, b, false)
    }

    /// Whether the value is at least 0 for every value of the symbols (they
    /// are sizes): every coefficient positive and every atom a size, or a
    /// rounding, `min` or `max` of such. Conservative: `false` when unsure.
    pub fn is_nonnegative(&self) -> bool {
        self.terms.iter().all(|(atoms, &c)| c > 0 && atoms.iter().all(Atom::is_nonnegative))
    }

    /// The value when every symbol has one in `value_of`; `None` when a
    /// symbol has none or the arithmetic overflows.
    pub fn eval(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        let mut total: i64 = 0;
        for (atoms, &c) in self.terms.iter() {
            let mut term = c;
            for atom in atoms {
                term = term.checked_mul(atom.eval(value_of)?)?;
            }
            total = total.checked_add(term)?;
        }
        Some(total)
    }

    /// The symbols the expression mentions, each once, in the order of the
    /// normal form, including those inside roundings, `min` and `max`
    /// (`min(64, seq)*batch + batch` names `batch` and `seq`).
    pub fn symbols(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols<'a>(&'a self, out: &mut Vec<&'a str>) {
        for atoms in self.terms.keys() {
            for atom in atoms {
                match atom {
                    Atom::Symbol(name) => {
                        if !out.contains(&name.as_str()) {
                            out.push(name);
                        }
                    }
                    Atom::FloorDiv(e, _) | Atom::CeilDiv(e, _) => e.collect_symbols(out),
                    Atom::Min(args) | Atom::Max(args) => args.iter().for_each(|a| a.collect_symbols(out)),
                }
            }
        }
    }

    /// The operands when the expression is exactly `min(a, b, ...)`.
    pub fn min_operands(&self) -> Option<&[SizeExpr]> {
        self.extremum_operands(true)
    }

    /// The operands when the expression is exactly `max(a, b, ...)`.
    pub fn max_operands(&self) -> Option<&[SizeExpr]> {
        self.extremum_operands(false)
    }

    fn extremum_operands(&self, is_min: bool) -> Option<&[SizeExpr]> {
        if self.terms.len() != 1 {
            return None;
        }
        match self.terms.iter().next()? {
            (atoms, 1) => match (atoms.as_slice(), is_min) {
                ([Atom::Min(operands)], true) | ([Atom::Max(operands)], false) => Some(operands),
                _ => None,
            },
            _ => None,
        }
    }

    fn extremum(a: &SizeExpr, b: &SizeExpr, is_min: bool) -> SizeExpr {
        if a == b {
            return a.clone();
        }
        if let (Some(x), Some(y)) = (a.as_constant(), b.as_constant()) {
            return SizeExpr::constant(if is_min { x.min(y) } else { x.max(y) });
        }
        let mut operands = vec![a.clone(), b.clone()];
        operands.sort();
        let atom = if is_min { Atom::Min(operands) } else { Atom::Max(operands) };
        SizeExpr::from_monomial(vec![atom], 1)
    }
}

impl Atom {
    fn eval(&self, value_of: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
        match self {
            Atom::Symbol(name) => value_of(name),
            Atom::FloorDiv(e, d) => Some(e.eval(value_of)?.div_euclid(i64::try_from(*d).ok()?)),
            Atom::CeilDiv(e, d) => {
                let (n, d) = (e.eval(value_of)?, i64::try_from(*d).ok()?);
                Some(n.div_euclid(d) + i64::from(n.rem_euclid(d) != 0))
            }
            Atom::Min(args) => args.iter().map(|a| a.eval(value_of)).collect::<Option<Vec<_>>>()?.into_iter().min(),
            Atom::Max(args) => args.iter().map(|a| a.eval(value_of)).collect::<Option<Vec<_>>>()?.into_iter().max(),
        }
    }

    fn is_nonnegative(&self) -> bool {
        match self {
            Atom::Symbol(_) => true,
            Atom::FloorDiv(e, _) | Atom::CeilDiv(e, _) => e.is_nonnegative(),
            Atom::Min(args) | Atom::Max(args) => args.iter().all(SizeExpr::is_nonnegative),
        }
    }
}

impl fmt::Display for SizeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        // Highest-degree monomials first, the constant last: `2*b*s+b+3`.
        let mut terms: Vec<_> = self.terms.iter().collect();
        terms.sort_by(|(m1, _), (m2, _)| m2.len().cmp(&m1.len()).then(m1.cmp(m2)));
        for (i, (monomial, &c)) in terms.into_iter().enumerate() {
            let sign = if c < 0 {
                "-"
            } else if i > 0 {
                "+"
            } else {
                ""
            };
            f.write_str(sign)?;
            let magnitude = c.unsigned_abs();
            if monomial.is_empty() {
                write!(f, "{magnitude}")?;
                continue;
            }
            if magnitude != 1 {
                write!(f, "{magnitude}*")?;
            }
            for (j, atom) in monomial.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                write!(f, "{atom}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Symbol(name) => f.write_str(name),
            Atom::FloorDiv(e, d) => write!(f, "floor({}/{d})", Grouped(e)),
            Atom::CeilDiv(e, d) => write!(f, "ceil({}/{d})", Grouped(e)),
            Atom::Min(args) => write!(f, "min({}, {})", args[0], args[1]),
            Atom::Max(args) => write!(f, "max({}, {})", args[0], args[1]),
        }
    }
}

/// An expression in parentheses when it has more than one term.
struct Grouped<'a>(&'a SizeExpr);

impl fmt::Display for Grouped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.terms.len() > 1 {
            write!(f, "({})", self.0)
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Known(n) => write!(f, "{n}"),
            Size::Symbolic(e) => write!(f, "{e}"),
        }
    }
}

/// The greatest common divisor of `a` and `b` (`gcd(0, b) = b`).
pub(super) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> SizeExpr {
        SizeExpr::symbol(name)
    }
    fn c(n: i64) -> SizeExpr {
        SizeExpr::constant(n)
    }

    #[test]
    fn coefficients_and_monomials_split() {
        let e = c(64).mul(&s("b")).unwrap().mul(&s("s")).unwrap().add(&c(96).mul(&s("b")).unwrap()).unwrap();
        assert_eq!(e.coefficient_gcd(), 32);
        assert_eq!(e.monomial_parts(), None);
        let m = c(2048).mul(&s("s")).unwrap();
        assert_eq!(m.monomial_parts(), Some((s("s"), 2048)));
        assert_eq!(c(12).monomial_parts(), Some((c(1), 12)));
    }

    #[test]
    fn symbols_are_listed_once_with_those_inside_atoms() {
        let inner = SizeExpr::min(&c(64), &s("seq"));
        let e = inner.mul(&s("batch")).unwrap().add(&s("batch")).unwrap();
        let mut names = e.symbols();
        names.sort();
        assert_eq!(names, vec!["batch", "seq"]);
        assert_eq!(s("p").add(&s("s")).unwrap().floor_div(4).unwrap().symbols().len(), 2);
        assert!(c(12).symbols().is_empty());
    }

    #[test]
    fn equal_polynomials_are_equal_values() {
        let left = c(2).mul(&s("b")).unwrap().mul(&s("s")).unwrap();
        let right = s("s").mul(&s("b")).unwrap().mul(&c(2)).unwrap();
        assert_eq!(left, right);
        assert_eq!(left.to_string(), "2*b*s");
        let expanded = s("b").add(&c(1)).unwrap().mul(&s("b").add(&c(-1)).unwrap()).unwrap();
        assert_eq!(expanded, s("b").mul(&s("b")).unwrap().add(&c(-1)).unwrap());
        assert_eq!(expanded.to_string(), "b*b-1");
    }

    #[test]
    fn exact_division_by_constants_and_monomials() {
        let two_b_s = c(2).mul(&s("b")).unwrap().mul(&s("s")).unwrap();
        assert_eq!(two_b_s.div_exact(&c(2)).unwrap(), s("b").mul(&s("s")).unwrap());
        assert_eq!(two_b_s.div_exact(&s("s")).unwrap(), c(2).mul(&s("b")).unwrap());
        assert_eq!(two_b_s.div_exact(&c(4)), None);
        assert_eq!(two_b_s.div_exact(&s("h")), None);
        assert_eq!(c(12).div_exact(&c(4)), Some(c(3)));
        // Sums divide when they factor: (32*b*p + 32*b*s) / (8*p + 8*s) = 4*b.
        let p_plus_s = s("p").add(&s("s")).unwrap();
        let num = c(32).mul(&s("b")).unwrap().mul(&p_plus_s).unwrap();
        let den = c(8).mul(&p_plus_s).unwrap();
        assert_eq!(num.div_exact(&den), Some(c(4).mul(&s("b")).unwrap()));
        // (b*b - 1) / (b + 1) = b - 1; b*b / (b + 1) does not divide.
        let b2m1 = s("b").mul(&s("b")).unwrap().add(&c(-1)).unwrap();
        assert_eq!(b2m1.div_exact(&s("b").add(&c(1)).unwrap()), Some(s("b").add(&c(-1)).unwrap()));
        assert_eq!(s("b").mul(&s("b")).unwrap().div_exact(&s("b").add(&c(1)).unwrap()), None);
        assert_eq!(num.div_exact(&SizeExpr::default()), None);
    }

    #[test]
    fn cancellation_and_constant_folding() {
        let zero = s("seq").add(&s("seq").mul(&c(-1)).unwrap()).unwrap();
        assert_eq!(zero.as_constant(), Some(0));
        assert_eq!(c(7).floor_div(2).unwrap(), c(3));
        assert_eq!(c(7).ceil_div(2).unwrap(), c(4));
        assert_eq!(s("h").floor_div(1).unwrap(), s("h"));
        assert_eq!(s("h").add(&c(-1)).unwrap().floor_div(2).unwrap().to_string(), "floor((h-1)/2)");
        assert_eq!(SizeExpr::max(&s("a"), &s("b")), SizeExpr::max(&s("b"), &s("a")));
        assert_eq!(SizeExpr::min(&c(3), &c(5)), c(3));
        let at = |name: &str| match name {
            "h" => Some(7),
            _ => None,
        };
        assert_eq!(s("h").add(&c(-1)).unwrap().floor_div(2).unwrap().add(&c(1)).unwrap().eval(&at), Some(4));
        assert_eq!(SizeExpr::min(&c(4), &s("h")).mul(&s("h")).unwrap().eval(&at), Some(28));
        assert_eq!(s("h").ceil_div(2).unwrap().eval(&at), Some(4));
        assert_eq!(s("b").eval(&at), None);
        assert!(c(i64::MAX).add(&c(1)).is_none());
    }
}
