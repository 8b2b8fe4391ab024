//! Values in and out of a model: the runtime's [`Value`] (a tensor, a
//! sequence, a map or an optional) and [`Tensor`], and the file formats
//! they are read from and written to — NumPy `.npy` ([`npy`]) and ONNX's
//! `TensorProto` / `SequenceProto` / `MapProto` / `OptionalProto` `.pb`
//! files ([`read_value_file`], [`read_tensor_file`]).
//!
//! ```
//! use diamond::values::{npy, Tensor};
//! let t = Tensor::from_i64s(vec![1, 2, 3]);
//! let bytes = npy::encode_npy(&t).unwrap();
//! let back = diamond::values::decode_npy(bytes.into(), std::path::Path::new("t.npy")).unwrap();
//! assert_eq!(back.dims, [3]);
//! ```

pub use diamond_importers::npy::decode_npy;
pub use diamond_importers::tensor_file::read_tensor_file;
pub use diamond_importers::value_file::{read_value_file, stored_name, Kind, StoredValue};
pub use diamond_runtime::npy;
pub use diamond_runtime::{Data, MapValue, Scalar, SplitMix64, Tensor, Value};

/// The name a report and `.npy` header give an element type: `float32`,
/// `int64`, `bfloat16`, … (NumPy's names where NumPy has the type).
pub fn dtype_name(elem: diamond_ir::ElemType) -> &'static str {
    diamond_infer::graph::report_json_dtype(elem)
}
