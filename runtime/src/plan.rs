//! The execution plan: what a run will hold, known before it starts.
//!
//! [`Plan::new`] takes the model and the shapes of what is fed. It binds the
//! symbols of the graph inputs (`batch`, `seq`) from the fed tensors against
//! the inputs' declared types: a kind, element type, rank or fixed size that
//! differs, or a symbol bound two ways, is a [`RunError::Binding`] naming
//! the input, the axis and the rule. An axis a declaration leaves open (no
//! size, `?`, `-1`) binds a symbol of its own, named as the check names it
//! (`x.2`, [`diamond_ir::InputDims`]). It then checks the model once with the
//! solver ([`diamond_infer::check_model`]): every value's shape comes out as
//! sizes and expressions over those symbols, and every assumption the model
//! makes on them (`seq ≤ 64`, `batch*seq` divisible by 2, `batch = 1`) as a
//! condition, which the bound sizes must meet or the input that bound the
//! symbol is refused the same way. No shape is inferred here: binding only
//! substitutes the fed sizes into the solver's solution.
//!
//! With the symbols bound, each main-graph value's size in bytes is known
//! when its inferred shape evaluates to numbers and its elements have a
//! fixed width (element count × [`crate::tensor::elem_bytes`]). Strings,
//! sequences and sizes that depend on the data (NonZero, a Range over
//! computed bounds) are unknown until run, and the plan says which. The
//! [`Schedule`] (the checked topological order, each value dropped after its
//! last use) is the one the executor follows; replaying it with the sizes
//! gives the predicted peak of live bytes, under the executor's convention:
//! initializers and fed inputs count from the start, graph outputs are kept
//! to the end, and a node that runs subgraphs or a model-local function adds
//! what those runs hold. That last part depends on the data (the branch
//! taken, the trip count), so such a node makes the prediction partial too.
//! A partial prediction is `None`; whenever it is a number, the run's
//! measured peak equals it.

use crate::error::{Result, RunError};
use crate::exec::{node_label, output_ids};
use crate::schedule::Schedule;
use crate::tensor::{elem_bytes, Value};
use diamond_infer::{check_model, CheckOptions, Severity};
use diamond_ir::entity::EntityId;
use diamond_ir::input_dims::is_open;
use diamond_ir::term::SizeExpr;
use diamond_ir::types::{DimValue, TypeInfo, TypeValue};
use diamond_ir::{ElemType, Graph, Model, ValueId};
use std::collections::{HashMap, HashSet};

/// What was fed for one graph input, as far as the plan needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fed {
    /// A tensor of `elem` with `shape`, holding `bytes`.
    Tensor {
        /// The element type.
        elem: ElemType,
        /// The dims.
        shape: Vec<usize>,
        /// Bytes held (strings: their lengths).
        bytes: u64,
    },
    /// A sequence of tensors of `elem`.
    Sequence {
        /// The tensors' element type.
        elem: ElemType,
        /// Bytes the tensors hold together.
        bytes: u64,
    },
    /// An optional value, present or not.
    Optional {
        /// Bytes held (0 when absent).
        bytes: u64,
    },
    /// A map, or a sequence of maps (`ai.onnx.ml`).
    Map {
        /// Bytes the keys and values hold.
        bytes: u64,
    },
}

impl Fed {
    /// The description of a fed value.
    pub fn of(value: &Value) -> Fed {
        match value {
            Value::Tensor(t) => Fed::Tensor { elem: t.elem(), shape: t.shape.clone(), bytes: t.byte_size() },
            Value::Sequence(elem, _) => Fed::Sequence { elem: *elem, bytes: value.byte_size() },
            Value::Optional(_) => Fed::Optional { bytes: value.byte_size() },
            Value::Map(_) | Value::MapSequence(_) => Fed::Map { bytes: value.byte_size() },
        }
    }

    /// Bytes the value holds.
    pub fn bytes(&self) -> u64 {
        match self {
            Fed::Tensor { bytes, .. } | Fed::Sequence { bytes, .. } | Fed::Optional { bytes } | Fed::Map { bytes } => {
                *bytes
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Fed::Tensor { .. } => "tensor",
            Fed::Sequence { .. } => "sequence",
            Fed::Optional { .. } => "optional",
            Fed::Map { .. } => "map",
        }
    }

    fn describe(&self) -> String {
        match self {
            Fed::Tensor { elem, shape, .. } => format!("{elem}{shape:?}"),
            Fed::Sequence { elem, bytes } => format!("a sequence of {elem} tensors ({bytes} bytes)"),
            Fed::Optional { bytes } => format!("an optional ({bytes} bytes)"),
            Fed::Map { bytes } => format!("a map ({bytes} bytes)"),
        }
    }
}

/// A symbol of the graph inputs bound to the size a fed tensor gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The symbol (`batch`).
    pub symbol: String,
    /// Its size.
    pub size: u64,
    /// The input that bound it first.
    pub input: String,
    /// The axis of that input.
    pub axis: usize,
}

