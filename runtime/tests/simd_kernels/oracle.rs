//! The reference executor as the oracle of the SIMD kernels: a small ONNX
//! graph built in memory — the operator (MatMul, Gemm or Conv), then
//! `Mul(alpha)`, `Add(Mul(bias, beta))`, the activation's own ONNX
//! operator(s) and `Add(residual)` — run by `run_model` in f64.

use diamond_ir::{AttrRare, AttrType, Attribute, Graph, GraphOwner, Model, Node, OpsetImport, ValueInfo};
use diamond_runtime::simd::epilogue::{Activation, Bias, Epilogue};
use diamond_runtime::{run_model, Data, RunOptions, Tensor, Value};

/// A graph under construction, with the values it is fed.
pub struct Net {
    graph: Graph,
    fed: Vec<(String, Value)>,
    next: usize,
}

impl Net {
    pub fn new() -> Net {
        Net { graph: Graph::new(GraphOwner::Main), fed: Vec::new(), next: 0 }
    }

    fn fresh(&mut self, stem: &str) -> String {
        self.next += 1;
        format!("{stem}{}", self.next)
    }

    /// A graph input fed with `data` (f32) of `shape`.
    pub fn input(&mut self, shape: &[usize], data: &[f32]) -> String {
        self.fed_input(shape, Data::F32(data.to_vec()))
    }

    fn fed_input(&mut self, shape: &[usize], data: Data) -> String {
        let name = self.fresh("in");
        let id = self.graph.intern(&name);
        self.graph.inputs.push(ValueInfo { value: Some(id), ..ValueInfo::default() });
        let tensor = Tensor::new(shape.to_vec(), data).expect("shape and data agree");
        self.fed.push((name.clone(), Value::Tensor(tensor)));
        name
    }

    /// A graph input fed with `data` (int32) of `shape`.
    pub fn input_i32(&mut self, shape: &[usize], data: &[i32]) -> String {
        self.fed_input(shape, Data::I32(data.to_vec()))
    }

    /// A node of `op` over `inputs` (`""` for an omitted one) with `count`
    /// outputs; returns their names.
    pub fn node_with_outputs(
        &mut self,
        op: &str,
        inputs: &[&str],
        attributes: Vec<Attribute>,
        count: usize,
    ) -> Vec<String> {
        let names: Vec<String> = (0..count).map(|_| self.fresh("v")).collect();
        let inputs = inputs.iter().map(|n| self.graph.intern(n)).collect();
        let outputs = names.iter().map(|n| self.graph.intern(n)).collect();
        self.graph.nodes.push(Node { op_type: Some(op.to_string()), inputs, outputs, attributes, ..Node::default() });
        names
    }

    /// A node of `op` over `inputs`; returns its output's name.
    pub fn node(&mut self, op: &str, inputs: &[&str], attributes: Vec<Attribute>) -> String {
        let out = self.fresh("v");
        let inputs = inputs.iter().map(|n| self.graph.intern(n)).collect();
        let outputs = vec![self.graph.intern(&out)];
        self.graph.nodes.push(Node { op_type: Some(op.to_string()), inputs, outputs, attributes, ..Node::default() });
        out
    }

    /// Runs the graph (opset 21) and returns `output` as f64.
    pub fn run(self, output: &str) -> Vec<f64> {
        self.try_run(output).expect("the reference runs the graph")
    }

    /// As [`Net::run`], or `None` when the reference refuses the graph.
    pub fn try_run(mut self, output: &str) -> Option<Vec<f64>> {
        let id = self.graph.intern(output);
        self.graph.outputs.push(ValueInfo { value: Some(id), ..ValueInfo::default() });
        let mut model = Model {
            ir_version: Some(10),
            opset_imports: vec![OpsetImport { domain: Some(String::new()), version: Some(21) }],
            ..Model::default()
        };
        let gid = model.graphs.push(self.graph);
        model.graph = Some(gid);
        let result = run_model(&model, self.fed, &RunOptions::default()).ok()?;
        match result.outputs.into_iter().next() {
            Some((_, Value::Tensor(t))) => Some(t.to_f64s().expect("numeric output")),
            _ => panic!("no tensor output"),
        }
    }

