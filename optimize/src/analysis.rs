//! What the passes read about the current model: the check report and the
//! main graph's def-use tables.

use crate::raw_hints::RawHints;
use diamond_infer::check_model;
use diamond_infer::graph::{CheckReport, ConstValue, DimReport, ValueReport};
use diamond_ir::entity::EntityId;
use diamond_ir::{ElemType, Graph, GraphId, Model, NodeId, ValueId};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::sync::Arc;

/// The facts about a model that the passes decide on.
pub struct Analysis<'r> {
    /// The check of the model as it is now (borrowed when the caller already has it).
    pub report: Cow<'r, CheckReport>,
    /// The main graph.
    pub main: GraphId,
    /// Per value of the main graph, the nodes reading it (a node once per operand).
    pub consumers: HashMap<ValueId, Vec<NodeId>>,
    /// Per value, the node producing it.
    pub producer: HashMap<ValueId, NodeId>,
    /// Names that subgraphs of main-graph nodes read from the main graph.
    pub outer_refs: HashSet<String>,
    /// The main graph's outputs.
    pub outputs: HashSet<ValueId>,
    /// The main graph's inputs (initializers listed as inputs included).
    pub inputs: HashSet<ValueId>,
    /// Initializers by value.
    pub initializers: HashMap<ValueId, usize>,
    /// Before IR 4 every initializer is also a graph input, and a constant.
    pub initializers_are_constants: bool,
    /// The most bytes a folded constant may hold beyond its inputs' bytes
    /// (`--fold-limit`; [`DEFAULT_FOLD_LIMIT`] unless the driver says otherwise).
    pub fold_limit: u64,
    /// Per main-graph value id, its entry in the report's values.
    index: Vec<Option<u32>>,
    /// Initializers known not to be uniform from a first look (`check`).
    raw_hints: Option<RawHints>,
}

/// Folded constants up to 1 MiB are kept whatever their inputs' size.
pub const DEFAULT_FOLD_LIMIT: u64 = 1 << 20;

