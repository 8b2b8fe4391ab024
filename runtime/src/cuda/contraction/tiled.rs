//! The tiled kernel of a batched product `out[g, m, n] = Σ_k A·B`: one
//! block per `TILE_M` × `TILE_N` output tile (a grid-stride loop over the
//! tiles of every batch), the contracted axis in steps of `K_STEP`: the
//! block's threads load the step's `A` and `B` panels cooperatively into
//! `__shared__` memory (zeros outside the sizes, and for Conv outside the
//! padded input, gathered on the fly: an implicit GEMM), meet at
//! `__syncthreads()`, and each thread accumulates a `MICRO` × `MICRO`
//! register tile (rows `ty + 16·i`, columns `tx + 16·j`). Each accumulator
//! then gets the node's own terms (Gemm's `alpha` and `beta · C`, Conv's
//! bias) and goes to the epilogue function, or is stored as the product.
//! Loads convert 16-bit storage to `float`; everything is computed in `float`.

use super::geometry::Geometry;
use crate::cuda::codegen::{literal, load_expr};
use diamond_ir::ElemType;
use std::fmt::Write;

/// Output rows per tile.
pub const TILE_M: u32 = 64;
/// Output columns per tile.
pub const TILE_N: u32 = 64;
/// Contracted elements per shared-memory step.
pub const K_STEP: u32 = 16;
/// Rows and columns of a thread's register tile.
pub const MICRO: u32 = 4;
/// Threads per block.
pub const THREADS: u32 = (TILE_M / MICRO) * (TILE_N / MICRO);

/// What the kernel does with each finished value `v` at `(g, m, n)`:
/// a statement using `L`, the product's linear index.
pub(crate) struct Finish {
    /// The statement (a call of the epilogue function, or a store).
    pub statement: String,
}

/// The element types of the node's inputs (A, B, then C or the bias).
pub(crate) struct InputTypes {
    pub a: ElemType,
    pub b: ElemType,
    pub c: Option<ElemType>,
}

