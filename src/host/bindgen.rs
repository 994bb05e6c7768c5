//! The wasm-bindgen host: runs a `wasm32-unknown-unknown` test or bench binary that uses
//! wasm-bindgen through `wasm-bindgen-test-runner`, the runner cargo is told to use for
//! such crates, under node.
//!
//! The module is instrumented *before* the runner's bindgen pass (see
//! `instrument::bindgen` for what is left alone there and why), with its state in a state
//! module, as for every JS host. The instrumented module imports that state as the module
//! `wasmprof`; wasm-bindgen's glue turns such an import into `require("wasmprof")`, and the
//! runner runs node with our directory first on `NODE_PATH`, where `wasmprof.js`
//! ([`crate::js_runtime::for_bindgen`]) instantiates the state module and, when node exits,
//! saves the dump to `$WASMPROF_OUT` as Emscripten's runtime does. The runner's output, test
//! results and exit code are its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{Host, Outcome, Prepared, RunConfig};
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{instrument, Options};
use crate::meta::{self, Meta};
use crate::profile::DumpFile;
use crate::status::Status;

/// The runner's name on PATH.
const RUNNER: &str = "wasm-bindgen-test-runner";
/// The module wasm-bindgen's macros import from; a module that has it was built for bindgen.
const PLACEHOLDER: &str = "__wbindgen_placeholder__";
/// The custom section where wasm-bindgen's macros write their version.
const UNSTABLE_SECTION: &str = "__wasm_bindgen_unstable";

/// `wasm-bindgen-test-runner`, for wasm-bindgen's test and bench binaries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bindgen;

impl Bindgen {
    /// Whether `path` is a module built for wasm-bindgen (it imports from its placeholder
    /// module).
    pub fn runs(path: &Path) -> bool {
        path.extension().is_some_and(|ext| ext == "wasm")
            && std::fs::read(path).is_ok_and(|wasm| imports_placeholder(&wasm))
    }
}

/// Whether `wasm` imports from wasm-bindgen's placeholder module.
fn imports_placeholder(wasm: &[u8]) -> bool {
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload {
            Ok(wasmparser::Payload::ImportSection(imports)) => {
                return imports
                    .into_imports()
                    .any(|i| i.is_ok_and(|i| i.module == PLACEHOLDER));
            }
            Ok(wasmparser::Payload::CodeSectionStart { .. }) | Err(_) => return false,
            _ => {}
        }
    }
    false
}

/// Whether `wasm` exports a test or benchmark for the runner (`__wbgt_*`, `__wbgb_*`);
/// without one the runner runs nothing.
fn has_tests(wasm: &[u8]) -> bool {
    wasmparser::Parser::new(0)
        .parse_all(wasm)
        .filter_map(Result::ok)
        .any(|payload| match payload {
            wasmparser::Payload::ExportSection(exports) => exports.into_iter().any(|e| {
                e.is_ok_and(|e| e.name.starts_with("__wbgt_") || e.name.starts_with("__wbgb_"))
            }),
            _ => false,
        })
}

/// Where the runner would run the tests instead of node, if it would: what the crate asks
/// (`wasm_bindgen_test_configure!`, in the `__wasm_bindgen_test_unstable` section) or,
/// without that, the environment (`WASM_BINDGEN_USE_BROWSER`, ...), as the runner decides.
fn not_under_node(wasm: &[u8]) -> Option<&'static str> {
    const MODES: [(u8, &str, &str); 5] = [
        (1, "in a browser", "WASM_BINDGEN_USE_BROWSER"),
        (2, "in a dedicated worker", "WASM_BINDGEN_USE_DEDICATED_WORKER"),
        (3, "in a shared worker", "WASM_BINDGEN_USE_SHARED_WORKER"),
        (4, "in a service worker", "WASM_BINDGEN_USE_SERVICE_WORKER"),
        (6, "under Emscripten", "WASM_BINDGEN_USE_EMSCRIPTEN"),
    ];
    match meta::custom_section(wasm, "__wasm_bindgen_test_unstable").ok()? {
        Some(section) => MODES
            .iter()
            .find(|(byte, _, _)| section.contains(byte))
            .map(|&(_, place, _)| place),
        None if std::env::var_os("WASM_BINDGEN_USE_DENO").is_some() => Some("under deno"),
        None => MODES
            .iter()
            .find(|(_, _, var)| std::env::var_os(var).is_some())
            .map(|&(_, place, _)| place),
    }
}

/// The wasm-bindgen version the module's macros were of (the crate's `wasm-bindgen`, as
/// cargo's lockfile resolved it), from the `__wasm_bindgen_unstable` section they write.
fn bindgen_version(wasm: &[u8]) -> Option<String> {
    let section = meta::custom_section(wasm, UNSTABLE_SECTION).ok()??;
    let text = String::from_utf8_lossy(&section[..section.len().min(256)]);
    let at = text.find("\"version\":\"")? + "\"version\":\"".len();
    let version = &text[at..];
    Some(version[..version.find('"')?].to_string())
}

/// The `wasm-bindgen-test-runner` on PATH if it is of `version`; else the one-line error
/// that says how to install it.
fn runner(version: &str) -> Result<PathBuf, HostError> {
    let install = format!("cargo install wasm-bindgen-cli --version {version}");
    let Ok(path) = which::which(RUNNER) else {
        return Err(HostError::Unavailable(format!(
            "cannot find `{RUNNER}` on PATH (the crate's wasm-bindgen is {version}); \
             install it with `{install}`"
        )));
    };
    let output = Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| HostError::Unavailable(format!("cannot run {}: {e}", path.display())))?;
    let said = String::from_utf8_lossy(&output.stdout);
    let found = said
        .split_whitespace()
        .nth(1)
        .unwrap_or("an unknown version");
    if found != version {
        return Err(HostError::Unavailable(format!(
            "{} is {found}, but the crate's wasm-bindgen is {version} and the two must match; \
             install it with `{install}`",
            path.display()
        )));
    }
    Ok(path)
}

