//! An operator call's arguments: by position or by keyword, with the
//! operator's defaults filled in by the caller (TorchScript omits trailing
//! arguments equal to their defaults).

use super::value::{Val, T};

/// The arguments of one call.
pub struct Args<'a> {
    /// The operator, for messages (`aten::conv2d`).
    pub op: String,
    positional: Vec<Val<'a>>,
    keywords: Vec<(&'a str, Val<'a>)>,
}

impl<'a> Args<'a> {
    /// Arguments as written.
    pub fn new(op: &str, positional: Vec<Val<'a>>, keywords: Vec<(&'a str, Val<'a>)>) -> Args<'a> {
        Args { op: op.to_string(), positional, keywords }
    }

    /// Argument `i` (or the keyword `name`), if given and not `None`.
    pub fn get(&self, i: usize, name: &str) -> Option<&Val<'a>> {
        let v = self.positional.get(i).or_else(|| self.keywords.iter().find(|(k, _)| *k == name).map(|(_, v)| v))?;
        (!v.is_none()).then_some(v)
    }

    /// How many positional arguments were given.
    pub fn len(&self) -> usize {
        self.positional.len()
    }

    /// Whether none were given.
    pub fn is_empty(&self) -> bool {
        self.positional.is_empty() && self.keywords.is_empty()
    }

    /// Argument `i` as a tensor.
    pub fn tensor(&self, i: usize, name: &str) -> Result<T, String> {
        match self.get(i, name) {
            Some(Val::Tensor(t)) => Ok(*t),
            Some(other) => Err(format!("{}: argument '{name}' is {}, expected a tensor", self.op, other.describe())),
            None => Err(format!("{}: argument '{name}' is missing", self.op)),
        }
    }

    /// Argument `i` as a tensor, if given.
    pub fn opt_tensor(&self, i: usize, name: &str) -> Result<Option<T>, String> {
        match self.get(i, name) {
            None => Ok(None),
            Some(Val::Tensor(t)) => Ok(Some(*t)),
            Some(other) => Err(format!("{}: argument '{name}' is {}, expected a tensor", self.op, other.describe())),
        }
    }

    /// Argument `i` as an int known at import, or `default`.
    pub fn int(&self, i: usize, name: &str, default: i64) -> Result<i64, String> {
        match self.get(i, name) {
            None => Ok(default),
            Some(v) => v.as_int().ok_or_else(|| format!("{}: argument '{name}' must be known at import", self.op)),
        }
    }

    /// Argument `i` as a float known at import, or `default`.
    pub fn float(&self, i: usize, name: &str, default: f64) -> Result<f64, String> {
        match self.get(i, name) {
            None => Ok(default),
            Some(v) => {
                v.as_f64().ok_or_else(|| format!("{}: argument '{name}' must be a number known at import", self.op))
            }
        }
    }

    /// Argument `i` as a bool known at import, or `default`.
    pub fn bool(&self, i: usize, name: &str, default: bool) -> Result<bool, String> {
        Ok(self.int(i, name, i64::from(default))? != 0)
    }

    /// Argument `i` as ints known at import (one int repeats `n` times), or `default`.
    pub fn ints(&self, i: usize, name: &str, n: usize, default: &[i64]) -> Result<Vec<i64>, String> {
        match self.get(i, name) {
            None => Ok(default.to_vec()),
            Some(Val::Int(k)) => Ok(vec![*k; n]),
            Some(v) => {
                v.as_ints().ok_or_else(|| format!("{}: argument '{name}' must be ints known at import", self.op))
            }
        }
    }

    /// Argument `i` as a string, if given.
    pub fn str(&self, i: usize, name: &str) -> Option<&str> {
        match self.get(i, name) {
            Some(Val::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// The raw argument `i`, `None` included.
    pub fn raw(&self, i: usize, name: &str) -> Option<&Val<'a>> {
        self.positional.get(i).or_else(|| self.keywords.iter().find(|(k, _)| *k == name).map(|(_, v)| v))
    }
}
