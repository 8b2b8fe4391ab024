//! Reading a TorchScript file into a model: a `.pt` archive (zip) or an IR
//! text dump, told apart by their first bytes, and an ONNX file otherwise.

use super::archive::Archive;
use super::code::parser::parse_file;
use super::lower::{irgraph::lower_ir, lower_archive, InputShape};
use crate::onnx::MappedFile;
use crate::ImportError;
use diamond_ir::Model;
use std::collections::HashMap;
use std::path::Path;

/// What a model file holds, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A zip: a TorchScript archive (or something pretending to be one).
    Archive,
    /// TorchScript IR text: `graph(...`.
    IrText,
    /// Anything else: read as ONNX protobuf.
    Onnx,
}

/// Sniffs the format of the file at `path` (an unreadable file is `Onnx`,
/// whose reader reports why).
pub fn sniff(path: &Path) -> Format {
    use std::io::Read;
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    let head = &head[..n];
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Format::Archive;
    }
    let text = String::from_utf8_lossy(head);
    if text.trim_start().starts_with("graph(") {
        return Format::IrText;
    }
    Format::Onnx
}

/// Reads any model diamond knows: ONNX, a TorchScript archive or TorchScript
/// IR text. `shapes` give graph-input shapes to TorchScript inputs.
pub fn load_any(path: &Path, shapes: &[InputShape]) -> Result<Model, ImportError> {
    match sniff(path) {
        Format::Archive => load_archive(path, shapes),
        Format::IrText => load_ir_text(path, shapes),
        Format::Onnx => crate::onnx::load_model(path),
    }
}

/// [`load_any`], with an ONNX file's map, for a caller that reads few of
/// its bytes after the import and gives its pages back (`check`; see
/// [`crate::onnx::load_model_mapped`]). TorchScript files are read, not mapped.
pub fn load_any_mapped(path: &Path, shapes: &[InputShape]) -> Result<(Model, Option<MappedFile>), ImportError> {
    match sniff(path) {
        Format::Onnx => crate::onnx::load_model_mapped(path).map(|(model, file)| (model, Some(file))),
        _ => load_any(path, shapes).map(|model| (model, None)),
    }
}

/// Reads a `.pt` TorchScript archive and lowers its module to ONNX.
pub fn load_archive(path: &Path, shapes: &[InputShape]) -> Result<Model, ImportError> {
    let archive = Archive::open(path)?;
    let mut files = HashMap::new();
    for (name, text) in archive.code_files() {
        let file = parse_file(name, text).map_err(|e| torch_error(path, e.to_string()))?;
        files.insert(name.clone(), file);
    }
    lower_archive(&archive, &files, shapes).map_err(|e| torch_error(path, e.to_string()))
}

/// Reads a TorchScript IR text file and lowers it to ONNX.
pub fn load_ir_text(path: &Path, shapes: &[InputShape]) -> Result<Model, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io { path: path.to_path_buf(), source })?;
    let shown = path.display().to_string();
    // Locations inside the file read `name.txt:12`; the error names the path once.
    let name = path.file_name().map_or(shown.clone(), |n| n.to_string_lossy().into_owned());
    let graph = super::irtext::parse_ir(&name, &text).map_err(|e| torch_error(path, e.to_string()))?;
    lower_ir(&name, &graph, shapes).map_err(|e| torch_error(path, e.to_string()))
}

fn torch_error(path: &Path, problem: String) -> ImportError {
    ImportError::TorchScript { path: path.to_path_buf(), problem }
}
