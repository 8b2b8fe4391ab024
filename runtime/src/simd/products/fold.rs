//! Which elementwise programs after a contraction are the contraction's own
//! [`Epilogue`](super::epilogue::Epilogue): `after(act(x + b) + r)` and its
//! parts, where `x` is the contraction's result, `b` a bias along its last
//! axis (a MatMul's only: the other contractions bring their own), `r`
//! another tensor of the same layout (a residual branch), and `act`,
//! `after` activations the kernels apply to each finished tile's rows
//! ([`Activation`]) — a convolution's Relu, Clip, HardSwish or SiLU,
//! ResNet's `Relu(conv + x)`, MobileNet's `conv + x`, a Linear layer's bias
//! and GELU (also as the exporters spell it out: `y · (erf(y / √2) + 1) ·
//! ½`). onnxruntime fuses the same (`FusedConv` with an activation and a
//! `Sum` input, `BiasGelu`); tract applies them in its matmul kernels'
//! registers.
//!
//! Folded, the program costs no step of its own and no pass over the result
//! with the general tile evaluator ([`super::fused_post`]), whose
//! per-tile overhead made fusing small results lose time. What does not
//! fold runs as before.

use super::bind::Bound;
use super::epilogue::Activation;
use super::fused_post;
use crate::kernel::{BinaryOp, ContractionOp, Inst, Program, UnaryOp};
use diamond_ir::ElemType;

/// What a program adds to its contraction's epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Fold {
    /// The operand added along the result's last axis first, if any.
    pub bias: Option<usize>,
    /// Applied to the (biased) result.
    pub activation: Activation,
    /// The operand added after `activation`, if any.
    pub residual: Option<usize>,
    /// Applied after the residual.
    pub after: Activation,
}

/// The instructions a pattern covers, with what it found.
type Found<T> = Option<(T, Vec<usize>)>;

/// Matches programs against `after(act(x + b) + r)`.
struct Matcher<'a> {
    p: &'a Program,
    b: &'a Bound,
    /// The operand that is the contraction's result.
    k: usize,
    /// The length of the contraction's rows where a bias along them may
    /// fold (a MatMul's `n`).
    row: Option<usize>,
}

/// How program `p` (bound as `b`) folds into the epilogue of contraction
/// `op` whose result is its operand `k`, if it does: one `f32` output
/// written point for point in the result's layout, every instruction (but
/// constants nothing reads) part of `after(act(x + b) + r)` (each part
/// optional), any bias `f32` along the last axis and as long as the
/// contraction's rows (`row`, a MatMul's `n`: the bound space may have
/// merged the result's axes), any residual `f32`, read point for point and
/// as large as the result.
pub(crate) fn fold(p: &Program, b: &Bound, k: usize, op: ContractionOp, row: Option<usize>) -> Option<Fold> {
    if p.outputs.len() != 1
        || p.operands[k].elem != ElemType::Float
        || !fused_post::reads_point_for_point(b, k)
        || fused_post::writable_over(p, b, k) != Some(0)
        || p.body.iter().any(|i| i.ty != ElemType::Float)
    {
        return None;
    }
    let m = Matcher { p, b, k, row: row.filter(|_| op == ContractionOp::MatMul) };
    let out = p.outputs[0].source;
    let (folded, covered) = m.whole(out)?;
    let mut claimed = vec![false; p.body.len()];
    for i in covered {
        claimed[i] = true;
    }
    let stray = p.body.iter().zip(&claimed).any(|(i, &c)| !c && !matches!(i.inst, Inst::Const(_)));
    let identity = Fold { bias: None, activation: Activation::None, residual: None, after: Activation::None };
    (!stray && folded != identity).then_some(folded)
}

