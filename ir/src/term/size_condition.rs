//! An equation between two sizes, stated as the condition on the symbols it
//! amounts to.
//!
//! A detector whose stride-4 features meet its stride-32 features upsampled
//! ×8 holds only when `ceil(H/4) = 8*ceil(H/32)`; a person says *H mod 32
//! is 0 or at least 29*, and would check *H is a multiple of 32*.
//! [`Condition::of_equal`] finds that statement where it is exact:
//!
//! - **One symbol.** The difference `g(x)` of the two sides, flattened
//!   (`size_readable`), must be quasi-linear: a sum of constants, `c*x` and
//!   `c*floor((a*x+b)/d)`. With `L` the least common multiple of the
//!   divisors, `g(x+L) = g(x) + s` for a constant `s` and every integer
//!   `x`. When `s = 0` the solutions are exactly the residues `r` modulo
//!   `L` with `g(r) = 0` (reduced to the smallest period); when `s ≠ 0`
//!   each residue has at most one solution, and the non-negative ones are
//!   listed when there are few.
//! - **Element counts.** Two products `c1*A1(x1)*A2(x2)*…` and
//!   `c2*B1(x1)*B2(x2)*…` (factors common to both sides cancelled, each
//!   remaining factor over one symbol, one on each side per symbol): with
//!   `k_i` the ratio of the slopes of `A_i` and `B_i` and `∏ k_i = c2/c1`,
//!   when every `A_i - k_i*B_i` keeps one sign, the same for all `i`, and
//!   every factor is at least 1 for sizes of at least 1, the products are
//!   equal exactly when every `A_i = k_i*B_i`; each is stated as above,
//!   for sizes of at least 1 (a cancelled size of 0 makes both sides 0).
//!
//! The statement is exact (`plain`); where it is not a plain divisibility,
//! a simpler condition that implies it is given too (`sufficient`). The
//! tests compare each statement with the equation at every size of a range.

use super::size::{gcd, Atom};
use super::size_readable::flatten;
use super::SizeExpr;
use std::fmt;

/// The largest period scanned (the least common multiple of the divisors).
const MAX_PERIOD: i64 = 1 << 14;

/// The most runs of residues, or single solutions, a statement lists.
const MAX_PARTS: usize = 4;

/// An equation's solutions in plain words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Exactly when the equation holds: `H is a multiple of 32`, `H mod 32
    /// is 0 or at least 29`, `H is 15 or 16`.
    pub plain: String,
    /// A simpler condition that implies it, when `plain` is not one already
    /// (`H is a multiple of 32`).
    pub sufficient: Option<String>,
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.plain)?;
        if let Some(s) = &self.sufficient {
            write!(f, " (in particular when {s})")?;
        }
        Ok(())
    }
}

impl Condition {
    /// When `lhs = rhs` holds, in plain words, where that can be said
    /// exactly (see the module docs); `None` when it cannot, when it holds
    /// always or never, and when neither side has a `floor` or `ceil` (the
    /// equation is plain already).
    pub fn of_equal(lhs: &SizeExpr, rhs: &SizeExpr) -> Option<Condition> {
        if lhs.rounding_depth() + rhs.rounding_depth() == 0 {
            return None;
        }
        match one_symbol(lhs, rhs) {
            Some((x, zeros)) => zeros.phrase(&x),
            None => products(&lhs.readable(), &rhs.readable()),
        }
    }

    /// Whether `lhs = rhs` is known to hold for no size (no value of at
    /// least 0) of its one symbol: `8*ceil(H/32) = 1`. `false` when unsure.
    pub fn never_equal(lhs: &SizeExpr, rhs: &SizeExpr) -> bool {
        match one_symbol(lhs, rhs) {
            Some((_, Zeros::Residues(_, residues))) => residues.is_empty(),
            Some((_, Zeros::Values(values))) => values.is_empty(),
            None => false,
        }
    }
}

