//! What a contraction node is as a batched matrix product: its attributes
//! and operand ranks read once from the node and the shape analysis
//! ([`Geometry`]), the size arguments its kernel takes ([`size_names`]),
//! and their values for given operand shapes ([`size_values`]), which is
//! what a launcher computes from the fed shapes.
//!
//! Every contraction is `out[g, m, n] = Σ_k A(g, m, k) · B(g, k, n)` over
//! a batch `g`: MatMul's broadcast batch dims flattened (each operand's
//! stride per batch dim is an argument, 0 where it broadcasts), Gemm's
//! single product, and Conv as an implicit GEMM per group (`m` the output
//! channel in the group, `n` the batch item and output position, `k` the
//! input channel in the group and the kernel tap).

use crate::kernel::{ContractionOp, Declared};
use diamond_ir::{AttrValue, ElemType, Node};

/// A contraction's static form: what the generated code depends on.
#[derive(Clone, Debug, PartialEq)]
pub enum Geometry {
    /// ONNX MatMul: `batch_rank` broadcast batch dims (after 1-D operands
    /// are promoted to matrices); a 1-D `A` is one row, a 1-D `B` one column.
    MatMul {
        /// Batch dims of the result.
        batch_rank: usize,
        /// `A` is 1-D.
        a_vector: bool,
        /// `B` is 1-D.
        b_vector: bool,
    },
    /// ONNX Gemm: `alpha · op(A) · op(B) + beta · C`, `C` broadcast to
    /// `[M, N]` through per-axis strides (arguments).
    Gemm {
        /// `A` is stored `[K, M]`.
        trans_a: bool,
        /// `B` is stored `[N, K]`.
        trans_b: bool,
        /// The product's factor.
        alpha: f32,
        /// `C`'s factor.
        beta: f32,
        /// Whether `C` is given.
        c: bool,
    },
    /// ONNX Conv (1-D as a 2-D one over a single row; `auto_pad` NOTSET).
    Conv {
        /// 1 or 2.
        spatial: usize,
        /// Groups.
        group: i64,
        /// Strides, `[h, w]`.
        strides: [i64; 2],
        /// Pads, `[top, left, bottom, right]` (the ends only size the output).
        pads: [i64; 4],
        /// Dilations, `[h, w]`.
        dilations: [i64; 2],
        /// Whether a bias (input 2) is given.
        bias: bool,
    },
}

fn int_attr(node: &Node, name: &str, default: i64) -> Result<i64, String> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Ok(default),
        Some(AttrValue::Int(v)) => Ok(v),
        Some(_) => Err(format!("attribute {name} is not an int")),
    }
}

fn float_attr(node: &Node, name: &str, default: f32) -> Result<f32, String> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Ok(default),
        Some(AttrValue::Float(v)) => Ok(v),
        Some(_) => Err(format!("attribute {name} is not a float")),
    }
}

/// A per-spatial-axis attribute as `[h, w]` (a 1-D value is `[1, x]`).
fn pair_attr(node: &Node, name: &str, spatial: usize, default: i64) -> Result<[i64; 2], String> {
    match node.attribute(name).and_then(|a| a.value()) {
        None => Ok([default; 2]),
        Some(AttrValue::Ints(v)) if v.len() == spatial && v.iter().all(|&x| x >= 1) => {
            Ok(if spatial == 1 { [1, v[0]] } else { [v[0], v[1]] })
        }
        Some(_) => Err(format!("attribute {name} is not {spatial} positive ints")),
    }
}

