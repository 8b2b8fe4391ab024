//! Size expressions as a person reads them.
//!
//! Operator rules build sizes by the formulas of the ONNX specification, so
//! a chain of strided windows nests: five 3×3 stride-2 convolutions with
//! pads 1 give `floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+1`,
//! which is `ceil(H/32)`. [`SizeExpr::readable`] rewrites an expression into
//! an exactly equal one (equal for every integer value of the symbols) that
//! is as short as it can find, for printing; the solver keeps the form the
//! rules built. Two steps:
//!
//! - **Flattening.** Every rounding becomes one floor of an integer
//!   polynomial: `ceil(p/b) = floor((p+b-1)/b)` and
//!   `floor((floor(x/a)+q)/b) = floor((x+a*q)/(a*b))` (`x`, `q` integer,
//!   `a`, `b` positive), so nests of floors and ceilings, mixed ones
//!   included, collapse into one division; a factor common to the divisor
//!   and every coefficient but the constant is divided out
//!   (`floor((2*x+1)/4) = floor(x/2)`).
//! - **Choosing the form.** Each `floor((p+r)/d)` (`p` without a constant)
//!   may be written with `r` reduced modulo `d` and the quotient moved out,
//!   and as the ceiling `ceil((p+r-d+1)/d)`; of these, the form that makes
//!   the whole expression shortest is kept, one rounding after the other:
//!   `floor((H-1)/2)+1` is `ceil(H/2)`, `floor((H+b-1)/b)` is `ceil(H/b)`,
//!   `8*floor((H-1)/32)+8` is `8*ceil(H/32)`.
//!
//! Every rewrite is an identity over the integers; the tests check each one
//! by evaluating both sides over a range of values.

use super::size::{gcd, Atom};
use super::{Dim, Size, SizeExpr};

/// How many collapsing steps one rounding may take (a guard only: each step
/// removes one nested rounding).
const MAX_COLLAPSE: usize = 64;

impl SizeExpr {
    /// An expression equal to `self` for every integer value of its
    /// symbols, in the shortest form found: nested roundings collapsed,
    /// `floor((x-1)/2)+1` as `ceil(x/2)` (see the module docs). `self`
    /// itself when nothing shorter is found (or the arithmetic overflows).
    pub fn readable(&self) -> SizeExpr {
        match flatten(self).and_then(|f| choose_forms(&f)) {
            Some(r) if cost(&r) < cost(self) => r,
            _ => self.clone(),
        }
    }

    /// The deepest nesting of `floor`/`ceil` in the expression (0 without
    /// any): `floor(floor(x/2)/2)+1` has 2.
    pub fn rounding_depth(&self) -> usize {
        self.terms.keys().flatten().map(Atom::rounding_depth).max().unwrap_or(0)
    }
}

impl Dim {
    /// The dimension with its size [`SizeExpr::readable`], for printing.
    pub fn readable(&self) -> Dim {
        match &self.size {
            Size::Symbolic(e) => Dim { size: Size::Symbolic(Box::new(e.readable())), basis: self.basis.clone() },
            Size::Known(_) => self.clone(),
        }
    }
}

impl Atom {
    fn rounding_depth(&self) -> usize {
        match self {
            Atom::Symbol(_) => 0,
            Atom::FloorDiv(e, _) | Atom::CeilDiv(e, _) => 1 + e.rounding_depth(),
            Atom::Min(args) | Atom::Max(args) => args.iter().map(SizeExpr::rounding_depth).max().unwrap_or(0),
        }
    }
}

/// What makes a form less readable: deeper nesting first, then length.
fn cost(e: &SizeExpr) -> (usize, usize) {
    (e.rounding_depth(), e.to_string().len())
}

/// The atom as an expression of its own.
fn atom_expr(a: &Atom) -> SizeExpr {
    SizeExpr::from_monomial(vec![a.clone()], 1)
}

