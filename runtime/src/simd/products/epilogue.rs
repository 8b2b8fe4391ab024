//! What a GEMM or convolution does to its product before it is stored:
//! `y = after(activation(alpha · (A·B) + beta · bias) + residual)`. The
//! kernels apply it per tile of C right after that tile's product, while the
//! tile is in cache: the bias is written into the tile first and the product
//! accumulated onto it (so the GEMM reads it for free), then activation,
//! residual and the second activation run over the tile's rows, and last a
//! [`Post`] (an elementwise program fused after the contraction) over the
//! same rows, while they are still in cache.

use super::activation::{self, Rows};

/// The activation applied after scale and bias.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// Identity.
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x` if `x ≥ 0`, else `alpha · x`.
    LeakyRelu(f32),
    /// `min(max(x, min), max)`.
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `1 / (1 + e^{−x})`.
    Sigmoid,
    /// `tanh x`.
    Tanh,
    /// `clip(alpha · x + beta, 0, 1)`.
    HardSigmoid {
        /// Slope.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// `x · Φ(x)` (the exact, erf form).
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    /// `x · sigmoid(x)` (Swish with alpha 1).
    Silu,
    /// `x · clip(x / 6 + 1/2, 0, 1)`.
    HardSwish,
}

/// The bias added to the scaled product, broadcast over C (m×n, row-major).
#[derive(Clone, Copy, Debug)]
pub enum Bias<'a> {
    /// No bias.
    None,
    /// One value for every element.
    Scalar(f32),
    /// One value per row (m values; for a convolution, per output channel).
    PerRow(&'a [f32]),
    /// One value per column (n values).
    PerCol(&'a [f32]),
    /// One value per element, in C's layout.
    Full(&'a [f32]),
}

/// What runs over C's finished values last, tile by tile: the elementwise
/// program that follows a contraction ([`super::fused_post`]).
pub trait Post: Sync {
    /// Runs over rows `t.row0..t.row0 + t.rows`, columns `t.col0..t.col0 +
    /// t.cols` of C, whose element (r, c) is element `base + r·t.n + c` of
    /// the whole result, which starts at `whole`. Each element is visited
    /// once, after its final value is in place.
    ///
    /// # Safety
    /// `whole` is the whole result's buffer; no one else touches the tile.
    unsafe fn tile(&self, whole: *mut f32, base: usize, t: &Tile);
}

/// The fused epilogue of a GEMM or convolution.
#[derive(Clone, Copy)]
pub struct Epilogue<'a> {
    /// Scale of the product.
    pub alpha: f32,
    /// The bias.
    pub bias: Bias<'a>,
    /// Scale of the bias.
    pub beta: f32,
    /// The activation.
    pub activation: Activation,
    /// Added after the activation, in C's layout.
    pub residual: Option<&'a [f32]>,
    /// Applied after the residual (a ResNet block's `Relu(conv + x)`).
    pub after: Activation,
    /// Run last over each finished tile.
    pub post: Option<&'a dyn Post>,
    /// Where C's first element lies in the whole result (what `Self::shifted` added up).
    pub base: usize,
}

impl std::fmt::Debug for Epilogue<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epilogue")
            .field("alpha", &self.alpha)
            .field("bias", &self.bias)
            .field("beta", &self.beta)
            .field("activation", &self.activation)
            .field("residual", &self.residual.map(<[f32]>::len))
            .field("after", &self.after)
            .field("post", &self.post.is_some())
            .field("base", &self.base)
            .finish()
    }
}

impl Default for Epilogue<'_> {
    /// The plain product: alpha 1, no bias, no activations, no residual.
    fn default() -> Self {
        Epilogue {
            alpha: 1.0,
            bias: Bias::None,
            beta: 1.0,
            activation: Activation::None,
            residual: None,
            after: Activation::None,
            post: None,
            base: 0,
        }
    }
}

/// A rectangle of an m×n row-major matrix C: rows `row0..row0 + rows`, columns `col0..col0 + cols`.
#[derive(Clone, Copy, Debug)]
pub struct Tile {
    /// First row.
    pub row0: usize,
    /// Rows.
    pub rows: usize,
    /// First column.
    pub col0: usize,
    /// Columns.
    pub cols: usize,
    /// n: C's row length.
    pub n: usize,
}

impl<'a> Epilogue<'a> {
    /// Panics unless the bias and the residual fit an m×n C (a caller's bug, not bad input).
    pub(crate) fn check(&self, m: usize, n: usize) {
        let fits = match self.bias {
            Bias::None | Bias::Scalar(_) => true,
            Bias::PerRow(b) => b.len() >= m,
            Bias::PerCol(b) => b.len() >= n,
            Bias::Full(b) => b.len() >= m * n,
        };
        assert!(fits, "epilogue bias too short for a {m}×{n} result");
        assert!(self.residual.is_none_or(|r| r.len() >= m * n), "epilogue residual too short for a {m}×{n} result");
    }

    /// True when a bias is added (and so [`Self::prefill`] writes the tile before the product).
    pub(crate) fn has_bias(&self) -> bool {
        !matches!(self.bias, Bias::None)
    }

