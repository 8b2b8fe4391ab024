//! Converting decoded ONNX messages into the IR, field for field.
//!
//! Every optional field keeps its presence and every repeated field its order,
//! so that `diamond-exporters` can write back a message equal to the one read.
//! Subgraphs are pushed into the model's graph arena as they are met. The
//! conversion of one message at a time ([`Converter`]'s pieces) is shared by
//! the streaming decoder (`stream.rs`), which hands it each graph entry as it
//! decodes it, and by [`convert_model`], which takes a whole decoded
//! `ModelProto`; both convert in the same order, so values and graphs get the
//! same ids either way.

use super::external;
use crate::error::ImportError;
use diamond_ir as ir;
use diamond_ir::entity::EntityId;
use diamond_ir::{ElemType, GraphId, GraphOwner, Model};
use diamond_onnx_proto as pb;
use std::collections::HashSet;
use std::path::Path;

/// The state of one model's conversion.
pub(super) struct Converter<'a> {
    model: Model,
    path: &'a Path,
    base_dir: &'a Path,
}

/// Which list of a graph a declared value belongs to.
#[derive(Clone, Copy)]
pub(super) enum Declared {
    Input,
    Output,
    ValueInfo,
}

/// Converts a decoded model; `path` names it in errors, `base_dir` resolves
/// external data.
pub(super) fn convert_model(mut proto: pb::ModelProto, path: &Path, base_dir: &Path) -> Result<Model, ImportError> {
    let mut cx = Converter::new(path, base_dir);
    let graph = proto.graph.take().map(|g| cx.graph(g, GraphOwner::Main)).transpose()?;
    cx.finish(proto, graph)
}

/// Converts one decoded tensor; `path` names it in errors, `base_dir`
/// resolves external data.
pub(super) fn convert_tensor(proto: pb::TensorProto, path: &Path, base_dir: &Path) -> Result<ir::Tensor, ImportError> {
    Converter::new(path, base_dir).tensor(proto)
}

impl<'a> Converter<'a> {
    pub(super) fn new(path: &'a Path, base_dir: &'a Path) -> Self {
        Converter { model: Model::default(), path, base_dir }
    }

    /// The model around its converted main graph: training graphs and
    /// functions (whose graphs get ids after the main graph's), then the
    /// header fields. `proto.graph` is not read.
    pub(super) fn finish(mut self, proto: pb::ModelProto, graph: Option<GraphId>) -> Result<Model, ImportError> {
        let training_info = proto.training_info.into_iter().map(|t| self.training_info(t)).collect::<Result<_, _>>()?;
        let functions = proto.functions.into_iter().map(|f| self.function(f)).collect::<Result<_, _>>()?;
        Ok(Model {
            ir_version: proto.ir_version,
            opset_imports: proto.opset_import.into_iter().map(opset).collect(),
            producer_name: proto.producer_name,
            producer_version: proto.producer_version,
            domain: proto.domain,
            model_version: proto.model_version,
            doc_string: proto.doc_string,
            graph,
            metadata_props: entries(proto.metadata_props),
            training_info,
            functions,
            configurations: proto.configuration.into_iter().map(device_configuration).collect(),
            graphs: self.model.graphs,
        })
    }

    fn graph(&mut self, mut proto: pb::GraphProto, owner: GraphOwner) -> Result<GraphId, ImportError> {
        let (id, mut graph) = self.begin_graph(owner);
        for info in std::mem::take(&mut proto.input) {
            self.declare(&mut graph, info, Declared::Input)?;
        }
        for info in std::mem::take(&mut proto.output) {
            self.declare(&mut graph, info, Declared::Output)?;
        }
        for info in std::mem::take(&mut proto.value_info) {
            self.declare(&mut graph, info, Declared::ValueInfo)?;
        }
        let mut initializer_names = HashSet::new();
        for tensor in std::mem::take(&mut proto.initializer) {
            self.add_initializer(&mut graph, tensor, &mut initializer_names)?;
        }
        for sparse in std::mem::take(&mut proto.sparse_initializer) {
            self.add_sparse_initializer(&mut graph, sparse)?;
        }
        for node in std::mem::take(&mut proto.node) {
            let node = self.node(&mut graph, node, id)?;
            graph.nodes.push(node);
        }
        self.end_graph(id, graph, proto);
        Ok(id)
    }

