//! The profiler's cache directory (`$XDG_CACHE_HOME/cargo-wasmprof/instrumented` on
//! Linux): what one run made that the next can read back instead of making again. A file
//! is named by a 128-bit XXH3 hash of what it was made from and of this build of the
//! profiler (its executable's version, size and time of writing), so a changed input or a
//! rebuilt profiler never finds an old file; each is written whole or not at all, and past
//! [`CAP`] bytes (give or take what a process writes between checks) the least recently
//! used go. Nothing depends on it: without a cache directory, or with a file that cannot be
//! read, the caller makes what it would have read.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

use xxhash_rust::xxh3::Xxh3;

use crate::fsutil::write_atomic;

/// The most the files may take together; past it the least recently used are removed
/// until they take three quarters of it.
const CAP: u64 = 1 << 30;

/// What a file of the cache holds, which its extension says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An instrumented module (`instrument::instrument_cached`).
    Instrumented,
    /// The meta of the instrumented module beside it, in its binary form (`meta::binary`).
    Meta,
    /// The file name of the instrumented module of a module file, found by the file's
    /// stamp (`instrument::FileStamp`).
    FileRecord,
    /// The stack sampler's map of a compiled module's code (`host::stacks`).
    CodeMap,
    /// A module compiled by wasmtime, as `Module::serialize` writes it (`host::instance`).
    Compiled,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Instrumented,
        Kind::Meta,
        Kind::FileRecord,
        Kind::CodeMap,
        Kind::Compiled,
    ];

    /// The extension of its files (a temporary file being written has none).
    fn extension(self) -> &'static str {
        match self {
            Kind::Instrumented => "wasm",
            Kind::Meta => "meta",
            Kind::FileRecord => "file",
            Kind::CodeMap => "map",
            Kind::Compiled => "cwasm",
        }
    }
}

/// The file of `kind` made from `parts` by this build, if the user has a cache directory.
pub(crate) fn path(kind: Kind, parts: &[&[u8]]) -> Option<PathBuf> {
    let mut key = Xxh3::new();
    for part in std::iter::once(build()?.as_bytes()).chain(parts.iter().copied()) {
        key.update(&(part.len() as u64).to_le_bytes());
        key.update(part);
    }
    let name = format!("{:032x}", key.digest128());
    Some(directory()?.join(name).with_extension(kind.extension()))
}

/// Whether there is a cache directory to keep files in.
pub(crate) fn enabled() -> bool {
    directory().is_some() && build().is_some()
}

/// The cache's file called `name` (a name [`path`] gave), else `None`.
pub(crate) fn named(name: &str) -> Option<PathBuf> {
    let (stem, extension) = name.split_once('.')?;
    let ours = stem.len() == 32
        && stem.bytes().all(|b| b.is_ascii_hexdigit())
        && Kind::ALL.iter().any(|k| k.extension() == extension);
    ours.then(|| directory().map(|dir| dir.join(name)))
        .flatten()
}

/// The file of `kind` kept beside the cache's file at `entry`, named as it is.
pub(crate) fn beside(entry: &Path, kind: Kind) -> PathBuf {
    entry.with_extension(kind.extension())
}

/// The bytes of the file at `path`, which is marked as used now.
pub(crate) fn read(path: &Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    used(path);
    Some(bytes)
}

/// Marks the file at `path` as used now (read otherwise than by [`read`]), so that it is
/// among the last to go.
pub(crate) fn used(path: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// How much a process writes between two checks of the cache's size: a check lists the
/// directory and reads each file's size, and a first run writes several files a module.
const CHECK_EVERY: u64 = 64 << 20;

/// Writes `bytes` as the file at `path`, then keeps the cache under [`CAP`] (checked at a
/// process's first write and after each [`CHECK_EVERY`] bytes it writes). A file that
/// cannot be written is only a slower next run.
pub(crate) fn write(path: &Path, bytes: &[u8]) {
    static WRITTEN: AtomicU64 = AtomicU64::new(0);
    if write_atomic(path, bytes).is_ok() {
        let before = WRITTEN.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let after = before + bytes.len() as u64;
        if before == 0 || before / CHECK_EVERY != after / CHECK_EVERY {
            if let Some(dir) = path.parent() {
                evict(dir, CAP);
            }
        }
    }
}

/// Where the files are, if the user has a cache directory.
fn directory() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        directories_next::ProjectDirs::from("", "", "cargo-wasmprof")
            .map(|dirs| dirs.cache_dir().join("instrumented"))
    })
    .as_deref()
}

/// This build of the profiler: the running executable's version, size and time of writing
/// (a rebuild writes it anew).
fn build() -> Option<&'static str> {
    static BUILD: OnceLock<Option<String>> = OnceLock::new();
    BUILD
        .get_or_init(|| {
            let exe = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
            let written = exe.modified().ok()?.duration_since(SystemTime::UNIX_EPOCH);
            Some(format!(
                "{} {} {}",
                env!("CARGO_PKG_VERSION"),
                exe.len(),
                written.ok()?.as_nanos()
            ))
        })
        .as_deref()
}

/// Past `cap` bytes, removes the least recently used files of `dir` until they take three
/// quarters of it.
fn evict(dir: &Path, cap: u64) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = listing
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| Kind::ALL.iter().any(|k| e == k.extension()))
        })
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok()?;
            Some((m.modified().ok()?, m.len(), p))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    if total <= cap {
        return;
    }
    files.sort();
    for (_, len, path) in files {
        if total <= cap / 4 * 3 {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the cap, the least recently used files go until three quarters of it are
    /// left; a file that is not the cache's (one being written) stays.
    #[test]
    fn the_least_recently_used_files_go_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for (i, name) in ["c.wasm", "a.map", "d.wasm", "b.file", ".tmpXYZ"]
            .iter()
            .enumerate()
        {
            let path = dir.path().join(name);
            std::fs::write(&path, [0u8; 100]).unwrap();
            let used = start + std::time::Duration::from_secs(i as u64);
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(used).unwrap();
        }
        let left = || {
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names
        };
        evict(dir.path(), 400);
        assert_eq!(left(), [".tmpXYZ", "a.map", "b.file", "c.wasm", "d.wasm"]);
        // 400 bytes of files against a cap of 300: down to 225, so c and a go.
        evict(dir.path(), 300);
        assert_eq!(left(), [".tmpXYZ", "b.file", "d.wasm"]);
    }
}
