//! Node attributes: the `[name="fc"]` or `[value=0.1]` after a node kind.
//!
//! Values as TorchScript prints them: ints (bools as `0`/`1`), floats
//! (`1.`, `1.0000000000000001e-05`, `inf`, `nan`), quoted strings with C
//! escapes, lists (`[1, 2]`, `[1.5, 2.]`, `[True, False]`), tensors (`{4}`
//! when they hold one element, `<Tensor>` when large, else torch's own
//! print such as ` 0.5000  0.2500 [ CPUFloatType{2} ]`), and anything else
//! (tuples, complex numbers, `<Graph>`) kept as written.

use super::cursor::{is_ident_char, Cursor};
use super::{IrAttr, IrTextError};

/// Reads `[name=value, ...]` at the cursor.
pub(super) fn parse_attrs(cur: &mut Cursor<'_>) -> Result<Vec<(String, IrAttr)>, IrTextError> {
    cur.expect("[")?;
    let mut attrs = Vec::new();
    cur.skip_inline_space();
    if cur.eat("]") {
        return Ok(attrs);
    }
    loop {
        cur.skip_inline_space();
        let name = cur.take_while(is_ident_char);
        if name.is_empty() {
            return Err(cur.error(format!("expected an attribute name, found {}", cur.found())));
        }
        cur.expect("=")?;
        let value_start = cur.pos();
        let raw = cur.take_balanced("an attribute value", false, at_attr_value_end)?;
        let value = classify_attr(raw.trim()).map_err(|what| cur.error_at(value_start, what))?;
        attrs.push((name.to_string(), value));
        if cur.eat("]") {
            return Ok(attrs);
        }
        cur.expect(",")?;
    }
}

/// Whether an attribute value ends here: at the closing `]`, or at a `,`
/// that starts the next `name=`.
fn at_attr_value_end(cur: &Cursor<'_>) -> bool {
    match cur.peek() {
        Some(']') => true,
        Some(',') => starts_attr(&cur.rest()[1..]),
        _ => false,
    }
}

/// Whether `text` starts (after spaces) with `name=`.
fn starts_attr(text: &str) -> bool {
    let text = text.trim_start_matches([' ', '\t']);
    let name_len = text.find(|c: char| !is_ident_char(c)).unwrap_or(text.len());
    name_len > 0 && text[name_len..].starts_with('=')
}

/// What a printed attribute value is.
pub(super) fn classify_attr(raw: &str) -> Result<IrAttr, String> {
    if raw.is_empty() {
        return Err("empty attribute value".to_string());
    }
    if raw.starts_with('"') {
        return decode_string(raw).map(IrAttr::Str);
    }
    if looks_like_tensor(raw) {
        return Ok(IrAttr::Tensor(raw.to_string()));
    }
    if let Some(int) = parse_int(raw) {
        return Ok(IrAttr::Int(int));
    }
    if let Some(float) = parse_float(raw) {
        return Ok(IrAttr::Float(float));
    }
    let list = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')).and_then(parse_number_list);
    Ok(list.unwrap_or_else(|| IrAttr::Other(raw.to_string())))
}

/// Whether `raw` is how TorchScript prints a tensor: `{4}`, `<Tensor>`, or
/// the values followed by `[ CPUFloatType{2} ]` (possibly with more after
/// the type, as quantized tensors have).
fn looks_like_tensor(raw: &str) -> bool {
    if (raw.starts_with('{') && raw.ends_with('}')) || raw == "<Tensor>" {
        return true;
    }
    let Some(body) = raw.strip_suffix(']') else { return false };
    let Some(open) = body.rfind('[') else { return false };
    let footer = body[open + 1..].trim_start();
    let name_len = footer.find(|c: char| !is_ident_char(c)).unwrap_or(footer.len());
    footer[..name_len].ends_with("Type") && footer[name_len..].starts_with('{')
}

