//! TorchScript `.pt` archives (what `torch.jit.save` writes): the zip, its
//! entries and storages, and its pickles decoded into [`TsValue`]s.
//!
//! An archive keeps every entry under one root folder (its name varies:
//! the file's stem, or `archive`). [`Archive::open`] maps the file once,
//! lists and checks every entry (paths that escape, zip bombs), tells a
//! TorchScript archive from a plain `torch.save` checkpoint or the legacy
//! `model.json` format, and decodes `data.pkl` (the module tree),
//! `constants.pkl`, `traced_inputs.pkl` and the `code/**.py` sources. The
//! storages (`data/N`, `constants/N`) stay in the file: [`Archive::storage`]
//! hands out slices of the map for stored (uncompressed) entries, which is how
//! torch writes them, and reads deflated ones into memory within limits.

use crate::error::ImportError;
use crate::torch::pickle::{self, Call, PickleError, PyValue};
use crate::torch::values::{StoredTensor, TsObject, TsValue};
use bytes::Bytes;
use diamond_ir::ElemType;
use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use zip::{CompressionMethod, ZipArchive};

/// Entries bigger than this must not claim more than [`MAX_COMPRESSION_RATIO`].
pub const RATIO_CHECK_MIN_SIZE: u64 = 1 << 20;
/// The highest uncompressed/compressed size ratio accepted for big entries.
pub const MAX_COMPRESSION_RATIO: u64 = 200;
/// The most uncompressed bytes all entries together may declare.
pub const MAX_TOTAL_UNCOMPRESSED: u64 = 16 << 30;
/// The largest deflated entry read into memory.
pub const MAX_INFLATED_ENTRY: u64 = 1 << 30;
/// The most entries an archive may have.
pub const MAX_ENTRIES: usize = 1 << 20;
/// The largest tensor [`Archive::storage`] copies out of a non-contiguous view.
pub const MAX_MATERIALIZED_BYTES: u64 = 1 << 30;

/// A TorchScript archive that could not be read: the file and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct TorchError {
    /// The archive.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: TorchProblem,
}

/// What is wrong with a TorchScript archive.
#[derive(Debug, thiserror::Error)]
pub enum TorchProblem {
    /// The zip's central directory cannot be read.
    #[error("not a zip archive or truncated: {0}")]
    NotZip(String),
    /// A zip holding `data.pkl` but no `constants.pkl`.
    #[error(
        "a plain torch.save checkpoint (data.pkl without constants.pkl or code/), not a TorchScript \
         archive; save the module with torch.jit.save after torch.jit.trace or torch.jit.script"
    )]
    PlainCheckpoint,
    /// The pre-1.4 format with `model.json`.
    #[error(
        "the legacy TorchScript format (model.json, PyTorch before 1.4) is not supported; \
         load it and save it again with a recent PyTorch"
    )]
    LegacyFormat,
    /// A zip that is neither TorchScript nor a known other format.
    #[error("not a TorchScript archive: {0}")]
    NotTorchScript(String),
    /// An entry name with `..`, an absolute path or a backslash.
    #[error("zip entry path escapes the archive: {0}")]
    PathEscapes(String),
    /// Sizes that a zip bomb would declare.
    #[error("zip bomb guard: {0}")]
    ZipBomb(String),
    /// A pickle that cannot be read.
    #[error("{entry}: {source}")]
    Pickle {
        /// The entry, relative to the root (`data.pkl`).
        entry: String,
        /// The reader's error.
        source: PickleError,
    },
    /// An entry that cannot be read or does not mean what it must.
    #[error("{entry}: {problem}")]
    Entry {
        /// The entry, relative to the root.
        entry: String,
        /// What is wrong.
        problem: String,
    },
    /// A tensor whose storage is missing, too small or unusable.
    #[error("tensor storage {entry} (key '{key}'): {problem}")]
    Storage {
        /// The storage's key in the pickle.
        key: String,
        /// The entry it lives in, relative to the root (`data/0`).
        entry: String,
        /// What is wrong.
        problem: String,
    },
}

impl From<TorchError> for ImportError {
    fn from(error: TorchError) -> ImportError {
        ImportError::Torch(Box::new(error))
    }
}

/// An open TorchScript archive: its decoded pickles and code, and the
/// mapped file its storages are sliced from.
#[derive(Debug)]
pub struct Archive {
    path: PathBuf,
    entries: Entries,
    data: TsObject,
    constants: Vec<TsValue>,
    traced_inputs: Option<TsValue>,
    code_files: Vec<(String, String)>,
    version: Option<i64>,
}

impl Archive {
    /// Opens, checks and decodes the archive at `path`. Every tensor of
    /// `data.pkl` and `constants.pkl` is checked to have a storage entry big
    /// enough for it; the storages themselves are not read.
    pub fn open(path: &Path) -> Result<Archive, ImportError> {
        let file = crate::onnx::read_file(path)?;
        let fail = |problem| TorchError { path: path.to_path_buf(), problem };
        let entries = Entries::list(file).map_err(fail)?;
        let archive = Archive::decode(path, entries).map_err(fail)?;
        archive.check_storages(archive.data_tensors()).map_err(fail)?;
        Ok(archive)
    }