    /// Reserves the id of a graph about to be converted (first, so that its
    /// subgraphs get later ids) and starts it empty.
    pub(super) fn begin_graph(&mut self, owner: GraphOwner) -> (GraphId, ir::Graph) {
        (self.model.graphs.push(ir::Graph::new(owner)), ir::Graph::new(owner))
    }

    /// Stores a converted graph under its reserved id, with the fields of
    /// `rest` not yet converted: name, documentation, quantization
    /// annotations and metadata (its lists of entries are not read).
    pub(super) fn end_graph(&mut self, id: GraphId, mut graph: ir::Graph, rest: pb::GraphProto) {
        graph.name = rest.name;
        graph.doc_string = rest.doc_string;
        graph.quantization_annotations = rest.quantization_annotation.into_iter().map(annotation).collect();
        graph.metadata_props = entries(rest.metadata_props);
        self.model.graphs[id] = graph;
    }

    /// Adds a graph input, output or value_info entry, its declared shape checked.
    pub(super) fn declare(
        &self,
        graph: &mut ir::Graph,
        proto: pb::ValueInfoProto,
        list: Declared,
    ) -> Result<(), ImportError> {
        let info = value_info(graph, proto);
        self.check_declared(graph, &info)?;
        match list {
            Declared::Input => graph.inputs.push(info),
            Declared::Output => graph.outputs.push(info),
            Declared::ValueInfo => graph.value_info.push(info),
        }
        Ok(())
    }

    /// Adds an initializer; `names` holds those of the graph's earlier ones.
    pub(super) fn add_initializer(
        &mut self,
        graph: &mut ir::Graph,
        proto: pb::TensorProto,
        names: &mut HashSet<String>,
    ) -> Result<(), ImportError> {
        let tensor = self.tensor(proto)?;
        if let Some(name) = &tensor.name {
            if !names.insert(name.clone()) {
                return Err(ImportError::Invalid {
                    path: self.path.to_path_buf(),
                    problem: format!("initializer '{name}' is given twice (names are defined once)"),
                });
            }
            graph.intern(name);
        }
        graph.initializers.push(tensor);
        Ok(())
    }

    pub(super) fn add_sparse_initializer(
        &mut self,
        graph: &mut ir::Graph,
        proto: pb::SparseTensorProto,
    ) -> Result<(), ImportError> {
        let sparse = self.sparse_tensor(proto)?;
        if let Some(name) = sparse.values.as_ref().and_then(|v| v.name.as_ref()) {
            graph.intern(name);
        }
        graph.sparse_initializers.push(sparse);
        Ok(())
    }

    fn node(
        &mut self,
        graph: &mut ir::Graph,
        mut proto: pb::NodeProto,
        graph_id: GraphId,
    ) -> Result<ir::Node, ImportError> {
        let owner = attribute_owner(graph, graph_id);
        // Exactly as many as the node has: collecting in place would keep the
        // decoded list's buffer, sized for the larger protobuf messages.
        let mut attributes = Vec::with_capacity(proto.attribute.len());
        for a in std::mem::take(&mut proto.attribute) {
            attributes.push(self.attribute(a, owner)?);
        }
        Ok(node_parts(graph, proto, attributes))
    }

    fn attribute(&mut self, mut proto: pb::AttributeProto, owner: GraphOwner) -> Result<ir::Attribute, ImportError> {
        let g = proto.g.take().map(|g| self.graph(g, owner)).transpose()?;
        let graphs =
            std::mem::take(&mut proto.graphs).into_iter().map(|g| self.graph(g, owner)).collect::<Result<_, _>>()?;
        self.attribute_parts(proto, g, graphs)
    }