impl Host for Bindgen {
    /// Instruments the module for a JS host (the state in a state module), unless it
    /// carries the profiler already.
    fn prepare(
        &self,
        path: &Path,
        options: Option<&Options>,
        status: Status,
    ) -> Result<Prepared, Error> {
        let Some(options) = options else {
            return Err(Error::input(
                path,
                "--no-instrument runs wasip1 modules; run a wasm-bindgen module with \
                 wasm-bindgen-test-runner itself",
            ));
        };
        let original = std::fs::read(path).map_err(|e| Error::input(path, e))?;
        if let Some(meta) =
            Meta::from_module(&original).map_err(|e| Error::input(path, format!("{e:#}")))?
        {
            return Ok(Prepared {
                path: path.to_path_buf(),
                wasm: original,
                meta: Some(meta),
            });
        }
        let started = Instant::now();
        let spinner = status.spinner("Instrumenting", relative(path));
        // No exception handlers of ours in the thunks: bindgen tells how the module
        // handles exceptions by the instructions it finds (legacy `try` = a panic=unwind
        // build) and would generate other glue for its `catch` imports. A JS exception
        // thrown through the module's frames is closed at the next entry from JS instead.
        let options = Options {
            host_exceptions: false,
            ..options.clone().for_js_host()
        };
        let done = instrument(&original, &options).map_err(|e| Error::input(path, e))?;
        drop(spinner);
        status.step(
            "Instrumented",
            format!(
                "{} ({} functions) in {:.2}s",
                relative(path),
                done.meta.functions.len(),
                started.elapsed().as_secs_f64()
            ),
        );
        Ok(Prepared {
            path: path.to_path_buf(),
            wasm: done.wasm,
            meta: Some(done.meta),
        })
    }

    /// Runs `wasm-bindgen-test-runner MODULE ARGS` in the configured directory, the
    /// instrumented module and `wasmprof.js` in a temporary directory, the dump file named
    /// in `WASMPROF_OUT`.
    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError> {
        if !has_tests(&program.wasm) {
            // What the runner says and does for such a binary (it runs nothing).
            if config.inherit_stdio {
                println!("no tests to run!");
            }
            return Err(HostError::NoTests);
        }
        if let Some(elsewhere) = not_under_node(&program.wasm) {
            return Err(HostError::Refused(format!(
                "its tests run {elsewhere}; cargo-wasmprof runs wasm-bindgen tests under \
                 node only so far (`cargo test` runs them)"
            )));
        }
        let version = bindgen_version(&program.wasm).ok_or_else(|| {
            HostError::Refused(format!(
                "carries no `{UNSTABLE_SECTION}` section that says its wasm-bindgen version"
            ))
        })?;
        let runner = runner(&version)?;
        let meta = program
            .meta
            .as_ref()
            .ok_or_else(|| HostError::Refused("does not carry the profiler".into()))?;
        let state = meta::custom_section(&program.wasm, meta::STATE_SECTION)
            .ok()
            .flatten()
            .ok_or_else(|| {
                HostError::Refused(
                    "was instrumented for the embedded wasmtime (--state own-memory); a JS \
                     host needs the state module"
                        .into(),
                )
            })?;
        let unavailable = |e: std::io::Error| {
            HostError::Unavailable(format!("cannot write the program's files: {e}"))
        };
        let dir = tempfile::Builder::new()
            .prefix("wasmprof-bindgen-")
            .tempdir()
            .map_err(unavailable)?;
        let name = program
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "program.wasm".into());
        let module = dir.path().join(&name);
        std::fs::write(&module, &program.wasm).map_err(unavailable)?;
        std::fs::write(
            dir.path().join("wasmprof.js"),
            crate::js_runtime::for_bindgen(&name, meta, state),
        )
        .map_err(unavailable)?;
        let dump = dir.path().join("dump.json");
        let node_path = std::env::join_paths(
            std::iter::once(dir.path().to_path_buf()).chain(
                std::env::var_os("NODE_PATH")
                    .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                    .unwrap_or_default(),
            ),
        )
        .map_err(|e| HostError::Unavailable(format!("NODE_PATH: {e}")))?;
        let mut command = Command::new(&runner);
        command
            .arg(&module)
            .args(&config.args)
            .current_dir(&config.dir)
            .env("NODE_PATH", node_path)
            .env("WASMPROF_OUT", &dump)
            .env(
                "WASMPROF_SAMPLE_INTERVAL",
                config.sample_interval.as_micros().max(1).to_string(),
            );
        if !config.inherit_stdio {
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
        }
        let status = command
            .status()
            .map_err(|e| HostError::Unavailable(format!("cannot run {}: {e}", runner.display())))?;
        let code = status.code().unwrap_or(1);
        if std::fs::metadata(&dump).map_or(true, |m| m.len() == 0) {
            return Err(HostError::NoProfile { code });
        }
        let parts = DumpFile::read(&dump)
            .and_then(DumpFile::into_parts)
            .map_err(|e| HostError::BadProfile(format!("{e:#}")))?;
        Ok(Outcome {
            exit_code: code,
            trap: parts.run.trap,
            state: Some(parts.dump),
            wall_ns: parts.run.wall_ns,
            threads: parts.threads,
            lost_threads: parts.lost_threads,
        })
    }

    fn calibrated(&self) -> bool {
        false // the calibration measures the embedded wasmtime's probes, not node's
    }
}
