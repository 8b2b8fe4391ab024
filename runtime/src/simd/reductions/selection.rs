//! Selection on the session's own kernels: **TopK** of `f32` values (the
//! selection shared with the reference, `top_k_sources`, on the values as
//! they are, without widening every one to `f64`) and **NonZero** of bool,
//! float and integer tensors (the flat positions first, then each axis's
//! coordinate). Detection postprocessing runs both once per class: in
//! torchvision's SSDlite export, 90 of each a run.

use super::contraction::int_attr;
use crate::ops::reduce_linalg::top_k_sources;
use crate::tensor::{Data, Tensor};
use diamond_ir::Node;

/// TopK of an `f32` tensor (opset 10+: `K` an operand): the values and
/// their indices along the axis, or `None` for other types, a `K` out of
/// range or the opset-1 attribute form (the reference reports them).
pub(crate) fn top_k(node: &Node, inputs: &[Option<&Tensor>]) -> Option<Vec<Tensor>> {
    let (x, k) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let Data::F32(values) = &x.data else { return None };
    let k = match &k.data {
        Data::I64(v) if v.len() == 1 => usize::try_from(v[0]).ok()?,
        _ => return None,
    };
    let rank = x.rank() as i64;
    let axis = int_attr(node, "axis", -1)?;
    if !(-rank..rank).contains(&axis) {
        return None;
    }
    let axis = axis.rem_euclid(rank) as usize;
    if k > x.shape[axis] {
        return None;
    }
    let largest = int_attr(node, "largest", 1)? != 0;
    let (src, ind) = top_k_sources(values, &x.shape, axis, k, largest);
    let mut shape = x.shape.clone();
    shape[axis] = k;
    let picked = src.iter().map(|&s| values[s]).collect();
    Some(vec![Tensor::new(shape.clone(), Data::F32(picked))?, Tensor::new(shape, Data::I64(ind))?])
}

/// NonZero: the coordinates of every element that is not zero (NaN is
/// not), as `int64 [rank, count]`; `None` for scalars and other types.
pub(crate) fn non_zero(inputs: &[Option<&Tensor>]) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    fn flat<T: Copy>(v: &[T], nonzero: impl Fn(T) -> bool) -> Vec<usize> {
        v.iter().enumerate().filter(|(_, &a)| nonzero(a)).map(|(i, _)| i).collect()
    }
    let positions = match &x.data {
        Data::Bool(v) => flat(v, |a| a),
        Data::F32(v) => flat(v, |a| a != 0.0),
        Data::I64(v) => flat(v, |a| a != 0),
        Data::I32(v) => flat(v, |a| a != 0),
        Data::U8(v) => flat(v, |a| a != 0),
        _ => return None,
    };
    let rank = x.rank();
    if rank == 0 {
        return None;
    }
    let count = positions.len();
    let mut strides = vec![1usize; rank];
    for a in (0..rank - 1).rev() {
        strides[a] = strides[a + 1] * x.shape[a + 1];
    }
    let mut coords = vec![0i64; rank * count];
    for (j, &p) in positions.iter().enumerate() {
        let mut rest = p;
        for (a, &stride) in strides.iter().enumerate() {
            coords[a * count + j] = (rest / stride) as i64;
            rest %= stride;
        }
    }
    Tensor::new(vec![rank, count], Data::I64(coords))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_picks_by_value_then_index_and_non_zero_lists_coordinates() {
        let x = Tensor::new(vec![2, 4], Data::F32(vec![1.0, 3.0, 3.0, 0.0, 0.5, f32::NAN, 2.0, 2.0])).unwrap();
        let k = Tensor::new(vec![1], Data::I64(vec![2])).unwrap();
        let node = Node { op_type: Some("TopK".into()), ..Default::default() };
        let out = top_k(&node, &[Some(&x), Some(&k)]).unwrap();
        assert_eq!(out[0].shape, vec![2, 2]);
        let Data::F32(v) = &out[0].data else { panic!("f32 values") };
        assert_eq!((v[0], v[1]), (3.0, 3.0));
        assert!(v[2].is_nan() && v[3] == 2.0, "NaN ranks above every number: {v:?}");
        assert_eq!(out[1].data, Data::I64(vec![1, 2, 1, 2]));
        let nz = non_zero(&[Some(&x)]).unwrap();
        assert_eq!(nz.shape, vec![2, 7]);
        assert_eq!(nz.data, Data::I64(vec![0, 0, 0, 1, 1, 1, 1, 0, 1, 2, 0, 1, 2, 3]));
    }
}