    fn decode(path: &Path, entries: Entries) -> Result<Archive, TorchProblem> {
        check_format(&entries)?;
        check_byte_order(&entries)?;
        let version = read_version(&entries)?;
        let code_files = read_code_files(&entries)?;
        let data = match decode_pickle(&entries, "data.pkl", StorageFolder::Data)? {
            TsValue::Object(object) => object,
            other => return Err(entry_problem("data.pkl", format!("holds {}, not a module object", kind_of(&other)))),
        };
        let constants = match decode_pickle(&entries, "constants.pkl", StorageFolder::Constants)? {
            TsValue::Tuple(items) => items,
            other => return Err(entry_problem("constants.pkl", format!("holds {}, not a tuple", kind_of(&other)))),
        };
        let traced_inputs = match entries.get("traced_inputs.pkl") {
            Some(_) => Some(decode_pickle(&entries, "traced_inputs.pkl", StorageFolder::TracedInputs)?),
            None => None,
        };
        Ok(Archive { path: path.to_path_buf(), entries, data, constants, traced_inputs, code_files, version })
    }

    /// The file the archive was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The root folder every entry sits under.
    pub fn root(&self) -> &str {
        &self.entries.root
    }

    /// `data.pkl`'s root module object.
    pub fn data(&self) -> &TsObject {
        &self.data
    }

    /// The values of the `constants.pkl` tuple (tensors there have
    /// [`StoredTensor::constant`] set and live under `constants/`).
    pub fn constants(&self) -> &[TsValue] {
        &self.constants
    }

    /// `traced_inputs.pkl` (PyTorch 2.x traces), usually
    /// `{"forward": [tensor, ...]}`. Its tensors' keys carry their folder
    /// (`traced_inputs/0`) so that [`Archive::storage`] looks in the right
    /// place; torch writes those storages empty, so only their element types
    /// and sizes are of use, and they are not checked on open.
    pub fn traced_inputs(&self) -> Option<&TsValue> {
        self.traced_inputs.as_ref()
    }

    /// The TorchScript source of every class, as (path relative to the root,
    /// text) pairs sorted by path: `("code/__torch__/torch/nn/modules/conv.py", ..)`.
    pub fn code_files(&self) -> &[(String, String)] {
        &self.code_files
    }

    /// The code file defining the class with qualified name `qualified`:
    /// `__torch__.torch.nn.modules.conv.Conv2d` is defined in
    /// `code/__torch__/torch/nn/modules/conv.py`, `__torch__.Block` in
    /// `code/__torch__.py`.
    pub fn code_for_class(&self, qualified: &str) -> Option<&(String, String)> {
        let (module, _class) = qualified.rsplit_once('.')?;
        let wanted = format!("code/{}.py", module.replace('.', "/"));
        let index = self.code_files.binary_search_by(|(path, _)| path.as_str().cmp(&wanted)).ok()?;
        self.code_files.get(index)
    }

    /// The archive's format version (`version` or `.data/version`).
    pub fn version(&self) -> Option<i64> {
        self.version
    }

    /// The bytes of `tensor`'s elements, row-major: for a contiguous view
    /// (the usual case) exactly the slice `offset*size .. (offset+numel)*size`
    /// of its storage, borrowed from the mapped file when the entry is stored
    /// uncompressed. A non-contiguous view (a transpose, an expand) is copied
    /// into row-major order, up to [`MAX_MATERIALIZED_BYTES`].
    pub fn storage(&self, tensor: &StoredTensor) -> Result<Bytes, ImportError> {
        self.storage_bytes(tensor).map_err(|problem| ImportError::from(TorchError { path: self.path.clone(), problem }))
    }

    fn storage_bytes(&self, tensor: &StoredTensor) -> Result<Bytes, TorchProblem> {
        let layout = self.check_storage(tensor)?;
        let name = storage_entry_name(tensor);
        let storage = self.entries.read(&name)?;
        let elem_size = layout.elem_size;
        if is_contiguous(&tensor.sizes, &tensor.strides) {
            let start = tensor.offset * elem_size;
            let end = start + layout.numel * elem_size;
            return Ok(storage.slice(to_usize(start)?..to_usize(end)?));
        }
        let bytes = layout.numel.checked_mul(elem_size).filter(|&b| b <= MAX_MATERIALIZED_BYTES).ok_or_else(|| {
            storage_problem(tensor, format!(
                "a non-contiguous view of {} elements is bigger than the {MAX_MATERIALIZED_BYTES}-byte limit for copying it",
                layout.numel
            ))
        })?;
        Ok(Bytes::from(gather(&storage, tensor, to_usize(elem_size)?, to_usize(bytes)?)))
    }

