//! Two-operand `Einsum` on the GEMM kernels: the contraction attention
//! blocks written with `torch.einsum` export (`bhid,bhjd->bhij`), and any
//! other whose letters each name one axis.
//!
//! The letters split into four classes: batch (in both operands and the
//! output), left (only the first operand and the output), right (only the
//! second and the output) and contracted (both operands, not the output).
//! The first operand is laid out as `[batch, left, contracted]`, the
//! second as `[batch, contracted, right]` (a copy only where the letters
//! are not already in that order), [`batched_matmul`] multiplies them, and
//! the product `[batch, left, right]` is laid out in the output's order.
//! Equations with an ellipsis, a letter repeated within a term (diagonals),
//! a letter summed out of one operand alone, sizes that broadcast, or more
//! or fewer than two operands are left to the reference kernels.

use super::contraction::{overwritten, Take};
use super::epilogue::Epilogue;
use super::gemm::batched_matmul;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};
use std::collections::HashMap;

/// The contraction `equation` describes, for operands of `a_shape` and
/// `b_shape`: each term's letters and every letter's size.
struct Plan {
    a: Vec<char>,
    b: Vec<char>,
    out: Vec<char>,
    size: HashMap<char, usize>,
}

impl Plan {
    fn new(equation: &str, a_shape: &[usize], b_shape: &[usize]) -> Option<Plan> {
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        if eq.contains('.') {
            return None;
        }
        let (lhs, rhs) = match eq.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (eq.clone(), None),
        };
        let (ta, tb) = lhs.split_once(',')?;
        if tb.contains(',') {
            return None;
        }
        let a: Vec<char> = ta.chars().collect();
        let b: Vec<char> = tb.chars().collect();
        let letters = |t: &[char]| t.iter().all(|c| c.is_ascii_alphabetic()) && !has_repeat(t);
        if !letters(&a) || !letters(&b) || a.len() != a_shape.len() || b.len() != b_shape.len() {
            return None;
        }
        let out: Vec<char> = match rhs {
            Some(r) => r.chars().collect(),
            // implicit output: the letters that appear once, in alphabetical order
            None => {
                let mut once: Vec<char> = a
                    .iter()
                    .chain(&b)
                    .copied()
                    .filter(|c| a.iter().chain(&b).filter(|d| *d == c).count() == 1)
                    .collect();
                once.sort_unstable();
                once
            }
        };
        if !letters(&out) || out.iter().any(|c| !a.contains(c) && !b.contains(c)) {
            return None;
        }
        let mut size = HashMap::new();
        for (c, &d) in a.iter().zip(a_shape).chain(b.iter().zip(b_shape)) {
            if *size.entry(*c).or_insert(d) != d {
                return None;
            }
        }
        // a letter in one operand only must reach the output (no summing out of one side)
        if a.iter().any(|c| !b.contains(c) && !out.contains(c)) || b.iter().any(|c| !a.contains(c) && !out.contains(c))
        {
            return None;
        }
        Some(Plan { a, b, out, size })
    }

    fn product(&self, letters: &[char]) -> usize {
        letters.iter().map(|c| self.size[c]).product()
    }
}

fn has_repeat(t: &[char]) -> bool {
    t.iter().enumerate().any(|(i, c)| t[i + 1..].contains(c))
}

/// `Einsum` of two `f32` operands, or `None` when these kernels do not take it.
pub(crate) fn einsum(node: &Node, inputs: &[Option<&Tensor>], take: Take<'_>) -> Option<Tensor> {
    let [Some(x), Some(y)] = inputs else { return None };
    let (Data::F32(xd), Data::F32(yd)) = (&x.data, &y.data) else { return None };
    let equation = match node.attribute("equation").and_then(|a| a.value()) {
        Some(AttrValue::String(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => return None,
    };
    let plan = Plan::new(&equation, &x.shape, &y.shape)?;
    let batch: Vec<char> = plan.out.iter().copied().filter(|c| plan.a.contains(c) && plan.b.contains(c)).collect();
    let left: Vec<char> = plan.out.iter().copied().filter(|c| plan.a.contains(c) && !plan.b.contains(c)).collect();
    let right: Vec<char> = plan.out.iter().copied().filter(|c| plan.b.contains(c) && !plan.a.contains(c)).collect();
    let contracted: Vec<char> =
        plan.a.iter().copied().filter(|c| plan.b.contains(c) && !plan.out.contains(c)).collect();
    let (bt, m, k, n) = (plan.product(&batch), plan.product(&left), plan.product(&contracted), plan.product(&right));
    let a_order: Vec<char> = batch.iter().chain(&left).chain(&contracted).copied().collect();
    let b_order: Vec<char> = batch.iter().chain(&contracted).chain(&right).copied().collect();
    let a = laid_out(xd, &plan.a, &a_order, &plan.size);
    let b = laid_out(yd, &plan.b, &b_order, &plan.size);
    let product_order: Vec<char> = batch.iter().chain(&left).chain(&right).copied().collect();
    let len = bt * m * n;
    let shape: Vec<usize> = plan.out.iter().map(|c| plan.size[c]).collect();
    let mut out = overwritten(take, len);
    if len > 0 && k == 0 {
        out.fill(0.0);
    } else if len > 0 {
        if product_order == plan.out {
            batched_matmul(&a, &[bt, m, k], &b, &[bt, k, n], &mut out, &Epilogue::default());
        } else {
            let mut product = vec![0f32; len];
            batched_matmul(&a, &[bt, m, k], &b, &[bt, k, n], &mut product, &Epilogue::default());
            permute_into(&product, &product_order, &plan.out, &plan.size, &mut out);
        }
    }
    Some(Tensor { shape, data: Data::F32(out) })
}

/// `data` (axes lettered `from`) with its axes in the order `to`: the data
/// itself when the orders agree, else a copy.
fn laid_out<'d>(
    data: &'d [f32],
    from: &[char],
    to: &[char],
    size: &HashMap<char, usize>,
) -> std::borrow::Cow<'d, [f32]> {
    if from == to {
        return std::borrow::Cow::Borrowed(data);
    }
    let mut out = vec![0f32; data.len()];
    permute_into(data, from, to, size, &mut out);
    std::borrow::Cow::Owned(out)
}

