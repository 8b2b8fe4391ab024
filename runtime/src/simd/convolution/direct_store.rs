//! Where the direct convolution's kernel ([`super::direct`]) puts a step's
//! finished accumulators: a vector of `L` consecutive **wide** output
//! positions (row length `wq`, of which the last `wq − ow` of each row are
//! thrown away) of one channel of the block.
//!
//! - [`WideRows`]: into the unit's wide rows, which the caller then copies
//!   into the output row by row and runs the [`Epilogue`] over (every
//!   instruction set).
//! - [`Placed`] (AVX-512): straight into the output. The epilogue's scale,
//!   a per-channel or scalar bias and a piecewise-linear activation are
//!   applied in registers; the vector's kept lanes are packed together
//!   (`vcompressps`, a register operation) and stored whole at the
//!   channel's output cursor. The lanes past the kept ones land where the
//!   channel's next vector is stored later in the same call, so only the
//!   store that reaches the band's end is masked. No wide rows, no copy and
//!   no pass of the epilogue over the output: on SqueezeNet's first
//!   convolution (64 channels of 111², 3 MB, more than the L2 cache) the
//!   copy and the epilogue's pass each went through memory.

use super::epilogue::{Activation, Bias, Epilogue};

/// Where a kernel step's vector `v` (of the span) of channel `c` (of the
/// block) goes, `value` its accumulator.
pub(crate) trait Sink<T: Copy> {
    /// # Safety
    /// The processor has the instruction set of `T`; `c` and `v` lie
    /// inside the block and the span the sink was made for.
    unsafe fn put(&mut self, c: usize, v: usize, value: T);

    /// A whole kernel step: `acc[c][v]` is vector `step + v` of channel
    /// `c`. Per channel, the vectors go in increasing order (as [`Placed`]
    /// needs).
    ///
    /// # Safety
    /// As [`Sink::put`], for every vector of the step.
    #[inline(always)]
    unsafe fn put_step<const C: usize, const V: usize>(&mut self, step: usize, acc: &[[T; V]; C]) {
        for (c, lanes) in acc.iter().enumerate() {
            for (v, a) in lanes.iter().enumerate() {
                self.put(c, step + v, *a);
            }
        }
    }
}

/// The unit's wide rows: `C` rows of `span.vectors · L` values.
pub(crate) struct WideRows {
    /// Channel 0's row.
    pub(crate) to: *mut f32,
    /// Values per row.
    pub(crate) row: usize,
}

#[cfg(target_arch = "x86_64")]
impl Sink<std::arch::x86_64::__m512> for WideRows {
    #[inline(always)]
    unsafe fn put(&mut self, c: usize, v: usize, value: std::arch::x86_64::__m512) {
        std::arch::x86_64::_mm512_storeu_ps(self.to.add(c * self.row + v * 16), value);
    }
}

#[cfg(target_arch = "x86_64")]
impl Sink<std::arch::x86_64::__m256> for WideRows {
    #[inline(always)]
    unsafe fn put(&mut self, c: usize, v: usize, value: std::arch::x86_64::__m256) {
        std::arch::x86_64::_mm256_storeu_ps(self.to.add(c * self.row + v * 8), value);
    }
}

/// The most channels a block has ([`Placed`] keeps one bias per channel).
pub(crate) const MAX_BLOCK: usize = 16;

/// Per vector of 16 wide positions: which lanes are outputs (bit per lane)
/// and how many outputs of the band precede the vector's first position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lanes {
    pub(crate) kept: u16,
    pub(crate) before: u32,
}

