//! The result of checking a model: every value's kind, element type and
//! shape, with the diagnostics; built from the closed solution.

use super::lowering::Lowering;
use crate::cause::Origin;
use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::rule::{ConstValue, LoweringState, ValueKind};
use crate::solver::TensorId;
use diamond_ir::term::{DimTerm, RowTerm, Size};
use diamond_ir::{ElemType, GraphId};
use serde::Serialize;

/// One axis of a reported shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimReport {
    /// A known size.
    Known(u64),
    /// A rigid symbol or an expression over them (`batch*seq`).
    Symbolic(String),
    /// Not determined.
    Unknown,
}

impl Serialize for DimReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DimReport::Known(n) => s.serialize_u64(*n),
            DimReport::Symbolic(e) => s.serialize_str(e),
            DimReport::Unknown => s.serialize_none(),
        }
    }
}

impl std::fmt::Display for DimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DimReport::Known(n) => write!(f, "{n}"),
            DimReport::Symbolic(e) => f.write_str(e),
            DimReport::Unknown => f.write_str("?"),
        }
    }
}

/// One value of the model.
#[derive(Clone, Debug, Serialize)]
pub struct ValueReport {
    /// The value's name (`node/attr/value` inside subgraphs).
    pub name: String,
    /// `tensor`, `seq(tensor)`, ... (a fixed name borrowed, a composite one made).
    pub kind: std::borrow::Cow<'static, str>,
    /// Element type (of the tensor, or of the tensors inside), when known.
    #[serde(serialize_with = "ser_dtype")]
    pub dtype: Option<ElemType>,
    /// Shape (of the tensor, or shared by the tensors inside); `None` when even the rank is unknown.
    pub shape: Option<Vec<DimReport>>,
    /// Whether the value is an initializer (a stored weight or constant).
    #[serde(skip)]
    pub initializer: bool,
    /// The value's id in the main graph; `None` inside subgraphs. Readers
    /// of a main-graph value find its entry by this, without its name.
    #[serde(skip)]
    pub value: Option<diamond_ir::ValueId>,
}

fn ser_dtype<S: serde::Serializer>(t: &Option<ElemType>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(json_dtype(*t)),
        None => s.serialize_none(),
    }
}

/// The NumPy-style name of an element type (`float32`, `int64`), borrowed:
/// a JSON report names the type of each of tens of thousands of values.
pub fn json_dtype(t: ElemType) -> &'static str {
    match t {
        ElemType::Float => "float32",
        ElemType::Double => "float64",
        other => other.name(),
    }
}

impl ValueReport {
    /// The shape as text: `[1, batch, ?]`, or `?` for an unknown rank.
    pub fn shape_text(&self) -> String {
        match &self.shape {
            None => "?".into(),
            Some(dims) => format!("[{}]", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        }
    }
}

/// Everything `diamond check` found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    /// Names of the main graph's inputs (initializers excluded).
    pub inputs: Vec<String>,
    /// Names of the main graph's outputs.
    pub outputs: Vec<String>,
    /// Every value, in graph order.
    pub values: Vec<ValueReport>,
    /// Graph inputs whose shape (in part) was inferred from their uses.
    pub inferred_from_use: Vec<String>,
    /// Values whose shape only a declaration gives.
    pub from_declaration: Vec<String>,
    /// Errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// Every lowered value's inferred type, as ONNX declarations (for `convert`).
    #[serde(skip)]
    pub inferred: super::inferred::InferredTypes,
    /// Main-graph values computed by nodes whose elements value propagation
    /// knows (shape arithmetic: integers, size expressions), by value id in
    /// the main graph.
    #[serde(skip)]
    pub known_values: rustc_hash::FxHashMap<diamond_ir::ValueId, std::sync::Arc<ConstValue>>,
}

impl CheckReport {
    /// The value named `name`.
    pub fn value(&self, name: &str) -> Option<&ValueReport> {
        self.values.iter().find(|v| v.name == name)
    }

    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Error).count()
    }

    /// Number of warnings.
    pub fn warnings(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity == Severity::Warning).count()
    }
}

/// Converts a closed row to reported dims.
pub(crate) fn row_dims(row: &RowTerm) -> Option<Vec<DimReport>> {
    if row.var.is_some() {
        return None;
    }
    Some(
        row.leading
            .iter()
            .chain(&row.trailing)
            .map(|d| match d {
                DimTerm::Dim(d) => match &d.size {
                    Size::Known(n) => DimReport::Known(*n),
                    Size::Symbolic(e) => DimReport::Symbolic(e.to_string()),
                },
                DimTerm::Var(_) => DimReport::Unknown,
            })
            .collect(),
    )
}