/// `e` with every atom replaced by what `f` makes of it; `None` when `f`
/// gives none or the arithmetic overflows.
pub(super) fn rebuild(e: &SizeExpr, f: &mut dyn FnMut(&Atom) -> Option<SizeExpr>) -> Option<SizeExpr> {
    let mut out = SizeExpr::default();
    for (atoms, &c) in e.terms.iter() {
        let mut term = SizeExpr::constant(c);
        for a in atoms {
            term = term.mul(&f(a)?)?;
        }
        out = out.add(&term)?;
    }
    Some(out)
}

/// `e` with every rounding a single floor division (see the module docs).
pub(super) fn flatten(e: &SizeExpr) -> Option<SizeExpr> {
    rebuild(e, &mut |a| match a {
        Atom::Symbol(_) => Some(atom_expr(a)),
        Atom::FloorDiv(inner, d) => floor_of(flatten(inner)?, *d),
        Atom::CeilDiv(inner, d) => {
            let shifted = flatten(inner)?.add(&SizeExpr::constant(i64::try_from(*d).ok()? - 1))?;
            floor_of(shifted, *d)
        }
        Atom::Min(args) | Atom::Max(args) => {
            let is_min = matches!(a, Atom::Min(_));
            extremum(args.iter().map(flatten).collect::<Option<Vec<_>>>()?, is_min)
        }
    })
}

/// `min`/`max` of `args` (at least one).
fn extremum(args: Vec<SizeExpr>, is_min: bool) -> Option<SizeExpr> {
    let mut it = args.into_iter();
    let first = it.next()?;
    Some(it.fold(first, |acc, x| if is_min { SizeExpr::min(&acc, &x) } else { SizeExpr::max(&acc, &x) }))
}

/// The constant term of `e`.
pub(super) fn constant_term(e: &SizeExpr) -> i64 {
    e.terms.get(&Vec::new()).copied().unwrap_or(0)
}

/// `floor(p/d)` for a flattened `p`, with nested floors collapsed and a
/// factor common to `d` and `p`'s non-constant coefficients divided out.
fn floor_of(mut p: SizeExpr, mut d: u64) -> Option<SizeExpr> {
    for _ in 0..MAX_COLLAPSE {
        // floor((g*p' + r)/(g*m)) = floor((p' + floor(r/g))/m).
        let r = constant_term(&p);
        let p0 = p.add(&SizeExpr::constant(r.checked_neg()?))?;
        let g = gcd(p0.coefficient_gcd(), d);
        if p0.as_constant().is_some() {
            return SizeExpr::constant(r).floor_div(d);
        }
        if g > 1 {
            let gi = i64::try_from(g).ok()?;
            p = p0.div_exact(&SizeExpr::constant(gi))?.add(&SizeExpr::constant(r.div_euclid(gi)))?;
            d /= g;
        }
        if d == 1 {
            return Some(p);
        }
        // floor((floor(x/a) + q)/d) = floor((x + a*q)/(a*d)).
        let nested = p.terms.iter().find_map(|(atoms, &c)| match (atoms.as_slice(), c) {
            ([Atom::FloorDiv(x, a)], 1) => Some(((**x).clone(), *a)),
            _ => None,
        });
        let Some((x, a)) = nested else { return p.floor_div(d) };
        let q = p.add(&SizeExpr::from_monomial(vec![Atom::FloorDiv(Box::new(x.clone()), a)], -1))?;
        p = x.add(&q.mul(&SizeExpr::constant(i64::try_from(a).ok()?))?)?;
        d = d.checked_mul(a)?;
    }
    None
}