    /// Checks that `tensor`'s storage entry exists, holds the storage's
    /// elements, and that the view lies inside it.
    fn check_storage(&self, tensor: &StoredTensor) -> Result<Layout, TorchProblem> {
        let name = storage_entry_name(tensor);
        let fail = |problem: String| storage_problem(tensor, problem);
        let Some(entry) = self.entries.get(&name) else {
            let full = format!("{}/{name}", self.entries.root);
            return Err(fail(format!("missing storage: the archive has no entry {full}")));
        };
        let elem_size =
            elem_size(tensor.elem).ok_or_else(|| fail(format!("element type {} has no byte size", tensor.elem)))?;
        let storage_bytes = tensor.storage_numel.checked_mul(elem_size);
        if storage_bytes.is_none_or(|needed| entry.size < needed) {
            return Err(fail(format!(
                "storage too small: the entry holds {} bytes but the pickle declares {} {} elements",
                entry.size, tensor.storage_numel, tensor.elem
            )));
        }
        let layout = view_layout(tensor).map_err(&fail)?;
        if layout.end > tensor.storage_numel {
            return Err(fail(format!(
                "storage too small: the view (offset {}, sizes {:?}, strides {:?}) reaches element {} of {}",
                tensor.offset, tensor.sizes, tensor.strides, layout.end, tensor.storage_numel
            )));
        }
        Ok(Layout { elem_size, ..layout })
    }

    /// The tensors of `data.pkl` and `constants.pkl`.
    fn data_tensors(&self) -> Vec<&StoredTensor> {
        let mut tensors = Vec::new();
        for (_, value) in &self.data.attrs {
            collect_tensors(value, &mut tensors);
        }
        for value in &self.constants {
            collect_tensors(value, &mut tensors);
        }
        tensors
    }

    fn check_storages(&self, tensors: Vec<&StoredTensor>) -> Result<(), TorchProblem> {
        tensors.into_iter().try_for_each(|tensor| self.check_storage(tensor).map(|_| ()))
    }
}

/// Where a view lies in its storage, in elements.
struct Layout {
    elem_size: u64,
    /// Elements in the view.
    numel: u64,
    /// One past the last storage element the view touches (`offset` when empty).
    end: u64,
}

/// The view's element count and extent, checking for overflow.
fn view_layout(tensor: &StoredTensor) -> Result<Layout, String> {
    if tensor.sizes.len() != tensor.strides.len() {
        return Err(format!("{} sizes but {} strides", tensor.sizes.len(), tensor.strides.len()));
    }
    let overflow = || format!("the view (sizes {:?}, strides {:?}) overflows 64 bits", tensor.sizes, tensor.strides);
    let numel = tensor.sizes.iter().try_fold(1u64, |n, &size| n.checked_mul(size)).ok_or_else(overflow)?;
    let end = if numel == 0 {
        tensor.offset
    } else {
        let last = tensor.sizes.iter().zip(&tensor.strides).try_fold(tensor.offset, |acc, (&size, &stride)| {
            (size - 1).checked_mul(stride).and_then(|step| acc.checked_add(step))
        });
        last.and_then(|last| last.checked_add(1)).ok_or_else(overflow)?
    };
    Ok(Layout { elem_size: 0, numel, end })
}

/// Whether a view is row-major contiguous (dimensions of size 1 may have any stride).
fn is_contiguous(sizes: &[u64], strides: &[u64]) -> bool {
    let mut expected = 1u64;
    for (&size, &stride) in sizes.iter().zip(strides).rev() {
        if size != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(size);
    }
    true
}

/// Copies a strided view's elements into row-major order. The view was
/// checked to lie inside `storage`.
fn gather(storage: &[u8], tensor: &StoredTensor, elem_size: usize, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    let mut index = vec![0u64; tensor.sizes.len()];
    while out.len() < bytes {
        let element = tensor.offset + index.iter().zip(&tensor.strides).map(|(i, s)| i * s).sum::<u64>();
        let start = element as usize * elem_size;
        out.extend_from_slice(&storage[start..start + elem_size]);
        advance(&mut index, &tensor.sizes);
    }
    out
}

/// Steps a row-major multi-index to the next element.
fn advance(index: &mut [u64], sizes: &[u64]) {
    for (i, &size) in index.iter_mut().zip(sizes).rev() {
        *i += 1;
        if *i < size {
            return;
        }
        *i = 0;
    }
}

fn storage_problem(tensor: &StoredTensor, problem: String) -> TorchProblem {
    TorchProblem::Storage { key: tensor.key.clone(), entry: storage_entry_name(tensor), problem }
}

/// The entry, relative to the root, holding `tensor`'s storage: `data/<key>`,
/// `constants/<key>`, or the key itself when it names its folder (traced inputs).
fn storage_entry_name(tensor: &StoredTensor) -> String {
    if tensor.constant {
        format!("constants/{}", tensor.key)
    } else if tensor.key.contains('/') {
        tensor.key.clone()
    } else {
        format!("data/{}", tensor.key)
    }
}

fn elem_size(elem: ElemType) -> Option<u64> {
    let bits = elem.bit_width()?;
    (bits % 8 == 0).then_some(u64::from(bits / 8))
}

fn to_usize(value: u64) -> Result<usize, TorchProblem> {
    usize::try_from(value).map_err(|_| TorchProblem::ZipBomb(format!("{value} bytes do not fit this machine's memory")))
}

