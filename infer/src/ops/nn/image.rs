//! Sampling and image operators: `GridSample`, `AffineGrid`, `Col2Im` and
//! `NonMaxSuppression` (whose row count depends on the data: computed when
//! every input is known). `ImageDecoder` lives in `ops/misc/image.rs`.

use super::{check_min_rank, divided_dim, dtype_from, settle};
use crate::ops::{OpTable, ONNX};
use crate::rule::{ConstValue, Elem};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;
use std::cmp::Ordering;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "GridSample", 16, grid_sample);
    t.add(ONNX, "AffineGrid", 20, affine_grid);
    t.add(ONNX, "Col2Im", 18, col2im);
    t.add(ONNX, "NonMaxSuppression", 10, non_max_suppression);
}

/// `GridSample`: `[N, C, grid's spatial axes…]`.
fn grid_sample(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = grid_sample_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `GridSample`'s output shape.
fn grid_sample_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if !check_min_rank(ctx, 0, x.len(), 3, "X") {
        return None;
    }
    let r = x.len() - 2;
    let mut dims = vec![x[0].clone(), x[1].clone()];
    match ctx.dims(1) {
        Some(g) if g.len() == x.len() => {
            ctx.eq_dims_at(g[0].clone(), x[0].clone(), "input 1", 0, "the grid's batch axis is the input's");
            let k = ctx.known(r as u64);
            ctx.eq_dims_at(
                g[r + 1].clone(),
                k,
                "input 1",
                r + 1,
                "the grid's last axis holds one coordinate per spatial axis",
            );
            dims.extend(g[1..=r].iter().cloned());
        }
        Some(g) => {
            ctx.rank_conflict(
                1,
                format!("the grid has rank {} but the input has rank {}; they must match", g.len(), x.len()),
            );
            return None;
        }
        None => dims.extend((0..r).map(|_| ctx.unknown_dim())),
    }
    ctx.set_dims(0, dims);
    Some(())
}

/// `AffineGrid`: `[N, H, W, 2]` or `[N, D, H, W, 3]` from `size`.
fn affine_grid(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let stated = affine_grid_shape(ctx)?.is_some();
    settle(ctx, stated)
}

/// States `AffineGrid`'s output shape; defers until the length of `size` is known.
fn affine_grid_shape(ctx: &mut OpCtx) -> Result<Option<()>, Defer> {
    let size_dims = ctx.need_dims(1)?;
    let len = match size_dims.as_slice() {
        [d] => ctx.size_of(d),
        _ => {
            ctx.rank_conflict(1, format!("size has rank {}; it must be a vector", size_dims.len()));
            return Ok(None);
        }
    };
    let Some(len) = len else { return Ok(None) };
    if len != 4 && len != 5 {
        ctx.invalid(format!("size has {len} values; it must hold 4 (2-D) or 5 (3-D)"));
        return Ok(None);
    }
    let spatial = (len - 2) as usize;
    let mut dims = match ctx.elems(1) {
        Some(e) => {
            let mut d = vec![ctx.dim_of_elem(&e[0])];
            d.extend(e[2..].iter().map(|v| ctx.dim_of_elem(v)));
            d
        }
        None => (0..=spatial).map(|_| ctx.unknown_dim()).collect(),
    };
    if let Some(theta) = ctx.dims(0) {
        if let [n, rows, cols] = theta.as_slice() {
            ctx.eq_dims(n.clone(), dims[0].clone(), "input 0", "theta has one matrix per batch item (size[0])");
            let (r, c) = (ctx.known(spatial as u64), ctx.known(spatial as u64 + 1));
            ctx.eq_dims(rows.clone(), r, "input 0", "theta's matrices have one row per spatial axis");
            ctx.eq_dims(cols.clone(), c, "input 0", "theta's matrices have one column per spatial axis, plus one");
        }
    }
    dims.push(ctx.known(spatial as u64));
    ctx.set_dims(0, dims);
    Ok(Some(()))
}

/// `Col2Im`: `[N, C, image_shape…]` with `C = input₁ / ∏ block_shape`.
fn col2im(ctx: &mut OpCtx) -> Result<(), Defer> {
    dtype_from(ctx, 0, 0);
    let x = ctx.need_dims(0)?;
    let stated = col2im_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `Col2Im`'s output shape.
fn col2im_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if x.len() != 3 {
        ctx.rank_conflict(0, format!("the input has rank {}; it must be [N, C·∏block_shape, L]", x.len()));
        return None;
    }
    let image = ctx.elems(1);
    let block = ctx.ints(2);
    let spatial = match (&image, &block) {
        (Some(i), _) => i.len(),
        (None, Some(b)) => b.len(),
        (None, None) => match ctx.dims(1).as_deref() {
            Some([d]) => ctx.size_of(d)? as usize,
            _ => return None,
        },
    };
    if let (Some(i), Some(b)) = (&image, &block) {
        if i.len() != b.len() {
            ctx.invalid(format!("image_shape has {} values but block_shape has {}", i.len(), b.len()));
            return None;
        }
    }
    let channels = match &block {
        Some(b) if b.iter().any(|&v| v < 1) => {
            ctx.invalid(format!("block_shape {b:?} must hold positive sizes"));
            return None;
        }
        Some(b) => match b.iter().try_fold(1i64, |acc, &v| acc.checked_mul(v)) {
            Some(p) => divided_dim(ctx, &x[1], p),
            None => ctx.unknown_dim(),
        },
        None => ctx.unknown_dim(),
    };
    let mut dims = vec![x[0].clone(), channels];
    match &image {
        Some(i) => dims.extend(i.iter().map(|e| ctx.dim_of_elem(e))),
        None => dims.extend((0..spatial).map(|_| ctx.unknown_dim())),
    }
    ctx.set_dims(0, dims);
    Some(())
}

