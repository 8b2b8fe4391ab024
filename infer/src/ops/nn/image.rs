//! Sampling and image operators: `GridSample`, `AffineGrid`, `Col2Im`,
//! `ImageDecoder` and `NonMaxSuppression` (whose row count depends on the
//! data, so stays unknown).

use super::{check_min_rank, divided_dim, dtype_from, settle};
use crate::graph::OpCtx;
use crate::ops::{Defer, OpTable, ONNX};
use diamond_ir::term::DimTerm;
use diamond_ir::ElemType;

pub(super) fn register(t: &mut OpTable) {
    t.add(ONNX, "GridSample", 16, grid_sample);
    t.add(ONNX, "AffineGrid", 20, affine_grid);
    t.add(ONNX, "Col2Im", 18, col2im);
    t.add(ONNX, "ImageDecoder", 20, image_decoder);
    t.add(ONNX, "NonMaxSuppression", 10, non_max_suppression);
}

/// `GridSample`: `[N, C, grid's spatial axes…]`.
fn grid_sample(ctx: &mut OpCtx) -> Result<(), Defer> {
    let x = ctx.need_dims(0)?;
    dtype_from(ctx, 0, 0);
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
            ctx.eq_dims(g[0].clone(), x[0].clone(), "input 1", "the grid's batch axis is the input's");
            let k = ctx.known(r as u64);
            ctx.eq_dims(g[r + 1].clone(), k, "input 1", "the grid's last axis holds one coordinate per spatial axis");
            dims.extend(g[1..=r].iter().cloned());
        }
        Some(g) => {
            ctx.invalid(format!("the grid has rank {} but the input has rank {}; they must match", g.len(), x.len()));
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
            ctx.invalid(format!("size has rank {}; it must be a vector", size_dims.len()));
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
    let x = ctx.need_dims(0)?;
    dtype_from(ctx, 0, 0);
    let stated = col2im_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// States `Col2Im`'s output shape.
fn col2im_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if x.len() != 3 {
        ctx.invalid(format!("the input has rank {}; it must be [N, C·∏block_shape, L]", x.len()));
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

/// `ImageDecoder`: `[H, W, C]` uint8, C from `pixel_format`; the image's
/// size is in the encoded data.
fn image_decoder(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.set_dtype(0, ElemType::Uint8);
    let channels = match ctx.attr_str("pixel_format").as_deref() {
        None | Some("RGB") | Some("BGR") => 3,
        Some("Grayscale") => 1,
        Some(other) => {
            ctx.invalid(format!("attribute pixel_format is '{other}'; expected RGB, BGR or Grayscale"));
            return settle(ctx, false);
        }
    };
    let (h, w) = (ctx.unknown_dim(), ctx.unknown_dim());
    let c = ctx.known(channels);
    ctx.set_dims(0, vec![h, w, c]);
    Ok(())
}

/// `NonMaxSuppression`: `[num_selected, 3]` int64; the count depends on the data.
fn non_max_suppression(ctx: &mut OpCtx) -> Result<(), Defer> {
    ctx.set_dtype(0, ElemType::Int64);
    if let Some(t) = ctx.same_dtype(&[0, 1]) {
        if !matches!(t, ElemType::Float | ElemType::Float16 | ElemType::Double | ElemType::Bfloat16) {
            ctx.dtype_mismatch(format!("boxes and scores are {t}; they must be floating point"));
        }
    }
    let n = ctx.unknown_dim();
    let three = ctx.known(3);
    ctx.set_dims(0, vec![n, three]);
    Ok(())
}
