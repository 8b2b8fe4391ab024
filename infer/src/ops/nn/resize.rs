//! Resizing: `Resize` (versions 10 to 19: `scales` or `sizes`, `axes`,
//! `keep_aspect_ratio_policy`) and `Upsample` (scales as an attribute, then
//! as an input). Scaled sizes are `⌊in · scale⌋`, computed in `f64` from the
//! scales' stored values.

use super::{dtype_from, scaled_dim, settle};
use crate::ops::{OpTable, ONNX};
use crate::rule::Elem;
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "Resize", 10, resize);
    t.add(ONNX, "Upsample", 1, upsample);
}

/// The number of elements of input `i`, when its shape is known.
fn known_numel(ctx: &mut OpCtx, i: usize) -> Option<u64> {
    let dims = ctx.dims(i)?;
    dims.iter().try_fold(1u64, |acc, d| acc.checked_mul(ctx.size_of(d)?))
}

/// `Resize`: the input's shape with the resized axes replaced.
fn resize(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = resize_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `Resize`'s output shape.
fn resize_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    let axes = resize_axes(ctx, x.len())?;
    let (scales, sizes) = if ctx.version() < 11 { (1, usize::MAX) } else { (2, 3) };
    let use_sizes = ctx.has_input(sizes) && known_numel(ctx, sizes) != Some(0);
    let dims = if use_sizes {
        if ctx.has_input(scales) && known_numel(ctx, scales).is_some_and(|n| n > 0) {
            ctx.invalid("both scales and sizes are given; only one may be");
            return None;
        }
        sized_dims(ctx, x, &axes, sizes)?
    } else if ctx.has_input(scales) {
        let crop = ctx.attr_str("coordinate_transformation_mode").as_deref() == Some("tf_crop_and_resize");
        scaled_dims(ctx, x, &axes, scales, crop)?
    } else {
        ctx.invalid("neither scales nor sizes is given");
        return None;
    };
    ctx.set_dims(0, dims);
    Some(())
}

/// The axes `scales`/`sizes` refer to: the `axes` attribute (opset 18+), else all.
fn resize_axes(ctx: &mut OpCtx, rank: usize) -> Option<Vec<usize>> {
    let Some(raw) = ctx.attr_ints("axes").filter(|_| ctx.version() >= 18) else {
        return Some((0..rank).collect());
    };
    let mut axes = Vec::with_capacity(raw.len());
    for a in raw {
        let a = ctx.axis(a, rank, "axis in attribute axes")?;
        if axes.contains(&a) {
            ctx.invalid(format!("attribute axes names axis {a} twice"));
            return None;
        }
        axes.push(a);
    }
    Some(axes)
}

/// The output dims from `sizes` (input `i`), with `keep_aspect_ratio_policy`.
fn sized_dims(ctx: &mut OpCtx, x: &[DimTerm], axes: &[usize], i: usize) -> Option<Vec<DimTerm>> {
    let mut dims = x.to_vec();
    let Some(sizes) = ctx.elems(i) else {
        for &a in axes {
            dims[a] = ctx.unknown_dim();
        }
        return Some(dims);
    };
    if sizes.len() != axes.len() {
        ctx.invalid(format!("sizes has {} values for {} resized axes", sizes.len(), axes.len()));
        return None;
    }
    if let Some(bad) = sizes.iter().find_map(|e| e.as_int().filter(|&n| n < 0)) {
        ctx.invalid(format!("sizes holds {bad}; sizes must not be negative"));
        return None;
    }
    let policy = if ctx.version() >= 18 { ctx.attr_str("keep_aspect_ratio_policy") } else { None };
    match policy.as_deref() {
        None | Some("stretch") => {
            for (&a, e) in axes.iter().zip(&sizes) {
                dims[a] = ctx.dim_of_elem(e);
            }
        }
        Some(p @ ("not_larger" | "not_smaller")) => {
            let fitted = fitted_sizes(ctx, x, axes, &sizes, p == "not_larger");
            for (k, &a) in axes.iter().enumerate() {
                dims[a] = match &fitted {
                    Some(f) => ctx.known(f[k]),
                    None => ctx.unknown_dim(),
                };
            }
        }
        Some(other) => {
            ctx.invalid(format!(
                "attribute keep_aspect_ratio_policy is '{other}'; expected stretch, not_larger or not_smaller"
            ));
            return None;
        }
    }
    Some(dims)
}

