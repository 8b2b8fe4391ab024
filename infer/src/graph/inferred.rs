//! Inferred types as ONNX declarations, and a model annotated with them.
//!
//! After checking, every value of every lowered graph (the main graph and the
//! subgraphs of its nodes; not function bodies, whose shapes differ per call
//! site) has a closed shape and an element type. [`InferredTypes`] holds them
//! as `ir::TypeInfo`s: known sizes as `dim_value`, sizes over rigid symbols as
//! a `dim_param` holding the symbol or expression (`batch*seq`), named bases
//! as the dim's `denotation`, and every undetermined size left unset — never
//! an invented name. A graph lowered more than once (a Loop body's rounds)
//! keeps only what all its lowerings agree on.
//!
//! [`annotate`] writes them into a copy of the model: `value_info` for every
//! value that is neither a graph input, an output nor an initializer, and the
//! graph outputs' own types where the file leaves them open. Inputs are the
//! model's interface and keep what the file states.

use crate::rule::ValueKind;
use diamond_ir::term::{Basis, DimTerm, RowTerm, Size};
use diamond_ir::types::{DimDecl, DimValue, TensorShape, TypeInfo, TypeValue};
use diamond_ir::{ElemType, GraphId, Model, ValueId, ValueInfo};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The inferred type of each value, per graph, in value-id order.
#[derive(Clone, Debug, Default)]
pub struct InferredTypes {
    graphs: BTreeMap<GraphId, BTreeMap<ValueId, Option<TypeInfo>>>,
    /// The size each exporter-invented dim name (`unk__3`) was found to have.
    resolved_names: HashMap<String, DimValue>,
}

impl InferredTypes {
    /// Records one lowering's type for `value` of `graph`; a second lowering
    /// keeps only what both agree on.
    pub(crate) fn record(&mut self, graph: GraphId, value: ValueId, ty: Option<TypeInfo>) {
        let values = self.graphs.entry(graph).or_default();
        match values.get_mut(&value) {
            None => {
                values.insert(value, ty);
            }
            Some(seen) => *seen = agree(seen.take(), ty),
        }
    }

    /// The inferred type of `value` in `graph`, if it is complete enough to
    /// declare (every tensor in it has an element type: runtimes reject a
    /// `tensor_type` without one).
    pub fn get(&self, graph: GraphId, value: ValueId) -> Option<&TypeInfo> {
        self.graphs.get(&graph)?.get(&value)?.as_ref().filter(|t| declarable(t))
    }

    /// Records the sizes the check found for exporter-invented dim names.
    pub(crate) fn set_resolved_names(&mut self, resolved: HashMap<String, super::report::DimReport>) {
        use super::report::DimReport;
        self.resolved_names = resolved
            .into_iter()
            .filter_map(|(name, d)| match d {
                DimReport::Known(n) => Some((name, DimValue::Known(i64::try_from(n).ok()?))),
                DimReport::Symbolic(e) => Some((name, DimValue::Param(e))),
                DimReport::Unknown => None,
            })
            .collect();
    }

    /// How many values have a declarable type.
    pub fn len(&self) -> usize {
        self.graphs.values().map(|v| v.values().filter(|t| t.as_ref().is_some_and(declarable)).count()).sum()
    }