fn collect_tensors<'v>(value: &'v TsValue, out: &mut Vec<&'v StoredTensor>) {
    match value {
        TsValue::Tensor(tensor) => out.push(tensor),
        TsValue::Tuple(items) | TsValue::List(items) => items.iter().for_each(|item| collect_tensors(item, out)),
        TsValue::Dict(pairs) => pairs.iter().for_each(|(k, v)| {
            collect_tensors(k, out);
            collect_tensors(v, out);
        }),
        TsValue::Object(object) => object.attrs.iter().for_each(|(_, v)| collect_tensors(v, out)),
        TsValue::None | TsValue::Bool(_) | TsValue::Int(_) | TsValue::Float(_) | TsValue::Str(_) => {}
    }
}

// ---- the zip ----

/// How an entry's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    Stored,
    Deflated,
}

/// One entry of the zip, located in the mapped file.
#[derive(Clone, Debug)]
struct Entry {
    /// Its index in the zip's central directory.
    index: usize,
    compression: Compression,
    /// Offset of its (compressed) bytes in the file.
    data_start: u64,
    compressed_size: u64,
    /// Its declared uncompressed size.
    size: u64,
}

/// The zip's entries under the root folder, keyed by their path relative to it.
struct Entries {
    file: Bytes,
    zip: ZipArchive<Cursor<Bytes>>,
    root: String,
    by_name: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Entries {
    /// The root and the entry names (not the file's bytes).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entries").field("root", &self.root).field("names", &self.by_name.keys()).finish()
    }
}

impl Entries {
    /// Reads the central directory of the mapped `file` and checks every entry.
    fn list(file: Bytes) -> Result<Entries, TorchProblem> {
        if file.is_empty() {
            return Err(TorchProblem::NotZip("the file is empty".into()));
        }
        let looks_like_pickle = file.first() == Some(&0x80);
        let mut zip = ZipArchive::new(Cursor::new(file.clone())).map_err(|e| {
            let hint = if looks_like_pickle { " (it starts like a pickle: a pre-1.6 torch.save file?)" } else { "" };
            TorchProblem::NotZip(format!("{e}{hint}"))
        })?;
        if zip.len() > MAX_ENTRIES {
            return Err(TorchProblem::ZipBomb(format!("{} entries, over the limit of {MAX_ENTRIES}", zip.len())));
        }
        if zip.has_duplicate_names() {
            return Err(TorchProblem::NotTorchScript("two zip entries have the same name".into()));
        }
        let mut root: Option<String> = None;
        let mut by_name = BTreeMap::new();
        let mut total: u64 = 0;
        for index in 0..zip.len() {
            let (name, entry) = read_entry(&mut zip, index, file.len() as u64)?;
            total = total.saturating_add(entry.size);
            if total > MAX_TOTAL_UNCOMPRESSED {
                return Err(TorchProblem::ZipBomb(format!(
                    "the entries declare more than {MAX_TOTAL_UNCOMPRESSED} bytes uncompressed in all (the limit)"
                )));
            }
            let root = root.get_or_insert_with(|| root_of(&name).to_string());
            if root.is_empty() {
                return Err(TorchProblem::NotTorchScript(format!(
                    "the first entry {name} is not inside a folder; a TorchScript archive keeps all entries under one"
                )));
            }
            let Some(relative) = name.strip_prefix(root.as_str()).and_then(|rest| rest.strip_prefix('/')) else {
                continue;
            };
            if !relative.is_empty() && !relative.ends_with('/') {
                by_name.insert(relative.to_string(), entry);
            }
        }
        let root = root.ok_or_else(|| TorchProblem::NotTorchScript("the zip has no entries".into()))?;
        Ok(Entries { file, zip, root, by_name })
    }

    fn get(&self, relative: &str) -> Option<&Entry> {
        self.by_name.get(relative)
    }

    /// The bytes of the entry `relative`: a slice of the map when stored, a
    /// decompressed copy (within [`MAX_INFLATED_ENTRY`]) when deflated.
    fn read(&self, relative: &str) -> Result<Bytes, TorchProblem> {
        let entry =
            self.get(relative).ok_or_else(|| entry_problem(relative, "the archive has no such entry".into()))?;
        match entry.compression {
            Compression::Stored => {
                let start = to_usize(entry.data_start)?;
                Ok(self.file.slice(start..start + to_usize(entry.size)?))
            }
            Compression::Deflated => self.inflate(relative, entry).map(Bytes::from),
        }
    }

    fn inflate(&self, relative: &str, entry: &Entry) -> Result<Vec<u8>, TorchProblem> {
        if entry.size > MAX_INFLATED_ENTRY {
            return Err(TorchProblem::ZipBomb(format!(
                "entry {relative} declares {} bytes uncompressed, over the {MAX_INFLATED_ENTRY}-byte limit for reading a deflated entry",
                entry.size
            )));
        }
        let mut zip = self.zip.clone();
        let file = zip.by_index(entry.index).map_err(|e| entry_problem(relative, format!("cannot read: {e}")))?;
        let mut out = Vec::with_capacity(to_usize(entry.size)?);
        file.take(entry.size + 1)
            .read_to_end(&mut out)
            .map_err(|e| entry_problem(relative, format!("cannot decompress: {e}")))?;
        if out.len() as u64 > entry.size {
            return Err(TorchProblem::ZipBomb(format!(
                "entry {relative} decompresses to more than its declared {} bytes",
                entry.size
            )));
        }
        if (out.len() as u64) < entry.size {
            return Err(entry_problem(
                relative,
                format!("decompresses to {} bytes, fewer than its declared {}", out.len(), entry.size),
            ));
        }
        Ok(out)
    }

