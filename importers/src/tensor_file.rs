//! Reading one tensor from a file: a serialized ONNX `TensorProto` (`.pb`, as
//! in the ONNX backend test data) or a NumPy `.npy` array. This is what
//! `--bind` reads; the kind is chosen by the `.npy` extension.

use crate::error::ImportError;
use diamond_ir::Tensor;
use std::path::Path;

/// Reads the tensor in `path`; external data of a `.pb` tensor resolves
/// against the file's directory.
pub fn read_tensor_file(path: &Path) -> Result<Tensor, ImportError> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")) {
        return crate::npy::read_npy(path);
    }
    let bytes = crate::onnx::read_file(path)?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    crate::onnx::decode_tensor(bytes, path, &base_dir)
}
