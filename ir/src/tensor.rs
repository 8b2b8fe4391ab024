//! Tensors: element type, dims, and data that is inline, in typed lists, or in
//! an external file.
//!
//! Inline bytes are [`Bytes`] slices of the buffer the model was read from
//! (normally a memory map), so importing a model copies no weights. External
//! data is described by an [`ExternalData`] whose file was checked at import
//! time but is only mapped when someone asks for the bytes.

use crate::elem_type::ElemType;
use crate::model::StringEntry;
use bytes::Bytes;
use std::path::PathBuf;

/// A dense tensor, with every field an ONNX `TensorProto` may carry. The
/// fields few tensors fill sit apart, boxed, in [`TensorRare`]: a graph may
/// hold a tensor in each of tens of thousands of `Constant` nodes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Tensor {
    /// Its name (an initializer's value name).
    pub name: Option<String>,
    /// Dims, outermost first.
    pub dims: Vec<i64>,
    /// Element type.
    pub data_type: Option<ElemType>,
    /// The inline data fields.
    pub data: TensorData,
    /// The rarely filled fields; `None` when all of them are empty (build it
    /// with [`TensorRare::boxed`] so that equal tensors compare equal).
    pub rare: Option<Box<TensorRare>>,
}

/// The fields of a tensor that few files fill.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TensorRare {
    /// The chunk of a larger tensor this one holds.
    pub segment: Option<Segment>,
    /// Documentation.
    pub doc_string: Option<String>,
    /// Free-form metadata.
    pub metadata_props: Vec<StringEntry>,
    /// The stated data location code (0 inline, 1 external), as written.
    pub data_location: Option<i32>,
    /// The external-data entries exactly as written (location, offset, ...).
    pub external_data: Vec<StringEntry>,
    /// The resolved external data, when `data_location` says EXTERNAL.
    pub external: Option<ExternalData>,
}

/// What [`Tensor::rare`] lends when a tensor has no rare field.
static NO_TENSOR_RARE: TensorRare = TensorRare {
    segment: None,
    doc_string: None,
    metadata_props: Vec::new(),
    data_location: None,
    external_data: Vec::new(),
    external: None,
};

impl TensorRare {
    /// Boxed, or `None` when every field is empty.
    pub fn boxed(self) -> Option<Box<TensorRare>> {
        (self != NO_TENSOR_RARE).then(|| Box::new(self))
    }
}

/// The inline data fields of a tensor. Normally only one is used.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TensorData {
    /// Little-endian packed elements.
    pub raw: Option<Bytes>,
    /// `float_data` (also float16/bfloat16/float8 bit patterns and complex64 parts).
    pub floats: Vec<f32>,
    /// `int32_data` (also smaller integer, bool and 16-bit float types).
    pub int32s: Vec<i32>,
    /// `string_data`.
    pub strings: Vec<Bytes>,
    /// `int64_data`.
    pub int64s: Vec<i64>,
    /// `double_data` (also complex128 parts).
    pub doubles: Vec<f64>,
    /// `uint64_data` (also uint32).
    pub uint64s: Vec<u64>,
}

/// The range of a segmented tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Segment {
    /// First element index.
    pub begin: Option<i64>,
    /// One past the last element index.
    pub end: Option<i64>,
}

/// Where a tensor's bytes live outside the model file, checked at import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalData {
    /// The `location` entry as written: a path relative to the model's directory.
    pub location: String,
    /// The file it names, resolved against the model's directory.
    pub path: PathBuf,
    /// Byte offset of the data in the file.
    pub offset: u64,
    /// Byte length of the data.
    pub length: u64,
}

/// A sparse tensor in coordinate form.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SparseTensor {
    /// The non-zero values.
    pub values: Option<Tensor>,
    /// Their coordinates.
    pub indices: Option<Tensor>,
    /// The dense shape.
    pub dims: Vec<i64>,
}

/// Quantization parameters attached to a value by name.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TensorAnnotation {
    /// The annotated value.
    pub tensor_name: Option<String>,
    /// Parameter-role to tensor-name pairs.
    pub quant_parameter_tensor_names: Vec<StringEntry>,
}

impl Tensor {
    /// The rarely filled fields, all empty when the tensor has none.
    pub fn rare(&self) -> &TensorRare {
        self.rare.as_deref().unwrap_or(&NO_TENSOR_RARE)
    }

    /// The resolved external data, when the tensor's bytes live in another file.
    pub fn external(&self) -> Option<&ExternalData> {
        self.rare().external.as_ref()
    }

    /// The element type, `Undefined` when unset.
    pub fn elem_type(&self) -> ElemType {
        self.data_type.unwrap_or(ElemType::Undefined)
    }

    /// The number of elements the dims describe; `None` when a dim is negative
    /// or the product overflows.
    pub fn element_count(&self) -> Option<u64> {
        self.dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }

    /// Bytes of data this tensor holds, wherever they live (external length,
    /// raw bytes, or the typed lists at their in-memory width).
    pub fn data_bytes(&self) -> u64 {
        if let Some(ext) = self.external() {
            return ext.length;
        }
        let d = &self.data;
        let raw = d.raw.as_ref().map_or(0, |r| r.len() as u64);
        let strings: u64 = d.strings.iter().map(|s| s.len() as u64).sum();
        raw + strings
            + 4 * (d.floats.len() + d.int32s.len()) as u64
            + 8 * (d.int64s.len() + d.doubles.len() + d.uint64s.len()) as u64
    }

    /// Whether the data lives in an external file.
    pub fn is_external(&self) -> bool {
        self.external().is_some()
    }
}

impl ExternalData {
    /// Maps the file and returns the tensor's bytes, without copying them.
    pub fn load(&self) -> std::io::Result<Bytes> {
        let file = std::fs::File::open(&self.path)?;
        let file_len = file.metadata()?.len();
        let end = self.offset.checked_add(self.length).filter(|&end| end <= file_len).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "external data range {}..+{} lies past the end of {} ({} bytes)",
                    self.offset,
                    self.length,
                    self.path.display(),
                    file_len
                ),
            )
        })?;
        if self.length == 0 {
            return Ok(Bytes::new());
        }
        // SAFETY: the map is read-only; like every tool that maps model files,
        // we rely on no other process truncating the file while it is in use.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        let start = usize::try_from(self.offset).map_err(std::io::Error::other)?;
        let end = usize::try_from(end).map_err(std::io::Error::other)?;
        Ok(Bytes::from_owner(map).slice(start..end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn element_counts_reject_negative_dims_and_overflow() {
        let t = |dims: Vec<i64>| Tensor { dims, ..Tensor::default() };
        assert_eq!(t(vec![]).element_count(), Some(1));
        assert_eq!(t(vec![2, 3]).element_count(), Some(6));
        assert_eq!(t(vec![2, -1]).element_count(), None);
        assert_eq!(t(vec![i64::MAX, i64::MAX, 4]).element_count(), None);
    }

    #[test]
    fn external_data_loads_its_range_and_rejects_one_past_the_end() {
        let mut file = tempfile_in_target();
        file.1.write_all(b"0123456789").unwrap();
        let ext = |offset, length| ExternalData { location: "w.bin".into(), path: file.0.clone(), offset, length };
        assert_eq!(&ext(2, 3).load().unwrap()[..], b"234");
        assert!(ext(8, 3).load().is_err());
        assert!(ext(u64::MAX, 3).load().is_err());
        std::fs::remove_file(&file.0).unwrap();
    }

    fn tempfile_in_target() -> (PathBuf, std::fs::File) {
        let path = std::env::temp_dir().join(format!("diamond-ir-ext-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        (path, file)
    }
}
