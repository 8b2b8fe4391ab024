//! String operators: `StringNormalizer` (stop words removed from a `[C]` or
//! `[1, C]` tensor, so the last axis is known only from the elements),
//! `StringConcat` (broadcasting), `StringSplit` (a new last axis as long as
//! the most substrings any element splits into), `RegexFullMatch` (bool,
//! same shape) and `TfIdfVectorizer` (n-gram counts over
//! `max(ngram_indexes) + 1` features).

use super::{set_tensor, shaped_like, unknown_shape};
use crate::rule::{ConstData, ConstValue, Defer, Elem, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

/// The string elements of input `i`, when known.
fn strings(ctx: &mut OpCtx, i: usize) -> Option<Vec<String>> {
    let v = ctx.value(i)?;
    match &v.data {
        ConstData::Strings(s) => Some(s.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect()),
        _ => None,
    }
}

/// `StringNormalizer`: see the module documentation.
pub(super) fn string_normalizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = Some(ElemType::String);
    if !matches!(dims.len(), 1 | 2) {
        ctx.rank_conflict(0, format!("the input has rank {}; StringNormalizer takes [C] or [1, C]", dims.len()));
        unknown_shape(ctx, 0, t);
        return Ok(());
    }
    let stopwords = ctx.attr_strs("stopwords").unwrap_or_default();
    let known = strings(ctx, 0);
    if stopwords.is_empty() && known.is_none() {
        shaped_like(ctx, 0, 0, t);
        return Ok(());
    }
    let case_sensitive = ctx.attr_int("is_case_sensitive").unwrap_or(0) != 0;
    let changes_case = ctx.attr_str("case_change_action").is_some_and(|a| a != "NONE");
    let last = match known.and_then(|xs| kept_count(&xs, &stopwords, case_sensitive, changes_case)) {
        Some(n) => ctx.known(n.max(1) as u64),
        None => ctx.unknown_dim(),
    };
    let mut out = dims;
    if let Some(d) = out.last_mut() {
        *d = last;
    }
    set_tensor(ctx, 0, out, t);
    Ok(())
}

/// How many of `xs` remain once the stop words are removed, where every
/// reading of the operator agrees: `None` when an element is empty, holds a
/// space or a non-ASCII character (the reference implementation drops empty
/// strings, removes stop words inside space-separated text and strips
/// accents), or matches a stop word only ignoring case while the case is
/// left unchanged (it then compares case-sensitively).
fn kept_count(xs: &[String], stopwords: &[String], case_sensitive: bool, changes_case: bool) -> Option<usize> {
    let mut kept = 0;
    for x in xs {
        if x.is_empty() || x.contains(' ') || !x.is_ascii() {
            return None;
        }
        let exact = stopwords.iter().any(|s| s == x);
        let folded = stopwords.iter().any(|s| s.eq_ignore_ascii_case(x));
        let removed = match (case_sensitive, changes_case) {
            (true, _) => exact,
            (false, true) => folded,
            (false, false) if exact == folded => exact,
            (false, false) => return None,
        };
        if !removed {
            kept += 1;
        }
    }
    Some(kept)
}

/// `StringConcat`: the inputs broadcast; the result is a string tensor.
pub(super) fn string_concat(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.broadcast(&[0, 1], 0);
    ctx.set_dtype(0, ElemType::String);
    Ok(())
}

/// `RegexFullMatch`: a bool per string.
pub(super) fn regex_full_match(ctx: &mut OpCtx) -> Result<(), Defer> {
    shaped_like(ctx, 0, 0, Some(ElemType::Bool));
    Ok(())
}

/// How many substrings `s` splits into, as Python's `str.split(delimiter, maxsplit)`
/// (`None`: runs of whitespace; a negative `maxsplit`: no limit).
fn split_count(s: &str, delimiter: Option<&str>, maxsplit: Option<i64>) -> usize {
    let limit = maxsplit.filter(|&m| m >= 0).map(|m| m as usize);
    match delimiter {
        None => {
            let words = s.split(is_python_space).filter(|w| !w.is_empty()).count();
            limit.map_or(words, |m| words.min(m.saturating_add(1)))
        }
        Some(d) => {
            let cuts = s.matches(d).count();
            limit.map_or(cuts, |m| cuts.min(m)) + 1
        }
    }
}

/// Whether Python's `str.isspace` holds for `c`: Unicode white space and the
/// separators U+001C to U+001F.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `StringSplit`: substrings `X.shape + [most substrings]` (strings) and their counts `X.shape` (int64).
pub(super) fn string_split(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let delimiter = ctx.attr_str("delimiter").filter(|d| !d.is_empty());
    let maxsplit = ctx.attr_int("maxsplit");
    let counts: Option<Vec<usize>> =
        strings(ctx, 0).map(|xs| xs.iter().map(|s| split_count(s, delimiter.as_deref(), maxsplit)).collect());
    let widest = match &counts {
        Some(c) => ctx.known(c.iter().copied().max().unwrap_or(0) as u64),
        None => ctx.unknown_dim(),
    };
    let mut substrings: Vec<DimTerm> = dims.clone();
    substrings.push(widest);
    set_tensor(ctx, 0, substrings, Some(ElemType::String));
    set_tensor(ctx, 1, dims, Some(ElemType::Int64));
    if let (Some(c), Some(v)) = (counts, ctx.value(0)) {
        let elems = c.iter().map(|&n| Elem::Int(n as i64)).collect();
        ctx.set_value(1, ConstValue::ints(ElemType::Int64, v.shape.clone(), elems));
    }
    Ok(())
}

/// `TfIdfVectorizer`: `[C]` to `[K]`, `[N, C]` to `[N, K]`, with `K = max(ngram_indexes) + 1`; float output.
pub(super) fn tfidf_vectorizer(ctx: &mut OpCtx) -> Result<(), Defer> {
    let dims = ctx.need_dims(0)?;
    let t = Some(ElemType::Float);
    let indexes = ctx.attr_ints("ngram_indexes").unwrap_or_default();
    let features = match indexes.iter().copied().max() {
        Some(m) if m >= 0 && indexes.iter().all(|&i| i >= 0) => m as u64 + 1,
        _ => {
            ctx.invalid("ngram_indexes must be a non-empty list of non-negative indices");
            unknown_shape(ctx, 0, t);
            return Ok(());
        }
    };
    let k = ctx.known(features);
    let out = match dims.as_slice() {
        [_] => vec![k],
        [n, _] => vec![n.clone(), k],
        _ => {
            ctx.rank_conflict(0, format!("the input has rank {}; TfIdfVectorizer takes [C] or [N, C]", dims.len()));
            unknown_shape(ctx, 0, t);
            return Ok(());
        }
    };
    set_tensor(ctx, 0, out, t);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::split_count;

    #[test]
    fn split_counts_follow_python_str_split() {
        assert_eq!(split_count("o n n x", None, Some(2)), 3);
        assert_eq!(split_count(" a  b ", None, None), 2);
        assert_eq!(split_count("", None, None), 0);
        assert_eq!(split_count("", Some("."), None), 1);
        assert_eq!(split_count("a..b", Some("."), None), 3);
        assert_eq!(split_count("a.b.c", Some("."), Some(1)), 2);
        assert_eq!(split_count("a.b", Some("."), Some(-1)), 2);
    }
}
