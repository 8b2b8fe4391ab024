//! Neural-network operators: convolution (also transposed), pooling and the
//! normalizations. Layouts are ONNX's: `N, C, spatial...`, any number of
//! spatial axes.

use super::elementwise::{floats, from_f64s};
use super::shape_ops::each_index;
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::{strides, Data, Tensor, Value};
use rayon::prelude::*;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "Conv" => conv(ctx),
        "ConvTranspose" => conv_transpose(ctx),
        "MaxPool" => pool(ctx, Pool::Max),
        "AveragePool" => pool(ctx, Pool::Avg),
        "LpPool" => pool(ctx, Pool::Lp),
        "GlobalAveragePool" => global_pool(ctx, Pool::Avg),
        "GlobalMaxPool" => global_pool(ctx, Pool::Max),
        "GlobalLpPool" => global_pool(ctx, Pool::Lp),
        "BatchNormalization" => batch_norm(ctx),
        "InstanceNormalization" => instance_norm(ctx),
        "LayerNormalization" => layer_norm(ctx),
        "GroupNormalization" => group_norm(ctx),
        "LRN" => lrn(ctx),
        "MeanVarianceNormalization" => mvn(ctx),
        "RMSNormalization" => rms_norm(ctx),
        "Col2Im" => col2im(ctx),
        "MaxUnpool" => max_unpool(ctx),
        "AffineGrid" => affine_grid(ctx),
        "CausalConvWithState" => causal_conv_with_state(ctx),
        "RoiAlign" => roi_align(ctx),
        "DeformConv" => deform_conv(ctx),
        "LpNormalization" => lp_norm(ctx),
        "NegativeLogLikelihoodLoss" => {
            ctx.input(0).and_then(|x| floats(ctx, x)).and_then(|v| nll(ctx, ctx.input(0)?, &v, None))
        }
        "SoftmaxCrossEntropyLoss" => softmax_cross_entropy(ctx),
        _ => return None,
    })
}

/// Per spatial axis: padding before and after, for the attributes of a
/// windowed operator over input sizes `input` with kernel `k`.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pad_begin: Vec<i64>,
    out: Vec<usize>,
}

fn window(ctx: &NodeCtx<'_>, input: &[usize], kernel: Vec<usize>, ceil_mode: bool) -> Result<Window> {
    let s = input.len();
    let pos = |name: &str| -> Result<Vec<usize>> {
        match ctx.attr_ints(name) {
            Some(v) if v.len() == s && v.iter().all(|&x| x >= 1) => Ok(v.iter().map(|&x| x as usize).collect()),
            Some(v) => Err(ctx.err(format!("{name} {v:?} must be {s} positive values"))),
            None => Ok(vec![1; s]),
        }
    };
    let strides = pos("strides")?;
    let dilations = pos("dilations")?;
    if kernel.len() != s {
        return Err(ctx.err(format!("kernel rank {} for {s} spatial axes", kernel.len())));
    }
    let auto_pad = ctx.attr_s("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let mut pad_begin = vec![0i64; s];
    let mut out = vec![0usize; s];
    for a in 0..s {
        let ek = ((kernel[a] - 1) * dilations[a] + 1) as i64;
        let inp = input[a] as i64;
        let st = strides[a] as i64;
        let o = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                let o = (inp + st - 1) / st;
                let total = ((o - 1) * st + ek - inp).max(0);
                pad_begin[a] = if auto_pad == "SAME_UPPER" { total / 2 } else { total - total / 2 };
                o
            }
            "VALID" => (inp - ek) / st + 1,
            "NOTSET" | "" => {
                let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * s]);
                if pads.len() != 2 * s {
                    return Err(ctx.err(format!("pads {pads:?} must hold {} values", 2 * s)));
                }
                pad_begin[a] = pads[a];
                window_count(inp, (pads[a], pads[a + s]), ek, st, ceil_mode)
            }
            other => return Err(ctx.err(format!("auto_pad '{other}'"))),
        };
        out[a] = usize::try_from(o).map_err(|_| ctx.err("the window is larger than the padded input"))?;
    }
    Ok(Window { kernel, strides, dilations, pad_begin, out })
}

/// How many windows of extent `extent` (dilation included) fit, `stride`
/// apart, along an axis of `input` values padded by `(begin, end)`: the
/// floor of the padded span over the stride, plus one; with `ceil_mode` the
/// ceiling, dropping a last window that would start in the trailing
/// padding. At most 0 when the window does not fit.
pub(crate) fn window_count(input: i64, (begin, end): (i64, i64), extent: i64, stride: i64, ceil_mode: bool) -> i64 {
    let span = input + begin + end - extent;
    if ceil_mode {
        let o = (span + stride - 1).div_euclid(stride) + 1;
        // the last window must start inside the input or the leading padding
        if (o - 1) * stride >= input + begin {
            o - 1
        } else {
            o
        }
    } else {
        span.div_euclid(stride) + 1
    }
}

/// For each kernel offset and each output position, the input spatial index
/// it reads (`usize::MAX` in padding).
fn taps(w: &Window, input: &[usize]) -> Vec<Vec<usize>> {
    let ist = strides(input);
    let mut result = Vec::new();
    each_index(&w.kernel, |k| {
        let mut v = Vec::new();
        each_index(&w.out, |o| {
            let mut off = 0usize;
            for a in 0..o.len() {
                let p = (o[a] * w.strides[a] + k[a] * w.dilations[a]) as i64 - w.pad_begin[a];
                if p < 0 || p >= input[a] as i64 {
                    off = usize::MAX;
                    break;
                }
                off += p as usize * ist[a];
            }
            v.push(off);
        });
        result.push(v);
    });
    if w.kernel.is_empty() {
        result.push(vec![0]);
    }
    result
}

fn conv(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, wt) = (ctx.input(0)?, ctx.input(1)?);
    let xv = floats(ctx, x)?;
    let wv = floats(ctx, wt)?;
    let (mut out, shape) = conv_core(ctx, &x.shape, &xv, &wt.shape, &wv)?;
    if let Some(bias) = ctx.opt_input(2)? {
        let bv = floats(ctx, bias)?;
        add_channel_bias(ctx, &mut out, &shape, &bv)?;
    }
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

/// Adds `bias[c]` to every element of channel `c` of an N, C, spatial tensor.
pub(super) fn add_channel_bias(ctx: &NodeCtx<'_>, out: &mut [f64], shape: &[usize], bias: &[f64]) -> Result<()> {
    let m = shape[1];
    if bias.len() != m {
        return Err(ctx.err("B must hold one value per output channel"));
    }
    let out_size: usize = shape[2..].iter().product();
    for (k, o) in out.iter_mut().enumerate() {
        *o += bias[(k / out_size.max(1)) % m];
    }
    Ok(())
}

