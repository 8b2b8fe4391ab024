//! The SIMD session's `GatherElements` ([`diamond_runtime::simd::gather`])
//! against the reference executor's: random ranks 1 to 4, every axis
//! (negative too), index tensors smaller than the data along the other
//! axes, negative indices, int64 and int32; and an index out of range left
//! to the reference.

use super::oracle::{int, Net};
use super::values;
use diamond_ir::Node;
use diamond_runtime::simd::gather;
use diamond_runtime::{Data, Tensor};
use proptest::prelude::*;

fn case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, i64, bool, u64)> {
    (prop::collection::vec(1usize..6, 1..=4), any::<u64>(), any::<bool>(), any::<u64>()).prop_map(
        |(shape, cut, wide, seed)| {
            let rank = shape.len();
            let axis = (seed % rank as u64) as usize;
            // the indices: at most the data's size along the other axes, any size along the axis
            let index_shape: Vec<usize> = shape
                .iter()
                .enumerate()
                .map(
                    |(a, &d)| {
                        if a == axis {
                            1 + (cut >> (3 * a)) as usize % 7
                        } else {
                            1 + (cut >> (3 * a)) as usize % d
                        }
                    },
                )
                .collect();
            let signed = if seed & 8 == 0 { axis as i64 } else { axis as i64 - rank as i64 };
            (shape, index_shape, signed, wide, seed)
        },
    )
}

fn indices(index_shape: &[usize], dim: usize, seed: u64) -> Vec<i64> {
    let n: usize = index_shape.iter().product();
    // in [-dim, dim): negative ones count from the end
    values(seed, n)
        .iter()
        .map(|v| ((v + 1.0) / 2.0 * (2 * dim) as f32) as i64 - dim as i64)
        .map(|k| k.clamp(-(dim as i64), dim as i64 - 1))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn gather_elements_matches_the_reference((shape, index_shape, axis, wide, seed) in case()) {
        let data = values(seed, shape.iter().product());
        let dim = shape[axis.rem_euclid(shape.len() as i64) as usize];
        let ks = indices(&index_shape, dim, seed ^ 7);
        let index_data = if wide { Data::I64(ks.clone()) } else { Data::I32(ks.iter().map(|&k| k as i32).collect()) };
        let (x, idx) = (
            Tensor::new(shape.clone(), Data::F32(data.clone())).expect("data"),
            Tensor::new(index_shape.clone(), index_data).expect("indices"),
        );
        let node = Node { attributes: vec![int("axis", axis)], ..Node::default() };
        let got = gather::gather_elements(&node, &[Some(&x), Some(&idx)], &mut Vec::with_capacity).expect("covered");
        prop_assert_eq!(&got.shape, &index_shape);

        let mut net = Net::new();
        let xs = net.input(&shape, &data);
        let is = net.input_i32(&index_shape, &ks.iter().map(|&k| k as i32).collect::<Vec<_>>());
        let out = net.node("GatherElements", &[&xs, &is], vec![int("axis", axis)]);
        let want = net.run(&out);
        let Data::F32(got) = &got.data else { panic!("f32 output") };
        let got: Vec<f64> = got.iter().map(|&v| f64::from(v)).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn an_index_out_of_range_is_left_to_the_reference() {
    let x = Tensor::new(vec![2, 3], Data::F32(vec![0.0; 6])).expect("data");
    let idx = Tensor::new(vec![2, 1], Data::I64(vec![1, 3])).expect("indices");
    let node = Node { attributes: vec![int("axis", 1)], ..Node::default() };
    assert!(gather::gather_elements(&node, &[Some(&x), Some(&idx)], &mut Vec::with_capacity).is_none());
    let ok = Tensor::new(vec![2, 1], Data::I64(vec![1, -3])).expect("indices");
    assert!(gather::gather_elements(&node, &[Some(&x), Some(&ok)], &mut Vec::with_capacity).is_some());
}
