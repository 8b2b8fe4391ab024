//! Element-wise operators: unary math, binary arithmetic with NumPy
//! broadcasting, comparisons and logic, `Where`, `Cast`, `Clip` and the
//! activations.
//!
//! Floats compute in `f64` and round once to their type; integers compute in
//! `i128` and wrap to their width (what C and NumPy do for `+ - *`).

use super::{broadcast_index, broadcast_shape, one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{Data, Scalar, Tensor};
use crate::{each_num, each_num2};
use diamond_ir::ElemType;

type F1<'f> = &'f dyn Fn(f64) -> f64;
type I1<'f> = &'f dyn Fn(i128) -> i128;
type F2<'f> = &'f dyn Fn(f64, f64) -> f64;
type I2<'f> = &'f dyn Fn(i128, i128) -> i128;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    let op = ctx.op();
    Some(match op {
        "Abs" => unary(ctx, &f64::abs, Some(&|x: i128| x.abs())),
        "Neg" => unary(ctx, &|x| -x, Some(&|x: i128| -x)),
        "Sign" => unary(
            ctx,
            &|x| {
                if x.is_nan() {
                    x
                } else if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            },
            Some(&i128::signum),
        ),
        "Ceil" => unary(ctx, &f64::ceil, None),
        "Floor" => unary(ctx, &f64::floor, None),
        "Round" => unary(ctx, &f64::round_ties_even, None),
        "Sqrt" => unary(ctx, &f64::sqrt, None),
        "Reciprocal" => unary(ctx, &|x| 1.0 / x, None),
        "Exp" => unary(ctx, &f64::exp, None),
        "Log" => unary(ctx, &f64::ln, None),
        "Sin" => unary(ctx, &f64::sin, None),
        "Cos" => unary(ctx, &f64::cos, None),
        "Tan" => unary(ctx, &f64::tan, None),
        "Asin" => unary(ctx, &f64::asin, None),
        "Acos" => unary(ctx, &f64::acos, None),
        "Atan" => unary(ctx, &f64::atan, None),
        "Sinh" => unary(ctx, &f64::sinh, None),
        "Cosh" => unary(ctx, &f64::cosh, None),
        "Tanh" => unary(ctx, &f64::tanh, None),
        "Asinh" => unary(ctx, &f64::asinh, None),
        "Acosh" => unary(ctx, &f64::acosh, None),
        "Atanh" => unary(ctx, &f64::atanh, None),
        "Erf" => unary(ctx, &libm::erf, None),
        "Relu" => unary(ctx, &|x| if x < 0.0 { 0.0 } else { x }, Some(&|x: i128| x.max(0))),
        "Sigmoid" => unary(ctx, &sigmoid, None),
        "Softsign" => unary(ctx, &|x| x / (1.0 + x.abs()), None),
        "Softplus" => unary(ctx, &softplus, None),
        "Mish" => unary(ctx, &|x| x * softplus(x).tanh(), None),
        "LeakyRelu" => {
            let a = f64::from(ctx.attr_f("alpha", 0.01));
            unary(ctx, &|x| if x < 0.0 { a * x } else { x }, None)
        }
        "Elu" => {
            let a = f64::from(ctx.attr_f("alpha", 1.0));
            unary(ctx, &|x| if x < 0.0 { a * (x.exp() - 1.0) } else { x }, None)
        }
        "Celu" => {
            let a = f64::from(ctx.attr_f("alpha", 1.0));
            unary(ctx, &|x| x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0), None)
        }
        "Selu" => {
            let a = f64::from(ctx.attr_f("alpha", 1.673_263_2));
            let g = f64::from(ctx.attr_f("gamma", 1.050_701));
            unary(ctx, &|x| if x <= 0.0 { g * (a * x.exp() - a) } else { g * x }, None)
        }
        "ThresholdedRelu" => {
            let a = f64::from(ctx.attr_f("alpha", 1.0));
            unary(ctx, &|x| if x > a { x } else { 0.0 }, None)
        }
        "HardSigmoid" => {
            let a = f64::from(ctx.attr_f("alpha", 0.2));
            let b = f64::from(ctx.attr_f("beta", 0.5));
            unary(ctx, &|x| (a * x + b).clamp(0.0, 1.0), None)
        }
        "HardSwish" => unary(ctx, &|x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0), None),
        "Swish" => {
            let a = f64::from(ctx.attr_f("alpha", 1.0));
            unary(ctx, &|x| x * sigmoid(a * x), None)
        }
        "SwiGLU" => {
            let a = f64::from(ctx.attr_f("alpha", 1.0));
            match (ctx.input(0), ctx.input(1)) {
                (Ok(x), Ok(g)) => binary(ctx, x, g, &|x, g| x * sigmoid(a * x) * g, None).and_then(one),
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
        "Gelu" => match ctx.attr_s("approximate").as_deref() {
            None | Some("none") => unary(ctx, &|x| 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)), None),
            Some("tanh") => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                unary(ctx, &|x| 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh()), None)
            }
            Some(other) => Err(ctx.unsupported(format!("approximate='{other}'"))),
        },
        "Shrink" => {
            let b = f64::from(ctx.attr_f("bias", 0.0));
            let l = f64::from(ctx.attr_f("lambd", 0.5));
            let (bi, li) = (b as i128, l);
            unary(
                ctx,
                &|x| {
                    if x < -l {
                        x + b
                    } else if x > l {
                        x - b
                    } else {
                        0.0
                    }
                },
                Some(&move |x: i128| {
                    if (x as f64) < -li {
                        x + bi
                    } else if (x as f64) > li {
                        x - bi
                    } else {
                        0
                    }
                }),
            )
        }
        "BitwiseNot" => unary_int(ctx, &|x| !x),
        "Not" => not(ctx),
        "IsNaN" => predicate(ctx, &|x| x.is_nan()),
        "IsInf" => {
            let neg = ctx.attr_i("detect_negative", 1) != 0;
            let pos = ctx.attr_i("detect_positive", 1) != 0;
            predicate(ctx, &|x| (pos && x == f64::INFINITY) || (neg && x == f64::NEG_INFINITY))
        }
        "Add" => arith(ctx, &|a, b| a + b, Some(&i128::wrapping_add)),
        "Sub" => arith(ctx, &|a, b| a - b, Some(&i128::wrapping_sub)),
        "Mul" => arith(ctx, &|a, b| a * b, Some(&i128::wrapping_mul)),
        "Div" => arith(ctx, &|a, b| a / b, Some(&|a, b| if b == 0 { 0 } else { a / b })),
        "Mod" => {
            if ctx.attr_i("fmod", 0) != 0 {
                arith(ctx, &|a, b| a % b, Some(&|a, b| if b == 0 { 0 } else { a % b }))
            } else {
                arith(
                    ctx,
                    &py_fmod,
                    Some(&|a, b| {
                        if b == 0 {
                            0
                        } else {
                            a.rem_euclid(b) + if a.rem_euclid(b) != 0 && b < 0 { b } else { 0 }
                        }
                    }),
                )
            }
        }
        "BitwiseAnd" => arith_int(ctx, &|a, b| a & b),
        "BitwiseOr" => arith_int(ctx, &|a, b| a | b),
        "BitwiseXor" => arith_int(ctx, &|a, b| a ^ b),
        "BitShift" => {
            // A shift outside 0..width (negative included) shifts everything out:
            // left gives 0, right gives the sign fill.
            let width = match ctx.input(0) {
                Ok(x) => i128::from(x.elem().bit_width().unwrap_or(64)),
                Err(e) => return Some(Err(e)),
            };
            match ctx.attr_s("direction").as_deref() {
                Some("LEFT") => arith_int(ctx, &|a, b| if (0..width).contains(&b) { a << b } else { 0 }),
                Some("RIGHT") => arith_int(ctx, &|a, b| {
                    if (0..width).contains(&b) {
                        a >> b
                    } else if a < 0 {
                        -1
                    } else {
                        0
                    }
                }),
                other => Err(ctx.err(format!("direction {other:?} must be LEFT or RIGHT"))),
            }
        }
        "Pow" => pow(ctx),
        "PRelu" => arith(ctx, &|x, s| if x < 0.0 { s * x } else { x }, Some(&|x, s| if x < 0 { s * x } else { x })),
        "Max" => {
            variadic(ctx, &|a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }, Some(&i128::max), false)
        }
        "Min" => {
            variadic(ctx, &|a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }, Some(&i128::min), false)
        }
        "Sum" => variadic(ctx, &|a, b| a + b, Some(&i128::wrapping_add), false),
        "Mean" => variadic(ctx, &|a, b| a + b, None, true),
        "Equal" => compare(ctx, &|a, b| a == b, &|a, b| a == b),
        "Less" => compare(ctx, &|a, b| a < b, &|a, b| a < b),
        "LessOrEqual" => compare(ctx, &|a, b| a <= b, &|a, b| a <= b),
        "Greater" => compare(ctx, &|a, b| a > b, &|a, b| a > b),
        "GreaterOrEqual" => compare(ctx, &|a, b| a >= b, &|a, b| a >= b),
        "And" => logical(ctx, &|a, b| a && b),
        "Or" => logical(ctx, &|a, b| a || b),
        "Xor" => logical(ctx, &|a, b| a != b),
        "Where" => where_(ctx),
        "Cast" => {
            let Some(to) = ctx.attr_opt_i("to") else { return Some(Err(ctx.err("attribute 'to' is required"))) };
            ctx.input(0).and_then(|x| cast(ctx, x, ElemType::from_code(to as i32))).and_then(one)
        }
        "CastLike" => ctx.input(1).and_then(|like| ctx.input(0).and_then(|x| cast(ctx, x, like.elem()))).and_then(one),
        "Clip" => clip(ctx),
        _ => return None,
    })
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

