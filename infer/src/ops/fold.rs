//! Value propagation through element-wise operators: computes the output
//! elements of an element-wise node (`Add`, `Mul`, `Cast`, `Equal`,
//! `Where`, ...) from its inputs' known elements, so that integer tensors
//! computing shapes keep their elements as size terms.
//!
//! Inputs broadcast NumPy-style. Integer elements are [`Elem`]s: known
//! integers compute exactly (checked; an overflow gives `Unknown`), symbolic
//! ones through [`SizeExpr`] arithmetic (`Add`, `Sub`, `Mul`, `Max`, `Min`,
//! exact or floor `Div` by a positive constant), and an axis size not yet
//! known only through identities (`x + 0`, `x * 1`, ...). Floats and bools
//! compute as values. The result takes the element type the rule gave the
//! output (`Cast` to an integer type truncates toward zero).

use super::common::is_int_elem_type as is_int;
use crate::rule::{ConstData, ConstValue, Elem, OpCtx};
use diamond_ir::term::SizeExpr;
use diamond_ir::ElemType;

/// The most elements folded into one output.
const MAX_ELEMS: usize = 1 << 20;

/// Sets output 0's elements when the node's inputs' elements are known and
/// the operator is one this module evaluates. Element-wise rules call it
/// after stating the output's shape and type.
pub(crate) fn fold_into(ctx: &mut OpCtx) {
    let op = ctx.op();
    if !FOLDED.contains(&op) {
        return;
    }
    let Some(out_t) = ctx.out_dtype(0) else { return };
    let operands: Vec<usize> =
        if op == "CastLike" { vec![0] } else { (0..ctx.input_count()).filter(|&i| ctx.has_input(i)).collect() };
    // A float operand larger than a kept float result: the result, at least
    // as large, would be dropped (integers computing shapes are small).
    let limit = if is_int(out_t) || out_t == ElemType::Bool { MAX_ELEMS } else { crate::rule::MAX_FLOAT_ELEMS };
    if operands.iter().any(|&i| super::common::large_float_operand(ctx, i, limit as u64)) {
        return;
    }
    let mut values = Vec::with_capacity(operands.len());
    for i in operands {
        match ctx.value(i) {
            Some(v) => values.push(v),
            None => return,
        }
    }
    if values.is_empty() {
        return;
    }
    let shapes: Vec<&[usize]> = values.iter().map(|v| v.shape.as_slice()).collect();
    let Some(shape) = broadcast_shape(&shapes) else { return };
    let fmod = ctx.attr_int("fmod").unwrap_or(0) != 0;
    let Some(data) = evaluate(op, &values, &shape, out_t, fmod) else { return };
    ctx.set_value(0, ConstValue { dtype: out_t, shape, data });
}

/// The operators [`fold_into`] evaluates.
const FOLDED: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Neg",
    "Abs",
    "Max",
    "Min",
    "Sum",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Where",
    "Cast",
    "CastLike",
    "Floor",
    "Ceil",
    "Round",
    "Sqrt",
    "Reciprocal",
    "Relu",
    "Sign",
];

/// One element of any type.
#[derive(Clone, Debug, PartialEq)]
enum Scalar {
    Int(Elem),
    Float(f64),
    Bool(bool),
}