/// Appends to `table` the [`Lanes`] of each of `vectors` vectors of 16
/// wide positions over a band of `rows` output rows of `ow` columns,
/// wide rows of `wq` (`wq ≥ ow`). Positions past the band are not kept.
pub(crate) fn lanes_table(vectors: usize, rows: usize, ow: usize, wq: usize, table: &mut Vec<Lanes>) {
    let len = rows * ow;
    // one division per vector, then a run of kept lanes per wide row it meets
    let run = |from: usize, to: usize| ((1u32 << to.min(16)) - (1u32 << from.min(16))) as u16;
    table.extend((0..vectors).map(|j| {
        let q0 = j * 16;
        let (mut row, col) = (q0 / wq, q0 % wq);
        let before = (row * ow + col.min(ow)).min(len);
        // lane `l` holds column `col + l − lane0` of `row`, from `lane0`
        let (mut kept, mut lane0, mut first) = (0u16, 0usize, col);
        while lane0 < 16 && row < rows {
            kept |= run(lane0, (lane0 + ow).saturating_sub(first).max(lane0));
            lane0 += wq - first;
            (row, first) = (row + 1, 0);
        }
        Lanes { kept, before: before as u32 }
    }));
}

/// The part of an [`Epilogue`] that [`Placed`] applies in registers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InRegisters {
    /// Scale of the product.
    alpha: f32,
    /// `beta · bias` per channel of the block.
    bias: [f32; MAX_BLOCK],
    /// Whether `alpha · x + bias` is anything but `x`.
    affine: bool,
    /// The activation, if piecewise linear (else `None`, left to [`Self::rest`]).
    activation: Activation,
    /// Whether the epilogue's activation is the one above.
    activation_done: bool,
}

impl InRegisters {
    /// What of `ep` (shifted to the block's first channel) can be applied
    /// in registers for `count` channels: `None` when its bias varies
    /// along the positions (per column, full), which the kernel does not see.
    pub(crate) fn of(ep: &Epilogue, count: usize) -> Option<InRegisters> {
        assert!(count <= MAX_BLOCK, "direct conv: a block of {count} channels");
        let mut bias = [0.0; MAX_BLOCK];
        match ep.bias {
            Bias::None => {}
            Bias::Scalar(s) => bias[..count].fill(ep.beta * s),
            Bias::PerRow(b) => bias[..count].iter_mut().zip(&b[..count]).for_each(|(o, &b)| *o = ep.beta * b),
            Bias::PerCol(_) | Bias::Full(_) => return None,
        }
        let affine = ep.alpha != 1.0 || ep.has_bias();
        let piecewise = matches!(ep.activation, Activation::Relu | Activation::LeakyRelu(_) | Activation::Clip { .. });
        let activation = if piecewise { ep.activation } else { Activation::None };
        Some(InRegisters { alpha: ep.alpha, bias, affine, activation, activation_done: piecewise })
    }

    /// What of `ep` is left to run over the stored outputs: the activation
    /// if it was not applied here, the residual, the second activation, the post.
    pub(crate) fn rest<'a>(&self, ep: &Epilogue<'a>) -> Epilogue<'a> {
        let activation = if self.activation_done { Activation::None } else { ep.activation };
        Epilogue { alpha: 1.0, bias: Bias::None, beta: 1.0, activation, ..*ep }
    }
}

/// A unit's outputs, written by the AVX-512 kernel itself (see the module's notes).
pub(crate) struct Placed<'t> {
    /// Channel 0's first output of the band.
    pub(crate) to: *mut f32,
    /// From one channel's outputs to the next's.
    pub(crate) plane: usize,
    /// The block's channels that exist (the others are not stored).
    pub(crate) count: usize,
    /// Outputs per channel in the band.
    pub(crate) len: usize,
    /// Per vector of the span (see [`lanes_table`]).
    pub(crate) lanes: &'t [Lanes],
    /// The epilogue's part applied here.
    pub(crate) regs: InRegisters,
}

