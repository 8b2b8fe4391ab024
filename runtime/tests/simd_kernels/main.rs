//! The SIMD backend's GEMM and convolution kernels agree with the reference
//! executor's MatMul, Gemm and Conv followed by the epilogue's operators, on
//! random shapes (size-1 and odd sizes included), transposed and strided
//! views, every bias and activation, groups, depthwise and pointwise
//! convolutions, padding, strides and dilations; on one thread and on
//! several (so that C is cut into tiles both ways). The portable kernels,
//! and the direct convolution and im2col each forced onto every shape, are
//! checked the same way by re-running these tests in a child process with
//! `DIAMOND_SIMD` and `DIAMOND_DIRECT` set.

mod activations;
mod elementwise;
mod gather;
mod norm;
mod oracle;
mod pool;
mod recurrent;
mod reductions;
mod relayout;

use diamond_runtime::simd::conv::{conv2d, conv2d_keeping, Conv2d};
use diamond_runtime::simd::epilogue::{Activation, Bias, Epilogue, Post, Tile};
use diamond_runtime::simd::gemm::{batched_matmul, batched_matmul_keeping, sgemm, MatRef};
use diamond_runtime::SplitMix64;
use oracle::{assert_close, int, ints, Net};
use proptest::prelude::*;

fn values(seed: u64, len: usize) -> Vec<f32> {
    let mut rng = SplitMix64(seed);
    (0..len).map(|_| (rng.unit() * 2.0 - 1.0) as f32).collect()
}

const ACTIVATIONS: [Activation; 11] = [
    Activation::None,
    Activation::Relu,
    Activation::LeakyRelu(0.1),
    Activation::Clip { min: -0.5, max: 0.75 },
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::HardSigmoid { alpha: 0.2, beta: 0.5 },
    Activation::Gelu,
    Activation::GeluTanh,
    Activation::Silu,
    Activation::HardSwish,
];

/// What the epilogue holds, drawn by proptest; the data comes from the seed.
#[derive(Clone, Copy, Debug)]
struct EpilogueSpec {
    alpha: f32,
    beta: f32,
    /// 0 none, 1 scalar, 2 per row, 3 per column, 4 full.
    bias: u8,
    activation: usize,
    residual: bool,
    /// The activation after the residual.
    after: usize,
    /// A [`Post`] (`y → 2y + mark(p)`, the stand-in for a fused program) over each finished tile.
    post: bool,
}

/// A post that rewrites the element `y` at position `p` of the whole result
/// as `2y + mark(p)`: missed, repeated, given a wrong position (`base`) or
/// run before the element's final value, the result differs from the
/// reference's followed by the same map.
struct Doubling;

/// What [`Doubling`] adds at position `p`.
fn mark(p: usize) -> f32 {
    (p % 7) as f32 * 0.25
}

impl Post for Doubling {
    unsafe fn tile(&self, whole: *mut f32, base: usize, t: &Tile) {
        for r in t.row0..t.row0 + t.rows {
            for c in t.col0..t.col0 + t.cols {
                let p = base + r * t.n + c;
                let y = whole.add(p);
                *y = 2.0 * *y + mark(p);
            }
        }
    }
}

/// The reference's result `want` followed by the post, when the spec has one.
fn posted(spec: &EpilogueSpec, want: Vec<f64>) -> Vec<f64> {
    if spec.post {
        want.into_iter().enumerate().map(|(p, y)| 2.0 * y + f64::from(mark(p))).collect()
    } else {
        want
    }
}

fn epilogue_spec() -> impl Strategy<Value = EpilogueSpec> {
    (
        prop_oneof![Just(1.0f32), -2.0f32..2.0],
        prop_oneof![Just(1.0f32), -2.0f32..2.0],
        0u8..5,
        0..ACTIVATIONS.len(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(0), 0..ACTIVATIONS.len()],
    )
        .prop_map(|(alpha, beta, bias, activation, residual, post, after)| EpilogueSpec {
            alpha,
            beta,
            bias,
            activation,
            residual,
            after,
            post,
        })
}

/// The epilogue's data for an m×n result (`rows` bias values per row, `cols` per column,
/// `full` values for the full bias and residual).
struct EpilogueData {
    bias: Vec<f32>,
    residual: Vec<f32>,
}

impl EpilogueData {
    fn new(seed: u64, full: usize) -> EpilogueData {
        EpilogueData { bias: values(seed ^ 0xb1a5, full.max(1)), residual: values(seed ^ 0x7e5, full) }
    }

