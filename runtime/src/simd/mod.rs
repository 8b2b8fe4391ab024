//! The SIMD CPU backend's kernels. This file only declares the modules the
//! GEMM/convolution work adds; the backend's session, elementwise and
//! reduction kernels join it when the branches merge.

pub mod activation;
pub mod conv;
pub mod cpu;
pub mod depthwise;
pub mod epilogue;
pub mod gemm;
pub mod im2col;
pub mod portable_gemm;
