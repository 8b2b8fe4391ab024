//! Lowering TorchScript IR text ([`crate::torch::irtext`]) to an ONNX graph.
//!
//! The text has no weights: a parameter read through `prim::GetAttr` chains
//! from the module input becomes a graph input named by its path
//! (`layer1.0.conv1.weight`), typed as far as the text says. The tensor
//! types torch recorded on values (`Float(2, 8, 16, 16, ...)`) become
//! `value_info` declarations, so `check` compares its inference with
//! them. Nodes run through the same operator lowering as archive code;
//! `prim::If` and `prim::Loop` on values known at import are resolved; a
//! `prim::CallMethod` (a graph that is not inlined) is an error asking for
//! `inlined_graph`.

use super::builder::GraphBuilder;
use super::interp::Interp;
use super::value::{Val, T};
use super::{dim_decl, model, unsupported_error, InputShape, LowerError};
use crate::torch::irtext::{IrAttr, IrBlock, IrGraph, IrNode, IrType, IrValue};
use crate::torch::values::elem_of_torch_name;
use diamond_ir::{DimDecl, DimValue, ElemType, Model, TensorShape, TypeInfo, TypeValue, ValueInfo};
use std::collections::{HashMap, HashSet};

/// How many loop iterations are unrolled in all.
const MAX_UNROLL: usize = 100_000;

type Env<'a> = HashMap<String, Val<'a>>;

/// Lowers a parsed IR text graph read from `path`.
pub fn lower_ir(path: &str, graph: &IrGraph, shapes: &[InputShape]) -> Result<Model, LowerError> {
    let files = HashMap::new();
    let mut interp = Interp::new(None, &files, GraphBuilder::new("torchscript"));
    interp.file = path.to_string();
    let mut env: Env<'_> = HashMap::new();
    let mut lowering = IrLowering { params: HashMap::new(), typed: HashSet::new(), unrolled: 0 };
    let mut tensor_index = 0;
    for input in &graph.inputs {
        match &input.ty {
            IrType::Class(_) => {
                env.insert(input.name.clone(), Val::Str(module_marker("")));
            }
            IrType::Tensor { elem, sizes, .. } => {
                // `%x.1`: torch's debug name; `x` matches it too.
                let base = input.name.split('.').next().unwrap_or(&input.name);
                let given = shapes
                    .iter()
                    .find(|s| s.name == input.name || s.name == base || s.name == tensor_index.to_string());
                let dims: Vec<DimDecl> = match (given, sizes) {
                    (Some(s), _) => s.dims.iter().map(dim_decl).collect(),
                    (None, Some(sizes)) => sizes.iter().map(|d| dim_of(*d)).collect(),
                    (None, None) => {
                        return Err(LowerError::Other(format!(
                            "the shape of input '%{}' is not stated; give --input-shape {}=D0,D1,...",
                            input.name, base
                        )))
                    }
                };
                let elem = elem.as_deref().and_then(elem_of_torch_name).unwrap_or(ElemType::Float);
                let rank = dims.len();
                let id = interp.b.input(&clean_name(&input.name), elem, &dims);
                lowering.typed.insert(id);
                env.insert(input.name.clone(), Val::Tensor(T { id, elem: Some(elem), rank: Some(rank) }));
                tensor_index += 1;
            }
            other => {
                return Err(LowerError::Other(format!(
                    "{path}: input '%{}' of type {other:?} is not supported",
                    input.name
                )))
            }
        }
    }
    let ran = lowering.run_nodes(&mut interp, &graph.nodes, &mut env);
    if let Some(e) = unsupported_error(std::mem::take(&mut interp.unsupported)) {
        return Err(e);
    }
    ran?;
    for name in &graph.returns {
        let v =
            env.get(name).cloned().ok_or_else(|| LowerError::Other(format!("{path}: return of undefined %{name}")))?;
        for item in v.items().map(<[Val]>::to_vec).unwrap_or_else(|| vec![v.clone()]) {
            match item {
                Val::Tensor(t) => interp.b.output(t.id, t.elem),
                Val::RuntimeInt(id) => interp.b.output(id, Some(ElemType::Int64)),
                other => return Err(LowerError::Other(format!("{path}: the graph returns {}", other.describe()))),
            }
        }
    }
    Ok(model(interp.b))
}

