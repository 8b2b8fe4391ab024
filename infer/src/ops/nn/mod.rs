//! Operator rules: neural-network, image and signal operators — convolutions
//! and pools (sliding windows as `Affine` constraints), resizing and
//! sampling, recurrent layers, attention, and the signal operators (DFT,
//! STFT, windows). This module holds the helpers they share: size terms as
//! expressions, sliding-window attributes, and output element types.

use super::common::dtype_from;
pub(crate) use super::common::{expr_dim, scaled_dim, size_expr};
use super::OpTable;
use crate::constraint::{AffineSize, Constraint};
use crate::rule::{Defer, Elem, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

mod attention;
mod conv;
mod flex;
mod image;
mod pool;
mod resize;
mod rnn;
mod signal;

pub(crate) fn register(t: &mut OpTable) {
    conv::register(t);
    pool::register(t);
    resize::register(t);
    image::register(t);
    rnn::register(t);
    attention::register(t);
    flex::register(t);
    signal::register(t);
}

/// The dimension of size `n`, or an unknown one for a negative `n`.
fn int_dim(ctx: &mut OpCtx, n: i64) -> DimTerm {
    match u64::try_from(n) {
        Ok(n) => ctx.known(n),
        Err(_) => ctx.unknown_dim(),
    }
}

/// `a / k` for a constant `k` when it divides exactly (an unknown otherwise).
fn divided_dim(ctx: &mut OpCtx, a: &DimTerm, k: i64) -> DimTerm {
    super::common::divided_dim(ctx, a, k).unwrap_or_else(|| ctx.unknown_dim())
}

/// The element type an `output_datatype`/`dtype` attribute names, or `default`.
fn attr_dtype(ctx: &mut OpCtx, name: &str, default: ElemType) -> Option<ElemType> {
    match ctx.attr_int(name) {
        None => Some(default),
        Some(code) => match i32::try_from(code).map(ElemType::from_code) {
            Ok(ElemType::Unknown(_) | ElemType::Undefined) | Err(_) => {
                ctx.invalid(format!("attribute {name} = {code} names no element type"));
                None
            }
            Ok(t) => Some(t),
        },
    }
}

/// The value of an optional scalar integer input (one element), if given and known.
fn scalar_int(ctx: &mut OpCtx, i: usize) -> Option<i64> {
    if !ctx.has_input(i) {
        return None;
    }
    match ctx.ints(i)?.as_slice() {
        [n] => Some(*n),
        _ => None,
    }
}

/// The value of an optional scalar integer input as a size term.
fn scalar_elem(ctx: &mut OpCtx, i: usize) -> Option<Elem> {
    if !ctx.has_input(i) {
        return None;
    }
    match ctx.elems(i)?.as_slice() {
        [e] => Some(e.clone()),
        _ => None,
    }
}

/// How a sliding window pads its input (`auto_pad`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// Output size `⌈in / stride⌉`, the extra padding at the end.
    SameUpper,
    /// Output size `⌈in / stride⌉`, the extra padding at the start.
    SameLower,
    /// No padding.
    Valid,
}

/// The attributes of a sliding window over `n` spatial axes.
#[derive(Clone, Debug)]
struct Window {
    /// Kernel size per spatial axis.
    kernel: Vec<DimTerm>,
    /// Strides, at least 1.
    strides: Vec<u64>,
    /// Dilations, at least 1.
    dilations: Vec<u64>,
    /// `[begin…, end…]`, `2n` of them.
    pads: Vec<i64>,
    /// The padding policy.
    auto_pad: AutoPad,
    /// Whether output sizes round up (pools' `ceil_mode`).
    ceil: bool,
}

/// Reads a per-axis attribute of `n` positive integers (default all `default`).
fn positive_ints(ctx: &mut OpCtx, name: &str, n: usize, default: u64) -> Option<Vec<u64>> {
    let Some(v) = ctx.attr_ints(name) else { return Some(vec![default; n]) };
    if v.len() != n {
        ctx.invalid(format!("attribute {name} has {} values but the input has {n} spatial axes", v.len()));
        return None;
    }
    if let Some(bad) = v.iter().find(|&&x| x < 1) {
        ctx.invalid(format!("attribute {name} holds {bad}; every value must be at least 1"));
        return None;
    }
    Some(v.into_iter().map(|x| x as u64).collect())
}