    /// An attribute whose graphs (`g`, `graphs`) are converted already;
    /// `proto`'s own graph fields are not read. No other field allocates a
    /// graph id, so converting the graphs first keeps the ids in file order.
    pub(super) fn attribute_parts(
        &mut self,
        proto: pb::AttributeProto,
        g: Option<GraphId>,
        graphs: Vec<GraphId>,
    ) -> Result<ir::Attribute, ImportError> {
        // The tensors are converted in field order, as the file lists them.
        let t = proto.t.map(|t| self.tensor(t).map(Box::new)).transpose()?;
        let sparse_tensor = proto.sparse_tensor.map(|s| self.sparse_tensor(s).map(Box::new)).transpose()?;
        let rare = ir::AttrRare {
            doc_string: proto.doc_string,
            sparse_tensor,
            tp: proto.tp.map(type_info),
            strings: proto.strings,
            tensors: proto.tensors.into_iter().map(|t| self.tensor(t)).collect::<Result<_, _>>()?,
            graphs,
            sparse_tensors: proto
                .sparse_tensors
                .into_iter()
                .map(|s| self.sparse_tensor(s))
                .collect::<Result<_, _>>()?,
            type_protos: proto.type_protos.into_iter().map(type_info).collect(),
        };
        Ok(ir::Attribute {
            name: proto.name,
            ref_attr_name: proto.ref_attr_name,
            attr_type: proto.r#type.map(ir::AttrType::from_code),
            f: proto.f,
            i: proto.i,
            s: proto.s,
            t,
            g,
            floats: proto.floats,
            ints: proto.ints,
            rare: rare.boxed(),
        })
    }

    fn check_declared(&self, graph: &ir::Graph, info: &ir::ValueInfo) -> Result<(), ImportError> {
        let name = info.value.map_or("(unnamed)", |v| graph.value_name(v));
        super::limits::check_declared(name, info.ty.as_ref(), self.path)
    }

    fn tensor(&mut self, proto: pb::TensorProto) -> Result<ir::Tensor, ImportError> {
        let external_data = entries(proto.external_data);
        let is_external = proto.data_location == Some(pb::tensor_proto::DataLocation::External as i32);
        let external = if is_external {
            let name = proto.name.as_deref().unwrap_or("");
            Some(external::resolve(&external_data, name, self.path, self.base_dir)?)
        } else {
            None
        };
        let tensor = ir::Tensor {
            name: proto.name,
            dims: proto.dims,
            data_type: proto.data_type.map(ElemType::from_code),
            data: ir::TensorData {
                raw: proto.raw_data.map(owned_if_small),
                floats: proto.float_data,
                int32s: proto.int32_data,
                strings: proto.string_data,
                int64s: proto.int64_data,
                doubles: proto.double_data,
                uint64s: proto.uint64_data,
            },
            rare: ir::TensorRare {
                segment: proto.segment.map(|s| ir::Segment { begin: s.begin, end: s.end }),
                doc_string: proto.doc_string,
                metadata_props: entries(proto.metadata_props),
                data_location: proto.data_location,
                external_data,
                external,
            }
            .boxed(),
        };
        super::limits::check_tensor(&tensor, self.path)?;
        Ok(tensor)
    }

    fn sparse_tensor(&mut self, proto: pb::SparseTensorProto) -> Result<ir::SparseTensor, ImportError> {
        Ok(ir::SparseTensor {
            values: proto.values.map(|t| self.tensor(t)).transpose()?,
            indices: proto.indices.map(|t| self.tensor(t)).transpose()?,
            dims: proto.dims,
        })
    }