/// The NumPy broadcast of `shapes`; `None` when they do not broadcast or the result is too large.
fn broadcast_shape(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max()?;
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (k, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    let n = out.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
    (n <= MAX_ELEMS).then_some(out)
}

/// The element at flat position `i` of `data`; `None` for strings.
fn scalar_at(data: &ConstData, i: usize) -> Option<Scalar> {
    match data {
        ConstData::Ints(v) => v.get(i).cloned().map(Scalar::Int),
        ConstData::Floats(v) => v.get(i).copied().map(Scalar::Float),
        ConstData::Bools(v) => v.get(i).copied().map(Scalar::Bool),
        ConstData::Strings(_) => None,
    }
}

/// Evaluates `op` element by element over the broadcast inputs.
fn evaluate(
    op: &str,
    values: &[std::sync::Arc<ConstValue>],
    shape: &[usize],
    out_t: ElemType,
    fmod: bool,
) -> Option<ConstData> {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    // Per input: the stride of each output axis in the input (0 where it broadcasts).
    let steps: Vec<Vec<usize>> = values
        .iter()
        .map(|v| {
            let offset = rank - v.shape.len();
            let mut st = vec![0usize; rank];
            let mut acc = 1usize;
            for k in (0..v.shape.len()).rev() {
                st[offset + k] = if v.shape[k] == 1 { 0 } else { acc };
                acc = acc.saturating_mul(v.shape[k]);
            }
            st
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    let mut pos = vec![0usize; rank];
    let mut args = Vec::with_capacity(values.len());
    for _ in 0..n {
        args.clear();
        for (v, st) in values.iter().zip(&steps) {
            let flat: usize = pos.iter().zip(st).map(|(p, s)| p * s).sum();
            args.push(scalar_at(&v.data, flat)?);
        }
        let result = apply(op, &args, fmod)?;
        out.push(convert(result, out_t)?);
        for a in (0..rank).rev() {
            pos[a] += 1;
            if pos[a] < shape[a] {
                break;
            }
            pos[a] = 0;
        }
    }
    collect(out, out_t)
}

/// Packs converted elements into the data kind of `t`.
fn collect(items: Vec<Scalar>, t: ElemType) -> Option<ConstData> {
    if is_int(t) {
        items
            .into_iter()
            .map(|s| if let Scalar::Int(e) = s { Some(e) } else { None })
            .collect::<Option<_>>()
            .map(ConstData::Ints)
    } else if t == ElemType::Bool {
        items
            .into_iter()
            .map(|s| if let Scalar::Bool(b) = s { Some(b) } else { None })
            .collect::<Option<_>>()
            .map(ConstData::Bools)
    } else {
        items
            .into_iter()
            .map(|s| if let Scalar::Float(f) = s { Some(f) } else { None })
            .collect::<Option<_>>()
            .map(ConstData::Floats)
    }
}

/// The range of values of an integer type.
fn int_range(t: ElemType) -> (i64, i64) {
    match t {
        ElemType::Int8 => (i8::MIN as i64, i8::MAX as i64),
        ElemType::Int16 => (i16::MIN as i64, i16::MAX as i64),
        ElemType::Int32 => (i32::MIN as i64, i32::MAX as i64),
        ElemType::Uint8 => (0, u8::MAX as i64),
        ElemType::Uint16 => (0, u16::MAX as i64),
        ElemType::Uint32 => (0, u32::MAX as i64),
        ElemType::Uint64 => (0, i64::MAX),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Converts a result to the output type `t` (what `Cast` does); `None` when it cannot be represented.
fn convert(s: Scalar, t: ElemType) -> Option<Scalar> {
    if is_int(t) {
        let (lo, hi) = int_range(t);
        let e = match s {
            Scalar::Int(e) => e,
            Scalar::Float(x) if x.is_finite() && x.trunc() >= -9.0e18 && x.trunc() <= 9.0e18 => {
                Elem::Int(x.trunc() as i64)
            }
            Scalar::Float(_) => return None,
            Scalar::Bool(b) => Elem::Int(b as i64),
        };
        return Some(Scalar::Int(match e {
            Elem::Int(n) if n < lo || n > hi => Elem::Unknown,
            other => other,
        }));
    }
    match t {
        ElemType::Bool => Some(Scalar::Bool(match s {
            Scalar::Int(e) => e.as_int()? != 0,
            Scalar::Float(x) => x != 0.0,
            Scalar::Bool(b) => b,
        })),
        ElemType::Float | ElemType::Double | ElemType::Float16 | ElemType::Bfloat16 => {
            let x = match s {
                Scalar::Int(e) => e.as_int()? as f64,
                Scalar::Float(x) => x,
                Scalar::Bool(b) => b as u8 as f64,
            };
            Some(Scalar::Float(round_to(x, t)))
        }
        _ => None,
    }
}

/// `x` rounded to the precision of the float type `t`.
fn round_to(x: f64, t: ElemType) -> f64 {
    match t {
        ElemType::Float => x as f32 as f64,
        ElemType::Float16 => half::f16::from_f64(x).to_f64(),
        ElemType::Bfloat16 => half::bf16::from_f64(x).to_f64(),
        _ => x,
    }
}

/// One element of `op` over its arguments; `None` when it cannot be computed.
fn apply(op: &str, args: &[Scalar], fmod: bool) -> Option<Scalar> {
    match op {
        "Cast" | "CastLike" => args.first().cloned(),
        "Sum" | "Max" | "Min" => {
            let name = match op {
                "Sum" => "Add",
                other => other,
            };
            let mut acc = args.first()?.clone();
            for a in &args[1..] {
                acc = binary(name, &acc, a, fmod)?;
            }
            Some(acc)
        }
        "Where" => match args {
            [Scalar::Bool(c), x, y] => Some(if *c { x.clone() } else { y.clone() }),
            _ => None,
        },
        _ => match args {
            [a] => unary(op, a),
            [a, b] => binary(op, a, b, fmod),
            _ => None,
        },
    }
}

/// A one-argument operator.
fn unary(op: &str, a: &Scalar) -> Option<Scalar> {
    match a {
        Scalar::Int(e) => Some(Scalar::Int(match op {
            "Neg" => scale(e, -1),
            "Abs" => e.as_int().map_or(Elem::Unknown, |n| n.checked_abs().map_or(Elem::Unknown, Elem::Int)),
            "Relu" => e.as_int().map_or(Elem::Unknown, |n| Elem::Int(n.max(0))),
            "Sign" => e.as_int().map_or(Elem::Unknown, |n| Elem::Int(n.signum())),
            "Floor" | "Ceil" | "Round" => e.clone(),
            _ => return None,
        })),
        Scalar::Float(x) => {
            let x = *x;
            Some(Scalar::Float(match op {
                "Neg" => -x,
                "Abs" => x.abs(),
                "Relu" => x.max(0.0),
                "Sign" => {
                    if x > 0.0 {
                        1.0
                    } else if x < 0.0 {
                        -1.0
                    } else {
                        x
                    }
                }
                "Floor" => x.floor(),
                "Ceil" => x.ceil(),
                "Round" => x.round_ties_even(),
                "Sqrt" => x.sqrt(),
                "Reciprocal" => 1.0 / x,
                _ => return None,
            }))
        }
        Scalar::Bool(b) => match op {
            "Not" => Some(Scalar::Bool(!b)),
            _ => None,
        },
    }
}

/// A two-argument operator.
fn binary(op: &str, a: &Scalar, b: &Scalar, fmod: bool) -> Option<Scalar> {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => match op {
            "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => compare_ints(op, x, y).map(Scalar::Bool),
            _ => int_binary(op, x, y, fmod).map(Scalar::Int),
        },
        (Scalar::Float(x), Scalar::Float(y)) => float_binary(op, *x, *y, fmod),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(Scalar::Bool(match op {
            "And" => *x && *y,
            "Or" => *x || *y,
            "Xor" => x != y,
            "Equal" => x == y,
            _ => return None,
        })),
        _ => None,
    }
}

/// A comparison of two integer elements; `None` when it depends on unknown sizes.
fn compare_ints(op: &str, x: &Elem, y: &Elem) -> Option<bool> {
    if let (Elem::Int(p), Elem::Int(q)) = (x, y) {
        return Some(match op {
            "Equal" => p == q,
            "Less" => p < q,
            "LessOrEqual" => p <= q,
            "Greater" => p > q,
            _ => p >= q,
        });
    }
    // Equal size terms are equal whatever the sizes are.
    let same = x == y && !matches!(x, Elem::Unknown);
    match op {
        "Equal" | "LessOrEqual" | "GreaterOrEqual" if same => return Some(true),
        "Less" | "Greater" if same => return Some(false),
        _ => {}
    }
    // A size is never negative: `batch == -1` is false (the `-1` test of
    // Reshape targets that exporters write before an Expand).
    let below_sizes = |size: &Elem, n: &Elem| nonnegative(size) && matches!(n, Elem::Int(q) if *q < 0);
    if below_sizes(x, y) {
        return Some(matches!(op, "Greater" | "GreaterOrEqual"));
    }
    if below_sizes(y, x) {
        return Some(matches!(op, "Less" | "LessOrEqual"));
    }
    None
}

/// Whether an element is known to be at least 0: an axis size, or an
/// expression whose terms are all sizes with positive coefficients.
fn nonnegative(e: &Elem) -> bool {
    match e {
        Elem::Int(n) => *n >= 0,
        Elem::Expr(x) => x.is_nonnegative(),
        Elem::Var(_) => true,
        Elem::Unknown => false,
    }
}

/// `e * k` for a constant `k`.
fn scale(e: &Elem, k: i64) -> Elem {
    match e {
        Elem::Int(n) => n.checked_mul(k).map_or(Elem::Unknown, Elem::Int),
        Elem::Expr(x) => x.mul(&SizeExpr::constant(k)).map_or(Elem::Unknown, Elem::from_expr),
        Elem::Var(_) if k == 1 => e.clone(),
        _ => Elem::Unknown,
    }
}

/// Integer arithmetic on size terms. `None` only for an operator that is
/// not arithmetic; an undeterminable result is `Elem::Unknown`.
fn int_binary(op: &str, x: &Elem, y: &Elem, fmod: bool) -> Option<Elem> {
    if let (Elem::Int(p), Elem::Int(q)) = (x, y) {
        let (p, q) = (*p, *q);
        let r = match op {
            "Add" => p.checked_add(q),
            "Sub" => p.checked_sub(q),
            "Mul" => p.checked_mul(q),
            "Div" => p.checked_div(q),
            "Mod" if fmod => p.checked_rem(q),
            "Mod" => p.checked_rem(q).map(|r| if r != 0 && ((r < 0) != (q < 0)) { r + q } else { r }),
            "Max" => Some(p.max(q)),
            "Min" => Some(p.min(q)),
            _ => return None,
        };
        return Some(r.map_or(Elem::Unknown, Elem::Int));
    }
    if !matches!(op, "Add" | "Sub" | "Mul" | "Div" | "Mod" | "Max" | "Min") {
        return None;
    }
    if let Some(e) = identity(op, x, y) {
        return Some(e);
    }
    let (Some(a), Some(b)) = (x.as_expr(), y.as_expr()) else { return Some(Elem::Unknown) };
    let r = match op {
        "Add" => a.add(&b),
        "Sub" => b.mul(&SizeExpr::constant(-1)).and_then(|nb| a.add(&nb)),
        "Mul" => a.mul(&b),
        "Div" => a.div_exact(&b).or_else(|| match b.as_constant() {
            Some(d) if d > 0 => a.floor_div(d as u64),
            _ => None,
        }),
        "Max" => Some(SizeExpr::max(&a, &b)),
        "Min" => Some(SizeExpr::min(&a, &b)),
        _ => None,
    };
    Some(r.map_or(Elem::Unknown, Elem::from_expr))
}

/// The result of `x op y` that holds whatever an unknown operand is
/// (`x + 0`, `x * 1`, `x * 0`, `x / 1`, `max(x, x)`, ...).
fn identity(op: &str, x: &Elem, y: &Elem) -> Option<Elem> {
    let zero = Elem::Int(0);
    let one = Elem::Int(1);
    match op {
        "Add" if *y == zero => Some(x.clone()),
        "Add" if *x == zero => Some(y.clone()),
        "Sub" if *y == zero => Some(x.clone()),
        "Sub" if x == y && !matches!(x, Elem::Unknown) => Some(zero),
        "Mul" if *y == one => Some(x.clone()),
        "Mul" if *x == one => Some(y.clone()),
        "Mul" if *x == zero || *y == zero => Some(zero),
        "Div" if *y == one => Some(x.clone()),
        "Max" | "Min" if x == y && !matches!(x, Elem::Unknown) => Some(x.clone()),
        _ => None,
    }
}

/// Floating-point arithmetic and comparisons.
fn float_binary(op: &str, x: f64, y: f64, fmod: bool) -> Option<Scalar> {
    let v = match op {
        "Add" => x + y,
        "Sub" => x - y,
        "Mul" => x * y,
        "Div" => x / y,
        "Mod" if fmod => x % y,
        "Mod" => return None,
        "Max" => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.max(y)
            }
        }
        "Min" => {
            if x.is_nan() || y.is_nan() {
                f64::NAN
            } else {
                x.min(y)
            }
        }
        "Equal" => return Some(Scalar::Bool(x == y)),
        "Less" => return Some(Scalar::Bool(x < y)),
        "LessOrEqual" => return Some(Scalar::Bool(x <= y)),
        "Greater" => return Some(Scalar::Bool(x > y)),
        "GreaterOrEqual" => return Some(Scalar::Bool(x >= y)),
        _ => return None,
    };
    Some(Scalar::Float(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(name: &str) -> Elem {
        Elem::Expr(SizeExpr::symbol(name))
    }

    #[test]
    fn symbolic_sizes_compute() {
        let b = sym("batch");
        let two_b = int_binary("Mul", &b, &Elem::Int(2), false).unwrap();
        assert_eq!(int_binary("Div", &two_b, &Elem::Int(2), false), Some(b.clone()));
        assert_eq!(int_binary("Sub", &b, &b, false), Some(Elem::Int(0)));
        assert_eq!(
            int_binary("Add", &Elem::Var(diamond_ir::term::DimVar(3)), &Elem::Int(0), false),
            Some(Elem::Var(diamond_ir::term::DimVar(3)))
        );
        assert_eq!(
            int_binary("Add", &Elem::Var(diamond_ir::term::DimVar(3)), &Elem::Int(1), false),
            Some(Elem::Unknown)
        );
        assert_eq!(compare_ints("Equal", &b, &b), Some(true));
        assert_eq!(compare_ints("Equal", &b, &Elem::Int(3)), None);
    }

    #[test]
    fn integer_division_and_modulo_follow_onnx() {
        assert_eq!(int_binary("Div", &Elem::Int(-7), &Elem::Int(2), false), Some(Elem::Int(-3)));
        assert_eq!(int_binary("Mod", &Elem::Int(-7), &Elem::Int(3), false), Some(Elem::Int(2)));
        assert_eq!(int_binary("Mod", &Elem::Int(-7), &Elem::Int(3), true), Some(Elem::Int(-1)));
        assert_eq!(int_binary("Div", &Elem::Int(1), &Elem::Int(0), false), Some(Elem::Unknown));
    }

    #[test]
    fn casts_truncate_and_round() {
        assert_eq!(convert(Scalar::Float(-2.7), ElemType::Int64), Some(Scalar::Int(Elem::Int(-2))));
        assert_eq!(convert(Scalar::Float(0.1), ElemType::Float), Some(Scalar::Float(0.1f32 as f64)));
        assert_eq!(convert(Scalar::Int(Elem::Int(3)), ElemType::Bool), Some(Scalar::Bool(true)));
        assert_eq!(convert(Scalar::Int(Elem::Int(300)), ElemType::Uint8), Some(Scalar::Int(Elem::Unknown)));
        assert_eq!(convert(Scalar::Float(f64::NAN), ElemType::Int32), None);
    }

    #[test]
    fn shapes_broadcast() {
        assert_eq!(broadcast_shape(&[&[3, 1], &[4]]), Some(vec![3, 4]));
        assert_eq!(broadcast_shape(&[&[3], &[4]]), None);
        assert_eq!(broadcast_shape(&[&[], &[2, 2]]), Some(vec![2, 2]));
    }
}