/// A main-graph value's size as known before the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Size {
    /// This many bytes.
    Bytes(u64),
    /// Known only at run time, and why.
    UnknownUntilRun(String),
}

/// A value the run holds, with its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedValue {
    /// The value's name.
    pub name: String,
    /// Its size.
    pub size: Size,
}

/// The plan of one run of a model's main graph on inputs of given shapes.
#[derive(Clone, Debug)]
pub struct Plan {
    fed: Vec<(String, Fed)>,
    bindings: Vec<Binding>,
    schedule: Schedule,
    values: Vec<PlannedValue>,
    predicted_peak: Option<u64>,
    partial: Vec<String>,
    /// The shape of each value a Shape node reads, where the fed shapes fix it.
    shapes: HashMap<ValueId, Vec<u64>>,
}

impl Plan {
    /// The plan for running `model`'s main graph on `fed` (graph input name
    /// → what is fed, in the order the run binds them). Errors when a fed
    /// shape contradicts the model ([`RunError::Binding`]), an input is
    /// missing or unknown ([`RunError::Input`]), or the graph has no main
    /// graph or a cycle ([`RunError::InvalidModel`]).
    pub fn new(model: &Model, fed: &[(String, Fed)]) -> Result<Plan> {
        let gid = model.graph.ok_or_else(|| RunError::InvalidModel("the model has no main graph".into()))?;
        let graph = &model.graphs[gid];
        let bindings = bind(graph, fed)?;
        let report = check_model(model, &CheckOptions::default());
        let value_of = |s: &str| bindings.iter().find(|b| b.symbol == s).and_then(|b| i64::try_from(b.size).ok());
        for d in &report.diagnostics {
            for a in &d.assumes {
                if a.holds(&value_of) != Some(false) {
                    continue;
                }
                let Some(b) = a.symbols().into_iter().find_map(|s| bindings.iter().find(|b| b.symbol == s)) else {
                    continue;
                };
                let at = match (&d.node, &d.op) {
                    (Some(node), Some(op)) => format!("node '{node}' ({op}): "),
                    _ => String::new(),
                };
                return Err(RunError::Binding {
                    input: b.input.clone(),
                    axis: Some(b.axis),
                    rule: d.code.as_str().to_string(),
                    problem: format!(
                        "binds '{}' to {}, but the model assumes {} ({at}{})",
                        b.symbol,
                        b.size,
                        a.plain(),
                        d.message
                    ),
                });
            }
        }
        let mut partial = Vec::new();
        let errors = report.diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
        if errors > 0 {
            partial.push(format!("the check finds {errors} error(s) in the model, so its shapes are not relied on"));
        }
        let mut sizes: Vec<Option<Size>> = vec![None; graph.values.len()];
        for t in &graph.initializers {
            if let Some(id) = t.name.as_deref().and_then(|n| graph.value_named(n)) {
                sizes[id.index()] = Some(initializer_size(t));
            }
        }
        for (name, f) in fed {
            if let Some(id) = graph.value_named(name) {
                sizes[id.index()] = Some(Size::Bytes(f.bytes()));
            }
        }
        for node in graph.nodes.values() {
            for &o in &node.outputs {
                let name = graph.value_name(o);
                if name.is_empty() || sizes[o.index()].is_some() {
                    continue;
                }
                let size = match report.inferred.get(gid, o) {
                    Some(ty) => inferred_size(name, ty, &bindings),
                    None => Size::UnknownUntilRun(format!("'{name}': the check infers no complete type for it")),
                };
                sizes[o.index()] = Some(size);
            }
        }
        for node in graph.nodes.values() {
            if node.subgraphs().next().is_some() {
                partial.push(format!(
                    "node '{}' ({}) runs a subgraph: what that holds depends on the data",
                    node_label(graph, node),
                    node.op_type()
                ));
            } else if crate::ops::model_function(model, node).is_some() {
                partial.push(format!(
                    "node '{}' ({}) calls a model-local function: what its body holds is not predicted",
                    node_label(graph, node),
                    node.op_type()
                ));
            }
        }
        // The shapes that Shape nodes read, where the check (finding no error) fixes them from the fed shapes.
        let mut shapes = HashMap::new();
        if errors == 0 {
            for node in graph.nodes.values() {
                let standard = node.domain.as_deref().is_none_or(|d| d.is_empty() || d == "ai.onnx");
                let Some(&input) = node.inputs.first() else { continue };
                if standard && node.op_type.as_deref() == Some("Shape") {
                    if let Some(dims) = report.inferred.get(gid, input).and_then(|ty| inferred_dims(ty, &bindings).ok())
                    {
                        shapes.insert(input, dims);
                    }
                }
            }
        }
        let schedule = Schedule::new(model, graph, &output_ids(graph)?)?;
        let (peak, unknown, held) = replay(graph, fed, &schedule, &sizes);
        partial.extend(unknown);
        let values = held
            .into_iter()
            .map(|id| PlannedValue {
                name: graph.value_name(id).to_string(),
                size: sizes[id.index()].clone().unwrap_or(Size::UnknownUntilRun("never sized".into())),
            })
            .collect();
        let predicted_peak = partial.is_empty().then_some(peak);
        Ok(Plan { fed: fed.to_vec(), bindings, schedule, values, predicted_peak, partial, shapes })
    }