fn softplus(x: f64) -> f64 {
    if x > 30.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// Python's float `%`: the result takes the divisor's sign.
fn py_fmod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

fn map_typed<T: Scalar>(v: &[T], f: F1<'_>, i: Option<I1<'_>>) -> Option<Data> {
    Some(if T::FLOAT {
        T::wrap(v.iter().map(|x| T::from_f64(f(x.to_f64()))).collect())
    } else {
        let i = i?;
        T::wrap(v.iter().map(|x| T::from_i128(i(x.to_i128()))).collect())
    })
}

/// `f` on float elements, `i` (when given) on integer ones.
fn unary(ctx: &NodeCtx<'_>, f: F1<'_>, i: Option<I1<'_>>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if matches!(x.data, Data::Bool(_)) {
        return Err(ctx.unsupported("bool operands"));
    }
    let data = each_num!(&x.data, v => map_typed(v, f, i), _ => None)
        .ok_or_else(|| ctx.unsupported(format!("element type {}", x.elem())))?;
    one(Tensor { shape: x.shape.clone(), data })
}

fn unary_int(ctx: &NodeCtx<'_>, i: I1<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.is_float() || matches!(x.data, Data::Bool(_)) {
        return Err(ctx.unsupported(format!("element type {}", x.elem())));
    }
    unary(ctx, &|_| f64::NAN, Some(i))
}

