//! The node host: runs a JS program that `wasmprof-emcc` linked (Emscripten's glue with the
//! profiler's JS runtime, beside its .wasm), where the runtime saves the profiler's memory
//! to a dump file when the program ends, traps or exits.

use std::path::Path;
use std::time::Instant;

use super::js_process::{self, JsProcess};
use super::{Host, Outcome, Prepared, RunConfig};
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{instrument_in_place, Options};
use crate::meta::Meta;
use crate::status::Status;

/// The environment variable that names the node to run programs with (a path, or a name
/// looked up on PATH); `node` on PATH without it.
pub const NODE_VAR: &str = "WASMPROF_NODE";

/// node, for the programs that Emscripten links.
#[derive(Debug, Clone, Copy, Default)]
pub struct Node;

impl Node {
    /// Whether `path` names a JS program (what Emscripten links for node), not a module:
    /// a `.js`, `.mjs` or `.cjs` file, or one without an extension that has its `.wasm`
    /// beside it (what emcc writes for `-o prog`).
    pub fn runs(path: &Path) -> bool {
        match path.extension() {
            Some(ext) => ext == "js" || ext == "mjs" || ext == "cjs",
            None => path.with_extension("wasm").is_file(),
        }
    }
}

impl Host for Node {
    /// Instruments the module the program loads (its .wasm beside it) in place, for a JS
    /// host (the state in its own memory, and the variant for a node that allows one
    /// memory), unless its link instrumented it with the same options already.
    fn prepare(
        &self,
        js: &Path,
        options: Option<&Options>,
        status: Status,
    ) -> Result<Prepared, Error> {
        let Some(options) = options else {
            return Err(Error::input(
                js,
                "--no-instrument runs wasip1 modules; run a JS program with node itself",
            ));
        };
        let options = options.clone().for_js_host();
        let wasm = js.with_extension("wasm");
        let started = Instant::now();
        let spinner = status.spinner("Instrumenting", relative(&wasm));
        let done = instrument_in_place(&wasm, &options)?;
        drop(spinner);
        if let Some(meta) = &done {
            status.step(
                "Instrumented",
                format!(
                    "{} ({} functions) in {:.2}s",
                    relative(&wasm),
                    meta.functions.len(),
                    started.elapsed().as_secs_f64()
                ),
            );
        }
        let bytes = std::fs::read(&wasm).map_err(|e| Error::input(&wasm, e))?;
        let meta = match done {
            Some(meta) => meta,
            None => Meta::from_module(&bytes)
                .map_err(|e| Error::input(&wasm, format!("{e:#}")))?
                .ok_or_else(|| Error::input(&wasm, "does not carry the profiler"))?,
        };
        Ok(Prepared {
            path: js.to_path_buf(),
            wasm: bytes,
            meta: Some(meta),
        })
    }

    /// Runs `node PROGRAM ARGS` in the configured directory, with the runtime told where to
    /// save the dump and how often to sample. The exit code is node's own: after a trap the
    /// runtime can only guess it.
    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError> {
        let node = match std::env::var_os(NODE_VAR) {
            Some(node) => which::which(&node).map_err(|_| {
                HostError::Unavailable(format!(
                    "cannot run `{}`, which {NODE_VAR} names to run the \
                     wasm32-unknown-emscripten target's programs",
                    node.to_string_lossy()
                ))
            })?,
            None => which::which("node").map_err(|_| {
                HostError::Unavailable(format!(
                    "cannot find `node` on PATH, which runs the wasm32-unknown-emscripten \
                     target's programs (or name one in {NODE_VAR})"
                ))
            })?,
        };
        let (code, dump) = JsProcess::new(&node, &program.path, config).run_with_dump_file()?;
        js_process::outcome(code, dump, "is it linked by wasmprof-emcc?")
    }

    fn calibrated(&self) -> bool {
        false // the calibration measures the embedded wasmtime's probes, not node's
    }
}