/// The body of the `__global__` function (after its opening line).
pub(crate) fn body(g: &Geometry, types: &InputTypes, finish: &Finish) -> String {
    let mut s = String::new();
    let (tm, tn, tk) = (TILE_M, TILE_N, K_STEP);
    let threads_n = TILE_N / MICRO;
    let _ = writeln!(s, "  __shared__ float As[{tk}][{tm}];");
    let _ = writeln!(s, "  __shared__ float Bs[{tk}][{tn}];");
    s.push_str(&sizes(g));
    let _ = writeln!(s, "  const int tx = threadIdx.x % {threads_n}, ty = threadIdx.x / {threads_n};");
    let _ = writeln!(s, "  const long long tiles_m = (GM + {}) / {tm}, tiles_n = (GN + {}) / {tn};", tm - 1, tn - 1);
    s.push_str("  const long long n_tiles = GB * tiles_m * tiles_n;\n");
    s.push_str("  for (long long t = blockIdx.x; t < n_tiles; t += gridDim.x) {\n");
    s.push_str("    const long long g = t / (tiles_m * tiles_n);\n");
    let _ = writeln!(s, "    const long long m0 = (t / tiles_n) % tiles_m * {tm}, n0 = t % tiles_n * {tn};");
    s.push_str(&tile_setup(g));
    let _ = writeln!(s, "    float acc[{MICRO}][{MICRO}];");
    let _ = writeln!(
        s,
        "#pragma unroll\n    for (int i = 0; i < {MICRO}; i++)\n#pragma unroll\n      for (int j = 0; j < {MICRO}; j++) acc[i][j] = 0.0f;"
    );
    let _ = writeln!(s, "    for (long long k0 = 0; k0 < GK; k0 += {tk}) {{");
    // Each thread loads (TILE·K_STEP / THREADS) elements of each panel;
    // consecutive threads read consecutive k of A and consecutive n of B.
    let per_thread = tm * tk / THREADS;
    let _ = writeln!(s, "#pragma unroll\n      for (int r = 0; r < {per_thread}; r++) {{");
    let _ = writeln!(s, "        const int e = threadIdx.x + r * {THREADS};");
    let _ = writeln!(s, "        const long long am = m0 + e / {tk}, ak = k0 + e % {tk};");
    let _ = writeln!(s, "        As[e % {tk}][e / {tk}] = (am < GM && ak < GK) ? {} : 0.0f;", a_load(g, types));
    let _ = writeln!(s, "        const long long bk = k0 + e / {tn}, bn = n0 + e % {tn};");
    s.push_str("        float bv = 0.0f;\n");
    s.push_str("        if (bk < GK && bn < GN) {\n");
    s.push_str(&b_load(g, types));
    s.push_str("        }\n");
    let _ = writeln!(s, "        Bs[e / {tn}][e % {tn}] = bv;");
    s.push_str("      }\n      __syncthreads();\n");
    let _ = writeln!(s, "#pragma unroll\n      for (int kk = 0; kk < {tk}; kk++) {{");
    let _ = writeln!(s, "        float a[{MICRO}], b[{MICRO}];");
    let _ = writeln!(
        s,
        "#pragma unroll\n        for (int i = 0; i < {MICRO}; i++) a[i] = As[kk][ty + {} * i];",
        tm / MICRO
    );
    let _ = writeln!(
        s,
        "#pragma unroll\n        for (int j = 0; j < {MICRO}; j++) b[j] = Bs[kk][tx + {} * j];",
        tn / MICRO
    );
    let _ = writeln!(
        s,
        "#pragma unroll\n        for (int i = 0; i < {MICRO}; i++)\n#pragma unroll\n          for (int j = 0; j < {MICRO}; j++) acc[i][j] += a[i] * b[j];"
    );
    s.push_str("      }\n      __syncthreads();\n    }\n");
    let _ = writeln!(s, "#pragma unroll\n    for (int i = 0; i < {MICRO}; i++) {{");
    let _ = writeln!(s, "#pragma unroll\n      for (int j = 0; j < {MICRO}; j++) {{");
    let _ = writeln!(s, "        const long long m = m0 + ty + {} * i, n = n0 + tx + {} * j;", tm / MICRO, tn / MICRO);
    s.push_str("        if (m < GM && n < GN) {\n");
    s.push_str("          float v = acc[i][j];\n");
    s.push_str(&node_terms(g, types.c));
    let _ = writeln!(s, "          const long long L = {};", linear(g));
    let _ = writeln!(s, "          {}", finish.statement);
    s.push_str("        }\n      }\n    }\n  }\n}\n");
    s
}

/// `GB`, `GM`, `GN`, `GK`: the batched product's sizes from the arguments.
fn sizes(g: &Geometry) -> String {
    match g {
        Geometry::MatMul { batch_rank, .. } => {
            let batch: Vec<String> = (0..*batch_rank).map(|i| format!("B{i}")).collect();
            let batch = if batch.is_empty() { "1LL".to_string() } else { batch.join(" * ") };
            format!("  const long long GB = {batch}, GM = M, GN = N, GK = K;\n")
        }
        Geometry::Gemm { .. } => "  const long long GB = 1LL, GM = M, GN = N, GK = K;\n".into(),
        Geometry::Conv { group, .. } => format!(
            "  const long long GB = {group}LL, GM = OC / {group}LL, GN = NB * OH * OW, GK = C / {group}LL * KH * KW;\n"
        ),
    }
}

/// Per tile: MatMul's operand offsets for batch `g`.
fn tile_setup(g: &Geometry) -> String {
    let Geometry::MatMul { batch_rank, .. } = g else { return String::new() };
    let mut s = String::from("    long long a_base = 0, b_base = 0, rest_g = g;\n");
    for i in (0..*batch_rank).rev() {
        let _ = writeln!(s, "    a_base += rest_g % B{i} * SA{i}; b_base += rest_g % B{i} * SB{i}; rest_g /= B{i};");
    }
    s
}

