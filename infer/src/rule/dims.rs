//! The dimension terms of ONNX sizes: a known size (`1` the claim-free
//! unit unless units are claims) and a size expression over rigid symbols.

use diamond_ir::term::{Basis, Dim, Size, SizeExpr};

/// The dimension for a known ONNX size: `1` is the claim-free unit unless
/// `strict_units`, every other size `n_default`.
pub fn size_dim(n: u64, strict_units: bool) -> Dim {
    if n == 1 && !strict_units {
        Dim::unit()
    } else {
        Dim::known(n)
    }
}

/// The dimension for a size expression over rigid symbols (constants fold).
pub fn expr_dim(e: SizeExpr) -> Option<Dim> {
    match e.as_constant() {
        Some(n) => Some(size_dim(u64::try_from(n).ok()?, false)),
        None => Some(Dim { size: Size::Symbolic(Box::new(e)), basis: Basis::Default }),
    }
}
