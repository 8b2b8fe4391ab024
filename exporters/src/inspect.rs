//! The `diamond inspect` report: what a model declares, at a glance.
//!
//! Built from the IR alone (no inference): versions, operator sets, producer,
//! node counts per operator, declared inputs and outputs, weights, subgraphs
//! and functions. Serializes to JSON as is; [`InspectReport::render_text`]
//! gives the terminal form.

use diamond_ir::{GraphOwner, Model, TypeInfo, TypeValue, ValueInfo};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

/// Everything `diamond inspect` reports.
#[derive(Debug, Serialize)]
pub struct InspectReport {
    /// The file inspected.
    pub file: String,
    /// Its size in bytes.
    pub file_bytes: u64,
    /// The stated IR version.
    pub ir_version: Option<i64>,
    /// Imported operator sets.
    pub opsets: Vec<Opset>,
    /// The producing tool.
    pub producer_name: Option<String>,
    /// Its version.
    pub producer_version: Option<String>,
    /// The model's domain.
    pub domain: Option<String>,
    /// The model's version.
    pub model_version: Option<i64>,
    /// The main graph's name.
    pub graph_name: Option<String>,
    /// Nodes in the main graph.
    pub main_graph_nodes: usize,
    /// Nodes in every graph: main, subgraphs, function bodies, training graphs.
    pub total_nodes: usize,
    /// Node count per operator over every graph, most frequent first.
    pub op_types: Vec<OpCount>,
    /// Declared graph inputs that are not initializers.
    pub inputs: Vec<Declared>,
    /// Declared graph outputs.
    pub outputs: Vec<Declared>,
    /// Graph inputs that only name an initializer (older exporters list weights as inputs).
    pub initializer_inputs: usize,
    /// Weights of the main graph.
    pub initializers: Weights,
    /// Graphs held by node attributes (If/Loop/Scan bodies), at any depth.
    pub subgraphs: usize,
    /// Model-local functions.
    pub functions: usize,
    /// Training-information entries.
    pub training_infos: usize,
    /// Model metadata.
    pub metadata: BTreeMap<String, String>,
}

/// An imported operator set.
#[derive(Debug, Serialize)]
pub struct Opset {
    /// The domain, `""` for the default ONNX domain.
    pub domain: String,
    /// The version.
    pub version: Option<i64>,
}

/// How many nodes use one operator.
#[derive(Debug, Serialize)]
pub struct OpCount {
    /// The domain, `""` for the default ONNX domain.
    pub domain: String,
    /// The operator.
    pub op_type: String,
    /// The count.
    pub count: usize,
}

/// A declared input or output.
#[derive(Debug, Serialize)]
pub struct Declared {
    /// The value's name.
    pub name: String,
    /// The declared type in compact form (`float[batch,3,224,224]`).
    pub ty: String,
    /// The element type name, if a tensor with a stated element type.
    pub elem_type: Option<String>,
    /// The dims (numbers, symbols, or `?`), if a tensor with a stated shape.
    pub shape: Option<Vec<String>>,
}

/// Weight statistics.
#[derive(Debug, Default, Serialize)]
pub struct Weights {
    /// Dense initializers.
    pub count: usize,
    /// Their data in bytes, wherever it lives.
    pub bytes: u64,
    /// How many keep their data in external files.
    pub external_count: usize,
    /// Bytes of those.
    pub external_bytes: u64,
    /// Sparse initializers.
    pub sparse_count: usize,
}

