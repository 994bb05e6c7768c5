//! Profile files: JSON written atomically, and read back with the format checked; a dump
//! that a JS host saved is decoded on reading.

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::{Dump, NoSampler, Profile, RunInfo, StackSamples, ThreadDump, FORMAT};
use crate::fsutil::write_atomic;
use crate::meta::Meta;

/// The `format` field of a [`DumpFile`].
pub const DUMP_FORMAT: &str = "wasmprof-dump";

/// The fields of a [`DumpFile`], as the JS runtime writes them (it checks its dump against
/// this list; a unit test checks the list against the struct).
pub const DUMP_FIELDS: &[&str] = &[
    "format",
    "version",
    "meta",
    "module",
    "exit_code",
    "trap",
    "wall_ns",
    "clock",
    "memory",
    "holes",
    "cur",
    "ticks_per_ns",
    "end",
    "frames",
    "threads",
    "lost_threads",
    "no_sampler",
    "stacks",
];

/// The fields of a [`DumpThread`], as the JS runtime writes them.
pub const DUMP_THREAD_FIELDS: &[&str] = &["id", "how", "trap", "memory", "cur", "end", "frames"];

/// What a host without the Rust decoder (the JS runtime under node or in a browser) saves
/// after a run: the profiler's memory, base64-encoded, with the meta to decode it. Read
/// like a profile: [`Profile::read`] decodes it.
#[derive(Debug, Serialize, Deserialize)]
pub struct DumpFile {
    /// [`DUMP_FORMAT`].
    pub format: String,
    /// [`crate::meta::VERSION`] of the runtime that wrote it.
    pub version: u32,
    /// The instrumented module's meta.
    pub meta: Meta,
    /// How the run ended (its `open_stack` is decoded from the memory).
    #[serde(flatten)]
    pub run: RunInfo,
    /// The used part of the profiler's memory, base64, but for its `holes`.
    pub memory: String,
    /// The long runs of zeros left out of `memory` (the live table's and the arc table's
    /// empty slots): `[offset, length]` pairs, in order.
    #[serde(default)]
    pub holes: Vec<(u32, u32)>,
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
    /// With Emscripten's `-pthread`, what each worker's thread left (the main thread's is
    /// the fields above).
    #[serde(default)]
    pub threads: Vec<DumpThread>,
    /// The workers whose state could not be read when the program ended (they ran).
    #[serde(default)]
    pub lost_threads: Vec<u32>,
    /// [`Dump::no_sampler`].
    #[serde(default)]
    pub no_sampler: Option<NoSampler>,
    /// With V8's sampler, the stacks it sampled ([`Dump::stacks`]).
    #[serde(default)]
    pub stacks: Option<StackSamples>,
}

/// What a worker's thread left, in a [`DumpFile`].
#[derive(Debug, Serialize, Deserialize)]
pub struct DumpThread {
    /// Its id: 1, 2, ... in the order the workers started.
    pub id: u32,
    /// How it ended, in words.
    pub how: String,
    /// Its trap's message, when it trapped.
    #[serde(default)]
    pub trap: Option<String>,
    /// Its profiler's memory, base64.
    pub memory: String,
    /// Its current context node when the program ended.
    pub cur: u32,
    /// [`Dump::end`], in decimal.
    #[serde(default)]
    pub end: Option<String>,
    /// [`Dump::frames`].
    #[serde(default)]
    pub frames: Vec<u32>,
}

/// What one run left, read from a [`DumpFile`]: the main thread's dump, how the run ended
/// and every thread's dump, which [`Profile::decode_threads`] decodes.
#[derive(Debug)]
pub struct RunDump {
    /// The instrumented module's meta.
    pub meta: Meta,
    /// The main thread's profiler state.
    pub dump: Dump,
    /// How the run ended.
    pub run: RunInfo,
    /// Every thread, the main one (id 0) first, when the program started threads.
    pub threads: Vec<ThreadDump>,
    /// The threads whose state could not be read.
    pub lost_threads: Vec<u32>,
}

