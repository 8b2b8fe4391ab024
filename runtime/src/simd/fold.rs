//! Which elementwise programs after a contraction are the contraction's own
//! [`Epilogue`]: `after(act(x) + r)` and its parts, where `x` is the
//! contraction's result, `r` another tensor of the same layout (a residual
//! branch), and `act`, `after` activations the kernels apply to each
//! finished tile's rows ([`Activation`]) — a convolution's Relu, Clip,
//! HardSwish or SiLU, ResNet's `Relu(conv + x)`, MobileNet's `conv + x`.
//! onnxruntime fuses the same (its `FusedConv` takes an activation and a
//! `Sum` input); tract applies them in its matmul kernels' registers.
//!
//! Folded, the program costs no step of its own and no pass over the result
//! with the general tile evaluator ([`super::fused_post`]), whose
//! per-tile overhead made fusing small results lose time. What does not
//! fold runs as before.

use super::bind::Bound;
use super::epilogue::Activation;
use super::fused_post;
use crate::kernel::{BinaryOp, Inst, Program, UnaryOp};
use diamond_ir::ElemType;

/// What a program adds to its contraction's epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Fold {
    /// Applied to the result first.
    pub activation: Activation,
    /// The operand added after `activation`, if any.
    pub residual: Option<usize>,
    /// Applied after the residual.
    pub after: Activation,
}

/// How program `p` (bound as `b`) folds into the epilogue of the
/// contraction whose result is its operand `k`, if it does: one `f32`
/// output written point for point in the result's layout, every
/// instruction part of `after(act(x) + r)` (each part optional), and any
/// residual operand `f32`, read point for point and as large as the result.
pub(crate) fn fold(p: &Program, b: &Bound, k: usize) -> Option<Fold> {
    if p.outputs.len() != 1
        || p.operands[k].elem != ElemType::Float
        || !fused_post::reads_point_for_point(b, k)
        || fused_post::writable_over(p, b, k) != Some(0)
    {
        return None;
    }
    let body = &p.body;
    if body.iter().any(|i| i.ty != ElemType::Float) {
        return None;
    }
    let mut used = vec![false; body.len()];
    let is_result = |i: usize| matches!(body[i].inst, Inst::Load(l) if l == k);
    // `act(x)` ending at instruction `i`: the activation, or `None` when `i` is not one over x.
    let activated = |i: usize, used: &mut Vec<bool>| -> Option<Activation> {
        if is_result(i) {
            used[i] = true;
            return Some(Activation::None);
        }
        let (act, reads) = match body[i].inst {
            Inst::Unary(op, a) if is_result(a) => (activation(op)?, [a, a]),
            // SiLU, x · sigmoid(x), either way round
            Inst::Binary(BinaryOp::Mul, a, s) | Inst::Binary(BinaryOp::Mul, s, a)
                if is_result(a) && matches!(body[s].inst, Inst::Unary(UnaryOp::Sigmoid, x) if is_result(x)) =>
            {
                let Inst::Unary(_, x) = body[s].inst else { unreachable!("matched above") };
                used[x] = true;
                (Activation::Silu, [a, s])
            }
            _ => return None,
        };
        for r in reads {
            used[r] = true;
        }
        used[i] = true;
        Some(act)
    };
    let residual = |i: usize, used: &mut Vec<bool>| -> Option<usize> {
        let Inst::Load(j) = body[i].inst else { return None };
        let fits = j != k
            && p.operands[j].elem == ElemType::Float
            && fused_post::reads_point_for_point(b, j)
            && b.operand_lens[j] == b.operand_lens[k];
        fits.then(|| {
            used[i] = true;
            j
        })
    };
    // `act(x) + r`, either way round
    let sum = |i: usize, used: &mut Vec<bool>| -> Option<(Activation, Option<usize>)> {
        if let Some(act) = activated(i, used) {
            return Some((act, None));
        }
        let Inst::Binary(BinaryOp::Add, a, c) = body[i].inst else { return None };
        let mut trial = used.clone();
        let found = match (activated(a, &mut trial), residual(c, &mut trial)) {
            (Some(act), Some(j)) => Some((act, j)),
            _ => {
                trial = used.clone();
                match (activated(c, &mut trial), residual(a, &mut trial)) {
                    (Some(act), Some(j)) => Some((act, j)),
                    _ => None,
                }
            }
        }?;
        *used = trial;
        used[i] = true;
        Some((found.0, Some(found.1)))
    };
    let out = p.outputs[0].source;
    let plain = sum(out, &mut used);
    let folded = match plain {
        Some((activation, residual)) => Fold { activation, residual, after: Activation::None },
        None => {
            used.iter_mut().for_each(|u| *u = false);
            let Inst::Unary(op, inner) = body[out].inst else { return None };
            let after = activation(op)?;
            let (activation, residual) = sum(inner, &mut used)?;
            used[out] = true;
            Fold { activation, residual, after }
        }
    };
    // Constants nothing reads aside, every instruction is one of the pattern's.
    let stray = body.iter().zip(&used).any(|(i, &u)| !u && !matches!(i.inst, Inst::Const(_)));
    let identity = folded == Fold { activation: Activation::None, residual: None, after: Activation::None };
    (!stray && !identity).then_some(folded)
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
