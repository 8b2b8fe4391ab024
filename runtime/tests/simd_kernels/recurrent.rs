//! The SIMD backend's recurrent kernels ([`diamond_runtime::simd::recurrent`])
//! against the reference executor's `LSTM`, `GRU` and `RNN`: random sizes,
//! every direction, both layouts, sequence lengths shorter than the
//! sequence, initial states, peepholes, `input_forget`,
//! `linear_before_reset` and `clip`; and the attributes the kernels leave
//! to the reference.

use super::oracle::{float, int, string, strings, Net};
use super::{on_threads, values};
use diamond_ir::{Attribute, Node};
use diamond_runtime::simd::recurrent;
use diamond_runtime::{Data, Tensor};
use proptest::prelude::*;

/// One recurrent node, as proptest draws it.
#[derive(Clone, Debug)]
struct Spec {
    op: &'static str,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    /// 0 forward, 1 reverse, 2 bidirectional.
    direction: u8,
    batch_major: bool,
    bias: bool,
    lens: Option<Vec<i32>>,
    initial: bool,
    peepholes: bool,
    input_forget: bool,
    linear_before_reset: bool,
    clip: Option<f32>,
}

impl Spec {
    fn gates(&self) -> usize {
        match self.op {
            "LSTM" => 4,
            "GRU" => 3,
            _ => 1,
        }
    }

    fn dirs(&self) -> usize {
        if self.direction == 2 {
            2
        } else {
            1
        }
    }

    fn attributes(&self) -> Vec<Attribute> {
        let direction = ["forward", "reverse", "bidirectional"][self.direction as usize];
        let mut a = vec![int("hidden_size", self.hidden as i64), string("direction", direction)];
        if self.batch_major {
            a.push(int("layout", 1));
        }
        if let Some(c) = self.clip {
            a.push(float("clip", c));
        }
        if self.op == "LSTM" && self.input_forget {
            a.push(int("input_forget", 1));
        }
        if self.op == "GRU" && self.linear_before_reset {
            a.push(int("linear_before_reset", 1));
        }
        a
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just("LSTM"), Just("GRU"), Just("RNN")],
        (1usize..7, 1usize..5, 1usize..20, 1usize..20),
        (0u8..3, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (any::<bool>(), any::<bool>(), any::<bool>(), prop_oneof![Just(None), Just(Some(0.7f32)), Just(Some(3.0f32))]),
        any::<u64>(),
    )
        .prop_map(
            |(op, (seq, batch, input, hidden), (direction, batch_major, bias, with_lens, initial), flags, seed)| {
                let (peepholes, input_forget, linear_before_reset, clip) = flags;
                let lens =
                    with_lens.then(|| (0..batch).map(|b| ((seed >> (4 * b)) as usize % (seq + 1)) as i32).collect());
                Spec {
                    op,
                    seq,
                    batch,
                    input,
                    hidden,
                    direction,
                    batch_major,
                    bias,
                    lens,
                    initial,
                    peepholes,
                    input_forget,
                    linear_before_reset,
                    clip,
                }
            },
        )
}

/// The node's operands (`None` where omitted), in ONNX's order.
fn operands(s: &Spec, seed: u64) -> Vec<Option<Tensor>> {
    let (dirs, g, h) = (s.dirs(), s.gates() * s.hidden, s.hidden);
    let t = |shape: Vec<usize>, salt: u64, scale: f32| {
        let len = shape.iter().product();
        let data = values(seed ^ salt, len).iter().map(|v| v * scale).collect();
        Some(Tensor::new(shape, Data::F32(data)).expect("shape and data agree"))
    };
    let x_shape = if s.batch_major { vec![s.batch, s.seq, s.input] } else { vec![s.seq, s.batch, s.input] };
    let state_shape = if s.batch_major { vec![s.batch, dirs, h] } else { vec![dirs, s.batch, h] };
    let lstm = s.op == "LSTM";
    vec![
        t(x_shape, 1, 1.5),
        t(vec![dirs, g, s.input], 2, 0.6),
        t(vec![dirs, g, h], 3, 0.6),
        if s.bias { t(vec![dirs, 2 * g], 4, 0.5) } else { None },
        s.lens.as_ref().map(|l| Tensor::new(vec![s.batch], Data::I32(l.clone())).expect("lengths")),
        if s.initial { t(state_shape.clone(), 5, 0.8) } else { None },
        if s.initial && lstm { t(state_shape, 6, 0.8) } else { None },
        if s.peepholes && lstm { t(vec![dirs, 3 * h], 7, 0.5) } else { None },
    ]
}