/// The convolution of `xv` (shape `xs`: N, C, spatial) with `wv` (shape
/// `ws`: M, C/group, kernel), by the node's window attributes.
pub(super) fn conv_core(
    ctx: &NodeCtx<'_>,
    xs: &[usize],
    xv: &[f64],
    ws: &[usize],
    wv: &[f64],
) -> Result<(Vec<f64>, Vec<usize>)> {
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(ctx.err(format!("X {xs:?} and W {ws:?} must be N,C,spatial with one rank")));
    }
    let group = ctx.attr_i("group", 1).max(1) as usize;
    let (n, c) = (xs[0], xs[1]);
    let m = ws[0];
    let cg = ws[1];
    if cg * group != c || m % group != 0 {
        return Err(ctx.err(format!("W {ws:?} does not fit {c} channels in {group} groups")));
    }
    let spatial = &xs[2..];
    let kernel = ws[2..].to_vec();
    let w = window(ctx, spatial, kernel, false)?;
    let taps = taps(&w, spatial);
    let in_size: usize = spatial.iter().product();
    let out_size: usize = w.out.iter().product();
    let k_size = taps.len();
    let mg = m / group;
    let mut out = vec![0.0; n * m * out_size];
    // per image and group, `W_g · columns` over chunks of output positions:
    // the columns (im2col) hold each input channel's value under each tap,
    // and the product runs on the blocked kernel when it is large
    let depth = cg * k_size;
    let chunk = (IM2COL_VALUES / depth.max(1)).clamp(1, out_size.max(1));
    let mut columns = vec![0.0; depth * chunk];
    let mut product = vec![0.0; mg * chunk];
    for b in 0..n {
        for g in 0..group {
            let weights = &wv[g * mg * depth..(g + 1) * mg * depth];
            for start in (0..out_size).step_by(chunk) {
                let cols = chunk.min(out_size - start);
                for ic in 0..cg {
                    let xin = &xv[(b * c + g * cg + ic) * in_size..][..in_size];
                    for (kk, tap) in taps.iter().enumerate() {
                        let row = &mut columns[(ic * k_size + kk) * cols..][..cols];
                        for (o, &i) in row.iter_mut().zip(&tap[start..start + cols]) {
                            *o = if i == usize::MAX { 0.0 } else { xin[i] };
                        }
                    }
                }
                let product = &mut product[..mg * cols];
                product.fill(0.0);
                super::reduce_linalg::product(mg, depth, cols, weights, &columns[..depth * cols], product);
                for (j, row) in product.chunks_exact(cols).enumerate() {
                    let oc = g * mg + j;
                    out[(b * m + oc) * out_size + start..][..cols].copy_from_slice(row);
                }
            }
        }
    }
    Ok((out, [&[n, m][..], &w.out].concat()))
}

/// The most values a convolution's im2col columns hold at once (32 MiB of
/// `f64`): larger outputs are computed in chunks of positions.
const IM2COL_VALUES: usize = 1 << 22;

