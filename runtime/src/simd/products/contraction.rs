//! Contractions on the fast kernels: MatMul through [`super::gemm::batched_matmul`],
//! Gemm through [`super::gemm::sgemm`] (its `alpha`, `beta · C` and
//! transposes as the kernel's epilogue and operand views) and 2-D Conv
//! through [`super::conv::conv2d`] (its bias as the per-channel epilogue),
//! all on `f32` (a 1-D Conv as a 2-D one over one row). The elementwise
//! program fused after the node, when it reads the result point for point,
//! runs as the kernels' [`Post`](crate::simd::epilogue::Post) over each finished tile (see
//! [`super::fused_post`]); otherwise as its own step. Anything else —
//! other element types, 3-D convolutions, `auto_pad`, a C that does not broadcast one way — runs on
//! the reference kernels, as before.

use super::conv::{conv2d_keeping, Conv2d, Prepared};
use super::epilogue::{Bias, Epilogue};
use super::gemm::{batched_matmul_keeping, sgemm_panelled, MatRef};
use super::panels::{self, Panels};
use crate::kernel::ContractionOp;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};

/// The `f32` slice of a tensor.
pub(in crate::simd) fn floats(t: &Tensor) -> Option<&[f32]> {
    match &t.data {
        Data::F32(v) => Some(v),
        _ => None,
    }
}

pub(in crate::simd) fn int_attr(node: &Node, name: &str, default: i64) -> Option<i64> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Some(default),
        Some(AttrValue::Int(v)) => Some(v),
        _ => None,
    }
}

pub(in crate::simd) fn float_attr(node: &Node, name: &str, default: f32) -> Option<f32> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Some(default),
        Some(AttrValue::Float(v)) => Some(v),
        _ => None,
    }
}

fn ints_attr(node: &Node, name: &str) -> Option<Option<Vec<i64>>> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Some(None),
        Some(AttrValue::Ints(v)) => Some(Some(v.to_vec())),
        _ => None,
    }
}

/// Computes `node` (a contraction `op`) on `inputs` (the node's operands,
/// `None` where omitted) into a tensor whose data comes from `take` (a
/// buffer with room for the given number of floats: a reused allocation,
/// its old values kept), or `None` when the fast kernels do not cover it.
/// `kept`: where a convolution with a constant weight keeps what it derives
/// from the weight between calls ([`conv2d_keeping`]). `ep`: what follows
/// the product (activations, residual, a [`Post`](super::epilogue::Post)
/// over each finished tile); the node's own scale and bias are added to it.
pub(crate) fn compute(
    op: ContractionOp,
    node: &Node,
    inputs: &[Option<&Tensor>],
    take: Take<'_>,
    kept: Option<&mut Option<Prepared>>,
    ep: Epilogue,
) -> Option<Tensor> {
    match op {
        ContractionOp::MatMul => matmul(inputs, take, kept, ep),
        ContractionOp::Gemm => gemm(node, inputs, take, kept, ep),
        ContractionOp::Conv => conv(node, inputs, take, kept, ep),
    }
}

/// Where a result's buffer comes from.
pub(crate) type Take<'a> = &'a mut dyn FnMut(usize) -> Vec<f32>;

/// A buffer from `take` holding `len` zeros.
pub(in crate::simd) fn sized(take: Take<'_>, len: usize) -> Vec<f32> {
    let mut buffer = take(len);
    buffer.clear();
    buffer.resize(len, 0.0);
    buffer
}

/// A buffer from `take` of `len` floats for a kernel that writes every one
/// of them before anything reads it: a recycled buffer keeps its old values
/// where [`sized`] would write zeros (only what lies past its old length is
/// zeroed), which saved SqueezeNet's convolutions a pass over each output.
/// In builds with debug assertions (the tests) the floats are NaN instead,
/// so that an element a kernel leaves unwritten shows in its results.
pub(in crate::simd) fn overwritten(take: Take<'_>, len: usize) -> Vec<f32> {
    let mut buffer = take(len);
    if cfg!(debug_assertions) {
        buffer.clear();
        buffer.resize(len, f32::NAN);
    } else if buffer.len() >= len {
        buffer.truncate(len);
    } else {
        buffer.resize(len, 0.0);
    }
    buffer
}

