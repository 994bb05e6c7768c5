//! Profile files: JSON written atomically, and read back with the format checked; a dump
//! that a JS host saved is decoded on reading.

use std::path::Path;

use anyhow::Context as _;
use serde::Deserialize;

use super::{Dump, Profile, RunInfo, FORMAT};
use crate::fsutil::write_atomic;
use crate::meta::Meta;

/// The `format` field of a [`DumpFile`].
pub const DUMP_FORMAT: &str = "wasmprof-dump";

/// What a host without the Rust decoder (the JS runtime under node or in a browser) saves
/// after a run: the profiler's memory, base64-encoded, with the meta to decode it. Read
/// like a profile: [`Profile::read`] decodes it.
#[derive(Debug, Deserialize)]
pub struct DumpFile {
    /// [`crate::meta::VERSION`] of the runtime that wrote it.
    pub version: u32,
    /// The instrumented module's meta.
    pub meta: Meta,
    /// How the run ended (its `open_stack` is decoded from the memory).
    #[serde(flatten)]
    pub run: RunInfo,
    /// The used part of the profiler's memory, base64.
    pub memory: String,
    /// The context-tree node current at the end.
    pub cur: u32,
    /// Clock ticks per nanosecond.
    pub ticks_per_ns: f64,
    /// [`Dump::end`], in decimal (a JS number would lose its last digits).
    #[serde(default)]
    pub end: Option<String>,
    /// [`Dump::frames`]: function ids, outermost first, from the JS error's stack.
    #[serde(default)]
    pub frames: Vec<u32>,
}

impl DumpFile {
    /// Reads a dump file (as a JS host saved it), checking its format and version. Errors
    /// do not repeat the path.
    pub fn read(path: &Path) -> anyhow::Result<DumpFile> {
        let text = std::fs::read(path).context("cannot read it")?;
        let value: serde_json::Value = serde_json::from_slice(&text).context("not JSON")?;
        anyhow::ensure!(
            value.get("format").and_then(|f| f.as_str()) == Some(DUMP_FORMAT),
            "not a cargo-wasmprof dump (no \"format\": \"{DUMP_FORMAT}\")"
        );
        serde_json::from_value(value).context("not a valid cargo-wasmprof dump")
    }

    /// The meta, the profiler's memory and how the run ended, checked to be of this
    /// cargo-wasmprof's version.
    pub fn into_parts(self) -> anyhow::Result<(Meta, Dump, RunInfo)> {
        use base64::Engine as _;
        anyhow::ensure!(
            self.version == crate::meta::VERSION,
            "a dump of version {}, this cargo-wasmprof reads version {}",
            self.version,
            crate::meta::VERSION
        );
        let memory = base64::engine::general_purpose::STANDARD
            .decode(self.memory.as_bytes())
            .context("its memory is not base64")?;
        let end = self
            .end
            .map(|end| end.parse::<u64>())
            .transpose()
            .context("its end reading is not a number")?;
        let dump = Dump {
            memory,
            cur: self.cur,
            ticks_per_ns: self.ticks_per_ns,
            clock: self.run.clock.clone(),
            end,
            frames: self.frames,
        };
        Ok((self.meta, dump, self.run))
    }

    /// Decodes the dump into a profile.
    pub fn decode(self) -> anyhow::Result<Profile> {
        let (meta, dump, run) = self.into_parts()?;
        Profile::decode(&meta, &dump, run)
    }
}

impl Profile {
    /// Reads a profile file, or a [`DumpFile`] that it decodes, checking the format. Errors
    /// do not repeat the path.
    pub fn read(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read(path).context("cannot read it")?;
        let value: serde_json::Value = serde_json::from_slice(&text).context("not JSON")?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {
                serde_json::from_value(value).context("not a valid cargo-wasmprof profile")
            }
            Some(DUMP_FORMAT) => serde_json::from_value::<DumpFile>(value)
                .context("not a valid cargo-wasmprof dump")?
                .decode()
                .context("cannot decode the dump"),
            _ => anyhow::bail!(
                "not a cargo-wasmprof profile (no \"format\": \"{FORMAT}\" or \"{DUMP_FORMAT}\")"
            ),
        }
    }

    /// Writes the profile as JSON, atomically (a temporary file renamed into place).
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let json = serde_json::to_vec_pretty(self).expect("profiles serialize");
        write_atomic(path, &json)
    }
}
