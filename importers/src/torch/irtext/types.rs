//! Value types as TorchScript prints them after `%name :`.
//!
//! Tensors: `Tensor`, `Float(2, 3, strides=[3, 1], requires_grad=0,
//! device=cpu)`, `Float(*, 4)` (unknown dims), `Long(device=cpu)` (rank 0),
//! `FloatTensor` (element type known, rank not), `Tensor(2, *)`. Others:
//! `int`, `float`, `bool`, `str`, `NoneType`, `Device`, `T[]`, `T?`,
//! `(T, U)`, `NamedTuple(a : T, b : U)`, `Optional[T]`, `List[T]`,
//! `Tuple[T, U]`, `__torch__.Cls`; anything else (`Dict(str, Tensor)`,
//! `Union(Tensor, int)`, `Scalar`) is kept as written.

use super::cursor::{is_ident_char, Cursor};
use super::{IrTextError, IrType};

/// Types nested deeper than this (tuples in tuples, `[]` and `?` suffixes
/// included) are refused, so hostile text cannot exhaust the stack.
pub const MAX_TYPE_DEPTH: usize = 100;

/// Element type names as TorchScript prints them (`c10::toString(ScalarType)`).
const ELEMENT_TYPES: &[&str] = &[
    "Byte",
    "Char",
    "Short",
    "Int",
    "Long",
    "Half",
    "Float",
    "Double",
    "ComplexHalf",
    "ComplexFloat",
    "ComplexDouble",
    "Bool",
    "QInt8",
    "QUInt8",
    "QInt32",
    "BFloat16",
    "QUInt4x2",
    "QUInt2x4",
    "Bits1x8",
    "Bits2x4",
    "Bits4x2",
    "Bits8",
    "Bits16",
    "Float8_e5m2",
    "Float8_e4m3fn",
    "Float8_e5m2fnuz",
    "Float8_e4m3fnuz",
    "UInt16",
    "UInt32",
    "UInt64",
    "UInt1",
    "UInt2",
    "UInt3",
    "UInt4",
    "UInt5",
    "UInt6",
    "UInt7",
    "Int1",
    "Int2",
    "Int3",
    "Int4",
    "Int5",
    "Int6",
    "Int7",
    "Float8_e8m0fnu",
    "Float4_e2m1fn_x2",
    "BComplex32",
];

/// Whether `name` is an element type (`Float`, `Long`, ...).
fn is_element_type(name: &str) -> bool {
    ELEMENT_TYPES.contains(&name)
}

/// Reads one type at the cursor. `depth` counts the types it is nested in.
pub(super) fn parse_type(cur: &mut Cursor<'_>, depth: usize) -> Result<IrType, IrTextError> {
    let mut depth = check_depth(cur, depth)?;
    let mut ty = parse_base_type(cur, depth)?;
    loop {
        if cur.eat("[Undefined]") {
            continue;
        }
        if cur.eat("[]") {
            ty = IrType::List(Box::new(ty));
        } else if cur.eat("?") {
            ty = IrType::Optional(Box::new(ty));
        } else {
            return Ok(ty);
        }
        depth = check_depth(cur, depth + 1)?;
    }
}

/// Fails when types nest deeper than [`MAX_TYPE_DEPTH`].
fn check_depth(cur: &Cursor<'_>, depth: usize) -> Result<usize, IrTextError> {
    if depth > MAX_TYPE_DEPTH {
        return Err(cur.error(format!("types nested deeper than {MAX_TYPE_DEPTH}")));
    }
    Ok(depth)
}

/// A type without `[]` / `?` suffixes.
fn parse_base_type(cur: &mut Cursor<'_>, depth: usize) -> Result<IrType, IrTextError> {
    if cur.peek() == Some('(') {
        return parse_type_list(cur, '(', ')', depth).map(IrType::Tuple);
    }
    let start = cur.pos();
    let name = cur.take_while(|c| is_ident_char(c) || c == '.');
    if name.is_empty() {
        return Err(cur.error(format!("expected a type, found {}", cur.found())));
    }
    let ty = match name {
        "int" => IrType::Int,
        "float" => IrType::Float,
        "bool" => IrType::Bool,
        "str" => IrType::Str,
        "NoneType" => IrType::NoneType,
        "Device" => IrType::Device,
        "Tensor" => parse_tensor_type(cur, None)?,
        "Optional" if cur.peek() == Some('[') => IrType::Optional(Box::new(parse_single_bracketed(cur, depth)?)),
        "List" if cur.peek() == Some('[') => IrType::List(Box::new(parse_single_bracketed(cur, depth)?)),
        "Tuple" if cur.peek() == Some('[') => IrType::Tuple(parse_type_list(cur, '[', ']', depth)?),
        "NamedTuple" if cur.peek() == Some('(') => IrType::Tuple(parse_named_tuple_fields(cur, depth)?),
        _ if is_element_type(name) => parse_tensor_type(cur, Some(name))?,
        _ if name.strip_suffix("Tensor").is_some_and(is_element_type) => parse_rankless_tensor_type(cur, name)?,
        _ if name.starts_with("__torch__.") && !at_type_group(cur) => IrType::Class(name.to_string()),
        _ => parse_other_type(cur, start)?,
    };
    Ok(ty)
}