    /// Whether no value has a known type.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether every tensor type inside `ty` states its element type.
fn declarable(ty: &TypeInfo) -> bool {
    match &ty.value {
        Some(TypeValue::Tensor { elem, .. }) | Some(TypeValue::SparseTensor { elem, .. }) => elem.is_some(),
        Some(TypeValue::Sequence(Some(inner))) | Some(TypeValue::Optional(Some(inner))) => declarable(inner),
        Some(TypeValue::Map { key: Some(_), value: Some(inner) }) => declarable(inner),
        _ => false,
    }
}

/// The declaration for a value of `kind` whose tensors have the closed
/// `row` and element type `dtype`; `None` when nothing is known.
pub(crate) fn type_of(kind: &ValueKind, row: &RowTerm, dtype: Option<ElemType>) -> Option<TypeInfo> {
    let wrap = |value: TypeValue| Some(TypeInfo { value: Some(value), denotation: None });
    match kind {
        ValueKind::Tensor | ValueKind::SparseTensor => {
            let elem = dtype.filter(|t| *t != ElemType::Undefined);
            let shape = shape_of(row);
            if elem.is_none() && shape.is_none() {
                return None;
            }
            if *kind == ValueKind::Tensor {
                wrap(TypeValue::Tensor { elem, shape })
            } else {
                wrap(TypeValue::SparseTensor { elem, shape })
            }
        }
        ValueKind::Sequence(inner) => wrap(TypeValue::Sequence(type_of(inner, row, dtype).map(Box::new))),
        ValueKind::Optional(inner) => wrap(TypeValue::Optional(type_of(inner, row, dtype).map(Box::new))),
        ValueKind::Map(key, inner) => {
            let key = Some(*key).filter(|k| *k != ElemType::Undefined);
            wrap(TypeValue::Map { key, value: type_of(inner, row, dtype).map(Box::new) })
        }
        ValueKind::Unknown => None,
    }
}

/// A closed row as a declared shape; `None` while the rank is open.
fn shape_of(row: &RowTerm) -> Option<TensorShape> {
    if row.var.is_some() {
        return None;
    }
    let dims = row.leading.iter().chain(&row.trailing).map(dim_decl).collect();
    Some(TensorShape { dims })
}

fn dim_decl(d: &DimTerm) -> DimDecl {
    let DimTerm::Dim(d) = d else { return DimDecl { value: None, denotation: None } };
    let value = match &d.size {
        Size::Known(n) => i64::try_from(*n).ok().map(DimValue::Known),
        Size::Symbolic(e) => Some(DimValue::Param(e.to_string())),
    };
    let denotation = match &d.basis {
        Basis::Named(tag) => Some(tag.to_string()),
        _ => None,
    };
    DimDecl { value, denotation }
}

/// What two lowerings' types agree on: unequal dims become unset, unequal
/// ranks or element types drop the shape or the type.
fn agree(a: Option<TypeInfo>, b: Option<TypeInfo>) -> Option<TypeInfo> {
    let (a, b) = (a?, b?);
    if a == b {
        return Some(a);
    }
    let value = match (a.value?, b.value?) {
        (TypeValue::Tensor { elem: ea, shape: sa }, TypeValue::Tensor { elem: eb, shape: sb }) => {
            TypeValue::Tensor { elem: (ea == eb).then_some(ea).flatten(), shape: agree_shape(sa, sb) }
        }
        (TypeValue::SparseTensor { elem: ea, shape: sa }, TypeValue::SparseTensor { elem: eb, shape: sb }) => {
            TypeValue::SparseTensor { elem: (ea == eb).then_some(ea).flatten(), shape: agree_shape(sa, sb) }
        }
        (TypeValue::Sequence(x), TypeValue::Sequence(y)) => {
            TypeValue::Sequence(agree(x.map(|b| *b), y.map(|b| *b)).map(Box::new))
        }
        (TypeValue::Optional(x), TypeValue::Optional(y)) => {
            TypeValue::Optional(agree(x.map(|b| *b), y.map(|b| *b)).map(Box::new))
        }
        _ => return None,
    };
    Some(TypeInfo { value: Some(value), denotation: None })
}

fn agree_shape(a: Option<TensorShape>, b: Option<TensorShape>) -> Option<TensorShape> {
    let (a, b) = (a?, b?);
    if a.dims.len() != b.dims.len() {
        return None;
    }
    let dims =
        a.dims.into_iter().zip(b.dims).map(|(x, y)| if x == y { x } else { DimDecl { value: None, denotation: None } });
    Some(TensorShape { dims: dims.collect() })
}

/// What [`annotate_with`] may rewrite.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnnotateOptions {
    /// Also replace the dim names an exporter invented (`unk__3`) in the
    /// graph outputs' types; by default outputs keep the file's names,
    /// which downstream tools key on.
    pub output_dims: bool,
}

/// [`annotate_with`] with the default options.
pub fn annotate(model: &Model, inferred: &InferredTypes) -> Model {
    annotate_with(model, inferred, AnnotateOptions::default())
}

