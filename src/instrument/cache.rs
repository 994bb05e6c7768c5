//! Instrumented modules kept for the next run, as wasmtime keeps compiled ones: the same
//! module instrumented the same way by the same build of cargo-wasmprof is read back
//! instead of made again (a test binary that did not change, a doc test that rustdoc built
//! the same again).
//!
//! An entry is named by a 128-bit XXH3 hash of the original module's bytes, the options
//! and this build of the instrumenter (its executable's version, size and time of
//! writing), so a changed module, other options or a rebuilt profiler never find an old
//! entry. The entries live in the user's cache directory
//! (`$XDG_CACHE_HOME/cargo-wasmprof/instrumented` on Linux), each written whole or not at
//! all; past [`CAP`] bytes, the least recently used go. Nothing depends on them: without a
//! cache directory, or with an entry that cannot be read, the module is instrumented as it
//! would be without a cache.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use xxhash_rust::xxh3::Xxh3;

use super::{instrument, Instrumented, Options};
use crate::error::InstrumentError;
use crate::fsutil::write_atomic;
use crate::meta::Meta;

/// The most the entries may take together; past it the least recently used are removed
/// until they take three quarters of it.
const CAP: u64 = 1 << 30;

/// The entries' extension (a temporary file being written has none).
const EXTENSION: &str = "wasm";

/// [`instrument`], through the cache: the instrumented module, and whether it came from
/// the cache.
pub fn instrument_cached(
    original: &[u8],
    options: &Options,
) -> Result<(Instrumented, bool), InstrumentError> {
    let entry = entry(original, options);
    if let Some(found) = entry.as_deref().and_then(load) {
        return Ok((found, true));
    }
    let done = instrument(original, options)?;
    if let Some(entry) = entry {
        store(&entry, &done.wasm);
    }
    Ok((done, false))
}

/// Where the entries are, if the user has a cache directory.
fn directory() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        directories_next::ProjectDirs::from("", "", "cargo-wasmprof")
            .map(|dirs| dirs.cache_dir().join("instrumented"))
    })
    .as_deref()
}

/// This build of the instrumenter: the running executable's version, size and time of
/// writing (a rebuild writes it anew).
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

/// The entry of `original` instrumented with `options`.
fn entry(original: &[u8], options: &Options) -> Option<PathBuf> {
    let mut key = Xxh3::new();
    for part in [build()?.as_bytes(), format!("{options:?}").as_bytes()] {
        key.update(&(part.len() as u64).to_le_bytes());
        key.update(part);
    }
    key.update(original);
    let name = format!("{:032x}", key.digest128());
    Some(directory()?.join(name).with_extension(EXTENSION))
}

/// The instrumented module in `entry`, marked as used now; `None` if there is none, or it
/// was cut short (it does not parse to its end), or it does not carry its meta.
fn load(entry: &Path) -> Option<Instrumented> {
    let wasm = std::fs::read(entry).ok()?;
    if wasmparser::Parser::new(0)
        .parse_all(&wasm)
        .any(|p| p.is_err())
    {
        return None;
    }
    let meta = Meta::from_module(&wasm).ok().flatten()?;
    if let Ok(file) = std::fs::File::options().write(true).open(entry) {
        let _ = file.set_modified(SystemTime::now());
    }
    Some(Instrumented { wasm, meta })
}

/// Writes `wasm` as `entry`, then keeps the entries under [`CAP`]. A cache that cannot be
/// written is only a slower next run.
fn store(entry: &Path, wasm: &[u8]) {
    if write_atomic(entry, wasm).is_ok() {
        if let Some(dir) = entry.parent() {
            evict(dir, CAP);
        }
    }
}

/// Past `cap` bytes, removes the least recently used entries of `dir` until they take
/// three quarters of it.
fn evict(dir: &Path, cap: u64) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, u64, PathBuf)> = listing
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == EXTENSION))
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok()?;
            Some((m.modified().ok()?, m.len(), p))
        })
        .collect();
    let mut total: u64 = entries.iter().map(|(_, len, _)| len).sum();
    if total <= cap {
        return;
    }
    entries.sort();
    for (_, len, path) in entries {
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

    /// Past the cap, the least recently used entries go until three quarters of it are
    /// left; a file that is not an entry (one being written) stays.
    #[test]
    fn the_least_recently_used_entries_go_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        for (i, name) in ["c.wasm", "a.wasm", "d.wasm", "b.wasm", ".tmpXYZ"]
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
        assert_eq!(left(), [".tmpXYZ", "a.wasm", "b.wasm", "c.wasm", "d.wasm"]);
        // 400 bytes of entries against a cap of 300: down to 225, so c and a go.
        evict(dir.path(), 300);
        assert_eq!(left(), [".tmpXYZ", "b.wasm", "d.wasm"]);
    }
}
