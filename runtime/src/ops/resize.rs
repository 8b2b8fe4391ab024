//! `Resize` (opset 11 and later), `Upsample` and `GridSample`: separable resampling, one
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
        "GridSample" => grid_sample(ctx),
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
            // the reference divides by the unrounded output length, in_len·scale
            let outf = inl * scale;
            if out_len == 1 {
                0.0
            } else {
                xr * (inl - 1.0) / (outf - 1.0)
            }
        }
        "asymmetric" => xr / scale,
        "tf_crop_and_resize" => {
            let (s, e) = roi;
            let x = if out_len > 1 {
                s * (inl - 1.0) + xr * (e - s) * (inl - 1.0) / (outl - 1.0)
            } else {
                0.5 * (s + e) * (inl - 1.0)
            };
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

/// The taps of every output position along one axis, for the SIMD
/// session's own Resize kernel: `mode` nearest or linear, no antialiasing,
/// no crop box. `None` when the mode or transformation is not one of
/// those, or a position would read the extrapolation value.
pub(crate) fn axis_taps(
    mode: &str,
    transform: &str,
    nearest: &str,
    in_len: usize,
    out_len: usize,
    scale: f64,
) -> Option<Vec<Vec<(usize, f64)>>> {
    let mode = match mode {
        "nearest" => Mode::Nearest,
        "linear" => Mode::Linear,
        _ => return None,
    };
    if !["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"].contains(&transform)
        || in_len == 0
    {
        return None;
    }
    let p = Params {
        mode,
        transform: transform.to_string(),
        nearest: nearest.to_string(),
        a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
    };
    (0..out_len).map(|o| taps(&p, o, in_len, out_len, scale, (0.0, 1.0))).collect()
}

/// Resamples `v` (shape `shape`) along `axis` to `out_len`.
fn resample(
    p: &Params,
    v: &[f64],
    shape: &mut [usize],
    axis: usize,
    out_len: usize,
    scale: f64,
    roi: (f64, f64),
) -> Vec<f64> {
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
    let roi = match ctx.opt_input(1)?.filter(|t| !t.is_empty()) {
        Some(t) => floats(ctx, t)?,
        None => Vec::new(),
    };
    let scales = match ctx.opt_input(2)?.filter(|t| !t.is_empty()) {
        Some(t) => Some(floats(ctx, t)?),
        None => None,
    };
    let sizes = match ctx.opt_input(3)?.filter(|t| !t.is_empty()) {
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
    let mut final_shape = x.shape.clone();
    for k in 0..n {
        final_shape[axes[k]] = out[k];
    }
    ctx.check_size(&final_shape)?;
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
        None => ctx
            .attr_floats("scales")
            .map(|v| v.iter().map(|&f| f64::from(f)).collect())
            .ok_or_else(|| ctx.err("scales are required"))?,
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
    let final_shape: Vec<usize> = scales.iter().zip(&x.shape).map(|(&s, &d)| (s * d as f64) as usize).collect();
    ctx.check_size(&final_shape)?;
    let mut v = floats(ctx, x)?;
    let mut shape = x.shape.clone();
    for (a, &s) in scales.iter().enumerate() {
        let out = (s * x.shape[a] as f64) as usize;
        v = resample(&p, &v, &mut shape, a, out, s, (0.0, 1.0));
    }
    one(from_f64s(ctx, x.elem(), shape, &v)?)
}

fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if x < lo {
        let dx = lo - x;
        let n = (dx / range) as i64;
        let r = dx - n as f64 * range;
        if n % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / range) as i64;
        let r = dx - n as f64 * range;
        if n % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

fn cubic_coeffs(t: f64) -> [f64; 4] {
    let a = -0.75;
    let t = t.abs();
    [
        ((a * (t + 1.0) - 5.0 * a) * (t + 1.0) + 8.0 * a) * (t + 1.0) - 4.0 * a,
        ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
        ((a + 2.0) * (1.0 - t) - (a + 3.0)) * (1.0 - t) * (1.0 - t) + 1.0,
        ((a * (2.0 - t) - 5.0 * a) * (2.0 - t) + 8.0 * a) * (2.0 - t) - 4.0 * a,
    ]
}

/// `GridSample`: each output point reads the input at the grid's
/// normalized coordinates (last grid axis: x, y, z... — innermost input axis
/// first), interpolated, with zeros/border/reflection padding.
pub(super) fn grid_sample(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["align_corners", "mode", "padding_mode"])?;
    let (x, grid) = (ctx.input(0)?, ctx.input(1)?);
    let r = x.rank().checked_sub(2).filter(|&r| r >= 1).ok_or_else(|| ctx.err("X must be N, C, spatial..."))?;
    if grid.rank() != r + 2 || grid.shape[0] != x.shape[0] || grid.shape[r + 1] != r {
        return Err(ctx.err(format!("grid {:?} does not fit X {:?}", grid.shape, x.shape)));
    }
    let align = ctx.attr_i("align_corners", 0) != 0;
    let mode = match ctx.attr_s("mode").as_deref().unwrap_or(if ctx.opset < 20 { "bilinear" } else { "linear" }) {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => return Err(ctx.err(format!("mode '{other}'"))),
    };
    let padding = ctx.attr_s("padding_mode").unwrap_or_else(|| "zeros".into());
    if !["zeros", "border", "reflection"].contains(&padding.as_str()) {
        return Err(ctx.err(format!("padding_mode '{padding}'")));
    }
    let xv = floats(ctx, x)?;
    let gv = floats(ctx, grid)?;
    let (n, c) = (x.shape[0], x.shape[1]);
    let dims = &x.shape[2..];
    let in_size: usize = dims.iter().product();
    let out_sp = &grid.shape[1..r + 1];
    let out_size: usize = out_sp.iter().product();
    let lo: Vec<f64> = dims.iter().map(|_| if align { 0.0 } else { -0.5 }).collect();
    let hi: Vec<f64> = dims.iter().map(|&d| if align { d as f64 - 1.0 } else { d as f64 - 0.5 }).collect();
    let st = crate::tensor::strides(dims);
    let mut out = vec![0.0; n * c * out_size];
    for b in 0..n {
        for o in 0..out_size {
            let g = &gv[(b * out_size + o) * r..][..r];
            // coordinates in input order (the grid lists the innermost axis first)
            let mut pos: Vec<f64> = (0..r)
                .map(|i| {
                    let v = g[r - 1 - i];
                    let d = dims[i] as f64;
                    if align {
                        (v + 1.0) / 2.0 * (d - 1.0)
                    } else {
                        ((v + 1.0) * d - 1.0) / 2.0
                    }
                })
                .collect();
            if mode == Mode::Nearest {
                // nearest rounds half to even in every rank
                for p in &mut pos {
                    *p = p.round_ties_even();
                }
            }
            for i in 0..r {
                if pos[i] < lo[i] || pos[i] > hi[i] {
                    if padding == "border" {
                        pos[i] = pos[i].clamp(0.0, dims[i] as f64 - 1.0);
                    } else if padding == "reflection" {
                        pos[i] = reflect(pos[i], lo[i], hi[i]);
                    }
                }
            }
            // per axis: (index, weight) taps
            let taps: Vec<Vec<(i64, f64)>> = pos
                .iter()
                .map(|&p| match mode {
                    Mode::Nearest => vec![(p as i64, 1.0)],
                    Mode::Linear => {
                        let f = p.floor();
                        vec![(f as i64, 1.0 - (p - f)), (f as i64 + 1, p - f)]
                    }
                    Mode::Cubic => {
                        let f = p.floor();
                        let w = cubic_coeffs(p - f);
                        (0..4).map(|k| (f as i64 - 1 + k as i64, w[k])).collect()
                    }
                })
                .collect();
            // the input offset of a tap, or None for a zero-padded read
            let read = |i: usize, idx: i64| -> Option<usize> {
                let d = dims[i] as i64;
                let j = match padding.as_str() {
                    "zeros" => {
                        if idx < 0 || idx >= d {
                            return None;
                        }
                        idx
                    }
                    "border" => idx.clamp(0, d - 1),
                    _ => reflect(idx as f64, lo[i], hi[i]) as i64,
                };
                Some(j.clamp(0, d - 1) as usize * st[i])
            };
            let counts: Vec<usize> = taps.iter().map(Vec::len).collect();
            for ch in 0..c {
                let base = (b * c + ch) * in_size;
                let mut acc = 0.0;
                super::shape_ops::each_index(&counts, |m| {
                    let mut w = 1.0;
                    let mut off = Some(0usize);
                    for (i, &k) in m.iter().enumerate() {
                        let (idx, wt) = taps[i][k];
                        w *= wt;
                        off = off.and_then(|o| read(i, idx).map(|p| o + p));
                    }
                    if let Some(off) = off {
                        acc += w * xv[base + off];
                    }
                });
                out[(b * c + ch) * out_size + o] = acc;
            }
        }
    }
    let shape = [&[n, c][..], out_sp].concat();
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}