/// An integer: optional `-`, decimal digits, within 64 bits.
fn parse_int(raw: &str) -> Option<i64> {
    let digits = raw.strip_prefix('-').unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

/// A float as printed: digits with `.` and/or an exponent, `inf`, `nan`.
fn parse_float(raw: &str) -> Option<f64> {
    let body = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let special = ["inf", "infinity", "nan"].iter().any(|s| body.eq_ignore_ascii_case(s));
    let numeric = body.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && body.contains(['.', 'e', 'E'])
        && body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if special || numeric {
        raw.parse().ok()
    } else {
        None
    }
}

/// The inside of `[...]` as ints (bools as 1 and 0) or floats; `None`
/// when an item is neither.
fn parse_number_list(inner: &str) -> Option<IrAttr> {
    let inner = inner.trim();
    if inner.is_empty() {
        return Some(IrAttr::Ints(Vec::new()));
    }
    let items: Vec<&str> = inner.split(',').map(str::trim).collect();
    let ints: Option<Vec<i64>> = items.iter().map(|item| parse_bool_or_int(item)).collect();
    if let Some(ints) = ints {
        return Some(IrAttr::Ints(ints));
    }
    let floats: Option<Vec<f64>> =
        items.iter().map(|item| parse_int(item).map(|i| i as f64).or_else(|| parse_float(item))).collect();
    floats.map(IrAttr::Floats)
}

/// An int, or `True` / `False` as 1 / 0.
fn parse_bool_or_int(item: &str) -> Option<i64> {
    match item {
        "True" => Some(1),
        "False" => Some(0),
        _ => parse_int(item),
    }
}

/// The text of a double-quoted string literal as TorchScript prints it
/// (`c10::printQuotedString`): `\\ \' \" \a \b \f \n \r \t \v`, and a
/// backslash with three "octal digits" for any other byte. Bytes above
/// 0x7f go through a signed `char`, so their digits can fall below `0`
/// (`é` prints as `\0)+\/.)`); each digit is read as its distance from `0`.
pub(super) fn decode_string(raw: &str) -> Result<String, String> {
    let inner = raw
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| format!("string `{raw}` is not closed"))?;
    let mut bytes = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let escaped = chars.next().ok_or("string ends in a lone `\\`")?;
        let byte = match simple_escape(escaped) {
            Some(byte) => byte,
            None => octal_escape(escaped, &mut chars)?,
        };
        bytes.push(byte);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The byte of `\x` for the one-letter escapes.
fn simple_escape(c: char) -> Option<u8> {
    Some(match c {
        '\\' => b'\\',
        '\'' => b'\'',
        '"' => b'"',
        'a' => 0x07,
        'b' => 0x08,
        'f' => 0x0c,
        'n' => b'\n',
        'r' => b'\r',
        't' => b'\t',
        'v' => 0x0b,
        _ => return None,
    })
}

/// The byte of a three-digit escape whose first digit is `first`; digits
/// run from `0 - 7` to `0 + 7` (see [`decode_string`]).
fn octal_escape(first: char, rest: &mut std::str::Chars<'_>) -> Result<u8, String> {
    let digit = |c: Option<char>| -> Result<i32, String> {
        let c = c.ok_or("string ends inside an escape")?;
        let value = c as i32 - '0' as i32;
        if (-7..=7).contains(&value) {
            Ok(value)
        } else {
            Err(format!("unknown escape `\\{first}` in string"))
        }
    };
    let value = digit(Some(first))? * 64 + digit(rest.next())? * 8 + digit(rest.next())?;
    // Signed-char bytes come out negative; wrap them back to 0x80..=0xff.
    Ok(value.rem_euclid(256) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars() {
        assert_eq!(classify_attr("1"), Ok(IrAttr::Int(1)));
        assert_eq!(classify_attr("-9223372036854775808"), Ok(IrAttr::Int(i64::MIN)));
        assert_eq!(classify_attr("1."), Ok(IrAttr::Float(1.0)));
        assert_eq!(classify_attr("-0."), Ok(IrAttr::Float(-0.0)));
        assert_eq!(classify_attr("1.0000000000000001e-05"), Ok(IrAttr::Float(1e-5)));
        assert_eq!(classify_attr("inf"), Ok(IrAttr::Float(f64::INFINITY)));
        assert!(matches!(classify_attr("nan"), Ok(IrAttr::Float(f)) if f.is_nan()));
        assert_eq!(classify_attr("99999999999999999999"), Ok(IrAttr::Other("99999999999999999999".into())));
        assert_eq!(classify_attr("1.+2.j"), Ok(IrAttr::Other("1.+2.j".into())));
        assert!(classify_attr("").is_err());
    }

    #[test]
    fn lists() {
        assert_eq!(classify_attr("[1, 2]"), Ok(IrAttr::Ints(vec![1, 2])));
        assert_eq!(classify_attr("[]"), Ok(IrAttr::Ints(vec![])));
        assert_eq!(classify_attr("[1.5, 2.]"), Ok(IrAttr::Floats(vec![1.5, 2.0])));
        assert_eq!(classify_attr("[True, False]"), Ok(IrAttr::Ints(vec![1, 0])));
        assert_eq!(classify_attr("[\"a\", \"b\"]"), Ok(IrAttr::Other("[\"a\", \"b\"]".into())));
        assert_eq!(classify_attr("[[1], [2]]"), Ok(IrAttr::Other("[[1], [2]]".into())));
    }

    #[test]
    fn tensors() {
        for raw in ["{4}", "{2.5}", "{(1,2)}", "<Tensor>", "0.5000  0.2500 [ CPUFloatType{2} ]", "[ CPUFloatType{0} ]"]
        {
            assert_eq!(classify_attr(raw), Ok(IrAttr::Tensor(raw.into())), "{raw}");
        }
        let quantized = "1  2 [ QuantizedCPUQInt8Type{2}, qscheme: per_tensor_affine, scale: 0.1, zero_point: 0 ]";
        assert_eq!(classify_attr(quantized), Ok(IrAttr::Tensor(quantized.into())));
    }

    #[test]
    fn strings() {
        assert_eq!(decode_string(r#""fc""#), Ok("fc".into()));
        assert_eq!(decode_string(r#""hello \"q\" \n""#), Ok("hello \"q\" \n".into()));
        assert_eq!(decode_string(r#""\0)+\/.)\001\t\'""#), Ok("é\u{1}\t'".into()));
        assert!(decode_string(r#""\q""#).is_err());
        assert!(decode_string(r#""\"#).is_err());
    }
}
