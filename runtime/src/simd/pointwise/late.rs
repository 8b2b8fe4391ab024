//! `f32` elementwise nodes and reductions whose shapes are known only at
//! run time, on the session's own kernels.
//!
//! A fused program is bound to sizes when the session is prepared; a node
//! whose output shape depends on values (after an `If` whose branches give
//! different ranks, as silero-vad's decoder has) has no program, and used to
//! fall back to the reference kernels, which compute through `f64` one
//! element at a time. Here such a node runs on the shapes its operands have
//! when it runs: unary activations and arithmetic point for point, binary
//! arithmetic with NumPy broadcasting, and `ReduceMean`/`ReduceSum`/
//! `ReduceMax`/`ReduceMin` over any axes; and `Shape` and `Size` of such
//! values ([`shape_of`]). Other operators, types and
//! attributes return `None` (the reference kernels then run the node).

use super::contraction::Take;
use super::integer::map2;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};

/// The operators [`compute`] takes.
pub(crate) const OPS: [&str; 17] = [
    "Relu",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sqrt",
    "Reciprocal",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
];

/// Whether [`compute`] takes `node`'s operator (for `f32` operands).
pub(crate) fn covers(node: &Node) -> bool {
    node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx") && OPS.contains(&node.op_type())
}

/// Computes `node` on the shapes of `inputs`, or `None` when it is not an
/// `f32` node this module takes.
pub(crate) fn compute(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let op = node.op_type();
    let x = inputs.first().copied().flatten()?;
    let Data::F32(a) = &x.data else { return None };
    let unary: Option<fn(f32) -> f32> = match op {
        "Relu" => Some(|v| v.max(0.0)),
        "Sigmoid" => Some(|v| 1.0 / (1.0 + (-v).exp())),
        "Tanh" => Some(f32::tanh),
        "Exp" => Some(f32::exp),
        "Log" => Some(f32::ln),
        "Neg" => Some(|v| -v),
        "Abs" => Some(f32::abs),
        "Sqrt" => Some(f32::sqrt),
        "Reciprocal" => Some(|v| 1.0 / v),
        _ => None,
    };
    if let Some(f) = unary {
        if inputs.len() != 1 {
            return None;
        }
        let mut out = take(a.len());
        out.clear();
        out.extend(a.iter().map(|&v| f(v)));
        return Tensor::new(x.shape.clone(), Data::F32(out));
    }
    let binary: Option<fn(f32, f32) -> f32> = match op {
        "Add" => Some(|p, q| p + q),
        "Sub" => Some(|p, q| p - q),
        "Mul" => Some(|p, q| p * q),
        "Div" => Some(|p, q| p / q),
        _ => None,
    };
    if let Some(f) = binary {
        let [_, Some(y)] = inputs else { return None };
        let Data::F32(b) = &y.data else { return None };
        let (shape, out) = map2(a, &x.shape, b, &y.shape, f)?;
        return Tensor::new(shape, Data::F32(out));
    }
    reduce(node, x, a, inputs.get(1).copied().flatten(), take)
}

/// `Shape` (its `start`/`end` slice of the dimensions, clamped as ONNX
/// clamps them) and `Size` of a tensor of any type, as int64.
pub(crate) fn shape_of(node: &Node, inputs: &[Option<&Tensor>]) -> Option<Tensor> {
    let x = inputs.first().copied().flatten()?;
    if node.op_type() == "Size" {
        return Tensor::new(Vec::new(), Data::I64(vec![i64::try_from(x.shape.iter().product::<usize>()).ok()?]));
    }
    let dims = shape_dims(node, &x.shape)?;
    Tensor::new(vec![dims.len()], Data::I64(dims))
}

/// What `Shape` node `node` gives for an input of `dims`: the slice its
/// `start` and `end` select, clamped as ONNX clamps them.
pub(crate) fn shape_dims(node: &Node, dims: &[usize]) -> Option<Vec<i64>> {
    let rank = dims.len() as i64;
    let bound = |name: &str, default: i64| -> Option<usize> {
        let v = match node.attribute(name).and_then(|a| a.value()) {
            Some(AttrValue::Int(v)) => v,
            None => default,
            _ => return None,
        };
        Some((if v < 0 { v + rank } else { v }).clamp(0, rank) as usize)
    };
    let (start, end) = (bound("start", 0)?, bound("end", rank)?);
    dims[start..end.max(start)].iter().map(|&d| i64::try_from(d).ok()).collect()
}