    /// Reads a small text entry as UTF-8.
    fn read_text(&self, relative: &str) -> Result<String, TorchProblem> {
        let bytes = self.read(relative)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| entry_problem(relative, "is not UTF-8 text".into()))
    }
}

/// The name and location of entry `index`, after checking its path and sizes.
fn read_entry(
    zip: &mut ZipArchive<Cursor<Bytes>>,
    index: usize,
    file_len: u64,
) -> Result<(String, Entry), TorchProblem> {
    let file = zip.by_index_raw(index).map_err(|e| TorchProblem::NotZip(format!("entry {index}: {e}")))?;
    let name = std::str::from_utf8(file.name_raw())
        .map_err(|_| TorchProblem::NotZip(format!("entry {index} has a name that is not UTF-8")))?
        .to_string();
    check_entry_path(&name)?;
    if file.encrypted() {
        return Err(entry_problem(&name, "is encrypted".into()));
    }
    let compression = match file.compression() {
        CompressionMethod::Stored => Compression::Stored,
        CompressionMethod::Deflated => Compression::Deflated,
        other => {
            return Err(entry_problem(&name, format!("uses compression {other:?}; only stored and deflated are read")))
        }
    };
    let data_start =
        file.data_start().ok_or_else(|| TorchProblem::NotZip(format!("entry {name} has no local header")))?;
    let entry = Entry { index, compression, data_start, compressed_size: file.compressed_size(), size: file.size() };
    check_entry_sizes(&name, &entry, file_len)?;
    Ok((name, entry))
}

/// Rejects names that could point outside the archive's folder.
fn check_entry_path(name: &str) -> Result<(), TorchProblem> {
    let drive = name.split('/').next().is_some_and(|first| first.ends_with(':'));
    let escapes = name.starts_with('/')
        || name.contains('\\')
        || name.contains('\0')
        || drive
        || name.split('/').any(|component| component == "..");
    if escapes {
        return Err(TorchProblem::PathEscapes(name.to_string()));
    }
    Ok(())
}

/// Checks an entry's data lies in the file and its sizes are not a bomb's.
fn check_entry_sizes(name: &str, entry: &Entry, file_len: u64) -> Result<(), TorchProblem> {
    let end = entry.data_start.checked_add(entry.compressed_size);
    if end.is_none_or(|end| end > file_len) {
        return Err(TorchProblem::NotZip(format!("entry {name}'s data runs past the end of the file")));
    }
    if entry.compression == Compression::Stored && entry.size != entry.compressed_size {
        return Err(entry_problem(
            name,
            format!(
                "is stored uncompressed but declares {} bytes in {} bytes of data",
                entry.size, entry.compressed_size
            ),
        ));
    }
    if entry.size > RATIO_CHECK_MIN_SIZE && entry.size / entry.compressed_size.max(1) > MAX_COMPRESSION_RATIO {
        return Err(TorchProblem::ZipBomb(format!(
            "entry {name} declares {} bytes uncompressed from {} compressed, a compression ratio over the limit of {MAX_COMPRESSION_RATIO}",
            entry.size, entry.compressed_size
        )));
    }
    Ok(())
}

/// The first component of an entry name (empty when it has none).
fn root_of(name: &str) -> &str {
    match name.split_once('/') {
        Some((root, _)) => root,
        None => "",
    }
}

fn entry_problem(entry: &str, problem: String) -> TorchProblem {
    TorchProblem::Entry { entry: entry.to_string(), problem }
}

// ---- what the archive holds ----

/// Tells TorchScript from a plain checkpoint and the legacy format.
fn check_format(entries: &Entries) -> Result<(), TorchProblem> {
    if entries.get("model.json").is_some() {
        return Err(TorchProblem::LegacyFormat);
    }
    let has_data = entries.get("data.pkl").is_some();
    match (entries.get("constants.pkl").is_some(), has_data) {
        (true, true) => Ok(()),
        (false, true) => Err(TorchProblem::PlainCheckpoint),
        (true, false) => Err(TorchProblem::NotTorchScript(format!("{}/data.pkl is missing", entries.root))),
        (false, false) => Err(TorchProblem::NotTorchScript(format!(
            "neither {root}/constants.pkl nor {root}/data.pkl is present",
            root = entries.root
        ))),
    }
}

/// Accepts archives whose `byteorder` says little-endian, or that have none.
fn check_byte_order(entries: &Entries) -> Result<(), TorchProblem> {
    let Some(entry) = entries.get("byteorder") else {
        return Ok(());
    };
    if entry.size > 64 {
        return Err(entry_problem("byteorder", format!("is {} bytes, not a byte order", entry.size)));
    }
    match entries.read_text("byteorder")?.trim() {
        "little" => Ok(()),
        "big" => Err(entry_problem("byteorder", "says big-endian; only little-endian archives are read".into())),
        other => Err(entry_problem("byteorder", format!("holds '{other}', not 'little' or 'big'"))),
    }
}

