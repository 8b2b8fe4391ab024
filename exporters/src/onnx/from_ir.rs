//! Rebuilding ONNX messages from the IR, field for field.
//!
//! The inverse of the importer's conversion: every optional field is written
//! exactly when it was read, every list in its order. Inferred shapes are not
//! written here yet; they will go into `value_info` when inference lands.

use diamond_ir as ir;
use diamond_ir::{GraphId, Model};
use diamond_onnx_proto as pb;

/// The `ModelProto` for `model`.
pub(super) fn model(model: &Model) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: model.ir_version,
        opset_import: model.opset_imports.iter().map(opset).collect(),
        producer_name: model.producer_name.clone(),
        producer_version: model.producer_version.clone(),
        domain: model.domain.clone(),
        model_version: model.model_version,
        doc_string: model.doc_string.clone(),
        graph: model.graph.map(|g| graph(model, g)),
        metadata_props: entries(&model.metadata_props),
        training_info: model.training_info.iter().map(|t| training_info(model, t)).collect(),
        functions: model.functions.iter().map(|f| function(model, f)).collect(),
        configuration: model.configurations.iter().map(device_configuration).collect(),
    }
}

fn graph(model: &Model, id: GraphId) -> pb::GraphProto {
    let g = &model.graphs[id];
    pb::GraphProto {
        node: g.nodes.values().map(|n| node(model, g, n)).collect(),
        name: g.name.clone(),
        initializer: g.initializers.iter().map(tensor).collect(),
        sparse_initializer: g.sparse_initializers.iter().map(sparse_tensor).collect(),
        doc_string: g.doc_string.clone(),
        input: g.inputs.iter().map(|v| value_info(g, v)).collect(),
        output: g.outputs.iter().map(|v| value_info(g, v)).collect(),
        value_info: g.value_info.iter().map(|v| value_info(g, v)).collect(),
        quantization_annotation: g.quantization_annotations.iter().map(annotation).collect(),
        metadata_props: entries(&g.metadata_props),
    }
}

fn names(g: &ir::Graph, ids: &[ir::ValueId]) -> Vec<String> {
    ids.iter().map(|&v| g.value_name(v).to_string()).collect()
}

fn node(model: &Model, g: &ir::Graph, n: &ir::Node) -> pb::NodeProto {
    pb::NodeProto {
        input: names(g, &n.inputs),
        output: names(g, &n.outputs),
        name: n.name.clone(),
        op_type: n.op_type.clone(),
        domain: n.domain.clone(),
        overload: n.rare().overload.clone(),
        attribute: n.attributes.iter().map(|a| attribute(model, a)).collect(),
        doc_string: n.rare().doc_string.clone(),
        metadata_props: entries(&n.rare().metadata_props),
        device_configurations: n.rare().device_configurations.iter().map(node_device_configuration).collect(),
    }
}

fn attribute(model: &Model, a: &ir::Attribute) -> pb::AttributeProto {
    let rare = a.rare();
    pb::AttributeProto {
        name: a.name.clone(),
        ref_attr_name: a.ref_attr_name.clone(),
        doc_string: rare.doc_string.clone(),
        r#type: a.attr_type.map(ir::AttrType::code),
        f: a.f,
        i: a.i,
        s: a.s.clone(),
        t: a.t.as_deref().map(tensor),
        g: a.g.map(|g| graph(model, g)),
        sparse_tensor: rare.sparse_tensor.as_deref().map(sparse_tensor),
        tp: rare.tp.as_ref().map(type_proto),
        floats: a.floats.clone(),
        ints: a.ints.clone(),
        strings: rare.strings.clone(),
        tensors: rare.tensors.iter().map(tensor).collect(),
        graphs: rare.graphs.iter().map(|&g| graph(model, g)).collect(),
        sparse_tensors: rare.sparse_tensors.iter().map(sparse_tensor).collect(),
        type_protos: rare.type_protos.iter().map(type_proto).collect(),
    }
}

fn tensor(t: &ir::Tensor) -> pb::TensorProto {
    pb::TensorProto {
        dims: t.dims.clone(),
        data_type: t.data_type.map(ir::ElemType::code),
        segment: t.rare().segment.map(|s| pb::tensor_proto::Segment { begin: s.begin, end: s.end }),
        float_data: t.data.floats.clone(),
        int32_data: t.data.int32s.clone(),
        string_data: t.data.strings.clone(),
        int64_data: t.data.int64s.clone(),
        name: t.name.clone(),
        doc_string: t.rare().doc_string.clone(),
        raw_data: t.data.raw.clone(),
        external_data: entries(&t.rare().external_data),
        data_location: t.rare().data_location,
        double_data: t.data.doubles.clone(),
        uint64_data: t.data.uint64s.clone(),
        metadata_props: entries(&t.rare().metadata_props),
    }
}

fn sparse_tensor(s: &ir::SparseTensor) -> pb::SparseTensorProto {
    pb::SparseTensorProto {
        values: s.values.as_ref().map(tensor),
        indices: s.indices.as_ref().map(tensor),
        dims: s.dims.clone(),
    }
}

fn value_info(g: &ir::Graph, v: &ir::ValueInfo) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: v.value.map(|id| g.value_name(id).to_string()),
        r#type: v.ty.as_ref().map(type_proto),
        doc_string: v.doc_string.clone(),
        metadata_props: entries(&v.metadata_props),
    }
}