fn matmul(
    inputs: &[Option<&Tensor>],
    take: Take<'_>,
    kept: Option<&mut Option<Prepared>>,
    ep: Epilogue,
) -> Option<Tensor> {
    let (a, b) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let (ad, bd) = (floats(a)?, floats(b)?);
    let shape = matmul_shape(&a.shape, &b.shape)?;
    let mut out = overwritten(take, shape.iter().product());
    with_panels(kept, |panels| batched_matmul_keeping(ad, &a.shape, bd, &b.shape, &mut out, &ep, panels));
    Tensor::new(shape, Data::F32(out))
}

/// Calls `f` with the column panels a constant B keeps in `kept` (none yet
/// on the first call; `None` for a B that is not constant), and keeps what
/// it leaves there.
fn with_panels<R>(kept: Option<&mut Option<Prepared>>, f: impl FnOnce(Option<&mut Option<Panels>>) -> R) -> R {
    match kept {
        None => f(None),
        Some(slot) => {
            let mut panels = match slot.take() {
                Some(Prepared::Panels(p)) => Some(p),
                _ => None,
            };
            let result = f(Some(&mut panels));
            *slot = panels.map(Prepared::Panels);
            result
        }
    }
}

/// NumPy `matmul`'s result shape (`None` when the operands do not multiply).
fn matmul_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (a2, b2) =
        (if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() }, if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() });
    let (m, k, k2, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return None;
    }
    let (ba, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let rank = ba.len().max(bb.len());
    let mut shape = Vec::with_capacity(rank + 2);
    for i in 0..rank {
        let x = if i + ba.len() >= rank { ba[i + ba.len() - rank] } else { 1 };
        let y = if i + bb.len() >= rank { bb[i + bb.len() - rank] } else { 1 };
        shape.push(match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    if a.len() > 1 {
        shape.push(m);
    }
    if b.len() > 1 {
        shape.push(n);
    }
    Some(shape)
}

fn gemm(
    node: &Node,
    inputs: &[Option<&Tensor>],
    take: Take<'_>,
    kept: Option<&mut Option<Prepared>>,
    ep: Epilogue,
) -> Option<Tensor> {
    let (a, b) = (inputs.first().copied()??, inputs.get(1).copied()??);
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return None;
    }
    let (trans_a, trans_b) = (int_attr(node, "transA", 0)? != 0, int_attr(node, "transB", 0)? != 0);
    let (alpha, beta) = (float_attr(node, "alpha", 1.0)?, float_attr(node, "beta", 1.0)?);
    let mut am = MatRef::row_major(floats(a)?, a.shape[0], a.shape[1]);
    let mut bm = MatRef::row_major(floats(b)?, b.shape[0], b.shape[1]);
    if trans_a {
        am = am.t();
    }
    if trans_b {
        bm = bm.t();
    }
    let (m, k, k2, n) = (am.rows, am.cols, bm.rows, bm.cols);
    if k != k2 {
        return None;
    }
    let c = inputs.get(2).copied().flatten();
    let bias = match c {
        None => Bias::None,
        Some(c) => {
            let cd = floats(c)?;
            match c.shape.as_slice() {
                [] | [1] | [1, 1] => Bias::Scalar(cd[0]),
                [x] | [1, x] if *x == n => Bias::PerCol(cd),
                [x, 1] if *x == m => Bias::PerRow(cd),
                [x, y] if *x == m && *y == n => Bias::Full(cd),
                _ => return None,
            }
        }
    };
    let mut out = overwritten(take, m * n);
    let ep = Epilogue { alpha, bias, beta, ..ep };
    with_panels(kept, |slot| {
        let panels = slot.and_then(|slot| panels::kept(slot, m, bm));
        sgemm_panelled(am, bm, panels, &mut out, &ep)
    });
    Tensor::new(vec![m, n], Data::F32(out))
}

/// The 2-D geometry of convolution `node` over an input and a weight of
/// these shapes (a 1-D one as a 2-D one over a single row: the `bool`),
/// or `None` for other ranks, `auto_pad`, inconsistent groups or a
/// kernel that does not fit.
pub(in crate::simd) fn conv_geometry(node: &Node, x_shape: &[usize], w_shape: &[usize]) -> Option<(Conv2d, bool)> {
    // A 1-D convolution is a 2-D one over a single row.
    let one_d = x_shape.len() == 3 && w_shape.len() == 3;
    let (xs, ws) = if one_d {
        ([x_shape[0], x_shape[1], 1, x_shape[2]], [w_shape[0], w_shape[1], 1, w_shape[2]])
    } else if x_shape.len() == 4 && w_shape.len() == 4 {
        ([x_shape[0], x_shape[1], x_shape[2], x_shape[3]], [w_shape[0], w_shape[1], w_shape[2], w_shape[3]])
    } else {
        return None;
    };
    let auto_pad = match node.attribute("auto_pad").and_then(|a| a.value()) {
        None => true,
        Some(AttrValue::String(s)) => s.as_ref() == b"NOTSET",
        _ => false,
    };
    if !auto_pad {
        return None;
    }
    let group = usize::try_from(int_attr(node, "group", 1)?).ok()?;
    let pair = |name: &str| -> Option<[usize; 2]> {
        match ints_attr(node, name)? {
            None => Some([1, 1]),
            Some(v) if v.iter().any(|&x| x < 1) => None,
            Some(v) if one_d && v.len() == 1 => Some([1, v[0] as usize]),
            Some(v) if !one_d && v.len() == 2 => Some([v[0] as usize, v[1] as usize]),
            _ => None,
        }
    };
    let (stride, dilation) = (pair("strides")?, pair("dilations")?);
    let pads = match ints_attr(node, "pads")? {
        None => [0; 4],
        Some(v) if v.iter().any(|&x| x < 0) => return None,
        // ONNX: [begin..., end...]; 2-D [top, left, bottom, right].
        Some(v) if one_d && v.len() == 2 => [0, v[0] as usize, 0, v[1] as usize],
        Some(v) if !one_d && v.len() == 4 => [v[0] as usize, v[1] as usize, v[2] as usize, v[3] as usize],
        _ => return None,
    };
    let p = Conv2d {
        n: xs[0],
        c_in: xs[1],
        h: xs[2],
        w: xs[3],
        c_out: ws[0],
        kh: ws[2],
        kw: ws[3],
        stride,
        dilation,
        pads,
        group,
    };
    if group == 0 || p.c_in % group != 0 || p.c_out % group != 0 || ws[1] * group != p.c_in {
        return None;
    }
    p.output_hw()?;
    Some((p, one_d))
}

fn conv(
    node: &Node,
    inputs: &[Option<&Tensor>],
    take: Take<'_>,
    kept: Option<&mut Option<Prepared>>,
    ep: Epilogue,
) -> Option<Tensor> {
    let (x, w) = (inputs.first().copied()??, inputs.get(1).copied()??);
    let (p, one_d) = conv_geometry(node, &x.shape, &w.shape)?;
    let (oh, ow) = p.output_hw()?;
    let bias = match inputs.get(2).copied().flatten() {
        None => Bias::None,
        Some(b) if b.shape == [p.c_out] => Bias::PerRow(floats(b)?),
        Some(_) => return None,
    };
    let mut out = overwritten(take, p.output_len()?);
    conv2d_keeping(floats(x)?, floats(w)?, &p, &mut out, &Epilogue { bias, ..ep }, kept);
    let shape = if one_d { vec![p.n, p.c_out, ow] } else { vec![p.n, p.c_out, oh, ow] };
    Tensor::new(shape, Data::F32(out))
}
