//! Integer arithmetic and comparisons with broadcasting on the session's
//! own kernels: the index work exported models do at run time (one-hot
//! `Equal` of int32 labels against a range, position arithmetic, mask
//! comparisons), which the fused `f32` kernels do not compute and the
//! reference kernels run through `f64`.
//!
//! `Add`, `Sub`, `Mul` of int32 or int64 (wrapping, as onnxruntime's
//! integer arithmetic does) and `Equal`, `Less`, `LessOrEqual`, `Greater`,
//! `GreaterOrEqual` of int32 or int64 (bool out), NumPy broadcasting of
//! two operands. Anything else is left to the reference kernels.

use crate::tensor::{Data, Tensor};
use diamond_ir::Node;

/// The operators [`binary`] takes (for integer operands).
pub(crate) const OPS: [&str; 8] = ["Add", "Sub", "Mul", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"];

/// The broadcast shape of `a` and `b`, and each one's strides over it (0 where it broadcasts).
fn broadcast(a: &[usize], b: &[usize]) -> Option<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    let mut shape = Vec::with_capacity(rank);
    for i in 0..rank {
        let (x, y) = (dim(a, i), dim(b, i));
        shape.push(match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => return None,
        });
    }
    let strides = |s: &[usize]| {
        let mut st = vec![0usize; rank];
        let mut acc = 1;
        for i in (0..rank).rev() {
            let d = dim(s, i);
            st[i] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        st
    };
    Some((shape.clone(), strides(a), strides(b)))
}

/// `f(a[i], b[j])` over the broadcast of `a` (dims `sa`) and `b` (dims `sb`).
pub(in crate::simd) fn map2<T: Copy, U>(
    a: &[T],
    sa: &[usize],
    b: &[T],
    sb: &[usize],
    f: impl Fn(T, T) -> U,
) -> Option<(Vec<usize>, Vec<U>)> {
    let (shape, ta, tb) = broadcast(sa, sb)?;
    let len: usize = shape.iter().product();
    let mut out = Vec::with_capacity(len);
    if len == 0 {
        return Some((shape, out));
    }
    let rank = shape.len();
    if rank == 0 {
        out.push(f(a[0], b[0]));
        return Some((shape, out));
    }
    let (inner, ia, ib) = (shape[rank - 1], ta[rank - 1], tb[rank - 1]);
    let mut index = vec![0usize; rank];
    for _ in 0..len / inner {
        let (oa, ob): (usize, usize) =
            index.iter().zip(ta.iter().zip(&tb)).fold((0, 0), |(x, y), (i, (p, q))| (x + i * p, y + i * q));
        // contiguous or broadcast rows as slices, which the compiler vectorizes
        match (ia, ib) {
            (1, 1) => out.extend(a[oa..oa + inner].iter().zip(&b[ob..ob + inner]).map(|(&x, &y)| f(x, y))),
            (1, 0) => out.extend(a[oa..oa + inner].iter().map(|&x| f(x, b[ob]))),
            (0, 1) => out.extend(b[ob..ob + inner].iter().map(|&y| f(a[oa], y))),
            _ => out.extend((0..inner).map(|j| f(a[oa + j * ia], b[ob + j * ib]))),
        }
        for axis in (0..rank - 1).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Some((shape, out))
}

macro_rules! integer_op {
    ($op:expr, $a:expr, $sa:expr, $b:expr, $sb:expr, $variant:ident) => {
        match $op {
            "Add" => map2($a, $sa, $b, $sb, |x, y| x.wrapping_add(y)).map(|(s, v)| (s, Data::$variant(v))),
            "Sub" => map2($a, $sa, $b, $sb, |x, y| x.wrapping_sub(y)).map(|(s, v)| (s, Data::$variant(v))),
            "Mul" => map2($a, $sa, $b, $sb, |x, y| x.wrapping_mul(y)).map(|(s, v)| (s, Data::$variant(v))),
            "Equal" => map2($a, $sa, $b, $sb, |x, y| x == y).map(|(s, v)| (s, Data::Bool(v))),
            "Less" => map2($a, $sa, $b, $sb, |x, y| x < y).map(|(s, v)| (s, Data::Bool(v))),
            "LessOrEqual" => map2($a, $sa, $b, $sb, |x, y| x <= y).map(|(s, v)| (s, Data::Bool(v))),
            "Greater" => map2($a, $sa, $b, $sb, |x, y| x > y).map(|(s, v)| (s, Data::Bool(v))),
            "GreaterOrEqual" => map2($a, $sa, $b, $sb, |x, y| x >= y).map(|(s, v)| (s, Data::Bool(v))),
            _ => None,
        }
    };
}

/// The node's result for two int32 or two int64 operands, or `None`.
pub(crate) fn binary(node: &Node, inputs: &[Option<&Tensor>]) -> Option<Tensor> {
    let [Some(x), Some(y)] = inputs else { return None };
    let (shape, data) = match (&x.data, &y.data) {
        (Data::I64(a), Data::I64(b)) => integer_op!(node.op_type(), a, &x.shape, b, &y.shape, I64)?,
        (Data::I32(a), Data::I32(b)) => integer_op!(node.op_type(), a, &x.shape, b, &y.shape, I32)?,
        _ => return None,
    };
    Some(Tensor { shape, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str) -> Node {
        Node { op_type: Some(op.into()), ..Default::default() }
    }

    #[test]
    fn one_hot_equal_broadcasts_labels_against_a_range() {
        let labels = Tensor { shape: vec![3, 1], data: Data::I32(vec![2, 0, 1]) };
        let range = Tensor { shape: vec![4], data: Data::I32(vec![0, 1, 2, 3]) };
        let got = binary(&node("Equal"), &[Some(&labels), Some(&range)]).expect("covered");
        assert_eq!(got.shape, vec![3, 4]);
        let want = [false, false, true, false, true, false, false, false, false, true, false, false];
        assert_eq!(got.data, Data::Bool(want.to_vec()));
    }

    #[test]
    fn arithmetic_wraps_and_other_types_are_left_to_the_reference() {
        let a = Tensor { shape: vec![2], data: Data::I64(vec![i64::MAX, 5]) };
        let b = Tensor { shape: vec![], data: Data::I64(vec![1]) };
        let got = binary(&node("Add"), &[Some(&a), Some(&b)]).expect("covered");
        assert_eq!(got.data, Data::I64(vec![i64::MIN, 6]));
        let f = Tensor { shape: vec![2], data: Data::F32(vec![1.0, 2.0]) };
        assert!(binary(&node("Add"), &[Some(&f), Some(&f)]).is_none());
        let c = Tensor { shape: vec![3], data: Data::I64(vec![1, 2, 3]) };
        assert!(binary(&node("Mul"), &[Some(&a), Some(&c)]).is_none(), "2 and 3 do not broadcast");
    }
}