fn not(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    match &x.data {
        Data::Bool(v) => one(Tensor { shape: x.shape.clone(), data: Data::Bool(v.iter().map(|b| !b).collect()) }),
        _ => Err(ctx.err(format!("Not takes bool, not {}", x.elem()))),
    }
}

fn predicate(ctx: &NodeCtx<'_>, p: &dyn Fn(f64) -> bool) -> Result<Outs> {
    let x = ctx.input(0)?;
    let v = x.to_f64s().ok_or_else(|| ctx.unsupported("string operands"))?;
    let data = if x.is_float() { v.iter().map(|&a| p(a)).collect() } else { vec![false; v.len()] };
    one(Tensor { shape: x.shape.clone(), data: Data::Bool(data) })
}

/// The broadcast shape of two operands and the element each output reads.
fn pair(ctx: &NodeCtx<'_>, a: &Tensor, b: &Tensor) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let shape = broadcast_shape(&[&a.shape, &b.shape])
        .ok_or_else(|| ctx.err(format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape)))?;
    let ia = broadcast_index(&shape, &a.shape);
    let ib = broadcast_index(&shape, &b.shape);
    Ok((shape, ia, ib))
}

/// Where each output element reads its two operands: by index, or (equal
/// shapes, the common case) at its own position in both.
enum Reads {
    Indexed(Vec<usize>, Vec<usize>),
    Aligned(usize),
}

fn zip_typed<T: Scalar>(x: &[T], y: &[T], reads: &Reads, f: F2<'_>, i: Option<I2<'_>>) -> Option<Data> {
    match reads {
        Reads::Indexed(ia, ib) => zip_pairs(x, y, ia.iter().copied().zip(ib.iter().copied()), f, i),
        Reads::Aligned(n) => zip_pairs(x, y, (0..*n).map(|k| (k, k)), f, i),
    }
}