    /// The shape of `value`, which a Shape node reads, when the check fixes
    /// it from the fed shapes (so that it is the same in every run).
    pub fn shape_read(&self, value: ValueId) -> Option<&[u64]> {
        self.shapes.get(&value).map(Vec::as_slice)
    }

    /// The symbols the fed tensors bound, in the order they were bound.
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The order the main graph's nodes run in and what dies after each.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Every value the run holds (initializers, inputs, node outputs), each
    /// once, in the order it first becomes live, with its size.
    pub fn values(&self) -> &[PlannedValue] {
        &self.values
    }

    /// The predicted peak of live bytes; `None` when some size is known
    /// only at run time (see [`Plan::partial`]).
    pub fn predicted_peak_bytes(&self) -> Option<u64> {
        self.predicted_peak
    }

    /// Why the prediction is partial: each value whose size is unknown until
    /// run, each node whose inner runs are, and errors of the check. Empty
    /// when the peak is predicted.
    pub fn partial(&self) -> &[String] {
        &self.partial
    }

    /// Checks that `inputs` are what the plan was made for (same names, in
    /// the same order, with the same kinds, element types and shapes).
    pub fn check_fed(&self, inputs: &[(String, Value)]) -> Result<()> {
        if inputs.len() != self.fed.len() {
            return Err(RunError::Input {
                name: inputs.first().map_or_else(String::new, |(n, _)| n.clone()),
                problem: format!("{} inputs were fed, the plan was made for {}", inputs.len(), self.fed.len()),
            });
        }
        for ((name, value), (planned, fed)) in inputs.iter().zip(&self.fed) {
            let got = Fed::of(value);
            if name != planned || got != *fed {
                return Err(RunError::Input {
                    name: name.clone(),
                    problem: format!(
                        "{} was fed, the plan was made for '{planned}' = {}",
                        got.describe(),
                        fed.describe()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Binds the symbols of `graph`'s declared inputs from `fed`, refusing what
/// contradicts the declarations (also what [`crate::run_model`] checks its
/// inputs with).
pub(crate) fn bind(graph: &Graph, fed: &[(String, Fed)]) -> Result<Vec<Binding>> {
    let declared: Vec<(&str, Option<&TypeInfo>)> =
        graph.inputs.iter().filter_map(|i| i.value.map(|v| (graph.value_name(v), i.ty.as_ref()))).collect();
    for (name, _) in fed {
        if !declared.iter().any(|(n, _)| n == name) {
            return Err(RunError::Input { name: name.clone(), problem: "the model has no input of that name".into() });
        }
    }
    let initialized: Vec<&str> = graph.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
    // The names of the axes the declarations leave open (`x.2`), as the check names them.
    let open = diamond_ir::InputDims::of(graph);
    let mut bindings: Vec<Binding> = Vec::new();
    for (name, ty) in declared {
        let summary = ty.map_or_else(|| "?".to_string(), TypeInfo::summary);
        // The last value fed for a name is the one the run binds.
        let Some(f) = fed.iter().rev().find(|(n, _)| n == name).map(|(_, f)| f) else {
            if initialized.contains(&name) {
                continue;
            }
            return Err(RunError::Input {
                name: name.to_string(),
                problem: format!("missing: the model declares it as {summary} and nothing was fed"),
            });
        };
        let refuse = |axis: Option<usize>, rule: &str, problem: String| RunError::Binding {
            input: name.to_string(),
            axis,
            rule: rule.to_string(),
            problem,
        };
        let declared_kind = match ty.and_then(|t| t.value.as_ref()) {
            Some(TypeValue::Tensor { .. }) => Some("tensor"),
            Some(TypeValue::Map { .. }) => Some("map"),
            Some(TypeValue::Sequence(Some(inner))) if matches!(inner.value, Some(TypeValue::Map { .. })) => Some("map"),
            Some(TypeValue::Sequence(_)) => Some("sequence"),
            Some(TypeValue::Optional(_)) => Some("optional"),
            _ => None,
        };
        if declared_kind.is_some_and(|k| k != f.kind()) {
            return Err(refuse(None, "declared-kind", format!("a {} was fed, the model declares {summary}", f.kind())));
        }
        let declared_elem = match ty.and_then(|t| t.value.as_ref()) {
            Some(TypeValue::Tensor { elem, .. }) => *elem,
            Some(TypeValue::Sequence(Some(inner))) => inner.as_tensor().and_then(|(e, _)| e),
            _ => None,
        };
        let fed_elem = match f {
            Fed::Tensor { elem, .. } | Fed::Sequence { elem, .. } => Some(*elem),
            Fed::Optional { .. } | Fed::Map { .. } => None,
        };
        if let (Some(want), Some(got)) = (declared_elem.filter(|e| *e != ElemType::Undefined), fed_elem) {
            if want != got {
                return Err(refuse(
                    None,
                    "declared-element-type",
                    format!("element type {got} was fed, the model declares {want} ({summary})"),
                ));
            }
        }
        let (Fed::Tensor { shape: fed_shape, .. }, Some(TypeValue::Tensor { shape: Some(shape), .. })) =
            (f, ty.and_then(|t| t.value.as_ref()))
        else {
            continue;
        };
        if shape.dims.len() != fed_shape.len() {
            return Err(refuse(
                None,
                "declared-rank",
                format!(
                    "rank {} (shape {fed_shape:?}) was fed, the model declares rank {} ({summary})",
                    fed_shape.len(),
                    shape.dims.len()
                ),
            ));
        }
        let id = graph.value_named(name);
        for (axis, (dim, &size)) in shape.dims.iter().zip(fed_shape).enumerate() {
            if let Some(symbol) = id.and_then(|id| open.open_symbol(id, axis)) {
                // An open axis is a symbol of its own: any size binds it.
                bindings.push(Binding { symbol: symbol.to_string(), size: size as u64, input: name.to_string(), axis });
                continue;
            }
            match &dim.value {
                Some(DimValue::Known(k)) if *k >= 0 && *k as usize != size => {
                    return Err(refuse(
                        Some(axis),
                        "declared-size",
                        format!("size {size} was fed, the model declares {k} ({summary})"),
                    ));
                }
                Some(DimValue::Param(p)) if !is_open(dim.value.as_ref()) => match bindings
                    .iter()
                    .find(|b| b.symbol == *p)
                {
                    Some(b) if b.size != size as u64 => {
                        return Err(refuse(
                            Some(axis),
                            "one-size-per-symbol",
                            format!(
                                "binds '{p}' to {size}, but input '{}' axis {} bound it to {}",
                                b.input, b.axis, b.size
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        bindings.push(Binding { symbol: p.clone(), size: size as u64, input: name.to_string(), axis })
                    }
                },
                _ => {}
            }
        }
    }
    Ok(bindings)
}

/// The bytes an initializer holds once decoded.
fn initializer_size(t: &diamond_ir::Tensor) -> Size {
    let name = t.name.as_deref().unwrap_or("");
    if t.elem_type() == ElemType::String {
        return Size::Bytes(t.data.strings.iter().map(|s| s.len() as u64).sum());
    }
    match (t.element_count(), elem_bytes(t.elem_type())) {
        (Some(n), Some(width)) => n
            .checked_mul(width)
            .map_or_else(|| Size::UnknownUntilRun(format!("initializer '{name}': its size overflows")), Size::Bytes),
        _ => Size::UnknownUntilRun(format!("initializer '{name}': its dims {:?} are not a size", t.dims)),
    }
}

/// The size of value `name` of inferred type `ty` with the symbols bound.
fn inferred_size(name: &str, ty: &TypeInfo, bindings: &[Binding]) -> Size {
    let unknown = |why: String| Size::UnknownUntilRun(format!("'{name}' {why}"));
    let elem = match &ty.value {
        Some(TypeValue::Tensor { elem: Some(elem), .. }) => *elem,
        Some(TypeValue::Sequence(_)) => {
            return unknown("is a sequence: how many tensors it holds shows at run time".into())
        }
        Some(TypeValue::Optional(_)) => {
            return unknown("is an optional: whether it holds a value shows at run time".into())
        }
        _ => return unknown(format!("is a {}: its size is not predicted", ty.summary())),
    };
    let Some(width) = elem_bytes(elem) else {
        return unknown("holds strings, whose lengths show at run time".into());
    };
    let dims = match inferred_dims(ty, bindings) {
        Ok(dims) => dims,
        Err(why) => return unknown(why),
    };
    let mut bytes: u64 = width;
    for size in dims {
        let Some(product) = bytes.checked_mul(size) else { return unknown("overflows 64 bits".into()) };
        bytes = product;
    }
    Size::Bytes(bytes)
}

/// The sizes of a tensor type's axes at the bound symbols, or why they are
/// not known before the run.
fn inferred_dims(ty: &TypeInfo, bindings: &[Binding]) -> std::result::Result<Vec<u64>, String> {
    let Some(TypeValue::Tensor { shape, .. }) = &ty.value else { return Err("is not a tensor".into()) };
    let Some(shape) = shape else { return Err("has a rank the check cannot infer".into()) };
    let value_of = |s: &str| bindings.iter().find(|b| b.symbol == s).and_then(|b| i64::try_from(b.size).ok());
    let mut dims = Vec::with_capacity(shape.dims.len());
    for (axis, dim) in shape.dims.iter().enumerate() {
        let size = match &dim.value {
            Some(DimValue::Known(n)) => u64::try_from(*n).ok(),
            Some(DimValue::Param(p)) => match value_of(p) {
                Some(v) => u64::try_from(v).ok(),
                None => SizeExpr::parse(p).ok().and_then(|e| e.eval(&value_of)).and_then(|v| u64::try_from(v).ok()),
            },
            None => return Err(format!("axis {axis}: its size depends on the data")),
        };
        let Some(size) = size else {
            let text = dim.value.as_ref().map_or_else(String::new, |v| match v {
                DimValue::Known(n) => n.to_string(),
                DimValue::Param(p) => p.clone(),
            });
            return Err(format!("axis {axis} is {text}, which the fed shapes do not determine"));
        };
        dims.push(size);
    }
    Ok(dims)
}

/// Replays the executor's accounting over `schedule` with the planned
/// `sizes`: the peak of live bytes, the reasons it is not exact (a value
/// of unknown size went live), and the values held, in the order they first
/// went live.
fn replay(
    graph: &Graph,
    fed: &[(String, Fed)],
    schedule: &Schedule,
    sizes: &[Option<Size>],
) -> (u64, Vec<String>, Vec<ValueId>) {
    let mut slots: Vec<Option<u64>> = vec![None; graph.values.len()];
    let mut live: u64 = 0;
    let mut unknown: Vec<String> = Vec::new();
    let mut held: Vec<ValueId> = Vec::new();
    let mut seen: HashSet<ValueId> = HashSet::new();
    let mut enter = |id: ValueId, slots: &mut Vec<Option<u64>>, live: &mut u64| {
        let bytes = match &sizes[id.index()] {
            Some(Size::Bytes(b)) => *b,
            Some(Size::UnknownUntilRun(why)) => {
                if !unknown.contains(why) {
                    unknown.push(why.clone());
                }
                0
            }
            None => {
                let why = format!("'{}' is never sized", graph.value_name(id));
                if !unknown.contains(&why) {
                    unknown.push(why);
                }
                0
            }
        };
        if seen.insert(id) {
            held.push(id);
        }
        *live += bytes;
        if let Some(old) = slots[id.index()].replace(bytes) {
            *live -= old;
        }
    };
    for t in &graph.initializers {
        if let Some(id) = t.name.as_deref().and_then(|n| graph.value_named(n)) {
            enter(id, &mut slots, &mut live);
        }
    }
    for (name, _) in fed {
        if let Some(id) = graph.value_named(name) {
            enter(id, &mut slots, &mut live);
        }
    }
    let mut peak = live;
    let nodes: Vec<&diamond_ir::Node> = graph.nodes.values().collect();
    for (pos, &n) in schedule.order.iter().enumerate() {
        for &o in &nodes[n].outputs {
            if !graph.value_name(o).is_empty() {
                enter(o, &mut slots, &mut live);
            }
        }
        peak = peak.max(live);
        for &id in &schedule.frees[pos] {
            if let Some(old) = slots.get_mut(id.index()).and_then(Option::take) {
                live -= old;
            }
        }
    }
    (peak, unknown, held)
}
