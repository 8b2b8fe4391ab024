//! Support vector machines: `SVMClassifier` and `SVMRegressor`.
//!
//! With support vectors (`vectors_per_class`, `n_supports`) a row's kernel
//! values against every vector (LINEAR `x·v`, POLY `(γ x·v + c)^d`, RBF
//! `exp(-γ |x - v|²)`, SIGMOID `tanh(γ x·v + c)`) combine by the dual
//! coefficients; without them the model is linear in `coefficients`. The
//! classifier's one-against-one decisions vote for the label; with `prob_a`
//! and `prob_b` they become pairwise probabilities (Platt), coupled into one
//! probability per class by libsvm's iterative method — onnxruntime's code,
//! in `f32` as it runs it.

use super::{finish_scores, floats, score_tensor, two, Labels, Pick, Rows, Second, Transform};
use crate::error::Result;
use crate::ops::{one, NodeCtx, Outs};

/// A kernel and its parameters `(γ, c, d)`.
#[derive(Clone, Copy)]
struct Kernel {
    kind: Kind,
    gamma: f64,
    coef0: f64,
    degree: f64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Linear,
    Poly,
    Rbf,
    Sigmoid,
}

impl Kernel {
    fn read(ctx: &NodeCtx<'_>) -> Result<Kernel> {
        let kind = match ctx.attr_s("kernel_type").unwrap_or_else(|| "LINEAR".into()).as_str() {
            "LINEAR" => Kind::Linear,
            "POLY" => Kind::Poly,
            "RBF" => Kind::Rbf,
            "SIGMOID" => Kind::Sigmoid,
            other => return Err(ctx.err(format!("kernel_type '{other}' is not one of LINEAR, POLY, RBF, SIGMOID"))),
        };
        let p = ctx.attr_floats("kernel_params").unwrap_or_default();
        let at = |i: usize| p.get(i).copied().map_or(0.0, f64::from);
        Ok(Kernel { kind, gamma: at(0), coef0: at(1), degree: at(2) })
    }

    fn apply(&self, x: &[f64], v: &[f64]) -> f64 {
        if self.kind == Kind::Rbf {
            let d: f64 = x.iter().zip(v).map(|(a, b)| (a - b) * (a - b)).sum();
            return (-self.gamma * d).exp();
        }
        let dot: f64 = x.iter().zip(v).map(|(a, b)| a * b).sum();
        match self.kind {
            Kind::Poly => (self.gamma * dot + self.coef0).powf(self.degree),
            Kind::Sigmoid => (self.gamma * dot + self.coef0).tanh(),
            _ => dot,
        }
    }

    /// Row `x`'s kernel values against the `count` vectors of `vectors`.
    fn row(&self, x: &[f64], vectors: &[f64], count: usize) -> Vec<f64> {
        let f = x.len();
        (0..count).map(|j| self.apply(x, &vectors[j * f..(j + 1) * f])).collect()
    }
}

/// The support vectors as `count` rows of the input's `f` features.
fn support_vectors(ctx: &NodeCtx<'_>, rows: &Rows, count: usize) -> Result<Vec<f64>> {
    let v = floats(ctx, "support_vectors")?.unwrap_or_default();
    if v.len() != count * rows.f {
        return Err(ctx.err(format!(
            "support_vectors has {} values for {count} vectors of {} features",
            v.len(),
            rows.f
        )));
    }
    Ok(v)
}

/// `SVMRegressor`: `[N, 1]`, the kernel expansion plus `rho[0]` (±1 for a one-class model).
pub(super) fn regressor(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let kernel = Kernel::read(ctx)?;
    let rows = super::rows(ctx, 0)?;
    let coef = floats(ctx, "coefficients")?.ok_or_else(|| ctx.err("coefficients are required"))?;
    let rho = floats(ctx, "rho")?.unwrap_or_default().first().copied().unwrap_or(0.0);
    let supports = usize::try_from(ctx.attr_i("n_supports", 0)).map_err(|_| ctx.err("n_supports is negative"))?;
    let one_class = ctx.attr_i("one_class", 0) != 0;
    let out: Vec<Vec<f32>> = if supports > 0 {
        let vectors = support_vectors(ctx, &rows, supports)?;
        if coef.len() < supports {
            return Err(ctx.err(format!("coefficients has {} values for {supports} support vectors", coef.len())));
        }
        (0..rows.n)
            .map(|r| {
                let k = kernel.row(rows.row(r), &vectors, supports);
                vec![(k.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>() + rho) as f32]
            })
            .collect()
    } else {
        if coef.len() != rows.f {
            return Err(ctx.err(format!("coefficients has {} values for {} features", coef.len(), rows.f)));
        }
        let linear = Kernel { kind: Kind::Linear, ..kernel };
        (0..rows.n).map(|r| vec![(linear.apply(rows.row(r), &coef) + rho) as f32]).collect()
    };
    let out =
        if one_class { out.into_iter().map(|s| vec![if s[0] > 0.0 { 1.0 } else { -1.0 }]).collect() } else { out };
    one(score_tensor(&out, 1))
}

