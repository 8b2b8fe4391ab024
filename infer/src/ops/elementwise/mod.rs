//! Operator rules: element-wise and same-shape operators — unary math and
//! activations (same shape and type as the input), binary arithmetic,
//! comparison, logic and bit operations with NumPy broadcasting (and the
//! legacy `broadcast`/`axis` attributes before opset 7), the variadic
//! `Sum`/`Mean`/`Max`/`Min`, `Where`, `Cast`/`CastLike`, `Clip`, `PRelu`,
//! `Dropout` and the softmax family. Normalizations, quantization and random
//! generators live in the submodules.
//!
//! Every rule whose output elements are a function of its inputs' elements
//! ends with [`super::fold::fold_into`], which computes them when known.

mod norm;
mod quant;
mod random;

pub(crate) use super::common::same_shape;
use super::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::ElemType;

/// Unary operators whose output has the input's shape and type, with the
/// opset version that first defines each.
const SAME_AS_INPUT: &[(&str, i64)] = &[
    ("Abs", 1),
    ("Acos", 7),
    ("Acosh", 9),
    ("Asin", 7),
    ("Asinh", 9),
    ("Atan", 7),
    ("Atanh", 9),
    ("BitwiseNot", 18),
    ("Ceil", 1),
    ("Celu", 12),
    ("Cos", 7),
    ("Cosh", 9),
    ("Elu", 1),
    ("Erf", 9),
    ("Exp", 1),
    ("Floor", 1),
    ("HardSigmoid", 1),
    ("HardSwish", 14),
    ("LeakyRelu", 1),
    ("Log", 1),
    ("Mish", 18),
    ("Neg", 1),
    ("Not", 1),
    ("Reciprocal", 1),
    ("Relu", 1),
    ("Round", 11),
    ("Selu", 1),
    ("Shrink", 9),
    ("Sigmoid", 1),
    ("Sign", 9),
    ("Sin", 7),
    ("Sinh", 9),
    ("Softplus", 1),
    ("Softsign", 1),
    ("Sqrt", 1),
    ("Swish", 24),
    ("Tan", 7),
    ("Tanh", 1),
    ("ThresholdedRelu", 10),
];

pub(crate) fn register(t: &mut OpTable) {
    for &(op, since) in SAME_AS_INPUT {
        t.add(ONNX, op, since, same_as_input);
    }
    t.add(ONNX, "Gelu", 20, gelu);
    t.add_all(ONNX, &["IsNaN"], 9, is_check);
    t.add_all(ONNX, &["IsInf"], 10, is_check);
    t.add_all(ONNX, &["Softmax", "LogSoftmax", "Hardmax"], 1, softmax_like);
    t.add_all(ONNX, &["Add", "Sub", "Mul", "Div", "Pow"], 1, arithmetic);
    t.add(ONNX, "Mod", 10, modulo);
    t.add(ONNX, "BitShift", 11, bit_shift);
    t.add_all(ONNX, &["BitwiseAnd", "BitwiseOr", "BitwiseXor"], 18, arithmetic);
    t.add_all(ONNX, &["Equal", "Less", "Greater"], 1, comparison);
    t.add_all(ONNX, &["LessOrEqual", "GreaterOrEqual"], 12, comparison);
    t.add_all(ONNX, &["And", "Or", "Xor"], 1, logic);
    t.add_all(ONNX, &["Sum", "Mean", "Max", "Min"], 1, variadic);
    t.add(ONNX, "Where", 9, where_select);
    t.add(ONNX, "Cast", 1, cast);
    t.add(ONNX, "BitCast", 26, bit_cast);
    t.add(ONNX, "CastLike", 15, cast_like);
    t.add(ONNX, "Clip", 1, clip);
    t.add(ONNX, "PRelu", 1, prelu);
    t.add(ONNX, "Dropout", 1, dropout);
    norm::register(t);
    quant::register(t);
    random::register(t);
}

