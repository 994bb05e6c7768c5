//! Instrumented modules kept for the next run, as wasmtime keeps compiled ones, in the
//! profiler's [`cache`] directory: the same module instrumented the same way by the same
//! build of cargo-wasmprof is read back instead of made again (a test binary that did not
//! change, a doc test that rustdoc built the same again). An entry is named by the
//! original module's bytes and the options.
//!
//! A module read from a file also leaves a record of the file's [`FileStamp`] (its place
//! and its times of change, as cargo's fingerprints and make read them) that names its
//! entry: the next run finds the entry without reading and hashing the file again (a test
//! binary of tens of megabytes).

use std::path::Path;

use super::{instrument, Instrumented, Options};
use crate::cache::{self, Kind};
use crate::error::InstrumentError;
use crate::meta::{binary, Meta};

/// A module file as a record knows it without reading it: its canonical path, device,
/// inode, length, and times of modification and of status change (which every write
/// moves and no tool sets back), taken before the file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// All of it, as the record's name is made of it.
    key: String,
    /// Whether the file had not changed for [`SETTLED`] when it was stamped.
    settled: bool,
}

/// How long a file must have stayed as it is before its stamp is recorded. A file system
/// notes times at its clock's tick (milliseconds; seconds on some), so a file written again
/// in the tick it was written in may keep its stamp: such a file is read and hashed on
/// each run until it is older (as git treats an index entry as new as the index).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(1);

impl FileStamp {
    /// The stamp of the file at `path`; `None` where the file system does not say.
    #[cfg(unix)]
    pub fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt as _;
        let canonical = std::fs::canonicalize(path).ok()?;
        let m = std::fs::metadata(&canonical).ok()?;
        let (secs, nanos) = (m.ctime().try_into().ok()?, m.ctime_nsec().try_into().ok()?);
        let changed = std::time::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
        let settled = std::time::SystemTime::now()
            .duration_since(changed.max(m.modified().ok()?))
            .is_ok_and(|age| age >= SETTLED);
        let key = format!(
            "{} {} {} {} {}.{} {}.{}",
            canonical.display(),
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        );
        Some(FileStamp { key, settled })
    }

    /// The stamp of the file at `path`: none, off Unix.
    #[cfg(not(unix))]
    pub fn of(_path: &Path) -> Option<FileStamp> {
        None
    }
}

/// The cached instrumented module of the file stamped `stamp` instrumented with
/// `options`, found by the file's record without reading the file.
pub fn cached_for_file(stamp: &FileStamp, options: &Options) -> Option<Instrumented> {
    let name = String::from_utf8(cache::read(&record(stamp, options)?)?).ok()?;
    load(&cache::named(&name)?)
}

/// [`instrument`], through the cache: the instrumented module, and whether it came from
/// the cache. `stamp`, when `original` was read from a file, leaves the file's record for
/// [`cached_for_file`] (if the file had settled).
pub fn instrument_cached(
    original: &[u8],
    options: &Options,
    stamp: Option<&FileStamp>,
) -> Result<(Instrumented, bool), InstrumentError> {
    let entry = cache::path(
        Kind::Instrumented,
        &[format!("{options:?}").as_bytes(), original],
    );
    let (done, cached) = match entry.as_deref().and_then(load) {
        Some(found) => (found, true),
        None => {
            let done = instrument(original, options)?;
            if let Some(entry) = &entry {
                cache::write(entry, &done.wasm);
                cache::write(
                    &cache::beside(entry, Kind::Meta),
                    &binary::encode(&done.meta),
                );
            }
            (done, false)
        }
    };
    let settled = stamp.filter(|stamp| stamp.settled);
    let record = settled.and_then(|stamp| record(stamp, options));
    if let Some((record, name)) = record.zip(entry.as_deref().and_then(Path::file_name)) {
        cache::write(&record, name.as_encoded_bytes());
    }
    Ok((done, cached))
}

/// The record of the file stamped `stamp`, for its module instrumented with `options`.
fn record(stamp: &FileStamp, options: &Options) -> Option<std::path::PathBuf> {
    cache::path(
        Kind::FileRecord,
        &[format!("{options:?}").as_bytes(), stamp.key.as_bytes()],
    )
}

/// The instrumented module in `entry`, marked as used now; `None` if there is none, or it
/// was cut short (it does not parse to its end), or it does not carry its meta.
fn load(entry: &Path) -> Option<Instrumented> {
    let wasm = cache::read(entry)?;
    if wasmparser::Parser::new(0)
        .parse_all(&wasm)
        .any(|p| p.is_err())
    {
        return None;
    }
    let meta = meta_of(entry, &wasm)?;
    Some(Instrumented { wasm, meta })
}

/// The meta of the instrumented module `wasm` kept at `entry`: its binary form beside
/// the entry, else the module's own (whose binary form is then kept for the next run).
fn meta_of(entry: &Path, wasm: &[u8]) -> Option<Meta> {
    let beside = cache::beside(entry, Kind::Meta);
    if let Some(meta) = cache::read(&beside).and_then(|bytes| binary::decode(&bytes)) {
        return Some(meta);
    }
    let meta = Meta::from_module(wasm).ok().flatten()?;
    cache::write(&beside, &binary::encode(&meta));
    Some(meta)
}

#[cfg(test)]
mod tests {
    use crate::meta::{binary, LineTables, Meta, NO_LINE};
    use crate::symbols::SourcePos;

    #[test]
    fn a_meta_kept_in_binary_reads_back_as_it_was_written_and_a_cut_one_does_not() {
        let wasm = wat::parse_str(
            r#"(module
                (import "env" "f" (func $f))
                (func $g (call $f) (call $h))
                (func $h (call_indirect (i32.const 0)))
                (table 1 funcref)
                (memory 1)
                (export "g" (func $g)))"#,
        )
        .unwrap();
        let mut meta = super::instrument(&wasm, &super::Options::default())
            .unwrap()
            .meta;
        meta.line_tables = LineTables {
            segments: vec![(1, vec![[0, 3], [NO_LINE, 1]])],
            lines: vec![(0, 7, vec![]), (0, 9, vec![[0, 8]])],
            files: vec!["src/lib.rs".into()],
            names: vec!["inlined \"fn\"".into()],
        };
        meta.direct_sites[0].pos = Some(SourcePos {
            file: "src/lib.rs".into(),
            line: 3,
        });
        meta.functions[1].symbol.file = Some("src/lib.rs".into());
        let bytes = binary::encode(&meta);
        let read = binary::decode(&bytes).expect("reads back");
        let json = |m: &Meta| serde_json::to_string(m).unwrap();
        assert_eq!(json(&read), json(&meta));
        assert_eq!(read.frames, meta.frames);
        assert!(!meta.frames.is_empty() && !meta.indirect_sites.is_empty());
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(binary::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(binary::decode(&longer).is_none());
    }
}