#[cfg(target_arch = "x86_64")]
impl Placed<'_> {
    /// `x` through the epilogue's part in registers, for channel `c`.
    #[inline(always)]
    unsafe fn finish(&self, c: usize, x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
        use std::arch::x86_64::*;
        let r = &self.regs;
        let mut x = x;
        if r.affine {
            x = _mm512_fmadd_ps(_mm512_set1_ps(r.alpha), x, _mm512_set1_ps(r.bias[c]));
        }
        // as `activation::piecewise`: `max(c, x)` and `min(c, x)` are `x` where `x` is NaN
        let zero = _mm512_setzero_ps();
        match r.activation {
            Activation::Relu => _mm512_max_ps(zero, x),
            Activation::LeakyRelu(a) => {
                _mm512_add_ps(_mm512_max_ps(zero, x), _mm512_mul_ps(_mm512_set1_ps(a), _mm512_min_ps(zero, x)))
            }
            Activation::Clip { min, max } => _mm512_min_ps(_mm512_set1_ps(max), _mm512_max_ps(_mm512_set1_ps(min), x)),
            _ => x,
        }
    }

    /// Channel `c`'s vector `v`, finished, stored at its place.
    #[inline(always)]
    unsafe fn store(&self, c: usize, lanes: Lanes, x: std::arch::x86_64::__m512) {
        use std::arch::x86_64::*;
        let Lanes { kept, before } = lanes;
        let before = before as usize;
        let to = self.to.add(c * self.plane + before);
        if before + 16 <= self.len {
            if kept == u16::MAX {
                // every lane an output (most vectors of wide rows): no packing
                _mm512_storeu_ps(to, x);
            } else {
                // the lanes past the kept ones are overwritten by the channel's next vector
                _mm512_storeu_ps(to, _mm512_maskz_compress_ps(kept, x));
            }
        } else {
            let n = kept.count_ones();
            debug_assert!(before + n as usize <= self.len, "direct conv: a vector's outputs past the band");
            _mm512_mask_storeu_ps(to, ((1u32 << n) - 1) as u16, _mm512_maskz_compress_ps(kept, x));
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Sink<std::arch::x86_64::__m512> for &Placed<'_> {
    #[inline(always)]
    unsafe fn put(&mut self, c: usize, v: usize, value: std::arch::x86_64::__m512) {
        if c < self.count {
            self.store(c, self.lanes[v], self.finish(c, value));
        }
    }

    /// Vector by vector, its table entry read once for the block's channels.
    #[inline(always)]
    unsafe fn put_step<const C: usize, const V: usize>(
        &mut self,
        step: usize,
        acc: &[[std::arch::x86_64::__m512; V]; C],
    ) {
        let placed: &Placed = self;
        let count = placed.count.min(C);
        for v in 0..V {
            let lanes = placed.lanes[step + v];
            for (c, row) in acc.iter().enumerate().take(count) {
                placed.store(c, lanes, placed.finish(c, row[v]));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of a band whose wide rows are longer than a vector and
    /// one whose rows are shorter: each kept lane is an output, counted once, in order.
    #[test]
    fn the_lanes_table_counts_each_output_once() {
        for (rows, ow, wq) in [
            (3usize, 20usize, 22usize),
            (4, 13, 15),
            (2, 5, 7),
            (1, 16, 16),
            (5, 40, 41),
            (6, 1, 3),
            (3, 3, 3),
            (2, 17, 19),
        ] {
            let vectors = (rows * wq).div_ceil(16);
            let mut table = Vec::new();
            lanes_table(vectors, rows, ow, wq, &mut table);
            let mut seen = 0u32;
            for (j, lanes) in table.iter().enumerate() {
                assert_eq!(lanes.before, seen, "vector {j} of {rows}×{ow} in rows of {wq}");
                for l in 0..16 {
                    let q = j * 16 + l;
                    let kept = q < rows * wq && q % wq < ow;
                    assert_eq!(lanes.kept >> l & 1 == 1, kept, "lane {l} of vector {j}");
                }
                seen += lanes.kept.count_ones();
            }
            assert_eq!(seen as usize, rows * ow);
        }
    }
}