pub(crate) fn build(mut low: Lowering<'_>, st: LoweringState<'_>, main: GraphId) -> CheckReport {
    let want_types = !low.options.skip_inferred_types;
    let model = low.model;
    let graph = &model.graphs[main];
    let reported = std::mem::take(&mut low.reported);
    let facts: Vec<(ValueKind, Option<ElemType>)> =
        reported.iter().map(|(_, key, _, _)| (st.facts[key].kind.clone(), st.facts[key].dtype)).collect();
    let known_values = known_values(&low, &st, main);
    let from_declaration = std::mem::take(&mut low.from_declaration);
    let low_symbols = std::mem::take(&mut low.input_symbols);
    // Per defined value outside function bodies: its graph, kind and element type.
    let typed: Vec<(GraphId, diamond_ir::ValueId, TensorId, ValueKind, Option<ElemType>)> = low
        .defined
        .iter()
        .filter(|_| want_types)
        .filter(|(key, _)| low.instances[key.0 as usize].call.is_none())
        .filter_map(|&(key, tensor)| {
            let f = st.facts.get(&key)?;
            Some((low.instances[key.0 as usize].graph, key.1, tensor, f.kind.clone(), f.dtype))
        })
        .collect();
    // The facts are read: only the closed shapes are needed from here on.
    drop(st.facts);
    // Declared shapes are claims: compare them with what the graph implies once solved.
    let (mut closed, mut diagnostics) = st.solver.finish_closed();
    let mut inferred = super::inferred::InferredTypes::default();
    for (graph, value, tensor, kind, dtype) in typed {
        let ty = super::inferred::type_of(&kind, &closed.row(tensor), dtype);
        inferred.record(graph, value, ty);
    }
    let mut values: Vec<ValueReport> = reported
        .into_iter()
        .zip(facts)
        .map(|((name, key, tensor, role), (kind, dtype))| ValueReport {
            name,
            value: (key.0 == 0).then_some(key.1),
            initializer: role == crate::solver::TensorKind::Param,
            kind: kind.describe_shared(),
            dtype,
            shape: row_dims(&closed.row(tensor)),
        })
        .collect();
    drop(closed);
    // A body lowered more than once (loop rounds, unrolled iterations) lists
    // its values once per lowering: keep the last. When every entry is a
    // different value of the main graph (whose names are interned, so
    // different), no name repeats and none need be hashed.
    if !distinct_main_values(&values, graph.values.len()) {
        let mut last: rustc_hash::FxHashMap<&str, usize> = rustc_hash::FxHashMap::default();
        for (i, v) in values.iter().enumerate() {
            last.insert(v.name.as_str(), i);
        }
        let keep: Vec<bool> = values.iter().enumerate().map(|(i, v)| last[v.name.as_str()] == i).collect();
        let mut k = 0;
        values.retain(|_| {
            k += 1;
            keep[k - 1]
        });
    }
    let initializers: rustc_hash::FxHashSet<&str> =
        graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    let is_initializer = |name: &str| initializers.contains(name);
    let inputs: Vec<String> = graph
        .inputs
        .iter()
        .filter_map(|vi| vi.value.map(|v| graph.value_name(v).to_string()))
        .filter(|n| !is_initializer(n))
        .collect();
    let outputs: Vec<String> =
        graph.outputs.iter().filter_map(|vi| vi.value.map(|v| graph.value_name(v).to_string())).collect();
    let index: rustc_hash::FxHashMap<&str, usize> =
        values.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
    let mut inferred_from_use = Vec::new();
    for vi in &graph.inputs {
        let Some(id) = vi.value else { continue };
        let name = graph.value_name(id);
        let declared = super::claims::declared_dims(vi.ty.as_ref().and_then(|t| t.value.as_ref()), &low_symbols);
        let Some(v) = index.get(name).map(|&i| &values[i]) else { continue };
        let stated_unknowns = match &declared {
            None => true,
            Some(d) => d.iter().any(|x| x.is_none()),
        };
        if stated_unknowns && v.shape.as_ref().is_some_and(|s| declared.as_ref().is_none_or(|d| d.len() == s.len())) {
            let gained = match (&declared, &v.shape) {
                (None, Some(_)) => true,
                // An open axis that is still its own symbol (`x.2`) gained nothing.
                (Some(d), Some(s)) => d.iter().zip(s).enumerate().any(|(axis, (a, b))| {
                    let own =
                        matches!(b, DimReport::Symbolic(t) if low.input_dims.open_symbol(id, axis) == Some(t.as_str()));
                    a.is_none() && *b != DimReport::Unknown && !own
                }),
                _ => false,
            };
            if gained {
                inferred_from_use.push(name.to_string());
            }
        }
    }
    // Claims: value_info and outputs.
    let resolved = super::claims::check_declarations(graph, &low_symbols, &mut values, &mut diagnostics);
    inferred.set_resolved_names(resolved);
    size_overflows(graph, &values, &mut diagnostics);
    super::provenance::annotate(graph, &values, &mut diagnostics);
    super::grouping::apply(graph, &values, &mut diagnostics);
    let _ = Origin::Solver("report");
    CheckReport { inputs, outputs, values, inferred_from_use, from_declaration, diagnostics, inferred, known_values }
}