/// `SVMClassifier`: labels `[N]`; scores one per class (linear, or with
/// probabilities), else one per pair of classes (two for two classes).
pub(super) fn classifier(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let labels = Labels::read(ctx, "classlabels_ints")?;
    let classes = labels.len();
    let kernel = Kernel::read(ctx)?;
    let transform = Transform::read(ctx)?;
    let coef = floats(ctx, "coefficients")?.ok_or_else(|| ctx.err("coefficients are required"))?;
    let rho = floats(ctx, "rho")?.unwrap_or_default();
    let (prob_a, prob_b) =
        (ctx.attr_floats("prob_a").unwrap_or_default(), ctx.attr_floats("prob_b").unwrap_or_default());
    if prob_a.len() != prob_b.len() {
        return Err(ctx.err(format!("prob_a has {} values but prob_b {}", prob_a.len(), prob_b.len())));
    }
    let per_class = ctx.attr_ints("vectors_per_class").unwrap_or_default();
    let rows = super::rows(ctx, 0)?;
    let positive = coef.iter().all(|&c| c >= 0.0);
    let pairs = classes * classes.saturating_sub(1) / 2;
    let vectors: i64 = per_class.iter().sum();
    if vectors == 0 {
        // liblinear: one score per class
        let b = rho.first().copied().unwrap_or(0.0);
        if coef.len() != classes * rows.f {
            return Err(ctx.err(format!(
                "coefficients has {} values for {classes} classes of {} features",
                coef.len(),
                rows.f
            )));
        }
        let (mut picks, mut out) = (Vec::new(), Vec::new());
        for r in 0..rows.n {
            let s: Vec<f64> =
                (0..classes).map(|j| kernel_linear(rows.row(r), &coef[j * rows.f..(j + 1) * rows.f]) + b).collect();
            let best = (1..classes).fold(0, |m, j| if (s[j] as f32) > (s[m] as f32) { j } else { m });
            picks.push(choose(classes, pairs, s[best] as f32, best, false, positive));
            out.push(finish_scores(&s, transform, Second::Alone));
        }
        return two(labels.tensor(&picks), score_tensor(&out, classes));
    }
    let model = Svc::read(ctx, &rows, &per_class, classes, &coef, &rho)?;
    let have_proba = !prob_a.is_empty();
    if have_proba && prob_a.len() < pairs {
        return Err(ctx.err(format!("prob_a has {} values for {pairs} pairs of classes", prob_a.len())));
    }
    let second = match (classes <= 2, transform) {
        (false, _) => Second::Alone,
        (true, Transform::None) => Second::Negation,
        (true, _) => Second::Complement,
    };
    let (mut picks, mut out) = (Vec::new(), Vec::new());
    for r in 0..rows.n {
        let (decisions, votes) = model.decide(&kernel, rows.row(r));
        let best = (1..classes).fold(0, |m, j| if votes[j] > votes[m] { j } else { m });
        picks.push(choose(classes, pairs, 0.0, best, have_proba, positive));
        out.push(if have_proba {
            let p = probabilities(&decisions, &prob_a, &prob_b, classes);
            finish_scores(&p.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), transform, Second::Alone)
        } else {
            finish_scores(&decisions, transform, second)
        });
    }
    let width = match (have_proba, classes) {
        (true, _) => classes,
        (false, 0..=2) => 2,
        (false, _) => pairs,
    };
    two(labels.tensor(&picks), score_tensor(&out, width))
}

fn kernel_linear(x: &[f64], w: &[f64]) -> f64 {
    x.iter().zip(w).map(|(a, b)| a * b).sum()
}