fn conv_transpose(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, wt) = (ctx.input(0)?, ctx.input(1)?);
    if x.rank() < 3 || wt.rank() != x.rank() {
        return Err(ctx.err("X and W must be N,C,spatial with one rank"));
    }
    let xv = floats(ctx, x)?;
    let wv = floats(ctx, wt)?;
    let group = ctx.attr_i("group", 1).max(1) as usize;
    let (n, c) = (x.shape[0], x.shape[1]);
    if wt.shape[0] != c || c % group != 0 {
        return Err(ctx.err("W's first axis must equal X's channels"));
    }
    let cg = c / group;
    let mg = wt.shape[1];
    let m = mg * group;
    let spatial = &x.shape[2..];
    let s = spatial.len();
    let kernel: Vec<usize> = wt.shape[2..].to_vec();
    let get = |name: &str, d: i64| ctx.attr_ints(name).unwrap_or_else(|| vec![d; s]);
    let st = get("strides", 1);
    let dil = get("dilations", 1);
    let opad = get("output_padding", 0);
    if st.len() != s || dil.len() != s || opad.len() != s {
        return Err(ctx.err("strides, dilations and output_padding need one value per spatial axis"));
    }
    let auto_pad = ctx.attr_s("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let mut pb = vec![0i64; s];
    let mut out_sp = vec![0usize; s];
    let output_shape = ctx.attr_ints("output_shape");
    for a in 0..s {
        let ek = (kernel[a] as i64 - 1) * dil[a] + 1;
        let full = st[a] * (spatial[a] as i64 - 1) + opad[a] + ek;
        let target = match &output_shape {
            Some(os) => Some(*os.get(os.len().wrapping_sub(s) + a).ok_or_else(|| ctx.err("output_shape"))?),
            None if auto_pad.starts_with("SAME") => Some(spatial[a] as i64 * st[a]),
            None => None,
        };
        let o = match target {
            Some(t) => {
                let total = full - t;
                // Python floor division: a negative total pads the end
                let half = total.div_euclid(2);
                pb[a] = if auto_pad == "SAME_UPPER" { half } else { total - half };
                t
            }
            None => {
                let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * s]);
                if pads.len() != 2 * s {
                    return Err(ctx.err("pads"));
                }
                pb[a] = pads[a];
                full - pads[a] - pads[a + s]
            }
        };
        out_sp[a] = usize::try_from(o).map_err(|_| ctx.err("negative output size"))?;
    }
    ctx.check_size(&[&[n, m][..], &out_sp].concat())?;
    let in_size: usize = spatial.iter().product();
    let out_size: usize = out_sp.iter().product();
    let k_size: usize = kernel.iter().product();
    let ost = strides(&out_sp);
    // for each input position and kernel offset: the output index (or MAX)
    let mut scatter = Vec::with_capacity(in_size * k_size);
    each_index(spatial, |i| {
        each_index(&kernel, |k| {
            let mut off = 0usize;
            for a in 0..s {
                let p = i[a] as i64 * st[a] + k[a] as i64 * dil[a] - pb[a];
                if p < 0 || p >= out_sp[a] as i64 {
                    off = usize::MAX;
                    break;
                }
                off += p as usize * ost[a];
            }
            scatter.push(off);
        });
    });
    let mut out = vec![0.0; n * m * out_size];
    for b in 0..n {
        for g in 0..group {
            for ic in 0..cg {
                let ch = g * cg + ic;
                let xin = &xv[(b * c + ch) * in_size..][..in_size];
                for om in 0..mg {
                    let oc = g * mg + om;
                    let acc = &mut out[(b * m + oc) * out_size..][..out_size];
                    let wk = &wv[(ch * mg + om) * k_size..][..k_size];
                    for (i, &xval) in xin.iter().enumerate() {
                        for (kk, &wgt) in wk.iter().enumerate() {
                            let o = scatter[i * k_size + kk];
                            if o != usize::MAX {
                                acc[o] += xval * wgt;
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(bias) = ctx.opt_input(2)? {
        let bv = floats(ctx, bias)?;
        if bv.len() != m {
            return Err(ctx.err("B must hold one value per output channel"));
        }
        for (k, o) in out.iter_mut().enumerate() {
            *o += bv[(k / out_size.max(1)) % m];
        }
    }
    let shape = [&[n, m][..], &out_sp].concat();
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

#[derive(Clone, Copy, PartialEq)]
enum Pool {
    Max,
    Avg,
    Lp,
}

fn pool(ctx: &NodeCtx<'_>, kind: Pool) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 3 {
        return Err(ctx.err("X must be N,C,spatial"));
    }
    let is_int = !x.is_float();
    if is_int && kind != Pool::Max {
        return Err(ctx.unsupported(format!("element type {}", x.elem())));
    }
    let kernel: Vec<usize> = ctx
        .attr_ints("kernel_shape")
        .ok_or_else(|| ctx.err("kernel_shape is required"))?
        .iter()
        .map(|&k| usize::try_from(k).map_err(|_| ctx.err("negative kernel")))
        .collect::<Result<_>>()?;
    let spatial = &x.shape[2..];
    let ceil = ctx.attr_i("ceil_mode", 0) != 0;
    let w = window(ctx, spatial, kernel, ceil)?;
    // The two-axis f32 path walks the window directly: no tap tables.
    let fast = matches!((&x.data, kind), (Data::F32(_), Pool::Max | Pool::Avg))
        && (kind == Pool::Avg || ctx.node.outputs.len() <= 1);
    let direct = fast && spatial.len() == 2;
    let taps = if direct { Vec::new() } else { taps(&w, spatial) };
    let count_pad = ctx.attr_i("count_include_pad", 0) != 0;
    let p = ctx.attr_i("p", 2) as f64;
    // positions inside the explicitly padded input (for count_include_pad)
    let s = spatial.len();
    let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * s]);
    let mut padded_count = vec![0usize; w.out.iter().product()];
    if count_pad {
        let mut k_idx = Vec::new();
        each_index(&w.kernel, |k| k_idx.push(k.to_vec()));
        let mut oi = 0;
        each_index(&w.out, |o| {
            let mut cnt = 0;
            for k in &k_idx {
                let inside = (0..s).all(|a| {
                    let q = (o[a] * w.strides[a] + k[a] * w.dilations[a]) as i64 - w.pad_begin[a];
                    q >= -pads.get(a).copied().unwrap_or(0).max(w.pad_begin[a])
                        && q < spatial[a] as i64 + pads.get(a + s).copied().unwrap_or(0)
                });
                cnt += usize::from(inside);
            }
            padded_count[oi] = cnt;
            oi += 1;
        });
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let in_size: usize = spatial.iter().product();
    let out_size: usize = w.out.iter().product();
    if let (Data::F32(xs), true) = (&x.data, fast) {
        if in_size > 0 && out_size > 0 {
            let shape = [&[n, c][..], &w.out].concat();
            let counts = count_pad.then_some(&padded_count[..]);
            let out = pool_f32(xs, spatial, &w, &taps, kind, counts);
            return Ok(vec![Some(Value::Tensor(Tensor { shape, data: Data::F32(out) }))]);
        }
    }
    let xv = x.to_f64s().ok_or_else(|| ctx.unsupported("string data"))?;
    let mut out = vec![0.0; n * c * out_size];
    let mut arg = vec![0i64; n * c * out_size];
    let storage_col = ctx.attr_i("storage_order", 0) != 0;
    for nc in 0..n * c {
        let xin = &xv[nc * in_size..][..in_size];
        for o in 0..out_size {
            let mut acc = match kind {
                Pool::Max => f64::NEG_INFINITY,
                _ => 0.0,
            };
            let mut best = 0usize;
            let mut cnt = 0usize;
            for tap in &taps {
                let i = tap[o];
                if i == usize::MAX {
                    continue;
                }
                let v = xin[i];
                cnt += 1;
                match kind {
                    Pool::Max => {
                        if v > acc || (acc.is_nan() && !v.is_nan()) {
                            acc = v;
                            best = i;
                        }
                    }
                    Pool::Avg => acc += v,
                    Pool::Lp => acc += v.abs().powf(p),
                }
            }
            out[nc * out_size + o] = match kind {
                Pool::Max => acc,
                Pool::Avg => acc / (if count_pad { padded_count[o] } else { cnt }).max(1) as f64,
                Pool::Lp => acc.powf(1.0 / p),
            };
            let idx = if storage_col && s == 2 {
                let (h, wd) = (best / spatial[1], best % spatial[1]);
                wd * spatial[0] + h
            } else {
                best
            };
            arg[nc * out_size + o] = (nc * in_size + idx) as i64;
        }
    }
    let shape = [&[n, c][..], &w.out].concat();
    let values = from_f64s(ctx, x.elem(), shape.clone(), &out)?;
    let mut outs = vec![Some(Value::Tensor(values))];
    if kind == Pool::Max && ctx.node.outputs.len() > 1 {
        outs.push(Some(Value::Tensor(Tensor { shape, data: Data::I64(arg) })));
    }
    Ok(outs)
}

/// Max or average pooling of `f32` planes (`in_size` values each) without
/// widening the input: the same comparisons, and the same sums in `f64`
/// in the same (kernel-index) order, as the general path, so the same
/// results. Two spatial axes are walked directly, a row of outputs per
/// kernel tap; other ranks go through the tap tables. Planes are spread
/// over the current rayon pool when there is enough work.
fn pool_f32(
    xs: &[f32],
    spatial: &[usize],
    w: &Window,
    taps: &[Vec<usize>],
    kind: Pool,
    padded_count: Option<&[usize]>,
) -> Vec<f32> {
    let in_size: usize = spatial.iter().product();
    let out_size: usize = w.out.iter().product();
    let plane = |(xin, out): (&[f32], &mut [f32])| {
        if spatial.len() == 2 {
            pool2d_plane(xin, out, spatial, w, kind, padded_count);
        } else {
            pool_plane_by_taps(xin, out, taps, kind, padded_count);
        }
    };
    let mut out = vec![0f32; xs.len() / in_size * out_size];
    if out.len() * w.kernel.iter().product::<usize>() >= 1 << 16 {
        out.par_chunks_mut(out_size).zip(xs.par_chunks(in_size)).for_each(|(o, x)| plane((x, o)));
    } else {
        out.chunks_mut(out_size).zip(xs.chunks(in_size)).for_each(|(o, x)| plane((x, o)));
    }
    out
}

/// Output positions `lo..hi` along one axis whose input position
/// `o·stride + offset − pad` lies in `0..size`.
fn inside(count: usize, stride: usize, offset: usize, pad: i64, size: usize) -> (usize, usize) {
    let at = |o: usize| (o * stride + offset) as i64 - pad;
    let lo = (0..count).find(|&o| at(o) >= 0).unwrap_or(count);
    let hi = (lo..count).find(|&o| at(o) >= size as i64).unwrap_or(count);
    (lo, hi)
}

fn pool2d_plane(xin: &[f32], out: &mut [f32], spatial: &[usize], w: &Window, kind: Pool, padded: Option<&[usize]>) {
    #[cfg(target_arch = "x86_64")]
    if crate::processor::avx2_available() {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { pool2d_plane_avx2(xin, out, spatial, w, kind, padded) };
    }
    pool2d_plane_body(xin, out, spatial, w, kind, padded)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pool2d_plane_avx2(
    xin: &[f32],
    out: &mut [f32],
    spatial: &[usize],
    w: &Window,
    kind: Pool,
    padded: Option<&[usize]>,
) {
    pool2d_plane_body(xin, out, spatial, w, kind, padded)
}

/// One plane of 2-D pooling: per output row, per kernel tap, the row's
/// outputs `lo..hi` that the tap reaches combined with a run of the input
/// line (a contiguous run at stride 1). The runs of each column tap are
/// worked out once per plane; an average divides by the taps inside the
/// input (valid rows times valid columns) or, counting the padding, by
/// `padded`.
#[inline(always)]
fn pool2d_plane_body(
    xin: &[f32],
    out: &mut [f32],
    spatial: &[usize],
    w: &Window,
    kind: Pool,
    padded: Option<&[usize]>,
) {
    let (h, wd) = (spatial[0], spatial[1]);
    let (oh, ow) = (w.out[0], w.out[1]);
    let sw = w.strides[1];
    // Per column tap: the outputs it reaches and the input column of the first.
    let runs: Vec<(usize, usize, usize)> = (0..w.kernel[1])
        .filter_map(|kj| {
            let offset = kj * w.dilations[1];
            let (lo, hi) = inside(ow, sw, offset, w.pad_begin[1], wd);
            (lo < hi).then(|| (lo, hi, ((lo * sw + offset) as i64 - w.pad_begin[1]) as usize))
        })
        .collect();
    let mut columns = vec![0usize; ow];
    for &(lo, hi, _) in &runs {
        columns[lo..hi].iter_mut().for_each(|c| *c += 1);
    }
    let mut sums = vec![0f64; ow];
    for oy in 0..oh {
        let row = &mut out[oy * ow..(oy + 1) * ow];
        if kind == Pool::Max {
            row.fill(f32::NEG_INFINITY);
        } else {
            sums.fill(0.0);
        }
        let mut rows = 0;
        for ki in 0..w.kernel[0] {
            let iy = (oy * w.strides[0] + ki * w.dilations[0]) as i64 - w.pad_begin[0];
            if iy < 0 || iy >= h as i64 {
                continue;
            }
            rows += 1;
            let line = &xin[iy as usize * wd..(iy as usize + 1) * wd];
            for &(lo, hi, first) in &runs {
                match (kind, sw) {
                    // A select, not a branch: `maxps`.
                    (Pool::Max, 1) => row[lo..hi]
                        .iter_mut()
                        .zip(&line[first..first + (hi - lo)])
                        .for_each(|(y, &v)| *y = if v > *y { v } else { *y }),
                    (Pool::Max, _) => row[lo..hi]
                        .iter_mut()
                        .zip(line[first..].iter().step_by(sw))
                        .for_each(|(y, &v)| *y = if v > *y { v } else { *y }),
                    (_, 1) => sums[lo..hi]
                        .iter_mut()
                        .zip(&line[first..first + (hi - lo)])
                        .for_each(|(s, &v)| *s += f64::from(v)),
                    _ => sums[lo..hi]
                        .iter_mut()
                        .zip(line[first..].iter().step_by(sw))
                        .for_each(|(s, &v)| *s += f64::from(v)),
                }
            }
        }
        if kind == Pool::Avg {
            for ox in 0..ow {
                let n = padded.map_or(rows * columns[ox], |p| p[oy * ow + ox]).max(1);
                row[ox] = (sums[ox] / n as f64) as f32;
            }
        }
    }
}

fn pool_plane_by_taps(xin: &[f32], out: &mut [f32], taps: &[Vec<usize>], kind: Pool, padded: Option<&[usize]>) {
    for (o, y) in out.iter_mut().enumerate() {
        *y = if kind == Pool::Max {
            let mut acc = f32::NEG_INFINITY;
            for tap in taps {
                let i = tap[o];
                if i != usize::MAX && xin[i] > acc {
                    acc = xin[i];
                }
            }
            acc
        } else {
            let (mut acc, mut cnt) = (0f64, 0usize);
            for tap in taps {
                let i = tap[o];
                if i != usize::MAX {
                    acc += f64::from(xin[i]);
                    cnt += 1;
                }
            }
            (acc / padded.map_or(cnt, |p| p[o]).max(1) as f64) as f32
        };
    }
}

fn global_pool(ctx: &NodeCtx<'_>, kind: Pool) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err("X must be N,C,spatial"));
    }
    let xv = floats(ctx, x)?;
    let (n, c) = (x.shape[0], x.shape[1]);
    let size: usize = x.shape[2..].iter().product();
    let p = ctx.attr_i("p", 2) as f64;
    let out: Vec<f64> = (0..n * c)
        .map(|k| {
            let v = &xv[k * size..(k + 1) * size];
            match kind {
                Pool::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                Pool::Avg => v.iter().sum::<f64>() / size as f64,
                Pool::Lp => v.iter().map(|a| a.abs().powf(p)).sum::<f64>().powf(1.0 / p),
            }
        })
        .collect();
    let shape: Vec<usize> = [n, c].into_iter().chain(std::iter::repeat_n(1, x.rank() - 2)).collect();
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

fn per_channel(ctx: &NodeCtx<'_>, t: &Tensor, c: usize, what: &str) -> Result<Vec<f64>> {
    let v = floats(ctx, t)?;
    if v.len() != c {
        return Err(ctx.err(format!("{what} must hold {c} values, one per channel")));
    }
    Ok(v)
}

fn batch_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err("X must have a channel axis"));
    }
    let training = ctx.attr_i("training_mode", 0) != 0;
    let c = x.shape[1];
    let scale = per_channel(ctx, ctx.input(1)?, c, "scale")?;
    let bias = per_channel(ctx, ctx.input(2)?, c, "B")?;
    let input_mean = per_channel(ctx, ctx.input(3)?, c, "mean")?;
    let input_var = per_channel(ctx, ctx.input(4)?, c, "var")?;
    let eps = f64::from(ctx.attr_f("epsilon", 1e-5));
    let inner: usize = x.shape[2..].iter().product();
    // Inference on f32: each channel's factor once, then a pass over each
    // plane (still in f64, so the result rounds as the general path's does).
    if let (false, 1, Data::F32(xs)) = (training, ctx.node.outputs.len(), &x.data) {
        let factor: Vec<f64> = (0..c).map(|ch| scale[ch] / (input_var[ch] + eps).sqrt()).collect();
        let mut out = Vec::with_capacity(xs.len());
        for (p, plane) in xs.chunks(inner.max(1)).enumerate() {
            let ch = p % c;
            let (m, k, b) = (input_mean[ch], factor[ch], bias[ch]);
            out.extend(plane.iter().map(|&v| ((f64::from(v) - m) * k + b) as f32));
        }
        return one(Tensor { shape: x.shape.clone(), data: Data::F32(out) });
    }
    let xv = floats(ctx, x)?;
    // plane by plane: plane p holds channel p mod c
    let planes = || xv.chunks(inner.max(1)).enumerate().map(|(p, plane)| (p % c.max(1), plane));
    // training normalizes with the batch's own statistics (population variance)
    let (mean, var) = if training {
        let count = (xv.len() / c.max(1)) as f64;
        let mut mean = vec![0.0; c];
        for (ch, plane) in planes() {
            mean[ch] += plane.iter().map(|&v| v / count).sum::<f64>();
        }
        let mut var = vec![0.0; c];
        for (ch, plane) in planes() {
            let m = mean[ch];
            var[ch] += plane.iter().map(|&v| (v - m).powi(2) / count).sum::<f64>();
        }
        (mean, var)
    } else {
        (input_mean.clone(), input_var.clone())
    };
    let mut out: Vec<f64> = Vec::with_capacity(xv.len());
    for (ch, plane) in planes() {
        let (m, d, k, b) = (mean[ch], (var[ch] + eps).sqrt(), scale[ch], bias[ch]);
        out.extend(plane.iter().map(|&v| k * (v - m) / d + b));
    }
    let mut outs = vec![Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?))];
    if ctx.node.outputs.len() > 1 {
        if !training {
            return Err(ctx.unsupported("running mean/var outputs outside training mode"));
        }
        let momentum = f64::from(ctx.attr_f("momentum", 0.9));
        let run = |input: &[f64], current: &[f64]| -> Vec<f64> {
            input.iter().zip(current).map(|(&a, &b)| a * momentum + b * (1.0 - momentum)).collect()
        };
        let (mt, vt) = (ctx.input(3)?.elem(), ctx.input(4)?.elem());
        outs.push(Some(Value::Tensor(from_f64s(ctx, mt, vec![c], &run(&input_mean, &mean))?)));
        outs.push(Some(Value::Tensor(from_f64s(ctx, vt, vec![c], &run(&input_var, &var))?)));
    }
    Ok(outs)
}

/// Normalizes each of `groups` consecutive blocks of `v` to mean 0, variance 1.
fn normalize_blocks(v: &mut [f64], block: usize, eps: f64) -> Vec<(f64, f64)> {
    let mut stats = Vec::new();
    if block == 0 {
        return stats;
    }
    for chunk in v.chunks_mut(block) {
        let mean = chunk.iter().sum::<f64>() / block as f64;
        let var = chunk.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / block as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for a in chunk.iter_mut() {
            *a = (*a - mean) * inv;
        }
        stats.push((mean, inv));
    }
    stats
}

fn instance_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 3 {
        return Err(ctx.err("X must be N,C,spatial"));
    }
    let c = x.shape[1];
    let scale = per_channel(ctx, ctx.input(1)?, c, "scale")?;
    let bias = per_channel(ctx, ctx.input(2)?, c, "B")?;
    let eps = f64::from(ctx.attr_f("epsilon", 1e-5));
    let mut v = floats(ctx, x)?;
    let inner: usize = x.shape[2..].iter().product();
    normalize_blocks(&mut v, inner, eps);
    for (k, a) in v.iter_mut().enumerate() {
        let ch = (k / inner.max(1)) % c;
        *a = *a * scale[ch] + bias[ch];
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?)
}

