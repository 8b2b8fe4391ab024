//! The SIMD session's Transpose gives every element where the permutation
//! sends it: random shapes of rank 0 to 5 (size-1 axes, odd sizes and
//! sizes past a tile included) under random permutations, against the
//! element-by-element definition `out[i_perm[0], …] = x[i_0, …]`.

use diamond_runtime::simd::relayout::{permute_into, TILE};
use proptest::prelude::*;

/// The permuted tensor by the definition, one element at a time.
fn by_definition(x: &[f32], shape: &[usize], perm: &[usize]) -> Vec<f32> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let len = x.len();
    let mut out = vec![f32::NAN; len];
    let mut index = vec![0usize; shape.len()];
    for (k, &v) in x.iter().enumerate() {
        let mut rest = k;
        for a in (0..shape.len()).rev() {
            index[a] = rest % shape[a];
            rest /= shape[a];
        }
        let mut at = 0;
        for (o, &p) in perm.iter().enumerate() {
            at = at * out_shape[o] + index[p];
        }
        out[at] = v;
    }
    out
}

fn case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    let size = prop::sample::select(vec![1usize, 2, 3, 5, 8, TILE + 1, 40]);
    prop::collection::vec(size, 0..=5).prop_flat_map(|shape| {
        let perm: Vec<usize> = (0..shape.len()).collect();
        (Just(shape), Just(perm).prop_shuffle())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn transposes_put_every_element_where_the_permutation_sends_it((shape, perm) in case()) {
        let len: usize = shape.iter().product();
        prop_assume!(len <= 1 << 20);
        let x: Vec<f32> = (0..len).map(|k| k as f32).collect();
        let mut out = vec![-1.0; 3];
        permute_into(&x, &shape, &perm, &mut out);
        prop_assert_eq!(out, by_definition(&x, &shape, &perm), "shape {:?} perm {:?}", shape, perm);
    }
}

/// ShuffleNet's channel shuffles and NCHW ↔ NHWC transposes, whole, on
/// one, two and three threads: the large ones (64K floats and more) are
/// written in parallel slices of their outermost axis, rows copied whole
/// (the shuffles) or gathered in tiles (the NHWC ones), with slices of
/// unequal length where the threads do not divide that axis.
#[test]
fn channel_shuffles_and_layout_changes() {
    for threads in [1, 2, 3] {
        super::on_threads(threads, || {
            for (shape, perm) in [
                (vec![1, 2, 58, 28, 28], vec![0, 2, 1, 3, 4]),
                (vec![1, 4, 34, 28, 28], vec![0, 2, 1, 3, 4]),
                (vec![2, 3, 37, 45], vec![0, 2, 3, 1]),
                (vec![2, 45, 37, 3], vec![0, 3, 1, 2]),
                (vec![2, 64, 30, 35], vec![0, 2, 3, 1]),
                (vec![5, 30, 35, 64], vec![0, 3, 1, 2]),
                (vec![300, 7, 40], vec![2, 0, 1]),
            ] {
                let len: usize = shape.iter().product();
                let x: Vec<f32> = (0..len).map(|k| (k % 1009) as f32).collect();
                let mut out = Vec::new();
                permute_into(&x, &shape, &perm, &mut out);
                assert_eq!(out, by_definition(&x, &shape, &perm), "{shape:?} {perm:?} on {threads} threads");
            }
        });
    }
}