/// Sizes that keep the aspect ratio: one scale, the least (`not_larger`) or
/// greatest of `sizes[k] / in[axes[k]]`, and `round_half_up(scale · in)`.
fn fitted_sizes(ctx: &mut OpCtx, x: &[DimTerm], axes: &[usize], sizes: &[Elem], not_larger: bool) -> Option<Vec<u64>> {
    let mut ins = Vec::with_capacity(axes.len());
    let mut scale: Option<f64> = None;
    for (&a, e) in axes.iter().zip(sizes) {
        let len = ctx.size_of(&x[a]).filter(|&n| n > 0)? as f64;
        let s = e.as_int()? as f64 / len;
        scale = Some(match scale {
            None => s,
            Some(t) if not_larger => t.min(s),
            Some(t) => t.max(s),
        });
        ins.push(len);
    }
    let scale = scale?;
    ins.iter().map(|&len| whole_size((scale * len + 0.5).floor())).collect()
}

/// A non-negative whole `f64` as a size (`None` when it is not one, or is too large).
fn whole_size(v: f64) -> Option<u64> {
    (v.is_finite() && (0.0..9.0e15).contains(&v)).then_some(v as u64)
}

/// The output dims from `scales` (input `i`): `⌊in · scale⌋` on the resized axes.
fn scaled_dims(ctx: &mut OpCtx, x: &[DimTerm], axes: &[usize], i: usize, crop: bool) -> Option<Vec<DimTerm>> {
    let mut dims = x.to_vec();
    let Some(scales) = ctx.floats(i) else {
        for &a in axes {
            dims[a] = ctx.unknown_dim();
        }
        return Some(dims);
    };
    if scales.len() != axes.len() {
        ctx.invalid(format!("scales has {} values for {} resized axes", scales.len(), axes.len()));
        return None;
    }
    if let Some(bad) = scales.iter().find(|&&s| !(s > 0.0 && s.is_finite())) {
        ctx.invalid(format!("scales holds {bad}; every scale must be positive"));
        return None;
    }
    for (&a, &s) in axes.iter().zip(&scales) {
        // With tf_crop_and_resize the region of interest may change the size too.
        dims[a] = if crop { ctx.unknown_dim() } else { scale_dim(ctx, &x[a], s) };
    }
    Some(dims)
}

/// `⌊in · scale⌋`: computed for a known size, exact for a whole scale.
fn scale_dim(ctx: &mut OpCtx, input: &DimTerm, scale: f64) -> DimTerm {
    if let Some(n) = ctx.size_of(input) {
        return match whole_size((n as f64 * scale).floor()) {
            Some(out) => ctx.known(out),
            None => ctx.unknown_dim(),
        };
    }
    if scale.fract() == 0.0 && scale <= 1.0e6 {
        return scaled_dim(ctx, input, scale as i64);
    }
    ctx.unknown_dim()
}

/// `Upsample`: `⌊in · scale⌋` per axis, the scales an attribute before opset 9.
fn upsample(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let axes: Vec<usize> = (0..x.len()).collect();
    let dims = if ctx.version() >= 9 { scaled_dims(ctx, &x, &axes, 1, false) } else { upsample_attr_dims(ctx, &x) };
    let stated = dims.is_some();
    if let Some(dims) = dims {
        ctx.set_dims(0, dims);
    }
    settle(ctx, stated)
}

/// `Upsample` before opset 9: the `scales` attribute (or `width_scale` and
/// `height_scale` at opset 1).
fn upsample_attr_dims(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<Vec<DimTerm>> {
    let scales: Vec<f64> = match ctx.attr_floats("scales") {
        Some(s) => s.into_iter().map(f64::from).collect(),
        None => {
            let (h, w) = (ctx.attr_float("height_scale")?, ctx.attr_float("width_scale")?);
            if x.len() != 4 {
                return None;
            }
            vec![1.0, 1.0, f64::from(h), f64::from(w)]
        }
    };
    if scales.len() != x.len() {
        ctx.invalid(format!("attribute scales has {} values for an input of rank {}", scales.len(), x.len()));
        return None;
    }
    Some(x.iter().zip(&scales).map(|(d, &s)| scale_dim(ctx, d, s)).collect())
}