/// The main graph's node outputs whose elements value propagation holds.
/// Whether every entry of `values` is a value of the main graph (of
/// `main_values` values), each a different one.
fn distinct_main_values(values: &[ValueReport], main_values: usize) -> bool {
    let mut seen = vec![false; main_values];
    values.iter().all(|v| {
        let slot = v.value.and_then(|id| seen.get_mut(diamond_ir::entity::EntityId::index(id)));
        slot.is_some_and(|slot| !std::mem::replace(slot, true))
    })
}

fn known_values(
    low: &Lowering<'_>,
    st: &LoweringState<'_>,
    main: GraphId,
) -> rustc_hash::FxHashMap<diamond_ir::ValueId, std::sync::Arc<ConstValue>> {
    let graph = &low.model.graphs[main];
    let mut out = rustc_hash::FxHashMap::default();
    for (_, node) in graph.nodes.iter() {
        for &v in &node.outputs {
            if graph.value_name(v).is_empty() {
                continue;
            }
            if let Some(value) = st.facts.get(&(0, v)).and_then(|f| f.value.clone()) {
                out.insert(v, value);
            }
        }
    }
    out
}

/// A `size-overflow` error for each main-graph value whose known sizes
/// multiply past 64 bits (`ConstantOfShape([2^40, 2^40])`), at its producer.
fn size_overflows(graph: &diamond_ir::Graph, values: &[ValueReport], diagnostics: &mut Vec<Diagnostic>) {
    for v in values {
        let Some(shape) = &v.shape else { continue };
        let known = shape.iter().filter_map(|d| match d {
            DimReport::Known(n) => Some(*n),
            _ => None,
        });
        let mut product: u64 = 1;
        if known.into_iter().all(|n| product.checked_mul(n).map(|p| product = p).is_some()) {
            continue;
        }
        let Some(id) = graph.value_named(&v.name) else { continue };
        let message = format!("'{}' would hold {} elements, more than 64 bits can count", v.name, v.shape_text());
        let help = "fix the shape computation: no tensor can hold this many elements".to_string();
        diagnostics.push(at_producer(graph, id, Code::SizeOverflow, message, None, help, Vec::new()));
    }
}

/// An error about value `id` of the main graph, located at the node producing it.
pub(crate) fn at_producer(
    graph: &diamond_ir::Graph,
    id: diamond_ir::ValueId,
    code: Code,
    message: String,
    axis: Option<usize>,
    help: String,
    notes: Vec<String>,
) -> Diagnostic {
    let producer = graph.nodes.iter().find(|(_, n)| n.outputs.contains(&id));
    Diagnostic {
        severity: Severity::Error,
        code,
        message,
        line: None,
        node: producer.map(|(nid, n)| {
            if n.name().is_empty() {
                super::lowering::node_label(graph, nid)
            } else {
                n.name().to_string()
            }
        }),
        op: producer.map(|(_, n)| n.op_type().to_string()),
        node_index: producer.map(|(nid, _)| diamond_ir::entity::EntityId::index(nid) as u32),
        graph: None,
        operand: producer.and_then(|(_, n)| n.outputs.iter().position(|&o| o == id)).map(|j| format!("output {j}")),
        axis,
        help: Some(help),
        notes,
        clash: None,
        assumes: Vec::new(),
    }
}