// ---- shared helpers ----

/// Output `j` has element type `t`, when known.
fn set_dtype_opt(ctx: &mut OpCtx, j: usize, t: Option<ElemType>) {
    if let Some(t) = t {
        ctx.set_dtype(j, t);
    }
}

/// The element type named by the data-type attribute `name` (a
/// `TensorProto.DataType` code). `Ok(None)` when the attribute is absent;
/// `Err(())` after reporting `invalid-attribute` when it names no type.
fn dtype_attr(ctx: &mut OpCtx, name: &str) -> Result<Option<ElemType>, ()> {
    if ctx.attr(name).is_none() {
        return Ok(None);
    }
    let code = ctx.attr_int(name);
    match code.and_then(|c| i32::try_from(c).ok()).filter(|&c| c > 0) {
        Some(c) => Ok(Some(ElemType::from_code(c))),
        None => {
            ctx.invalid(format!("attribute {name} must be a data type code, got {code:?}"));
            Err(())
        }
    }
}

/// Whether `t` is a floating-point type.
fn is_float(t: ElemType) -> bool {
    matches!(
        t,
        ElemType::Float
            | ElemType::Double
            | ElemType::Float16
            | ElemType::Bfloat16
            | ElemType::Float8e4m3fn
            | ElemType::Float8e4m3fnuz
            | ElemType::Float8e5m2
            | ElemType::Float8e5m2fnuz
            | ElemType::Float4e2m1
            | ElemType::Float8e8m0
    )
}

/// Validates the `axis` attribute (default `default`) against input 0's
/// rank when it is known. Returns false after reporting an out-of-range axis.
fn axis_ok(ctx: &mut OpCtx, default: i64) -> bool {
    let axis = ctx.attr_int("axis").unwrap_or(default);
    match ctx.rank(0) {
        Some(rank) => ctx.axis(axis, rank, "axis").is_some(),
        None => true,
    }
}

// ---- unary ----