    /// Appends the epilogue's operators after `product` (of `shape`); `bias_shape` is the shape
    /// the bias broadcasts from (per row, per column, ...), chosen by the caller.
    pub fn epilogue(&mut self, product: &str, shape: &[usize], ep: &Epilogue, bias_shape: &[usize]) -> String {
        let alpha = self.input(&[], &[ep.alpha]);
        let mut y = self.node("Mul", &[product, &alpha], vec![]);
        let bias = match ep.bias {
            Bias::None => None,
            Bias::Scalar(s) => Some(self.input(&[], &[s])),
            Bias::PerRow(b) | Bias::PerCol(b) | Bias::Full(b) => {
                let len = bias_shape.iter().product();
                Some(self.input(bias_shape, &b[..len]))
            }
        };
        if let Some(bias) = bias {
            let beta = self.input(&[], &[ep.beta]);
            let scaled = self.node("Mul", &[&bias, &beta], vec![]);
            y = self.node("Add", &[&y, &scaled], vec![]);
        }
        y = self.activation(&y, ep.activation);
        if let Some(r) = ep.residual {
            let residual = self.input(shape, &r[..shape.iter().product()]);
            y = self.node("Add", &[&y, &residual], vec![]);
        }
        self.activation(&y, ep.after)
    }

    fn activation(&mut self, x: &str, act: Activation) -> String {
        match act {
            Activation::None => x.to_string(),
            Activation::Relu => self.node("Relu", &[x], vec![]),
            Activation::LeakyRelu(a) => self.node("LeakyRelu", &[x], vec![float("alpha", a)]),
            Activation::Clip { min, max } => {
                let (lo, hi) = (self.input(&[], &[min]), self.input(&[], &[max]));
                self.node("Clip", &[x, &lo, &hi], vec![])
            }
            Activation::Sigmoid => self.node("Sigmoid", &[x], vec![]),
            Activation::Tanh => self.node("Tanh", &[x], vec![]),
            Activation::HardSigmoid { alpha, beta } => {
                self.node("HardSigmoid", &[x], vec![float("alpha", alpha), float("beta", beta)])
            }
            Activation::Gelu => self.node("Gelu", &[x], vec![]),
            Activation::GeluTanh => self.node("Gelu", &[x], vec![string("approximate", "tanh")]),
            Activation::Silu => {
                let s = self.node("Sigmoid", &[x], vec![]);
                self.node("Mul", &[x, &s], vec![])
            }
            Activation::HardSwish => self.node("HardSwish", &[x], vec![]),
        }
    }
}

pub fn float(name: &str, value: f32) -> Attribute {
    Attribute { name: Some(name.into()), attr_type: Some(AttrType::Float), f: Some(value), ..Attribute::default() }
}

pub fn int(name: &str, value: i64) -> Attribute {
    Attribute { name: Some(name.into()), attr_type: Some(AttrType::Int), i: Some(value), ..Attribute::default() }
}

pub fn ints(name: &str, values: &[usize]) -> Attribute {
    Attribute {
        name: Some(name.into()),
        attr_type: Some(AttrType::Ints),
        ints: values.iter().map(|&v| v as i64).collect(),
        ..Attribute::default()
    }
}

pub fn string(name: &str, value: &str) -> Attribute {
    Attribute {
        name: Some(name.into()),
        attr_type: Some(AttrType::String),
        s: Some(bytes::Bytes::from(value.to_string())),
        ..Attribute::default()
    }
}

/// Asserts `got` within `reduction`-scaled tolerance of `want`.
#[track_caller]
pub fn assert_close(got: &[f32], want: &[f64], reduction: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    // f32 accumulation: error grows with the reduction length; the activations' own error is ~3e-7
    let tol = 4e-7 * (reduction as f64 + 4.0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= tol * (1.0 + w.abs()), "{what}: element {i}: {g} vs {w} (error {err:e}, tolerance {tol:e})");
    }
}

pub fn strings(name: &str, values: &[&str]) -> Attribute {
    Attribute {
        name: Some(name.into()),
        attr_type: Some(AttrType::Strings),
        rare: AttrRare {
            strings: values.iter().map(|v| bytes::Bytes::from(v.to_string())).collect(),
            ..AttrRare::default()
        }
        .boxed(),
        ..Attribute::default()
    }
}
