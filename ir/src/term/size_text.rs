//! Size expressions as exporters write them in `dim_param`s.
//!
//! PyTorch's exporters state symbolic dims as sympy text over the input
//! symbols: `4*batch`, `batch*seq`, `((seq**2)//seq)`, `Max(1, s0)`,
//! `s0 + 1`, `floor(s0/2)`, `Mod(s0, 2)`, `CeilToInt(IntTrueDiv(s0, 2))`.
//! [`SizeExpr::parse`] reads that text (and diamond's own printing of a
//! [`SizeExpr`], which is a subset of it) into the normal form, so that two
//! spellings of one size compare equal. True division is kept exact: `s/2`
//! is only a size under `floor`/`ceiling`, or when it divides exactly;
//! division by a symbolic size must be exact (`seq**2//seq` is `seq`).
//! [`size_text_symbols`] lists the identifiers a text names, function names
//! excluded, so a caller can tell a claim over known symbols from a name an
//! exporter invented (`Flattenout0_dim_0`, `unk__3`).

use super::SizeExpr;

/// Why a text is not a size expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeTextError(pub String);

impl std::fmt::Display for SizeTextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SizeTextError {}

#[derive(Clone, Debug, PartialEq)]
enum Token<'a> {
    Int(i64),
    Ident(&'a str),
    Op(&'static str),
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

fn tokenize(text: &str) -> Result<Vec<Token<'_>>, SizeTextError> {
    const OPS: [&str; 11] = ["**", "//", "+", "-", "*", "/", "%", "(", ")", ",", "^"];
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c.is_ascii_digit() {
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let n = rest[..end].parse().map_err(|_| SizeTextError(format!("number too large in '{text}'")))?;
            tokens.push(Token::Int(n));
            rest = &rest[end..];
        } else if is_ident_start(c) {
            let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
            tokens.push(Token::Ident(&rest[..end]));
            rest = &rest[end..];
        } else if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            tokens.push(Token::Op(op));
            rest = &rest[op.len()..];
        } else {
            return Err(SizeTextError(format!("unexpected '{c}' in size expression '{text}'")));
        }
    }
    Ok(tokens)
}

/// The identifiers `text` names as sizes (function names excluded), in
/// order of first appearance; empty when the text does not tokenize.
pub fn size_text_symbols(text: &str) -> Vec<&str> {
    let Ok(tokens) = tokenize(text) else { return Vec::new() };
    let mut out: Vec<&str> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if let Token::Ident(name) = t {
            let is_call = matches!(tokens.get(i + 1), Some(Token::Op("(")));
            if !is_call && !out.contains(name) {
                out.push(name);
            }
        }
    }
    out
}

/// An intermediate value: a size, or a size over a positive constant that
/// does not divide it (only `floor`/`ceiling` make it a size again).
#[derive(Clone, Debug)]
enum Value {
    Size(SizeExpr),
    Ratio(SizeExpr, u64),
}

struct Parser<'t, 'a> {
    tokens: &'t [Token<'a>],
    at: usize,
    text: &'a str,
    depth: usize,
}

impl SizeExpr {
    /// Reads a size expression in sympy's or diamond's spelling.
    pub fn parse(text: &str) -> Result<SizeExpr, SizeTextError> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens: &tokens, at: 0, text, depth: 0 };
        let value = p.sum()?;
        if p.at != tokens.len() {
            return Err(p.error("unexpected text after the expression"));
        }
        p.size(value)
    }
}