fn layer_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", -1), x.rank())?;
    let eps = f64::from(ctx.attr_f("epsilon", 1e-5));
    let mut v = floats(ctx, x)?;
    let inner: usize = x.shape[axis..].iter().product();
    let stats = normalize_blocks(&mut v, inner, eps);
    let norm_shape = &x.shape[axis..];
    let scale = ctx.input(1)?;
    let sv = floats(ctx, scale)?;
    let si = super::broadcast_index(norm_shape, &scale.shape);
    let bias = ctx.opt_input(2)?;
    let (bv, bi) = match bias {
        Some(b) => (floats(ctx, b)?, super::broadcast_index(norm_shape, &b.shape)),
        None => (vec![0.0], vec![0; inner]),
    };
    if super::broadcast_shape(&[norm_shape, &scale.shape]).as_deref() != Some(norm_shape) {
        return Err(ctx.err("Scale does not broadcast to the normalized shape"));
    }
    for (k, a) in v.iter_mut().enumerate() {
        let j = k % inner.max(1);
        *a = *a * sv[si[j]] + bv[bi[j]];
    }
    let mut outs = vec![Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?))];
    let stat_shape: Vec<usize> = x.shape.iter().enumerate().map(|(a, &d)| if a < axis { d } else { 1 }).collect();
    let stash =
        ctx.attr_opt_i("stash_type").map_or(diamond_ir::ElemType::Float, |c| diamond_ir::ElemType::from_code(c as i32));
    let means: Vec<f64> = stats.iter().map(|s| s.0).collect();
    let invs: Vec<f64> = stats.iter().map(|s| s.1).collect();
    outs.push(Some(Value::Tensor(from_f64s(ctx, stash, stat_shape.clone(), &means)?)));
    outs.push(Some(Value::Tensor(from_f64s(ctx, stash, stat_shape, &invs)?)));
    Ok(outs)
}

