//! The intermediate representation every part of diamond meets in.
//!
//! Importers build a [`Model`]; inference, optimization and exporters read and
//! rewrite it. The graph lives in typed arenas ([`Arena`]) addressed by `u32`
//! ids ([`GraphId`], [`NodeId`], [`ValueId`]): no pointers between nodes, and
//! every id prints with a stable prefix (`g0`, `n3`, `v12`). The IR keeps every
//! field an ONNX file can carry — including presence of optional fields — so
//! that an import followed by an export loses nothing. Tensor bytes are
//! [`bytes::Bytes`] slices, usually of a memory-mapped file, never copies.
//!
//! The [`term`] module holds the shape vocabulary of the solver: dimensions
//! with bases, rigid symbols and size expressions, dimension and row variables,
//! and rows with a broadcast marker.
#![warn(missing_docs)]

pub mod attribute;
pub mod elem_type;
pub mod entity;
pub mod graph;
pub mod input_dims;
pub mod model;
pub mod tensor;
pub mod term;
pub mod types;

pub use attribute::{AttrRare, AttrType, AttrValue, Attribute};
pub use elem_type::ElemType;
pub use entity::{Arena, GraphId, NodeId, ValueId};
pub use graph::{Graph, GraphOwner, Node, NodeRare, Value, ValueInfo};
pub use input_dims::InputDims;
pub use model::{
    DeviceConfiguration, Function, IntListEntry, Model, NodeDeviceConfiguration, OpsetImport, ShardedDim, ShardingSpec,
    SimpleShardedDim, StringEntry, TrainingInfo,
};
pub use tensor::{ExternalData, Segment, SparseTensor, Tensor, TensorAnnotation, TensorData, TensorRare};
pub use types::{DimDecl, DimValue, TensorShape, TypeInfo, TypeValue};
