//! Lowering a TorchScript module to an ONNX graph in diamond's IR.
//!
//! The root module's `forward` runs in an interpreter ([`interp`]) over the
//! parsed class code: submodules are inlined with their path as the node
//! name prefix (`layer1.0.conv1/Conv`), each node records its source line
//! (`metadata_props["source"] = code/__torch__/...py:12`), parameters become
//! initializers holding the archive's bytes, and tensor operators become
//! standard ONNX nodes ([`aten`]). Graph inputs take their shapes from
//! `traced_inputs.pkl` or from `--input-shape`; every operator without a
//! lowering is listed in one error, never dropped.

pub mod args;
pub mod aten;
pub mod builder;
pub mod fused;
pub mod indexing;
pub mod interp;
pub mod irgraph;
pub mod value;

use crate::torch::archive::Archive;
use crate::torch::code::ast::File;
use crate::torch::values::TsValue;
use builder::GraphBuilder;
use diamond_ir::{DimDecl, DimValue, ElemType, Model, OpsetImport, StringEntry};
use interp::{Interp, Unsupported};
use std::collections::HashMap;
use value::Val;

/// The ONNX opset the lowering writes.
pub const OPSET: i64 = 21;
/// The IR version the lowering writes (onnxruntime 1.2x reads it).
pub const IR_VERSION: i64 = 10;

/// A graph input's shape given on the command line: `name=batch,3,224,224`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    /// The input (a `forward` parameter name), or its position `0`, `1`, ...
    pub name: String,
    /// Sizes (`3`) and symbols (`batch`).
    pub dims: Vec<DimSpec>,
}

/// One dim of an [`InputShape`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimSpec {
    /// A size.
    Known(u64),
    /// A symbol (`batch`).
    Symbol(String),
}

impl std::str::FromStr for InputShape {
    type Err = String;

    fn from_str(s: &str) -> Result<InputShape, String> {
        let (name, dims) =
            s.split_once('=').ok_or_else(|| format!("'{s}' is not NAME=D0,D1,... (e.g. x=batch,3,224,224)"))?;
        if name.trim().is_empty() {
            return Err(format!("'{s}': the input name is empty"));
        }
        let dims = if dims.trim().is_empty() {
            Vec::new()
        } else {
            dims.split(',')
                .map(|d| {
                    let d = d.trim();
                    match d.parse::<u64>() {
                        Ok(n) => Ok(DimSpec::Known(n)),
                        Err(_) if !d.is_empty() && d.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                            Ok(DimSpec::Symbol(d.to_string()))
                        }
                        Err(_) => Err(format!("'{d}' in '{s}' is neither a size nor a symbol")),
                    }
                })
                .collect::<Result<_, _>>()?
        };
        Ok(InputShape { name: name.trim().to_string(), dims })
    }
}