impl Geometry {
    /// The geometry of `node` (a contraction `op`) reading `inputs`.
    pub fn of(op: ContractionOp, node: &Node, inputs: &[Option<Declared>]) -> Result<Geometry, String> {
        let input = |i: usize| inputs.get(i).and_then(Option::as_ref);
        let (a, b) = (input(0).ok_or("no first input")?, input(1).ok_or("no second input")?);
        for d in inputs.iter().flatten() {
            if !matches!(d.elem, ElemType::Float | ElemType::Float16 | ElemType::Bfloat16) {
                return Err(format!("'{}' is {}: the tiled kernel computes floats only", d.value, d.elem.name()));
            }
        }
        Ok(match op {
            ContractionOp::MatMul => {
                if a.dims.is_empty() || b.dims.is_empty() {
                    return Err("a scalar MatMul operand".into());
                }
                let rank = |d: &Declared| d.dims.len().max(2);
                Geometry::MatMul {
                    batch_rank: rank(a).max(rank(b)) - 2,
                    a_vector: a.dims.len() == 1,
                    b_vector: b.dims.len() == 1,
                }
            }
            ContractionOp::Gemm => {
                if a.dims.len() != 2 || b.dims.len() != 2 || input(2).is_some_and(|c| c.dims.len() > 2) {
                    return Err("Gemm operands of the wrong rank".into());
                }
                Geometry::Gemm {
                    trans_a: int_attr(node, "transA", 0)? != 0,
                    trans_b: int_attr(node, "transB", 0)? != 0,
                    alpha: float_attr(node, "alpha", 1.0)?,
                    beta: float_attr(node, "beta", 1.0)?,
                    c: input(2).is_some(),
                }
            }
            ContractionOp::Conv => {
                let spatial = a.dims.len().checked_sub(2).ok_or("a Conv input of rank < 2")?;
                if !(1..=2).contains(&spatial) || b.dims.len() != a.dims.len() {
                    return Err(format!("a {spatial}-D Conv: the tiled kernel covers 1-D and 2-D"));
                }
                match node.attribute("auto_pad").and_then(|a| a.value()) {
                    None => {}
                    Some(AttrValue::String(s)) if s == b"NOTSET" => {}
                    Some(_) => return Err("Conv with auto_pad: the tiled kernel needs explicit pads".into()),
                }
                let pads = match node.attribute("pads").and_then(|a| a.value()) {
                    None => [0; 4],
                    Some(AttrValue::Ints(v)) if v.len() == 2 * spatial && v.iter().all(|&x| x >= 0) => {
                        if spatial == 1 {
                            [0, v[0], 0, v[1]]
                        } else {
                            [v[0], v[1], v[2], v[3]]
                        }
                    }
                    Some(_) => return Err("Conv pads are not 2 per spatial axis".into()),
                };
                let group = int_attr(node, "group", 1)?;
                if group < 1 {
                    return Err("a Conv group below 1".into());
                }
                Geometry::Conv {
                    spatial,
                    group,
                    strides: pair_attr(node, "strides", spatial, 1)?,
                    pads,
                    dilations: pair_attr(node, "dilations", spatial, 1)?,
                    bias: input(2).is_some(),
                }
            }
        })
    }
}

/// The names of the size arguments a kernel of `g` takes, after the
/// model's symbols, each with how a launcher computes it.
pub fn size_names(g: &Geometry) -> Vec<(String, &'static str)> {
    let mut names: Vec<(String, &'static str)> = match g {
        Geometry::MatMul { .. } => vec![
            ("M".into(), "rows of A (1 when A is 1-D)"),
            ("N".into(), "columns of B (1 when B is 1-D)"),
            ("K".into(), "the contracted size"),
        ],
        Geometry::Gemm { .. } => vec![
            ("M".into(), "rows of op(A)"),
            ("N".into(), "columns of op(B)"),
            ("K".into(), "the contracted size"),
            ("CM".into(), "C's element stride along M (0: broadcast)"),
            ("CN".into(), "C's element stride along N (0: broadcast)"),
        ],
        Geometry::Conv { .. } => vec![
            ("NB".into(), "X dim 0 (batch)"),
            ("C".into(), "X dim 1 (input channels)"),
            ("OC".into(), "W dim 0 (output channels)"),
            ("H".into(), "X dim 2 (1 for a 1-D Conv)"),
            ("W".into(), "X's last dim"),
            ("KH".into(), "W dim 2 (1 for a 1-D Conv)"),
            ("KW".into(), "W's last dim"),
            ("OH".into(), "the output's dim 2 (1 for a 1-D Conv)"),
            ("OW".into(), "the output's last dim"),
        ],
    };
    if let Geometry::MatMul { batch_rank, .. } = g {
        for i in 0..*batch_rank {
            names.push((format!("B{i}"), "the result's batch dim i"));
            names.push((format!("SA{i}"), "A's element stride for batch dim i (0: broadcast)"));
            names.push((format!("SB{i}"), "B's element stride for batch dim i (0: broadcast)"));
        }
    }
    names
}