fn zip_pairs<T: Scalar>(
    x: &[T],
    y: &[T],
    pairs: impl Iterator<Item = (usize, usize)>,
    f: F2<'_>,
    i: Option<I2<'_>>,
) -> Option<Data> {
    Some(if T::FLOAT {
        T::wrap(pairs.map(|(p, q)| T::from_f64(f(x[p].to_f64(), y[q].to_f64()))).collect())
    } else {
        let i = i?;
        T::wrap(pairs.map(|(p, q)| T::from_i128(i(x[p].to_i128(), y[q].to_i128()))).collect())
    })
}

/// A binary operator over two tensors of one numeric type.
pub(crate) fn binary(ctx: &NodeCtx<'_>, a: &Tensor, b: &Tensor, f: F2<'_>, i: Option<I2<'_>>) -> Result<Tensor> {
    if a.elem() != b.elem() {
        return Err(ctx.err(format!("operand types differ: {} and {}", a.elem(), b.elem())));
    }
    let (shape, reads) = if a.shape == b.shape {
        (a.shape.clone(), Reads::Aligned(a.len()))
    } else {
        let (shape, ia, ib) = pair(ctx, a, b)?;
        (shape, Reads::Indexed(ia, ib))
    };
    let data = each_num2!(&a.data, &b.data, x, y => zip_typed(x, y, &reads, f, i), _ => None)
        .ok_or_else(|| ctx.unsupported(format!("element type {}", a.elem())))?;
    Ok(Tensor { shape, data })
}

fn arith(ctx: &NodeCtx<'_>, f: F2<'_>, i: Option<I2<'_>>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if matches!(a.data, Data::Bool(_)) {
        return Err(ctx.unsupported("bool operands"));
    }
    one(binary(ctx, a, b, f, i)?)
}

fn arith_int(ctx: &NodeCtx<'_>, i: I2<'_>) -> Result<Outs> {
    let a = ctx.input(0)?;
    if a.is_float() {
        return Err(ctx.err(format!("integer operands required, not {}", a.elem())));
    }
    arith(ctx, &|_, _| f64::NAN, Some(i))
}

fn pow(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let (shape, ia, ib) = pair(ctx, a, b)?;
    let x = a.to_f64s().ok_or_else(|| ctx.unsupported("string operands"))?;
    let y = b.to_f64s().ok_or_else(|| ctx.unsupported("string operands"))?;
    let out: Vec<f64> = ia.iter().zip(&ib).map(|(&p, &q)| x[p].powf(y[q])).collect();
    let data = Data::from_f64s(a.elem(), &out).ok_or_else(|| ctx.unsupported(format!("element type {}", a.elem())))?;
    one(Tensor { shape, data })
}

fn variadic(ctx: &NodeCtx<'_>, f: F2<'_>, i: Option<I2<'_>>, mean: bool) -> Result<Outs> {
    let mut acc = ctx.input(0)?.clone();
    let n = ctx.n_inputs();
    for k in 1..n {
        acc = binary(ctx, &acc, ctx.input(k)?, f, i)?;
    }
    if mean && n > 1 {
        let d = Tensor::scalar(Data::from_f64s(acc.elem(), &[n as f64]).ok_or_else(|| ctx.unsupported("type"))?);
        acc = binary(ctx, &acc, &d, &|a, b| a / b, None)?;
    }
    one(acc)
}

fn cmp_typed<T: Scalar>(
    x: &[T],
    y: &[T],
    ia: &[usize],
    ib: &[usize],
    f: &dyn Fn(f64, f64) -> bool,
    i: &dyn Fn(i128, i128) -> bool,
) -> Vec<bool> {
    let pairs = ia.iter().zip(ib);
    if T::FLOAT {
        pairs.map(|(&p, &q)| f(x[p].to_f64(), y[q].to_f64())).collect()
    } else {
        pairs.map(|(&p, &q)| i(x[p].to_i128(), y[q].to_i128())).collect()
    }
}