impl<'a> Parser<'_, 'a> {
    fn error(&self, what: &str) -> SizeTextError {
        SizeTextError(format!("{what} in size expression '{}'", self.text))
    }

    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.at)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Token::Op(o)) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), SizeTextError> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(self.error(&format!("expected '{op}'")))
        }
    }

    fn overflow(&self) -> SizeTextError {
        self.error("overflow")
    }

    /// A value that must be a size (not a fraction).
    fn size(&self, v: Value) -> Result<SizeExpr, SizeTextError> {
        match v {
            Value::Size(e) => Ok(e),
            Value::Ratio(..) => Err(self.error("a fraction that is not rounded")),
        }
    }

    fn sum(&mut self) -> Result<Value, SizeTextError> {
        self.depth += 1;
        if self.depth > 64 {
            return Err(self.error("nesting too deep"));
        }
        let mut acc = self.term()?;
        loop {
            let negate = if self.eat("+") {
                false
            } else if self.eat("-") {
                true
            } else {
                break;
            };
            let rhs = self.term()?;
            let a = self.size(acc)?;
            let mut b = self.size(rhs)?;
            if negate {
                b = b.mul(&SizeExpr::constant(-1)).ok_or_else(|| self.overflow())?;
            }
            acc = Value::Size(a.add(&b).ok_or_else(|| self.overflow())?);
        }
        self.depth -= 1;
        Ok(acc)
    }

    fn term(&mut self) -> Result<Value, SizeTextError> {
        let mut acc = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(Token::Op(op @ ("*" | "/" | "//" | "%"))) => *op,
                _ => break,
            };
            self.at += 1;
            let rhs = self.unary()?;
            acc = match op {
                "*" => Value::Size(self.size(acc)?.mul(&self.size(rhs)?).ok_or_else(|| self.overflow())?),
                "/" => self.true_div(acc, rhs)?,
                "//" => Value::Size(self.floor_div(self.size(acc)?, self.size(rhs)?)?),
                _ => Value::Size(self.modulo(self.size(acc)?, self.size(rhs)?)?),
            };
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<Value, SizeTextError> {
        if self.eat("-") {
            let v = self.unary()?;
            let v = self.size(v)?;
            return Ok(Value::Size(v.mul(&SizeExpr::constant(-1)).ok_or_else(|| self.overflow())?));
        }
        if self.eat("+") {
            return self.unary();
        }
        let base = self.atom()?;
        if self.eat("**") || self.eat("^") {
            let exponent = self.unary()?;
            let exponent = self.size(exponent)?;
            let n = exponent
                .as_constant()
                .filter(|n| (0..=16).contains(n))
                .ok_or_else(|| self.error("a power that is not a small constant"))?;
            let base = self.size(base)?;
            let mut product = SizeExpr::constant(1);
            for _ in 0..n {
                product = product.mul(&base).ok_or_else(|| self.overflow())?;
            }
            return Ok(Value::Size(product));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Value, SizeTextError> {
        match self.peek().cloned() {
            Some(Token::Int(n)) => {
                self.at += 1;
                Ok(Value::Size(SizeExpr::constant(n)))
            }
            Some(Token::Op("(")) => {
                self.at += 1;
                let v = self.sum()?;
                self.expect(")")?;
                Ok(v)
            }
            Some(Token::Ident(name)) => {
                self.at += 1;
                if self.eat("(") {
                    let mut args = Vec::new();
                    if !self.eat(")") {
                        loop {
                            args.push(self.sum()?);
                            if self.eat(")") {
                                break;
                            }
                            self.expect(",")?;
                        }
                    }
                    self.call(name, args)
                } else {
                    Ok(Value::Size(SizeExpr::symbol(name)))
                }
            }
            _ => Err(self.error("expected a number, a name or '('")),
        }
    }

    fn call(&self, name: &str, args: Vec<Value>) -> Result<Value, SizeTextError> {
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(self.error(&format!("{name} takes {n} argument(s)")))
            }
        };
        match name {
            "floor" | "FloorToInt" | "TruncToInt" | "Trunc" | "int" => {
                arity(1)?;
                self.round(args.into_iter().next(), false)
            }
            "ceiling" | "ceil" | "CeilToInt" => {
                arity(1)?;
                self.round(args.into_iter().next(), true)
            }
            "Max" | "max" | "Min" | "min" => {
                if args.is_empty() {
                    return Err(self.error(&format!("{name} needs arguments")));
                }
                let is_min = name.eq_ignore_ascii_case("min");
                let mut sizes = args.into_iter().map(|a| self.size(a));
                let mut acc = sizes.next().expect("non-empty")?;
                for s in sizes {
                    let s = s?;
                    acc = if is_min { SizeExpr::min(&acc, &s) } else { SizeExpr::max(&acc, &s) };
                }
                Ok(Value::Size(acc))
            }
            "Mod" | "PythonMod" => {
                arity(2)?;
                let mut it = args.into_iter();
                let (a, b) = (self.size(it.next().expect("2"))?, self.size(it.next().expect("2"))?);
                Ok(Value::Size(self.modulo(a, b)?))
            }
            "FloorDiv" => {
                arity(2)?;
                let mut it = args.into_iter();
                let (a, b) = (self.size(it.next().expect("2"))?, self.size(it.next().expect("2"))?);
                Ok(Value::Size(self.floor_div(a, b)?))
            }
            "IntTrueDiv" | "TrueDiv" | "CleanDiv" => {
                arity(2)?;
                let mut it = args.into_iter();
                let (a, b) = (it.next().expect("2"), it.next().expect("2"));
                self.true_div(a, b)
            }
            _ => Err(self.error(&format!("unknown function '{name}'"))),
        }
    }

    fn round(&self, arg: Option<Value>, ceil: bool) -> Result<Value, SizeTextError> {
        match arg {
            Some(Value::Size(e)) => Ok(Value::Size(e)),
            Some(Value::Ratio(e, d)) => {
                let r = if ceil { e.ceil_div(d) } else { e.floor_div(d) };
                Ok(Value::Size(r.ok_or_else(|| self.overflow())?))
            }
            None => Err(self.error("missing argument")),
        }
    }

    fn positive_constant(&self, e: &SizeExpr) -> Option<u64> {
        e.as_constant().filter(|&d| d > 0).map(|d| d as u64)
    }

    fn true_div(&self, a: Value, b: Value) -> Result<Value, SizeTextError> {
        let b = self.size(b)?;
        let (num, den) = match a {
            Value::Size(e) => (e, 1u64),
            Value::Ratio(e, d) => (e, d),
        };
        if let Some(d) = self.positive_constant(&b) {
            let den = den.checked_mul(d).ok_or_else(|| self.overflow())?;
            return Ok(match num.div_exact(&SizeExpr::constant(den as i64)) {
                Some(q) => Value::Size(q),
                None => Value::Ratio(num, den),
            });
        }
        if den == 1 {
            if let Some(q) = num.div_exact(&b) {
                return Ok(Value::Size(q));
            }
        }
        Err(self.error("a division by a symbolic size that is not exact"))
    }

    fn floor_div(&self, a: SizeExpr, b: SizeExpr) -> Result<SizeExpr, SizeTextError> {
        if let Some(d) = self.positive_constant(&b) {
            return a.floor_div(d).ok_or_else(|| self.overflow());
        }
        a.div_exact(&b).ok_or_else(|| self.error("a floor division by a symbolic size that is not exact"))
    }

    /// `a mod c = a - c*floor(a/c)` for a positive constant `c`.
    fn modulo(&self, a: SizeExpr, b: SizeExpr) -> Result<SizeExpr, SizeTextError> {
        let d = self.positive_constant(&b).ok_or_else(|| self.error("a modulus that is not a positive constant"))?;
        let q = a.floor_div(d).ok_or_else(|| self.overflow())?;
        let dq = q.mul(&SizeExpr::constant(d as i64)).ok_or_else(|| self.overflow())?;
        a.add(&dq.mul(&SizeExpr::constant(-1)).ok_or_else(|| self.overflow())?).ok_or_else(|| self.overflow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> String {
        SizeExpr::parse(text).map(|e| e.to_string()).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn sympy_spellings_normalize() {
        assert_eq!(p("4*batch"), "4*batch");
        assert_eq!(p("batch*seq"), p("seq * batch"));
        assert_eq!(p("((seq**2)//seq)"), "seq");
        assert_eq!(p("s0 + 1"), "s0+1");
        assert_eq!(p("Max(1, s0)"), p("max(s0, 1)"));
        assert_eq!(p("floor(s0/2)"), p("s0//2"));
        assert_eq!(p("CeilToInt(IntTrueDiv(s0, 2))"), p("ceiling(s0/2)"));
        assert_eq!(p("2*s0/2"), "s0");
        assert_eq!(p("Mod(s0, 4)"), "s0-4*floor(s0/4)");
        assert_eq!(p("-(-(seq))"), "seq");
        assert_eq!(p("((s0 - 1)//2) + 1"), "floor((s0-1)/2)+1");
    }

    #[test]
    fn diamond_printing_reads_back() {
        for text in ["2*b*s+b+3", "floor((h-1)/2)+1", "min(512, seq)", "ceil(s/3)", "b*b-1"] {
            let once = SizeExpr::parse(text).unwrap();
            assert_eq!(SizeExpr::parse(&once.to_string()).unwrap(), once, "{text}");
        }
    }

    #[test]
    fn what_is_not_a_size() {
        assert!(p("s0/2").starts_with("error"));
        assert!(p("seq/batch").starts_with("error"));
        assert!(p("Foo(s0)").starts_with("error"));
        assert!(p("s0 +").starts_with("error"));
        assert!(p("s0 $ 2").starts_with("error"));
        assert!(p(&"(".repeat(200)).starts_with("error"));
    }

    #[test]
    fn symbols_exclude_function_names() {
        assert_eq!(size_text_symbols("Max(1, s0) + batch*s0"), vec!["s0", "batch"]);
        assert_eq!(size_text_symbols("Flattenout0_dim_0"), vec!["Flattenout0_dim_0"]);
        assert!(size_text_symbols("3").is_empty());
    }
}
