//! The model: metadata, operator sets, the graph arena, functions, training
//! information and device configurations.
//!
//! Every graph of a model — main graph, attribute subgraphs, function bodies,
//! training graphs — lives in one arena ([`Model::graphs`]), so a subgraph is
//! just a [`GraphId`] and walking all graphs is a loop.

use crate::attribute::Attribute;
use crate::entity::{Arena, GraphId, ValueId};
use crate::graph::Graph;

/// A key/value pair (`StringStringEntryProto`), with presence kept.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StringEntry {
    /// The key.
    pub key: Option<String>,
    /// The value.
    pub value: Option<String>,
}

/// An imported operator set (`OperatorSetIdProto`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OpsetImport {
    /// The domain; unset or `""` is the default ONNX domain.
    pub domain: Option<String>,
    /// The opset version.
    pub version: Option<i64>,
}

/// A model.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct Model {
    pub ir_version: Option<i64>,
    pub opset_imports: Vec<OpsetImport>,
    pub producer_name: Option<String>,
    pub producer_version: Option<String>,
    pub domain: Option<String>,
    pub model_version: Option<i64>,
    pub doc_string: Option<String>,
    /// The main graph.
    pub graph: Option<GraphId>,
    pub metadata_props: Vec<StringEntry>,
    pub training_info: Vec<TrainingInfo>,
    pub functions: Vec<Function>,
    pub configurations: Vec<DeviceConfiguration>,
    /// Every graph of the model.
    pub graphs: Arena<GraphId, Graph>,
}

/// A model-local function (`FunctionProto`). Its nodes live in the body graph.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub struct Function {
    pub name: Option<String>,
    pub domain: Option<String>,
    pub overload: Option<String>,
    /// The body: nodes, values, and the function's `value_info`.
    pub body: GraphId,
    /// Formal inputs, as values of the body graph.
    pub inputs: Vec<ValueId>,
    /// Formal outputs, as values of the body graph.
    pub outputs: Vec<ValueId>,
    /// Names of attributes without defaults.
    pub attribute_names: Vec<String>,
    /// Attributes with default values.
    pub attribute_protos: Vec<Attribute>,
    pub doc_string: Option<String>,
    pub opset_imports: Vec<OpsetImport>,
    pub metadata_props: Vec<StringEntry>,
}

/// Training information (`TrainingInfoProto`).
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct TrainingInfo {
    pub initialization: Option<GraphId>,
    pub algorithm: Option<GraphId>,
    pub initialization_binding: Vec<StringEntry>,
    pub update_binding: Vec<StringEntry>,
}

/// A named set of devices (`DeviceConfigurationProto`).
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct DeviceConfiguration {
    pub name: Option<String>,
    pub num_devices: Option<i32>,
    pub devices: Vec<String>,
}

/// How a node is placed in a device configuration.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct NodeDeviceConfiguration {
    pub configuration_id: Option<String>,
    pub sharding_specs: Vec<ShardingSpec>,
    pub pipeline_stage: Option<i32>,
}

/// How one tensor of a node is sharded.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct ShardingSpec {
    pub tensor_name: Option<String>,
    pub devices: Vec<i64>,
    pub index_to_device_group_map: Vec<IntListEntry>,
    pub sharded_dims: Vec<ShardedDim>,
}

/// A key with a list of integers.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct IntListEntry {
    pub key: Option<i64>,
    pub values: Vec<i64>,
}

/// The sharding of one axis.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct ShardedDim {
    pub axis: Option<i64>,
    pub simple_sharding: Vec<SimpleShardedDim>,
}

/// One piece of an axis sharding.
#[derive(Clone, Debug, PartialEq, Default)]
#[allow(missing_docs)]
pub struct SimpleShardedDim {
    pub dim: Option<crate::types::DimValue>,
    pub num_shards: Option<i64>,
}

impl Model {
    /// The main graph, if the model has one.
    pub fn main_graph(&self) -> Option<&Graph> {
        self.graph.map(|id| &self.graphs[id])
    }

    /// The opset version imported for `domain` (`""` for the default domain).
    pub fn opset_version(&self, domain: &str) -> Option<i64> {
        let normal = |d: &str| if d == "ai.onnx" { String::new() } else { d.to_string() };
        self.opset_imports
            .iter()
            .find(|o| normal(o.domain.as_deref().unwrap_or("")) == normal(domain))
            .and_then(|o| o.version)
    }
}
