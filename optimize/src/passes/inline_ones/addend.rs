//! The term a rewrite adds after its reduction (Gemm's `beta·C`, Conv's
//! bias), read the cheapest way that needs no new node: the value itself
//! when it needs no change, a scalar when it is uniform, or a stored copy
//! scaled and reshaped when its elements are known.

use super::chain::{Chain, Ref};
use crate::rewrite::{constant_tensor, scalar_tensor};
use crate::uniform::uniform;
use crate::Analysis;
use diamond_infer::graph::{ConstData, ConstValue, Elem};
use diamond_ir::{Model, ValueId};

/// `factor · v`, reshaped to `shape` (same elements, row-major) when
/// given, for `chain` to add, and whether it became a scalar; `None` when
/// that would take a node.
pub(super) fn addend(
    model: &Model,
    a: &Analysis,
    chain: &mut Chain<'_>,
    v: ValueId,
    factor: f64,
    shape: Option<Vec<usize>>,
) -> Option<(Ref, bool)> {
    let dtype = a.dtype(model, v)?;
    if let Some(u) = uniform(model, a, v) {
        let t = scalar_tensor("", dtype, u.value * factor)?;
        return Some((chain.constant("bias", t), true));
    }
    if factor == 1.0 && shape.is_none() {
        return Some((Ref::Old(v), false));
    }
    let k = a.constant(model, v)?;
    let data = match &k.data {
        ConstData::Floats(f) => ConstData::Floats(f.iter().map(|x| x * factor).collect()),
        ConstData::Ints(e) if factor.fract() == 0.0 => ConstData::Ints(
            e.iter().map(|x| Some(Elem::Int(x.as_int()?.checked_mul(factor as i64)?))).collect::<Option<_>>()?,
        ),
        _ => return None,
    };
    let shape = shape.unwrap_or_else(|| k.shape.clone());
    if shape.iter().product::<usize>() != k.shape.iter().product::<usize>() {
        return None;
    }
    let t = constant_tensor("", &ConstValue { dtype: k.dtype, shape, data })?;
    Some((chain.constant("bias", t), false))
}
