//! Resolving and checking a tensor's external-data entries.
//!
//! ONNX stores large tensors outside the model file: `location` (a path
//! relative to the model's directory), `offset` and `length` in bytes. Each
//! reference is checked when the model is imported — the path stays inside the
//! model's directory, the file exists, the range lies within it — so that a
//! later read cannot fail halfway through an export.

use crate::error::ImportError;
use diamond_ir::{ExternalData, StringEntry};
use std::path::{Component, Path};

/// Checks the external-data `entries` of tensor `tensor` and resolves them
/// against `base_dir`.
pub(super) fn resolve(
    entries: &[StringEntry],
    tensor: &str,
    model_path: &Path,
    base_dir: &Path,
) -> Result<ExternalData, ImportError> {
    let fail = |problem: String| ImportError::ExternalData {
        path: model_path.to_path_buf(),
        tensor: tensor.to_string(),
        problem,
    };
    let entry = |key: &str| entries.iter().find(|e| e.key.as_deref() == Some(key)).and_then(|e| e.value.as_deref());
    let number = |key: &str| -> Result<Option<u64>, ImportError> {
        entry(key)
            .map(|text| text.trim().parse::<u64>().map_err(|_| fail(format!("{key} '{text}' is not a byte count"))))
            .transpose()
    };
    let location = entry("location").ok_or_else(|| fail("no 'location' entry".to_string()))?;
    check_relative(location).map_err(fail)?;
    let path = base_dir.join(location);
    let metadata =
        std::fs::metadata(&path).map_err(|e| fail(format!("cannot read data file {}: {e}", path.display())))?;
    if !metadata.is_file() {
        return Err(fail(format!("data file {} is not a regular file", path.display())));
    }
    let file_len = metadata.len();
    let offset = number("offset")?.unwrap_or(0);
    if offset > file_len {
        return Err(fail(format!("offset {offset} lies past the end of {} ({file_len} bytes)", path.display())));
    }
    let length = number("length")?.unwrap_or(file_len - offset);
    if offset.checked_add(length).is_none_or(|end| end > file_len) {
        return Err(fail(format!(
            "bytes {offset}..{} lie past the end of {} ({file_len} bytes)",
            offset as u128 + length as u128,
            path.display()
        )));
    }
    Ok(ExternalData { location: location.to_string(), path, offset, length })
}

/// A location must be a relative path that stays inside the model's directory.
fn check_relative(location: &str) -> Result<(), String> {
    let mut depth = 0i32;
    for component in Path::new(location).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("location '{location}' is absolute; it must be relative to the model's directory"))
            }
        }
        if depth < 0 {
            return Err(format!("location '{location}' escapes the model's directory"));
        }
    }
    if depth == 0 {
        return Err(format!("location '{location}' names no file"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_must_stay_inside_the_model_directory() {
        assert!(check_relative("weights.bin").is_ok());
        assert!(check_relative("./data/w.bin").is_ok());
        assert!(check_relative("data/../w.bin").is_ok());
        assert!(check_relative("../w.bin").is_err());
        assert!(check_relative("data/../../w.bin").is_err());
        assert!(check_relative("/etc/passwd").is_err());
        assert!(check_relative("").is_err());
    }
}
