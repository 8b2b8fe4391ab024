//! Writing files so that readers only ever see complete ones.
//!
//! The content goes to a temporary file in the target's directory (same file
//! system, so the final rename is atomic); the temporary file is removed if
//! anything fails before the rename.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Temporary files being written right now, so that an interrupted process
/// can remove them before it exits ([`remove_pending`]).
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Lists a temporary file in [`PENDING`] while it lives.
struct Pending(PathBuf);

impl Pending {
    fn new(path: &Path) -> Pending {
        if let Ok(mut list) = PENDING.lock() {
            list.push(path.to_path_buf());
        }
        Pending(path.to_path_buf())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Ok(mut list) = PENDING.lock() {
            list.retain(|p| *p != self.0);
        }
    }
}

/// Removes every temporary file still being written: for a process about to
/// exit on an interrupt, whose destructors will not run. Returns how many.
pub fn remove_pending() -> usize {
    remove_pending_where(|_| true)
}

fn remove_pending_where(wanted: impl Fn(&Path) -> bool) -> usize {
    let Ok(list) = PENDING.lock() else { return 0 };
    list.iter().filter(|p| wanted(p) && std::fs::remove_file(p).is_ok()).count()
}

/// Writes the file at `path` through `fill`, atomically.
pub fn write_with<F>(path: &Path, fill: F) -> std::io::Result<()>
where
    F: FnOnce(&mut std::fs::File) -> std::io::Result<()>,
{
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new().prefix(".diamond-").suffix(".tmp").tempfile_in(dir)?;
    let _pending = Pending::new(temp.path());
    fill(temp.as_file_mut())?;
    temp.as_file_mut().flush()?;
    set_readable_mode(temp.as_file())?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` to `path`, atomically.
pub fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |file| file.write_all(bytes))
}

#[cfg(unix)]
fn set_readable_mode(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Temporary files are created private (0600); outputs are ordinary files.
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_readable_mode(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_neither_a_file_nor_a_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.onnx");
        let result = write_with(&target, |file| {
            file.write_all(b"half")?;
            Err(std::io::Error::other("disk on fire"))
        });
        assert!(result.is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_interrupted_write_can_be_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.onnx");
        write_with(&target, |file| {
            file.write_all(b"half")?;
            // As a second Ctrl-C would, mid-write: the temporary goes away.
            assert_eq!(remove_pending_where(|p| p.starts_with(dir.path())), 1);
            Ok(())
        })
        .unwrap_err();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_failed_write_keeps_the_previous_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.onnx");
        write_bytes(&target, b"old").unwrap();
        let _ = write_with(&target, |_| Err(std::io::Error::other("no")));
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
    }
}
