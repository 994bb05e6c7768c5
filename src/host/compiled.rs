//! How the host compiles: the settings of every engine, and the caches that spare a run
//! its compiling. A program's module or component is read back from the profiler's
//! [`cache`] as wasmtime serialized it, mapped as it lies; the profiler's own small modules
//! go through the compilation cache the wasmtime CLI keeps.

use std::hash::{Hash as _, Hasher as _};
use std::path::Path;
use std::sync::OnceLock;

use anyhow::Context as _;
#[cfg(unix)]
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

use crate::cache::{self, Kind};

/// The compilation cache that the wasmtime CLI keeps too (as its configuration file says,
/// else on, in the user's cache directory): a module compiled once, plain or instrumented,
/// loads from it on the next run instead of compiling again. None when it cannot be set up
/// (a configuration file that does not parse): the module is compiled, as without it.
///
/// Its worker thread never recompresses an entry here. Once a module has been loaded 256
/// times (wasmtime's default threshold), every load of it until the recompression ends
/// has that thread list the whole cache directory, a `stat` per entry, and then compress
/// the entry again at zstd's level 20, on a thread beside the program being measured: it
/// took the CPU of the word sampler's thread and of the program (BENCHMARKS.md, "Run time
/// in the embedded wasmtime": a 2 ms kernel's `time` run read up to 2.8 ms). The
/// recompression only saves disk space; the wasmtime CLI still does it in its own runs.
fn wasmtime_cache() -> Option<wasmtime::Cache> {
    static CACHE: OnceLock<Option<wasmtime::Cache>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let mut config = wasmtime::CacheConfig::from_file(None).ok()?;
            config.with_optimized_compression_usage_counter_threshold(u64::MAX);
            wasmtime::Cache::new(config).ok()
        })
        .clone()
}

/// The most wasm frames a trap's backtrace keeps: wasmtime keeps 20 unless told, and a run
/// that ends deep inside (a stack overflow: up to about 32,000 frames in wasmtime's 512 KiB
/// stack) needs its whole open stack. A backtrace this long is marked as cut short.
pub(super) const BACKTRACE_FRAMES: usize = 1 << 16;

/// What every engine of the host is configured with: the compilation cache, and
/// backtraces of [`BACKTRACE_FRAMES`].
pub(super) fn engine_config() -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.cache(wasmtime_cache());
    config.wasm_backtrace_max_frames(std::num::NonZeroUsize::new(BACKTRACE_FRAMES));
    config
}

/// `wasm` compiled by `engine`, kept compiled in the profiler's cache as wasmtime
/// serializes it and mapped from there as it lies on the next run: without the SHA-256 of
/// the module and the decompression that wasmtime's own cache costs each run (3 ms of a
/// 1.7 MB test binary's). Plain and instrumented modules alike, so that a plain run
/// (`--no-instrument`) starts as fast as a profiled one.
pub(super) fn module(engine: &Engine, wasm: &[u8]) -> anyhow::Result<Module> {
    through_cache(
        engine,
        wasm,
        || Module::new(engine, wasm),
        Module::serialize,
        // SAFETY: as `through_cache` requires.
        |path| unsafe { Module::deserialize_file(engine, path) },
    )
    .context("wasmtime could not compile the module")
}

/// The component `wasm` compiled by `engine`, through the profiler's cache as [`module`].
#[cfg(unix)]
pub(super) fn component(engine: &Engine, wasm: &[u8]) -> anyhow::Result<Component> {
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
) -> anyhow::Result<T> {
    let mut compatible = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut compatible);
    let kept = cache::path(Kind::Compiled, &[&compatible.finish().to_le_bytes(), wasm]);
    if let Some(kept) = &kept {
        if let Ok(found) = deserialize(kept) {
            cache::used(kept);
            return Ok(found);
        }
    }
    let made = compile().map_err(anyhow::Error::from)?;
    if let Some((kept, bytes)) = kept.zip(serialize(&made).ok()) {
        cache::write(&kept, &bytes);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_cache_never_recompresses_beside_a_run() {
        let cache = wasmtime_cache().expect("a cache: no configuration file here");
        assert_eq!(
            cache.optimized_compression_usage_counter_threshold(),
            u64::MAX
        );
    }
}