/// Dense C-order strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// The size arguments (in [`size_names`] order) and the result's shape for
/// inputs of `shapes` (`None`: omitted); an error when they do not fit `g`.
pub fn size_values(g: &Geometry, shapes: &[Option<Vec<usize>>]) -> Result<(Vec<i64>, Vec<usize>), String> {
    let shape = |i: usize| shapes.get(i).and_then(Option::as_ref);
    let (a, b) = (shape(0).ok_or("no first input")?, shape(1).ok_or("no second input")?);
    let mismatch = || format!("operands {a:?} and {b:?} do not fit {g:?}");
    let v = |x: usize| x as i64;
    match g {
        Geometry::MatMul { batch_rank, a_vector, b_vector } => {
            if *a_vector != (a.len() == 1) || *b_vector != (b.len() == 1) {
                return Err(mismatch());
            }
            let a2 = if *a_vector { vec![1, a[0]] } else { a.clone() };
            let b2 = if *b_vector { vec![b[0], 1] } else { b.clone() };
            let (ra, rb) = (a2.len() - 2, b2.len() - 2);
            if ra.max(rb) != *batch_rank {
                return Err(mismatch());
            }
            let (m, k, k2, n) = (a2[ra], a2[ra + 1], b2[rb], b2[rb + 1]);
            if k != k2 {
                return Err(mismatch());
            }
            let (sa, sb) = (strides(&a2), strides(&b2));
            let mut values = vec![v(m), v(n), v(k)];
            let mut out = Vec::new();
            for i in 0..*batch_rank {
                // Right-aligned: batch dim i of the result is dim i - (batch_rank - r) of an operand.
                let da = (i + ra).checked_sub(*batch_rank).map(|j| (a2[j], sa[j])).unwrap_or((1, 0));
                let db = (i + rb).checked_sub(*batch_rank).map(|j| (b2[j], sb[j])).unwrap_or((1, 0));
                let size = match (da.0, db.0) {
                    (x, y) if x == y => x,
                    (1, y) => y,
                    (x, 1) => x,
                    _ => return Err(mismatch()),
                };
                let stride = |(d, s): (usize, usize)| if d == 1 { 0 } else { v(s) };
                values.extend([v(size), stride(da), stride(db)]);
                out.push(size);
            }
            if !a_vector {
                out.push(m);
            }
            if !b_vector {
                out.push(n);
            }
            Ok((values, out))
        }
        Geometry::Gemm { trans_a, trans_b, c, .. } => {
            let (m, k) = if *trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
            let (k2, n) = if *trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
            if k != k2 || a.len() != 2 || b.len() != 2 {
                return Err(mismatch());
            }
            let (mut cm, mut cn) = (0, 0);
            if *c {
                let cs = shape(2).ok_or("C missing")?;
                // Right-aligned to [M, N]; a dim of 1 broadcasts.
                let padded: Vec<usize> =
                    std::iter::repeat_n(1, 2usize.saturating_sub(cs.len())).chain(cs.clone()).collect();
                if padded.len() != 2 || !(padded[0] == 1 || padded[0] == m) || !(padded[1] == 1 || padded[1] == n) {
                    return Err(format!("C {cs:?} does not broadcast to [{m}, {n}]"));
                }
                cm = if padded[0] == 1 { 0 } else { v(padded[1]) };
                cn = if padded[1] == 1 { 0 } else { 1 };
            }
            Ok((vec![v(m), v(n), v(k), cm, cn], vec![m, n]))
        }
        Geometry::Conv { spatial, group, strides, pads, dilations, bias } => {
            if a.len() != spatial + 2 || b.len() != spatial + 2 {
                return Err(mismatch());
            }
            let (h, w, kh, kw) = if *spatial == 1 { (1, a[2], 1, b[2]) } else { (a[2], a[3], b[2], b[3]) };
            let grp = *group as usize;
            let (nb, c, oc) = (a[0], a[1], b[0]);
            if c % grp != 0 || oc % grp != 0 || b[1] * grp != c {
                return Err(mismatch());
            }
            if *bias && shape(2).is_none_or(|s| s.as_slice() != [oc]) {
                return Err(format!("a Conv bias that is not [{oc}]"));
            }
            let out_len = |size: usize, k: usize, s: i64, p0: i64, p1: i64, d: i64| -> Result<usize, String> {
                let span = (k as i64 - 1) * d + 1;
                let room = size as i64 + p0 + p1 - span;
                if room < 0 {
                    return Err("the Conv kernel is larger than the padded input".into());
                }
                Ok((room / s + 1) as usize)
            };
            let oh = out_len(h, kh, strides[0], pads[0], pads[2], dilations[0])?;
            let ow = out_len(w, kw, strides[1], pads[1], pads[3], dilations[1])?;
            let out = if *spatial == 1 { vec![nb, oc, ow] } else { vec![nb, oc, oh, ow] };
            Ok((vec![v(nb), v(c), v(oc), v(h), v(w), v(kh), v(kw), v(oh), v(ow)], out))
        }
    }
}

/// The batched product's `(batch, M, N, K)` for size arguments `values`.
pub fn gemm_dims(g: &Geometry, values: &[i64]) -> (i64, i64, i64, i64) {
    let at = |i: usize| values.get(i).copied().unwrap_or(0);
    match g {
        Geometry::MatMul { batch_rank, .. } => {
            let batch = (0..*batch_rank).map(|i| at(3 + 3 * i)).product();
            (batch, at(0), at(1), at(2))
        }
        Geometry::Gemm { .. } => (1, at(0), at(1), at(2)),
        Geometry::Conv { group, .. } => {
            let (nb, c, oc, kh, kw, oh, ow) = (at(0), at(1), at(2), at(5), at(6), at(7), at(8));
            (*group, oc / group, nb * oh * ow, c / group * kh * kw)
        }
    }
}
