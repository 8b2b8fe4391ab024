//! Uniform tensors: every element the same constant. A fact carried through
//! the graph like a shape: stored tensors and Constants whose elements are
//! all equal, `ConstantOfShape` (whatever its shape input, symbolic
//! included), value propagation's known elements, and
//! Expand/Tile/Reshape/Transpose/Squeeze/Unsqueeze/Flatten/Identity/Cast of
//! a uniform tensor.

use crate::Analysis;
use diamond_infer::graph::ConstData;
use diamond_ir::{AttrValue, ElemType, Model, ValueId};

/// The one value of a uniform tensor, as a number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Uniform {
    /// The value (integers and booleans as numbers).
    pub value: f64,
}

/// Operators that move or repeat elements without changing them.
const KEEPS_UNIFORMITY: &[&str] =
    &["Expand", "Tile", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast"];

/// Whether `v` is uniform, and its value.
pub fn uniform(model: &Model, a: &Analysis, v: ValueId) -> Option<Uniform> {
    uniform_at(model, a, v, 0)
}

fn uniform_at(model: &Model, a: &Analysis, v: ValueId, depth: usize) -> Option<Uniform> {
    if depth > 32 {
        return None;
    }
    let graph = a.graph(model);
    // A stored tensor: compare its raw elements before decoding any (weights can be large).
    if let Some(&i) = a.initializers.get(&v) {
        if a.known_not_uniform(i) {
            return None;
        }
        let t = &graph.initializers[i];
        if let (Some(raw), Some(bits)) = (t.data.raw.as_ref(), t.elem_type().bit_width()) {
            let width = (bits as usize / 8).max(1);
            if bits % 8 != 0 || raw.len() < width || !raw.chunks(width).all(|c| c == &raw[..width]) {
                return None;
            }
        }
    }
    if let Some(k) = a.constant(model, v) {
        return all_equal(&k.data);
    }
    let node = &graph.nodes[*a.producer.get(&v)?];
    if !node.domain().is_empty() {
        return None;
    }
    match node.op_type() {
        "ConstantOfShape" => match node.attribute("value").and_then(|at| at.value()) {
            None => Some(Uniform { value: 0.0 }),
            Some(AttrValue::Tensor(t)) => all_equal(&diamond_infer::graph::decode::decode(t)?.data),
            Some(_) => None,
        },
        "Cast" => {
            let u = uniform_at(model, a, *node.inputs.first()?, depth + 1)?;
            let to = a.dtype(model, v)?;
            cast(u, to)
        }
        op if KEEPS_UNIFORMITY.contains(&op) => uniform_at(model, a, *node.inputs.first()?, depth + 1),
        _ => None,
    }
}

fn all_equal(data: &ConstData) -> Option<Uniform> {
    let values: Vec<f64> = match data {
        ConstData::Ints(v) => v.iter().map(|e| e.as_int().map(|n| n as f64)).collect::<Option<_>>()?,
        ConstData::Floats(v) => v.clone(),
        ConstData::Bools(v) => v.iter().map(|&b| b as u8 as f64).collect(),
        ConstData::Strings(_) => return None,
    };
    let first = *values.first()?;
    values.iter().all(|&x| x == first || (x.is_nan() && first.is_nan())).then_some(Uniform { value: first })
}

/// The value after a Cast to `to` (integers truncate toward zero, booleans are `x != 0`).
fn cast(u: Uniform, to: ElemType) -> Option<Uniform> {
    let value = match to {
        ElemType::Float | ElemType::Double | ElemType::Float16 | ElemType::Bfloat16 => u.value,
        ElemType::Bool => (u.value != 0.0) as u8 as f64,
        ElemType::Int8 | ElemType::Int16 | ElemType::Int32 | ElemType::Int64 => u.value.trunc(),
        ElemType::Uint8 | ElemType::Uint16 | ElemType::Uint32 | ElemType::Uint64 if u.value >= 0.0 => u.value.trunc(),
        _ => return None,
    };
    Some(Uniform { value })
}
