//! Half-precision models computed in `f32`: the SIMD backend's way to run
//! float16 and bfloat16 models on its `f32` kernels, with conversions only
//! at the edges.
//!
//! [`compute_in_f32`] rewrites every graph of a model whose values are
//! float16 or bfloat16: initializers are widened to `f32`, so are the
//! types the file declares for intermediate values (`value_info`, subgraph
//! inputs and outputs), `Cast`'s `to`, the `value` of `Constant` and
//! `ConstantOfShape` and the `dtype` of generators. The main graph keeps
//! its interface: each half-precision input is read through a `Cast` to
//! `f32`, and each half-precision output is written by a `Cast` from the
//! `f32` value that computes it. Every operator then computes in `f32` and
//! rounds once, at the output — as onnxruntime's CPU provider does for the
//! many operators it has no half kernel for — so results differ from a
//! computation rounding to half after every node by a few half ulps,
//! within the tolerance a half output is compared with.

use diamond_ir::{AttrValue, ElemType, Graph, GraphId, Model, Node, Tensor, TensorData, TypeInfo, TypeValue, ValueId};

/// Whether `e` is a half-precision float type this rewrite widens.
fn is_half(e: ElemType) -> bool {
    matches!(e, ElemType::Float16 | ElemType::Bfloat16)
}

/// `model` with its float16 and bfloat16 computation in `f32` (see the
/// module docs), or `None` when it computes no half-precision value or
/// holds something this rewrite does not widen (a model-local function, a
/// sparse initializer, an external half initializer it cannot read, a
/// half initializer that is itself a graph output).
pub fn compute_in_f32(model: &Model) -> Option<Model> {
    compute_in_f32_sharing(model, &mut Widened::default())
}

/// Half initializers already widened, by the stored bytes they came from:
/// models that share weights (a model and its optimized result) widen each
/// once and hold the same `f32` bytes.
#[derive(Default)]
pub struct Widened(std::collections::HashMap<(usize, usize, ElemType), bytes::Bytes>);

/// [`compute_in_f32`], reusing the widened weights in `widened` and adding to it.
pub fn compute_in_f32_sharing(model: &Model, widened: &mut Widened) -> Option<Model> {
    if !mentions_half(model) || !model.functions.is_empty() {
        return None;
    }
    let main = model.graph?;
    let mut out = model.clone();
    let ids: Vec<GraphId> = out.graphs.iter().map(|(id, _)| id).collect();
    for id in ids {
        let graph = &mut out.graphs[id];
        if graph.sparse_initializers.iter().any(|s| s.values.as_ref().is_some_and(|v| v.elem_type() != ElemType::Float))
        {
            return None;
        }
        let is_main = id == main;
        for t in &mut graph.initializers {
            if t.data_type.is_some_and(is_half) {
                *t = widened_tensor(t, widened)?;
            }
        }
        if !is_main {
            for info in graph.inputs.iter_mut().chain(graph.outputs.iter_mut()) {
                widen_type(info.ty.as_mut());
            }
        }
        for info in &mut graph.value_info {
            widen_type(info.ty.as_mut());
        }
        for node in graph.nodes.values_mut() {
            widen_attributes(node)?;
        }
    }
    edge_casts(&mut out, main)?;
    Some(out)
}

/// Whether any graph of `model` declares, stores or casts to a half type.
fn mentions_half(model: &Model) -> bool {
    let half_type = |ty: &Option<TypeInfo>| matches!(ty.as_ref().and_then(|t| t.value.as_ref()), Some(TypeValue::Tensor { elem: Some(e), .. }) if is_half(*e));
    model.graphs.iter().any(|(_, g)| {
        g.initializers.iter().any(|t| t.data_type.is_some_and(is_half))
            || g.inputs.iter().chain(&g.outputs).chain(&g.value_info).any(|i| half_type(&i.ty))
            || g.nodes.values().any(|n| {
                n.op_type() == "Cast"
                    && matches!(n.attribute("to").and_then(|a| a.value()), Some(AttrValue::Int(c)) if is_half(ElemType::from_code(c as i32)))
            })
    })
}