/// A module known only by its path (IR text has no module objects).
fn module_marker(path: &str) -> String {
    format!("\u{0}module:{path}")
}

fn module_path(v: &Val<'_>) -> Option<String> {
    match v {
        Val::Str(s) => s.strip_prefix("\u{0}module:").map(str::to_string),
        _ => None,
    }
}

/// `%input.3` → `input.3`; graph input names keep torch's debug name.
fn clean_name(name: &str) -> String {
    name.trim_start_matches('%').to_string()
}

fn dim_of(d: Option<u64>) -> DimDecl {
    DimDecl { value: d.map(|n| DimValue::Known(n as i64)), denotation: None }
}

struct IrLowering {
    /// Parameters already made graph inputs, by path.
    params: HashMap<String, T>,
    /// Values whose type the graph already states (inputs, earlier `value_info`).
    typed: HashSet<diamond_ir::ValueId>,
    unrolled: usize,
}

impl IrLowering {
    fn run_nodes<'a>(
        &mut self,
        interp: &mut Interp<'a>,
        nodes: &'a [IrNode],
        env: &mut Env<'a>,
    ) -> Result<(), LowerError> {
        for node in nodes {
            self.run_node(interp, node, env)?;
        }
        Ok(())
    }

    fn run_node<'a>(&mut self, interp: &mut Interp<'a>, node: &'a IrNode, env: &mut Env<'a>) -> Result<(), LowerError> {
        interp.origin.source = node.source.clone().unwrap_or_else(|| format!("{}:{}", interp.file, node.line));
        interp.origin.path = node.scope.as_deref().map(scope_path).unwrap_or_default();
        let place = format!("{}:{}", interp.file, node.line);
        let at = |m: String| LowerError::At { at: place.clone(), message: m };
        let inputs: Vec<Val<'a>> = node
            .inputs
            .iter()
            .map(|n| env.get(n).cloned().ok_or_else(|| at(format!("%{n} is not defined"))))
            .collect::<Result<_, _>>()?;
        let results: Vec<Val<'a>> = match node.kind.as_str() {
            "prim::Constant" => vec![constant(node).map_err(at)?],
            "prim::ListConstruct" => vec![Val::List(inputs)],
            "prim::TupleConstruct" => vec![Val::Tuple(inputs)],
            "prim::ListUnpack" | "prim::TupleUnpack" => inputs
                .first()
                .and_then(Val::items)
                .map(<[Val]>::to_vec)
                .ok_or_else(|| at("unpacking a non-list".into()))?,
            "prim::TupleIndex" | "aten::__getitem__" => {
                let (Some(base), Some(i)) = (inputs.first(), inputs.get(1).and_then(Val::as_int)) else {
                    return Err(at(format!("{} needs a list and a known index", node.kind)));
                };
                let items = base.items().ok_or_else(|| at("indexing a non-list".into()))?;
                let n = items.len() as i64;
                let k = if i < 0 { i + n } else { i };
                vec![items.get(k as usize).cloned().ok_or_else(|| at(format!("index {i} of {n}")))?]
            }
            "prim::GetAttr" => vec![self.get_attr(interp, node, &inputs).map_err(at)?],
            "prim::CallMethod" | "prim::CallFunction" => {
                return Err(at(format!(
                    "{}: the graph is not inlined; dump `module.inlined_graph` instead of `module.graph`",
                    node.kind
                )))
            }
            "prim::device" => vec![Val::Device],
            "prim::dtype" => {
                let t = inputs.first().and_then(Val::tensor).ok_or_else(|| at("prim::dtype of a non-tensor".into()))?;
                vec![Val::Int(
                    t.elem
                        .and_then(super::value::scalar_code)
                        .ok_or_else(|| at("prim::dtype: element type unknown".into()))?,
                )]
            }
            "prim::If" => return self.run_if(interp, node, &inputs, env),
            "prim::Loop" => return self.run_loop(interp, node, inputs, env),
            "prim::RaiseException" => return Err(at("the graph raises an exception on this path".into())),
            kind => {
                let op = kind.replace("::", ".");
                let v = interp.operator(&op, inputs, Vec::new(), node.line).map_err(LowerError::from)?;
                match (node.outputs.len(), v) {
                    (1, v) => vec![v],
                    (0, _) => Vec::new(),
                    (n, v) => v
                        .items()
                        .map(<[Val]>::to_vec)
                        .filter(|i| i.len() == n)
                        .ok_or_else(|| at(format!("{kind} gives {n} results")))?,
                }
            }
        };
        for (out, v) in node.outputs.iter().zip(results) {
            self.declare(interp, out, &v);
            env.insert(out.name.clone(), v);
        }
        Ok(())
    }

    /// Records torch's recorded type of a tensor value as a `value_info` claim.
    fn declare<'a>(&mut self, interp: &mut Interp<'a>, out: &IrValue, v: &Val<'a>) {
        let (Val::Tensor(t), IrType::Tensor { elem, sizes: Some(sizes), .. }) = (v, &out.ty) else { return };
        if !self.typed.insert(t.id) {
            return;
        }
        let dims = sizes.iter().map(|d| dim_of(*d)).collect();
        let elem = elem.as_deref().and_then(elem_of_torch_name).or(t.elem);
        let ty =
            TypeInfo { value: Some(TypeValue::Tensor { elem, shape: Some(TensorShape { dims }) }), denotation: None };
        interp.b.graph.value_info.push(ValueInfo { value: Some(t.id), ty: Some(ty), ..ValueInfo::default() });
    }

    fn get_attr<'a>(
        &mut self,
        interp: &mut Interp<'a>,
        node: &'a IrNode,
        inputs: &[Val<'a>],
    ) -> Result<Val<'a>, String> {
        let base = inputs.first().and_then(module_path).ok_or("prim::GetAttr of something other than a module")?;
        let name = node
            .attrs
            .iter()
            .find_map(|(k, v)| match (k.as_str(), v) {
                ("name", IrAttr::Str(s)) => Some(s.clone()),
                _ => None,
            })
            .ok_or("prim::GetAttr without a name")?;
        let path = if base.is_empty() { name } else { format!("{base}.{name}") };
        let Some(out) = node.outputs.first() else { return Err("prim::GetAttr without an output".into()) };
        match &out.ty {
            IrType::Tensor { elem, sizes, .. } => {
                if let Some(t) = self.params.get(&path) {
                    return Ok(Val::Tensor(*t));
                }
                let elem = elem.as_deref().and_then(elem_of_torch_name).unwrap_or(ElemType::Float);
                let rank = sizes.as_ref().map(Vec::len);
                let dims: Vec<DimDecl> =
                    sizes.as_ref().map(|s| s.iter().map(|d| dim_of(*d)).collect()).unwrap_or_default();
                let id = if sizes.is_some() {
                    interp.b.input(&path, elem, &dims)
                } else {
                    let id = interp.b.fresh(&path);
                    let ty =
                        TypeInfo { value: Some(TypeValue::Tensor { elem: Some(elem), shape: None }), denotation: None };
                    interp.b.graph.inputs.push(ValueInfo { value: Some(id), ty: Some(ty), ..ValueInfo::default() });
                    id
                };
                let t = T { id, elem: Some(elem), rank };
                self.typed.insert(id);
                self.params.insert(path, t);
                Ok(Val::Tensor(t))
            }
            IrType::Class(_) => Ok(Val::Str(module_marker(&path))),
            IrType::Bool => Ok(Val::Bool(false)),
            other => Err(format!("prim::GetAttr of '{path}' ({other:?}): only modules and tensors")),
        }
    }

    fn run_if<'a>(
        &mut self,
        interp: &mut Interp<'a>,
        node: &'a IrNode,
        inputs: &[Val<'a>],
        env: &mut Env<'a>,
    ) -> Result<(), LowerError> {
        let place = format!("{}:{}", interp.file, node.line);
        let at = |m: String| LowerError::At { at: place.clone(), message: m };
        let taken = match inputs.first() {
            Some(Val::Bool(b)) => *b,
            Some(Val::Int(n)) => *n != 0,
            Some(other) => {
                return Err(at(format!("prim::If on {}: only conditions known at import", other.describe())))
            }
            None => return Err(at("prim::If without a condition".into())),
        };
        let block = node.blocks.get(usize::from(!taken)).ok_or_else(|| at("prim::If without two blocks".into()))?;
        let results = self.run_block(interp, block, &[], env)?;
        for (out, v) in node.outputs.iter().zip(results) {
            env.insert(out.name.clone(), v);
        }
        Ok(())
    }

    /// `prim::Loop(max_trip_count, initial_condition, carried...)`: unrolled when the count is known.
    fn run_loop<'a>(
        &mut self,
        interp: &mut Interp<'a>,
        node: &'a IrNode,
        inputs: Vec<Val<'a>>,
        env: &mut Env<'a>,
    ) -> Result<(), LowerError> {
        let place = format!("{}:{}", interp.file, node.line);
        let at = |m: String| LowerError::At { at: place.clone(), message: m };
        let (Some(count), Some(cond)) = (inputs.first().and_then(Val::as_int), inputs.get(1).and_then(Val::as_int))
        else {
            return Err(at("prim::Loop whose trip count or condition is known only at run time".into()));
        };
        let block = node.blocks.first().ok_or_else(|| at("prim::Loop without a body".into()))?;
        let mut carried: Vec<Val<'a>> = inputs[2..].to_vec();
        let mut go = cond != 0;
        let mut i = 0;
        while go && i < count {
            self.unrolled += 1;
            if self.unrolled > MAX_UNROLL {
                return Err(at(format!("loops unroll to more than {MAX_UNROLL} iterations")));
            }
            let mut args = vec![Val::Int(i)];
            args.extend(carried.iter().cloned());
            let mut results = self.run_block(interp, block, &args, env)?.into_iter();
            go = match results.next() {
                Some(Val::Bool(b)) => b,
                Some(Val::Int(n)) => n != 0,
                _ => return Err(at("a loop condition known only at run time".into())),
            };
            carried = results.collect();
            i += 1;
        }
        for (out, v) in node.outputs.iter().zip(carried) {
            env.insert(out.name.clone(), v);
        }
        Ok(())
    }

    fn run_block<'a>(
        &mut self,
        interp: &mut Interp<'a>,
        block: &'a IrBlock,
        args: &[Val<'a>],
        env: &mut Env<'a>,
    ) -> Result<Vec<Val<'a>>, LowerError> {
        for (p, v) in block.params.iter().zip(args) {
            env.insert(p.name.clone(), v.clone());
        }
        self.run_nodes(interp, &block.nodes, env)?;
        block
            .returns
            .iter()
            .map(|n| env.get(n).cloned().ok_or_else(|| LowerError::Other(format!("block returns undefined %{n}"))))
            .collect()
    }
}

