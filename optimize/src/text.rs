//! A readable text form of a model's main graph, for tests and `--stats`:
//! one line per input, initializer (type and shape, not the data), node (in
//! file order) and output; a control-flow node's bodies follow it, indented.
//!
//! ```text
//! input x: float [batch, 8]
//! init w: float [8, 4]
//! MatMul(x, w) -> y
//! Reshape(y, shape) -> z
//! output z
//! ```

use diamond_ir::{AttrValue, Attribute, Model, TypeValue};
use std::fmt::Write;

/// The main graph of `model` as text, with the bodies of its control-flow
/// nodes below each (indented, under the attribute's name).
pub fn graph_text(model: &Model) -> String {
    let mut out = String::new();
    if let Some(g) = model.graph {
        graph_lines(model, g, "", &mut out);
    }
    out
}

fn graph_lines(model: &Model, g: diamond_ir::GraphId, indent: &str, out: &mut String) {
    let graph = &model.graphs[g];
    for vi in &graph.inputs {
        let Some(v) = vi.value else { continue };
        let ty = vi.ty.as_ref().and_then(|t| t.value.as_ref());
        let _ = writeln!(out, "{indent}input {}: {}", graph.value_name(v), type_text(ty));
    }
    for t in &graph.initializers {
        let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        let name = t.name.as_deref().unwrap_or("");
        let _ = writeln!(out, "{indent}init {name}: {} [{}]", t.elem_type().name(), dims.join(", "));
    }
    for (_, node) in graph.nodes.iter() {
        let names =
            |ids: &[diamond_ir::ValueId]| ids.iter().map(|&v| graph.value_name(v)).collect::<Vec<_>>().join(", ");
        let op = if node.domain().is_empty() {
            node.op_type().to_string()
        } else {
            format!("{}::{}", node.domain(), node.op_type())
        };
        let attrs: Vec<String> = node.attributes.iter().map(attribute_text).collect();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
        let _ = writeln!(out, "{indent}{op}({}){attrs} -> {}", names(&node.inputs), names(&node.outputs));
        for a in &node.attributes {
            for body in a.subgraphs() {
                let _ = writeln!(out, "{indent}  {}:", a.name());
                graph_lines(model, body, &format!("{indent}    "), out);
            }
        }
    }
    for vi in &graph.outputs {
        if let Some(v) = vi.value {
            let _ = writeln!(out, "{indent}output {}", graph.value_name(v));
        }
    }
}

fn type_text(ty: Option<&TypeValue>) -> String {
    match ty {
        Some(TypeValue::Tensor { elem, shape }) => {
            let elem = elem.map_or("?".to_string(), |e| e.name().to_string());
            match shape {
                None => format!("{elem} ?"),
                Some(s) => format!("{elem} {}", dims_text(s)),
            }
        }
        Some(_) => "non-tensor".into(),
        None => "?".into(),
    }
}

/// A declared shape as `[batch, 8, ?]` (`?` for an unset dim).
pub fn dims_text(shape: &diamond_ir::TensorShape) -> String {
    let dims: Vec<String> = shape
        .dims
        .iter()
        .map(|d| match &d.value {
            Some(diamond_ir::DimValue::Known(n)) => n.to_string(),
            Some(diamond_ir::DimValue::Param(p)) => p.clone(),
            None => "?".into(),
        })
        .collect();
    format!("[{}]", dims.join(", "))
}

/// `name=value`; tensors and graphs by their kind only.
pub fn attribute_text(a: &Attribute) -> String {
    let value = match a.value() {
        Some(AttrValue::Float(f)) => format!("{f}"),
        Some(AttrValue::Int(i)) => i.to_string(),
        Some(AttrValue::String(s)) => format!("{:?}", String::from_utf8_lossy(s)),
        Some(AttrValue::Ints(v)) => format!("{v:?}"),
        Some(AttrValue::Floats(v)) => format!("{v:?}"),
        Some(AttrValue::Strings(v)) => {
            format!("{:?}", v.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>())
        }
        Some(AttrValue::Tensor(t)) => format!("<tensor {} {:?}>", t.elem_type().name(), t.dims),
        Some(AttrValue::Graph(_)) | Some(AttrValue::Graphs(_)) => "<graph>".into(),
        Some(_) => "<value>".into(),
        None => "<ref>".into(),
    };
    format!("{}={value}", a.name())
}
