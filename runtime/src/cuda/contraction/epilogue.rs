//! The epilogue of a contraction kernel: the elementwise program fused
//! after the node, applied to each accumulator in registers. It fuses when
//! every operand of the program that reads the product reads it one to one
//! — each point of the program's space its own product element, in the
//! same C order (the product's dims, or a Reshape's, followed in order) —
//! so a product element's linear index is the program point's. The
//! program's body is emitted by the program code generator into a
//! `__device__` function of that index and the accumulator, its loads of
//! the product reading the accumulator (rounded to the product's storage
//! type, as the reference computes it), its other operands read through
//! their views, and its outputs stored.

use crate::cuda::codegen::{load_expr, storage_type, store_expr, Gen};
use crate::kernel::{Extent, Program};
use diamond_ir::ElemType;
use std::collections::BTreeSet;
use std::fmt::Write;

/// The operands of `p` reading `product`, when every one reads it one to
/// one and some does (`None`: the program cannot be fused in registers).
pub(crate) fn product_operands(p: &Program, product: &str) -> Option<Vec<usize>> {
    if !p.reduce.is_empty() {
        return None;
    }
    let readers: Vec<usize> = (0..p.operands.len()).filter(|&k| p.operands[k].value == product).collect();
    if readers.is_empty() {
        return None;
    }
    for &k in &readers {
        let v = &p.operands[k];
        let mut followed = Vec::new();
        for (dim, vd) in v.dims.iter().zip(&v.view) {
            match vd.axis {
                Some(a) if vd.start == 0 && vd.step == 1 && p.axes.get(a) == Some(dim) => followed.push(a),
                None if *dim == Extent::Known(1) => {}
                _ => return None,
            }
        }
        // In order, and every axis of more than one point followed.
        if followed.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        let covered = (0..p.axes.len()).all(|a| followed.contains(&a) || p.axes[a] == Extent::Known(1));
        if !covered {
            return None;
        }
    }
    Some(readers)
}

/// The parameters both the kernel and the epilogue function take for the
/// program's own buffers: every operand but the product's readers, the
/// outputs.
pub(crate) fn buffer_params(p: &Program, readers: &[usize]) -> Result<Vec<String>, String> {
    let mut params = Vec::new();
    for (k, v) in p.operands.iter().enumerate() {
        if !readers.contains(&k) {
            params.push(format!("const {}* __restrict__ in{k}", storage_type(v.elem)?));
        }
    }
    for (k, o) in p.outputs.iter().enumerate() {
        params.push(format!("{}* __restrict__ out{k}", storage_type(o.view.elem)?));
    }
    Ok(params)
}

/// The argument names matching [`buffer_params`].
pub(crate) fn buffer_args(p: &Program, readers: &[usize]) -> Vec<String> {
    let mut args: Vec<String> =
        (0..p.operands.len()).filter(|k| !readers.contains(k)).map(|k| format!("in{k}")).collect();
    args.extend((0..p.outputs.len()).map(|k| format!("out{k}")));
    args
}

/// The `__device__` function `<name>(<buffers>, <symbols>, L, acc)` that
/// applies `p` at linear point `L` to the accumulator `acc` of a product
/// stored as `product_elem`.
pub(crate) fn device_function(
    name: &str,
    p: &Program,
    readers: &[usize],
    product_elem: ElemType,
    symbols: &[String],
) -> Result<String, String> {
    // The product as the epilogue reads it: rounded to its storage type.
    let stored = load_expr(product_elem, &store_expr(product_elem, "acc"));
    let value = if matches!(product_elem, ElemType::Float16 | ElemType::Bfloat16) { stored } else { "acc".to_string() };
    let replaced = (0..p.operands.len()).map(|k| readers.contains(&k).then(|| value.clone())).collect();
    let mut g = Gen::new(p, symbols, replaced)?;
    let mut params = buffer_params(p, readers)?;
    params.extend((0..symbols.len()).map(|i| format!("long long S{i}")));
    params.push("long long L".into());
    params.push("float acc".into());
    let _ = writeln!(g.out, "static __device__ __forceinline__ void {name}({}) {{", params.join(", "));
    g.prologue();
    let axes: Vec<usize> = (0..p.axes.len()).collect();
    g.decompose("  ", "L", &axes);
    let all: BTreeSet<usize> = axes.iter().copied().collect();
    let sources: Vec<usize> = p.outputs.iter().map(|o| o.source).collect();
    let mut have = BTreeSet::new();
    g.emit("  ", &sources, &mut have, &all)?;
    for k in 0..p.outputs.len() {
        g.store("  ", k, &all);
    }
    g.out.push_str("}\n");
    Ok(g.out)
}