fn compare(ctx: &NodeCtx<'_>, f: &dyn Fn(f64, f64) -> bool, i: &dyn Fn(i128, i128) -> bool) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.elem() != b.elem() {
        return Err(ctx.err(format!("operand types differ: {} and {}", a.elem(), b.elem())));
    }
    let (shape, ia, ib) = pair(ctx, a, b)?;
    let out = match (&a.data, &b.data) {
        (Data::Str(x), Data::Str(y)) if ctx.op() == "Equal" => {
            ia.iter().zip(&ib).map(|(&p, &q)| x[p] == y[q]).collect()
        }
        _ => each_num2!(&a.data, &b.data, x, y => cmp_typed(x, y, &ia, &ib, f, i), _ => {
            return Err(ctx.unsupported(format!("element type {}", a.elem())))
        }),
    };
    one(Tensor { shape, data: Data::Bool(out) })
}

fn logical(ctx: &NodeCtx<'_>, f: &dyn Fn(bool, bool) -> bool) -> Result<Outs> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    let (Data::Bool(x), Data::Bool(y)) = (&a.data, &b.data) else {
        return Err(ctx.err("bool operands required"));
    };
    let (shape, ia, ib) = pair(ctx, a, b)?;
    one(Tensor { shape, data: Data::Bool(ia.iter().zip(&ib).map(|(&p, &q)| f(x[p], y[q])).collect()) })
}

fn where_(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let Data::Bool(cond) = &c.data else { return Err(ctx.err("the condition must be bool")) };
    if x.elem() != y.elem() {
        return Err(ctx.err(format!("operand types differ: {} and {}", x.elem(), y.elem())));
    }
    let shape = broadcast_shape(&[&c.shape, &x.shape, &y.shape])
        .ok_or_else(|| ctx.err(format!("shapes {:?}, {:?}, {:?} do not broadcast", c.shape, x.shape, y.shape)))?;
    let (ic, ix, iy) =
        (broadcast_index(&shape, &c.shape), broadcast_index(&shape, &x.shape), broadcast_index(&shape, &y.shape));
    // Gather from the concatenation of x and y.
    let both = Data::concat(&[&x.data, &y.data]).ok_or_else(|| ctx.unsupported("element type"))?;
    let n = x.len();
    let idx: Vec<usize> = (0..ic.len()).map(|k| if cond[ic[k]] { ix[k] } else { n + iy[k] }).collect();
    one(Tensor { shape, data: both.take(&idx) })
}

fn clip(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let (lo, hi) = if ctx.opset < 11 {
        (ctx.attr_opt_f("min").map(f64::from), ctx.attr_opt_f("max").map(f64::from))
    } else {
        let bound = |i| -> Result<Option<f64>> {
            match ctx.opt_input(i)? {
                None => Ok(None),
                Some(t) => Ok(t.to_f64s().and_then(|v| v.first().copied())),
            }
        };
        (bound(1)?, bound(2)?)
    };
    let f = |v: f64| {
        let v = match lo {
            Some(l) if v < l => l,
            _ => v,
        };
        match hi {
            Some(h) if v > h => h,
            _ => v,
        }
    };
    let (li, hi_i) = (lo.map(|l| l as i128), hi.map(|h| h as i128));
    let i = move |v: i128| v.max(li.unwrap_or(i128::MIN)).min(hi_i.unwrap_or(i128::MAX));
    let data = each_num!(&x.data, v => map_typed(v, &f, Some(&i)), _ => None)
        .ok_or_else(|| ctx.unsupported(format!("element type {}", x.elem())))?;
    one(Tensor { shape: x.shape.clone(), data })
}

fn cast_typed<T: Scalar>(v: &[T], to: ElemType) -> Option<Data> {
    if T::FLOAT || to_is_float(to) {
        Data::from_f64s(to, &v.iter().map(|x| x.to_f64()).collect::<Vec<_>>())
    } else {
        Data::from_i128s(to, &v.iter().map(|x| x.to_i128()).collect::<Vec<_>>())
    }
}