impl DumpFile {
    /// A dump from its bytes (as a browser page posted them), checking its format.
    pub fn from_slice(text: &[u8]) -> anyhow::Result<DumpFile> {
        let value: serde_json::Value = serde_json::from_slice(text).context("not JSON")?;
        anyhow::ensure!(
            value.get("format").and_then(|f| f.as_str()) == Some(DUMP_FORMAT),
            "not a cargo-wasmprof dump (no \"format\": \"{DUMP_FORMAT}\")"
        );
        serde_json::from_value(value).context("not a valid cargo-wasmprof dump")
    }

    /// The meta, the profiler's memory (every thread's) and how the run ended, checked to
    /// be of this cargo-wasmprof's version.
    pub fn into_run_dump(self) -> anyhow::Result<RunDump> {
        anyhow::ensure!(
            self.version == crate::meta::VERSION,
            "a dump of version {}, this cargo-wasmprof reads version {}",
            self.version,
            crate::meta::VERSION
        );
        let dump = |memory: &str, holes: &[(u32, u32)], cur: u32, end: Option<String>, frames| {
            use base64::Engine as _;
            let kept = base64::engine::general_purpose::STANDARD
                .decode(memory.as_bytes())
                .context("its memory is not base64")?;
            let memory = with_holes(kept, holes)?;
            let end = end
                .map(|end| end.parse::<u64>())
                .transpose()
                .context("its end reading is not a number")?;
            anyhow::Ok(Dump {
                memory,
                cur,
                ticks_per_ns: self.ticks_per_ns,
                clock: self.run.clock.clone(),
                end,
                frames,
                stacks: None,
                no_sampler: self.no_sampler,
            })
        };
        let main = Dump {
            stacks: self.stacks,
            ..dump(
                &self.memory,
                &self.holes,
                self.cur,
                self.end.clone(),
                self.frames.clone(),
            )?
        };
        let mut threads = Vec::new();
        if !self.threads.is_empty() || !self.lost_threads.is_empty() {
            let worker_trapped = self.threads.iter().find(|t| t.trap.is_some());
            threads.push(ThreadDump {
                tid: 0,
                dump: None,
                how: match (&self.run.trap, worker_trapped) {
                    (_, Some(t)) => format!("ended by thread {}'s trap", t.id),
                    (Some(trap), None) => format!("trapped: {trap}"),
                    (None, None) if self.run.exit_code != 0 => {
                        format!("exited with {}", self.run.exit_code)
                    }
                    (None, None) => "returned".to_string(),
                },
                trap: None,
            });
        }
        for t in &self.threads {
            let state = dump(&t.memory, &[], t.cur, t.end.clone(), t.frames.clone())
                .with_context(|| format!("thread {}", t.id))?;
            threads.push(ThreadDump {
                tid: t.id,
                dump: Some(state),
                how: t.how.clone(),
                trap: t.trap.clone(),
            });
        }
        Ok(RunDump {
            meta: self.meta,
            dump: main,
            run: self.run,
            threads,
            lost_threads: self.lost_threads,
        })
    }

    /// Decodes the dump into a profile.
    pub fn decode(self) -> anyhow::Result<Profile> {
        let p = self.into_run_dump()?;
        Profile::decode_threads(&p.meta, &p.dump, p.run, &p.threads, &p.lost_threads)
    }
}

/// A file's `format` field, which says whether it is a profile or a dump.
#[derive(Deserialize)]
struct FormatField {
    format: Option<String>,
}

