//! A `DynamicQuantizeLSTM`'s recurrence weight kept in 8 bits: each step
//! of the LSTM multiplies the hidden state by `R` (`4·hidden × hidden`),
//! which in `f32` is 4 MiB a direction for a hidden size of 512, read from
//! the last-level cache at every step (a CRNN recognizer: 64 such reads a
//! run). Kept as the operator stores it, one byte a weight, the read is a
//! quarter of that and mostly stays in L2.
//!
//! Row `j` of the product is `scale_j · (Σ_k h_k · q_jk − zero_j · Σ_k h_k)`:
//! the integers are widened to `f32` in the registers (AVX-512, AVX2 or the
//! portable loop), and the scale and zero point apply once per row. This
//! is the dequantized weight's product up to the order of the roundings.

use super::cpu;

/// One direction's `R` in 8 bits, row-major `rows × cols` (the LSTM's
/// `4·hidden × hidden`), each row's scale and zero point.
pub(crate) struct Recurrence8 {
    q: Vec<i8>,
    scale: Vec<f32>,
    zero: Vec<f32>,
    rows: usize,
    cols: usize,
}

impl Recurrence8 {
    /// From the operator's `[hidden, 4·hidden]` integers of one direction
    /// (`unsigned`: `u8` values, stored shifted by −128, their zero point
    /// too: the differences are the same), and one scale and zero point per
    /// column or for all.
    pub(crate) fn from_columns(
        values: &[i16],
        unsigned: bool,
        (hidden, gates): (usize, usize),
        scale: &[f32],
        zero: &[f32],
    ) -> Option<Self> {
        let (rows, cols) = (gates, hidden);
        if values.len() != rows * cols || !(scale.len() == 1 || scale.len() == rows) || zero.len() != scale.len() {
            return None;
        }
        let shift = if unsigned { 128 } else { 0 };
        let mut q = vec![0i8; rows * cols];
        for k in 0..cols {
            for j in 0..rows {
                q[j * cols + k] = i8::try_from(values[k * rows + j] - shift).ok()?;
            }
        }
        let per_row = |v: &[f32], minus: f32| -> Vec<f32> {
            (0..rows).map(|j| v[if v.len() == 1 { 0 } else { j }] - minus).collect()
        };
        Some(Recurrence8 { q, scale: per_row(scale, 0.0), zero: per_row(zero, shift as f32), rows, cols })
    }

    /// The bytes it holds.
    pub(crate) fn byte_size(&self) -> u64 {
        (self.q.len() + 8 * self.rows) as u64
    }

    /// `out[j] = Σ_k h[k] · R[j][k]` for every row `j` (`h` of `cols`,
    /// `out` of `rows` values).
    pub(crate) fn product(&self, h: &[f32], out: &mut [f32]) {
        assert!(h.len() == self.cols && out.len() == self.rows, "a {}×{} recurrence", self.rows, self.cols);
        let sum: f32 = h.iter().sum();
        #[cfg(target_arch = "x86_64")]
        {
            if cpu::avx512() {
                // SAFETY: the processor has AVX-512 F.
                unsafe { dots_avx512(&self.q, self.cols, h, out) };
            } else if cpu::avx2_fma() {
                // SAFETY: the processor has AVX2 and FMA.
                unsafe { dots_avx2(&self.q, self.cols, h, out) };
            } else {
                dots(&self.q, self.cols, h, out);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        dots(&self.q, self.cols, h, out);
        for ((o, &s), &z) in out.iter_mut().zip(&self.scale).zip(&self.zero) {
            *o = s * (*o - z * sum);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dots_avx512(q: &[i8], cols: usize, h: &[f32], out: &mut [f32]) {
    dots(q, cols, h, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_avx2(q: &[i8], cols: usize, h: &[f32], out: &mut [f32]) {
    dots(q, cols, h, out)
}

/// `out[j] = Σ_k h[k] · q[j·cols + k]`: four rows at a time, sixteen
/// lanes of partial sums each (four independent chains of additions, so
/// that their latency overlaps; widening loops the compiler vectorizes for
/// the enabled features).
#[inline(always)]
fn dots(q: &[i8], cols: usize, h: &[f32], out: &mut [f32]) {
    const LANES: usize = 16;
    const ROWS: usize = 4;
    let whole = cols / LANES * LANES;
    let mut blocks = q.chunks_exact(ROWS * cols);
    let mut outs = out.chunks_exact_mut(ROWS);
    for (block, o) in (&mut blocks).zip(&mut outs) {
        let mut acc = [[0f32; LANES]; ROWS];
        for k in (0..whole).step_by(LANES) {
            let hs = &h[k..k + LANES];
            for (r, a) in acc.iter_mut().enumerate() {
                let qs = &block[r * cols + k..][..LANES];
                for i in 0..LANES {
                    a[i] += hs[i] * f32::from(qs[i]);
                }
            }
        }
        for (r, (a, o)) in acc.iter().zip(o.iter_mut()).enumerate() {
            let row = &block[r * cols..][..cols];
            let tail: f32 = row[whole..].iter().zip(&h[whole..]).map(|(&x, &y)| y * f32::from(x)).sum();
            *o = a.iter().sum::<f32>() + tail;
        }
    }
    for (row, o) in blocks.remainder().chunks_exact(cols).zip(outs.into_remainder()) {
        *o = row.iter().zip(h).map(|(&x, &y)| y * f32::from(x)).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_8_bit_product_is_the_dequantized_one() {
        let (hidden, gates) = (37, 4 * 37);
        let values: Vec<i16> = (0..hidden * gates).map(|i| ((i * 7919) % 256) as i16).collect();
        let scale: Vec<f32> = (0..gates).map(|j| 0.001 + j as f32 * 1e-5).collect();
        let zero: Vec<f32> = (0..gates).map(|j| (j % 7) as f32 + 120.0).collect();
        let r = Recurrence8::from_columns(&values, true, (hidden, gates), &scale, &zero).unwrap();
        let h: Vec<f32> = (0..hidden).map(|k| (k as f32 * 0.37).sin()).collect();
        let mut got = vec![0f32; gates];
        r.product(&h, &mut got);
        for j in 0..gates {
            let want: f64 = (0..hidden)
                .map(|k| {
                    f64::from(h[k]) * (f64::from(values[k * gates + j]) - f64::from(zero[j])) * f64::from(scale[j])
                })
                .sum();
            assert!((f64::from(got[j]) - want).abs() < 1e-4 * (1.0 + want.abs()), "row {j}: {} against {want}", got[j]);
        }
    }
}