fn to_is_float(e: ElemType) -> bool {
    matches!(
        e,
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

/// Formats a float as NumPy's `str` does for the common cases.
fn float_string(x: f64, single: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = if single { format!("{}", x as f32) } else { format!("{x}") };
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        let e = if single { format!("{:e}", x as f32) } else { format!("{x:e}") };
        // Rust: 1.5e-5 → NumPy: 1.5e-05
        if let Some((m, exp)) = e.split_once('e') {
            let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
            return format!("{m}e{sign}{digits:0>2}");
        }
        return e;
    }
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// `x` converted to element type `to`.
pub(crate) fn cast(ctx: &NodeCtx<'_>, x: &Tensor, to: ElemType) -> Result<Tensor> {
    if to == ElemType::Float8e8m0 {
        let mode = ctx.attr_s("round_mode").unwrap_or_else(|| "up".into());
        if !["up", "down", "nearest"].contains(&mode.as_str()) {
            return Err(ctx.err(format!("round_mode '{mode}'")));
        }
        let saturate = ctx.attr_i("saturate", 1) != 0;
        let v = x.to_f64s().ok_or_else(|| ctx.unsupported(format!("cast from {} to {to}", x.elem())))?;
        let codes =
            v.iter().map(|&a| crate::exotic::F8E8M0(crate::exotic::F8E8M0::encode(a, &mode, saturate))).collect();
        return Ok(Tensor { shape: x.shape.clone(), data: Data::F8E8M0(codes) });
    }
    // saturate = 0: out-of-range values become infinity or NaN in 8-bit floats
    if ctx.attr_i("saturate", 1) == 0 && to != ElemType::Float4e2m1 {
        if let (Some(v), Some(_)) = (x.to_f64s(), crate::exotic::encode_float(to, 0.0, false)) {
            let codes = v.iter().filter_map(|&a| crate::exotic::encode_float(to, a, false)).collect();
            let data = crate::exotic::float_codes(to, codes).ok_or_else(|| ctx.err("type"))?;
            return Ok(Tensor { shape: x.shape.clone(), data });
        }
    }
    let data = match (&x.data, to) {
        (Data::Str(v), ElemType::String) => Data::Str(v.clone()),
        (Data::Str(v), _) => {
            let mut out = Vec::with_capacity(v.len());
            for s in v {
                let text = String::from_utf8_lossy(s);
                let t = text.trim();
                let parsed = match t.to_ascii_lowercase().as_str() {
                    "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
                    "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
                    "nan" | "-nan" | "+nan" => Some(f64::NAN),
                    _ => t.parse::<f64>().ok(),
                };
                out.push(parsed.ok_or_else(|| ctx.err(format!("cannot parse '{t}' as a number")))?);
            }
            Data::from_f64s(to, &out).ok_or_else(|| ctx.unsupported(format!("cast to {to}")))?
        }
        (data, ElemType::String) => {
            let strings: Vec<Vec<u8>> = match data {
                Data::F32(v) => v.iter().map(|&f| float_string(f64::from(f), true)).map(String::into_bytes).collect(),
                Data::F64(v) => v.iter().map(|&f| float_string(f, false)).map(String::into_bytes).collect(),
                Data::Bool(v) => v.iter().map(|&b| if b { "True" } else { "False" }.as_bytes().to_vec()).collect(),
                other if !x.is_float() => {
                    other.to_i128s().unwrap_or_default().iter().map(|i| i.to_string().into_bytes()).collect()
                }
                _ => return Err(ctx.unsupported(format!("cast from {} to string", x.elem()))),
            };
            Data::Str(strings)
        }
        (data, to) => each_num!(data, v => cast_typed(v, to), _ => None)
            .ok_or_else(|| ctx.unsupported(format!("cast from {} to {to}", x.elem())))?,
    };
    Ok(Tensor { shape: x.shape.clone(), data })
}

/// A float tensor's elements as `f64`, or a refusal naming the type.
pub(crate) fn floats(ctx: &NodeCtx<'_>, t: &Tensor) -> Result<Vec<f64>> {
    if !t.is_float() {
        return Err(ctx.unsupported(format!("element type {} (float types only)", t.elem())));
    }
    t.to_f64s().ok_or_else(|| ctx.unsupported("string operands"))
}

/// `values` as a tensor of `elem` with `shape`.
pub(crate) fn from_f64s(ctx: &NodeCtx<'_>, elem: ElemType, shape: Vec<usize>, values: &[f64]) -> Result<Tensor> {
    let data = Data::from_f64s(elem, values).ok_or_else(|| ctx.unsupported(format!("element type {elem}")))?;
    Tensor::new(shape, data).ok_or_else(|| ctx.err("internal: element count does not match the shape"))
}