/// A copy of `model` whose graphs declare the inferred types: `value_info`
/// entries for every inferred intermediate value (the file's own entry keeps
/// what it states, but a dim name the exporter invented is replaced by the
/// inferred size), and graph outputs' types filled in where the file leaves
/// them open.
pub fn annotate_with(model: &Model, inferred: &InferredTypes, options: AnnotateOptions) -> Model {
    let mut out = model.clone();
    let symbols = model.main_graph().map(super::claims::input_symbols).unwrap_or_default();
    let invented = |p: &str| !super::claims::is_claim(p, &symbols);
    let keep_names = |_: &str| false;
    let resolved = &inferred.resolved_names;
    for (&gid, values) in &inferred.graphs {
        let graph = &mut out.graphs[gid];
        let mut interface: HashSet<ValueId> = graph.inputs.iter().filter_map(|vi| vi.value).collect();
        interface
            .extend(graph.initializers.iter().filter_map(|t| t.name.as_deref()).filter_map(|n| graph.value_named(n)));
        for vi in &mut graph.outputs {
            let Some(v) = vi.value else { continue };
            interface.insert(v);
            if let Some(ty) = inferred.get(gid, v) {
                let fill = if options.output_dims {
                    Fill { replace: &invented, resolved }
                } else {
                    Fill { replace: &keep_names, resolved }
                };
                vi.ty = Some(fill.open(vi.ty.take(), ty));
            }
        }
        // The file's entries first, in their order, then new ones in value order.
        let mut listed: HashSet<ValueId> = HashSet::new();
        for vi in &mut graph.value_info {
            let Some(v) = vi.value else { continue };
            listed.insert(v);
            if let Some(ty) = inferred.get(gid, v) {
                vi.ty = Some(Fill { replace: &invented, resolved }.open(vi.ty.take(), ty));
            }
        }
        for &v in values.keys() {
            let Some(ty) = inferred.get(gid, v) else { continue };
            if interface.contains(&v) || listed.contains(&v) || graph.value_name(v).is_empty() {
                continue;
            }
            graph.value_info.push(ValueInfo { value: Some(v), ty: Some(ty.clone()), ..ValueInfo::default() });
        }
    }
    out
}

/// How a stated type takes inferred parts: what the file states is kept (a
/// conflict is a `declared-shape-mismatch` already), except a `dim_param`
/// that `replace` says is an invented name, which takes the inferred size
/// (or the size found for that name elsewhere).
struct Fill<'a> {
    replace: &'a dyn Fn(&str) -> bool,
    resolved: &'a HashMap<String, DimValue>,
}

impl Fill<'_> {
    fn open(&self, stated: Option<TypeInfo>, inferred: &TypeInfo) -> TypeInfo {
        let Some(stated) = stated else { return inferred.clone() };
        let denotation = stated.denotation.clone();
        let value = match (stated.value, &inferred.value) {
            (None, v) => v.clone(),
            (Some(TypeValue::Tensor { elem, shape }), Some(TypeValue::Tensor { elem: ie, shape: is })) => {
                Some(TypeValue::Tensor { elem: elem.or(*ie), shape: self.shape(shape, is.as_ref()) })
            }
            (Some(TypeValue::Sequence(s)), Some(TypeValue::Sequence(Some(i)))) => {
                Some(TypeValue::Sequence(Some(Box::new(self.open(s.map(|b| *b), i)))))
            }
            (Some(TypeValue::Optional(s)), Some(TypeValue::Optional(Some(i)))) => {
                Some(TypeValue::Optional(Some(Box::new(self.open(s.map(|b| *b), i)))))
            }
            (stated, _) => stated,
        };
        TypeInfo { value, denotation }
    }

    fn shape(&self, stated: Option<TensorShape>, inferred: Option<&TensorShape>) -> Option<TensorShape> {
        match (stated, inferred) {
            (None, i) => i.cloned(),
            (Some(s), Some(i)) if s.dims.len() == i.dims.len() => {
                let dims = s
                    .dims
                    .into_iter()
                    .zip(&i.dims)
                    .map(|(sd, id)| {
                        let value = match sd.value {
                            Some(DimValue::Param(p)) if p.trim().is_empty() => id.value.clone(),
                            Some(DimValue::Param(p)) if (self.replace)(&p) => id
                                .value
                                .clone()
                                .or_else(|| self.resolved.get(p.trim()).cloned())
                                .or(Some(DimValue::Param(p))),
                            None => id.value.clone(),
                            stated => stated,
                        };
                        DimDecl { value, denotation: sd.denotation.or(id.denotation.clone()) }
                    })
                    .collect();
                Some(TensorShape { dims })
            }
            (s, _) => s,
        }
    }
}
