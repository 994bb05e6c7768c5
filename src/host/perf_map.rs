//! The perf map of a compiled module (`/tmp/perf-PID.map`), so that `perf report` names its
//! functions: written when [`PERF_MAP_VAR`] is set, for checking the stack sampler against
//! `perf record` on the same run (BENCHMARKS.md). Each function is named
//! `wasm[ID] NAME`, ID its function id in the profile (its index in the original module).

use std::io::Write as _;

use crate::meta::{self, Meta};

/// The environment variable that asks for the perf map.
pub const PERF_MAP_VAR: &str = "WASMPROF_PERF_MAP";

/// Whether [`PERF_MAP_VAR`] asks for the perf map.
pub(super) fn asked() -> bool {
    std::env::var_os(PERF_MAP_VAR).is_some()
}

/// Appends `module`'s functions to the process's perf map, if [`PERF_MAP_VAR`] asks; an
/// instrumented module's by the function ids of its `meta` (the profiler's own functions
/// as `wasmprof`).
pub(super) fn write_if_asked(module: &wasmtime::Module, meta: Option<&Meta>) -> anyhow::Result<()> {
    if !asked() {
        return Ok(());
    }
    let text = module.text().as_ptr() as usize;
    let mut lines = String::new();
    for f in module.functions() {
        let index = f.index.as_u32();
        let id = meta.map_or(index, |meta| {
            meta.frames
                .get(index as usize)
                .copied()
                .unwrap_or(meta::NO_FUNCTION)
        });
        let name = match (id, meta) {
            (meta::NO_FUNCTION, _) => "wasmprof".to_string(),
            (id, Some(meta)) => meta
                .functions
                .get(id as usize)
                .map_or_else(String::new, |f| f.symbol.name.clone()),
            (_, None) => f.name.clone().unwrap_or_default(),
        };
        lines.push_str(&format!(
            "{:x} {:x} wasm[{id}] {name}\n",
            text + f.offset,
            f.len
        ));
    }
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    file.write_all(lines.as_bytes())?;
    Ok(())
}