impl Profile {
    /// Reads a profile file, or a [`DumpFile`] that it decodes, checking the format. Errors
    /// do not repeat the path.
    pub fn read(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read(path).context("cannot read it")?;
        // What the file is, from its `format` alone (the rest is skipped, not built), then
        // the file read once more as that: a profile is read straight into its structs.
        let format = match serde_json::from_slice::<FormatField>(&text) {
            Ok(field) => field.format,
            Err(e) if e.is_data() => None,
            Err(e) => return Err(e).context("not JSON"),
        };
        match format.as_deref() {
            Some(FORMAT) => {
                serde_json::from_slice(&text).context("not a valid cargo-wasmprof profile")
            }
            Some(DUMP_FORMAT) => serde_json::from_slice::<DumpFile>(&text)
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
        let json = serde_json::to_vec(self).expect("profiles serialize");
        write_atomic(path, &json)
    }
}

/// The memory whose bytes but for `holes` (runs of zeros, `[offset, length]` in order) are
/// `kept`.
fn with_holes(kept: Vec<u8>, holes: &[(u32, u32)]) -> anyhow::Result<Vec<u8>> {
    if holes.is_empty() {
        return Ok(kept);
    }
    let zeros: u64 = holes.iter().map(|&(_, len)| u64::from(len)).sum();
    let mut memory = Vec::with_capacity(kept.len() + zeros as usize);
    let mut rest = kept.as_slice();
    for &(offset, len) in holes {
        let before = (offset as usize)
            .checked_sub(memory.len())
            .context("its memory's holes are not in order")?;
        anyhow::ensure!(
            before <= rest.len(),
            "its memory's holes lie past its bytes"
        );
        let (bytes, after) = rest.split_at(before);
        memory.extend_from_slice(bytes);
        memory.resize(memory.len() + len as usize, 0);
        rest = after;
    }
    memory.extend_from_slice(rest);
    Ok(memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_with_holes_is_its_bytes_and_zeros() {
        let memory = with_holes(vec![1, 2, 3, 4], &[(1, 2), (5, 1)]).unwrap();
        assert_eq!(memory, [1, 0, 0, 2, 3, 0, 4]);
        assert!(with_holes(vec![1], &[(3, 1)]).is_err());
        assert!(with_holes(vec![1, 2], &[(1, 1), (0, 1)]).is_err());
    }

    /// A value for each of `fields`, none of them a default, so that a struct that has
    /// them serializes each.
    fn sample(fields: &[&str]) -> serde_json::Map<String, serde_json::Value> {
        use serde_json::json;
        let meta = Meta {
            version: 0,
            metric: crate::meta::Metric::Calls,
            contexts: false,
            state: Default::default(),
            host_exceptions: false,
            one_memory_variant: false,
            inlining_budget: false,
            sampler: Default::default(),
            unoptimized: false,
            layout: crate::layout::Layout::new(0, 0, 0, 0, 1, 0),
            functions: Vec::new(),
            direct_sites: Vec::new(),
            indirect_sites: Vec::new(),
            frames: Vec::new(),
            line_tables: Default::default(),
            allocations: Default::default(),
        };
        fields
            .iter()
            .map(|&field| {
                let value = match field {
                    "format" => json!(DUMP_FORMAT),
                    "meta" => serde_json::to_value(&meta).unwrap(),
                    "trap" | "how" | "memory" | "module" | "clock" | "end" => json!("1"),
                    "ticks_per_ns" => json!(1.5),
                    "frames" | "lost_threads" => json!([1]),
                    "holes" => json!([[1, 2]]),
                    "no_sampler" => json!("no_worker"),
                    "threads" => json!([sample(DUMP_THREAD_FIELDS)]),
                    "stacks" => serde_json::to_value(StackSamples::default()).unwrap(),
                    _ => json!(1),
                };
                (field.to_string(), value)
            })
            .collect()
    }

    #[test]
    fn the_fields_the_js_runtime_writes_are_the_structs() {
        let dump = serde_json::Value::Object(sample(DUMP_FIELDS));
        let read: DumpFile = serde_json::from_value(dump.clone()).unwrap();
        let written = serde_json::to_value(&read).unwrap();
        let keys = |v: &serde_json::Value| -> std::collections::BTreeSet<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(keys(&written), keys(&dump));
        assert_eq!(keys(&written["threads"][0]), keys(&dump["threads"][0]));
    }
}
