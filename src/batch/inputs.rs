//! The models a batch converts: files, directories (walked recursively for
//! `*.onnx`, `*.pt`, `*.pth`) and glob patterns, each with the path its output takes under the
//! output directory, and the `--shard K/N` share of them.
//!
//! The output path mirrors the input tree: a file found under a directory
//! argument keeps its path relative to that directory, a glob match its path
//! relative to the pattern's fixed prefix, and a file argument its name.

use std::path::{Component, Path, PathBuf};

/// How deep a directory walk goes (a guard against link loops).
const MAX_DEPTH: usize = 64;

/// One model to convert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The model file.
    pub input: PathBuf,
    /// Its output path relative to the output directory, `/`-separated: also
    /// the key `--shard` hashes, so the same model lands in the same shard on
    /// every machine.
    pub key: String,
}

/// An input argument that yields nothing to convert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadInput {
    /// The argument as given.
    pub input: PathBuf,
    /// Why.
    pub message: String,
}

/// Expands the arguments into jobs, sorted by key; arguments that name
/// nothing readable are returned beside them.
pub fn expand(args: &[PathBuf]) -> (Vec<Job>, Vec<BadInput>) {
    let mut jobs = Vec::new();
    let mut bad = Vec::new();
    for arg in args {
        if arg.is_dir() {
            let before = jobs.len();
            walk(arg, arg, 0, &mut jobs, &mut bad);
            if jobs.len() == before {
                bad.push(BadInput { input: arg.clone(), message: "the directory holds no .onnx or .pt file".into() });
            }
        } else if arg.exists() {
            let name = arg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            jobs.push(Job { input: arg.clone(), key: name });
        } else if is_pattern(arg) {
            expand_glob(arg, &mut jobs, &mut bad);
        } else {
            bad.push(BadInput { input: arg.clone(), message: "cannot read: no such file or directory".into() });
        }
    }
    jobs.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.input.cmp(&b.input)));
    // The same file named twice (a directory and a glob inside it) is one job.
    jobs.dedup_by(|a, b| a.key == b.key && same_file(&a.input, &b.input));
    (jobs, bad)
}

/// Whether `arg` is a glob pattern rather than a path (an existing path never is).
pub fn is_pattern(arg: &Path) -> bool {
    !arg.exists() && arg.to_string_lossy().contains(['*', '?', '['])
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

fn walk(root: &Path, dir: &Path, depth: usize, jobs: &mut Vec<Job>, bad: &mut Vec<BadInput>) {
    if depth > MAX_DEPTH {
        bad.push(BadInput { input: dir.to_path_buf(), message: format!("deeper than {MAX_DEPTH} directories") });
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            bad.push(BadInput { input: dir.to_path_buf(), message: format!("cannot read the directory: {e}") });
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        // Links to directories are not followed (loops); links to files are.
        let is_link = std::fs::symlink_metadata(&path).map(|m| m.file_type().is_symlink()).unwrap_or(false);
        if path.is_dir() {
            if !is_link {
                walk(root, &path, depth + 1, jobs, bad);
            }
        } else if is_model_file(&path) {
            if let Some(key) = relative_key(root, &path) {
                jobs.push(Job { input: path, key });
            }
        }
    }
}

/// ONNX models and TorchScript archives (`.pt`, `.pth`) are picked up by a directory walk.
fn is_model_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["onnx", "pt", "pth"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// `path` relative to `root` with `/` separators; `None` if it escapes.
fn relative_key(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<String>> = rel
        .components()
        .map(|c| match c {
            Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    parts.filter(|p| !p.is_empty()).map(|p| p.join("/"))
}

fn expand_glob(pattern: &Path, jobs: &mut Vec<Job>, bad: &mut Vec<BadInput>) {
    let text = pattern.to_string_lossy();
    let paths = match glob::glob(&text) {
        Ok(paths) => paths,
        Err(e) => {
            bad.push(BadInput { input: pattern.to_path_buf(), message: format!("bad glob pattern: {e}") });
            return;
        }
    };
    // The fixed prefix: the components before the first one with a wildcard.
    let base: PathBuf =
        pattern.components().take_while(|c| !c.as_os_str().to_string_lossy().contains(['*', '?', '['])).collect();
    let before = jobs.len();
    for path in paths.flatten() {
        if path.is_dir() {
            walk(&base, &path, 0, jobs, bad);
        } else if let Some(key) = relative_key(&base, &path) {
            jobs.push(Job { input: path, key });
        }
    }
    if jobs.len() == before {
        bad.push(BadInput { input: pattern.to_path_buf(), message: "the pattern matches no model file".into() });
    }
}

/// `--shard K/N`: the K-th of N disjoint shares (K counts from 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which share, `0 ≤ index < count`.
    pub index: u64,
    /// How many shares.
    pub count: u64,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let (k, n) = s.split_once('/').ok_or_else(|| format!("'{s}' is not K/N (e.g. 0/4)"))?;
        let index: u64 = k.trim().parse().map_err(|_| format!("shard index '{k}' is not a number"))?;
        let count: u64 = n.trim().parse().map_err(|_| format!("shard count '{n}' is not a number"))?;
        if count == 0 || index >= count {
            return Err(format!("shard {index}/{count}: need 0 ≤ K < N"));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// Whether the job with this key is in this share: FNV-1a of the key's
    /// bytes modulo N, the same on every machine and every run.
    pub fn holds(&self, key: &str) -> bool {
        fnv1a(key.as_bytes()) % self.count == self.index
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_keys() {
        let keys: Vec<String> = (0..500).map(|i| format!("zoo/family{}/model_{i}.onnx", i % 7)).collect();
        for n in [1, 2, 3, 8] {
            let shards: Vec<Shard> = (0..n).map(|k| format!("{k}/{n}").parse().unwrap()).collect();
            for key in &keys {
                assert_eq!(shards.iter().filter(|s| s.holds(key)).count(), 1, "{key} in exactly one of {n}");
            }
            if n > 1 {
                assert!(shards.iter().all(|s| keys.iter().any(|k| s.holds(k))), "no share is empty");
            }
        }
    }

    #[test]
    fn shard_arguments_are_checked() {
        assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
        for bad in ["4/4", "1/0", "x/2", "3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_hash_is_stable() {
        // FNV-1a 64 of "a": a fixed value on every platform.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