/// The number in `version` or `.data/version`, if either exists.
fn read_version(entries: &Entries) -> Result<Option<i64>, TorchProblem> {
    let Some(name) = ["version", ".data/version"].into_iter().find(|name| entries.get(name).is_some()) else {
        return Ok(None);
    };
    if entries.get(name).is_some_and(|entry| entry.size > 64) {
        return Err(entry_problem(name, "is too long to hold a version number".into()));
    }
    let text = entries.read_text(name)?;
    let version =
        text.trim().parse().map_err(|_| entry_problem(name, format!("holds '{}', not a number", text.trim())))?;
    Ok(Some(version))
}

/// Every `code/**.py` entry as (relative path, text), sorted by path.
fn read_code_files(entries: &Entries) -> Result<Vec<(String, String)>, TorchProblem> {
    entries
        .by_name
        .keys()
        .filter(|name| name.starts_with("code/") && name.ends_with(".py"))
        .map(|name| Ok((name.clone(), entries.read_text(name)?)))
        .collect()
}

/// Which folder a pickle's storages live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StorageFolder {
    Data,
    Constants,
    TracedInputs,
}

fn decode_pickle(entries: &Entries, entry: &str, folder: StorageFolder) -> Result<TsValue, TorchProblem> {
    let bytes = entries.read(entry)?;
    let value = pickle::parse(&bytes).map_err(|source| TorchProblem::Pickle { entry: entry.to_string(), source })?;
    to_ts_value(&value, folder).map_err(|problem| entry_problem(entry, problem))
}

/// What a pickled value means in TorchScript.
fn to_ts_value(value: &PyValue, folder: StorageFolder) -> Result<TsValue, String> {
    let all = |items: &[PyValue]| items.iter().map(|item| to_ts_value(item, folder)).collect::<Result<Vec<_>, _>>();
    Ok(match value {
        PyValue::None => TsValue::None,
        PyValue::Bool(b) => TsValue::Bool(*b),
        PyValue::Int(i) => TsValue::Int(*i),
        PyValue::Float(f) => TsValue::Float(*f),
        PyValue::Str(s) => TsValue::Str(s.clone()),
        PyValue::Bytes(b) => return Err(format!("a bytes value ({} bytes) is not a TorchScript value", b.len())),
        PyValue::Tuple(items) => TsValue::Tuple(all(items)?),
        PyValue::List(items) => TsValue::List(all(items)?),
        PyValue::Dict(pairs) => TsValue::Dict(pairs_to_ts(pairs, folder)?),
        PyValue::Global { module, name } => return Err(format!("the global {module}.{name} is used as a value")),
        PyValue::PersistentId(_) => return Err("a storage is used outside a tensor".into()),
        PyValue::Call(call) => call_to_ts_value(call, folder)?,
    })
}

fn pairs_to_ts(pairs: &[(PyValue, PyValue)], folder: StorageFolder) -> Result<Vec<(TsValue, TsValue)>, String> {
    pairs.iter().map(|(k, v)| Ok((to_ts_value(k, folder)?, to_ts_value(v, folder)?))).collect()
}

/// The calls TorchScript pickles make: tensors, TorchScript objects, and
/// wrappers that only tag a value with its type.
fn call_to_ts_value(call: &Call, folder: StorageFolder) -> Result<TsValue, String> {
    let Some((module, name)) = call.global() else {
        return Err("a call of something that is not a global".into());
    };
    match (module, name) {
        ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => tensor_from_args(&call.args, folder),
        ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => match first_arg(call)? {
            PyValue::Call(inner) => call_to_ts_value(inner, folder),
            _ => Err(format!("{module}.{name} is not given a tensor")),
        },
        (
            "torch.jit._pickle",
            "restore_type_tag" | "build_intlist" | "build_tensorlist" | "build_doublelist" | "build_boollist",
        ) => to_ts_value(first_arg(call)?, folder),
        ("collections", "OrderedDict") => ordered_dict(call, folder),
        ("torch", "device") => match first_arg(call)? {
            PyValue::Str(device) => Ok(TsValue::Str(device.clone())),
            _ => Err("torch.device is not given a string".into()),
        },
        _ if module == "__torch__" || module.starts_with("__torch__.") => {
            object(call, format!("{module}.{name}"), folder)
        }
        _ => Err(format!(
            "unsupported global {module}.{name} (only tensors, TorchScript objects and plain values are read)"
        )),
    }
}

fn first_arg(call: &Call) -> Result<&PyValue, String> {
    call.args.first().ok_or_else(|| match call.global() {
        Some((module, name)) => format!("{module}.{name} is called without arguments"),
        None => "a call has no arguments".into(),
    })
}

