//! Building the ONNX graph a TorchScript module lowers to: unique value and
//! node names, nodes with attributes and their source location, and
//! initializers (stored tensors keep their archive bytes; constants the
//! lowering makes are small).

use bytes::Bytes;
use diamond_ir::{
    AttrType, Attribute, ElemType, Graph, GraphOwner, Node, NodeRare, StringEntry, Tensor, TensorData, ValueId,
    ValueInfo,
};
use std::collections::HashSet;

/// The graph under construction.
pub struct GraphBuilder {
    /// The graph.
    pub graph: Graph,
    names: HashSet<String>,
    counter: usize,
}

/// Where a node comes from: the module path and the code line.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// `layer1.0.conv1` (empty at the root module).
    pub path: String,
    /// `code/__torch__/torch/nn/modules/conv.py:12`.
    pub source: String,
}

impl GraphBuilder {
    /// An empty main graph named `name`.
    pub fn new(name: &str) -> GraphBuilder {
        let mut graph = Graph::new(GraphOwner::Main);
        graph.name = Some(name.to_string());
        GraphBuilder { graph, names: HashSet::new(), counter: 0 }
    }

    /// A value with a name not used before, made from `hint`.
    pub fn fresh(&mut self, hint: &str) -> ValueId {
        let base = if hint.is_empty() { "v".to_string() } else { hint.to_string() };
        let mut name = base.clone();
        while self.names.contains(&name) {
            self.counter += 1;
            name = format!("{base}_{}", self.counter);
        }
        self.names.insert(name.clone());
        self.graph.intern(&name)
    }

