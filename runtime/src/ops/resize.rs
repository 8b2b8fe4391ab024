//! `Resize` (opset 11 and later) and `Upsample`: separable resampling, one
//! axis at a time. Each output coordinate maps back to an input coordinate
//! (the coordinate transformation mode), which is read as the weighted sum
//! of a few input elements (nearest, linear or cubic, optionally
//! antialiased), or as the extrapolation value outside a crop box.

use super::elementwise::{floats, from_f64s};
use super::{one, NodeCtx, Outs};
use crate::error::Result;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Resize" => resize(ctx),
        "Upsample" => upsample(ctx),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

struct Params {
    mode: Mode,
    transform: String,
    nearest: String,
    a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
}

/// The taps of one output position: (input index, weight) pairs, or `None`
/// for the extrapolation value.
fn taps(p: &Params, o: usize, in_len: usize, out_len: usize, scale: f64, roi: (f64, f64)) -> Option<Vec<(usize, f64)>> {
    let (xr, inl, outl) = (o as f64, in_len as f64, out_len as f64);
    let x = match p.transform.as_str() {
        "half_pixel" => (xr + 0.5) / scale - 0.5,
        "half_pixel_symmetric" => {
            let adjustment = outl / (scale * inl);
            let center = inl / 2.0;
            let offset = center * (1.0 - adjustment);
            offset + (xr + 0.5) / scale - 0.5
        }
        "pytorch_half_pixel" => {
            if out_len > 1 {
                (xr + 0.5) / scale - 0.5
            } else {
                0.0
            }
        }
        "align_corners" => {
            if out_len == 1 {
                0.0
            } else {
                xr * (inl - 1.0) / (outl - 1.0)
            }
        }
        "asymmetric" => xr / scale,
        "tf_crop_and_resize" => {
            let (s, e) = roi;
            let x = if out_len > 1 { s * (inl - 1.0) + xr * (e - s) * (inl - 1.0) / (outl - 1.0) } else { 0.5 * (s + e) * (inl - 1.0) };
            if x < 0.0 || x > inl - 1.0 {
                return None;
            }
            x
        }
        _ => return None,
    };
    let last = in_len as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as usize;
    match p.mode {
        Mode::Nearest => {
            let frac = x - x.floor();
            let i = match p.nearest.as_str() {
                "round_prefer_ceil" => {
                    if frac == 0.5 {
                        x.ceil()
                    } else {
                        x.round()
                    }
                }
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                _ => {
                    if frac == 0.5 {
                        x.floor()
                    } else {
                        x.round()
                    }
                }
            };
            Some(vec![(clamp(i as i64), 1.0)])
        }
        Mode::Linear | Mode::Cubic => {
            let base = x.floor();
            let r = x - base;
            let kernel = |d: f64| -> f64 {
                let d = d.abs();
                match p.mode {
                    Mode::Linear => (1.0 - d).max(0.0),
                    _ => {
                        let a = p.a;
                        if d <= 1.0 {
                            (a + 2.0) * d * d * d - (a + 3.0) * d * d + 1.0
                        } else if d < 2.0 {
                            a * d * d * d - 5.0 * a * d * d + 8.0 * a * d - 4.0 * a
                        } else {
                            0.0
                        }
                    }
                }
            };
            // support half-width in input samples, widened when antialiasing a downscale
            let radius = if p.mode == Mode::Linear { 1.0 } else { 2.0 };
            let s = if p.antialias { scale.min(1.0) } else { 1.0 };
            let start = (-radius / s).floor() as i64 + 1;
            let end = if p.antialias { 1 - start + 1 } else { radius as i64 + 1 };
            let end = if p.antialias && p.mode == Mode::Linear { start + (2 - 2 * start) } else { end };
            let mut t: Vec<(i64, f64)> = (start..end).map(|k| (base as i64 + k, kernel((k as f64 - r) * s))).collect();
            if p.antialias {
                let sum: f64 = t.iter().map(|(_, w)| w).sum();
                if sum != 0.0 {
                    for (_, w) in &mut t {
                        *w /= sum;
                    }
                }
            }
            if p.exclude_outside {
                for (i, w) in &mut t {
                    if *i < 0 || *i > last {
                        *w = 0.0;
                    }
                }
                let sum: f64 = t.iter().map(|(_, w)| w).sum();
                if sum != 0.0 {
                    for (_, w) in &mut t {
                        *w /= sum;
                    }
                }
            }
            Some(t.into_iter().map(|(i, w)| (clamp(i), w)).collect())
        }
    }
}

/// Resamples `v` (shape `shape`) along `axis` to `out_len`.
fn resample(p: &Params, v: &[f64], shape: &mut [usize], axis: usize, out_len: usize, scale: f64, roi: (f64, f64)) -> Vec<f64> {
    let in_len = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let plan: Vec<Option<Vec<(usize, f64)>>> = (0..out_len).map(|o| taps(p, o, in_len, out_len, scale, roi)).collect();
    let mut out = vec![0.0; outer * out_len * inner];
    for b in 0..outer {
        for (o, t) in plan.iter().enumerate() {
            for i in 0..inner {
                out[(b * out_len + o) * inner + i] = match t {
                    None => p.extrapolation,
                    Some(t) => t.iter().map(|&(k, w)| w * v[(b * in_len + k) * inner + i]).sum(),
                };
            }
        }
    }
    shape[axis] = out_len;
    out
}