/// `collections.OrderedDict()` filled by `SETITEMS` (or given pairs).
fn ordered_dict(call: &Call, folder: StorageFolder) -> Result<TsValue, String> {
    let mut pairs = Vec::new();
    if let Some(PyValue::List(items) | PyValue::Tuple(items)) = call.args.first() {
        for item in items {
            match item {
                PyValue::Tuple(pair) if pair.len() == 2 => {
                    pairs.push((to_ts_value(&pair[0], folder)?, to_ts_value(&pair[1], folder)?));
                }
                _ => return Err("collections.OrderedDict is given something other than key-value pairs".into()),
            }
        }
    }
    pairs.extend(pairs_to_ts(&call.set_items, folder)?);
    Ok(TsValue::Dict(pairs))
}

/// A TorchScript object: `NEWOBJ` of a `__torch__` class, its attributes set
/// by `BUILD` with a dict. A class with `__setstate__` pickles another state;
/// it is kept as the single attribute `__state__`.
fn object(call: &Call, class: String, folder: StorageFolder) -> Result<TsValue, String> {
    if !call.args.is_empty() {
        return Err(format!(
            "{class} is constructed with {} arguments; TorchScript objects take none",
            call.args.len()
        ));
    }
    let attrs = match &call.state {
        None => Vec::new(),
        Some(PyValue::Dict(pairs)) if pairs.iter().all(|(k, _)| matches!(k, PyValue::Str(_))) => {
            let mut attrs = Vec::with_capacity(pairs.len());
            for (key, value) in pairs {
                let PyValue::Str(key) = key else { unreachable!("checked above") };
                attrs.push((key.clone(), to_ts_value(value, folder)?));
            }
            attrs
        }
        Some(state) => vec![("__state__".to_string(), to_ts_value(state, folder)?)],
    };
    Ok(TsValue::Object(TsObject { class, attrs }))
}

/// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])`.
fn tensor_from_args(args: &[PyValue], folder: StorageFolder) -> Result<TsValue, String> {
    let [storage, offset, sizes, strides, ..] = args else {
        return Err(format!("a tensor is rebuilt from {} arguments; at least 4 are needed", args.len()));
    };
    let PyValue::PersistentId(pid) = storage else {
        return Err("a tensor's storage is not a persistent id".into());
    };
    let storage = storage_from_pid(pid)?;
    let key = match folder {
        StorageFolder::TracedInputs => format!("traced_inputs/{}", storage.key),
        StorageFolder::Data | StorageFolder::Constants => storage.key,
    };
    let tensor = StoredTensor {
        key,
        constant: folder == StorageFolder::Constants,
        elem: storage.elem,
        storage_numel: storage.numel,
        offset: non_negative(offset, "storage offset")?,
        sizes: int_tuple(sizes, "sizes")?,
        strides: int_tuple(strides, "strides")?,
    };
    let layout = view_layout(&tensor).map_err(|problem| format!("tensor on storage '{}': {problem}", tensor.key))?;
    if layout.end > tensor.storage_numel {
        return Err(format!(
            "tensor on storage '{}': the view (offset {}, sizes {:?}, strides {:?}) reaches element {} but the storage holds {}",
            tensor.key,
            tensor.offset,
            tensor.sizes,
            tensor.strides,
            layout.end,
            tensor.storage_numel
        ));
    }
    Ok(TsValue::Tensor(tensor))
}

/// A storage's persistent id: `('storage', torch.<Type>Storage, key, device, numel)`.
struct StorageId {
    elem: ElemType,
    key: String,
    numel: u64,
}

fn storage_from_pid(pid: &PyValue) -> Result<StorageId, String> {
    let PyValue::Tuple(fields) = pid else {
        return Err("a persistent id is not a tuple".into());
    };
    let [PyValue::Str(tag), PyValue::Global { module, name }, PyValue::Str(key), _device, numel] = fields.as_slice()
    else {
        return Err("a persistent id is not ('storage', <type>Storage, key, device, numel)".into());
    };
    if tag != "storage" {
        return Err(format!("a persistent id of kind '{tag}', not 'storage'"));
    }
    let elem = storage_elem_type(module, name).ok_or_else(|| format!("unsupported storage type {module}.{name}"))?;
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("storage key '{key}' is not a plain name"));
    }
    let numel = non_negative(numel, "storage size")?;
    Ok(StorageId { elem, key: key.clone(), numel })
}

/// The element type of `torch.<Name>Storage`.
fn storage_elem_type(module: &str, name: &str) -> Option<ElemType> {
    if module != "torch" {
        return None;
    }
    super::values::elem_of_torch_name(name.strip_suffix("Storage")?)
}

fn non_negative(value: &PyValue, what: &str) -> Result<u64, String> {
    match value {
        PyValue::Int(i) => u64::try_from(*i).map_err(|_| format!("a tensor's {what} is negative ({i})")),
        _ => Err(format!("a tensor's {what} is not an int")),
    }
}

fn int_tuple(value: &PyValue, what: &str) -> Result<Vec<u64>, String> {
    match value {
        PyValue::Tuple(items) | PyValue::List(items) => items.iter().map(|item| non_negative(item, what)).collect(),
        _ => Err(format!("a tensor's {what} are not a tuple")),
    }
}

