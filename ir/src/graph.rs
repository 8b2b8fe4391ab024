//! Graphs, nodes and values.
//!
//! A [`Graph`] owns its nodes and its values in arenas. Values are interned by
//! name: every name a node, input, output, `value_info` or initializer of this
//! graph mentions has exactly one [`ValueId`], the empty name included (ONNX
//! writes `""` for an omitted optional input or output). A name a subgraph uses
//! but does not define refers to an enclosing graph; resolving that is the
//! inference crate's job. Declared inputs, outputs and `value_info` keep their
//! order and their optional fields, for lossless re-export.

use crate::attribute::Attribute;
use crate::entity::{Arena, GraphId, NodeId, ValueId};
use crate::model::{NodeDeviceConfiguration, StringEntry};
use crate::tensor::{SparseTensor, Tensor, TensorAnnotation};
use crate::types::TypeInfo;
use hashbrown::hash_table::{Entry, HashTable};
use std::hash::BuildHasher;

/// Where a graph sits in its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphOwner {
    /// The model's main graph.
    Main,
    /// A graph-valued attribute of a node in another graph.
    Attribute {
        /// The graph holding the node.
        graph: GraphId,
        /// The node.
        node: NodeId,
    },
    /// A graph outside the main graph's node tree: a training graph, or a
    /// graph-valued default of a function's attribute.
    Detached,
    /// The body of a model-local function.
    FunctionBody,
}

/// A computation graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// What contains this graph.
    pub owner: GraphOwner,
    /// The graph's name.
    pub name: Option<String>,
    /// Documentation.
    pub doc_string: Option<String>,
    /// Nodes, in file order (ONNX requires topological order).
    pub nodes: Arena<NodeId, Node>,
    /// Every named value the graph mentions.
    pub values: Arena<ValueId, Value>,
    /// The values by name: ids hashed by their name, which `values` holds
    /// (each name is stored once).
    by_name: NameIndex,
    /// Declared graph inputs.
    pub inputs: Vec<ValueInfo>,
    /// Declared graph outputs.
    pub outputs: Vec<ValueInfo>,
    /// Declared types of intermediate values.
    pub value_info: Vec<ValueInfo>,
    /// Weights and constants.
    pub initializers: Vec<Tensor>,
    /// Sparse weights.
    pub sparse_initializers: Vec<SparseTensor>,
    /// Quantization annotations.
    pub quantization_annotations: Vec<TensorAnnotation>,
    /// Free-form metadata.
    pub metadata_props: Vec<StringEntry>,
}

/// A named value: a graph input, an initializer, a node output, or a name
/// from an enclosing scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// The name, unique within the graph; `""` marks an omitted optional operand.
    pub name: String,
}

/// A declared value (`ValueInfoProto`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ValueInfo {
    /// The value; `None` when the file gives no name.
    pub value: Option<ValueId>,
    /// The declared type.
    pub ty: Option<TypeInfo>,
    /// Documentation.
    pub doc_string: Option<String>,
    /// Free-form metadata.
    pub metadata_props: Vec<StringEntry>,
}

/// One operator application. The fields few nodes fill sit apart, boxed,
/// in [`NodeRare`]: a graph holds tens of thousands of nodes, nearly all of
/// them an operator, its operands and its attributes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Node {
    /// The node's name.
    pub name: Option<String>,
    /// The operator.
    pub op_type: Option<String>,
    /// The operator's domain; unset or `""` is the default ONNX domain.
    pub domain: Option<String>,
    /// Operands, in order (the empty-name value marks an omitted one).
    pub inputs: Vec<ValueId>,
    /// Results, in order.
    pub outputs: Vec<ValueId>,
    /// Attributes, in file order.
    pub attributes: Vec<Attribute>,
    /// The rarely filled fields; `None` when all of them are empty (build it
    /// with [`NodeRare::boxed`] so that equal nodes compare equal).
    pub rare: Option<Box<NodeRare>>,
}

/// The fields of a node that few files fill.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NodeRare {
    /// The overload of a model-local function.
    pub overload: Option<String>,
    /// Documentation.
    pub doc_string: Option<String>,
    /// Free-form metadata.
    pub metadata_props: Vec<StringEntry>,
    /// Device placement and sharding.
    pub device_configurations: Vec<NodeDeviceConfiguration>,
}

/// What [`Node::rare`] lends when a node has no rare field.
static NO_NODE_RARE: NodeRare =
    NodeRare { overload: None, doc_string: None, metadata_props: Vec::new(), device_configurations: Vec::new() };

impl NodeRare {
    /// Boxed, or `None` when every field is empty.
    pub fn boxed(self) -> Option<Box<NodeRare>> {
        (self != NO_NODE_RARE).then(|| Box::new(self))
    }
}

/// A graph's value ids hashed by their names. Its `Debug` shows only how
/// many it holds: the order of its buckets depends on how the table grew,
/// which says nothing about the graph.
#[derive(Clone, Default)]
struct NameIndex(HashTable<ValueId>);

impl std::fmt::Debug for NameIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NameIndex({} names)", self.0.len())
    }
}