impl Matcher<'_> {
    fn inst(&self, i: usize) -> &Inst {
        &self.p.body[i].inst
    }

    fn is_result(&self, i: usize) -> bool {
        matches!(*self.inst(i), Inst::Load(l) if l == self.k)
    }

    fn constant(&self, i: usize, want: f64, tolerance: f64) -> bool {
        matches!(*self.inst(i), Inst::Const(c) if (c - want).abs() <= tolerance)
    }

    /// Operand `j` as a bias: `f32`, offset 0, stride 1 along the last axis and 0 along the others.
    fn is_bias(&self, j: usize) -> bool {
        let (v, r) = (&self.b.operands[j], self.b.extents.len());
        self.row == Some(self.b.extents[r.max(1) - 1])
            && j != self.k
            && r > 0
            && self.p.operands[j].elem == ElemType::Float
            && v.offset == 0
            && self.b.operand_lens[j] == self.b.extents[r - 1]
            && v.strides.iter().enumerate().all(|(a, &s)| s == if a + 1 == r { 1 } else { 0 } || self.b.extents[a] == 1)
    }

    /// Operand `j` as a residual: `f32`, read point for point, as large as the result.
    fn is_residual(&self, j: usize) -> bool {
        j != self.k
            && self.p.operands[j].elem == ElemType::Float
            && fused_post::reads_point_for_point(self.b, j)
            && self.b.operand_lens[j] == self.b.operand_lens[self.k]
    }

    /// `x` or `x + b`, either way round: the bias operand.
    fn base(&self, i: usize) -> Found<Option<usize>> {
        if self.is_result(i) {
            return Some((None, vec![i]));
        }
        let Inst::Binary(BinaryOp::Add, a, c) = *self.inst(i) else { return None };
        for (x, y) in [(a, c), (c, a)] {
            if let (true, &Inst::Load(j)) = (self.is_result(x), self.inst(y)) {
                if self.is_bias(j) {
                    return Some((Some(j), vec![i, x, y]));
                }
            }
        }
        None
    }

    /// Whether `i` and `j` compute the same base: one instruction, or two loads of the result.
    fn same_base(&self, i: usize, j: usize) -> bool {
        i == j || (self.is_result(i) && self.is_result(j))
    }

    /// `act(base)`: the activation and the bias.
    fn activated(&self, i: usize) -> Found<(Activation, Option<usize>)> {
        if let Some((bias, covered)) = self.base(i) {
            return Some(((Activation::None, bias), covered));
        }
        match *self.inst(i) {
            Inst::Unary(op, a) => {
                let act = activation(op)?;
                let (bias, mut covered) = self.base(a)?;
                covered.push(i);
                Some(((act, bias), covered))
            }
            Inst::Binary(BinaryOp::Mul, _, _) => self.silu(i).or_else(|| self.gelu(i)),
            _ => None,
        }
    }

    /// SiLU, `y · sigmoid(y)`, either way round.
    fn silu(&self, i: usize) -> Found<(Activation, Option<usize>)> {
        let Inst::Binary(BinaryOp::Mul, a, c) = *self.inst(i) else { return None };
        for (y, s) in [(a, c), (c, a)] {
            let Inst::Unary(UnaryOp::Sigmoid, x) = *self.inst(s) else { continue };
            if !self.same_base(x, y) {
                continue;
            }
            let Some((bias, mut covered)) = self.base(y) else { continue };
            covered.extend([x, s, i]);
            return Some(((Activation::Silu, bias), covered));
        }
        None
    }

    /// GELU as the exporters spell it: the product of `y`, `½` and
    /// `erf(y / √2) + 1` (or `erf(y · 1/√2)`), multiplied in any order.
    fn gelu(&self, i: usize) -> Found<(Activation, Option<usize>)> {
        let mut factors = Vec::new();
        let mut products = Vec::new();
        self.factors(i, &mut factors, &mut products);
        if factors.len() != 3 {
            return None;
        }
        let half = factors.iter().position(|&f| self.constant(f, 0.5, 1e-7))?;
        let rest: Vec<usize> = (0..3).filter(|&f| f != half).map(|f| factors[f]).collect();
        for (y, sum) in [(rest[0], rest[1]), (rest[1], rest[0])] {
            let Inst::Binary(BinaryOp::Add, a, c) = *self.inst(sum) else { continue };
            let Some((one, e)) = [(a, c), (c, a)].into_iter().find(|&(o, _)| self.constant(o, 1.0, 0.0)) else {
                continue;
            };
            let Inst::Unary(UnaryOp::Erf, scaled) = *self.inst(e) else { continue };
            let x = match *self.inst(scaled) {
                Inst::Binary(BinaryOp::Div, x, c) if self.constant(c, std::f64::consts::SQRT_2, 1e-6) => (x, c),
                Inst::Binary(BinaryOp::Mul, x, c) | Inst::Binary(BinaryOp::Mul, c, x)
                    if self.constant(c, std::f64::consts::FRAC_1_SQRT_2, 1e-6) =>
                {
                    (x, c)
                }
                _ => continue,
            };
            if !self.same_base(x.0, y) {
                continue;
            }
            let Some((bias, mut covered)) = self.base(y) else { continue };
            covered.extend([x.0, x.1, scaled, e, one, sum, factors[half]]);
            covered.extend(&products);
            return Some(((Activation::Gelu, bias), covered));
        }
        None
    }

    /// The factors of the product tree at `i` (through `Mul`s), and the `Mul`s.
    fn factors(&self, i: usize, factors: &mut Vec<usize>, products: &mut Vec<usize>) {
        match *self.inst(i) {
            Inst::Binary(BinaryOp::Mul, a, c) if factors.len() < 4 => {
                products.push(i);
                self.factors(a, factors, products);
                self.factors(c, factors, products);
            }
            _ => factors.push(i),
        }
    }

    /// `act(x + b)` or `act(x + b) + r`, either way round.
    fn sum(&self, i: usize) -> Found<(Activation, Option<usize>, Option<usize>)> {
        if let Some(((act, bias), covered)) = self.activated(i) {
            return Some(((act, bias, None), covered));
        }
        let Inst::Binary(BinaryOp::Add, a, c) = *self.inst(i) else { return None };
        for (x, r) in [(a, c), (c, a)] {
            let Inst::Load(j) = *self.inst(r) else { continue };
            if !self.is_residual(j) {
                continue;
            }
            let Some(((act, bias), mut covered)) = self.activated(x) else { continue };
            covered.extend([r, i]);
            return Some(((act, bias, Some(j)), covered));
        }
        None
    }

    /// The whole program: `sum`, or an activation of it.
    fn whole(&self, out: usize) -> Found<Fold> {
        let fold = |(activation, bias, residual), after| Fold { bias, activation, residual, after };
        if let Some((parts, covered)) = self.sum(out) {
            return Some((fold(parts, Activation::None), covered));
        }
        let Inst::Unary(op, inner) = *self.inst(out) else { return None };
        let after = activation(op)?;
        let (parts, mut covered) = self.sum(inner)?;
        covered.push(out);
        Some((fold(parts, after), covered))
    }
}

/// The epilogue's activation that is unary operator `op`, if any.
fn activation(op: UnaryOp) -> Option<Activation> {
    Some(match op {
        UnaryOp::Relu => Activation::Relu,
        UnaryOp::LeakyRelu(a) => Activation::LeakyRelu(a as f32),
        UnaryOp::Clip { min, max } => Activation::Clip { min: min as f32, max: max as f32 },
        UnaryOp::Sigmoid => Activation::Sigmoid,
        UnaryOp::Tanh => Activation::Tanh,
        UnaryOp::HardSigmoid { alpha, beta } => Activation::HardSigmoid { alpha: alpha as f32, beta: beta as f32 },
        UnaryOp::Gelu => Activation::Gelu,
        UnaryOp::GeluTanh => Activation::GeluTanh,
        UnaryOp::HardSwish => Activation::HardSwish,
        _ => return None,
    })
}
