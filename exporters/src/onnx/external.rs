//! Writing the external data of a model beside its new location.
//!
//! Tensors are grouped by `location`; each group becomes one file at
//! `out_dir/location` holding each tensor's bytes at the offset the tensor
//! states, so the written `external_data` entries stay exactly as read. Bytes
//! are copied from the source file in bounded chunks, and holes of sparse
//! files stay holes, so peak memory is a few MiB whatever the model's size. A
//! location that already resolves to the source file is left untouched.

use super::ExportError;
use diamond_ir::{Attribute, ExternalData, Model, Tensor};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

const CHUNK: usize = 4 << 20;

/// Writes every external data file of `model` under `out_dir`; returns the
/// files written and the bytes copied.
pub(super) fn write_external_data(model: &Model, out_dir: &Path) -> Result<(Vec<PathBuf>, u64), ExportError> {
    let mut by_location: BTreeMap<&str, Vec<&ExternalData>> = BTreeMap::new();
    for_each_tensor(model, &mut |tensor| {
        if let Some(ext) = tensor.external() {
            by_location.entry(ext.location.as_str()).or_default().push(ext);
        }
    });
    let mut written = Vec::new();
    let mut copied = 0;
    for (location, refs) in by_location {
        let target = out_dir.join(location);
        if same_file(&refs[0].path, &target) {
            continue;
        }
        copied += write_data_file(&target, &refs)?;
        written.push(target);
    }
    Ok((written, copied))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn write_data_file(target: &Path, refs: &[&ExternalData]) -> Result<u64, ExportError> {
    let io_error = |source| ExportError::Io { path: target.to_path_buf(), source };
    if let Some(dir) = target.parent() {
        std::fs::create_dir_all(dir).map_err(io_error)?;
    }
    let mut copied = 0;
    let mut unreadable_source = None;
    let result = crate::atomic::write_with(target, |out| {
        let mut end = 0;
        for ext in refs {
            let source = File::open(&ext.path).inspect_err(|_| unreadable_source = Some(ext.path.clone()))?;
            copy_range(&source, out, ext.offset, ext.length)
                .map_err(|e| std::io::Error::new(e.kind(), format!("copying from {}: {e}", ext.path.display())))?;
            copied += ext.length;
            end = end.max(ext.offset + ext.length);
        }
        // Trailing holes still count towards the file's length.
        if out.metadata()?.len() < end {
            out.set_len(end)?;
        }
        Ok(())
    });
    match (result, unreadable_source) {
        (Ok(()), _) => Ok(copied),
        (Err(source), Some(source_path)) => {
            Err(ExportError::ExternalSource { path: target.to_path_buf(), source_path, source })
        }
        (Err(source), None) => Err(io_error(source)),
    }
}

/// Copies `length` bytes at `offset` of `source` to the same offset of `out`,
/// skipping holes.
#[cfg(unix)]
fn copy_range(source: &File, out: &File, offset: u64, length: u64) -> std::io::Result<()> {
    let end = offset.checked_add(length).ok_or_else(|| std::io::Error::other("range overflows"))?;
    let mut pos = offset;
    while pos < end {
        let Some((data, hole)) = next_data(source, pos)? else { break };
        let data = data.max(pos);
        if data >= end {
            break;
        }
        copy_bytes(source, out, data, hole.min(end))?;
        pos = hole;
    }
    Ok(())
}

/// The next data segment at or after `pos`: `(start, end)`; `None` if only a
/// hole remains. Where the file system cannot tell, all of it is data.
#[cfg(unix)]
fn next_data(file: &File, pos: u64) -> std::io::Result<Option<(u64, u64)>> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    let len = file.metadata()?.len();
    let at = libc::off_t::try_from(pos).map_err(std::io::Error::other)?;
    // SAFETY: lseek on a descriptor we own; it only moves the file offset, which
    // nothing else reads (all reads and writes here are positional).
    let data = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
    if data < 0 {
        let err = std::io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENXIO) => Ok(None),
            _ if pos < len => Ok(Some((pos, len))),
            _ => Ok(None),
        };
    }
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
    let hole = if hole < 0 { len } else { hole as u64 };
    Ok(Some((data as u64, hole)))
}

#[cfg(unix)]
fn copy_bytes(source: &File, out: &File, start: u64, end: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buffer = vec![0u8; CHUNK.min((end - start) as usize)];
    let mut pos = start;
    while pos < end {
        let want = buffer.len().min((end - pos) as usize);
        source.read_exact_at(&mut buffer[..want], pos)?;
        out.write_all_at(&buffer[..want], pos)?;
        pos += want as u64;
    }
    Ok(())
}

#[cfg(not(unix))]
fn copy_range(source: &File, out: &File, offset: u64, length: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    let (mut source, mut out) = (source, out);
    source.seek(SeekFrom::Start(offset))?;
    out.seek(SeekFrom::Start(offset))?;
    std::io::copy(&mut source.take(length), &mut out)?;
    Ok(())
}

/// Calls `visit` on every tensor of the model: initializers, sparse
/// initializers, and tensor-valued attributes of every graph and function.
pub(crate) fn for_each_tensor<'m>(model: &'m Model, visit: &mut dyn FnMut(&'m Tensor)) {
    for graph in model.graphs.values() {
        graph.initializers.iter().for_each(&mut *visit);
        for sparse in &graph.sparse_initializers {
            sparse.values.iter().chain(&sparse.indices).for_each(&mut *visit);
        }
        for node in graph.nodes.values() {
            node.attributes.iter().for_each(|a| visit_attribute(a, visit));
        }
    }
    for function in &model.functions {
        function.attribute_protos.iter().for_each(|a| visit_attribute(a, visit));
    }
}

fn visit_attribute<'m>(attr: &'m Attribute, visit: &mut dyn FnMut(&'m Tensor)) {
    let rare = attr.rare();
    attr.t.as_deref().into_iter().chain(&rare.tensors).for_each(&mut *visit);
    for sparse in rare.sparse_tensor.as_deref().into_iter().chain(&rare.sparse_tensors) {
        sparse.values.iter().chain(&sparse.indices).for_each(&mut *visit);
    }
}
