//! The size each axis of a main-graph input stands for: a fixed size, a
//! `dim_param` symbol, or — where the file states nothing usable — a symbol
//! of the axis's own.
//!
//! Exporters leave input axes open in several spellings: no `dim_value` and
//! no `dim_param` (paddle2onnx), `dim_param: ""` or `"?"`, `dim_value: -1`.
//! Each such axis is an unknown of its own, never the same as another one:
//! [`InputDims::of`] names it after its input and axis, `x.2` for axis 2 of
//! input `x`. The check lowers it to a rigid symbol of that name, the
//! execution plan binds it from the fed shape, and kernel programs bind
//! their extents through the plan, so all three agree by construction. The
//! model's declarations are not changed: the names live in the inferred
//! types and the plan only.
//!
//! A generated name never collides with a `dim_param` that a graph input
//! states: when `x.2` is taken, the next free of `x.2_1`, `x.2_2`, … is
//! used. The input name is made an identifier of the size-expression syntax
//! (`crate::term::SizeExpr::parse`: letters, digits, `_` and `.`, not
//! starting with a digit) by writing `_` for every other character, so an
//! expression over the symbol (`floor((x.2 - 1)/2) + 1`) reads back.
//!
//! `dim_value: 0` is a size ONNX allows (empty tensors; the node suite
//! declares them), and some exporters also write it for "unknown". Here a
//! declared 0 on an input of rank 2 or more is read as unknown (its own
//! symbol, which a fed 0 binds like any size) only when the rest of the
//! graph says sizes without it: some graph output declares a shape, and no
//! output, `value_info` or initializer declares a size of 0 (which would
//! show that empty tensors are meant). Otherwise — no declared output
//! shape to go by, an empty size elsewhere, or a rank-1 input declared
//! empty (an empty `axes` or `pads` list) — it stays the size 0.

use crate::entity::ValueId;
use crate::graph::Graph;
use crate::types::{DimValue, TensorShape, TypeInfo, TypeValue};
use std::collections::{HashMap, HashSet};

/// The symbols of a graph's inputs: every `dim_param` they state and the
/// names of their open axes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputDims {
    /// Generated names, by (input, axis).
    open: HashMap<(ValueId, usize), String>,
    /// The input and axis each generated name stands for.
    by_name: HashMap<String, (ValueId, usize)>,
    /// `dim_param`s stated on the inputs.
    stated: HashSet<String>,
}

/// Whether `value` leaves a graph-input axis open: nothing stated, an empty
/// or `?` `dim_param`, or a negative `dim_value`. A stated 0 is decided by
/// [`InputDims::of`] (see the module docs).
pub fn is_open(value: Option<&DimValue>) -> bool {
    match value {
        None => true,
        Some(DimValue::Known(n)) => *n < 0,
        Some(DimValue::Param(p)) => {
            let p = p.trim();
            p.is_empty() || p == "?"
        }
    }
}

/// `name` with every character that a size-expression identifier cannot
/// hold written `_`, and `_` put first when it would start with a digit.
fn identifier(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '.' { c } else { '_' }).collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

impl InputDims {
    /// The symbols of `graph`'s inputs, those an initializer gives a value
    /// left out (their dims are the initializer's). Deterministic: names are
    /// given in input order, axes in order.
    pub fn of(graph: &Graph) -> InputDims {
        let initialized: HashSet<&str> = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
        let inputs =
            || graph.inputs.iter().filter(|vi| vi.value.is_some_and(|v| !initialized.contains(graph.value_name(v))));
        let mut stated = HashSet::new();
        for vi in inputs() {
            collect_params(vi.ty.as_ref().and_then(|t| t.value.as_ref()), &mut stated);
        }
        let zero_is_open = || {
            let declares_shape = graph.outputs.iter().any(|vi| tensor_dims(vi.ty.as_ref()).is_some());
            let declared_empty = |ty: Option<&TypeInfo>| {
                tensor_dims(ty).is_some_and(|s| s.dims.iter().any(|d| d.value == Some(DimValue::Known(0))))
            };
            let empty = graph.outputs.iter().chain(&graph.value_info).any(|vi| declared_empty(vi.ty.as_ref()))
                || graph.initializers.iter().any(|t| t.dims.contains(&0));
            declares_shape && !empty
        };
        let mut zero_open: Option<bool> = None;
        let mut dims = InputDims { stated, ..InputDims::default() };
        let mut taken: HashSet<String> = dims.stated.clone();
        for vi in inputs() {
            let Some(id) = vi.value else { continue };
            let Some(shape) = tensor_dims(vi.ty.as_ref()) else { continue };
            for (axis, d) in shape.dims.iter().enumerate() {
                let open = match &d.value {
                    Some(DimValue::Known(0)) if shape.dims.len() >= 2 => *zero_open.get_or_insert_with(zero_is_open),
                    v => is_open(v.as_ref()),
                };
                if !open {
                    continue;
                }
                let base = format!("{}.{axis}", identifier(graph.value_name(id)));
                let mut name = base.clone();
                let mut n = 0;
                while taken.contains(&name) {
                    n += 1;
                    name = format!("{base}_{n}");
                }
                taken.insert(name.clone());
                dims.by_name.insert(name.clone(), (id, axis));
                dims.open.insert((id, axis), name);
            }
        }
        dims
    }

    /// The generated symbol of axis `axis` of input `input`, when the file
    /// leaves that axis open.
    pub fn open_symbol(&self, input: ValueId, axis: usize) -> Option<&str> {
        self.open.get(&(input, axis)).map(String::as_str)
    }