/// A short description of a value's kind, for messages.
fn kind_of(value: &TsValue) -> &'static str {
    match value {
        TsValue::None => "None",
        TsValue::Bool(_) => "a bool",
        TsValue::Int(_) => "an int",
        TsValue::Float(_) => "a float",
        TsValue::Str(_) => "a string",
        TsValue::Tuple(_) => "a tuple",
        TsValue::List(_) => "a list",
        TsValue::Dict(_) => "a dict",
        TsValue::Tensor(_) => "a tensor",
        TsValue::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(sizes: &[u64], strides: &[u64], offset: u64, numel: u64) -> StoredTensor {
        StoredTensor {
            key: "0".into(),
            constant: false,
            elem: ElemType::Float,
            storage_numel: numel,
            offset,
            sizes: sizes.to_vec(),
            strides: strides.to_vec(),
        }
    }

    #[test]
    fn entry_paths_that_escape_are_rejected() {
        for bad in ["/etc/passwd", "a/../../b", "..", "a\\b", "C:/x", "a/\0"] {
            assert!(matches!(check_entry_path(bad), Err(TorchProblem::PathEscapes(_))), "{bad}");
        }
        for good in ["archive/data/0", "a/.data/version", "a/b..c"] {
            assert!(check_entry_path(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn contiguity_ignores_unit_dimensions() {
        assert!(is_contiguous(&[2, 3], &[3, 1]));
        assert!(is_contiguous(&[1, 3], &[99, 1]));
        assert!(is_contiguous(&[], &[]));
        assert!(!is_contiguous(&[3, 2], &[1, 3]));
        assert!(!is_contiguous(&[4], &[0]));
    }

    #[test]
    fn view_layout_reports_extent_and_overflow() {
        let layout = view_layout(&tensor(&[3, 2], &[1, 3], 1, 7)).unwrap();
        assert_eq!((layout.numel, layout.end), (6, 7));
        let empty = view_layout(&tensor(&[0, 5], &[5, 1], 4, 4)).unwrap();
        assert_eq!((empty.numel, empty.end), (0, 4));
        assert!(view_layout(&tensor(&[u64::MAX, 2], &[1, 1], 0, 1)).is_err());
        assert!(view_layout(&tensor(&[2], &[1, 1], 0, 2)).is_err());
    }

    #[test]
    fn gather_copies_a_transpose_row_major() {
        // storage [0,1,2,3,4,5] as 2x3, viewed transposed (3x2, strides [1,3]).
        let storage: Vec<u8> = (0u8..6).collect();
        let t = StoredTensor { elem: ElemType::Uint8, ..tensor(&[3, 2], &[1, 3], 0, 6) };
        assert_eq!(gather(&storage, &t, 1, 6), vec![0, 3, 1, 4, 2, 5]);
        // An expanded scalar.
        let t = StoredTensor { elem: ElemType::Uint8, ..tensor(&[4], &[0], 2, 6) };
        assert_eq!(gather(&storage, &t, 1, 4), vec![2, 2, 2, 2]);
    }

    #[test]
    fn storage_types_map_to_elem_types() {
        assert_eq!(storage_elem_type("torch", "FloatStorage"), Some(ElemType::Float));
        assert_eq!(storage_elem_type("torch", "LongStorage"), Some(ElemType::Int64));
        assert_eq!(storage_elem_type("torch", "BFloat16Storage"), Some(ElemType::Bfloat16));
        assert_eq!(storage_elem_type("torch", "Float8_e4m3fnStorage"), Some(ElemType::Float8e4m3fn));
        assert_eq!(storage_elem_type("torch", "QInt8Storage"), None);
        assert_eq!(storage_elem_type("numpy", "FloatStorage"), None);
    }

    #[test]
    fn tensors_outside_their_storage_are_rejected() {
        let pid = PyValue::PersistentId(Box::new(PyValue::Tuple(vec![
            PyValue::Str("storage".into()),
            PyValue::Global { module: "torch".into(), name: "FloatStorage".into() },
            PyValue::Str("3".into()),
            PyValue::Str("cpu".into()),
            PyValue::Int(4),
        ])));
        let args = |sizes: Vec<PyValue>| {
            vec![pid.clone(), PyValue::Int(1), PyValue::Tuple(sizes), PyValue::Tuple(vec![PyValue::Int(1)])]
        };
        let TsValue::Tensor(t) = tensor_from_args(&args(vec![PyValue::Int(3)]), StorageFolder::Constants).unwrap()
        else {
            panic!("not a tensor")
        };
        assert_eq!((t.key.as_str(), t.constant, t.offset, t.sizes.as_slice()), ("3", true, 1, &[3u64][..]));
        let err = tensor_from_args(&args(vec![PyValue::Int(4)]), StorageFolder::Data).unwrap_err();
        assert!(err.contains("storage '3'") && err.contains("reaches element 5"), "{err}");
        let err = tensor_from_args(&args(vec![PyValue::Int(-1)]), StorageFolder::Data).unwrap_err();
        assert!(err.contains("negative"), "{err}");
        let TsValue::Tensor(t) = tensor_from_args(&args(vec![PyValue::Int(2)]), StorageFolder::TracedInputs).unwrap()
        else {
            panic!("not a tensor")
        };
        assert_eq!(storage_entry_name(&t), "traced_inputs/3");
    }
}