/// `Reduce{Mean,Sum,Max,Min}` of `a` (the data of `x`) over the axes of the
/// attribute or of operand `axes` (`noop_with_empty_axes` honoured).
fn reduce(node: &Node, x: &Tensor, a: &[f32], axes: Option<&Tensor>, take: Take<'_>) -> Option<Tensor> {
    let rank = x.shape.len();
    let keepdims = !matches!(node.attribute("keepdims").and_then(|v| v.value()), Some(AttrValue::Int(0)));
    let listed: Vec<i64> = match (axes, node.attribute("axes").and_then(|v| v.value())) {
        (Some(t), _) if !t.is_float() => t.to_i64s()?,
        (Some(_), _) => return None,
        (None, Some(AttrValue::Ints(v))) => v.to_vec(),
        (None, Some(_)) => return None,
        (None, None) => Vec::new(),
    };
    let noop = matches!(node.attribute("noop_with_empty_axes").and_then(|v| v.value()), Some(AttrValue::Int(1)));
    if listed.is_empty() && noop {
        let mut out = take(a.len());
        out.clear();
        out.extend_from_slice(a);
        return Tensor::new(x.shape.clone(), Data::F32(out));
    }
    let mut reduced = vec![listed.is_empty(); rank];
    for &axis in &listed {
        let r = rank as i64;
        if !(-r..r).contains(&axis) {
            return None;
        }
        reduced[axis.rem_euclid(r) as usize] = true;
    }
    // the output's strides over the input's axes (0 on reduced ones)
    let kept: Vec<usize> = (0..rank).filter(|&i| !reduced[i]).map(|i| x.shape[i]).collect();
    let mut strides = vec![0usize; rank];
    let mut acc = 1;
    for i in (0..rank).rev() {
        if !reduced[i] {
            strides[i] = acc;
            acc *= x.shape[i];
        }
    }
    let len: usize = kept.iter().product();
    let count = if len == 0 { 0 } else { a.len() / len };
    let (start, fold): (f32, fn(f32, f32) -> f32) = match node.op_type() {
        "ReduceSum" | "ReduceMean" => (0.0, |s, v| s + v),
        "ReduceMax" if count > 0 => (f32::NEG_INFINITY, |s, v| if v > s || v.is_nan() { v } else { s }),
        "ReduceMin" if count > 0 => (f32::INFINITY, |s, v| if v < s || v.is_nan() { v } else { s }),
        _ => return None,
    };
    let mut out = take(len);
    out.clear();
    out.resize(len, start);
    let mut index = vec![0usize; rank];
    let mut at = 0usize;
    for &v in a {
        out[at] = fold(out[at], v);
        for i in (0..rank).rev() {
            index[i] += 1;
            at += strides[i];
            if index[i] < x.shape[i] {
                break;
            }
            at -= strides[i] * x.shape[i];
            index[i] = 0;
        }
    }
    if node.op_type() == "ReduceMean" {
        let n = count as f32;
        out.iter_mut().for_each(|s| *s /= n);
    }
    let shape: Vec<usize> =
        if keepdims { (0..rank).map(|i| if reduced[i] { 1 } else { x.shape[i] }).collect() } else { kept };
    Tensor::new(shape, Data::F32(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use diamond_ir::{AttrType, Attribute, Node};

    fn node(op: &str, attrs: Vec<Attribute>) -> Node {
        Node { op_type: Some(op.into()), attributes: attrs, ..Default::default() }
    }

    fn ints(name: &str, v: Vec<i64>) -> Attribute {
        Attribute { name: Some(name.into()), attr_type: Some(AttrType::Ints), ints: v, ..Default::default() }
    }

    fn int(name: &str, v: i64) -> Attribute {
        Attribute { name: Some(name.into()), attr_type: Some(AttrType::Int), i: Some(v), ..Default::default() }
    }

    fn run(n: &Node, inputs: &[&Tensor]) -> Tensor {
        let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|&t| Some(t)).collect();
        compute(n, &inputs, &mut |len| Vec::with_capacity(len)).unwrap()
    }

    #[test]
    fn reductions_over_listed_axes_keep_or_drop_them() {
        let x = Tensor::new(vec![2, 3], Data::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])).unwrap();
        let mean = run(&node("ReduceMean", vec![ints("axes", vec![-1])]), &[&x]);
        assert_eq!((mean.shape.clone(), mean.data), (vec![2, 1], Data::F32(vec![2.0, 5.0])));
        let max = run(&node("ReduceMax", vec![ints("axes", vec![0]), int("keepdims", 0)]), &[&x]);
        assert_eq!((max.shape.clone(), max.data), (vec![3], Data::F32(vec![4.0, 5.0, 6.0])));
        let all = run(&node("ReduceSum", vec![]), &[&x]);
        assert_eq!((all.shape.clone(), all.data), (vec![1, 1], Data::F32(vec![21.0])));
    }

    #[test]
    fn binary_arithmetic_broadcasts_and_unary_maps() {
        let x = Tensor::new(vec![2, 1], Data::F32(vec![1.0, -2.0])).unwrap();
        let y = Tensor::new(vec![3], Data::F32(vec![10.0, 20.0, 30.0])).unwrap();
        let sum = run(&node("Add", vec![]), &[&x, &y]);
        assert_eq!(sum.shape, vec![2, 3]);
        assert_eq!(sum.data, Data::F32(vec![11.0, 21.0, 31.0, 8.0, 18.0, 28.0]));
        assert_eq!(run(&node("Relu", vec![]), &[&x]).data, Data::F32(vec![1.0, 0.0]));
        let ints = Tensor::new(vec![1], Data::I64(vec![1])).unwrap();
        let inputs = [Some(&ints)];
        assert!(compute(&node("Relu", vec![]), &inputs, &mut |len| Vec::with_capacity(len)).is_none());
    }
}