impl InspectReport {
    /// Builds the report for `model`, read from `file` of `file_bytes` bytes.
    pub fn new(model: &Model, file: &str, file_bytes: u64) -> InspectReport {
        let main = model.main_graph();
        let mut op_counts: BTreeMap<(String, String), usize> = BTreeMap::new();
        for graph in model.graphs.values() {
            for node in graph.nodes.values() {
                *op_counts.entry((node.domain().to_string(), node.op_type().to_string())).or_default() += 1;
            }
        }
        let mut op_types: Vec<OpCount> =
            op_counts.into_iter().map(|((domain, op_type), count)| OpCount { domain, op_type, count }).collect();
        op_types.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.op_type.cmp(&b.op_type)));

        let initializer_names: HashSet<&str> =
            main.map(|g| g.initializers.iter().filter_map(|t| t.name.as_deref()).collect()).unwrap_or_default();
        let declared = |infos: &[ValueInfo]| -> Vec<Declared> {
            let graph = main.expect("declared values come from the main graph");
            infos.iter().map(|info| describe(graph, info)).collect()
        };
        let (inputs, initializer_inputs, outputs) = match main {
            Some(g) => {
                let (weights, data): (Vec<ValueInfo>, Vec<ValueInfo>) = g
                    .inputs
                    .iter()
                    .cloned()
                    .partition(|i| i.value.is_some_and(|v| initializer_names.contains(g.value_name(v))));
                (declared(&data), weights.len(), declared(&g.outputs))
            }
            None => (Vec::new(), 0, Vec::new()),
        };
        let mut initializers = Weights::default();
        if let Some(g) = main {
            for t in &g.initializers {
                initializers.count += 1;
                initializers.bytes += t.data_bytes();
                if t.is_external() {
                    initializers.external_count += 1;
                    initializers.external_bytes += t.data_bytes();
                }
            }
            initializers.sparse_count = g.sparse_initializers.len();
        }
        InspectReport {
            file: file.to_string(),
            file_bytes,
            ir_version: model.ir_version,
            opsets: model
                .opset_imports
                .iter()
                .map(|o| Opset { domain: o.domain.clone().unwrap_or_default(), version: o.version })
                .collect(),
            producer_name: model.producer_name.clone(),
            producer_version: model.producer_version.clone(),
            domain: model.domain.clone(),
            model_version: model.model_version,
            graph_name: main.and_then(|g| g.name.clone()),
            main_graph_nodes: main.map_or(0, |g| g.nodes.len()),
            total_nodes: model.graphs.values().map(|g| g.nodes.len()).sum(),
            op_types,
            inputs,
            outputs,
            initializer_inputs,
            initializers,
            subgraphs: model.graphs.values().filter(|g| matches!(g.owner, GraphOwner::Attribute { .. })).count(),
            functions: model.functions.len(),
            training_infos: model.training_info.len(),
            metadata: model
                .metadata_props
                .iter()
                .map(|e| (e.key.clone().unwrap_or_default(), e.value.clone().unwrap_or_default()))
                .collect(),
        }
    }

    /// The report as terminal text.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let opt = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".to_string());
        let _ = writeln!(out, "{} ({} bytes)", self.file, self.file_bytes);
        let _ = writeln!(out, "  ir_version  {}", self.ir_version.map_or("-".to_string(), |v| v.to_string()));
        let opsets: Vec<String> = self
            .opsets
            .iter()
            .map(|o| {
                let domain = if o.domain.is_empty() { "ai.onnx" } else { &o.domain };
                format!("{domain} {}", o.version.map_or("?".to_string(), |v| v.to_string()))
            })
            .collect();
        let _ = writeln!(out, "  opsets      {}", opsets.join(", "));
        let _ = writeln!(out, "  producer    {} {}", opt(&self.producer_name), opt(&self.producer_version));
        let _ = writeln!(out, "  graph       {}", opt(&self.graph_name));
        let _ = writeln!(
            out,
            "  nodes       {} in the main graph, {} in all graphs; {} subgraphs, {} functions",
            self.main_graph_nodes, self.total_nodes, self.subgraphs, self.functions
        );
        let w = &self.initializers;
        let _ = writeln!(
            out,
            "  weights     {} initializers, {} bytes ({} external, {} bytes); {} sparse",
            w.count, w.bytes, w.external_count, w.external_bytes, w.sparse_count
        );
        render_values(&mut out, "inputs", &self.inputs);
        if self.initializer_inputs > 0 {
            let _ = writeln!(out, "    (+{} inputs that name initializers)", self.initializer_inputs);
        }
        render_values(&mut out, "outputs", &self.outputs);
        let _ = writeln!(out, "  operators");
        for op in &self.op_types {
            let name = if op.domain.is_empty() { op.op_type.clone() } else { format!("{}.{}", op.domain, op.op_type) };
            let _ = writeln!(out, "    {:>6}  {name}", op.count);
        }
        if !self.metadata.is_empty() {
            let _ = writeln!(out, "  metadata");
            for (k, v) in &self.metadata {
                let _ = writeln!(out, "    {k}: {v}");
            }
        }
        out
    }
}

fn render_values(out: &mut String, title: &str, values: &[Declared]) {
    let _ = writeln!(out, "  {title}");
    let width = values.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for v in values {
        let _ = writeln!(out, "    {:width$}  {}", v.name, v.ty);
    }
}

fn dim_text(dim: &diamond_ir::DimDecl) -> String {
    match &dim.value {
        Some(diamond_ir::DimValue::Known(n)) => n.to_string(),
        Some(diamond_ir::DimValue::Param(p)) => p.clone(),
        None => "?".to_string(),
    }
}

fn describe(graph: &diamond_ir::Graph, info: &ValueInfo) -> Declared {
    let name = info.value.map(|v| graph.value_name(v).to_string()).unwrap_or_default();
    let ty = info.ty.as_ref().map_or_else(|| "?".to_string(), TypeInfo::summary);
    let (elem_type, shape) = match info.ty.as_ref().and_then(|t| t.value.as_ref()) {
        Some(TypeValue::Tensor { elem, shape }) => {
            (elem.map(|e| e.to_string()), shape.as_ref().map(|s| s.dims.iter().map(dim_text).collect()))
        }
        _ => (None, None),
    };
    Declared { name, ty, elem_type, shape }
}
