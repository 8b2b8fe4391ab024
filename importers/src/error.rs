//! The error every importer returns.

use std::path::PathBuf;

/// Why a file could not be imported. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A directory was given where a model file was expected.
    #[error("{} is a directory, not a model file", path.display())]
    IsDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// The file holds no bytes.
    #[error("{} is empty (0 bytes), not an ONNX model", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The bytes are not a protobuf `ModelProto`.
    #[error("{} is not a valid ONNX model: protobuf decoding failed: {detail}", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// The decoder's message.
        detail: String,
    },
    /// The protobuf decoded but breaks a rule of the format.
    #[error("{} is not a valid ONNX model: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the offending item.
        problem: String,
    },
    /// A tensor file (`.pb` TensorProto or `.npy`) is malformed or unsupported.
    #[error("{} is not a valid tensor file: {problem}", path.display())]
    InvalidTensor {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A tensor's external data cannot be used.
    #[error("{}: external data of tensor '{tensor}': {problem}", path.display())]
    ExternalData {
        /// The model file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        problem: String,
    },
    /// A TorchScript archive cannot be read (the error names the file).
    #[error(transparent)]
    Torch(Box<crate::torch::archive::TorchError>),
    /// TorchScript code or IR text that cannot be parsed or lowered to ONNX:
    /// a located problem, or the list of operators without a lowering.
    #[error("{}: {problem}", path.display())]
    TorchScript {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its location.
        problem: String,
    },
}