/// Why a module could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// A located failure.
    #[error("{at}: {message}")]
    At {
        /// `code/__torch__/x.py:12`.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// Operators without a lowering.
    #[error("{}", unsupported_text(.0))]
    Unsupported(Vec<(String, usize, String)>),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

fn unsupported_text(ops: &[(String, usize, String)]) -> String {
    let list: Vec<String> = ops.iter().map(|(op, n, at)| format!("{op} ×{n} (first at {at})")).collect();
    format!("{} unsupported operator(s): {}", ops.len(), list.join(", "))
}

impl From<interp::Located> for LowerError {
    fn from(l: interp::Located) -> LowerError {
        LowerError::At { at: l.at, message: l.message }
    }
}

fn unsupported_error(u: Unsupported) -> Option<LowerError> {
    (!u.ops.is_empty()).then(|| LowerError::Unsupported(u.ops.into_iter().map(|(op, (n, at))| (op, n, at)).collect()))
}

/// Lowers `archive`'s root module (its `forward`) to a model.
pub fn lower_archive(
    archive: &Archive,
    files: &HashMap<String, File>,
    shapes: &[InputShape],
) -> Result<Model, LowerError> {
    let root = archive.data();
    let b = GraphBuilder::new(archive.root());
    let mut interp = Interp::new(Some(archive), files, b);
    let (file, class) = interp
        .class(&root.class)
        .ok_or_else(|| LowerError::Other(format!("no code for the root class {}", root.class)))?;
    let forward = class
        .methods
        .iter()
        .find(|f| f.name == "forward")
        .ok_or_else(|| LowerError::Other(format!("{file}: class {} has no forward method", class.name)))?;
    let traced = traced_shapes(archive.traced_inputs());
    let mut args = Vec::new();
    for (i, p) in forward.params.iter().skip(1).enumerate() {
        let given = shapes.iter().find(|s| s.name == p.name || s.name == i.to_string());
        let (elem, dims) = match (given, traced.get(i)) {
            (Some(s), t) => (t.map_or(ElemType::Float, |t| t.0), s.dims.iter().map(dim_decl).collect::<Vec<_>>()),
            (None, Some((elem, sizes))) => (*elem, sizes.iter().map(|&n| dim_decl(&DimSpec::Known(n))).collect()),
            (None, None) => {
                return Err(LowerError::Other(format!(
                    "the shape of input '{}' is unknown: the archive has no traced_inputs.pkl; give --input-shape {}=D0,D1,...",
                    p.name, p.name
                )))
            }
        };
        let rank = dims.len();
        let id = interp.b.input(&p.name, elem, &dims);
        args.push(Val::Tensor(value::T { id, elem: Some(elem), rank: Some(rank) }));
    }
    let result = interp.call_method(root, "", "forward", args, forward.line);
    // Unsupported operators first: a later failure is usually their consequence.
    if let Some(e) = unsupported_error(std::mem::take(&mut interp.unsupported)) {
        return Err(e);
    }
    let result = result?;
    set_outputs(&mut interp, result)?;
    Ok(model(interp.b))
}

/// Declares the result of `forward` as the graph's outputs.
fn set_outputs(interp: &mut Interp<'_>, result: Val<'_>) -> Result<(), LowerError> {
    let items = match result {
        Val::Tuple(items) | Val::List(items) => items,
        single => vec![single],
    };
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Val::Tensor(t) => interp.b.output(t.id, t.elem),
            Val::RuntimeInt(id) => interp.b.output(id, Some(ElemType::Int64)),
            other => {
                return Err(LowerError::Other(format!("output {i} of forward is {}, not a tensor", other.describe())))
            }
        }
    }
    Ok(())
}

/// The example inputs `traced_inputs.pkl` records for `forward`: element type and sizes.
fn traced_shapes(traced: Option<&TsValue>) -> Vec<(ElemType, Vec<u64>)> {
    let list = match traced {
        Some(TsValue::Dict(entries)) => {
            entries.iter().find(|(k, _)| matches!(k, TsValue::Str(s) if s == "forward")).map(|(_, v)| v)
        }
        _ => None,
    };
    match list {
        Some(TsValue::List(items) | TsValue::Tuple(items)) => items
            .iter()
            .filter_map(|v| match v {
                TsValue::Tensor(t) => Some((t.elem, t.sizes.clone())),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn dim_decl(d: &DimSpec) -> DimDecl {
    let value = match d {
        DimSpec::Known(n) => DimValue::Known(*n as i64),
        DimSpec::Symbol(s) => DimValue::Param(s.clone()),
    };
    DimDecl { value: Some(value), denotation: None }
}

/// The model around a lowered graph.
pub(crate) fn model(b: GraphBuilder) -> Model {
    let mut model = Model {
        ir_version: Some(IR_VERSION),
        opset_imports: vec![OpsetImport { domain: Some(String::new()), version: Some(OPSET) }],
        producer_name: Some("diamond".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        metadata_props: vec![StringEntry { key: Some("source_format".into()), value: Some("torchscript".into()) }],
        ..Model::default()
    };
    model.graph = Some(model.graphs.push(b.graph));
    model
}
