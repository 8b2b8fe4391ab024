//! Graph nodes that no kernel program expresses but the SIMD session still
//! runs on its own `f32` kernels, in place of the reference kernels (which
//! compute in `f64`, one element at a time):
//! - **ConvTranspose** in 2-D: per image and group, the product
//!   `Wᵀ · X` ([`sgemm`]) gives, for every output channel and kernel tap,
//!   the plane of contributions of the input positions; each plane is then
//!   added into the output at the tap's offset with the strides and
//!   dilations (col2im), over a plane that starts as the bias.
//! - **Resize** of the last two axes of a rank-4 tensor (the spatial axes
//!   of NCHW), nearest or linear, with the reference's own coordinate
//!   mapping (`axis_taps`): each output row mixes at most two input rows
//!   into one row, then each output column at most two of its columns.
//! - **LRN** and inference **BatchNormalization** ([`norm`]), 2-D
//!   **MaxPool** and **AveragePool** ([`pool`]), **Concat** ([`concat`](mod@concat)),
//!   **LSTM**, **GRU** and **RNN** ([`recurrent`], several outputs: the
//!   session calls it itself), **GatherElements** ([`gather`]), and
//!   **Split** (several outputs, also called by the session itself),
//!   **Slice**, **Gather** and **Pad** ([`movement`]); `f32` elementwise
//!   nodes and reductions whose shapes are known only at run time
//!   (`late`); TopK and NonZero ([`selection`]); onnxruntime's dynamically quantized `DynamicQuantizeLinear`,
//!   `MatMulInteger` and `ConvInteger` (`quantized`, exact `i32` products).
//!
//! Anything else about these operators — other ranks, element types,
//! `auto_pad`, `output_shape`, cubic or antialiased resizing, a crop box,
//! a resize of the batch or channel axis — returns `None`, and the node
//! runs on the reference kernels as before.

use super::contraction::{floats, int_attr, overwritten, sized, Take};
use super::epilogue::Epilogue;
use super::gemm::{sgemm, MatRef};
use super::{
    cast, concat, einsum, gather, integer, late, movement, norm, pool, quantized, recurrent, relayout, selection,
};
use crate::ops::resize::axis_taps;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};
use rayon::prelude::*;

/// Whether the session hands `node` to [`compute`] first.
pub(crate) fn covers(node: &Node) -> bool {
    matches!(
        node.op_type.as_deref(),
        Some(
            "ConvTranspose"
                | "Resize"
                | "LRN"
                | "BatchNormalization"
                | "MaxPool"
                | "AveragePool"
                | "Concat"
                | "Transpose"
                | "Einsum"
                | "InstanceNormalization"
                | "GatherElements"
                | "Gather"
                | "Slice"
                | "Split"
                | "Pad"
                | "GatherND"
                | "NonZero"
                | "TopK"
                | "Shape"
                | "Size"
        )
    ) && node.domain.as_deref().unwrap_or("").is_empty()
        || relayout::relabels(node)
        || cast::covers(node)
        || recurrent::covers(node)
        || quantized::covers(node)
}

/// Computes `node` on `inputs` (`None` where omitted) into a tensor whose
/// data comes from `take`, or `None` when these kernels do not cover it.
pub(crate) fn compute(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    match node.op_type.as_deref()? {
        "ConvTranspose" => conv_transpose(node, inputs, take),
        "Resize" => resize(node, inputs, take),
        "LRN" => norm::lrn(node, inputs, take),
        "BatchNormalization" => norm::batch_norm(node, inputs, take),
        "MaxPool" => pool::pool(node, inputs, take, true),
        "AveragePool" => pool::pool(node, inputs, take, false),
        "Concat" => concat::concat(node, inputs, take),
        "Transpose" => relayout::transpose(node, inputs, take).or_else(|| movement::transpose(node, inputs, take)),
        "GatherND" => movement::gather_nd(node, inputs, take),
        "NonZero" => selection::non_zero(inputs),
        "Cast" => cast::cast(node, inputs, take),
        "Einsum" => einsum::einsum(node, inputs, take),
        "InstanceNormalization" => norm::instance_norm(node, inputs, take),
        "GatherElements" => gather::gather_elements(node, inputs, take),
        "Gather" => movement::gather(node, inputs, take),
        "Slice" => movement::slice(node, inputs, take),
        "Pad" => movement::pad(node, inputs, take),
        "Shape" | "Size" => late::shape_of(node, inputs),
        op if integer::OPS.contains(&op) => integer::binary(node, inputs).or_else(|| late::compute(node, inputs, take)),
        _ if late::covers(node) => late::compute(node, inputs, take),
        _ => None,
    }
}

fn attr<'n>(node: &'n Node, name: &str) -> Option<AttrValue<'n>> {
    node.attribute(name).and_then(|a| a.value())
}

/// A pair of sizes from an `ints` attribute (`default` when absent).
fn pair(node: &Node, name: &str, default: usize) -> Option<[usize; 2]> {
    match attr(node, name) {
        None => Some([default; 2]),
        Some(AttrValue::Ints(v)) if v.len() == 2 => Some([usize::try_from(v[0]).ok()?, usize::try_from(v[1]).ok()?]),
        _ => None,
    }
}