/// `A(g, am, ak)` as a float expression (in range).
/// Conv's `A` is its weight: the node's second input, `cb`.
fn a_load(g: &Geometry, types: &InputTypes) -> String {
    let t = types.a;
    let at = match g {
        Geometry::MatMul { a_vector: true, .. } => "a_base + ak".to_string(),
        Geometry::MatMul { .. } => "a_base + am * K + ak".to_string(),
        Geometry::Gemm { trans_a: true, .. } => "ak * M + am".to_string(),
        Geometry::Gemm { .. } => "am * K + ak".to_string(),
        // W[oc, c, kh, kw] is dense over (c, kh, kw): the group's k.
        Geometry::Conv { .. } => return load_expr(types.b, "cb[(g * GM + am) * GK + ak]"),
    };
    load_expr(t, &format!("ca[{at}]"))
}

/// Statements setting `bv` to `B(g, bk, bn)` (in range of the sizes).
/// Conv's `B` is its input, gathered: the node's first input, `ca`.
fn b_load(g: &Geometry, types: &InputTypes) -> String {
    let t = types.b;
    let ind = "          ";
    match g {
        Geometry::MatMul { b_vector, .. } => {
            let at = if *b_vector { "b_base + bk" } else { "b_base + bk * N + bn" };
            format!("{ind}bv = {};\n", load_expr(t, &format!("cb[{at}]")))
        }
        Geometry::Gemm { trans_b, .. } => {
            let at = if *trans_b { "bn * K + bk" } else { "bk * N + bn" };
            format!("{ind}bv = {};\n", load_expr(t, &format!("cb[{at}]")))
        }
        Geometry::Conv { group, strides, pads, dilations, .. } => {
            let mut s = String::new();
            let _ = writeln!(s, "{ind}const long long nb = bn / (OH * OW), oh = bn / OW % OH, ow = bn % OW;");
            let _ = writeln!(s, "{ind}const long long c = bk / (KH * KW), kh = bk / KW % KH, kw = bk % KW;");
            let _ = writeln!(
                s,
                "{ind}const long long ih = oh * {}LL - {}LL + kh * {}LL;",
                strides[0], pads[0], dilations[0]
            );
            let _ = writeln!(
                s,
                "{ind}const long long iw = ow * {}LL - {}LL + kw * {}LL;",
                strides[1], pads[1], dilations[1]
            );
            let at = format!("((nb * C + g * (C / {group}LL) + c) * H + ih) * W + iw");
            let _ = writeln!(
                s,
                "{ind}if (ih >= 0 && ih < H && iw >= 0 && iw < W) bv = {};",
                load_expr(types.a, &format!("ca[{at}]"))
            );
            s
        }
    }
}

/// Gemm's `alpha · v + beta · C`, Conv's `v + bias`.
fn node_terms(g: &Geometry, c: Option<ElemType>) -> String {
    let ind = "          ";
    match (g, c) {
        (Geometry::Gemm { alpha, beta, c: true, .. }, Some(t)) => format!(
            "{ind}v = {} * v + {} * {};\n",
            literal(f64::from(*alpha), "float"),
            literal(f64::from(*beta), "float"),
            load_expr(t, "cc[m * CM + n * CN]")
        ),
        (Geometry::Gemm { alpha, .. }, _) if *alpha != 1.0 => {
            format!("{ind}v = {} * v;\n", literal(f64::from(*alpha), "float"))
        }
        (Geometry::Conv { bias: true, .. }, Some(t)) => format!("{ind}v += {};\n", load_expr(t, "cc[g * GM + m]")),
        _ => String::new(),
    }
}

/// The product's linear index of `(g, m, n)` (C order of the node's result).
fn linear(g: &Geometry) -> &'static str {
    match g {
        Geometry::MatMul { .. } => "(g * GM + m) * GN + n",
        Geometry::Gemm { .. } => "m * GN + n",
        Geometry::Conv { .. } => "(n / (OH * OW) * OC + g * GM + m) * (OH * OW) + n % (OH * OW)",
    }
}
