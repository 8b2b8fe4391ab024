//! `Cast` on the session's own kernels: any number or bool to `f32`, and
//! `f32` to float16 or bfloat16 — the conversions at the edges of a
//! half-precision model computed in `f32`
//! (`diamond_optimize::widen::compute_in_f32`) and the index-to-float casts
//! of masks and positions — and `f32` to `int32`, `int64`, `int8` and
//! `uint8` (truncated toward zero and saturated, NaN to 0, as the reference
//! casts: the rounded zero points of quantized models). Half conversions go through the `half` crate's
//! slice conversions (F16C instructions where the processor has them),
//! split over the pool for large tensors. Other casts (between integers, to
//! strings, 8-bit floats, `saturate`) are left to the reference kernels.

use super::contraction::{int_attr, overwritten, Take};
use crate::tensor::{Data, Tensor};
use diamond_ir::{ElemType, Node};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rayon::prelude::*;

/// Elements per parallel chunk.
const CHUNK: usize = 1 << 15;

/// Whether `node` is a cast these kernels may take (their types are seen in [`cast`]).
pub(crate) fn covers(node: &Node) -> bool {
    node.op_type() == "Cast"
        && node.domain().is_empty()
        && node.attribute("saturate").is_none()
        && matches!(
            int_attr(node, "to", 0).map(|c| ElemType::from_code(c as i32)),
            Some(
                ElemType::Float
                    | ElemType::Float16
                    | ElemType::Bfloat16
                    | ElemType::Int32
                    | ElemType::Int64
                    | ElemType::Int8
                    | ElemType::Uint8
            )
        )
}

/// `Cast` of `inputs[0]`, or `None` for a pair of types these kernels do not convert.
pub(crate) fn cast(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    let to = ElemType::from_code(int_attr(node, "to", 0)? as i32);
    let n = x.data.len();
    let data = match (to, &x.data) {
        (ElemType::Float, Data::F16(v)) => Data::F32(to_f32(take, v, |s, d| s.convert_to_f32_slice(d))),
        (ElemType::Float, Data::Bf16(v)) => Data::F32(to_f32(take, v, |s, d| s.convert_to_f32_slice(d))),
        (ElemType::Float, Data::F32(v)) => {
            let mut out = overwritten(take, n);
            out.copy_from_slice(v);
            Data::F32(out)
        }
        (ElemType::Float, Data::F64(v)) => Data::F32(map(take, v, |&a| a as f32)),
        (ElemType::Float, Data::I64(v)) => Data::F32(map(take, v, |&a| a as f32)),
        (ElemType::Float, Data::I32(v)) => Data::F32(map(take, v, |&a| a as f32)),
        (ElemType::Float, Data::I8(v)) => Data::F32(map(take, v, |&a| f32::from(a))),
        (ElemType::Float, Data::U8(v)) => Data::F32(map(take, v, |&a| f32::from(a))),
        (ElemType::Float, Data::Bool(v)) => Data::F32(map(take, v, |&a| f32::from(u8::from(a)))),
        (ElemType::Float16, Data::F32(v)) => Data::F16(from_f32(v, |s, d: &mut [f16]| d.convert_from_f32_slice(s))),
        (ElemType::Bfloat16, Data::F32(v)) => Data::Bf16(from_f32(v, |s, d: &mut [bf16]| d.convert_from_f32_slice(s))),
        // truncated toward zero and saturated, NaN to 0 (Rust's `as`, the reference's rule)
        (ElemType::Int32, Data::F32(v)) => Data::I32(from_f32(v, |s, d: &mut [i32]| truncate(s, d, |a| a as i32))),
        (ElemType::Int64, Data::F32(v)) => Data::I64(from_f32(v, |s, d: &mut [i64]| truncate(s, d, |a| a as i64))),
        (ElemType::Int8, Data::F32(v)) => Data::I8(from_f32(v, |s, d: &mut [i8]| truncate(s, d, |a| a as i8))),
        (ElemType::Uint8, Data::F32(v)) => Data::U8(from_f32(v, |s, d: &mut [u8]| truncate(s, d, |a| a as u8))),
        _ => return None,
    };
    Some(Tensor { shape: x.shape.clone(), data })
}