fn group_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err("X must have a channel axis"));
    }
    let g = ctx.attr_i("num_groups", 0);
    let c = x.shape[1];
    if g <= 0 || c % g as usize != 0 {
        return Err(ctx.err(format!("num_groups {g} must divide {c} channels")));
    }
    let g = g as usize;
    let eps = f64::from(ctx.attr_f("epsilon", 1e-5));
    let sv = floats(ctx, ctx.input(1)?)?;
    let bv = floats(ctx, ctx.input(2)?)?;
    // opset 18 gives scale/bias per group, opset 21 per channel
    let per_group = sv.len() == g && g != c;
    if !(sv.len() == c || per_group) || bv.len() != sv.len() {
        return Err(ctx.err("scale and bias must hold one value per channel (or per group)"));
    }
    let mut v = floats(ctx, x)?;
    let inner: usize = x.shape[2..].iter().product();
    normalize_blocks(&mut v, (c / g) * inner, eps);
    for (k, a) in v.iter_mut().enumerate() {
        let ch = (k / inner.max(1)) % c;
        let i = if per_group { ch / (c / g) } else { ch };
        *a = *a * sv[i] + bv[i];
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?)
}

fn lrn(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let size = ctx.attr_i("size", 0);
    if x.rank() < 3 || size <= 0 {
        return Err(ctx.err("X must be N,C,spatial and size positive"));
    }
    let alpha = f64::from(ctx.attr_f("alpha", 1e-4));
    let beta = f64::from(ctx.attr_f("beta", 0.75));
    let bias = f64::from(ctx.attr_f("bias", 1.0));
    let v = floats(ctx, x)?;
    let c = x.shape[1] as i64;
    let inner: usize = x.shape[2..].iter().product();
    let (lo, hi) = ((size - 1) / 2, (size - 1) - (size - 1) / 2);
    let out: Vec<f64> = (0..v.len())
        .map(|k| {
            let ch = ((k / inner) as i64) % c;
            let base = k as i64 - ch * inner as i64;
            let sq: f64 =
                ((ch - lo).max(0)..=(ch + hi).min(c - 1)).map(|j| v[(base + j * inner as i64) as usize].powi(2)).sum();
            v[k] / (bias + alpha / size as f64 * sq).powf(beta)
        })
        .collect();
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

fn mvn(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axes = ctx.attr_ints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let mut reduced = vec![false; x.rank()];
    for a in axes {
        reduced[ctx.axis(a, x.rank())?] = true;
    }
    let v = floats(ctx, x)?;
    let kept: Vec<usize> = x.shape.iter().zip(&reduced).map(|(&d, &r)| if r { 1 } else { d }).collect();
    let st = strides(&kept);
    let mut g = Vec::new();
    each_index(&x.shape, |m| {
        g.push(m.iter().zip(&reduced).zip(&st).map(|((&i, &r), &s)| if r { 0 } else { i * s }).sum::<usize>())
    });
    let n_out: usize = kept.iter().product();
    let cnt = (v.len() / n_out.max(1)) as f64;
    let mut mean = vec![0.0; n_out];
    let mut sq = vec![0.0; n_out];
    for (k, &a) in v.iter().enumerate() {
        mean[g[k]] += a / cnt;
        sq[g[k]] += a * a / cnt;
    }
    let out: Vec<f64> = v
        .iter()
        .enumerate()
        .map(|(k, &a)| (a - mean[g[k]]) / ((sq[g[k]] - mean[g[k]] * mean[g[k]]).max(0.0).sqrt() + 1e-9))
        .collect();
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)
}

fn rms_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", -1), x.rank())?;
    let eps = f64::from(ctx.attr_f("epsilon", 1e-5));
    let mut v = floats(ctx, x)?;
    let inner: usize = x.shape[axis..].iter().product();
    let norm_shape = &x.shape[axis..];
    let scale = ctx.input(1)?;
    if super::broadcast_shape(&[norm_shape, &scale.shape]).as_deref() != Some(norm_shape) {
        return Err(ctx.err("Scale does not broadcast to the normalized shape"));
    }
    let sv = floats(ctx, scale)?;
    let si = super::broadcast_index(norm_shape, &scale.shape);
    if inner > 0 {
        for chunk in v.chunks_mut(inner) {
            let ms = chunk.iter().map(|a| a * a).sum::<f64>() / inner as f64;
            let inv = 1.0 / (ms + eps).sqrt();
            for (j, a) in chunk.iter_mut().enumerate() {
                *a = *a * inv * sv[si[j]];
            }
        }
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?)
}

