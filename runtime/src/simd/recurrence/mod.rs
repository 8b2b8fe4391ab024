//! The recurrent operators LSTM, GRU and RNN on `f32`, and the 8-bit recurrence weight of a
//! dynamically quantized LSTM.
//!
//! - `recurrent.rs` — The recurrent operators `LSTM`, `GRU` and `RNN` on `f32`, the way onnxruntime computes them: the input's contribution to every gate at every time step is one product for the whole sequence (`X · Wᵀ` plus the biases, [`sgemm_on`](super::gemm::sgemm_on)), and each step then multiplies only the previous hidden state by the recurrence weight (`H · Rᵀ`: a GEMV per batch row, with no packing, through the few-rows product) and applies the gates element by element with the vectorized [`math`](super::math) functions.
//! - `recurrence_8bit.rs` — A `DynamicQuantizeLSTM`'s recurrence weight kept in 8 bits: each step of the LSTM multiplies the hidden state by `R` (`4·hidden × hidden`), which in `f32` is 4 MiB a direction for a hidden size of 512, read from the last-level cache at every step (a CRNN recognizer: 64 such reads a run).

#[allow(unused_imports)]
use super::*;

pub(in crate::simd) mod recurrence_8bit;
pub mod recurrent;