/// A tensor type's half element type made `f32`.
fn widen_type(ty: Option<&mut TypeInfo>) {
    if let Some(TypeValue::Tensor { elem: Some(e), .. }) = ty.and_then(|t| t.value.as_mut()) {
        if is_half(*e) {
            *e = ElemType::Float;
        }
    }
}

/// `t` (half precision) as an `f32` tensor of the same name and dims. Raw
/// bytes convert straight to `f32` bytes, once per stored buffer
/// ([`Widened`]); other layouts go through the runtime's decoding.
fn widened_tensor(t: &Tensor, widened: &mut Widened) -> Option<Tensor> {
    let elem = t.data_type?;
    let raw = match &t.data.raw {
        Some(raw) if t.external().is_none() && t.rare().external_data.is_empty() => {
            let key = (raw.as_ptr() as usize, raw.len(), elem);
            match widened.0.get(&key) {
                Some(bytes) => bytes.clone(),
                None => {
                    let bytes = bytes::Bytes::from(widen_raw(raw, elem)?);
                    widened.0.insert(key, bytes.clone());
                    bytes
                }
            }
        }
        _ => {
            let decoded = diamond_runtime::Tensor::from_ir(t).ok()?;
            let values: Vec<f32> = match &decoded.data {
                diamond_runtime::Data::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
                diamond_runtime::Data::Bf16(v) => v.iter().map(|x| x.to_f32()).collect(),
                _ => return None,
            };
            bytes::Bytes::from(values.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
        }
    };
    Some(Tensor {
        name: t.name.clone(),
        dims: t.dims.clone(),
        data_type: Some(ElemType::Float),
        data: TensorData { raw: Some(raw), ..TensorData::default() },
        rare: None,
    })
}

/// Little-endian half values as little-endian `f32` bytes.
fn widen_raw(raw: &[u8], elem: ElemType) -> Option<Vec<u8>> {
    if raw.len() % 2 != 0 {
        return None;
    }
    let to_f32: fn([u8; 2]) -> f32 = match elem {
        ElemType::Float16 => |b| half::f16::from_le_bytes(b).to_f32(),
        ElemType::Bfloat16 => |b| half::bf16::from_le_bytes(b).to_f32(),
        _ => return None,
    };
    let mut out = Vec::with_capacity(raw.len() * 2);
    for pair in raw.chunks_exact(2) {
        out.extend_from_slice(&to_f32([pair[0], pair[1]]).to_le_bytes());
    }
    Some(out)
}

/// Widens the half types `node`'s attributes name: `Cast`'s `to`, the
/// generators' `dtype`, and tensors held in attributes (`Constant`,
/// `ConstantOfShape`). `None` when a half tensor attribute cannot be read.
fn widen_attributes(node: &mut Node) -> Option<()> {
    let op = node.op_type().to_string();
    for attr in &mut node.attributes {
        let name = attr.name();
        let code_attr = (op == "Cast" && name == "to")
            || (name == "dtype"
                && matches!(
                    op.as_str(),
                    "EyeLike"
                        | "RandomNormal"
                        | "RandomUniform"
                        | "RandomNormalLike"
                        | "RandomUniformLike"
                        | "Bernoulli"
                ));
        if code_attr {
            if let Some(code) = attr.i.as_mut() {
                if is_half(ElemType::from_code(*code as i32)) {
                    *code = i64::from(ElemType::Float.code());
                }
            }
        }
        if let Some(t) = attr.t.as_mut() {
            if t.data_type.is_some_and(is_half) {
                **t = widened_tensor(t, &mut Widened::default())?;
            }
        }
    }
    Some(())
}

/// Keeps the main graph's interface: a half input is read through a `Cast`
/// to `f32`, a half output written by a `Cast` from its `f32` value.
fn edge_casts(model: &mut Model, main: GraphId) -> Option<()> {
    let graph = &mut model.graphs[main];
    let initialized: Vec<String> = graph.initializers.iter().filter_map(|t| t.name.clone()).collect();
    let half_of = |ty: &Option<TypeInfo>| match ty.as_ref().and_then(|t| t.value.as_ref()) {
        Some(TypeValue::Tensor { elem: Some(e), .. }) if is_half(*e) => Some(*e),
        _ => None,
    };
    let inputs: Vec<ValueId> = graph
        .inputs
        .iter()
        .filter(|i| half_of(&i.ty).is_some())
        .filter_map(|i| i.value)
        .filter(|&v| !initialized.iter().any(|n| n == graph.value_name(v)))
        .collect();
    let outputs: Vec<(ValueId, ElemType)> =
        graph.outputs.iter().filter_map(|o| Some((o.value?, half_of(&o.ty)?))).collect();
    let mut renamed: Vec<(String, String)> = Vec::new();
    for &v in &inputs {
        let wide = fresh(graph, v);
        replace_reads(graph, v, wide);
        renamed.push((graph.value_name(v).to_string(), graph.value_name(wide).to_string()));
        let cast = cast_node(graph, v, wide, ElemType::Float);
        graph.nodes.push(cast);
    }
    for (v, half) in outputs {
        if inputs.contains(&v) {
            // an input passed through: the input itself, half as declared
            continue;
        }
        if initialized.iter().any(|n| n == graph.value_name(v)) {
            return None;
        }
        let wide = fresh(graph, v);
        let producer = graph.nodes.values_mut().find(|n| n.outputs.contains(&v))?;
        for o in &mut producer.outputs {
            if *o == v {
                *o = wide;
            }
        }
        replace_reads(graph, v, wide);
        renamed.push((graph.value_name(v).to_string(), graph.value_name(wide).to_string()));
        let cast = cast_node(graph, wide, v, half);
        graph.nodes.push(cast);
    }
    // Subgraphs read outer values by name: those reading a renamed one read its f32 value.
    let ids: Vec<GraphId> = model.graphs.iter().map(|(id, _)| id).filter(|&id| id != main).collect();
    for id in ids {
        let sub = &mut model.graphs[id];
        for (old, new) in &renamed {
            let Some(v) = sub.value_named(old) else { continue };
            let defined = sub.inputs.iter().any(|i| i.value == Some(v))
                || sub.initializers.iter().any(|t| t.name.as_deref() == Some(old.as_str()))
                || sub.nodes.values().any(|n| n.outputs.contains(&v));
            if !defined {
                let wide = sub.intern(new);
                replace_reads(sub, v, wide);
                for o in &mut sub.outputs {
                    if o.value == Some(v) {
                        o.value = Some(wide);
                    }
                }
            }
        }
    }
    Some(())
}

/// A new value named after `v` (`x` → `x.f32`, numbered when taken).
fn fresh(graph: &mut Graph, v: ValueId) -> ValueId {
    let base = format!("{}.f32", graph.value_name(v));
    let mut name = base.clone();
    let mut k = 1;
    while graph.value_named(&name).is_some() {
        name = format!("{base}.{k}");
        k += 1;
    }
    graph.intern(&name)
}

/// Makes every node of `graph` that reads `from` read `to`.
fn replace_reads(graph: &mut Graph, from: ValueId, to: ValueId) {
    for node in graph.nodes.values_mut() {
        for input in &mut node.inputs {
            if *input == from {
                *input = to;
            }
        }
    }
}

/// `Cast(from) -> to` with `to` = `elem`, named after its output.
fn cast_node(graph: &Graph, from: ValueId, to: ValueId, elem: ElemType) -> Node {
    let to_attr = diamond_ir::Attribute {
        name: Some("to".into()),
        attr_type: Some(diamond_ir::AttrType::Int),
        i: Some(i64::from(elem.code())),
        ..Default::default()
    };
    Node {
        name: Some(format!("{}/cast", graph.value_name(to))),
        op_type: Some("Cast".into()),
        domain: Some(String::new()),
        inputs: vec![from],
        outputs: vec![to],
        attributes: vec![to_attr],
        rare: None,
    }
}