/// Output 0 has input 0's shape and type.
pub(crate) fn same_as_input(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    let t = ctx.dtype(0);
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Gelu`: same shape and type; `approximate` is `none` or `tanh`.
fn gelu(ctx: &mut OpCtx) -> Result<(), Defer> {
    let approximate = ctx.attr_str("approximate").unwrap_or_else(|| "none".into());
    if approximate != "none" && approximate != "tanh" {
        ctx.invalid(format!("attribute approximate must be 'none' or 'tanh', got '{approximate}'"));
        return Ok(());
    }
    same_as_input(ctx)
}

/// `IsNaN`/`IsInf`: same shape, bool elements.
fn is_check(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    ctx.set_dtype(0, ElemType::Bool);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Softmax`/`LogSoftmax`/`Hardmax`: same shape and type; `axis` (default 1
/// before opset 13, -1 from 13) must be in range.
fn softmax_like(ctx: &mut OpCtx) -> Result<(), Defer> {
    let default = if ctx.version() >= 13 { -1 } else { 1 };
    if !axis_ok(ctx, default) {
        return Ok(());
    }
    same_shape(ctx, 0, 0);
    let t = ctx.dtype(0);
    set_dtype_opt(ctx, 0, t);
    Ok(())
}

// ---- binary ----

/// Before opset 7, binary operators broadcast only with `broadcast=1`, and
/// then `B` is aligned to `A` (at `axis` when given, else at the trailing
/// end): the output has `A`'s shape. Returns false for opsets without it.
fn legacy_broadcast(ctx: &mut OpCtx) -> bool {
    if ctx.version() >= 7 {
        return false;
    }
    let Some(a) = ctx.in_row(0) else {
        return true;
    };
    ctx.set_row(0, a.clone());
    let Some(b) = ctx.in_row(1) else {
        return true;
    };
    if ctx.attr_int("broadcast").unwrap_or(0) == 0 {
        ctx.eq_rows(a, b, "input 1", "has the shape of input 0 (broadcast=0)");
    } else if ctx.attr("axis").is_none() {
        ctx.broadcasts_to(1, a, "broadcasts to input 0 (broadcast=1)");
    }
    true
}

/// The output shape of a binary operator: NumPy broadcasting from opset 7,
/// the legacy rule before.
fn binary_shape(ctx: &mut OpCtx) {
    if !legacy_broadcast(ctx) {
        ctx.broadcast(&[0, 1], 0);
    }
}

/// Binary arithmetic and bitwise operators: both inputs broadcast to the
/// output, one type (`Pow`'s exponent may differ from opset 12 on: the
/// output has the base's type).
fn arithmetic(ctx: &mut OpCtx) -> Result<(), Defer> {
    binary_shape(ctx);
    let t = if ctx.op() == "Pow" && ctx.version() >= 12 { ctx.dtype(0) } else { ctx.same_dtype(&[0, 1]) };
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Mod`: arithmetic; `fmod` is 0 or 1, and before opset 28 must be 1 for
/// floating-point inputs.
fn modulo(ctx: &mut OpCtx) -> Result<(), Defer> {
    let fmod = ctx.attr_int("fmod").unwrap_or(0);
    if fmod != 0 && fmod != 1 {
        ctx.invalid(format!("attribute fmod must be 0 or 1, got {fmod}"));
        return Ok(());
    }
    let t = ctx.dtype(0).or(ctx.dtype(1));
    if ctx.version() < 28 && fmod == 0 && t.is_some_and(is_float) {
        ctx.invalid("attribute fmod must be 1 for floating-point inputs");
        return Ok(());
    }
    arithmetic(ctx)
}

/// `BitShift`: arithmetic; `direction` is `LEFT` or `RIGHT`.
fn bit_shift(ctx: &mut OpCtx) -> Result<(), Defer> {
    let direction = ctx.attr_str("direction");
    if !matches!(direction.as_deref(), Some("LEFT") | Some("RIGHT")) {
        ctx.invalid(format!("attribute direction must be 'LEFT' or 'RIGHT', got {direction:?}"));
        return Ok(());
    }
    arithmetic(ctx)
}

/// Comparison: inputs broadcast and share a type; the output is bool.
fn comparison(ctx: &mut OpCtx) -> Result<(), Defer> {
    binary_shape(ctx);
    ctx.same_dtype(&[0, 1]);
    ctx.set_dtype(0, ElemType::Bool);
    super::fold::fold_into(ctx);
    Ok(())
}

/// Logic `And`/`Or`/`Xor`: bool inputs broadcast; the output is bool.
fn logic(ctx: &mut OpCtx) -> Result<(), Defer> {
    binary_shape(ctx);
    for i in 0..2 {
        if let Some(t) = ctx.dtype(i).filter(|&t| t != ElemType::Bool) {
            ctx.dtype_mismatch(format!("input {i} is {t} but {} takes bool", ctx.op()));
        }
    }
    ctx.set_dtype(0, ElemType::Bool);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Sum`/`Mean`/`Max`/`Min`: every input broadcasts to the output (from
/// opset 8; before, all inputs have one shape); one type.
fn variadic(ctx: &mut OpCtx) -> Result<(), Defer> {
    let inputs: Vec<usize> = (0..ctx.input_count()).filter(|&i| ctx.has_input(i)).collect();
    if inputs.is_empty() {
        ctx.invalid(format!("{} needs at least one input", ctx.op()));
        return Ok(());
    }
    if ctx.version() >= 8 {
        ctx.broadcast(&inputs, 0);
    } else if let Some((&first, rest)) = inputs.split_first() {
        same_shape(ctx, first, 0);
        let Some(a) = ctx.in_row(first) else { return Ok(()) };
        for &i in rest {
            if let Some(b) = ctx.in_row(i) {
                ctx.eq_rows(a.clone(), b, &format!("input {i}"), "has the shape of the first input (before opset 8)");
            }
        }
    }
    let t = ctx.same_dtype(&inputs);
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Where`: condition, X and Y broadcast to the output; X and Y share the output's type.
fn where_select(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.broadcast(&[0, 1, 2], 0);
    if let Some(t) = ctx.dtype(0).filter(|&t| t != ElemType::Bool) {
        ctx.dtype_mismatch(format!("input 0 (condition) is {t} but must be bool"));
    }
    let t = ctx.same_dtype(&[1, 2]);
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

// ---- casts ----

/// The type `Cast`'s `to` names: a data type code, or before opset 6 a
/// `TensorProto.DataType` name such as `FLOAT`.
fn cast_target(ctx: &mut OpCtx) -> Option<ElemType> {
    if ctx.version() < 6 {
        if let Some(name) = ctx.attr_str("to") {
            let t = (1..=64).map(ElemType::from_code).find(|t| t.name().eq_ignore_ascii_case(&name));
            if t.is_none() {
                ctx.invalid(format!("attribute to names no data type: '{name}'"));
            }
            return t;
        }
    }
    match dtype_attr(ctx, "to") {
        Ok(Some(t)) => Some(t),
        Ok(None) => {
            ctx.invalid("attribute to (the target type) is required");
            None
        }
        Err(()) => None,
    }
}

/// `Cast`: same shape, the type `to` names.
fn cast(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(t) = cast_target(ctx) else { return Ok(()) };
    same_shape(ctx, 0, 0);
    ctx.set_dtype(0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `CastLike`: input 0's shape, input 1's type.
fn cast_like(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    let t = ctx.dtype(1);
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `BitCast` (opset 26): same shape, the type `to` names, which must have
/// the input type's bit width.
fn bit_cast(ctx: &mut OpCtx) -> Result<(), Defer> {
    let Some(t) = cast_target(ctx) else { return Ok(()) };
    if let Some(from) = ctx.dtype(0) {
        let (a, b) = (from.bit_width(), t.bit_width());
        if a.is_none() || b.is_none() || a != b {
            let bits = |w: Option<u32>| w.map_or("no fixed".to_string(), |w| w.to_string());
            ctx.invalid(format!("attribute to is {t} ({} bits) but the input is {from} ({} bits)", bits(b), bits(a)));
            return Ok(());
        }
    }
    same_shape(ctx, 0, 0);
    ctx.set_dtype(0, t);
    Ok(())
}

// ---- others of the same shape ----

/// `Clip`: same shape and type; from opset 11 the bounds are inputs of the same type.
fn clip(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    let t = if ctx.version() >= 11 { ctx.same_dtype(&[0, 1, 2]) } else { ctx.dtype(0) };
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `PRelu`: the output has X's shape and type; from opset 7 the slope
/// broadcasts to X (unidirectionally).
fn prelu(ctx: &mut OpCtx) -> Result<(), Defer> {
    same_shape(ctx, 0, 0);
    if ctx.version() >= 7 {
        if let Some(x) = ctx.in_row(0) {
            ctx.broadcasts_to(1, x, "the slope broadcasts to X");
        }
    }
    let t = ctx.same_dtype(&[0, 1]);
    set_dtype_opt(ctx, 0, t);
    super::fold::fold_into(ctx);
    Ok(())
}

/// `Dropout`: the output and the mask have the input's shape; the mask is
/// bool from opset 10, of the input's type before.
fn dropout(ctx: &mut OpCtx) -> Result<(), Defer> {
    let t = ctx.dtype(0);
    same_shape(ctx, 0, 0);
    set_dtype_opt(ctx, 0, t);
    if ctx.has_output(1) {
        same_shape(ctx, 0, 1);
        let mask = if ctx.version() >= 10 { Some(ElemType::Bool) } else { t };
        set_dtype_opt(ctx, 1, mask);
    }
    Ok(())
}
