//! Contractions (MatMul, Gemm, Conv) until the fast kernels of `gemm.rs`
//! and `conv.rs` take them: the node runs on the reference kernels and its
//! epilogue program after it. This is the one place that switch touches.

use super::session::Planned;
use crate::kernel::Contraction;

/// The step that computes contraction `c`'s raw result.
pub(crate) fn contraction(c: &Contraction) -> Planned {
    Planned::Nodes(vec![c.node])
}
