//! ONNX: [`Model`] → protobuf bytes and files.
//!
//! [`encode_model`] rebuilds the protobuf messages from the IR field for field
//! (`from_ir`). [`write_model`] also writes the external data the model's
//! tensors reference, next to the output file, keeping every tensor's
//! `location`, `offset` and `length` so that the written model states exactly
//! what the read one did.

mod external;
mod from_ir;
mod stream;

use diamond_ir::Model;
use prost::Message;
use std::path::{Path, PathBuf};

/// The largest message protobuf implementations accept.
pub const MAX_PROTOBUF_BYTES: u64 = (1 << 31) - 1;

/// Why a model could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The model file or an external data file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The source of a tensor's external data could not be read.
    #[error("cannot read external data {} for {}: {source}", source_path.display(), path.display())]
    ExternalSource {
        /// The output data file.
        path: PathBuf,
        /// The input data file.
        source_path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The serialized model would exceed the protobuf size limit.
    #[error(
        "the model serializes to {size} bytes, over protobuf's 2 GiB limit; store its large tensors as external data"
    )]
    TooLarge {
        /// The would-be size.
        size: u64,
    },
}

/// What [`write_model`] wrote.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Bytes in the model file.
    pub model_bytes: u64,
    /// External data files written (those already in place are not rewritten).
    pub data_files: Vec<PathBuf>,
    /// Bytes of tensor data copied into them.
    pub data_bytes: u64,
}

/// Serializes `model` to ONNX protobuf bytes.
pub fn encode_model(model: &Model) -> Result<Vec<u8>, ExportError> {
    let proto = from_ir::model(model);
    let size = proto.encoded_len() as u64;
    if size > MAX_PROTOBUF_BYTES {
        return Err(ExportError::TooLarge { size });
    }
    Ok(proto.encode_to_vec())
}

/// Writes `model` to `path`, and the external data its tensors reference to
/// the same relative locations beside it. Every file is written atomically;
/// data files go first, so a model file never points at missing data.
///
/// The protobuf is encoded straight into the file (`stream`): no buffer of
/// the model's size is built.
pub fn write_model(model: &Model, path: &Path) -> Result<WriteSummary, ExportError> {
    let proto = from_ir::model(model);
    let size = proto.encoded_len() as u64;
    if size > MAX_PROTOBUF_BYTES {
        return Err(ExportError::TooLarge { size });
    }
    let out_dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (data_files, data_bytes) = external::write_external_data(model, out_dir)?;
    let mut model_bytes = 0;
    crate::atomic::write_with(path, |file| {
        let mut out = stream::StreamBuf::new(file);
        proto.encode(&mut out).map_err(std::io::Error::other)?;
        model_bytes = out.finish()?;
        Ok(())
    })
    .map_err(|source| ExportError::Io { path: path.to_path_buf(), source })?;
    Ok(WriteSummary { model_bytes, data_files, data_bytes })
}
