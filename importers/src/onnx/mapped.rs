//! A model file mapped into memory, shared by the [`Bytes`] the decoded
//! model borrows, and able to give its pages back once the import has read
//! them. A caller that reads few of the file's bytes after the import
//! (`check` reads small constants, which the importer copies out, and
//! glances at the weights before giving the pages back) need not keep the
//! whole file resident: on the 42k-node GPT-2 the map is 14 MB, a sixth of
//! `check`'s peak.

use crate::error::ImportError;
use bytes::Bytes;
use memmap2::{Mmap, UncheckedAdvice};
use std::path::Path;
use std::sync::Arc;

/// A read-only shared map of a whole file.
#[derive(Clone)]
pub struct MappedFile(Option<Arc<Mmap>>);

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.0.as_deref().map_or(&[], |map| &map[..])
    }
}

impl MappedFile {
    /// Maps the file at `path` (copying nothing), after checking it is a file.
    pub(crate) fn open(path: &Path) -> Result<MappedFile, ImportError> {
        let io_error = |source| ImportError::Io { path: path.to_path_buf(), source };
        let metadata = std::fs::metadata(path).map_err(io_error)?;
        if metadata.is_dir() {
            return Err(ImportError::IsDirectory { path: path.to_path_buf() });
        }
        let file = std::fs::File::open(path).map_err(io_error)?;
        if metadata.len() == 0 {
            return Ok(MappedFile(None));
        }
        // SAFETY: read-only map; we rely on no other process truncating the file
        // while diamond runs, as every tool that maps model files does.
        let map = unsafe { Mmap::map(&file) }.map_err(io_error)?;
        Ok(MappedFile(Some(Arc::new(map))))
    }

    /// The file's bytes; they keep the map alive.
    pub(crate) fn bytes(&self) -> Bytes {
        match &self.0 {
            Some(_) => Bytes::from_owner(self.clone()),
            None => Bytes::new(),
        }
    }

    /// Drops the file's pages from this process's resident memory. The map
    /// stays valid: a later read faults its page in again from the page
    /// cache (the file is unchanged, and the map is read-only).
    pub fn release_pages(&self) {
        if let Some(map) = &self.0 {
            // SAFETY: `MADV_DONTNEED` on a read-only shared file map discards
            // no data: the pages are the file's, read back on the next access.
            // An error (an old kernel) only leaves the pages resident.
            let _ = unsafe { map.unchecked_advise(UncheckedAdvice::DontNeed) };
        }
    }
}
