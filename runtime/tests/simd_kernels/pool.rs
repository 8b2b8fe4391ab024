//! The SIMD backend's MaxPool, AveragePool ([`diamond_runtime::simd::pool`])
//! and Concat ([`diamond_runtime::simd::concat`]) kernels against the
//! reference executor's operators: random sizes, kernels, strides
//! (including 2, read as pairs), dilations, padding, `ceil_mode` and
//! `count_include_pad`; concatenation along every axis of random ranks.

use super::oracle::{int, ints, Net};
use super::{on_threads, values};
use diamond_ir::{Attribute, Node};
use diamond_runtime::simd::{concat, pool};
use diamond_runtime::{Data, Tensor};
use proptest::prelude::*;

fn node(attributes: Vec<Attribute>) -> Node {
    Node { attributes, ..Node::default() }
}

fn f32s(t: &Tensor) -> Vec<f64> {
    match &t.data {
        Data::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        _ => panic!("f32 output expected"),
    }
}

#[derive(Clone, Debug)]
struct PoolSpec {
    max: bool,
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    dilations: [usize; 2],
    pads: [usize; 4],
    ceil: bool,
    count_pad: bool,
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        (any::<bool>(), 1usize..3, 1usize..4, 1usize..13, 1usize..40),
        ([1usize..4, 1usize..4], [1usize..4, 1usize..4], [1usize..3, 1usize..3]),
        ([0usize..3, 0usize..3, 0usize..3, 0usize..3], any::<bool>(), any::<bool>()),
    )
        .prop_map(|((max, n, c, h, w), (kernel, strides, dilations), (pads, ceil, count_pad))| {
            // padding smaller than the kernel, as ONNX asks
            let pads = [pads[0] % kernel[0], pads[1] % kernel[1], pads[2] % kernel[0], pads[3] % kernel[1]];
            PoolSpec { max, n, c, h, w, kernel, strides, dilations, pads, ceil, count_pad }
        })
}

fn check_pool(s: &PoolSpec, seed: u64) {
    let shape = [s.n, s.c, s.h, s.w];
    let x = values(seed, shape.iter().product());
    let mut attributes = vec![
        ints("kernel_shape", &s.kernel),
        ints("strides", &s.strides),
        ints("dilations", &s.dilations),
        ints("pads", &s.pads),
        int("ceil_mode", i64::from(s.ceil)),
    ];
    if !s.max {
        attributes.push(int("count_include_pad", i64::from(s.count_pad)));
    }
    let op = if s.max { "MaxPool" } else { "AveragePool" };
    let mut net = Net::new();
    let input = net.input(&shape, &x);
    let out = net.node(op, &[&input], attributes.clone());
    let xt = Tensor::new(shape.to_vec(), Data::F32(x)).expect("a tensor");
    // a window wider than the padded input is left to the reference (an error, or an empty output)
    let Some(got) = pool::pool(&node(attributes), &[Some(&xt)], &mut Vec::with_capacity, s.max) else { return };
    let want = net.try_run(&out).unwrap_or_else(|| panic!("{s:?}: the kernel ran what the reference refuses"));
    let got = f32s(&got);
    assert_eq!(got.len(), want.len(), "{s:?}: lengths");
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let tol = if s.max { 0.0 } else { 1e-6 * (1.0 + w.abs()) };
        // a window wholly in the padding gives -inf to both
        assert!(g == w || (g - w).abs() <= tol, "{s:?}: element {i}: {g} vs {w}");
    }
}

/// The windows of at most 3 columns at column stride 1 or 2 that AVX-512
/// runs in registers (vectors of 16 columns, whole inside the rows and
/// masked at their ends), over widths around every multiple of 16, with
/// and without padding on either side and `ceil_mode`, against the
/// reference.
#[test]
fn narrow_windows_over_wide_rows_match_the_reference() {
    let widths = [1, 2, 3, 5, 15, 16, 17, 18, 31, 32, 33, 34, 47, 49, 50, 63, 64, 65, 111, 112];
    let mut seed = 7;
    for (stride, kernel) in [(1, 3), (2, 2), (2, 3)] {
        for w in widths {
            for (left, right) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                for (ceil, max) in [(false, true), (true, true), (false, false), (true, false)] {
                    seed += 1;
                    let spec = PoolSpec {
                        max,
                        n: 1,
                        c: 2,
                        h: 5,
                        w,
                        kernel: [3, kernel],
                        strides: [2, stride],
                        dilations: [1, 1],
                        pads: [1, left, 0, right],
                        ceil,
                        count_pad: seed % 2 == 0,
                    };
                    check_pool(&spec, seed);
                }
            }
        }
    }
}

fn check_concat(shapes: &[Vec<usize>], axis: i64, seed: u64) {
    let mut net = Net::new();
    let data: Vec<Vec<f32>> =
        shapes.iter().enumerate().map(|(i, s)| values(seed ^ i as u64, s.iter().product())).collect();
    let names: Vec<String> = shapes.iter().zip(&data).map(|(s, d)| net.input(s, d)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let out = net.node("Concat", &refs, vec![int("axis", axis)]);
    let want = net.run(&out);
    let tensors: Vec<Tensor> = shapes
        .iter()
        .zip(&data)
        .map(|(s, d)| Tensor::new(s.clone(), Data::F32(d.clone())).expect("a tensor"))
        .collect();
    let inputs: Vec<Option<&Tensor>> = tensors.iter().map(Some).collect();
    let got = concat::concat(&node(vec![int("axis", axis)]), &inputs, &mut Vec::with_capacity).expect("covered");
    assert_eq!(f32s(&got), want, "{shapes:?} axis {axis}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn pooling_matches_the_reference(spec in pool_spec(), seed in any::<u64>()) {
        check_pool(&spec, seed);
    }

    #[test]
    fn concat_matches_the_reference(
        base in prop::collection::vec(1usize..5, 1..=4),
        sizes in prop::collection::vec(0usize..4, 1..=4),
        axis_pick in any::<prop::sample::Index>(),
        negative in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let axis = axis_pick.index(base.len());
        let shapes: Vec<Vec<usize>> = sizes.iter().map(|&k| {
            let mut s = base.clone();
            s[axis] = k;
            s
        }).collect();
        let attr = if negative { axis as i64 - base.len() as i64 } else { axis as i64 };
        check_concat(&shapes, attr, seed);
    }
}

#[test]
fn large_pools_and_concats_match_the_reference_on_one_and_several_threads() {
    for threads in [1, 3] {
        on_threads(threads, || {
            let big = PoolSpec {
                max: true,
                n: 2,
                c: 16,
                h: 57,
                w: 57,
                kernel: [3, 3],
                strides: [2, 2],
                dilations: [1, 1],
                pads: [0, 0, 1, 1],
                ceil: true,
                count_pad: false,
            };
            check_pool(&big, 31);
            check_pool(&PoolSpec { max: false, strides: [1, 1], pads: [1, 1, 1, 1], count_pad: true, ..big }, 32);
            check_concat(&[vec![1, 64, 30, 30], vec![1, 48, 30, 30], vec![1, 16, 30, 30]], 1, 33);
        });
    }
}