fn lp_norm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let axis = ctx.axis(ctx.attr_i("axis", -1), x.rank())?;
    let p = ctx.attr_i("p", 2);
    if p != 1 && p != 2 {
        return Err(ctx.err(format!("p must be 1 or 2, not {p}")));
    }
    let mut v = floats(ctx, x)?;
    let dim = x.shape[axis];
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * dim + k) * inner + i;
            let norm = if p == 1 {
                (0..dim).map(|k| v[at(k)].abs()).sum::<f64>()
            } else {
                (0..dim).map(|k| v[at(k)] * v[at(k)]).sum::<f64>().sqrt()
            };
            for k in 0..dim {
                // a zero vector stays zero
                v[at(k)] = if norm == 0.0 { 0.0 } else { v[at(k)] / norm };
            }
        }
    }
    one(from_f64s(ctx, x.elem(), x.shape.clone(), &v)?)
}

/// The negative log-likelihood of log-probabilities `lp` (shape of `x`:
/// N, C, d...) at the target classes of operand 1, weighted by operand 2,
/// reduced as the `reduction` attribute says. `extra` is appended to the
/// outputs (SoftmaxCrossEntropyLoss's log-probabilities).
fn nll(ctx: &NodeCtx<'_>, x: &Tensor, lp: &[f64], extra: Option<Value>) -> Result<Outs> {
    let target = ctx.input(1)?;
    if x.rank() < 2 {
        return Err(ctx.err("the input must be N, C, d..."));
    }
    let (n, c) = (x.shape[0], x.shape[1]);
    let inner: usize = x.shape[2..].iter().product();
    let expected: Vec<usize> = [&[n][..], &x.shape[2..]].concat();
    if target.shape != expected {
        return Err(ctx.err(format!("target shape {:?}, expected {expected:?}", target.shape)));
    }
    let t = target.to_i64s().filter(|_| !target.is_float()).ok_or_else(|| ctx.err("target must be integers"))?;
    let weight = match ctx.opt_input(2)? {
        Some(w) => Some(per_channel(ctx, w, c, "weight")?),
        None => None,
    };
    let ignore = ctx.attr_opt_i("ignore_index");
    let mut loss = vec![0.0; n * inner];
    let mut wsum = 0.0;
    for b in 0..n {
        for i in 0..inner {
            let k = b * inner + i;
            let cls = t[k];
            if Some(cls) == ignore {
                continue;
            }
            let cu = usize::try_from(cls)
                .ok()
                .filter(|&cu| cu < c)
                .ok_or_else(|| ctx.err(format!("target {cls} is not a class")))?;
            let w = weight.as_ref().map_or(1.0, |w| w[cu]);
            loss[k] = -lp[(b * c + cu) * inner + i] * w;
            wsum += w;
        }
    }
    let reduction = ctx.attr_s("reduction").unwrap_or_else(|| "mean".into());
    let out = match reduction.as_str() {
        "none" => from_f64s(ctx, x.elem(), expected, &loss)?,
        "sum" => from_f64s(ctx, x.elem(), Vec::new(), &[loss.iter().sum()])?,
        "mean" => from_f64s(ctx, x.elem(), Vec::new(), &[loss.iter().sum::<f64>() / wsum])?,
        other => return Err(ctx.err(format!("reduction '{other}'"))),
    };
    let mut outs = vec![Some(Value::Tensor(out))];
    outs.extend(extra.map(Some));
    Ok(outs)
}

fn softmax_cross_entropy(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    if x.rank() < 2 {
        return Err(ctx.err("scores must be N, C, d..."));
    }
    let v = floats(ctx, x)?;
    let c = x.shape[1];
    let inner: usize = x.shape[2..].iter().product();
    let mut lp = vec![0.0; v.len()];
    for b in 0..x.shape[0] {
        for i in 0..inner {
            let at = |k: usize| (b * c + k) * inner + i;
            let m = (0..c).map(|k| v[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..c).map(|k| (v[at(k)] - m).exp()).sum();
            for k in 0..c {
                lp[at(k)] = v[at(k)] - m - s.ln();
            }
        }
    }
    let extra = if ctx.node.outputs.len() > 1 {
        Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &lp)?))
    } else {
        None
    };
    nll(ctx, x, &lp, extra)
}

/// `Col2Im`: sums each column of sliding-block values back into the image.
fn col2im(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let x = ctx.input(0)?;
    let image: Vec<usize> = ctx
        .opt_ints(1)?
        .ok_or_else(|| ctx.err("image_shape is required"))?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let block: Vec<usize> = ctx
        .opt_ints(2)?
        .ok_or_else(|| ctx.err("block_shape is required"))?
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    let s = image.len();
    if block.len() != s || x.rank() != 3 {
        return Err(ctx.err("input must be (N, C·block, L) with one block size per image axis"));
    }
    let get = |name: &str, d: i64, n: usize| ctx.attr_ints(name).unwrap_or_else(|| vec![d; n]);
    let (dil, pads, st) = (get("dilations", 1, s), get("pads", 0, 2 * s), get("strides", 1, s));
    if dil.len() != s || pads.len() != 2 * s || st.len() != s {
        return Err(ctx.err("dilations, pads and strides must fit the image rank"));
    }
    let bsize: usize = block.iter().product();
    let (n, cb, l) = (x.shape[0], x.shape[1], x.shape[2]);
    if bsize == 0 || cb % bsize != 0 {
        return Err(ctx.err("the channel axis is not a multiple of the block size"));
    }
    let c = cb / bsize;
    let counts: Vec<usize> = (0..s)
        .map(|a| {
            let span = image[a] as i64 + pads[a] + pads[a + s] - dil[a] * (block[a] as i64 - 1) - 1;
            (span.div_euclid(st[a]) + 1).max(0) as usize
        })
        .collect();
    if counts.iter().product::<usize>() != l {
        return Err(ctx.err(format!("{l} columns, the image and block give {}", counts.iter().product::<usize>())));
    }
    ctx.check_size(&[&[n, c][..], &image].concat())?;
    let v = floats(ctx, x)?;
    let img_size: usize = image.iter().product();
    let ist = strides(&image);
    let mut out = vec![0.0; n * c * img_size];
    let mut blocks = Vec::new();
    each_index(&block, |k| blocks.push(k.to_vec()));
    let mut positions = Vec::new();
    each_index(&counts, |p| positions.push(p.to_vec()));
    for b in 0..n {
        for ch in 0..c {
            for (kk, k) in blocks.iter().enumerate() {
                for (li, p) in positions.iter().enumerate() {
                    let mut off = 0usize;
                    let mut inside = true;
                    for a in 0..s {
                        let q = p[a] as i64 * st[a] - pads[a] + k[a] as i64 * dil[a];
                        if q < 0 || q >= image[a] as i64 {
                            inside = false;
                            break;
                        }
                        off += q as usize * ist[a];
                    }
                    if inside {
                        out[(b * c + ch) * img_size + off] += v[((b * cb) + ch * bsize + kk) * l + li];
                    }
                }
            }
        }
    }
    let shape = [&[n, c][..], &image].concat();
    one(from_f64s(ctx, x.elem(), shape, &out)?)
}