/// The solutions of `lhs = rhs` when it is over one symbol and quasi-linear.
fn one_symbol(lhs: &SizeExpr, rhs: &SizeExpr) -> Option<(String, Zeros)> {
    let difference = lhs.add(&rhs.mul(&SizeExpr::constant(-1))?)?;
    let [x] = difference.symbols()[..] else { return None };
    let flat = flatten(&difference)?;
    let zeros = univariate(&flat, x)?.zeros()?;
    Some((x.to_string(), zeros))
}

/// A quasi-linear function of one symbol: `g(x+period) = g(x) + step`.
struct QuasiLinear<'a> {
    g: &'a SizeExpr,
    symbol: &'a str,
    period: i64,
    step: i64,
}

impl QuasiLinear<'_> {
    fn at(&self, x: i64) -> Option<i64> {
        self.g.eval(&|s| (s == self.symbol).then_some(x))
    }

    /// The solutions of `g(x) = 0`.
    fn zeros(&self) -> Option<Zeros> {
        let values: Vec<i64> = (0..self.period).map(|r| self.at(r)).collect::<Option<_>>()?;
        if self.step == 0 {
            let holds: Vec<bool> = values.iter().map(|&v| v == 0).collect();
            let m = (1..=self.period).find(|&m| {
                self.period % m == 0
                    && (0..self.period).all(|r| holds[r as usize] == holds[((r + m) % self.period) as usize])
            })?;
            let residues = (0..m).filter(|&r| holds[r as usize]).collect();
            return Some(Zeros::Residues(m, residues));
        }
        // g(r + k*period) = g(r) + k*step: one k per residue at most.
        let mut found = Vec::new();
        for (r, &v) in values.iter().enumerate() {
            if v % self.step == 0 {
                let x = (r as i64).checked_add((-v / self.step).checked_mul(self.period)?)?;
                if x >= 0 {
                    found.push(x);
                }
            }
        }
        found.sort_unstable();
        Some(Zeros::Values(found))
    }
}

/// The solutions of a quasi-linear equation.
enum Zeros {
    /// The residues modulo the first number (its smallest period).
    Residues(i64, Vec<i64>),
    /// Finitely many non-negative values.
    Values(Vec<i64>),
}

impl Zeros {
    fn phrase(&self, x: &str) -> Option<Condition> {
        match self {
            Zeros::Residues(m, residues) => {
                if residues.is_empty() || residues.len() as i64 == *m {
                    return None;
                }
                if residues == &[0] {
                    return Some(Condition { plain: format!("{x} is a multiple of {m}"), sufficient: None });
                }
                let plain = format!("{x} mod {m} is {}", runs_text(residues, Some(*m))?);
                let sufficient = residues.contains(&0).then(|| {
                    let step =
                        (1..=*m).find(|&s| m % s == 0 && (0..*m).step_by(s as usize).all(|r| residues.contains(&r)));
                    format!("{x} is a multiple of {}", step.unwrap_or(*m))
                });
                Some(Condition { plain, sufficient })
            }
            Zeros::Values(values) => {
                if values.is_empty() {
                    return None;
                }
                Some(Condition { plain: format!("{x} is {}", runs_text(values, None)?), sufficient: None })
            }
        }
    }
}