    fn function(&mut self, proto: pb::FunctionProto) -> Result<ir::Function, ImportError> {
        let body_id = self.model.graphs.push(ir::Graph::new(GraphOwner::FunctionBody));
        let mut body = ir::Graph::new(GraphOwner::FunctionBody);
        let inputs = proto.input.iter().map(|n| body.intern(n)).collect();
        let outputs = proto.output.iter().map(|n| body.intern(n)).collect();
        for info in proto.value_info {
            let info = value_info(&mut body, info);
            body.value_info.push(info);
        }
        for node in proto.node {
            let node = self.node(&mut body, node, body_id)?;
            body.nodes.push(node);
        }
        self.model.graphs[body_id] = body;
        let detached = GraphOwner::Detached;
        Ok(ir::Function {
            name: proto.name,
            domain: proto.domain,
            overload: proto.overload,
            body: body_id,
            inputs,
            outputs,
            attribute_names: proto.attribute,
            attribute_protos: proto
                .attribute_proto
                .into_iter()
                .map(|a| self.attribute(a, detached))
                .collect::<Result<_, _>>()?,
            doc_string: proto.doc_string,
            opset_imports: proto.opset_import.into_iter().map(opset).collect(),
            metadata_props: entries(proto.metadata_props),
        })
    }

    fn training_info(&mut self, proto: pb::TrainingInfoProto) -> Result<ir::TrainingInfo, ImportError> {
        Ok(ir::TrainingInfo {
            initialization: proto.initialization.map(|g| self.graph(g, GraphOwner::Detached)).transpose()?,
            algorithm: proto.algorithm.map(|g| self.graph(g, GraphOwner::Detached)).transpose()?,
            initialization_binding: entries(proto.initialization_binding),
            update_binding: entries(proto.update_binding),
        })
    }
}

/// What the subgraphs of the next node of `graph` (the one about to be
/// pushed) belong to.
pub(super) fn attribute_owner(graph: &ir::Graph, graph_id: GraphId) -> GraphOwner {
    GraphOwner::Attribute { graph: graph_id, node: ir::NodeId::new(graph.nodes.len()) }
}

/// A node from its converted attributes and the rest of its message
/// (`proto.attribute` is not read); its operand names are interned in `graph`.
pub(super) fn node_parts(graph: &mut ir::Graph, proto: pb::NodeProto, attributes: Vec<ir::Attribute>) -> ir::Node {
    ir::Node {
        name: proto.name,
        op_type: proto.op_type,
        domain: proto.domain,
        inputs: proto.input.iter().map(|n| graph.intern(n)).collect(),
        outputs: proto.output.iter().map(|n| graph.intern(n)).collect(),
        attributes,
        rare: ir::NodeRare {
            overload: proto.overload,
            doc_string: proto.doc_string,
            metadata_props: entries(proto.metadata_props),
            device_configurations: proto.device_configurations.into_iter().map(node_device_configuration).collect(),
        }
        .boxed(),
    }
}

fn value_info(graph: &mut ir::Graph, proto: pb::ValueInfoProto) -> ir::ValueInfo {
    ir::ValueInfo {
        value: proto.name.as_deref().map(|n| graph.intern(n)),
        ty: proto.r#type.map(type_info),
        doc_string: proto.doc_string,
        metadata_props: entries(proto.metadata_props),
    }
}

fn type_info(proto: pb::TypeProto) -> ir::TypeInfo {
    use pb::type_proto::Value as V;
    let boxed = |t: Option<Box<pb::TypeProto>>| t.map(|t| Box::new(type_info(*t)));
    let value = proto.value.map(|value| match value {
        V::TensorType(t) => {
            ir::TypeValue::Tensor { elem: t.elem_type.map(ElemType::from_code), shape: t.shape.map(shape) }
        }
        V::SequenceType(s) => ir::TypeValue::Sequence(boxed(s.elem_type)),
        V::MapType(m) => ir::TypeValue::Map { key: m.key_type.map(ElemType::from_code), value: boxed(m.value_type) },
        V::OptionalType(o) => ir::TypeValue::Optional(boxed(o.elem_type)),
        V::SparseTensorType(t) => {
            ir::TypeValue::SparseTensor { elem: t.elem_type.map(ElemType::from_code), shape: t.shape.map(shape) }
        }
        V::OpaqueType(o) => ir::TypeValue::Opaque { domain: o.domain, name: o.name },
    });
    ir::TypeInfo { value, denotation: proto.denotation }
}