fn max_unpool(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let (x, ind) = (ctx.input(0)?, ctx.input(1)?);
    if x.rank() < 3 || ind.shape != x.shape {
        return Err(ctx.err("X must be N, C, spatial and I of its shape"));
    }
    let s = x.rank() - 2;
    let kernel = ctx.attr_ints("kernel_shape").ok_or_else(|| ctx.err("kernel_shape is required"))?;
    let st = ctx.attr_ints("strides").unwrap_or_else(|| vec![1; s]);
    let pads = ctx.attr_ints("pads").unwrap_or_else(|| vec![0; 2 * s]);
    if kernel.len() != s || st.len() != s || pads.len() != 2 * s {
        return Err(ctx.err("kernel_shape, strides and pads must fit the spatial rank"));
    }
    // indices address the inferred shape; a larger output_shape holds that
    // result in its leading corner
    let mut shape = x.shape[..2].to_vec();
    for a in 0..s {
        shape.push(((x.shape[a + 2] as i64 - 1) * st[a] + kernel[a] - pads[a] - pads[a + s]).max(0) as usize);
    }
    let total = ctx.check_size(&shape)?;
    let v = x.to_f64s().ok_or_else(|| ctx.err("numeric input"))?;
    let iv = ind.to_i64s().ok_or_else(|| ctx.err("indices must be integers"))?;
    let mut out = vec![0.0; total];
    for (&val, &i) in v.iter().zip(&iv) {
        let i = usize::try_from(i)
            .ok()
            .filter(|&i| i < total)
            .ok_or_else(|| ctx.err(format!("index {i} is out of range")))?;
        out[i] = val;
    }
    let Some(requested) = ctx.opt_ints(2)? else {
        return one(from_f64s(ctx, x.elem(), shape, &out)?);
    };
    let requested: Vec<usize> = requested.iter().map(|&d| d.max(0) as usize).collect();
    if requested.len() != shape.len() || requested.iter().zip(&shape).any(|(r, s)| r < s) {
        return Err(ctx.err(format!("output_shape {requested:?} is smaller than the unpooled {shape:?}")));
    }
    let n = ctx.check_size(&requested)?;
    let rst = strides(&requested);
    let mut big = vec![0.0; n];
    let mut k = 0;
    each_index(&shape, |m| {
        big[m.iter().zip(&rst).map(|(i, s)| i * s).sum::<usize>()] = out[k];
        k += 1;
    });
    one(from_f64s(ctx, x.elem(), requested, &big)?)
}

fn affine_grid(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let theta = ctx.input(0)?;
    let size = ctx.opt_ints(1)?.ok_or_else(|| ctx.err("size is required"))?;
    let align = ctx.attr_i("align_corners", 0) != 0;
    let sp: Vec<usize> = size.iter().skip(2).map(|&d| d.max(0) as usize).collect();
    let r = sp.len();
    let n = size.first().copied().unwrap_or(0).max(0) as usize;
    if !(r == 2 || r == 3) || theta.shape != [n, r, r + 1] {
        return Err(ctx.err(format!("theta {:?} does not fit size {size:?}", theta.shape)));
    }
    ctx.check_size(&[&[n][..], &sp, &[r]].concat())?;
    let tv = floats(ctx, theta)?;
    let coord = |i: usize, len: usize| -> f64 {
        if align {
            if len <= 1 {
                0.0
            } else {
                -1.0 + 2.0 * i as f64 / (len - 1) as f64
            }
        } else {
            (2.0 * i as f64 + 1.0) / len as f64 - 1.0
        }
    };
    let mut out = Vec::new();
    for b in 0..n {
        let t = &tv[b * r * (r + 1)..][..r * (r + 1)];
        each_index(&sp, |m| {
            // (x, y[, z], 1): x runs along the innermost axis
            let mut p: Vec<f64> = (0..r).map(|k| coord(m[r - 1 - k], sp[r - 1 - k])).collect();
            p.push(1.0);
            for row in 0..r {
                out.push((0..=r).map(|k| t[row * (r + 1) + k] * p[k]).sum());
            }
        });
    }
    let shape = [&[n][..], &sp, &[r]].concat();
    one(from_f64s(ctx, theta.elem(), shape, &out)?)
}

/// `CausalConvWithState`: a depthwise 1-D convolution over the input with
/// the carried state (or zeros) prepended; the new state is the last k−1
/// positions of that padded input.
fn causal_conv_with_state(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["activation"])?;
    let (x, w) = (ctx.input(0)?, ctx.input(1)?);
    if x.rank() != 3 || w.rank() != 3 || w.shape[0] != x.shape[1] || w.shape[1] != 1 || w.shape[2] == 0 {
        return Err(ctx.err(format!("input {:?} and weight {:?} must be (B, C, L) and (C, 1, k)", x.shape, w.shape)));
    }
    let silu = match ctx.attr_s("activation").as_deref().unwrap_or("none") {
        "none" => false,
        "silu" | "swish" => true,
        other => return Err(ctx.err(format!("activation '{other}'"))),
    };
    let (b, c, l) = (x.shape[0], x.shape[1], x.shape[2]);
    let k = w.shape[2];
    let xv = floats(ctx, x)?;
    let wv = floats(ctx, w)?;
    let bias = match ctx.opt_input(2)? {
        Some(t) => per_channel(ctx, t, c, "bias")?,
        None => vec![0.0; c],
    };
    let state = match ctx.opt_input(3)? {
        Some(t) if t.shape == [b, c, k - 1] => floats(ctx, t)?,
        Some(t) => return Err(ctx.err(format!("past_state {:?} must be ({b}, {c}, {})", t.shape, k - 1))),
        None => vec![0.0; b * c * (k - 1)],
    };
    let pl = l + k - 1;
    let mut out = vec![0.0; b * c * l];
    let mut present = vec![0.0; b * c * (k - 1)];
    for bi in 0..b {
        for ch in 0..c {
            let padded: Vec<f64> = state[(bi * c + ch) * (k - 1)..][..k - 1]
                .iter()
                .chain(&xv[(bi * c + ch) * l..][..l])
                .copied()
                .collect();
            for t in 0..l {
                let v = bias[ch] + (0..k).map(|j| wv[ch * k + j] * padded[t + j]).sum::<f64>();
                out[(bi * c + ch) * l + t] = if silu { v / (1.0 + (-v).exp()) } else { v };
            }
            present[(bi * c + ch) * (k - 1)..][..k - 1].copy_from_slice(&padded[pl - (k - 1)..]);
        }
    }
    Ok(vec![
        Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)),
        Some(Value::Tensor(from_f64s(ctx, x.elem(), vec![b, c, k - 1], &present)?)),
    ])
}