/// `0 or at least 29`, `1 to 3 or 7`: sorted values as runs, the values
/// being residues modulo `m` when it is given (a run from 0 is `at most`,
/// one to `m - 1` `at least`); `None` past [`MAX_PARTS`] parts.
fn runs_text(values: &[i64], m: Option<i64>) -> Option<String> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &r in values {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == r => *end = r,
            _ => runs.push((r, r)),
        }
    }
    let mut parts: Vec<String> = Vec::new();
    for (a, b) in runs {
        match (a, b) {
            _ if a == b => parts.push(a.to_string()),
            _ if b == a + 1 => parts.extend([a.to_string(), b.to_string()]),
            (0, _) if m.is_some() => parts.push(format!("at most {b}")),
            _ if m == Some(b + 1) => parts.push(format!("at least {a}")),
            _ => parts.push(format!("{a} to {b}")),
        }
    }
    (parts.len() <= MAX_PARTS).then(|| or_list(&parts))
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// `g` as a quasi-linear function of `x` (see the module docs); `None` when
/// it is not one, or its period is too long to scan.
fn univariate<'a>(g: &'a SizeExpr, x: &'a str) -> Option<QuasiLinear<'a>> {
    let mut slope_x = 0i64;
    let mut roundings: Vec<(i64, i64, i64)> = Vec::new(); // (coefficient, a, d)
    let mut has_rounding = false;
    for (atoms, &c) in g.terms.iter() {
        match atoms.as_slice() {
            [] => {}
            [Atom::Symbol(s)] if s == x => slope_x = slope_x.checked_add(c)?,
            [Atom::FloorDiv(p, d)] => {
                has_rounding = true;
                roundings.push((c, affine_slope(p, x)?, i64::try_from(*d).ok()?));
            }
            _ => return None,
        }
    }
    if !has_rounding {
        return None;
    }
    let mut period = 1i64;
    for &(_, _, d) in &roundings {
        period = (period / gcd(period as u64, d as u64) as i64).checked_mul(d)?;
        if period > MAX_PERIOD {
            return None;
        }
    }
    let mut step = slope_x.checked_mul(period)?;
    for (c, a, d) in roundings {
        step = step.checked_add(c.checked_mul(a)?.checked_mul(period / d)?)?;
    }
    Some(QuasiLinear { g, symbol: x, period, step })
}

/// `a` when `p` is `a*x + b`.
fn affine_slope(p: &SizeExpr, x: &str) -> Option<i64> {
    let mut a = 0;
    for (atoms, &c) in p.terms.iter() {
        match atoms.as_slice() {
            [] => {}
            [Atom::Symbol(s)] if s == x => a = c,
            _ => return None,
        }
    }
    Some(a)
}

/// A factor over one symbol: the symbol itself or `floor((a*x+b)/d)`, with
/// its slope `num/den`.
struct Factor {
    expr: SizeExpr,
    symbol: String,
    num: i64,
    den: i64,
}

fn factor(a: &Atom) -> Option<Factor> {
    let flat = flatten(&atom(a))?;
    let (1, atoms) = monomial(&flat)? else { return None };
    let [a] = atoms.as_slice() else { return None };
    match a {
        Atom::Symbol(s) => Some(Factor { expr: atom(a), symbol: s.clone(), num: 1, den: 1 }),
        Atom::FloorDiv(p, d) => {
            let [x] = p.symbols()[..] else { return None };
            let slope = affine_slope(p, x)?;
            let d = i64::try_from(*d).ok()?;
            let g = gcd(slope.unsigned_abs(), d as u64) as i64;
            (slope > 0).then(|| Factor { expr: atom(a), symbol: x.to_string(), num: slope / g, den: d / g })
        }
        _ => None,
    }
}

fn atom(a: &Atom) -> SizeExpr {
    SizeExpr::from_monomial(vec![a.clone()], 1)
}

/// A single monomial's coefficient and atoms.
fn monomial(e: &SizeExpr) -> Option<(i64, Vec<Atom>)> {
    match e.terms.len() {
        1 => e.terms.iter().next().map(|(atoms, &c)| (c, atoms.clone())),
        _ => None,
    }
}

