//! Pools: `MaxPool` (with its indices output), `AveragePool`, `LpPool`
//! (sliding windows, `ceil_mode` included), the global pools, `MaxRoiPool`,
//! `RoiAlign` and `MaxUnpool`.

use super::conv::transposed_size;
use super::{check_min_rank, check_rank, dtype_from, kernel_shape_attr, read_pads, read_window, settle};
use crate::ops::{OpTable, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add_all(ONNX, &["MaxPool", "AveragePool", "LpPool"], 1, pool);
    t.add_all(ONNX, &["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"], 1, global_pool);
    t.add(ONNX, "MaxRoiPool", 1, max_roi_pool);
    t.add(ONNX, "RoiAlign", 10, roi_align);
    t.add(ONNX, "MaxUnpool", 9, max_unpool);
}

/// A windowed pool: `[N, C, out…]`; `MaxPool`'s indices have the same shape, int64.
fn pool(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    ctx.set_dtype(1, ElemType::Int64);
    let x = ctx.need_dims(0)?;
    let stated = pool_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// The required `kernel_shape` over `n` spatial axes.
fn required_kernel(ctx: &mut OpCtx, n: usize) -> Option<Vec<DimTerm>> {
    match kernel_shape_attr(ctx, n)? {
        Some(k) => Some(k),
        None => {
            ctx.invalid("the required attribute kernel_shape is missing");
            None
        }
    }
}

/// States a windowed pool's output shapes.
fn pool_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if !check_min_rank(ctx, 0, x.len(), 2, "X") {
        return None;
    }
    let kernel = required_kernel(ctx, x.len() - 2)?;
    if let Some(order) = ctx.attr_int("storage_order") {
        if order != 0 && order != 1 {
            ctx.invalid(format!("attribute storage_order is {order}; it must be 0 or 1"));
            return None;
        }
    }
    let window = read_window(ctx, kernel, true)?;
    let mut dims = vec![x[0].clone(), x[1].clone()];
    for (i, input) in x[2..].iter().enumerate() {
        dims.push(window.out_dim(ctx, i, input));
    }
    ctx.set_dims(0, dims.clone());
    if ctx.has_output(1) {
        ctx.set_dims(1, dims);
    }
    Some(())
}

/// A global pool: `[N, C, 1…]`.
fn global_pool(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    if !check_min_rank(ctx, 0, x.len(), 2, "X") {
        return settle(ctx, false);
    }
    let mut dims = vec![x[0].clone(), x[1].clone()];
    for _ in 2..x.len() {
        dims.push(ctx.known(1));
    }
    ctx.set_dims(0, dims);
    Ok(())
}

/// The number of regions: axis 0 of input `i` (rank `want_rank`, `last`
/// coordinates per region) when its rank is known.
fn region_count(ctx: &mut OpCtx, i: usize, want_rank: usize, last: u64) -> Option<DimTerm> {
    match ctx.dims(i) {
        Some(d) if d.len() == want_rank => {
            if let Some(l) = d.last() {
                let why = format!("each region has {last} coordinates");
                let k = ctx.known(last);
                ctx.eq_dims(l.clone(), k, &format!("input {i}"), why);
            }
            Some(d[0].clone())
        }
        Some(d) => {
            ctx.rank_conflict(i, format!("input {i} (rois) has rank {}; it must have rank {want_rank}", d.len()));
            None
        }
        None => Some(ctx.unknown_dim()),
    }
}

/// `MaxRoiPool`: `[num_rois, C, pooled_h, pooled_w]`.
fn max_roi_pool(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = max_roi_pool_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `MaxRoiPool`'s output shape.
fn max_roi_pool_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if !check_rank(ctx, 0, x.len(), 4, "X") {
        return None;
    }
    let pooled = match ctx.attr_ints("pooled_shape") {
        Some(p) if p.len() == 2 && p.iter().all(|&v| v >= 1) => p,
        Some(p) => {
            ctx.invalid(format!("attribute pooled_shape is {p:?}; it must be two positive sizes"));
            return None;
        }
        None => {
            ctx.invalid("the required attribute pooled_shape is missing");
            return None;
        }
    };
    let rois = region_count(ctx, 1, 2, 5)?;
    let (h, w) = (ctx.known(pooled[0] as u64), ctx.known(pooled[1] as u64));
    ctx.set_dims(0, vec![rois, x[1].clone(), h, w]);
    Some(())
}

/// `RoiAlign`: `[num_rois, C, output_height, output_width]`.
fn roi_align(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = roi_align_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `RoiAlign`'s output shape.
fn roi_align_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if !check_rank(ctx, 0, x.len(), 4, "X") {
        return None;
    }
    let h = ctx.attr_int("output_height").unwrap_or(1);
    let w = ctx.attr_int("output_width").unwrap_or(1);
    if h < 1 || w < 1 {
        ctx.invalid(format!("output_height {h} and output_width {w} must be at least 1"));
        return None;
    }
    let rois = region_count(ctx, 1, 2, 4)?;
    if let Some(row) = ctx.in_row(2) {
        let why = "one batch index per region (axis 0 of rois)";
        ctx.eq_rows(row, RowTerm::closed(vec![rois.clone()]), "input 2", why);
    }
    let (h, w) = (ctx.known(h as u64), ctx.known(w as u64));
    ctx.set_dims(0, vec![rois, x[1].clone(), h, w]);
    Some(())
}

/// `MaxUnpool`: `output_shape` when given, else `(in − 1)·stride + k − pads`.
fn max_unpool(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = max_unpool_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `MaxUnpool`'s output shape.
fn max_unpool_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if !check_min_rank(ctx, 0, x.len(), 2, "X") {
        return None;
    }
    if let (Some(xr), Some(ir)) = (ctx.in_row(0), ctx.in_row(1)) {
        ctx.eq_rows(ir, xr, "input 1", "the indices have the input's shape");
    }
    let n = x.len() - 2;
    if ctx.has_input(2) {
        let dims = match ctx.elems(2) {
            Some(e) if e.len() == x.len() => e.iter().map(|e| ctx.dim_of_elem(e)).collect(),
            Some(e) => {
                ctx.invalid(format!("output_shape has {} values but the input has rank {}", e.len(), x.len()));
                return None;
            }
            None => (0..x.len()).map(|_| ctx.unknown_dim()).collect(),
        };
        ctx.set_dims(0, dims);
        return Some(());
    }
    let kernel = required_kernel(ctx, n)?;
    let strides = super::positive_ints(ctx, "strides", n, 1)?;
    let pads = read_pads(ctx, n)?;
    let mut dims = vec![x[0].clone(), x[1].clone()];
    for i in 0..n {
        let extra = -(pads[i] + pads[i + n]);
        dims.push(transposed_size(ctx, &x[2 + i], Some(&kernel[i]), strides[i], 1, extra));
    }
    ctx.set_dims(0, dims);
    Some(())
}
