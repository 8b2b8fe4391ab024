//! ONNX: protobuf bytes → [`Model`].
//!
//! [`load_model`] memory-maps the file and decodes it with prost into types
//! whose `bytes` fields are slices of that map, converting the messages to
//! the IR (`to_ir`). The graphs stream (`stream.rs`): each node,
//! initializer and declared value is decoded and converted alone, so a large
//! graph's messages are never all in memory; a file the streaming decoder
//! refuses is decoded again whole ([`decode_model_whole`]), which words the
//! error. Structural rules the rest of diamond relies on (a
//! graph exists, opsets are declared, external data stays inside the model's
//! directory and within its file) are checked here, so that later stages may
//! assume them.

mod external;
mod limits;
mod mapped;
mod stream;
mod to_ir;
mod wire;

use crate::error::ImportError;
use bytes::Bytes;
use diamond_ir::Model;
use diamond_onnx_proto::ModelProto;
use prost::Message;
use std::path::{Path, PathBuf};

pub use mapped::MappedFile;

/// Reads the ONNX model at `path`. External data is resolved against the
/// file's directory and checked, but not read.
pub fn load_model(path: &Path) -> Result<Model, ImportError> {
    let bytes = read_file(path)?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    decode_model(bytes, path, &base_dir)
}

/// [`load_model`], with the file's map, for a caller that reads few of its
/// bytes afterwards and gives its pages back ([`MappedFile::release_pages`]):
/// `check`. The model's tensors still borrow the map; what is read again
/// is faulted in again. Raw data of at most 64 bytes (shapes, axes,
/// scalars) is copied out of the map at import, so reading it does not.
pub fn load_model_mapped(path: &Path) -> Result<(Model, MappedFile), ImportError> {
    let file = MappedFile::open(path)?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let model = decode_model(file.bytes(), path, &base_dir)?;
    Ok((model, file))
}

/// Decodes ONNX bytes read from `path` (used in messages), resolving external
/// data against `base_dir`.
pub fn decode_model(bytes: Bytes, path: &Path, base_dir: &Path) -> Result<Model, ImportError> {
    if bytes.is_empty() {
        return Err(ImportError::Empty { path: path.to_path_buf() });
    }
    stream::decode_model(bytes.clone(), path, base_dir).or_else(|_refused| decode_model_whole(bytes, path, base_dir))
}

/// [`decode_model`] by the whole `ModelProto`: prost decodes every message
/// of the file, then they are converted. It gives the same model and the
/// same errors (which it words) in more time and memory; the streaming
/// decoder falls back on it for files it refuses, and the tests hold the
/// two to each other.
pub fn decode_model_whole(bytes: Bytes, path: &Path, base_dir: &Path) -> Result<Model, ImportError> {
    if bytes.is_empty() {
        return Err(ImportError::Empty { path: path.to_path_buf() });
    }
    let proto = ModelProto::decode(bytes)
        .map_err(|e| ImportError::Decode { path: path.to_path_buf(), detail: decode_detail(&e) })?;
    check_header(proto.ir_version, proto.graph.is_some(), proto.opset_import.len(), path)?;
    to_ir::convert_model(proto, path, base_dir)
}

/// Decodes a serialized `TensorProto` read from `path` and checks that its
/// data matches its element type and dims.
pub fn decode_tensor(bytes: Bytes, path: &Path, base_dir: &Path) -> Result<diamond_ir::Tensor, ImportError> {
    let fail = |problem: String| ImportError::InvalidTensor { path: path.to_path_buf(), problem };
    if bytes.is_empty() {
        return Err(fail("the file is empty".into()));
    }
    let proto =
        diamond_onnx_proto::TensorProto::decode(bytes).map_err(|e| fail(format!("protobuf decoding failed: {e}")))?;
    let tensor = to_ir::convert_tensor(proto, path, base_dir)?;
    check_tensor(&tensor).map_err(fail)?;
    Ok(tensor)
}

/// A tensor's element type is known and its inline data fits its dims.
fn check_tensor(tensor: &diamond_ir::Tensor) -> Result<(), String> {
    use diamond_ir::ElemType;
    let elem = tensor.elem_type();
    if matches!(elem, ElemType::Undefined | ElemType::Unknown(_)) {
        return Err(format!("element type {elem} is not a tensor element type"));
    }
    let count = tensor.element_count().ok_or_else(|| format!("dims {:?} are negative or too large", tensor.dims))?;
    let expected = elem.raw_size(count);
    let have = match (&tensor.data.raw, tensor.external()) {
        (Some(raw), _) => Some(raw.len() as u64),
        (None, Some(ext)) => Some(ext.length),
        (None, None) => None,
    };
    if let (Some(expected), Some(have)) = (expected, have) {
        if expected != have {
            return Err(format!("dims {:?} of {elem} need {expected} bytes of data but it holds {have}", tensor.dims));
        }
    }
    Ok(())
}

/// Maps a file into memory (copying nothing), after checking it is a file.
pub fn read_file(path: &Path) -> Result<Bytes, ImportError> {
    MappedFile::open(path).map(|file| file.bytes())
}

/// The model's header rules: an IR version, a graph, and operator sets
/// where the IR version requires them.
fn check_header(ir_version: Option<i64>, has_graph: bool, opsets: usize, path: &Path) -> Result<(), ImportError> {
    let invalid = |problem: &str| ImportError::Invalid { path: PathBuf::from(path), problem: problem.to_string() };
    let ir_version = ir_version.ok_or_else(|| invalid("the model states no ir_version (field 1)"))?;
    if ir_version < 1 {
        return Err(invalid(&format!("ir_version {ir_version} is not a valid IR version")));
    }
    if !has_graph {
        return Err(invalid("the model has no graph (field 7)"));
    }
    if ir_version >= 3 && opsets == 0 {
        return Err(invalid(&format!(
            "the model imports no operator set (opset_import, field 8), which IR version {ir_version} requires"
        )));
    }
    Ok(())
}

/// prost's message, shortened where it lists a path through a hundred
/// nested messages: nesting past its recursion limit (100 messages, e.g.
/// subgraphs inside subgraphs) is named as such.
fn decode_detail(e: &prost::DecodeError) -> String {
    let text = e.to_string();
    if text.ends_with("recursion limit reached") {
        return "messages nest deeper than the decoder's limit of 100 (subgraphs inside subgraphs, or a corrupt file)"
            .to_string();
    }
    text
}
