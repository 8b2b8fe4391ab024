//! Binding a program to sizes: extents from the symbols' values, each view
//! to an offset and one stride per axis, the outer axes put before the
//! reduction axes, size-1 axes dropped and neighbouring axes merged where
//! every view walks them as one. The reach of every view is checked against
//! its tensor's length here, once, so the loops may index without checks.

use crate::kernel::{Level, Program, View};

/// A view as an offset and a stride per (bound) axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strided {
    /// Offset of the point at index 0.
    pub offset: isize,
    /// Element stride per axis.
    pub strides: Vec<isize>,
}

/// A program bound to sizes.
#[derive(Clone, Debug)]
pub struct Bound {
    /// Extents of the bound axes: outer ones, then reduction ones.
    pub extents: Vec<usize>,
    /// How many of them are outer.
    pub n_outer: usize,
    /// Per operand.
    pub operands: Vec<Strided>,
    /// Elements each operand must hold.
    pub operand_lens: Vec<usize>,
    /// Per output.
    pub outputs: Vec<Strided>,
    /// Each output's dims.
    pub output_shapes: Vec<Vec<usize>>,
    /// Points of the reduction space.
    pub reduce_count: usize,
    /// Whether an extent is 0 (nothing to compute, but reductions of
    /// nothing have values).
    pub empty: bool,
}

/// Binds `p` with `value_of` giving each symbol's value.
pub fn bind(p: &Program, value_of: &dyn Fn(&str) -> Option<i64>) -> Result<Bound, String> {
    let ext = |e: &crate::kernel::Extent| -> Result<usize, String> {
        e.eval(value_of).and_then(|v| usize::try_from(v).ok()).ok_or_else(|| format!("the size {e} is not bound"))
    };
    let axes: Vec<usize> = p.axes.iter().map(ext).collect::<Result<_, _>>()?;
    let views = |v: &View| -> Result<(Vec<isize>, isize, Vec<usize>), String> {
        let dims: Vec<usize> = v.dims.iter().map(ext).collect::<Result<_, _>>()?;
        let mut strides = vec![0isize; axes.len()];
        let mut offset = 0isize;
        let mut s = 1isize;
        for (d, vd) in dims.iter().zip(&v.view).rev() {
            offset += vd.start as isize * s;
            if let Some(a) = vd.axis {
                strides[a] += vd.step as isize * s;
            }
            s = s.checked_mul(*d as isize).ok_or("a view's size overflows")?;
        }
        Ok((strides, offset, dims))
    };
    let mut ops = Vec::new();
    let mut lens = Vec::new();
    for v in &p.operands {
        let (strides, offset, dims) = views(v)?;
        lens.push(dims.iter().product());
        ops.push((strides, offset));
    }
    let mut outs = Vec::new();
    let mut shapes = Vec::new();
    for o in &p.outputs {
        let (strides, offset, dims) = views(&o.view)?;
        for (d, vd) in dims.iter().zip(&o.view.view) {
            if let Some(a) = vd.axis {
                if *d != axes[a] {
                    return Err(format!("output '{}' has a dim of {d} along an axis of {}", o.view.value, axes[a]));
                }
            }
        }
        shapes.push(dims);
        outs.push((strides, offset));
    }
    let empty = axes.contains(&0);
    // Outer axes first, then the reduction ones; drop size-1 axes.
    let order: Vec<usize> = (0..axes.len())
        .filter(|a| !p.reduce.contains(a))
        .chain(p.reduce.iter().copied())
        .filter(|&a| axes[a] != 1)
        .collect();
    let n_outer_raw = order.iter().filter(|a| !p.reduce.contains(a)).count();
    let pick = |s: &Vec<isize>| order.iter().map(|&a| s[a]).collect::<Vec<isize>>();
    let mut extents: Vec<usize> = order.iter().map(|&a| axes[a]).collect();
    let mut op_strides: Vec<Vec<isize>> = ops.iter().map(|(s, _)| pick(s)).collect();
    let mut out_strides: Vec<Vec<isize>> = outs.iter().map(|(s, _)| pick(s)).collect();
    // Merge axis i into i+1 when every view walks them as one.
    let mut n_outer = n_outer_raw;
    let mut i = 0;
    while i + 1 < extents.len() {
        let same_group = (i + 1 < n_outer) || (i >= n_outer);
        let inner = extents[i + 1] as isize;
        let mergeable = same_group && op_strides.iter().chain(out_strides.iter()).all(|s| s[i] == s[i + 1] * inner);
        if mergeable {
            extents[i + 1] *= extents[i];
            extents.remove(i);
            for s in op_strides.iter_mut().chain(out_strides.iter_mut()) {
                s.remove(i);
            }
            if i < n_outer {
                n_outer -= 1;
            }
        } else {
            i += 1;
        }
    }
    let reduce_count = p.reduce.iter().map(|&a| axes[a]).product();
    let operands: Vec<Strided> =
        op_strides.into_iter().zip(&ops).map(|(strides, (_, offset))| Strided { offset: *offset, strides }).collect();
    let outputs: Vec<Strided> =
        out_strides.into_iter().zip(&outs).map(|(strides, (_, offset))| Strided { offset: *offset, strides }).collect();
    if !empty {
        for (k, (v, &len)) in operands.iter().zip(&lens).enumerate() {
            check_reach(v, &extents, len).map_err(|e| format!("in{k} ('{}'): {e}", p.operands[k].value))?;
        }
        for (k, (v, dims)) in outputs.iter().zip(&shapes).enumerate() {
            check_reach(v, &extents, dims.iter().product())
                .map_err(|e| format!("output '{}': {e}", p.outputs[k].view.value))?;
        }
    }
    Ok(Bound { extents, n_outer, operands, operand_lens: lens, outputs, output_shapes: shapes, reduce_count, empty })
}

/// Whether every point `v` reaches over `extents` lies in `0..len`.
fn check_reach(v: &Strided, extents: &[usize], len: usize) -> Result<(), String> {
    let (mut lo, mut hi) = (v.offset, v.offset);
    for (&s, &e) in v.strides.iter().zip(extents) {
        let span = s * (e as isize - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    if lo < 0 || hi >= len as isize {
        return Err(format!("reaches elements {lo}..={hi} of {len}"));
    }
    Ok(())
}

/// The level of each output of `p`: outputs that follow a reduction axis
/// are written in the last sweep, the others once per outer point.
pub fn output_levels(p: &Program) -> Vec<Level> {
    p.outputs
        .iter()
        .map(|o| {
            if p.reduce.is_empty() || o.view.axes().any(|a| p.reduce.contains(&a)) {
                Level::Full
            } else {
                Level::Outer
            }
        })
        .collect()
}

/// The offset of point number `index` of the space `extents` (C order)
/// under `strides`, from 0.
#[inline]
pub fn offset_of(mut index: usize, extents: &[usize], strides: &[isize]) -> isize {
    let mut off = 0isize;
    for (&e, &s) in extents.iter().zip(strides).rev() {
        off += (index % e) as isize * s;
        index /= e;
    }
    off
}