fn type_proto(t: &ir::TypeInfo) -> pb::TypeProto {
    use pb::type_proto as tp;
    let boxed = |t: &Option<Box<ir::TypeInfo>>| t.as_ref().map(|t| Box::new(type_proto(t)));
    let code = |e: Option<ir::ElemType>| e.map(ir::ElemType::code);
    let value = t.value.as_ref().map(|value| match value {
        ir::TypeValue::Tensor { elem, shape: s } => {
            tp::Value::TensorType(tp::Tensor { elem_type: code(*elem), shape: s.as_ref().map(shape) })
        }
        ir::TypeValue::Sequence(inner) => tp::Value::SequenceType(Box::new(tp::Sequence { elem_type: boxed(inner) })),
        ir::TypeValue::Map { key, value } => {
            tp::Value::MapType(Box::new(tp::Map { key_type: code(*key), value_type: boxed(value) }))
        }
        ir::TypeValue::Optional(inner) => tp::Value::OptionalType(Box::new(tp::Optional { elem_type: boxed(inner) })),
        ir::TypeValue::SparseTensor { elem, shape: s } => {
            tp::Value::SparseTensorType(tp::SparseTensor { elem_type: code(*elem), shape: s.as_ref().map(shape) })
        }
        ir::TypeValue::Opaque { domain, name } => {
            tp::Value::OpaqueType(tp::Opaque { domain: domain.clone(), name: name.clone() })
        }
    });
    pb::TypeProto { value, denotation: t.denotation.clone() }
}

fn shape(s: &ir::TensorShape) -> pb::TensorShapeProto {
    use pb::tensor_shape_proto::{dimension::Value as V, Dimension};
    let dim = s
        .dims
        .iter()
        .map(|d| Dimension {
            value: d.value.as_ref().map(|v| match v {
                ir::DimValue::Known(n) => V::DimValue(*n),
                ir::DimValue::Param(p) => V::DimParam(p.clone()),
            }),
            denotation: d.denotation.clone(),
        })
        .collect();
    pb::TensorShapeProto { dim }
}

fn function(model: &Model, f: &ir::Function) -> pb::FunctionProto {
    let body = &model.graphs[f.body];
    pb::FunctionProto {
        name: f.name.clone(),
        input: names(body, &f.inputs),
        output: names(body, &f.outputs),
        attribute: f.attribute_names.clone(),
        attribute_proto: f.attribute_protos.iter().map(|a| attribute(model, a)).collect(),
        node: body.nodes.values().map(|n| node(model, body, n)).collect(),
        doc_string: f.doc_string.clone(),
        opset_import: f.opset_imports.iter().map(opset).collect(),
        domain: f.domain.clone(),
        overload: f.overload.clone(),
        value_info: body.value_info.iter().map(|v| value_info(body, v)).collect(),
        metadata_props: entries(&f.metadata_props),
    }
}

fn training_info(model: &Model, t: &ir::TrainingInfo) -> pb::TrainingInfoProto {
    pb::TrainingInfoProto {
        initialization: t.initialization.map(|g| graph(model, g)),
        algorithm: t.algorithm.map(|g| graph(model, g)),
        initialization_binding: entries(&t.initialization_binding),
        update_binding: entries(&t.update_binding),
    }
}

fn entries(e: &[ir::StringEntry]) -> Vec<pb::StringStringEntryProto> {
    e.iter().map(|e| pb::StringStringEntryProto { key: e.key.clone(), value: e.value.clone() }).collect()
}

fn opset(o: &ir::OpsetImport) -> pb::OperatorSetIdProto {
    pb::OperatorSetIdProto { domain: o.domain.clone(), version: o.version }
}

fn annotation(a: &ir::TensorAnnotation) -> pb::TensorAnnotation {
    pb::TensorAnnotation {
        tensor_name: a.tensor_name.clone(),
        quant_parameter_tensor_names: entries(&a.quant_parameter_tensor_names),
    }
}

fn device_configuration(d: &ir::DeviceConfiguration) -> pb::DeviceConfigurationProto {
    pb::DeviceConfigurationProto { name: d.name.clone(), num_devices: d.num_devices, device: d.devices.clone() }
}

fn node_device_configuration(d: &ir::NodeDeviceConfiguration) -> pb::NodeDeviceConfigurationProto {
    pb::NodeDeviceConfigurationProto {
        configuration_id: d.configuration_id.clone(),
        sharding_spec: d.sharding_specs.iter().map(sharding_spec).collect(),
        pipeline_stage: d.pipeline_stage,
    }
}

fn sharding_spec(s: &ir::ShardingSpec) -> pb::ShardingSpecProto {
    use pb::simple_sharded_dim_proto::Dim as D;
    let simple = |s: &ir::SimpleShardedDim| pb::SimpleShardedDimProto {
        dim: s.dim.as_ref().map(|d| match d {
            ir::DimValue::Known(n) => D::DimValue(*n),
            ir::DimValue::Param(p) => D::DimParam(p.clone()),
        }),
        num_shards: s.num_shards,
    };
    pb::ShardingSpecProto {
        tensor_name: s.tensor_name.clone(),
        device: s.devices.clone(),
        index_to_device_group_map: s
            .index_to_device_group_map
            .iter()
            .map(|e| pb::IntIntListEntryProto { key: e.key, value: e.values.clone() })
            .collect(),
        sharded_dim: s
            .sharded_dims
            .iter()
            .map(|d| pb::ShardedDimProto {
                axis: d.axis,
                simple_sharding: d.simple_sharding.iter().map(simple).collect(),
            })
            .collect(),
    }
}