/// Two products over several symbols (see the module docs), in their
/// readable forms (where `C*(floor((H-1)/2)+1)` is the product `C*ceil(H/2)`).
fn products(lhs: &SizeExpr, rhs: &SizeExpr) -> Option<Condition> {
    let ((c1, mut left), (c2, mut right)) = (monomial(lhs)?, monomial(rhs)?);
    if c1 <= 0 || c2 <= 0 {
        return None;
    }
    // Cancel the factors both sides share (sizes: zero only for an empty tensor).
    left.retain(|a| match right.iter().position(|b| b == a) {
        Some(i) => {
            right.remove(i);
            false
        }
        None => true,
    });
    let (left, right): (Vec<Factor>, Vec<Factor>) =
        (left.iter().map(factor).collect::<Option<_>>()?, right.iter().map(factor).collect::<Option<_>>()?);
    let mut symbols: Vec<&str> = left.iter().map(|f| f.symbol.as_str()).collect();
    symbols.sort_unstable();
    let mut other: Vec<&str> = right.iter().map(|f| f.symbol.as_str()).collect();
    other.sort_unstable();
    if symbols != other || symbols.windows(2).any(|w| w[0] == w[1]) || symbols.is_empty() {
        return None;
    }
    // Each pair A = (num_a/den_a)x + …, B = (num_b/den_b)x + …: den·A = num·B with
    // num/den = (num_a·den_b)/(den_a·num_b) reduced; their product must be c2/c1.
    let (mut prod_num, mut prod_den) = (1i64, 1i64);
    let mut parts = Vec::new();
    let mut sufficient = Vec::new();
    let mut sign = 0i64;
    for a in &left {
        let b = right.iter().find(|b| b.symbol == a.symbol)?;
        let (n, d) = (a.num.checked_mul(b.den)?, a.den.checked_mul(b.num)?);
        let g = gcd(n as u64, d as u64) as i64;
        let (n, d) = (n / g, d / g);
        prod_num = prod_num.checked_mul(n)?;
        prod_den = prod_den.checked_mul(d)?;
        // h = d·A − n·B keeps one sign, and A, B ≥ 1 for x ≥ 1.
        let h = a.expr.mul(&SizeExpr::constant(d))?.add(&b.expr.mul(&SizeExpr::constant(n.checked_neg()?))?)?;
        let q = univariate(&h, &a.symbol).or_else(|| {
            (h.as_constant() == Some(0)).then_some(QuasiLinear { g: &h, symbol: &a.symbol, period: 1, step: 0 })
        })?;
        if q.step != 0 {
            return None;
        }
        for r in 0..q.period {
            let v = q.at(r)?.signum();
            if v != 0 {
                if sign != 0 && v != sign {
                    return None;
                }
                sign = v;
            }
        }
        let positive =
            |f: &Factor| (1..=q.period).all(|x| f.expr.eval(&|s| (s == f.symbol).then_some(x)).is_some_and(|v| v >= 1));
        if !positive(a) || !positive(b) {
            return None;
        }
        let zeros = q.zeros()?;
        let condition = match zeros {
            Zeros::Residues(m, ref residues) if residues.len() as i64 == m => continue,
            _ => zeros.phrase(&a.symbol)?,
        };
        sufficient.push(condition.sufficient.clone().unwrap_or_else(|| condition.plain.clone()));
        parts.push(condition.plain);
    }
    // c1·∏A = c2·∏B ⇔ ∏(den·A) = ∏(num·B) exactly when c2/c1 = ∏num/∏den.
    if i128::from(c2) * i128::from(prod_den) != i128::from(c1) * i128::from(prod_num) || parts.is_empty() {
        return None;
    }
    let plain = format!("{} (for sizes of at least 1)", parts.join(" and "));
    let sufficient = sufficient.join(" and ");
    let sufficient = (sufficient != parts.join(" and ")).then_some(sufficient);
    Some(Condition { plain, sufficient })
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
    fn window(x: &SizeExpr, k: i64, pads: i64, stride: u64) -> SizeExpr {
        x.add(&c(pads - k)).unwrap().floor_div(stride).unwrap().add(&c(1)).unwrap()
    }
    fn conv_chain(x: &SizeExpr, n: usize) -> SizeExpr {
        (0..n).fold(x.clone(), |e, _| window(&e, 3, 2, 2))
    }

    /// The statement of `lhs = rhs`, checked against the equation at every
    /// value of one symbol in 0..=600 (`plain` exactly, `sufficient` implying it).
    #[track_caller]
    fn stated(lhs: &SizeExpr, rhs: &SizeExpr) -> Option<String> {
        let cond = Condition::of_equal(lhs, rhs)?;
        let x = lhs.add(rhs).unwrap().symbols()[0].to_string();
        for v in 0..=600 {
            let at = |n: &str| (n == x).then_some(v);
            let holds = lhs.eval(&at) == rhs.eval(&at);
            assert_eq!(holds, plain_holds(&cond.plain, v), "{} at {x} = {v}", cond.plain);
            if let Some(s) = &cond.sufficient {
                assert!(!plain_holds(s, v) || holds, "{s} at {x} = {v}");
            }
        }
        Some(cond.to_string())
    }

    /// Evaluates a statement `plain` of one symbol at `v`, parsing the
    /// phrasings this module writes.
    fn plain_holds(plain: &str, v: i64) -> bool {
        let (_, rest) = plain.split_once(' ').unwrap();
        if let Some(m) = rest.strip_prefix("is a multiple of ") {
            return v % m.parse::<i64>().unwrap() == 0;
        }
        if let Some(rest) = rest.strip_prefix("mod ") {
            let (m, runs) = rest.split_once(" is ").unwrap();
            let m: i64 = m.parse().unwrap();
            let r = v.rem_euclid(m);
            return runs.replace(" or ", ", ").split(", ").any(|part| {
                if let Some(a) = part.strip_prefix("at least ") {
                    r >= a.parse().unwrap()
                } else if let Some(b) = part.strip_prefix("at most ") {
                    r <= b.parse().unwrap()
                } else if let Some((a, b)) = part.split_once(" to ") {
                    (a.parse().unwrap()..=b.parse().unwrap()).contains(&r)
                } else {
                    r == part.parse::<i64>().unwrap()
                }
            });
        }
        let values = rest.strip_prefix("is ").unwrap();
        values.replace(" or ", ", ").split(", ").any(|p| match p.split_once(" to ") {
            Some((a, b)) => (a.parse().unwrap()..=b.parse().unwrap()).contains(&v),
            None => p.parse::<i64>().unwrap() == v,
        })
    }

    #[test]
    fn a_stride_chain_meeting_its_upsampled_end_is_a_residue_condition() {
        let h = s("H");
        let skip = conv_chain(&h, 2);
        let up = conv_chain(&h, 5).mul(&c(8)).unwrap();
        assert_eq!(
            stated(&skip, &up).unwrap(),
            "H mod 32 is 0 or at least 29 (in particular when H is a multiple of 32)"
        );
        // Stride 32 against stride 32 upsampled by 1: always; stride 2 vs 4 x2.
        assert_eq!(stated(&conv_chain(&h, 5), &conv_chain(&h, 5)), None);
        assert_eq!(
            stated(&conv_chain(&h, 1), &conv_chain(&h, 2).mul(&c(2)).unwrap()).unwrap(),
            "H mod 4 is 0 or 3 (in particular when H is a multiple of 4)"
        );
    }

    #[test]
    fn floors_amount_to_divisibility() {
        let h = s("H");
        // Pools: floor(H/2) twice, against H/4 exactly: 4*floor(H/4) = H.
        let pools = window(&window(&h, 2, 0, 2), 2, 0, 2);
        assert_eq!(stated(&pools.mul(&c(4)).unwrap(), &h).unwrap(), "H is a multiple of 4");
        assert_eq!(stated(&h.ceil_div(8).unwrap().mul(&c(8)).unwrap(), &h).unwrap(), "H is a multiple of 8");
        // floor(H/2)*2 = H - 1: odd sizes.
        assert_eq!(
            stated(&h.floor_div(2).unwrap().mul(&c(2)).unwrap(), &h.add(&c(-1)).unwrap()).unwrap(),
            "H mod 2 is 1"
        );
        // A finite set: ceil(H/2) = 8.
        assert_eq!(stated(&h.ceil_div(2).unwrap(), &c(8)).unwrap(), "H is 15 or 16");
        assert_eq!(stated(&h.ceil_div(8).unwrap(), &c(8)).unwrap(), "H is 57 to 64");
        assert_eq!(stated(&h.ceil_div(8).unwrap().mul(&h.ceil_div(8).unwrap()).unwrap(), &c(4)), None);
        // Never: ceil(H/2) = H + 1 has no solution at or above 0... only H = -1.
        assert_eq!(stated(&h.ceil_div(2).unwrap(), &h.add(&c(1)).unwrap()), None);
        assert!(Condition::never_equal(&conv_chain(&h, 5).mul(&c(8)).unwrap(), &c(1)));
        assert!(!Condition::never_equal(&conv_chain(&h, 2), &c(1)));
        assert!(!Condition::never_equal(&h.mul(&h).unwrap(), &c(1)), "not quasi-linear: unsure");
        // Plain equations are left alone.
        assert_eq!(stated(&h, &c(8)), None);
    }

    #[test]
    fn element_counts_split_per_axis() {
        let (h, w, ch) = (s("H"), s("W"), s("C"));
        // C*ceil(H/4)*ceil(W/4) = 64*C*ceil(H/32)*ceil(W/32).
        let lhs = ch.mul(&conv_chain(&h, 2)).unwrap().mul(&conv_chain(&w, 2)).unwrap();
        let rhs = ch.mul(&conv_chain(&h, 5)).unwrap().mul(&conv_chain(&w, 5)).unwrap().mul(&c(64)).unwrap();
        let cond = Condition::of_equal(&lhs, &rhs).unwrap();
        assert_eq!(
            cond.to_string(),
            "H mod 32 is 0 or at least 29 and W mod 32 is 0 or at least 29 (for sizes of at least 1) \
             (in particular when H is a multiple of 32 and W is a multiple of 32)"
        );
        // Brute force over sizes of at least 1.
        let residue_ok = |v: i64| v % 32 == 0 || v % 32 >= 29;
        for hv in 1..=100 {
            for wv in 1..=100 {
                for cv in [1, 3] {
                    let at = |n: &str| {
                        Some(match n {
                            "H" => hv,
                            "W" => wv,
                            _ => cv,
                        })
                    };
                    assert_eq!(lhs.eval(&at) == rhs.eval(&at), residue_ok(hv) && residue_ok(wv), "{hv} {wv}");
                }
            }
        }
        // ceil(H/2)*ceil(W/2)*C as a Reshape target of 4*... with one axis exact.
        let lhs = h.ceil_div(2).unwrap().mul(&w.ceil_div(2).unwrap()).unwrap().mul(&ch).unwrap();
        let rhs = h.mul(&w.ceil_div(2).unwrap()).unwrap().mul(&ch).unwrap();
        // 2*ceil(H/2) = 2*H is not the ratio: slopes 1/2 vs 1 make c2/c1 = 1 ≠ 1/2.
        assert_eq!(Condition::of_equal(&lhs, &rhs), None);
        let rhs = h.mul(&w.ceil_div(2).unwrap()).unwrap().mul(&ch).unwrap();
        let lhs2 = lhs.mul(&c(2)).unwrap();
        let cond = Condition::of_equal(&lhs2, &rhs).unwrap();
        assert_eq!(cond.to_string(), "H is a multiple of 2 (for sizes of at least 1)");
        for hv in 1..=60 {
            for wv in 1..=20 {
                let at = |n: &str| {
                    Some(match n {
                        "H" => hv,
                        "W" => wv,
                        _ => 5,
                    })
                };
                assert_eq!(lhs2.eval(&at) == rhs.eval(&at), hv % 2 == 0);
            }
        }
    }

    #[test]
    fn mixed_signs_are_not_split() {
        // ceil(H/2)*floor(W/2) = H*W/4 cannot be split: one factor above, one below.
        let (h, w) = (s("H"), s("W"));
        let lhs = h.ceil_div(2).unwrap().mul(&w.floor_div(2).unwrap()).unwrap().mul(&c(4)).unwrap();
        let rhs = h.mul(&w).unwrap();
        assert_eq!(Condition::of_equal(&lhs, &rhs), None);
    }
}