    /// The input and axis a generated symbol stands for.
    pub fn axis_of(&self, symbol: &str) -> Option<(ValueId, usize)> {
        self.by_name.get(symbol).copied()
    }

    /// Whether `symbol` is one of the generated names.
    pub fn is_generated(&self, symbol: &str) -> bool {
        self.by_name.contains_key(symbol)
    }

    /// Every input symbol: the stated `dim_param`s and the generated names.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.stated.iter().map(String::as_str).chain(self.by_name.keys().map(String::as_str))
    }

    /// Whether no axis is open.
    pub fn none_open(&self) -> bool {
        self.open.is_empty()
    }
}

/// The dims `ty` states when it declares a tensor of known rank.
fn tensor_dims(ty: Option<&TypeInfo>) -> Option<&TensorShape> {
    match ty.and_then(|t| t.value.as_ref()) {
        Some(TypeValue::Tensor { shape: Some(s), .. }) => Some(s),
        _ => None,
    }
}

/// Adds the `dim_param`s (trimmed, non-empty, not `?`) that `ty` states.
fn collect_params(ty: Option<&TypeValue>, out: &mut HashSet<String>) {
    match ty {
        Some(TypeValue::Tensor { shape: Some(s), .. }) | Some(TypeValue::SparseTensor { shape: Some(s), .. }) => {
            for d in &s.dims {
                if let Some(DimValue::Param(p)) = &d.value {
                    let p = p.trim();
                    if !p.is_empty() && p != "?" {
                        out.insert(p.to_string());
                    }
                }
            }
        }
        Some(TypeValue::Sequence(i)) | Some(TypeValue::Optional(i)) => {
            collect_params(i.as_deref().and_then(|t| t.value.as_ref()), out)
        }
        Some(TypeValue::Map { value, .. }) => collect_params(value.as_deref().and_then(|t| t.value.as_ref()), out),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphOwner, ValueInfo};
    use crate::types::{DimDecl, TypeInfo};

    fn input(graph: &mut Graph, name: &str, dims: &[Option<DimValue>]) -> ValueId {
        let id = graph.intern(name);
        let dims = dims.iter().map(|v| DimDecl { value: v.clone(), denotation: None }).collect();
        let ty = TypeInfo {
            value: Some(TypeValue::Tensor { elem: None, shape: Some(TensorShape { dims }) }),
            denotation: None,
        };
        graph.inputs.push(ValueInfo { value: Some(id), ty: Some(ty), ..ValueInfo::default() });
        id
    }

    fn p(s: &str) -> Option<DimValue> {
        Some(DimValue::Param(s.into()))
    }

    #[test]
    fn open_axes_are_named_by_input_and_axis_apart_from_stated_symbols() {
        let mut g = Graph::new(GraphOwner::Main);
        let k = |n| Some(DimValue::Known(n));
        let x = input(&mut g, "x", &[k(-1), k(3), None, p("?"), p("")]);
        // `x.2` is a stated symbol here, so x's axis 2 takes the next free name.
        let y = input(&mut g, "input:0", &[p("x.2"), None, k(0)]);
        let dims = InputDims::of(&g);
        let names: Vec<Option<&str>> = (0..5).map(|a| dims.open_symbol(x, a)).collect();
        assert_eq!(names, [Some("x.0"), None, Some("x.2_1"), Some("x.3"), Some("x.4")]);
        assert_eq!(dims.open_symbol(y, 0), None);
        assert_eq!(dims.open_symbol(y, 1), Some("input_0.1"));
        // No output declares a shape: a declared 0 is the size 0.
        assert_eq!(dims.open_symbol(y, 2), None);
        assert_eq!(dims.axis_of("x.3"), Some((x, 3)));
        assert!(dims.is_generated("x.0") && !dims.is_generated("x.2"));
        assert!(crate::term::SizeExpr::parse("floor((input_0.1 - 1)/2) + x.2_1").is_ok());
        let mut all: Vec<&str> = dims.symbols().collect();
        all.sort();
        assert_eq!(all, ["input_0.1", "x.0", "x.2", "x.2_1", "x.3", "x.4"]);
    }

    #[test]
    fn a_declared_zero_is_a_size_where_the_graph_declares_empty_sizes_or_a_list() {
        let mut g = Graph::new(GraphOwner::Main);
        let k = |n| Some(DimValue::Known(n));
        let axes = input(&mut g, "axes", &[k(0)]);
        let data = input(&mut g, "data", &[k(2), k(0), k(4)]);
        assert_eq!(InputDims::of(&g).open_symbol(data, 1), None, "no declared output shape to go by");
        let output = |g: &mut Graph, name: &str, size: i64| {
            let out = g.intern(name);
            let dims = vec![DimDecl { value: k(size), denotation: None }];
            let ty = TypeInfo {
                value: Some(TypeValue::Tensor { elem: None, shape: Some(TensorShape { dims }) }),
                denotation: None,
            };
            g.outputs.push(ValueInfo { value: Some(out), ty: Some(ty), ..ValueInfo::default() });
        };
        output(&mut g, "y", 4);
        assert_eq!(InputDims::of(&g).open_symbol(axes, 0), None, "an empty list");
        assert_eq!(InputDims::of(&g).open_symbol(data, 1), Some("data.1"));
        output(&mut g, "z", 0);
        assert_eq!(InputDims::of(&g).open_symbol(data, 1), None, "empty tensors are meant");
    }
}