    /// Adds `op` (default domain) on `inputs` with `outputs` results.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        outputs: usize,
        attributes: Vec<Attribute>,
        origin: &Origin,
    ) -> Vec<ValueId> {
        let stem = if origin.path.is_empty() { op.to_string() } else { format!("{}/{op}", origin.path) };
        let outs: Vec<ValueId> = (0..outputs).map(|_| self.fresh(&format!("{stem}_out"))).collect();
        let name = self.unique_node_name(&stem);
        let mut metadata_props = Vec::new();
        if !origin.source.is_empty() {
            metadata_props.push(StringEntry { key: Some("source".into()), value: Some(origin.source.clone()) });
        }
        let node = Node {
            name: Some(name),
            op_type: Some(op.to_string()),
            domain: Some(String::new()),
            inputs: inputs.to_vec(),
            outputs: outs.clone(),
            attributes,
            rare: NodeRare {
                doc_string: (!origin.source.is_empty()).then(|| origin.source.clone()),
                metadata_props,
                ..NodeRare::default()
            }
            .boxed(),
        };
        self.graph.nodes.push(node);
        outs
    }

    /// One-output [`GraphBuilder::node`].
    pub fn op(&mut self, op: &str, inputs: &[ValueId], attributes: Vec<Attribute>, origin: &Origin) -> ValueId {
        self.node(op, inputs, 1, attributes, origin)[0]
    }

    fn unique_node_name(&mut self, stem: &str) -> String {
        let mut name = stem.to_string();
        let mut n = 0;
        while self.names.contains(&format!("node:{name}")) {
            n += 1;
            name = format!("{stem}_{n}");
        }
        self.names.insert(format!("node:{name}"));
        name
    }

    /// An initializer named like `hint` holding `raw` bytes.
    pub fn initializer(&mut self, hint: &str, elem: ElemType, dims: &[u64], raw: Bytes) -> ValueId {
        let id = self.fresh(hint);
        let tensor = Tensor {
            name: Some(self.graph.value_name(id).to_string()),
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: Some(elem),
            data: TensorData { raw: Some(raw), ..TensorData::default() },
            ..Tensor::default()
        };
        self.graph.initializers.push(tensor);
        id
    }

    /// An int64 initializer.
    pub fn const_i64s(&mut self, hint: &str, values: &[i64], dims: &[u64]) -> ValueId {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.initializer(hint, ElemType::Int64, dims, Bytes::from(raw))
    }

    /// A 1-D int64 initializer.
    pub fn const_vector(&mut self, values: &[i64]) -> ValueId {
        self.const_i64s("const", values, &[values.len() as u64])
    }

    /// A 0-d int64 initializer.
    pub fn const_int(&mut self, value: i64) -> ValueId {
        self.const_i64s("const", &[value], &[])
    }

    /// A 0-d initializer of a float type.
    pub fn const_float(&mut self, value: f64, elem: ElemType) -> ValueId {
        let raw: Vec<u8> = match elem {
            ElemType::Double => value.to_le_bytes().to_vec(),
            ElemType::Float16 => half_bits(value as f32).to_le_bytes().to_vec(),
            ElemType::Bfloat16 => (((value as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
            _ => {
                return self.initializer(
                    "const",
                    ElemType::Float,
                    &[],
                    Bytes::from((value as f32).to_le_bytes().to_vec()),
                )
            }
        };
        self.initializer("const", elem, &[], Bytes::from(raw))
    }

    /// A 0-d bool initializer.
    pub fn const_bool(&mut self, value: bool) -> ValueId {
        self.initializer("const", ElemType::Bool, &[], Bytes::from(vec![u8::from(value)]))
    }

    /// Declares a graph input.
    pub fn input(&mut self, name: &str, elem: ElemType, dims: &[diamond_ir::DimDecl]) -> ValueId {
        let id = self.fresh(name);
        let ty = diamond_ir::TypeInfo {
            value: Some(diamond_ir::TypeValue::Tensor {
                elem: Some(elem),
                shape: Some(diamond_ir::TensorShape { dims: dims.to_vec() }),
            }),
            denotation: None,
        };
        self.graph.inputs.push(ValueInfo { value: Some(id), ty: Some(ty), ..ValueInfo::default() });
        id
    }

    /// Declares `value` a graph output, with its element type if known.
    pub fn output(&mut self, value: ValueId, elem: Option<ElemType>) {
        let ty = elem.map(|e| diamond_ir::TypeInfo {
            value: Some(diamond_ir::TypeValue::Tensor { elem: Some(e), shape: None }),
            denotation: None,
        });
        self.graph.outputs.push(ValueInfo { value: Some(value), ty, ..ValueInfo::default() });
    }
}

/// The IEEE half-precision bits of `x` (round toward zero; enough for constants).
fn half_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32 - 127 + 15;
    let mant = (bits >> 13) & 0x3ff;
    if exp <= 0 {
        sign
    } else if exp >= 31 {
        sign | 0x7c00
    } else {
        sign | ((exp as u16) << 10) | mant as u16
    }
}

/// An int attribute.
pub fn attr_int(name: &str, v: i64) -> Attribute {
    Attribute { name: Some(name.into()), attr_type: Some(AttrType::Int), i: Some(v), ..Attribute::default() }
}

/// An ints attribute.
pub fn attr_ints(name: &str, v: &[i64]) -> Attribute {
    Attribute { name: Some(name.into()), attr_type: Some(AttrType::Ints), ints: v.to_vec(), ..Attribute::default() }
}

/// A float attribute.
pub fn attr_float(name: &str, v: f64) -> Attribute {
    Attribute { name: Some(name.into()), attr_type: Some(AttrType::Float), f: Some(v as f32), ..Attribute::default() }
}

/// A string attribute.
pub fn attr_str(name: &str, v: &str) -> Attribute {
    Attribute {
        name: Some(name.into()),
        attr_type: Some(AttrType::String),
        s: Some(Bytes::from(v.as_bytes().to_vec())),
        ..Attribute::default()
    }
}

/// A tensor attribute holding one value of `elem` (for `ConstantOfShape`).
pub fn attr_scalar_tensor(name: &str, elem: ElemType, raw: Vec<u8>) -> Attribute {
    let t = Tensor {
        dims: vec![1],
        data_type: Some(elem),
        data: TensorData { raw: Some(Bytes::from(raw)), ..TensorData::default() },
        ..Tensor::default()
    };
    Attribute {
        name: Some(name.into()),
        attr_type: Some(AttrType::Tensor),
        t: Some(Box::new(t)),
        ..Attribute::default()
    }
}