fn string_attr(node: &Node, name: &str, default: &str) -> Option<String> {
    match attr(node, name) {
        None => Some(default.to_string()),
        Some(AttrValue::String(s)) => Some(String::from_utf8_lossy(s).into_owned()),
        _ => None,
    }
}

fn conv_transpose(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let (x, w) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let bias = match inputs.get(2).copied().flatten() {
        Some(b) => Some(floats(b)?),
        None => None,
    };
    let (xd, wd) = (floats(x)?, floats(w)?);
    let (&[n, c, h, wi], &[wc, mg, kh, kw]) = (x.shape.as_slice(), w.shape.as_slice()) else { return None };
    let group = usize::try_from(int_attr(node, "group", 1)?).ok()?;
    if group == 0
        || wc != c
        || c % group != 0
        || !matches!(attr(node, "auto_pad"), None | Some(AttrValue::String(b"NOTSET")))
    {
        return None;
    }
    if attr(node, "output_shape").is_some() {
        return None;
    }
    let (strides, dilations, extra) =
        (pair(node, "strides", 1)?, pair(node, "dilations", 1)?, pair(node, "output_padding", 0)?);
    let pads = match attr(node, "pads") {
        None => [0; 4],
        Some(AttrValue::Ints(v)) if v.len() == 4 => {
            let mut p = [0; 4];
            for (d, &s) in p.iter_mut().zip(v.iter()) {
                *d = usize::try_from(s).ok()?;
            }
            p
        }
        _ => return None,
    };
    if strides.contains(&0) || dilations.contains(&0) {
        return None;
    }
    let m = mg * group;
    let cg = c / group;
    // output size along an axis: stride·(in − 1) + output_padding + dilated kernel − pads
    let side = |len: usize, a: usize, k: usize| -> Option<usize> {
        let full = strides[a] * len.checked_sub(1)? + extra[a] + dilations[a] * k.checked_sub(1)? + 1;
        full.checked_sub(pads[a] + pads[a + 2])
    };
    let (oh, ow) = (side(h, 0, kh)?, side(wi, 1, kw)?);
    if bias.is_some_and(|b| b.len() != m) || xd.len() != n * c * h * wi || wd.len() != c * mg * kh * kw {
        return None;
    }
    let (plane, out_plane, taps) = (h * wi, oh * ow, kh * kw);
    let mut out = sized(take, n * m * out_plane);
    let mut columns = vec![0f32; mg * taps * plane];
    for image in 0..n {
        for g in 0..group {
            let xg = &xd[(image * c + g * cg) * plane..][..cg * plane];
            let wg = &wd[g * cg * mg * taps..][..cg * mg * taps];
            // columns[(om·taps + tap), position] = Σ_ic W[ic, om, tap] · X[ic, position]
            sgemm(
                MatRef::row_major(wg, cg, mg * taps).t(),
                MatRef::row_major(xg, cg, plane),
                &mut columns,
                &Epilogue::default(),
            );
            for om in 0..mg {
                let oc = g * mg + om;
                let dst = &mut out[(image * m + oc) * out_plane..][..out_plane];
                dst.fill(bias.map_or(0.0, |b| b[oc]));
                for ki in 0..kh {
                    for kj in 0..kw {
                        let src = &columns[(om * taps + ki * kw + kj) * plane..][..plane];
                        col2im_tap(src, (h, wi), (ki, kj), (oh, ow), strides, dilations, [pads[0], pads[1]], dst);
                    }
                }
            }
        }
    }
    Tensor::new(vec![n, m, oh, ow], Data::F32(out))
}

/// Adds one kernel tap's plane of contributions (`src`, `h × w`) into the
/// output plane `dst` (`oh × ow`): input `(iy, ix)` lands on
/// `(iy·sh + ki·dh − top, ix·sw + kj·dw − left)` when that is inside.
#[allow(clippy::too_many_arguments)]
fn col2im_tap(
    src: &[f32],
    (h, w): (usize, usize),
    (ki, kj): (usize, usize),
    (oh, ow): (usize, usize),
    [sh, sw]: [usize; 2],
    [dh, dw]: [usize; 2],
    [top, left]: [usize; 2],
    dst: &mut [f32],
) {
    let land = |i: usize, k: usize, s: usize, d: usize, before: usize, len: usize| {
        (i * s + k * d).checked_sub(before).filter(|&o| o < len)
    };
    // the input columns that land inside: a contiguous run, as landing is monotone
    let Some(lo) = (0..w).find(|&ix| land(ix, kj, sw, dw, left, ow).is_some()) else { return };
    let hi = (lo..w).take_while(|&ix| land(ix, kj, sw, dw, left, ow).is_some()).last().unwrap_or(lo);
    let first = lo * sw + kj * dw - left;
    for iy in 0..h {
        let Some(oy) = land(iy, ki, sh, dh, top, oh) else { continue };
        let row = &src[iy * w + lo..=iy * w + hi];
        let out = &mut dst[oy * ow + first..];
        if sw == 1 {
            out.iter_mut().zip(row).for_each(|(o, &v)| *o += v);
        } else {
            for (t, &v) in row.iter().enumerate() {
                out[t * sw] += v;
            }
        }
    }
}