/// The equal spellings of the flattened rounding `floor(p/d)`: as it is,
/// with the constant reduced modulo `d` and the quotient moved out, and as
/// ceilings of both.
fn spellings(p: &SizeExpr, d: u64) -> Option<Vec<SizeExpr>> {
    let di = i64::try_from(d).ok()?;
    let r = constant_term(p);
    let p0 = p.add(&SizeExpr::constant(r.checked_neg()?))?;
    let (q, rr) = (r.div_euclid(di), r.rem_euclid(di));
    let with = |offset: i64| p0.add(&SizeExpr::constant(offset));
    // floor(y/d) = ceil((y-d+1)/d) for an integer y.
    let ceil_shift = 1 - di;
    Some(vec![
        with(r)?.floor_div(d)?,
        with(rr)?.floor_div(d)?.add(&SizeExpr::constant(q))?,
        with(r.checked_add(ceil_shift)?)?.ceil_div(d)?,
        with(rr + ceil_shift)?.ceil_div(d)?.add(&SizeExpr::constant(q))?,
    ])
}

/// Chooses, rounding by rounding, the spelling that makes the flattened `e`
/// shortest (inner expressions first).
fn choose_forms(e: &SizeExpr) -> Option<SizeExpr> {
    // The operands of every rounding, min and max in their own best form.
    let mut current = rebuild(e, &mut |a| match a {
        Atom::Symbol(_) => Some(atom_expr(a)),
        Atom::FloorDiv(p, d) => Some(atom_expr(&Atom::FloorDiv(Box::new(choose_forms(p)?), *d))),
        Atom::CeilDiv(p, d) => Some(atom_expr(&Atom::CeilDiv(Box::new(choose_forms(p)?), *d))),
        Atom::Min(args) | Atom::Max(args) => {
            let is_min = matches!(a, Atom::Min(_));
            extremum(args.iter().map(choose_forms).collect::<Option<Vec<_>>>()?, is_min)
        }
    })?;
    let mut roundings: Vec<(SizeExpr, u64)> = Vec::new();
    for a in current.terms.keys().flatten() {
        if let Atom::FloorDiv(p, d) = a {
            if !roundings.iter().any(|(q, e)| q == &**p && e == d) {
                roundings.push(((**p).clone(), *d));
            }
        }
    }
    for (p, d) in roundings {
        let target = Atom::FloorDiv(Box::new(p.clone()), d);
        let mut best = current.clone();
        for spelling in spellings(&p, d)? {
            let trial = rebuild(&current, &mut |a| Some(if *a == target { spelling.clone() } else { atom_expr(a) }))?;
            if cost(&trial) < cost(&best) {
                best = trial;
            }
        }
        current = best;
    }
    Some(current)
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

    /// ONNX's window formula `floor((x + pads - k)/stride) + 1`.
    fn window(x: &SizeExpr, k: i64, pads: i64, stride: u64) -> SizeExpr {
        x.add(&c(pads - k)).unwrap().floor_div(stride).unwrap().add(&c(1)).unwrap()
    }

    /// `e` and `e.readable()` agree at every `x` in -300..300 (other
    /// symbols at a few values); returns the readable text.
    #[track_caller]
    fn readable_checked(e: &SizeExpr) -> String {
        let r = e.readable();
        for x in -300..300 {
            for y in [1, 2, 7, 33] {
                let at = |n: &str| match n {
                    "H" | "x" => Some(x),
                    _ => Some(y),
                };
                assert_eq!(e.eval(&at), r.eval(&at), "{e} vs {r} at {x}, {y}");
            }
        }
        r.to_string()
    }

    #[test]
    fn a_window_of_stride_two_is_a_ceiling() {
        let h = s("H");
        assert_eq!(readable_checked(&window(&h, 3, 2, 2)), "ceil(H/2)");
        // floor((x+b-1)/b) = ceil(x/b).
        assert_eq!(readable_checked(&h.add(&c(7)).unwrap().floor_div(8).unwrap()), "ceil(H/8)");
        // A pool of 2 at stride 2 without pads is floor(H/2).
        assert_eq!(readable_checked(&window(&h, 2, 0, 2)), "floor(H/2)");
        // Already short: kept.
        assert_eq!(readable_checked(&h.add(&c(-1)).unwrap().floor_div(2).unwrap()), "ceil(H/2)-1");
        assert_eq!(readable_checked(&window(&h, 7, 0, 1)), "H-6");
    }

    #[test]
    fn a_chain_of_strided_windows_collapses() {
        let h = s("H");
        let mut e = h.clone();
        let mut texts = Vec::new();
        for _ in 0..5 {
            e = window(&e, 3, 2, 2);
            texts.push(readable_checked(&e));
        }
        assert_eq!(e.to_string(), "floor(floor(floor(floor(floor((H-1)/2)/2)/2)/2)/2)+1");
        assert_eq!(texts, ["ceil(H/2)", "ceil(H/4)", "ceil(H/8)", "ceil(H/16)", "ceil(H/32)"]);
        let up = e.mul(&c(8)).unwrap();
        assert_eq!(readable_checked(&up), "8*ceil(H/32)");
        // Pools (floor) between convolutions (ceil): exact mixed nests.
        let mixed = window(&window(&window(&h, 3, 2, 2), 2, 0, 2), 3, 2, 2);
        // ceil(floor(ceil(H/2)/2)/2) = floor((H+5)/8), one character longer.
        assert_eq!(readable_checked(&mixed), "ceil((H-2)/8)");
        let pools = window(&window(&h, 2, 0, 2), 2, 0, 2);
        assert_eq!(readable_checked(&pools), "floor(H/4)");
    }

    #[test]
    fn nests_collapse_in_products_and_sums() {
        let (h, w, ch) = (s("H"), s("W"), s("C"));
        let e = window(&h, 3, 2, 2).mul(&window(&w, 3, 2, 2)).unwrap().mul(&ch).unwrap();
        assert_eq!(e.to_string(), "C*floor((H-1)/2)*floor((W-1)/2)+C*floor((H-1)/2)+C*floor((W-1)/2)+C");
        assert_eq!(readable_checked(&e), "C*ceil(H/2)*ceil(W/2)");
        let ceil_of_ceil = h.ceil_div(3).unwrap().ceil_div(5).unwrap();
        assert_eq!(readable_checked(&ceil_of_ceil), "ceil(H/15)");
        let floor_of_ceil = h.ceil_div(2).unwrap().floor_div(2).unwrap();
        assert_eq!(readable_checked(&floor_of_ceil), "ceil((H-2)/4)");
        let common_factor = c(2).mul(&h).unwrap().add(&c(1)).unwrap().floor_div(4).unwrap();
        assert_eq!(readable_checked(&common_factor), "floor(H/2)");
        let with_min = SizeExpr::min(&window(&h, 3, 2, 2), &c(64));
        assert_eq!(readable_checked(&with_min), "min(64, ceil(H/2))");
        assert_eq!(readable_checked(&h.mul(&w).unwrap().add(&c(3)).unwrap()), "H*W+3");
    }

    #[test]
    fn depth_counts_nested_roundings() {
        let e = window(&window(&s("H"), 3, 2, 2), 3, 2, 2);
        assert_eq!(e.rounding_depth(), 2);
        assert_eq!(e.readable().rounding_depth(), 1);
        assert_eq!(s("H").rounding_depth(), 0);
    }

    #[test]
    fn random_nests_stay_equal() {
        // Every nest of up to four roundings by 1..=5 with offsets -3..=3.
        let h = s("x");
        let mut seeds = vec![h.clone()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for e in &seeds {
                for (d, off, ceil) in [(2, -1, false), (3, 2, true), (2, 0, true), (5, -3, false), (4, 3, false)] {
                    let shifted = e.add(&c(off)).unwrap();
                    let r = if ceil { shifted.ceil_div(d) } else { shifted.floor_div(d) };
                    next.push(r.unwrap().add(&c(off % 2)).unwrap());
                }
            }
            seeds.extend(next.iter().cloned());
            seeds.truncate(200);
        }
        for e in &seeds {
            let _ = readable_checked(e);
            assert!(e.readable().rounding_depth() <= 1, "{e} -> {}", e.readable());
        }
    }
}