    fn epilogue(&self, spec: &EpilogueSpec) -> Epilogue<'_> {
        let bias = match spec.bias {
            0 => Bias::None,
            1 => Bias::Scalar(self.bias[0]),
            2 => Bias::PerRow(&self.bias),
            3 => Bias::PerCol(&self.bias),
            _ => Bias::Full(&self.bias),
        };
        Epilogue {
            alpha: spec.alpha,
            bias,
            beta: spec.beta,
            activation: ACTIVATIONS[spec.activation],
            residual: spec.residual.then_some(&self.residual[..]),
            after: ACTIVATIONS[spec.after],
            post: spec.post.then_some(&Doubling as &dyn Post),
            base: 0,
        }
    }
}

/// How an operand is stored: row-major, transposed (its transpose row-major), or row-major with
/// padded rows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    RowMajor,
    Transposed,
    Padded(usize),
}

fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::Transposed), (1usize..5).prop_map(Layout::Padded)]
}

/// A rows×cols operand stored as `layout` says: (storage, view).
fn operand(seed: u64, rows: usize, cols: usize, layout: Layout) -> Vec<f32> {
    let len = match layout {
        Layout::RowMajor | Layout::Transposed => rows * cols,
        Layout::Padded(pad) => rows * (cols + pad),
    };
    values(seed, len)
}

fn view(data: &[f32], rows: usize, cols: usize, layout: Layout) -> MatRef<'_> {
    match layout {
        Layout::RowMajor => MatRef::row_major(data, rows, cols),
        Layout::Transposed => MatRef::row_major(data, cols, rows).t(),
        Layout::Padded(pad) => MatRef { data, rows, cols, row_stride: (cols + pad) as isize, col_stride: 1 },
    }
}

fn dense(v: &MatRef) -> Vec<f32> {
    let mut out = Vec::with_capacity(v.rows * v.cols);
    for r in 0..v.rows {
        for c in 0..v.cols {
            out.push(v.data[(r as isize * v.row_stride + c as isize * v.col_stride) as usize]);
        }
    }
    out
}