/// `RoiAlign`: each region of interest, split into output_height ×
/// output_width bins, each bin the average (or maximum) of bilinear samples
/// on a regular grid inside it.
fn roi_align(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&[
        "coordinate_transformation_mode",
        "mode",
        "output_height",
        "output_width",
        "sampling_ratio",
        "spatial_scale",
    ])?;
    let (x, rois, batch) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if x.rank() != 4 || rois.rank() != 2 || rois.shape[1] != 4 || batch.len() != rois.shape[0] {
        return Err(ctx.err("X must be N,C,H,W, rois (R, 4) and batch_indices (R)"));
    }
    let half_pixel = match ctx.attr_s("coordinate_transformation_mode").as_deref() {
        Some("half_pixel") => true,
        Some("output_half_pixel") => false,
        None => ctx.opset >= 16,
        Some(other) => return Err(ctx.err(format!("coordinate_transformation_mode '{other}'"))),
    };
    let max_mode = match ctx.attr_s("mode").as_deref().unwrap_or("avg") {
        "avg" => false,
        "max" => true,
        other => return Err(ctx.err(format!("mode '{other}'"))),
    };
    let (ph_n, pw_n) = (ctx.attr_i("output_height", 1).max(1) as usize, ctx.attr_i("output_width", 1).max(1) as usize);
    let ratio = ctx.attr_i("sampling_ratio", 0);
    let scale = f64::from(ctx.attr_f("spatial_scale", 1.0));
    let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3]);
    if h == 0 || w == 0 {
        return Err(ctx.err("the feature map is empty"));
    }
    let r = rois.shape[0];
    ctx.check_size(&[r, c, ph_n, pw_n])?;
    let xv = floats(ctx, x)?;
    let rv = floats(ctx, rois)?;
    let bv = batch.to_i64s().ok_or_else(|| ctx.err("batch_indices must be integers"))?;
    let mut out = vec![0.0; r * c * ph_n * pw_n];
    for n in 0..r {
        let bi = usize::try_from(bv[n])
            .ok()
            .filter(|&b| b < x.shape[0])
            .ok_or_else(|| ctx.err("batch index out of range"))?;
        let off = if half_pixel { 0.5 } else { 0.0 };
        let (sw, sh, ew, eh) = (
            rv[n * 4] * scale - off,
            rv[n * 4 + 1] * scale - off,
            rv[n * 4 + 2] * scale - off,
            rv[n * 4 + 3] * scale - off,
        );
        let (mut rw, mut rh) = (ew - sw, eh - sh);
        if !half_pixel {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let (bh, bw) = (rh / ph_n as f64, rw / pw_n as f64);
        let gh = if ratio > 0 { ratio as usize } else { (rh / ph_n as f64).ceil().max(0.0) as usize };
        let gw = if ratio > 0 { ratio as usize } else { (rw / pw_n as f64).ceil().max(0.0) as usize };
        let count = (gh * gw).max(1) as f64;
        // (positions, weights) of each sample, shared by all channels
        let mut samples: Vec<([usize; 4], [f64; 4])> = Vec::with_capacity(ph_n * pw_n * gh * gw);
        for ph in 0..ph_n {
            for pw in 0..pw_n {
                for iy in 0..gh {
                    let yy = sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let xx = sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        if yy < -1.0 || yy > h as f64 || xx < -1.0 || xx > w as f64 {
                            samples.push(([0; 4], [0.0; 4]));
                            continue;
                        }
                        let (mut y, mut xq) = (yy.max(0.0), xx.max(0.0));
                        let (mut yl, mut xl) = (y as usize, xq as usize);
                        let yh = if yl + 1 >= h {
                            yl = h - 1;
                            y = yl as f64;
                            yl
                        } else {
                            yl + 1
                        };
                        let xh = if xl + 1 >= w {
                            xl = w - 1;
                            xq = xl as f64;
                            xl
                        } else {
                            xl + 1
                        };
                        let (ly, lx) = (y - yl as f64, xq - xl as f64);
                        let (hy, hx) = (1.0 - ly, 1.0 - lx);
                        samples.push((
                            [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
                            [hy * hx, hy * lx, ly * hx, ly * lx],
                        ));
                    }
                }
            }
        }
        for ch in 0..c {
            let base = (bi * c + ch) * h * w;
            for p in 0..ph_n * pw_n {
                let bin = &samples[p * gh * gw..(p + 1) * gh * gw];
                let v = if max_mode {
                    bin.iter()
                        .map(|(pos, wt)| (0..4).map(|q| wt[q] * xv[base + pos[q]]).fold(f64::NEG_INFINITY, f64::max))
                        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                        .unwrap_or(0.0)
                } else {
                    bin.iter().map(|(pos, wt)| (0..4).map(|q| wt[q] * xv[base + pos[q]]).sum::<f64>()).sum::<f64>()
                        / count
                };
                out[(n * c + ch) * ph_n * pw_n + p] = v;
            }
        }
    }
    one(from_f64s(ctx, x.elem(), vec![r, c, ph_n, pw_n], &out)?)
}

/// `DeformConv` (2-D): each kernel tap reads the input at its regular
/// position plus a learned offset, bilinearly interpolated (zero outside),
/// scaled by the optional mask.
fn deform_conv(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"])?;
    let (x, wt, offset) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if x.rank() != 4 || wt.rank() != 4 || offset.rank() != 4 {
        return Err(ctx.unsupported("deformable convolution other than 2-D"));
    }
    let (n, ic, ih, iw) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let (oc, icg, kh, kw) = (wt.shape[0], wt.shape[1], wt.shape[2], wt.shape[3]);
    let group = ctx.attr_i("group", 1).max(1) as usize;
    let og = ctx.attr_i("offset_group", 1).max(1) as usize;
    let get = |name: &str, d: i64, k: usize| ctx.attr_ints(name).unwrap_or_else(|| vec![d; k]);
    let (dil, pads, st) = (get("dilations", 1, 2), get("pads", 0, 4), get("strides", 1, 2));
    let (oh, ow) = (offset.shape[2], offset.shape[3]);
    if icg * group != ic
        || oc % group != 0
        || ic % og != 0
        || offset.shape[0] != n
        || offset.shape[1] != og * kh * kw * 2
    {
        return Err(ctx.err(format!("X {:?}, W {:?} and offset {:?} do not fit", x.shape, wt.shape, offset.shape)));
    }
    if dil.len() != 2 || pads.len() != 4 || st.len() != 2 {
        return Err(ctx.err("dilations, pads and strides must fit two spatial axes"));
    }
    let xv = floats(ctx, x)?;
    let wv = floats(ctx, wt)?;
    let ov = floats(ctx, offset)?;
    let mask = match ctx.opt_input(4)? {
        Some(m) if m.len() == n * og * kh * kw * oh * ow => Some(floats(ctx, m)?),
        Some(m) => return Err(ctx.err(format!("mask {:?} does not fit", m.shape))),
        None => None,
    };
    let bias = match ctx.opt_input(3)? {
        Some(b) => per_channel(ctx, b, oc, "B")?,
        None => vec![0.0; oc],
    };
    let (ocg, icpo) = (oc / group, ic / og);
    let sample = |b: usize, c: usize, y: f64, xq: f64| -> f64 {
        let (y0, x0) = (y.floor(), xq.floor());
        let (ly, lx) = (y - y0, xq - x0);
        let mut v = 0.0;
        for (dy, wy) in [(0i64, 1.0 - ly), (1, ly)] {
            for (dx, wx) in [(0i64, 1.0 - lx), (1, lx)] {
                let (yy, xx) = (y0 as i64 + dy, x0 as i64 + dx);
                if yy >= 0 && yy < ih as i64 && xx >= 0 && xx < iw as i64 {
                    v += wy * wx * xv[((b * ic + c) * ih + yy as usize) * iw + xx as usize];
                }
            }
        }
        v
    };
    let mut out = vec![0.0; n * oc * oh * ow];
    for b in 0..n {
        for o in 0..oc {
            let g = o / ocg;
            for i in 0..oh {
                for j in 0..ow {
                    let mut acc = bias[o];
                    for cg in 0..icg {
                        let c = g * icg + cg;
                        let gi = c / icpo;
                        for ki in 0..kh {
                            for kj in 0..kw {
                                let k = ki * kw + kj;
                                let off =
                                    |axis: usize| ov[(((b * og + gi) * kh * kw + k) * 2 + axis) * oh * ow + i * ow + j];
                                let y = (i as i64 * st[0] - pads[0] + ki as i64 * dil[0]) as f64 + off(0);
                                let xq = (j as i64 * st[1] - pads[1] + kj as i64 * dil[1]) as f64 + off(1);
                                let m = mask
                                    .as_ref()
                                    .map_or(1.0, |m| m[((b * og + gi) * kh * kw + k) * oh * ow + i * ow + j]);
                                acc += wv[((o * icg + cg) * kh + ki) * kw + kj] * sample(b, c, y, xq) * m;
                            }
                        }
                    }
                    out[((b * oc + o) * oh + i) * ow + j] = acc;
                }
            }
        }
    }
    one(from_f64s(ctx, x.elem(), vec![n, oc, oh, ow], &out)?)
}