/// `NonMaxSuppression`: `[num_selected, 3]` int64. The count depends on the
/// data: it is computed (and the selected indices with it) when every input
/// is known, following the reference in `f32`; otherwise it is unknown.
fn non_max_suppression(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.same_dtype(&[0, 1]);
    match selected_boxes(ctx) {
        Some(selected) if selected.len() <= MAX_SELECTED => {
            let elems = selected.iter().flatten().map(|&v| Elem::Int(v)).collect();
            ctx.set_value(0, ConstValue::ints(ElemType::Int64, vec![selected.len(), 3], elems));
        }
        _ => {
            ctx.set_dtype(0, ElemType::Int64);
            let n = ctx.unknown_dim();
            let three = ctx.known(3);
            ctx.set_dims(0, vec![n, three]);
        }
    }
    Ok(())
}

/// The most selected boxes whose indices are kept as a value.
const MAX_SELECTED: usize = 1 << 18;

/// The most box comparisons spent evaluating a `NonMaxSuppression`.
const MAX_NMS_WORK: u64 = 1 << 24;

/// The first element of optional input `i` as `f32`, if given and non-empty.
fn first_float(ctx: &mut OpCtx, i: usize) -> Option<Option<f32>> {
    if !ctx.has_input(i) {
        return Some(None);
    }
    Some(ctx.floats(i)?.first().map(|&v| v as f32))
}

/// The `[batch, class, box]` triples `NonMaxSuppression` selects, when every input is known.
fn selected_boxes(ctx: &mut OpCtx) -> Option<Vec<[i64; 3]>> {
    let max_out = if ctx.has_input(2) { ctx.ints(2)?.first().copied().unwrap_or(0).max(0) } else { 0 };
    if max_out == 0 {
        return Some(Vec::new());
    }
    let (bd, sd) = (ctx.dims(0)?, ctx.dims(1)?);
    let sizes = |ctx: &mut OpCtx, d: &[DimTerm]| d.iter().map(|x| ctx.size_of(x)).collect::<Option<Vec<u64>>>();
    let (bs, ss) = (sizes(ctx, &bd)?, sizes(ctx, &sd)?);
    let (&[batches, boxes, 4], &[sb, classes, sboxes]) = (bs.as_slice(), ss.as_slice()) else { return None };
    if sb != batches || sboxes != boxes {
        return None;
    }
    let keep = (max_out as u64).min(boxes);
    let work = batches.checked_mul(classes)?.checked_mul(boxes)?.checked_mul(keep.max(1))?;
    if work > MAX_NMS_WORK {
        return None;
    }
    let coords: Vec<f32> = ctx.floats(0)?.iter().map(|&v| v as f32).collect();
    let scores: Vec<f32> = ctx.floats(1)?.iter().map(|&v| v as f32).collect();
    if scores.iter().chain(&coords).any(|s| s.is_nan()) {
        return None;
    }
    let iou = first_float(ctx, 3)?.unwrap_or(0.0);
    let score_min = first_float(ctx, 4)?;
    let center = ctx.attr_int("center_point_box").unwrap_or(0) != 0;
    let (boxes, classes) = (boxes as usize, classes as usize);
    let mut selected = Vec::new();
    for b in 0..batches as usize {
        let batch_boxes = coords.get(b * boxes * 4..(b + 1) * boxes * 4)?;
        for c in 0..classes {
            let class_scores = scores.get((b * classes + c) * boxes..(b * classes + c + 1) * boxes)?;
            let mut candidates: Vec<(f32, usize)> = (0..boxes)
                .filter(|&i| score_min.is_none_or(|m| class_scores[i] > m))
                .map(|i| (class_scores[i], i))
                .collect();
            // Highest score first; among equal scores the lower index first.
            candidates.sort_by(|x, y| y.0.partial_cmp(&x.0).unwrap_or(Ordering::Equal).then(x.1.cmp(&y.1)));
            let mut kept: Vec<usize> = Vec::new();
            for (_, i) in candidates {
                if kept.len() as i64 >= max_out {
                    break;
                }
                if kept
                    .iter()
                    .all(|&k| !suppresses(&batch_boxes[i * 4..i * 4 + 4], &batch_boxes[k * 4..k * 4 + 4], center, iou))
                {
                    kept.push(i);
                    selected.push([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Some(selected)
}

/// A box's `(x_min, x_max, y_min, y_max)`: corners `[y1, x1, y2, x2]`, or `[x, y, w, h]` centred.
fn extent(b: &[f32], center: bool) -> (f32, f32, f32, f32) {
    if center {
        let (w, h) = (b[2] / 2.0, b[3] / 2.0);
        (b[0] - w, b[0] + w, b[1] - h, b[1] + h)
    } else {
        (b[1].min(b[3]), b[1].max(b[3]), b[0].min(b[2]), b[0].max(b[2]))
    }
}

/// Whether box `a` overlaps box `b` by more than `threshold` (intersection over union).
fn suppresses(a: &[f32], b: &[f32], center: bool, threshold: f32) -> bool {
    let (ax0, ax1, ay0, ay1) = extent(a, center);
    let (bx0, bx1, by0, by1) = extent(b, center);
    let (ix0, ix1) = (ax0.max(bx0), ax1.min(bx1));
    if ix1 <= ix0 {
        return false;
    }
    let (iy0, iy1) = (ay0.max(by0), ay1.min(by1));
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let (area_a, area_b) = ((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0));
    let union = area_a + area_b - inter;
    if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}