/// One sgemm case against the reference: Gemm (with transA/transB for transposed storage)
/// when no operand is padded, else MatMul of dense copies.
fn check_sgemm(m: usize, k: usize, n: usize, layouts: (Layout, Layout), spec: &EpilogueSpec, seed: u64) {
    let a_data = operand(seed, m, k, layouts.0);
    let b_data = operand(seed ^ 0xbbbb, k, n, layouts.1);
    let (a, b) = (view(&a_data, m, k, layouts.0), view(&b_data, k, n, layouts.1));
    let data = EpilogueData::new(seed, m * n);
    let ep = data.epilogue(spec);
    let mut got = vec![f32::NAN; m * n];
    sgemm(a, b, &mut got, &ep);

    let mut net = Net::new();
    let padded = |l: Layout| matches!(l, Layout::Padded(_));
    let product = if padded(layouts.0) || padded(layouts.1) {
        let (x, y) = (net.input(&[m, k], &dense(&a)), net.input(&[k, n], &dense(&b)));
        net.node("MatMul", &[&x, &y], vec![])
    } else {
        let stored = |l: Layout, r: usize, c: usize| if l == Layout::Transposed { [c, r] } else { [r, c] };
        let x = net.input(&stored(layouts.0, m, k), &a_data);
        let y = net.input(&stored(layouts.1, k, n), &b_data);
        let trans = |l: Layout| i64::from(l == Layout::Transposed);
        net.node("Gemm", &[&x, &y], vec![int("transA", trans(layouts.0)), int("transB", trans(layouts.1))])
    };
    let bias_shape = match spec.bias {
        2 => vec![m, 1],
        3 => vec![n],
        _ => vec![m, n],
    };
    let out = net.epilogue(&product, &[m, n], &ep, &bias_shape);
    let want = posted(spec, net.run(&out));
    assert_close(&got, &want, k, &format!("sgemm {m}×{k}×{n} {layouts:?} {spec:?}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn sgemm_matches_the_reference(
        m in 1usize..40, k in 1usize..40, n in 1usize..40,
        la in layout(), lb in layout(), spec in epilogue_spec(), seed in any::<u64>(),
    ) {
        check_sgemm(m, k, n, (la, lb), &spec, seed);
    }

    #[test]
    fn batched_matmul_broadcasts_as_the_reference(
        batch in prop::collection::vec(1usize..4, 0..3),
        (a_drop, b_drop) in (0usize..3, 0usize..3),
        (a_ones, b_ones) in (any::<u8>(), any::<u8>()),
        m in 1usize..9, k in 1usize..9, n in 1usize..9,
        a_vector in any::<bool>(), b_vector in any::<bool>(),
        spec in epilogue_spec(), seed in any::<u64>(),
    ) {
        check_batched(&batch, (a_drop, b_drop), (a_ones, b_ones), (m, k, n), (a_vector, b_vector), spec, seed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Products of 8 to 63 rows over a row-major B with rows of 8192 values
    /// or more and a million values in all: B copied a panel of columns at a
    /// time (`gemm::by_column_panels`), the last panel partial, padded rows
    /// of B included, every epilogue.
    #[test]
    fn short_wide_sgemm_matches_the_reference(
        m in 8usize..20, k in 260usize..270, n in 8192usize..8500,
        la in layout(), row_pad in prop_oneof![Just(None), (1usize..5).prop_map(Some)],
        spec in epilogue_spec(), seed in any::<u64>(),
    ) {
        let lb = row_pad.map_or(Layout::RowMajor, Layout::Padded);
        check_sgemm(m, k, n, (la, lb), &spec, seed);
    }
}

/// A constant B of a short, wide product laid out in column panels on the
/// first call (`panels::Panels`) and read in place by the later ones, on two
/// threads whose column tiles start inside a panel: the same products as
/// copying B a panel at a time, call after call, with a bias and a residual.
#[test]
fn short_wide_products_over_kept_panels_match_the_copying_ones() {
    let (m, k, n) = (12, 264, 8500);
    let b = values(7, k * n);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (bias, residual) = (values(8, n), values(9, m * n));
    let ep = Epilogue { bias: Bias::PerCol(&bias), residual: Some(&residual), ..Epilogue::default() };
    let mut kept = None;
    for seed in [1, 2, 3] {
        let a = values(seed, m * k);
        let mut got = vec![f32::NAN; m * n];
        pool.install(|| batched_matmul_keeping(&a, &[1, m, k], &b, &[k, n], &mut got, &ep, Some(&mut kept)));
        let mut want = vec![f32::NAN; m * n];
        pool.install(|| batched_matmul(&a, &[1, m, k], &b, &[k, n], &mut want, &ep));
        let want: Vec<f64> = want.iter().map(|&x| f64::from(x)).collect();
        assert_close(&got, &want, k, &format!("kept panels, call {seed}"));
        let made = kept.as_ref().map(|p| p.byte_size());
        let expected = diamond_runtime::simd::cpu::avx2_fma().then_some((k * n * 4) as u64);
        assert_eq!(made, expected, "B is laid out once, whole, where the product runs by panels");
    }
}

/// The batch axes of one operand: `batch` less its first `drop` axes, with the axes whose bit is
/// set in `ones` made 1 (broadcast).
fn operand_batch(batch: &[usize], drop: usize, ones: u8) -> Vec<usize> {
    let kept = &batch[drop.min(batch.len())..];
    kept.iter().enumerate().map(|(i, &d)| if ones >> i & 1 == 1 { 1 } else { d }).collect()
}

fn check_batched(
    batch: &[usize],
    drops: (usize, usize),
    ones: (u8, u8),
    (m, k, n): (usize, usize, usize),
    vectors: (bool, bool),
    mut spec: EpilogueSpec,
    seed: u64,
) {
    let (a_batch, b_batch) = (operand_batch(batch, drops.0, ones.0), operand_batch(batch, drops.1, ones.1));
    let a_shape: Vec<usize> = if vectors.0 { vec![k] } else { a_batch.iter().copied().chain([m, k]).collect() };
    let b_shape: Vec<usize> = if vectors.1 { vec![k] } else { b_batch.iter().copied().chain([k, n]).collect() };
    // the result's batch axes: the longer list, each axis the larger of the two
    let (a_b, b_b) = (if vectors.0 { vec![] } else { a_batch }, if vectors.1 { vec![] } else { b_batch });
    let rank = a_b.len().max(b_b.len());
    let at = |s: &[usize], i: usize| if i + s.len() >= rank { s[i + s.len() - rank] } else { 1 };
    let mut out_shape: Vec<usize> = (0..rank).map(|i| at(&a_b, i).max(at(&b_b, i))).collect();
    if !vectors.0 {
        out_shape.push(m);
    }
    if !vectors.1 {
        out_shape.push(n);
    }
    let total: usize = out_shape.iter().product();
    // a per-row or per-column bias only where the result keeps both matrix axes
    if matches!(spec.bias, 2 | 3) && (vectors.0 || vectors.1) {
        spec.bias = 1;
    }
    let a = values(seed, a_shape.iter().product());
    let b = values(seed ^ 0xbbbb, b_shape.iter().product());
    let data = EpilogueData::new(seed, total);
    let ep = data.epilogue(&spec);
    let mut got = vec![f32::NAN; total];
    batched_matmul(&a, &a_shape, &b, &b_shape, &mut got, &ep);

    let mut net = Net::new();
    let (x, y) = (net.input(&a_shape, &a), net.input(&b_shape, &b));
    let product = net.node("MatMul", &[&x, &y], vec![]);
    let bias_shape = match spec.bias {
        2 => vec![m, 1],
        3 => vec![n],
        _ => out_shape.clone(),
    };
    let out = net.epilogue(&product, &out_shape, &ep, &bias_shape);
    let want = posted(&spec, net.run(&out));
    assert_close(&got, &want, k, &format!("batched {a_shape:?} × {b_shape:?} {spec:?}"));
}

/// One convolution, as proptest draws it.
#[derive(Clone, Copy, Debug)]
struct ConvSpec {
    n: usize,
    group: usize,
    group_in: usize,
    group_out: usize,
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    stride: [usize; 2],
    dilation: [usize; 2],
    pads: [usize; 4],
}

fn conv_spec() -> impl Strategy<Value = ConvSpec> {
    (
        (1usize..3, 1usize..4, 1usize..4, 1usize..4),
        // widths past 16 reach im2col's row copies, narrower ones its gather table
        (1usize..10, 1usize..24, 1usize..4, 1usize..4),
        ([1usize..3, 1usize..3], [1usize..3, 1usize..3], [0usize..3, 0usize..3, 0usize..3, 0usize..3]),
        // 0: as drawn; 1: made depthwise (group = c_in = c_out); 2: made pointwise (1×1, stride 1, no pad);
        // 3: made a column convolution (kh × 1 over tall planes one column wide, run as a row one)
        0u8..4,
    )
        .prop_map(|((n, group, group_in, group_out), (h, w, kh, kw), (stride, dilation, pads), shape)| {
            let mut s = ConvSpec { n, group, group_in, group_out, h, w, kh, kw, stride, dilation, pads };
            match shape {
                1 => {
                    s.group = s.group.max(2);
                    (s.group_in, s.group_out) = (1, 1);
                }
                2 => {
                    (s.kh, s.kw, s.stride, s.pads) = (1, 1, [1, 1], [0; 4]);
                }
                3 => {
                    (s.h, s.w, s.kw, s.pads[1], s.pads[3]) = (s.h * 7, 1, 1, 0, 0);
                }
                _ => {}
            }
            s
        })
}

impl ConvSpec {
    fn conv(&self) -> Conv2d {
        Conv2d {
            n: self.n,
            c_in: self.group * self.group_in,
            h: self.h,
            w: self.w,
            c_out: self.group * self.group_out,
            kh: self.kh,
            kw: self.kw,
            stride: self.stride,
            dilation: self.dilation,
            pads: self.pads,
            group: self.group,
        }
    }
}

fn check_conv(spec: &ConvSpec, ep_spec: &EpilogueSpec, seed: u64) {
    let p = spec.conv();
    let Some((oh, ow)) = p.output_hw() else { return };
    let input = values(seed, p.n * p.c_in * p.h * p.w);
    let weight = values(seed ^ 0x3e, p.c_out * spec.group_in * p.kh * p.kw);
    let out_shape = [p.n, p.c_out, oh, ow];
    let total = out_shape.iter().product();
    let data = EpilogueData::new(seed, total);
    let ep = data.epilogue(ep_spec);
    let mut got = vec![f32::NAN; total];
    conv2d(&input, &weight, &p, &mut got, &ep);

    let mut net = Net::new();
    let x = net.input(&[p.n, p.c_in, p.h, p.w], &input);
    let wt = net.input(&[p.c_out, spec.group_in, p.kh, p.kw], &weight);
    let product = net.node(
        "Conv",
        &[&x, &wt],
        vec![
            int("group", p.group as i64),
            ints("strides", &p.stride),
            ints("dilations", &p.dilation),
            ints("pads", &[p.pads[0], p.pads[1], p.pads[2], p.pads[3]]),
            ints("kernel_shape", &[p.kh, p.kw]),
        ],
    );
    let bias_shape = match ep_spec.bias {
        2 => vec![p.c_out, 1, 1],
        3 => vec![oh, ow],
        _ => out_shape.to_vec(),
    };
    let out = net.epilogue(&product, &out_shape, &ep, &bias_shape);
    let want = posted(ep_spec, net.run(&out));
    assert_close(&got, &want, spec.group_in * p.kh * p.kw, &format!("{p:?} {ep_spec:?}"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn conv2d_matches_the_reference(spec in conv_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// Convolutions with 64 or more output channels (partial blocks of 64
/// included) on planes under 256 positions, with patches of 256 values or
/// more: the channel-vector route (`simd::channel_vector`, on AVX-512),
/// with strides, dilations, padding and every epilogue.
fn channel_vector_spec() -> impl Strategy<Value = ConvSpec> {
    (
        (1usize..3, 29usize..41, 64usize..150),
        (4usize..17, 4usize..17),
        ([1usize..3, 1usize..3], [1usize..3, 1usize..3], [0usize..3, 0usize..3, 0usize..3, 0usize..3]),
    )
        .prop_map(|((n, group_in, group_out), (h, w), (stride, dilation, pads))| ConvSpec {
            n,
            group: 1,
            group_in,
            group_out,
            h,
            w,
            kh: 3,
            kw: 3,
            stride,
            dilation,
            pads,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn channel_vector_convolutions_match_the_reference(spec in channel_vector_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// Depthwise convolutions over input planes of up to 24×24 positions: the
/// channels-in-lanes route (`simd::depthwise_lanes`, on AVX-512), with
/// partial chunks of 16 channels, 1×1 planes, kernels as large as the plane
/// or larger, strides, dilations, one-sided padding and every epilogue.
fn depthwise_lanes_spec() -> impl Strategy<Value = ConvSpec> {
    (
        (1usize..3, 1usize..70),
        (1usize..25, 1usize..25, 1usize..8, 1usize..8),
        ([1usize..3, 1usize..3], [1usize..3, 1usize..3], [0usize..4, 0usize..4, 0usize..4, 0usize..4]),
    )
        .prop_map(|((n, channels), (h, w, kh, kw), (stride, dilation, pads))| ConvSpec {
            n,
            group: channels,
            group_in: 1,
            group_out: 1,
            h,
            w,
            kh,
            kw,
            stride,
            dilation,
            pads,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn depthwise_lanes_convolutions_match_the_reference(spec in depthwise_lanes_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// Depthwise convolutions over planes larger than the channels-in-lanes
/// route takes, kernels up to 7×7, row strides 1 to 3 and column strides
/// 1 and 2, one-sided padding and every epilogue: the rows route
/// (`simd::depthwise_rows`, on AVX-512), its masked last vectors, its
/// blocks of one to four rows, and rows whose padding reaches past the
/// input (wide pads on narrow planes).
fn depthwise_rows_spec() -> impl Strategy<Value = ConvSpec> {
    (
        (1usize..3, 1usize..20),
        (25usize..60, 25usize..75, 1usize..8, 1usize..8),
        ([1usize..4, 1usize..3], [0usize..4, 0usize..4, 0usize..4, 0usize..4]),
    )
        .prop_map(|((n, channels), (h, w, kh, kw), (stride, pads))| ConvSpec {
            n,
            group: channels.max(2),
            group_in: 1,
            group_out: 1,
            h,
            w,
            kh,
            kw,
            stride,
            dilation: [1, 1],
            pads,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn depthwise_rows_convolutions_match_the_reference(spec in depthwise_rows_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// 3×3 convolutions at stride 1 with at least 16 channels each way: the
/// Winograd route (`simd::winograd`), with odd and even output sizes,
/// symmetric, one-sided and no padding, and every epilogue (outputs of
/// 23×23 and more: the 128 tiles the route takes with few channels).
fn winograd_spec() -> impl Strategy<Value = ConvSpec> {
    ((1usize..3, 16usize..24, 16usize..21), (25usize..34, 25usize..34), [0usize..3, 0usize..3, 0usize..3, 0usize..3])
        .prop_map(|((n, group_in, group_out), (h, w), pads)| ConvSpec {
            n,
            group: 1,
            group_in,
            group_out,
            h,
            w,
            kh: 3,
            kw: 3,
            stride: [1, 1],
            dilation: [1, 1],
            pads,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn winograd_convolutions_match_the_reference(spec in winograd_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// Output planes under 16 positions with 8 to 40 output channels per
/// group: the small-plane kernel (`simd::small_plane`, vectorized over
/// output channels), pointwise ones included, and partial steps of
/// channels and positions.
fn small_plane_spec() -> impl Strategy<Value = ConvSpec> {
    (
        (1usize..3, 1usize..3, 1usize..20, 8usize..41),
        (1usize..6, 1usize..6, 1usize..4, 1usize..4),
        ([1usize..3, 1usize..3], [0usize..2, 0usize..2, 0usize..2, 0usize..2]),
    )
        .prop_map(|((n, group, group_in, group_out), (h, w, kh, kw), (stride, pads))| ConvSpec {
            n,
            group,
            group_in,
            group_out,
            h,
            w,
            kh,
            kw,
            stride,
            dilation: [1, 1],
            pads,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn small_plane_convolutions_match_the_reference(spec in small_plane_spec(), ep in epilogue_spec(), seed in any::<u64>()) {
        check_conv(&spec, &ep, seed);
    }
}

/// Runs `f` on a rayon pool of `threads` threads.
fn on_threads(threads: usize, f: impl FnOnce() + Send) {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool").install(f);
}

#[test]
fn large_products_cut_into_tiles_match_the_reference_on_one_and_several_threads() {
    let full = EpilogueSpec { alpha: 0.5, beta: 2.0, bias: 3, activation: 9, residual: true, after: 10, post: true };
    let per_row = EpilogueSpec { bias: 2, activation: 1, ..full };
    for threads in [1, 2, 3] {
        on_threads(threads, || {
            // tall (cut along rows), wide (cut along columns), and C bigger than one tile
            check_sgemm(300, 70, 33, (Layout::RowMajor, Layout::Transposed), &full, 1);
            check_sgemm(21, 90, 500, (Layout::Padded(3), Layout::RowMajor), &per_row, 2);
            check_sgemm(600, 16, 520, (Layout::RowMajor, Layout::RowMajor), &full, 3);
            // wide but of little work per row (SqueezeNet's 1×1 32→128 on 27²): cut along its rows
            check_sgemm(200, 40, 700, (Layout::RowMajor, Layout::RowMajor), &per_row, 9);
            // a few rows by a weight past 1 MiB laid out k × n: B streamed row by row,
            // over several column chunks and a partial one; and by its transpose, four columns at a time
            check_sgemm(1, 70, 9000, (Layout::RowMajor, Layout::RowMajor), &full, 10);
            check_sgemm(3, 300, 1001, (Layout::RowMajor, Layout::RowMajor), &per_row, 11);
            check_sgemm(4, 301, 1003, (Layout::RowMajor, Layout::Transposed), &full, 12);
            let conv = ConvSpec {
                n: 2,
                group: 1,
                group_in: 5,
                group_out: 24,
                h: 30,
                w: 27,
                kh: 3,
                kw: 3,
                stride: [1, 1],
                dilation: [1, 1],
                pads: [1, 1, 1, 1],
            };
            check_conv(&conv, &per_row, 4);
            check_conv(&ConvSpec { group: 24, group_in: 1, group_out: 1, stride: [2, 2], ..conv }, &full, 5);
            // 14 output columns: im2col's gather table, over enough columns to fill them in parallel
            check_conv(&ConvSpec { group_in: 20, stride: [1, 2], ..conv }, &per_row, 7);
            check_batched(&[6], (0, 0), (0, 0), (40, 30, 50), (false, false), full, 6);
            // Winograd over several bands of tile rows (151 tiles a row), odd output sizes
            let wide = ConvSpec { n: 2, group_in: 16, group_out: 17, h: 40, w: 301, pads: [1, 0, 0, 1], ..conv };
            check_conv(&wide, &full, 8);
        });
    }
}

/// ShuffleNet's pointwise convolution of four groups, 34 → 34 channels each, on 28².
const SHUFFLE_1X1: ConvSpec = ConvSpec {
    n: 1,
    group: 4,
    group_in: 34,
    group_out: 34,
    h: 28,
    w: 28,
    kh: 1,
    kw: 1,
    stride: [1, 1],
    dilation: [1, 1],
    pads: [0; 4],
};

/// What a session keeps of a constant weight between calls (`Prepared`:
/// the direct kernel's packed weight, Winograd's filters, …) serves
/// every later call of the same shape and is made again when a call of
/// another shape or route comes with the same slot: results bitwise equal
/// to a call that keeps nothing, on each of a sequence of convolutions
/// sharing one slot (direct, direct with other channel counts, depthwise
/// direct, Winograd, im2col, back to the first).
#[test]
fn a_kept_weight_serves_its_shape_and_is_remade_for_another() {
    let direct =
        ConvSpec { group: 1, group_in: 16, group_out: 24, h: 30, w: 30, kh: 3, kw: 3, pads: [1; 4], ..SHUFFLE_1X1 };
    let shapes = [
        direct,
        ConvSpec { group_in: 8, group_out: 20, ..direct },
        ConvSpec { group: 32, group_in: 1, group_out: 1, ..direct },
        ConvSpec { group_in: 64, group_out: 64, h: 28, w: 28, ..direct },
        ConvSpec { group_in: 48, group_out: 96, h: 6, w: 6, kh: 5, kw: 5, pads: [2; 4], ..direct },
        direct,
        ConvSpec { h: 17, w: 23, ..direct },
    ]
    .map(|s| s.conv());
    let bias: Vec<f32> = values(9, 96);
    let ep = Epilogue { bias: Bias::PerRow(&bias), activation: Activation::Relu, ..Epilogue::default() };
    let mut slot = None;
    for (i, p) in shapes.iter().enumerate() {
        let (oh, ow) = p.output_hw().expect("fits");
        let input = values(20 + i as u64, p.n * p.c_in * p.h * p.w);
        let weight = values(40 + (p.c_out * p.c_in) as u64, p.c_out * p.c_in / p.group * p.kh * p.kw);
        let ep = Epilogue { bias: Bias::PerRow(&bias[..p.c_out]), ..ep };
        let mut fresh = vec![f32::NAN; p.n * p.c_out * oh * ow];
        conv2d(&input, &weight, p, &mut fresh, &ep);
        for call in 0..2 {
            let mut kept = vec![f32::NAN; fresh.len()];
            conv2d_keeping(&input, &weight, p, &mut kept, &ep, Some(&mut slot));
            let same = kept.iter().zip(&fresh).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "call {call} of {p:?} with the slot kept differs from a fresh call");
        }
    }
}

/// Grouped convolutions whose groups run side by side, one thread each
/// (conv.rs `units_in_parallel`): ShuffleNet's pointwise four groups on
/// 28², an im2col 3×3 of six groups over two images, and three groups on
/// two threads (an uneven share: each product split instead), every
/// epilogue part a group shifts (per-channel bias, full bias, residual).
#[test]
fn grouped_convolutions_side_by_side_match_the_reference() {
    let full = EpilogueSpec { alpha: 0.5, beta: 2.0, bias: 4, activation: 1, residual: true, after: 1, post: true };
    let per_row = EpilogueSpec { bias: 2, residual: false, post: false, ..full };
    let shuffle = SHUFFLE_1X1;
    let im2col =
        ConvSpec { n: 2, group: 6, group_in: 5, group_out: 7, h: 19, w: 23, kh: 3, kw: 3, pads: [1; 4], ..shuffle };
    for threads in [1, 2, 4] {
        on_threads(threads, || {
            for (i, ep) in [full, per_row].iter().enumerate() {
                check_conv(&shuffle, ep, 10 + i as u64);
                check_conv(&ConvSpec { group_in: 6, group_out: 28, h: 56, w: 56, ..shuffle }, ep, 12 + i as u64);
                check_conv(&im2col, ep, 14 + i as u64);
                check_conv(&ConvSpec { group: 3, ..im2col }, ep, 16 + i as u64);
            }
        });
    }
}

/// The ResNet-18 export's first convolution: 7×7/2, 3 → 8 channels, two 32×32 images.
const RESNET_STEM: ConvSpec = ConvSpec {
    n: 2,
    group: 1,
    group_in: 3,
    group_out: 8,
    h: 32,
    w: 32,
    kh: 7,
    kw: 7,
    stride: [2, 2],
    dilation: [1, 1],
    pads: [3, 3, 3, 3],
};

/// Column strides over outputs of 16 columns and more: im2col's row copies
/// at stride 2 (pairs, ResNet's 7×7/2 first layer on a 32×32 image) and at
/// stride 3 (a stepping copy). The random shapes above are too narrow for
/// these rows.
#[test]
fn column_strided_wide_outputs_match_the_reference() {
    let ep = EpilogueSpec { alpha: 1.0, beta: 1.0, bias: 2, activation: 1, residual: false, after: 0, post: true };
    let conv1 = RESNET_STEM;
    check_conv(&conv1, &ep, 11);
    check_conv(&ConvSpec { h: 9, w: 60, kh: 3, kw: 3, stride: [1, 3], pads: [1, 1, 1, 1], ..conv1 }, &ep, 12);
    check_conv(&ConvSpec { w: 37, kw: 2, stride: [2, 2], pads: [0, 1, 0, 0], dilation: [1, 2], ..conv1 }, &ep, 13);
}

/// The direct kernel's phase planes of rows of 64 values and more have
/// only their padding zeroed, not the whole plane: each convolution here
/// runs on a thread whose kept scratch the one before filled with other
/// values (an unpadded stride-2 convolution first, as SqueezeNet's), with
/// padding on every side, on one side only, and rows past the input; one
/// block of channels (a unit splits its own phases) and three blocks
/// (shared phases). Leaving out any of the padding's fills fails it.
#[test]
fn phase_planes_of_long_rows_keep_their_padding_zero() {
    let ep = EpilogueSpec { alpha: 1.0, beta: 1.0, bias: 2, activation: 1, residual: false, after: 0, post: false };
    // SqueezeNet's first convolution on a smaller image
    let unpadded = ConvSpec { n: 1, group_out: 24, h: 150, w: 150, kh: 3, kw: 3, pads: [0; 4], ..RESNET_STEM };
    for threads in [1, 2] {
        on_threads(threads, || {
            for (k, group_out) in [8, 24].into_iter().enumerate() {
                let seed = 40 + 10 * k as u64;
                check_conv(&ConvSpec { group_out, ..unpadded }, &ep, seed);
                check_conv(&ConvSpec { group_out, kh: 7, kw: 7, pads: [3, 3, 3, 3], ..unpadded }, &ep, seed + 1);
                check_conv(&ConvSpec { group_out, ..unpadded }, &ep, seed + 2);
                let rows =
                    ConvSpec { group_in: 5, group_out, h: 20, w: 80, stride: [1, 1], pads: [1, 1, 1, 1], ..unpadded };
                check_conv(&rows, &ep, seed + 3);
                check_conv(&ConvSpec { group_out, ..unpadded }, &ep, seed + 4);
                check_conv(&ConvSpec { group_out, h: 40, w: 140, pads: [2, 5, 0, 3], ..unpadded }, &ep, seed + 5);
            }
        });
    }
}

/// True in a child run of this test binary (started by the tests below
/// with a route or instruction set forced), which must not start more.
fn in_child() -> bool {
    std::env::var("DIAMOND_KERNEL_TEST_CHILD").is_ok()
}

/// Runs every test of this binary again in a child process with `env` set.
fn rerun_with(env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("the test binary");
    let status = std::process::Command::new(exe)
        .envs(env.iter().copied())
        .env("DIAMOND_KERNEL_TEST_CHILD", "1")
        .args(["--test-threads", "2"])
        .status()
        .expect("the test binary runs again");
    assert!(status.success(), "the tests fail with {env:?}");
}

/// The portable kernels, and on a machine with AVX-512 the AVX2 ones.
#[test]
fn the_portable_and_avx2_kernels_give_the_same_results() {
    if in_child() {
        // the switch took effect where it was set
        if std::env::var("DIAMOND_SIMD").is_ok_and(|v| v == "off") {
            assert!(!diamond_runtime::simd::cpu::avx2_fma());
        }
        if std::env::var("DIAMOND_SIMD").is_ok_and(|v| v == "avx2") {
            assert!(!diamond_runtime::simd::cpu::avx512());
        }
        return;
    }
    rerun_with(&[("DIAMOND_SIMD", "off")]);
    if diamond_runtime::simd::cpu::avx512() {
        rerun_with(&[("DIAMOND_SIMD", "avx2")]);
    }
}

/// The direct convolution kernel (`simd::direct`) forced onto every
/// convolution that is not depthwise or Winograd's, on each instruction
/// set — AVX-512 where the machine has it, AVX2, the portable code — and
/// im2col forced onto every one: both agree with the reference on every
/// shape the tests above draw (the default choice sends a shape one way).
#[test]
fn the_direct_kernel_and_im2col_both_give_the_same_results() {
    if in_child() {
        return;
    }
    rerun_with(&[("DIAMOND_DIRECT", "on")]);
    rerun_with(&[("DIAMOND_DIRECT", "on"), ("DIAMOND_SIMD", "avx2")]);
    rerun_with(&[("DIAMOND_DIRECT", "on"), ("DIAMOND_SIMD", "off")]);
    rerun_with(&[("DIAMOND_DIRECT", "off")]);
}