/// The hash a value's name is found by.
fn name_hash(name: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(name)
}

/// Equal graphs hold equal values in the same order; the name index follows
/// from them.
impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        let Graph {
            owner,
            name,
            doc_string,
            nodes,
            values,
            by_name: _,
            inputs,
            outputs,
            value_info,
            initializers,
            sparse_initializers,
            quantization_annotations,
            metadata_props,
        } = self;
        *owner == other.owner
            && *name == other.name
            && *doc_string == other.doc_string
            && *nodes == other.nodes
            && *values == other.values
            && *inputs == other.inputs
            && *outputs == other.outputs
            && *value_info == other.value_info
            && *initializers == other.initializers
            && *sparse_initializers == other.sparse_initializers
            && *quantization_annotations == other.quantization_annotations
            && *metadata_props == other.metadata_props
    }
}

impl Graph {
    /// An empty graph with the given owner.
    pub fn new(owner: GraphOwner) -> Graph {
        Graph {
            owner,
            name: None,
            doc_string: None,
            nodes: Arena::new(),
            values: Arena::new(),
            by_name: NameIndex::default(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            value_info: Vec::new(),
            initializers: Vec::new(),
            sparse_initializers: Vec::new(),
            quantization_annotations: Vec::new(),
            metadata_props: Vec::new(),
        }
    }

    /// The value named `name`, created on first mention.
    pub fn intern(&mut self, name: &str) -> ValueId {
        let hash = name_hash(name);
        let values = &self.values;
        match self.by_name.0.entry(hash, |&id| values[id].name == name, |&id| name_hash(&values[id].name)) {
            Entry::Occupied(found) => *found.get(),
            Entry::Vacant(slot) => {
                let id = self.values.push(Value { name: name.to_string() });
                slot.insert(id);
                id
            }
        }
    }

    /// Makes room for `additional` more names in the graph's name index: an
    /// importer that knows about how many names a graph mentions spares the
    /// index its regrowth, which rehashes every name held.
    pub fn reserve_names(&mut self, additional: usize) {
        let values = &self.values;
        self.by_name.0.reserve(additional, |&id| name_hash(&values[id].name));
    }

    /// The value named `name`, if the graph mentions it.
    pub fn value_named(&self, name: &str) -> Option<ValueId> {
        self.by_name.0.find(name_hash(name), |&id| self.values[id].name == name).copied()
    }

    /// The name of value `id`.
    pub fn value_name(&self, id: ValueId) -> &str {
        &self.values[id].name
    }

    /// The graph's name, `""` when unset.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// The declared type of the graph input named `name`, if it has one.
    pub fn declared_input(&self, name: &str) -> Option<&crate::TypeValue> {
        self.inputs
            .iter()
            .find(|i| i.value.is_some_and(|v| self.value_name(v) == name))
            .and_then(|i| i.ty.as_ref())
            .and_then(|t| t.value.as_ref())
    }

    /// The declared inputs that no initializer gives a default, in
    /// declaration order: what a run of the graph must be fed.
    pub fn required_inputs(&self) -> Vec<&ValueInfo> {
        let initialized: std::collections::HashSet<&str> =
            self.initializers.iter().filter_map(|t| t.name.as_deref()).collect();
        self.inputs.iter().filter(|i| i.value.is_some_and(|v| !initialized.contains(self.value_name(v)))).collect()
    }
}

impl Node {
    /// The operator name, `""` when unset.
    pub fn op_type(&self) -> &str {
        self.op_type.as_deref().unwrap_or("")
    }

    /// The domain, with the ONNX default domain spelled `""`.
    pub fn domain(&self) -> &str {
        match self.domain.as_deref() {
            None | Some("ai.onnx") => "",
            Some(domain) => domain,
        }
    }

    /// The node's name, `""` when unset.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// The rarely filled fields, all empty when the node has none.
    pub fn rare(&self) -> &NodeRare {
        self.rare.as_deref().unwrap_or(&NO_NODE_RARE)
    }

    /// The attribute named `name`.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name() == name)
    }

    /// Every subgraph held by this node's attributes.
    pub fn subgraphs(&self) -> impl Iterator<Item = GraphId> + '_ {
        self.attributes.iter().flat_map(Attribute::subgraphs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_intern_once_including_the_empty_name() {
        let mut g = Graph::new(GraphOwner::Main);
        let x = g.intern("x");
        let none = g.intern("");
        assert_eq!(g.intern("x"), x);
        assert_eq!(g.intern(""), none);
        assert_ne!(x, none);
        assert_eq!(g.value_name(x), "x");
        assert_eq!(g.value_named("y"), None);
    }

    #[test]
    fn the_default_domain_has_two_spellings() {
        let node = |domain: Option<&str>| Node { domain: domain.map(str::to_string), ..Node::default() };
        assert_eq!(node(None).domain(), "");
        assert_eq!(node(Some("ai.onnx")).domain(), "");
        assert_eq!(node(Some("com.microsoft")).domain(), "com.microsoft");
    }
}