/// `[T]` after `Optional` or `List`.
fn parse_single_bracketed(cur: &mut Cursor<'_>, depth: usize) -> Result<IrType, IrTextError> {
    cur.expect("[")?;
    cur.skip_inline_space();
    let inner = parse_type(cur, depth + 1)?;
    cur.skip_inline_space();
    cur.expect("]")?;
    Ok(inner)
}

/// `(T, U, ...)` or `[T, U, ...]`, possibly empty.
fn parse_type_list(cur: &mut Cursor<'_>, open: char, close: char, depth: usize) -> Result<Vec<IrType>, IrTextError> {
    cur.expect(&open.to_string())?;
    let mut items = Vec::new();
    cur.skip_inline_space();
    if cur.eat(&close.to_string()) {
        return Ok(items);
    }
    loop {
        cur.skip_inline_space();
        items.push(parse_type(cur, depth + 1)?);
        cur.skip_inline_space();
        if cur.eat(&close.to_string()) {
            return Ok(items);
        }
        if !cur.eat(",") {
            return Err(cur.error(format!("expected `,` or `{close}` in a type list, found {}", cur.found())));
        }
    }
}

/// `(a : T, b : U = default)` after `NamedTuple`: the field types.
fn parse_named_tuple_fields(cur: &mut Cursor<'_>, depth: usize) -> Result<Vec<IrType>, IrTextError> {
    cur.expect("(")?;
    let mut fields = Vec::new();
    cur.skip_inline_space();
    if cur.eat(")") {
        return Ok(fields);
    }
    loop {
        cur.skip_inline_space();
        if cur.take_while(is_ident_char).is_empty() {
            return Err(cur.error(format!("expected a field name in NamedTuple, found {}", cur.found())));
        }
        cur.skip_inline_space();
        cur.expect(":")?;
        cur.skip_inline_space();
        fields.push(parse_type(cur, depth + 1)?);
        cur.skip_inline_space();
        if cur.eat("=") {
            cur.take_balanced("a field default", false, |c| matches!(c.peek(), Some(',' | ')')))?;
        }
        if cur.eat(")") {
            return Ok(fields);
        }
        if !cur.eat(",") {
            return Err(cur.error(format!("expected `,` or `)` in NamedTuple, found {}", cur.found())));
        }
    }
}

/// Whether a bracketed group (`(...)`, `[...]` but not `[]`, `<...>`)
/// follows a type name.
fn at_type_group(cur: &Cursor<'_>) -> bool {
    match cur.peek() {
        Some('(' | '<') => true,
        Some('[') => cur.peek_second() != Some(']') && !cur.starts_with("[Undefined]"),
        _ => false,
    }
}

/// A type this reader does not model, kept as written: the name read from
/// `start` and one bracketed group after it, if any.
fn parse_other_type(cur: &mut Cursor<'_>, start: usize) -> Result<IrType, IrTextError> {
    if at_type_group(cur) {
        let group_start = cur.pos();
        cur.take_balanced("a type", true, |c| c.pos() > group_start)?;
    }
    Ok(IrType::Other(cur.since(start).to_string()))
}

/// What the parentheses after a tensor type name say.
#[derive(Default)]
struct TensorDetails {
    /// Whether there were parentheses at all.
    parenthesized: bool,
    /// The dims listed, `None` for `*` and symbolic ones.
    dims: Vec<Option<u64>>,
    /// Whether anything but dims was listed.
    has_flags: bool,
    requires_grad: Option<bool>,
    device: Option<String>,
}