/// Writes `src` (axes lettered `from`) into `dst` with its axes in the order `to`.
fn permute_into(src: &[f32], from: &[char], to: &[char], size: &HashMap<char, usize>, dst: &mut [f32]) {
    let dims: Vec<usize> = to.iter().map(|c| size[c]).collect();
    // the stride in `src` of each axis of `to`
    let mut src_stride: HashMap<char, usize> = HashMap::new();
    let mut s = 1;
    for c in from.iter().rev() {
        src_stride.insert(*c, s);
        s *= size[c];
    }
    let strides: Vec<usize> = to.iter().map(|c| src_stride[c]).collect();
    let rank = dims.len();
    if rank == 0 || dst.is_empty() {
        if let (Some(d), Some(v)) = (dst.first_mut(), src.first()) {
            *d = *v;
        }
        return;
    }
    let inner = dims[rank - 1];
    let inner_stride = strides[rank - 1];
    let mut index = vec![0usize; rank];
    for row in dst.chunks_mut(inner) {
        let base: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        for (j, d) in row.iter_mut().enumerate() {
            *d = src[base + j * inner_stride];
        }
        // next row: the odometer over all axes but the last
        for axis in (0..rank - 1).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(equation: &str) -> Node {
        Node {
            op_type: Some("Einsum".into()),
            attributes: vec![diamond_ir::Attribute {
                name: Some("equation".into()),
                attr_type: Some(diamond_ir::AttrType::String),
                s: Some(equation.as_bytes().to_vec().into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn tensor(shape: &[usize], seed: usize) -> Tensor {
        let len = shape.iter().product::<usize>();
        let data = (0..len).map(|i| (((i * 7 + seed * 13) % 17) as f32 - 8.0) / 8.0).collect();
        Tensor { shape: shape.to_vec(), data: Data::F32(data) }
    }

    /// The sum over every assignment of the letters, straight from the definition.
    fn naive(equation: &str, x: &Tensor, y: &Tensor) -> Vec<f32> {
        let plan = Plan::new(equation, &x.shape, &y.shape).expect("a plan");
        let (Data::F32(xd), Data::F32(yd)) = (&x.data, &y.data) else { unreachable!() };
        let mut letters: Vec<char> = plan.out.clone();
        for c in plan.a.iter().chain(&plan.b) {
            if !letters.contains(c) {
                letters.push(*c);
            }
        }
        let offset = |term: &[char], at: &HashMap<char, usize>| term.iter().fold(0, |o, c| o * plan.size[c] + at[c]);
        let total: usize = plan.product(&letters);
        let mut out = vec![0f32; plan.product(&plan.out)];
        for flat in 0..total {
            let mut rest = flat;
            let mut at = HashMap::new();
            for c in letters.iter().rev() {
                at.insert(*c, rest % plan.size[c]);
                rest /= plan.size[c];
            }
            out[offset(&plan.out, &at)] += xd[offset(&plan.a, &at)] * yd[offset(&plan.b, &at)];
        }
        out
    }

    #[test]
    fn two_operand_equations_match_the_definition() {
        let cases: [(&str, &[usize], &[usize]); 7] = [
            ("bhid,bhjd->bhij", &[2, 3, 5, 4], &[2, 3, 6, 4]),
            ("bhij,bhjd->bhid", &[2, 3, 5, 6], &[2, 3, 6, 4]),
            ("ij,jk->ik", &[5, 7], &[7, 3]),
            ("ij,jk", &[5, 7], &[7, 3]),
            ("abc,cd->dba", &[2, 3, 4], &[4, 5]),
            ("nqhd,nkhd->nhqk", &[2, 5, 3, 4], &[2, 6, 3, 4]),
            ("i,j->ij", &[4], &[3]),
        ];
        for (eq, xs, ys) in cases {
            let (x, y) = (tensor(xs, 1), tensor(ys, 2));
            let mut take = |len: usize| Vec::with_capacity(len);
            let got = einsum(&node(eq), &[Some(&x), Some(&y)], &mut take).unwrap_or_else(|| panic!("{eq} is covered"));
            let Data::F32(g) = &got.data else { panic!() };
            let want = naive(eq, &x, &y);
            assert_eq!(g.len(), want.len(), "{eq}");
            for (a, b) in g.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{eq}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn diagonals_ellipses_and_one_sided_sums_are_left_to_the_reference() {
        let (x, y) = (tensor(&[3, 3], 1), tensor(&[3, 3], 2));
        let mut take = |len: usize| Vec::with_capacity(len);
        for eq in ["ii,ij->j", "...i,...i->...", "ij,jk->k", "ij,ij,ij->i"] {
            assert!(einsum(&node(eq), &[Some(&x), Some(&y)], &mut take).is_none(), "{eq}");
        }
    }
}