/// onnxruntime's label choice (`ChooseClass`).
fn choose(classes: usize, pairs: usize, max_weight: f32, best: usize, have_proba: bool, positive: bool) -> Pick {
    if pairs != 1 {
        return Pick::Index(best);
    }
    if classes == 2 {
        if !have_proba && ((positive && max_weight >= 0.5) || (max_weight > 0.0 && !positive)) {
            return Pick::Index(1);
        }
        return Pick::Index(best);
    }
    Pick::Value(i64::from(max_weight > 0.0))
}

/// A one-against-one model: the support vectors and where each class's begin.
struct Svc<'a> {
    vectors: Vec<f64>,
    start: Vec<usize>,
    count: Vec<usize>,
    total: usize,
    coef: &'a [f64],
    rho: &'a [f64],
}

impl<'a> Svc<'a> {
    fn read(
        ctx: &NodeCtx<'_>,
        rows: &Rows,
        per_class: &[i64],
        classes: usize,
        coef: &'a [f64],
        rho: &'a [f64],
    ) -> Result<Svc<'a>> {
        if per_class.len() != classes {
            return Err(ctx.err(format!("vectors_per_class has {} entries for {classes} classes", per_class.len())));
        }
        let count: Vec<usize> = per_class
            .iter()
            .map(|&c| usize::try_from(c).map_err(|_| ctx.err("vectors_per_class holds a negative count")))
            .collect::<Result<_>>()?;
        let total: usize = count.iter().sum();
        let start: Vec<usize> = count.iter().scan(0, |s, &c| Some(std::mem::replace(s, *s + c))).collect();
        let vectors = support_vectors(ctx, rows, total)?;
        if coef.len() < classes.saturating_sub(1) * total {
            return Err(ctx.err(format!("coefficients has {} values for {} rows of {total}", coef.len(), classes - 1)));
        }
        let pairs = classes * classes.saturating_sub(1) / 2;
        if rho.len() < pairs {
            return Err(ctx.err(format!("rho has {} values for {pairs} pairs of classes", rho.len())));
        }
        Ok(Svc { vectors, start, count, total, coef, rho })
    }

    /// The decision value of every pair `(i, j)`, `i < j`, in order, and the votes per class.
    fn decide(&self, kernel: &Kernel, x: &[f64]) -> (Vec<f64>, Vec<i64>) {
        let k = kernel.row(x, &self.vectors, self.total);
        let classes = self.count.len();
        let mut decisions = Vec::new();
        let mut votes = vec![0i64; classes];
        for i in 0..classes {
            for j in i + 1..classes {
                let part = |row: usize, class: usize| -> f64 {
                    let s = self.start[class];
                    (0..self.count[class]).map(|m| self.coef[row * self.total + s + m] * k[s + m]).sum()
                };
                let sum = part(j - 1, i) + part(i, j) + self.rho[decisions.len()];
                decisions.push((sum as f32) as f64);
                votes[if sum > 0.0 { i } else { j }] += 1;
            }
        }
        (decisions, votes)
    }
}

/// Pairwise Platt probabilities coupled into one per class (libsvm's
/// `multiclass_probability`, as onnxruntime writes it in `f32`).
fn probabilities(decisions: &[f64], prob_a: &[f32], prob_b: &[f32], k: usize) -> Vec<f32> {
    let mut r = vec![0.0f32; k * k];
    let mut index = 0;
    for i in 0..k {
        for j in i + 1..k {
            let v = 1.0 - super::logistic(decisions[index] as f32 * prob_a[index] + prob_b[index]);
            let v = v.clamp(1.0e-7, 1.0 - 1.0e-7);
            r[i * k + j] = v;
            r[j * k + i] = 1.0 - v;
            index += 1;
        }
    }
    let mut q = vec![0.0f32; k * k];
    let mut p = vec![1.0 / k as f32; k];
    for i in 0..k {
        for j in 0..i {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = q[j * k + i];
        }
        for j in i + 1..k {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    let eps = 0.005 / k as f32;
    let mut qp = vec![0.0f32; k];
    for _ in 0..100 {
        let mut pqp = 0.0f32;
        for i in 0..k {
            qp[i] = (0..k).map(|j| q[i * k + j] * p[j]).fold(0.0, |a, b| a + b);
            pqp += p[i] * qp[i];
        }
        let max_error = qp.iter().fold(0.0f32, |m, &v| m.max((v - pqp).abs()));
        if max_error < eps {
            break;
        }
        for i in 0..k {
            let diff = (-qp[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}