fn resize(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&[
        "antialias",
        "axes",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "keep_aspect_ratio_policy",
        "mode",
        "nearest_mode",
    ])?;
    if ctx.opset < 11 {
        return Err(ctx.unsupported("Resize before opset 11"));
    }
    let x = ctx.input(0)?;
    let r = x.rank();
    let axes: Vec<usize> = match ctx.attr_ints("axes") {
        Some(a) => a.iter().map(|&a| ctx.axis(a, r)).collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let present = |t: Option<&crate::tensor::Tensor>| t.filter(|t| !t.is_empty());
    let roi = match present(ctx.opt_input(1)?) {
        Some(t) => floats(ctx, t)?,
        None => Vec::new(),
    };
    let scales = match present(ctx.opt_input(2)?) {
        Some(t) => Some(floats(ctx, t)?),
        None => None,
    };
    let sizes = match present(ctx.opt_input(3)?) {
        Some(t) => Some(t.to_i64s().ok_or_else(|| ctx.err("sizes must be integers"))?),
        None => None,
    };
    let n = axes.len();
    let mut scale = vec![1.0; n];
    let mut out = vec![0usize; n];
    match (scales, sizes) {
        (Some(s), None) => {
            if s.len() != n {
                return Err(ctx.err(format!("{} scales for {n} axes", s.len())));
            }
            for k in 0..n {
                scale[k] = s[k];
                out[k] = (s[k] * x.shape[axes[k]] as f64) as usize;
            }
        }
        (None, Some(z)) => {
            if z.len() != n {
                return Err(ctx.err(format!("{} sizes for {n} axes", z.len())));
            }
            let ratios: Vec<f64> = (0..n).map(|k| z[k] as f64 / x.shape[axes[k]] as f64).collect();
            match ctx.attr_s("keep_aspect_ratio_policy").as_deref().unwrap_or("stretch") {
                "stretch" => {
                    for k in 0..n {
                        scale[k] = ratios[k];
                        out[k] = z[k].max(0) as usize;
                    }
                }
                policy @ ("not_larger" | "not_smaller") => {
                    let s = if policy == "not_larger" {
                        ratios.iter().copied().fold(f64::INFINITY, f64::min)
                    } else {
                        ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    };
                    for k in 0..n {
                        scale[k] = s;
                        out[k] = (s * x.shape[axes[k]] as f64).round_ties_even() as usize;
                    }
                }
                other => return Err(ctx.err(format!("keep_aspect_ratio_policy '{other}'"))),
            }
        }
        _ => return Err(ctx.err("exactly one of scales and sizes is required")),
    }
    let mode = match ctx.attr_s("mode").as_deref().unwrap_or("nearest") {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        "cubic" => Mode::Cubic,
        other => return Err(ctx.err(format!("mode '{other}'"))),
    };
    let p = Params {
        mode,
        transform: ctx.attr_s("coordinate_transformation_mode").unwrap_or_else(|| "half_pixel".into()),
        nearest: ctx.attr_s("nearest_mode").unwrap_or_else(|| "round_prefer_floor".into()),
        a: f64::from(ctx.attr_f("cubic_coeff_a", -0.75)),
        exclude_outside: ctx.attr_i("exclude_outside", 0) != 0,
        extrapolation: f64::from(ctx.attr_f("extrapolation_value", 0.0)),
        antialias: ctx.attr_i("antialias", 0) != 0 && mode != Mode::Nearest,
    };
    if ![
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
    ]
    .contains(&p.transform.as_str())
    {
        return Err(ctx.err(format!("coordinate_transformation_mode '{}'", p.transform)));
    }
    if p.transform == "tf_crop_and_resize" && roi.len() != 2 * n {
        return Err(ctx.err(format!("roi must hold {} values", 2 * n)));
    }
    let mut v = floats(ctx, x)?;
    let mut shape = x.shape.clone();
    for k in 0..n {
        let box_ = if roi.len() == 2 * n { (roi[k], roi[k + n]) } else { (0.0, 1.0) };
        v = resample(&p, &v, &mut shape, axes[k], out[k], scale[k], box_);
    }
    one(from_f64s(ctx, x.elem(), shape, &v)?)
}

fn upsample(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["mode", "scales"])?;
    let x = ctx.input(0)?;
    let scales = match ctx.opt_input(1)? {
        Some(t) => floats(ctx, t)?,
        None => ctx.attr_floats("scales").map(|v| v.iter().map(|&f| f64::from(f)).collect()).ok_or_else(|| ctx.err("scales are required"))?,
    };
    if scales.len() != x.rank() {
        return Err(ctx.err("one scale per axis is required"));
    }
    let mode = match ctx.attr_s("mode").as_deref().unwrap_or("nearest") {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        other => return Err(ctx.err(format!("mode '{other}'"))),
    };
    let p = Params {
        mode,
        transform: "asymmetric".into(),
        nearest: "floor".into(),
        a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
    };
    let mut v = floats(ctx, x)?;
    let mut shape = x.shape.clone();
    for (a, &s) in scales.iter().enumerate() {
        let out = (s * x.shape[a] as f64) as usize;
        v = resample(&p, &v, &mut shape, a, out, s, (0.0, 1.0));
    }
    one(from_f64s(ctx, x.elem(), shape, &v)?)
}