/// `src` converted chunk by chunk by `convert` into a pooled `f32` buffer.
fn to_f32<T: Sync>(take: Take<'_>, src: &[T], convert: impl Fn(&[T], &mut [f32]) + Sync) -> Vec<f32> {
    let mut out = overwritten(take, src.len());
    out.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| convert(s, d));
    out
}

/// `f32` elements converted chunk by chunk by `convert` into a new buffer.
fn from_f32<T: Send + Default + Clone>(src: &[f32], convert: impl Fn(&[f32], &mut [T]) + Sync) -> Vec<T> {
    let mut out = vec![T::default(); src.len()];
    out.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| convert(s, d));
    out
}

/// `d[i] = f(s[i])`.
fn truncate<T>(s: &[f32], d: &mut [T], f: impl Fn(f32) -> T) {
    for (o, &a) in d.iter_mut().zip(s) {
        *o = f(a);
    }
}

/// `f(x)` of each element of `src`, into a pooled `f32` buffer.
fn map<T: Sync>(take: Take<'_>, src: &[T], f: impl Fn(&T) -> f32 + Sync) -> Vec<f32> {
    let mut out = overwritten(take, src.len());
    out.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| {
        for (o, a) in d.iter_mut().zip(s) {
            *o = f(a);
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast_node(to: ElemType) -> Node {
        Node {
            op_type: Some("Cast".into()),
            attributes: vec![diamond_ir::Attribute {
                name: Some("to".into()),
                attr_type: Some(diamond_ir::AttrType::Int),
                i: Some(i64::from(to.code())),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn half_to_float_and_back_round_trips_and_matches_the_reference() {
        let values: Vec<f16> = (0..100_000).map(|i| f16::from_f32((i as f32 - 50_000.0) / 1024.0)).collect();
        let x = Tensor { shape: vec![100_000], data: Data::F16(values.clone()) };
        let mut take = |len: usize| Vec::with_capacity(len);
        let wide = cast(&cast_node(ElemType::Float), &[Some(&x)], &mut take).expect("covered");
        let Data::F32(w) = &wide.data else { panic!("f32") };
        assert!(w.iter().zip(&values).all(|(a, b)| *a == b.to_f32()));
        let back = cast(&cast_node(ElemType::Float16), &[Some(&wide)], &mut take).expect("covered");
        assert_eq!(back.data, Data::F16(values));
    }

    #[test]
    fn integers_and_bools_become_floats_floats_truncate_to_integers_and_other_pairs_are_left_to_the_reference() {
        let mut take = |len: usize| Vec::with_capacity(len);
        let x = Tensor { shape: vec![3], data: Data::I64(vec![-2, 0, 7]) };
        let y = cast(&cast_node(ElemType::Float), &[Some(&x)], &mut take).expect("covered");
        assert_eq!(y.data, Data::F32(vec![-2.0, 0.0, 7.0]));
        let b = Tensor { shape: vec![2], data: Data::Bool(vec![true, false]) };
        assert_eq!(cast(&cast_node(ElemType::Float), &[Some(&b)], &mut take).unwrap().data, Data::F32(vec![1.0, 0.0]));
        assert!(!covers(&cast_node(ElemType::Int16)));
        assert!(cast(&cast_node(ElemType::Float16), &[Some(&x)], &mut take).is_none());
        // float to integers: toward zero, saturated, NaN to 0, as the reference casts
        let f = Tensor { shape: vec![5], data: Data::F32(vec![-2.7, 2.7, 1e10, f32::NAN, -300.0]) };
        let to = |e| cast(&cast_node(e), &[Some(&f)], &mut |len| Vec::with_capacity(len)).expect("covered").data;
        assert_eq!(to(ElemType::Int32), Data::I32(vec![-2, 2, i32::MAX, 0, -300]));
        assert_eq!(to(ElemType::Int64), Data::I64(vec![-2, 2, 10_000_000_000, 0, -300]));
        assert_eq!(to(ElemType::Uint8), Data::U8(vec![0, 2, 255, 0, 0]));
        assert_eq!(to(ElemType::Int8), Data::I8(vec![-2, 2, 127, 0, -128]));
        // integers to integers stay with the reference
        assert!(cast(&cast_node(ElemType::Int32), &[Some(&x)], &mut take).is_none());
    }
}
