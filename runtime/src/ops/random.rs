//! The random operators: RandomUniform(Like), RandomNormal(Like),
//! Bernoulli, Multinomial, and Dropout in training mode.
//!
//! Draws come from a small deterministic generator ([`SplitMix64`]) seeded by
//! the node's `seed` attribute when it has one and by the node's name
//! otherwise, so a run is reproducible and two unseeded nodes still draw
//! different streams. No runtime reproduces another's stream (onnx's test
//! outputs come from NumPy's generator), so results are compared by shape,
//! type and distribution, never by value.

use super::elementwise::{floats, from_f64s};
use super::{one, NodeCtx, Outs};
use crate::error::Result;
use crate::rng::SplitMix64;
use crate::tensor::{Data, Tensor, Value};
use diamond_ir::ElemType;

/// The draws of one node.
struct Draws(SplitMix64);

impl Draws {
    /// The stream of `ctx`'s node.
    fn for_node(ctx: &NodeCtx<'_>) -> Draws {
        let seed = match ctx.attr_opt_f("seed") {
            Some(s) => u64::from(s.to_bits()) ^ 0x5eed_0000_0000_0000,
            None => {
                // FNV-1a over the node's name and operator: stable across runs.
                let label = format!("{}/{}", ctx.node.name.as_deref().unwrap_or(""), ctx.op());
                label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
            }
        };
        Draws(SplitMix64(seed))
    }

    fn unit(&mut self) -> f64 {
        self.0.unit()
    }

    fn normal(&mut self) -> f64 {
        self.0.normal()
    }
}

/// The random operators this file runs.
pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "RandomUniform" | "RandomNormal" => fresh(ctx),
        "RandomUniformLike" | "RandomNormalLike" => like(ctx),
        "Bernoulli" => bernoulli(ctx),
        "Multinomial" => multinomial(ctx),
        _ => return None,
    })
}

/// The element type an output takes: the `dtype` attribute, else `default`.
fn dtype(ctx: &NodeCtx<'_>, default: ElemType) -> ElemType {
    ctx.attr_opt_i("dtype").map_or(default, |c| ElemType::from_code(c as i32))
}

/// `count` draws of the operator's distribution (uniform or normal by name).
fn draws(ctx: &NodeCtx<'_>, count: usize) -> Vec<f64> {
    let mut d = Draws::for_node(ctx);
    if ctx.op().starts_with("RandomUniform") {
        let (low, high) = (f64::from(ctx.attr_f("low", 0.0)), f64::from(ctx.attr_f("high", 1.0)));
        (0..count).map(|_| low + (high - low) * d.unit()).collect()
    } else {
        let (mean, scale) = (f64::from(ctx.attr_f("mean", 0.0)), f64::from(ctx.attr_f("scale", 1.0)));
        (0..count).map(|_| mean + scale * d.normal()).collect()
    }
}

/// RandomUniform / RandomNormal: the shape is an attribute.
fn fresh(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["dtype", "high", "low", "mean", "scale", "seed", "shape"])?;
    let shape = ctx.attr_ints("shape").ok_or_else(|| ctx.err("the shape attribute is required"))?;
    let shape: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| ctx.err(format!("shape {shape:?} has a negative dim"))))
        .collect::<Result<_>>()?;
    let n = ctx.check_size(&shape)?;
    one(from_f64s(ctx, dtype(ctx, ElemType::Float), shape, &draws(ctx, n))?)
}

/// RandomUniformLike / RandomNormalLike: the shape (and default type) of the input.
fn like(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["dtype", "high", "low", "mean", "scale", "seed"])?;
    let x = ctx.input(0)?;
    let elem = dtype(ctx, x.elem());
    one(from_f64s(ctx, elem, x.shape.clone(), &draws(ctx, x.len()))?)
}

/// Bernoulli: 1 with the probability each input element gives, else 0.
fn bernoulli(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["dtype", "seed"])?;
    let p = ctx.input(0)?;
    let probabilities = floats(ctx, p)?;
    let mut d = Draws::for_node(ctx);
    let values: Vec<f64> = probabilities.iter().map(|&q| f64::from(u8::from(d.unit() < q))).collect();
    one(from_f64s(ctx, dtype(ctx, p.elem()), p.shape.clone(), &values)?)
}

/// Multinomial: per batch row of unnormalized log-probabilities,
/// `sample_size` class indices.
fn multinomial(ctx: &NodeCtx<'_>) -> Result<Outs> {
    ctx.only_attrs(&["dtype", "sample_size", "seed"])?;
    let x = ctx.input(0)?;
    if x.rank() != 2 {
        return Err(ctx.err(format!("input {:?} must be [batch, classes]", x.shape)));
    }
    let (batch, classes) = (x.shape[0], x.shape[1]);
    let samples = usize::try_from(ctx.attr_i("sample_size", 1)).map_err(|_| ctx.err("sample_size must be ≥ 0"))?;
    let elem = dtype(ctx, ElemType::Int32);
    if !matches!(elem, ElemType::Int32 | ElemType::Int64) {
        return Err(ctx.err(format!("dtype {elem} is not int32 or int64")));
    }
    let logits = floats(ctx, x)?;
    let mut d = Draws::for_node(ctx);
    let mut out = Vec::with_capacity(batch * samples);
    for row in logits.chunks(classes.max(1)).take(batch) {
        let top = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = row.iter().map(|&l| (l - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        for _ in 0..samples {
            let mut target = d.unit() * total;
            let mut pick = classes.saturating_sub(1);
            for (c, &w) in weights.iter().enumerate() {
                if target < w {
                    pick = c;
                    break;
                }
                target -= w;
            }
            out.push(pick as f64);
        }
    }
    one(from_f64s(ctx, elem, vec![batch, samples], &out)?)
}

/// Dropout in training mode: each element kept with probability
/// `1 − ratio` and scaled by `1 / (1 − ratio)`; the mask says which were kept.
pub(super) fn dropout_training(ctx: &NodeCtx<'_>, x: &Tensor, ratio: f64) -> Result<Outs> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(ctx.err(format!("ratio {ratio} must be in [0, 1)")));
    }
    let values = floats(ctx, x)?;
    let mut d = Draws::for_node(ctx);
    let keep: Vec<bool> = values.iter().map(|_| d.unit() >= ratio).collect();
    let scale = 1.0 / (1.0 - ratio);
    let out: Vec<f64> = values.iter().zip(&keep).map(|(&v, &k)| if k { v * scale } else { 0.0 }).collect();
    let mask = Tensor { shape: x.shape.clone(), data: Data::Bool(keep) };
    Ok(vec![Some(Value::Tensor(from_f64s(ctx, x.elem(), x.shape.clone(), &out)?)), Some(Value::Tensor(mask))])
}