/// Reads the `auto_pad` attribute.
fn read_auto_pad(ctx: &mut OpCtx) -> Option<AutoPad> {
    match ctx.attr_str("auto_pad").as_deref() {
        None | Some("NOTSET") | Some("") => Some(AutoPad::NotSet),
        Some("SAME_UPPER") => Some(AutoPad::SameUpper),
        Some("SAME_LOWER") => Some(AutoPad::SameLower),
        Some("VALID") => Some(AutoPad::Valid),
        Some(other) => {
            ctx.invalid(format!("attribute auto_pad is '{other}'; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
            None
        }
    }
}

/// Reads `pads` (`2n` non-negative values, default zeros).
fn read_pads(ctx: &mut OpCtx, n: usize) -> Option<Vec<i64>> {
    let Some(p) = ctx.attr_ints("pads") else { return Some(vec![0; 2 * n]) };
    if p.len() != 2 * n {
        ctx.invalid(format!("attribute pads has {} values; {n} spatial axes need {}", p.len(), 2 * n));
        return None;
    }
    if let Some(bad) = p.iter().find(|&&x| x < 0) {
        ctx.invalid(format!("attribute pads holds {bad}; pads must not be negative"));
        return None;
    }
    Some(p)
}

/// Reads the window attributes (`strides`, `dilations`, `pads`, `auto_pad`,
/// and `ceil_mode` when `with_ceil`) for `kernel`; reports and gives `None`
/// when one is invalid.
fn read_window(ctx: &mut OpCtx, kernel: Vec<DimTerm>, with_ceil: bool) -> Option<Window> {
    let n = kernel.len();
    let strides = positive_ints(ctx, "strides", n, 1)?;
    let dilations = positive_ints(ctx, "dilations", n, 1)?;
    let pads = read_pads(ctx, n)?;
    let auto_pad = read_auto_pad(ctx)?;
    let ceil = with_ceil && ctx.attr_int("ceil_mode").unwrap_or(0) != 0;
    Some(Window { kernel, strides, dilations, pads, auto_pad, ceil })
}

/// Reads `kernel_shape` as `n` known sizes, when present.
fn kernel_shape_attr(ctx: &mut OpCtx, n: usize) -> Option<Option<Vec<DimTerm>>> {
    let Some(k) = ctx.attr_ints("kernel_shape") else { return Some(None) };
    if k.len() != n {
        ctx.invalid(format!("attribute kernel_shape has {} values but the input has {n} spatial axes", k.len()));
        return None;
    }
    if let Some(bad) = k.iter().find(|&&x| x < 1) {
        ctx.invalid(format!("attribute kernel_shape holds {bad}; every value must be at least 1"));
        return None;
    }
    Some(Some(k.iter().map(|&x| ctx.known(x as u64)).collect()))
}

impl Window {
    /// The output size on spatial axis `i` for an input of size `input`.
    fn out_dim(&self, ctx: &mut OpCtx, i: usize, input: &DimTerm) -> DimTerm {
        let n = self.kernel.len();
        let (stride, dilation) = (self.strides[i], self.dilations[i]);
        let (kernel, pads, ceil) = match self.auto_pad {
            // ⌈in / stride⌉ = ⌊(in − 1) / stride⌋ + 1: a window of one element.
            AutoPad::SameUpper | AutoPad::SameLower => {
                let one = ctx.known(1);
                return affine(ctx, i, input, one, 0, stride, 1, false);
            }
            AutoPad::Valid => (self.kernel[i].clone(), 0, self.ceil),
            AutoPad::NotSet => (self.kernel[i].clone(), self.pads[i] + self.pads[i + n], self.ceil),
        };
        if !ceil {
            return affine(ctx, i, input, kernel, pads, stride, dilation, false);
        }
        // In ceil mode the last window must start inside the input or its
        // leading padding; it can fail to only when stride + end padding
        // exceeds the dilated kernel.
        let pad_begin = if self.auto_pad == AutoPad::NotSet { self.pads[i] } else { 0 };
        let pad_end = pads - pad_begin;
        let Some(k) = ctx.size_of(&kernel) else { return ctx.unknown_dim() };
        let span = dilation.saturating_mul(k.saturating_sub(1)).saturating_add(1);
        if (stride as i128) + (pad_end as i128) <= span as i128 {
            return affine(ctx, i, input, kernel, pads, stride, dilation, true);
        }
        match ctx.size_of(input) {
            Some(len) => match ceil_window_count(len, span, pad_begin, pads, stride) {
                Some(out) => ctx.known(out),
                None => ctx.unknown_dim(),
            },
            None => ctx.unknown_dim(),
        }
    }
}

/// The number of ceil-mode windows over `len` elements (`None` when none fits).
fn ceil_window_count(len: u64, span: u64, pad_begin: i64, pads: i64, stride: u64) -> Option<u64> {
    let (len, span, stride) = (len as i128, span as i128, stride as i128);
    let room = len + pads as i128 - span;
    if room < 0 {
        return None;
    }
    let mut out = (room + stride - 1) / stride + 1;
    if (out - 1) * stride >= len + pad_begin as i128 {
        out -= 1;
    }
    u64::try_from(out).ok()
}

/// A fresh output size tied to `input` by the sliding-window constraint.
#[allow(clippy::too_many_arguments)]
fn affine(
    ctx: &mut OpCtx,
    axis: usize,
    input: &DimTerm,
    kernel: DimTerm,
    pads: i64,
    stride: u64,
    dilation: u64,
    ceil: bool,
) -> DimTerm {
    let out = ctx.fresh_dim();
    let cause = ctx.cause("input 0", format!("spatial axis {axis} of the output is the sliding window's count"));
    ctx.constrain(Constraint::Affine(Box::new(AffineSize {
        out: out.clone(),
        input: input.clone(),
        kernel,
        pads,
        stride,
        dilation,
        ceil,
        cause,
    })));
    out
}

/// Checks that input `i` has rank at least `min`; reports otherwise.
fn check_min_rank(ctx: &mut OpCtx, i: usize, rank: usize, min: usize, what: &str) -> bool {
    if rank < min {
        ctx.rank_conflict(i, format!("input {i} ({what}) has rank {rank}; it needs at least {min}"));
        return false;
    }
    true
}

/// Checks that input `i` has exactly rank `want`; reports otherwise.
fn check_rank(ctx: &mut OpCtx, i: usize, rank: usize, want: usize, what: &str) -> bool {
    if rank != want {
        ctx.rank_conflict(i, format!("input {i} ({what}) has rank {rank}; it must have rank {want}"));
        return false;
    }
    true
}

/// Ends a rule: when its shapes could not be stated (`stated` false), every
/// output becomes unknown, keeping the element type already set. A rule
/// states all its output shapes or none.
fn settle(ctx: &mut OpCtx, stated: bool) -> Result<(), Defer> {
    if !stated {
        for j in 0..ctx.output_count() {
            ctx.set_unknown(j);
        }
    }
    Ok(())
}