/// `Tensor...` or `Float...` after its name (`elem`): rank known when dims
/// are listed, or when `Float(...)` / `Tensor()` list none (rank 0).
fn parse_tensor_type(cur: &mut Cursor<'_>, elem: Option<&str>) -> Result<IrType, IrTextError> {
    let details = parse_tensor_details(cur)?;
    let rank_zero = details.parenthesized && (elem.is_some() || !details.has_flags);
    let sizes = if !details.dims.is_empty() || rank_zero { Some(details.dims) } else { None };
    Ok(IrType::Tensor {
        elem: elem.map(str::to_string),
        sizes,
        requires_grad: details.requires_grad,
        device: details.device,
    })
}

/// `FloatTensor`, possibly with `(requires_grad=..., device=...)`: the
/// element type is known, the rank is not.
fn parse_rankless_tensor_type(cur: &mut Cursor<'_>, name: &str) -> Result<IrType, IrTextError> {
    let details = parse_tensor_details(cur)?;
    let sizes = if details.dims.is_empty() { None } else { Some(details.dims) };
    Ok(IrType::Tensor {
        elem: name.strip_suffix("Tensor").map(str::to_string),
        sizes,
        requires_grad: details.requires_grad,
        device: details.device,
    })
}

/// The optional `(dims, key=value, ...)` after a tensor type name.
fn parse_tensor_details(cur: &mut Cursor<'_>) -> Result<TensorDetails, IrTextError> {
    let mut details = TensorDetails::default();
    if !cur.eat("(") {
        return Ok(details);
    }
    details.parenthesized = true;
    cur.skip_inline_space();
    if cur.eat(")") {
        return Ok(details);
    }
    loop {
        cur.skip_inline_space();
        parse_tensor_detail(cur, &mut details)?;
        cur.skip_inline_space();
        if cur.eat(")") {
            return Ok(details);
        }
        if !cur.eat(",") {
            return Err(cur.error(format!("expected `,` or `)` in a tensor type, found {}", cur.found())));
        }
    }
}

/// One item in a tensor type's parentheses: a dim, `*`, `SS(-n)`,
/// `key=value`, or an alias annotation (`a`, `a!`), which is skipped.
fn parse_tensor_detail(cur: &mut Cursor<'_>, details: &mut TensorDetails) -> Result<(), IrTextError> {
    match cur.peek() {
        Some('*') => {
            cur.bump();
            details.dims.push(None);
        }
        Some(c) if c.is_ascii_digit() => details.dims.push(Some(parse_dim(cur)?)),
        Some(_) if cur.eat("SS(") => {
            cur.take_while(|c| c == '-' || c.is_ascii_digit());
            cur.expect(")")?;
            details.dims.push(None);
        }
        Some(c) if is_ident_char(c) => {
            details.has_flags = true;
            let key = cur.take_while(is_ident_char);
            if cur.eat("=") {
                parse_tensor_flag(cur, key, details)?;
            } else {
                cur.take_while(|c| !matches!(c, ',' | ')' | '\n'));
            }
        }
        _ => {
            return Err(
                cur.error(format!("expected a dimension, `*` or `key=value` in a tensor type, found {}", cur.found()))
            )
        }
    }
    Ok(())
}

/// A dimension: decimal digits that fit in 64 bits.
fn parse_dim(cur: &mut Cursor<'_>) -> Result<u64, IrTextError> {
    let start = cur.pos();
    let digits = cur.take_while(|c| c.is_ascii_digit());
    digits.parse().map_err(|_| cur.error_at(start, format!("dimension {digits} is out of range")))
}

/// The value of `key=` in a tensor type: `requires_grad` and `device` are
/// kept, `strides` and unknown keys skipped.
fn parse_tensor_flag(cur: &mut Cursor<'_>, key: &str, details: &mut TensorDetails) -> Result<(), IrTextError> {
    let start = cur.pos();
    match key {
        "requires_grad" => {
            let word = cur.take_while(is_ident_char);
            details.requires_grad = Some(match word {
                "1" | "True" | "true" => true,
                "0" | "False" | "false" => false,
                _ => return Err(cur.error_at(start, format!("requires_grad must be 0 or 1, not `{word}`"))),
            });
        }
        "device" => {
            let device = cur.take_while(|c| !matches!(c, ',' | ')' | '\n')).trim();
            if device.is_empty() {
                return Err(cur.error_at(start, "empty device in a tensor type"));
            }
            details.device = Some(device.to_string());
        }
        _ => {
            cur.take_balanced(key, false, |c| matches!(c.peek(), Some(',' | ')')))?;
        }
    }
    Ok(())
}