/// Each output position's at most two taps along one axis: `(first, second,
/// weight of first, weight of second)`; a single tap (nearest) has
/// [`ALONE`] as its second, so that an infinite input stays infinite.
type Pairs = Vec<(usize, usize, f32, f32)>;

/// The second tap of a position that reads one input alone.
const ALONE: usize = usize::MAX;

/// `wi·p + wj·q`, or `wi·p` alone.
#[inline(always)]
fn mix(j: usize, wi: f32, p: f32, wj: f32, q: f32) -> f32 {
    if j == ALONE {
        wi * p
    } else {
        wi * p + wj * q
    }
}

fn pairs(taps: Vec<Vec<(usize, f64)>>) -> Option<Pairs> {
    taps.into_iter()
        .map(|t| match t.as_slice() {
            [(i, wi)] => Some((*i, ALONE, *wi as f32, 0.0)),
            [(i, wi), (j, wj)] => Some((*i, *j, *wi as f32, *wj as f32)),
            _ => None,
        })
        .collect()
}

/// From this many output values a Resize's planes run in parallel on the
/// current rayon pool (UNet's ×2 bilinear upsampling of 2×16 planes of 16²:
/// 41 µs on one thread).
const PARALLEL_RESIZE: usize = 1 << 14;

fn resize(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let x = inputs.first().copied()??;
    let xd = floats(x)?;
    let &[n, c, h, w] = x.shape.as_slice() else { return None };
    for name in ["axes", "antialias", "exclude_outside", "keep_aspect_ratio_policy"] {
        match (name, attr(node, name)) {
            (_, None) | ("antialias" | "exclude_outside", Some(AttrValue::Int(0))) => {}
            ("keep_aspect_ratio_policy", Some(AttrValue::String(b"stretch"))) => {}
            _ => return None,
        }
    }
    let given = |k: usize| inputs.get(k).copied().flatten().filter(|t| !t.is_empty());
    // (output length, scale) per axis, as the reference works them out
    let sizes: Vec<(usize, f64)> = match (given(2), given(3)) {
        (Some(s), None) => {
            let s = floats(s)?;
            if s.len() != 4 {
                return None;
            }
            x.shape.iter().zip(s).map(|(&len, &k)| ((f64::from(k) * len as f64) as usize, f64::from(k))).collect()
        }
        (None, Some(z)) => {
            let z = z.to_i64s()?;
            if z.len() != 4 {
                return None;
            }
            x.shape.iter().zip(&z).map(|(&len, &k)| (k.max(0) as usize, k as f64 / len as f64)).collect()
        }
        _ => return None,
    };
    if sizes[0] != (n, 1.0) || sizes[1] != (c, 1.0) {
        return None;
    }
    let (mode, transform, nearest) = (
        string_attr(node, "mode", "nearest")?,
        string_attr(node, "coordinate_transformation_mode", "half_pixel")?,
        string_attr(node, "nearest_mode", "round_prefer_floor")?,
    );
    let ((oh, sy), (ow, sx)) = (sizes[2], sizes[3]);
    let rows = pairs(axis_taps(&mode, &transform, &nearest, h, oh, sy)?)?;
    let cols = pairs(axis_taps(&mode, &transform, &nearest, w, ow, sx)?)?;
    let inside = |(i, j, _, _): &(usize, usize, f32, f32), len: usize| i < &len && (j == &ALONE || j < &len);
    if xd.len() != n * c * h * w || !rows.iter().all(|r| inside(r, h)) || !cols.iter().all(|q| inside(q, w)) {
        return None;
    }
    let mut out = overwritten(take, n * c * oh * ow);
    // one plane: each output row mixes its two input rows into `mixed`, then picks its columns
    let plane = |mixed: &mut Vec<f32>, (src, dst): (&[f32], &mut [f32])| {
        for (&(i, j, wi, wj), out_row) in rows.iter().zip(dst.chunks_exact_mut(ow)) {
            let a = &src[i * w..(i + 1) * w];
            if j == ALONE {
                mixed.iter_mut().zip(a).for_each(|(m, &p)| *m = wi * p);
            } else {
                let b = &src[j * w..(j + 1) * w];
                mixed.iter_mut().zip(a.iter().zip(b)).for_each(|(m, (&p, &q))| *m = wi * p + wj * q);
            }
            for (o, &(k, l, wk, wl)) in out_row.iter_mut().zip(&cols) {
                *o = mix(l, wk, mixed[k], wl, mixed[l.min(w - 1)]);
            }
        }
    };
    if rayon::current_num_threads() > 1 && n * c > 1 && out.len() >= PARALLEL_RESIZE {
        let planes = xd.par_chunks_exact(h * w).zip(out.par_chunks_exact_mut(oh * ow));
        planes.for_each_init(|| vec![0f32; w], plane);
    } else {
        let mut mixed = vec![0f32; w];
        xd.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)).for_each(|pair| plane(&mut mixed, pair));
    }
    Tensor::new(vec![n, c, oh, ow], Data::F32(out))
}
