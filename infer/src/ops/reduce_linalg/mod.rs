//! Operator rules: reductions and linear algebra — the `Reduce*` family and
//! `ArgMax`/`ArgMin` ([`reduce`]), `MatMul`, `MatMulInteger`, `QLinearMatMul`,
//! `Gemm` and `Det` ([`matmul`]), `Einsum` ([`einsum`]), `TopK`, `CumSum` and
//! `CumProd` ([`select`]), and the losses `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss` ([`loss`]). This module holds the registrations
//! and the few helpers the submodules share.

pub(super) use super::common::{set_tensor, unknown_shape};
use super::{OpTable, ONNX};
use crate::rule::OpCtx;
use diamond_ir::term::{DimTerm, RowTerm};
use diamond_ir::ElemType;

mod einsum;
mod loss;
mod matmul;
mod reduce;
mod select;

/// The reductions whose `axes` became an input at opset 18 (`ReduceSum`: 13).
const REDUCTIONS: &[&str] = &[
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
];

pub(crate) fn register(t: &mut OpTable) {
    t.add_all(ONNX, REDUCTIONS, 1, reduce::reduce);
    t.add_all(ONNX, &["ArgMax", "ArgMin"], 1, reduce::arg_extremum);
    t.add(ONNX, "MatMul", 1, matmul::matmul);
    t.add(ONNX, "MatMulInteger", 10, matmul::matmul_integer);
    t.add(ONNX, "QLinearMatMul", 10, matmul::qlinear_matmul);
    t.add(ONNX, "Gemm", 1, matmul::gemm);
    t.add(ONNX, "Det", 11, matmul::det);
    t.add(ONNX, "Einsum", 12, einsum::einsum);
    t.add(ONNX, "TopK", 1, select::top_k);
    t.add(ONNX, "CumSum", 11, select::cumulative);
    t.add(ONNX, "CumProd", 26, select::cumulative);
    t.add(ONNX, "NegativeLogLikelihoodLoss", 12, loss::nll_loss);
    t.add(ONNX, "SoftmaxCrossEntropyLoss", 12, loss::softmax_cross_entropy);
}

/// The NumPy broadcast of several batch prefixes: the prefix itself when at
/// most one is not known empty, otherwise a fresh row every prefix
/// broadcasts to (`RowLe`), each constraint naming its operand.
pub(super) fn broadcast_prefixes(ctx: &mut OpCtx, prefixes: Vec<(String, RowTerm)>, why: &'static str) -> RowTerm {
    let is_empty = |r: &RowTerm| r.var.is_none() && r.flank_len() == 0;
    let non_empty: Vec<(String, RowTerm)> = prefixes.into_iter().filter(|(_, p)| !is_empty(p)).collect();
    if non_empty.len() <= 1 {
        return non_empty.into_iter().next().map(|(_, p)| p).unwrap_or_else(|| RowTerm::closed(Vec::new()));
    }
    let joined = ctx.fresh_row();
    ctx.broadcast_into(joined.clone(), non_empty, why);
    joined
}

/// `prefix` (a row) followed by the dimensions `tail`.
pub(super) fn row_then(prefix: RowTerm, tail: Vec<DimTerm>) -> RowTerm {
    let mut row = prefix;
    row.trailing.extend(tail);
    row
}

/// Whether `t` is an integer element type (signed or unsigned, any width).
pub(super) fn is_integer(t: ElemType) -> bool {
    super::common::is_int_elem_type(t)
        || matches!(t, ElemType::Int4 | ElemType::Uint4 | ElemType::Int2 | ElemType::Uint2)
}