fn shape(proto: pb::TensorShapeProto) -> ir::TensorShape {
    use pb::tensor_shape_proto::dimension::Value as V;
    let dims = proto
        .dim
        .into_iter()
        .map(|d| ir::DimDecl {
            value: d.value.map(|v| match v {
                V::DimValue(n) => ir::DimValue::Known(n),
                V::DimParam(p) => ir::DimValue::Param(p),
            }),
            denotation: d.denotation,
        })
        .collect();
    ir::TensorShape { dims }
}

fn entries(proto: Vec<pb::StringStringEntryProto>) -> Vec<ir::StringEntry> {
    proto.into_iter().map(|e| ir::StringEntry { key: e.key, value: e.value }).collect()
}

fn opset(proto: pb::OperatorSetIdProto) -> ir::OpsetImport {
    ir::OpsetImport { domain: proto.domain, version: proto.version }
}

fn annotation(proto: pb::TensorAnnotation) -> ir::TensorAnnotation {
    ir::TensorAnnotation {
        tensor_name: proto.tensor_name,
        quant_parameter_tensor_names: entries(proto.quant_parameter_tensor_names),
    }
}

fn device_configuration(proto: pb::DeviceConfigurationProto) -> ir::DeviceConfiguration {
    ir::DeviceConfiguration { name: proto.name, num_devices: proto.num_devices, devices: proto.device }
}

fn node_device_configuration(proto: pb::NodeDeviceConfigurationProto) -> ir::NodeDeviceConfiguration {
    ir::NodeDeviceConfiguration {
        configuration_id: proto.configuration_id,
        sharding_specs: proto.sharding_spec.into_iter().map(sharding_spec).collect(),
        pipeline_stage: proto.pipeline_stage,
    }
}

fn sharding_spec(proto: pb::ShardingSpecProto) -> ir::ShardingSpec {
    use pb::simple_sharded_dim_proto::Dim as D;
    let simple = |s: pb::SimpleShardedDimProto| ir::SimpleShardedDim {
        dim: s.dim.map(|d| match d {
            D::DimValue(n) => ir::DimValue::Known(n),
            D::DimParam(p) => ir::DimValue::Param(p),
        }),
        num_shards: s.num_shards,
    };
    ir::ShardingSpec {
        tensor_name: proto.tensor_name,
        devices: proto.device,
        index_to_device_group_map: proto
            .index_to_device_group_map
            .into_iter()
            .map(|e| ir::IntListEntry { key: e.key, values: e.value })
            .collect(),
        sharded_dims: proto
            .sharded_dim
            .into_iter()
            .map(|d| ir::ShardedDim {
                axis: d.axis,
                simple_sharding: d.simple_sharding.into_iter().map(simple).collect(),
            })
            .collect(),
    }
}

/// Raw data up to this many bytes is copied out of the file's map.
const OWNED_RAW_MAX: usize = 64;

/// `raw` itself, or a copy of it when it is small: a shape, an axis list or
/// a scalar, which `check` reads after the import. The copy keeps reading
/// it from faulting the file's page back in once `check` has released the
/// map ([`super::MappedFile::release_pages`]); larger data stays a slice of
/// the map.
fn owned_if_small(raw: bytes::Bytes) -> bytes::Bytes {
    if raw.len() <= OWNED_RAW_MAX {
        bytes::Bytes::copy_from_slice(&raw)
    } else {
        raw
    }
}