    /// The same epilogue for the sub-matrix of C starting at `offset` (elements) with `rows` rows
    /// of `n`: a per-row bias shifted by `first_row`, a full bias and the residual by `offset`.
    pub(crate) fn shifted(&self, first_row: usize, offset: usize) -> Epilogue<'a> {
        let bias = match self.bias {
            Bias::PerRow(b) => Bias::PerRow(&b[first_row..]),
            Bias::Full(b) => Bias::Full(&b[offset..]),
            other => other,
        };
        Epilogue { bias, residual: self.residual.map(|r| &r[offset..]), base: self.base + offset, ..*self }
    }

    /// Writes `beta · bias` into the tile.
    ///
    /// # Safety
    /// `c` points to an m×n matrix (m ≥ `t.row0 + t.rows`) that no one else touches inside the tile.
    pub(crate) unsafe fn prefill(&self, c: *mut f32, t: &Tile) {
        for r in t.row0..t.row0 + t.rows {
            let row = row_of(c, t, r);
            match self.bias {
                Bias::None => {}
                Bias::Scalar(s) => row.fill(self.beta * s),
                Bias::PerRow(b) => row.fill(self.beta * b[r]),
                Bias::PerCol(b) => scaled_copy(row, &b[t.col0..t.col0 + t.cols], self.beta),
                Bias::Full(b) => scaled_copy(row, &b[r * t.n + t.col0..r * t.n + t.col0 + t.cols], self.beta),
            }
        }
    }

    /// The activations and the residual over a tile that already holds `alpha · product + beta · bias`.
    ///
    /// # Safety
    /// As for [`Self::prefill`].
    pub(crate) unsafe fn finish(&self, c: *mut f32, t: &Tile) {
        let none = |a: &Activation| matches!(a, Activation::None);
        if !none(&self.activation) || self.residual.is_some() || !none(&self.after) {
            // Whole rows follow one another: one span (a convolution over a
            // 1×1 plane has rows of one element).
            let rows = match t.cols == t.n {
                true => Rows { first: c.add(t.row0 * t.n), count: 1, len: t.rows * t.n, stride: 0 },
                false => Rows { first: c.add(t.row0 * t.n + t.col0), count: t.rows, len: t.cols, stride: t.n },
            };
            // Each element goes through activation, residual and the second
            // activation in that order; the tile stays in cache between them,
            // and the residual and the second activation are one pass.
            activation::apply_rows(&self.activation, rows);
            if rows.count == 0 || rows.len == 0 {
                return self.run_post(c, t);
            }
            let residual = self.residual.map(|res| {
                let start = t.row0 * t.n + t.col0;
                let last = start + (rows.count - 1) * rows.stride + rows.len;
                assert!(res.len() >= last, "epilogue: the residual ends before the tile");
                res[start..].as_ptr()
            });
            activation::add_then_apply(&self.after, rows, residual);
        }
        self.run_post(c, t);
    }

    /// The [`Post`], if any, over the finished tile.
    ///
    /// # Safety
    /// As for [`Self::prefill`].
    unsafe fn run_post(&self, c: *mut f32, t: &Tile) {
        if let Some(post) = self.post {
            post.tile(c.sub(self.base), self.base, t);
        }
    }

    /// The whole epilogue over a tile that holds the bare product.
    ///
    /// # Safety
    /// As for [`Self::prefill`].
    pub(crate) unsafe fn apply_tile(&self, c: *mut f32, t: &Tile) {
        for r in t.row0..t.row0 + t.rows {
            let row = row_of(c, t, r);
            let (alpha, beta) = (self.alpha, self.beta);
            match self.bias {
                Bias::None if alpha == 1.0 => {}
                Bias::None => row.iter_mut().for_each(|y| *y *= alpha),
                Bias::Scalar(s) => row.iter_mut().for_each(|y| *y = alpha * *y + beta * s),
                Bias::PerRow(b) => row.iter_mut().for_each(|y| *y = alpha * *y + beta * b[r]),
                Bias::PerCol(b) => {
                    row.iter_mut().zip(&b[t.col0..t.col0 + t.cols]).for_each(|(y, x)| *y = alpha * *y + beta * x)
                }
                Bias::Full(b) => {
                    let start = r * t.n + t.col0;
                    row.iter_mut().zip(&b[start..start + t.cols]).for_each(|(y, x)| *y = alpha * *y + beta * x)
                }
            }
        }
        self.finish(c, t);
    }

    /// Applies the whole epilogue to an m×n row-major `c` that holds the bare product.
    pub fn apply(&self, c: &mut [f32], m: usize, n: usize) {
        assert!(c.len() >= m * n, "epilogue: C holds {} values, not {m}×{n}", c.len());
        self.check(m, n);
        // SAFETY: `c` is borrowed mutably and holds the whole m×n tile.
        unsafe { self.apply_tile(c.as_mut_ptr(), &Tile { row0: 0, rows: m, col0: 0, cols: n, n }) }
    }
}

/// Row `r` of the tile, as a slice.
///
/// # Safety
/// As for [`Epilogue::prefill`].
unsafe fn row_of<'t>(c: *mut f32, t: &Tile, r: usize) -> &'t mut [f32] {
    std::slice::from_raw_parts_mut(c.add(r * t.n + t.col0), t.cols)
}

fn scaled_copy(dst: &mut [f32], src: &[f32], scale: f32) {
    if scale == 1.0 {
        dst.copy_from_slice(src);
    } else {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = scale * s);
    }
}
