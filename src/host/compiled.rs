//! How the host compiles: the settings of every engine, and the cache that spares a run
//! its compiling: every module and component, the program's and the profiler's own, is
//! read back from the profiler's [`cache`] as wasmtime serialized it, mapped as it lies.
//! wasmtime's own cache is not used: it hashes the module with SHA-256 and decompresses
//! its entry on every run (3 ms of a 1.7 MB test binary's), and recompresses a much-used
//! entry on a thread beside the program.

use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
#[cfg(unix)]
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

use crate::cache::{self, Kind};

/// The most wasm frames a trap's backtrace keeps: wasmtime keeps 20 unless told, and a run
/// that ends deep inside (a stack overflow: up to about 32,000 frames in wasmtime's 512 KiB
/// stack) needs its whole open stack. A backtrace this long is marked as cut short.
pub(super) const BACKTRACE_FRAMES: usize = 1 << 16;

/// What every engine of the host is configured with: backtraces of [`BACKTRACE_FRAMES`].
pub(super) fn engine_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.wasm_backtrace_max_frames(std::num::NonZeroUsize::new(BACKTRACE_FRAMES));
    config
}

/// Compiled code, and the profiler's cache file that keeps it (none without a cache
/// directory): what else the host keeps of the same code is named after it
/// ([`cache::beside`]), since the file's name is made of everything the code is made of.
pub(in crate::host) struct Kept<T> {
    /// The module or component.
    pub(in crate::host) code: T,
    /// Its file in the cache.
    pub(in crate::host) file: Option<PathBuf>,
}

/// `wasm` compiled by `engine`, kept compiled in the profiler's cache and mapped from
/// there on the next run. Plain and instrumented modules alike, so that a plain run
/// (`--no-instrument`) starts as a profiled one does.
pub(in crate::host) fn module(engine: &Engine, wasm: &[u8]) -> anyhow::Result<Kept<Module>> {
    through_cache(
        engine,
        wasm,
        || Module::new(engine, wasm),
        Module::serialize,
        |path| {
            // perf names code it finds in a file's mapping by that file's symbols, and only
            // anonymous code by the perf map: where the map is asked for, the code is read
            // into memory rather than mapped from the cache.
            if super::perf_map::asked() {
                let bytes = std::fs::read(path)?;
                // SAFETY: as `through_cache` requires.
                unsafe { Module::deserialize(engine, &bytes) }
            } else {
                // SAFETY: as `through_cache` requires.
                unsafe { Module::deserialize_file(engine, path) }
            }
        },
    )
    .context("wasmtime could not compile the module")
}

/// The component `wasm` compiled by `engine`, through the profiler's cache as [`module`].
#[cfg(unix)]
pub(super) fn component(engine: &Engine, wasm: &[u8]) -> anyhow::Result<Kept<Component>> {
    through_cache(
        engine,
        wasm,
        || Component::new(engine, wasm),
        Component::serialize,
        // SAFETY: as `through_cache` requires.
        |path| unsafe { Component::deserialize_file(engine, path) },
    )
    .context("wasmtime could not compile the component")
}

/// What `compile` makes of `wasm` with `engine`, read with `deserialize` from the file
/// that `serialize` wrote in the profiler's cache on an earlier run, else made and kept
/// there. `deserialize` may only be given files that `serialize` wrote: it is, for this
/// cache's files, which are named by the module's bytes and by the engine's settings that
/// compiled code depends on, written whole or not at all, by this build of the profiler
/// (wasmtime checks again that the code was compiled for this engine).
fn through_cache<T>(
    engine: &Engine,
    wasm: &[u8],
    compile: impl FnOnce() -> wasmtime::Result<T>,
    serialize: impl FnOnce(&T) -> wasmtime::Result<Vec<u8>>,
    deserialize: impl FnOnce(&Path) -> wasmtime::Result<T>,
) -> anyhow::Result<Kept<T>> {
    let mut compatible = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compatible);
    let kept = cache::path(Kind::Compiled, &[&compatible.finish().to_le_bytes(), wasm]);
    if let Some(kept) = &kept {
        if let Ok(found) = deserialize(kept) {
            cache::used(kept);
            return Ok(Kept {
                code: found,
                file: Some(kept.clone()),
            });
        }
    }
    let made = compile().map_err(anyhow::Error::from)?;
    if let Some(kept) = &kept {
        if let Ok(bytes) = serialize(&made) {
            cache::write(kept, &bytes);
        }
    }
    Ok(Kept {
        code: made,
        file: kept,
    })
}