/// The reference's outputs (Y, Y_h and for LSTM Y_c) for the node.
fn reference(s: &Spec, ops: &[Option<Tensor>], attributes: &[Attribute], count: usize) -> Vec<Vec<f64>> {
    (0..count)
        .map(|k| {
            let mut net = Net::new();
            let names: Vec<String> = ops
                .iter()
                .map(|o| match o {
                    None => String::new(),
                    Some(Tensor { shape, data: Data::F32(v) }) => net.input(shape, v),
                    Some(Tensor { shape, data: Data::I32(v) }) => net.input_i32(shape, v),
                    Some(_) => unreachable!("f32 and i32 operands only"),
                })
                .collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let outs = net.node_with_outputs(s.op, &refs, attributes.to_vec(), count);
            net.run(&outs[k])
        })
        .collect()
}

fn check(s: &Spec, seed: u64) {
    let ops = operands(s, seed);
    let attributes = s.attributes();
    let count = if s.op == "LSTM" { 3 } else { 2 };
    let node = Node { op_type: Some(s.op.into()), attributes: attributes.clone(), ..Node::default() };
    let inputs: Vec<Option<&Tensor>> = ops.iter().map(Option::as_ref).collect();
    let got = recurrent::compute(&node, &inputs).expect("the kernels cover it");
    let want = reference(s, &ops, &attributes, count);
    assert_eq!(got.len(), count, "{s:?}: outputs");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let Data::F32(g) = &g.data else { panic!("f32 output expected") };
        assert_eq!(g.len(), w.len(), "{s:?}: output {k} length");
        // f32 products over input and hidden, carried through the steps
        let tol = 2e-6 * (s.input + s.hidden) as f64 * s.seq as f64;
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let err = (f64::from(a) - b).abs();
            assert!(err <= tol * (1.0 + b.abs()), "{s:?}: output {k} element {i}: {a} vs {b} (tolerance {tol:e})");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn recurrent_cells_match_the_reference(s in spec(), seed in any::<u64>()) {
        check(&s, seed);
    }
}

#[test]
fn a_long_bidirectional_lstm_matches_the_reference() {
    let s = Spec {
        op: "LSTM",
        seq: 40,
        batch: 2,
        input: 48,
        hidden: 64,
        direction: 2,
        batch_major: false,
        bias: true,
        lens: Some(vec![40, 23]),
        initial: true,
        peepholes: false,
        input_forget: false,
        linear_before_reset: false,
        clip: None,
    };
    // one thread: the directions one after the other; several: side by side
    for threads in [1, 3] {
        on_threads(threads, || check(&s, 11));
    }
}

#[test]
fn other_activations_are_left_to_the_reference() {
    let s = Spec {
        op: "GRU",
        seq: 2,
        batch: 1,
        input: 3,
        hidden: 4,
        direction: 0,
        batch_major: false,
        bias: false,
        lens: None,
        initial: false,
        peepholes: false,
        input_forget: false,
        linear_before_reset: false,
        clip: None,
    };
    let ops = operands(&s, 3);
    let inputs: Vec<Option<&Tensor>> = ops.iter().map(Option::as_ref).collect();
    let mut attributes = s.attributes();
    attributes.push(strings("activations", &["Relu", "Tanh"]));
    let node = Node { op_type: Some("GRU".into()), attributes, ..Node::default() };
    assert!(recurrent::compute(&node, &inputs).is_none());
    let defaults = Node {
        op_type: Some("GRU".into()),
        attributes: [s.attributes(), vec![strings("activations", &["Sigmoid", "Tanh"])]].concat(),
        ..Node::default()
    };
    assert!(recurrent::compute(&defaults, &inputs).is_some());
}