/// The value of a `prim::Constant`.
fn constant<'a>(node: &IrNode) -> Result<Val<'a>, String> {
    let ty = node.outputs.first().map(|o| &o.ty);
    let value = node.attrs.iter().find(|(k, _)| k == "value").map(|(_, v)| v);
    Ok(match (value, ty) {
        (None, _) => Val::None,
        (Some(IrAttr::Int(n)), Some(IrType::Bool)) => Val::Bool(*n != 0),
        (Some(IrAttr::Int(n)), _) => Val::Int(*n),
        (Some(IrAttr::Float(x)), _) => Val::Float(*x),
        (Some(IrAttr::Str(_)), Some(IrType::Device)) => Val::Device,
        (Some(IrAttr::Str(s)), _) => Val::Str(s.clone()),
        (Some(IrAttr::Ints(v)), _) => Val::List(v.iter().map(|&n| Val::Int(n)).collect()),
        (Some(IrAttr::Floats(v)), _) => Val::List(v.iter().map(|&x| Val::Float(x)).collect()),
        (Some(IrAttr::Tensor(text)), _) => scalar_tensor_constant(text)
            .ok_or_else(|| format!("a tensor constant ({text}) other than a scalar is not supported"))?,
        (Some(IrAttr::Other(text)), _) => return Err(format!("a constant '{text}' is not supported")),
    })
}

/// A 0-d tensor constant printed as `{4}` or `{0.5}`: its number.
fn scalar_tensor_constant<'a>(text: &str) -> Option<Val<'a>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
    if let Ok(n) = inner.parse::<i64>() {
        return Some(Val::Int(n));
    }
    inner.parse::<f64>().ok().map(Val::Float)
}

/// `__module.layer1/__module.layer1.0/__module.layer1.0.conv1` → `layer1.0.conv1`.
fn scope_path(scope: &str) -> String {
    scope.rsplit('/').next().unwrap_or("").trim_start_matches("__module.").trim_start_matches("__module").to_string()
}