impl<'r> Analysis<'r> {
    /// Checks `model` and indexes its main graph; `None` without a main graph.
    pub fn new(model: &Model) -> Option<Analysis<'static>> {
        Analysis::index(model, Cow::Owned(check_model(model, &Default::default())))
    }

    /// Indexes `model` around a check report already made of it.
    pub fn with_report(model: &Model, report: &'r CheckReport) -> Option<Analysis<'r>> {
        Analysis::index(model, Cow::Borrowed(report))
    }

    fn index(model: &Model, report: Cow<'r, CheckReport>) -> Option<Analysis<'r>> {
        let main = model.graph?;
        let graph = &model.graphs[main];
        let mut consumers: HashMap<ValueId, Vec<NodeId>> = HashMap::default();
        let mut producer = HashMap::default();
        let mut outer_refs = HashSet::default();
        for (nid, node) in graph.nodes.iter() {
            for &v in &node.inputs {
                consumers.entry(v).or_default().push(nid);
            }
            for &v in &node.outputs {
                producer.insert(v, nid);
            }
            for g in node.subgraphs() {
                collect_refs(model, g, &mut outer_refs);
            }
        }
        let outputs = graph.outputs.iter().filter_map(|vi| vi.value).collect();
        let inputs = graph.inputs.iter().filter_map(|vi| vi.value).collect();
        let initializers = graph
            .initializers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((graph.value_named(t.name.as_deref()?)?, i)))
            .collect();
        let mut index = vec![None; graph.values.len()];
        for (i, v) in report.values.iter().enumerate() {
            if let Some(id) = v.value {
                index[id.index()] = Some(i as u32);
            }
        }
        let initializers_are_constants = model.ir_version.unwrap_or(0) < 4;
        Some(Analysis {
            report,
            main,
            consumers,
            producer,
            outer_refs,
            outputs,
            inputs,
            initializers,
            initializers_are_constants,
            fold_limit: DEFAULT_FOLD_LIMIT,
            index,
            raw_hints: None,
        })
    }

    /// This analysis, taking `hints` about the initializers' raw data (made
    /// of the same model) instead of reading that data again.
    pub fn with_raw_hints(self, hints: RawHints) -> Analysis<'r> {
        Analysis { raw_hints: Some(hints), ..self }
    }

    /// Whether a first look showed initializer `i` not to be uniform.
    pub(crate) fn known_not_uniform(&self, i: usize) -> bool {
        self.raw_hints.as_ref().is_some_and(|h| h.differs(i))
    }

    /// The main graph of `model`.
    pub fn graph<'m>(&self, model: &'m Model) -> &'m Graph {
        &model.graphs[self.main]
    }

    /// The report's entry for a main-graph value.
    fn value(&self, v: ValueId) -> Option<&ValueReport> {
        let i = (*self.index.get(v.index())?)?;
        self.report.values.get(i as usize)
    }

    /// The inferred shape of a main-graph value, when every dim is known or symbolic.
    pub fn shape(&self, _model: &Model, v: ValueId) -> Option<&[DimReport]> {
        let shape = self.value(v)?.shape.as_deref()?;
        shape.iter().all(|d| *d != DimReport::Unknown).then_some(shape)
    }

    /// The inferred rank of a main-graph value (its dims may be unknown).
    pub fn rank(&self, _model: &Model, v: ValueId) -> Option<usize> {
        Some(self.value(v)?.shape.as_ref()?.len())
    }

    /// The inferred element type of a main-graph value.
    pub fn dtype(&self, _model: &Model, v: ValueId) -> Option<ElemType> {
        self.value(v)?.dtype
    }

    /// The bytes a value of the main graph occupies when its shape is known
    /// integers and its element type has a fixed width.
    pub fn known_bytes(&self, model: &Model, v: ValueId) -> Option<u64> {
        let mut count = 1u64;
        for d in self.shape(model, v)? {
            match d {
                DimReport::Known(n) => count = count.checked_mul(*n)?,
                _ => return None,
            }
        }
        self.dtype(model, v)?.raw_size(count)
    }

    /// The elements of a value when they are known: an initializer's, a
    /// `Constant` node's, or what value propagation computed.
    pub fn constant(&self, model: &Model, v: ValueId) -> Option<Arc<ConstValue>> {
        let graph = self.graph(model);
        if let Some(&i) = self.initializers.get(&v) {
            // From IR 4, an initializer that is also a graph input is a default the caller may override.
            if self.inputs.contains(&v) && !self.initializers_are_constants {
                return None;
            }
            return diamond_infer::graph::decode::decode(&graph.initializers[i]).map(Arc::new);
        }
        self.report.known_values.get(&v).cloned()
    }

    /// Whether a value may be rewired or removed: not part of the interface
    /// and not read by name from a subgraph.
    pub fn is_internal(&self, model: &Model, v: ValueId) -> bool {
        !self.outputs.contains(&v)
            && !self.inputs.contains(&v)
            && !self.outer_refs.contains(self.graph(model).value_name(v))
    }

    /// Whether the readers of a value may be pointed elsewhere: it is
    /// internal, or (before IR 4) an initializer listed as a graph input,
    /// which is a constant there, not the caller's to feed.
    pub fn may_rewire(&self, model: &Model, v: ValueId) -> bool {
        self.is_internal(model, v)
            || (self.initializers_are_constants
                && self.initializers.contains_key(&v)
                && !self.outputs.contains(&v)
                && !self.outer_refs.contains(self.graph(model).value_name(v)))
    }

    /// Whether nothing reads a value (no node, no subgraph, not an output).
    pub fn unused(&self, model: &Model, v: ValueId) -> bool {
        self.consumers.get(&v).is_none_or(|c| c.is_empty()) && self.is_internal(model, v)
    }
}

/// Every name the nodes of `graph` (and their subgraphs) read that `graph`
/// does not define itself.
pub(crate) fn collect_refs(model: &Model, g: GraphId, out: &mut HashSet<String>) {
    let graph = &model.graphs[g];
    let mut defined: HashSet<&str> =
        graph.inputs.iter().filter_map(|vi| vi.value).map(|v| graph.value_name(v)).collect();
    defined.extend(graph.initializers.iter().filter_map(|t| t.name.as_deref()));
    for (_, node) in graph.nodes.iter() {
        defined.extend(node.outputs.iter().map(|&v| graph.value_name(v)));
    }
    for (_, node) in graph.nodes.iter() {
        for &v in &node.inputs {
            let name = graph.value_name(v);
            if !name.is_empty() && !defined.contains(name) {
                out.insert(name.to_string());
            }
        }
        for sub in node.subgraphs() {
            let mut inner = HashSet::default();
            collect_refs(model, sub, &mut inner);
            out.extend(inner.into_iter().filter(|n| !defined.contains(n.as_str())));
        }
    }
    for vi in &graph.outputs {
        if let Some(v) = vi.value {
            let name = graph.value_name(v);
            if !defined.contains(name) {
                out.insert(name.to_string());
            }
        }
    }
}
