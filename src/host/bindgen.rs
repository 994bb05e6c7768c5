//! The wasm-bindgen host: runs a `wasm32-unknown-unknown` test or bench binary that uses
//! wasm-bindgen through `wasm-bindgen-test-runner`, the runner cargo is told to use for
//! such crates, under node or in a headless browser, as the crate or the environment asks.
//!
//! The module is instrumented *before* the runner's bindgen pass (see
//! `instrument::bindgen` for what is left alone there and why), with its state in a state
//! module, as for every JS host. The instrumented module imports that state from a module
//! of ours, which wasm-bindgen's glue imports as it is named ([`crate::js_runtime`] writes
//! it; it carries the state module and the meta):
//!
//! - under node, the name is `wasmprof`: the glue's `require("wasmprof")` finds our
//!   `wasmprof.js` first on `NODE_PATH`, and the runtime saves the dump to the file its
//!   environment names when node exits, as Emscripten's runtime does;
//! - in a browser, the name is the URL of a server of ours ([`DumpServer`]): the glue's ES
//!   module import fetches the runtime from it, and the runtime posts the dump back when
//!   the page says the tests are done, before the runner closes the browser; in a dedicated
//!   worker, where the glue and the tests run there, when the worker's message with the
//!   summary leaves for the page.
//!
//! The runner's output, test results and exit code are its own.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::dump_server::DumpServer;
use super::js_process::{self, JsProcess};
use super::{cached_by_stamp, say_instrumented, Host, Outcome, Prepared, RunConfig};
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{import_state_from, instrument_cached, Options};
use crate::meta::{self, Meta};
use crate::status::Status;

/// The runner's name on PATH.
pub const RUNNER: &str = "wasm-bindgen-test-runner";
/// The target whose binaries cargo hands to the runner.
const TARGET: &str = "wasm32-unknown-unknown";
/// The module wasm-bindgen's macros import from; a module that has it was built for bindgen.
const PLACEHOLDER: &str = "__wbindgen_placeholder__";
/// The runner's timeout for a browser suite (seconds), and its default.
const TIMEOUT: &str = "WASM_BINDGEN_TEST_TIMEOUT";
const DEFAULT_TIMEOUT_S: u32 = 20;
/// The custom section where wasm-bindgen's macros write their version.
const UNSTABLE_SECTION: &str = "__wasm_bindgen_unstable";

/// `wasm-bindgen-test-runner`, for wasm-bindgen's test and bench binaries.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bindgen;

impl Bindgen {
    /// Whether `path` is a module for wasm-bindgen's runner: one built for wasm-bindgen (it
    /// imports from its placeholder module), or any that cargo built for
    /// `wasm32-unknown-unknown`, whose runner is wasm-bindgen's by convention: a test binary
    /// whose tests are all configured out imports nothing of wasm-bindgen, and the runner
    /// runs nothing of it.
    pub fn runs(path: &Path) -> bool {
        let for_unknown = path.components().any(|c| c.as_os_str() == TARGET);
        path.extension().is_some_and(|ext| ext == "wasm")
            && (for_unknown || imports_placeholder(path))
    }
}

/// Whether the module at `path` imports from wasm-bindgen's placeholder module. Only the
/// sections up to the imports are read: they come before the code and the DWARF, most of a
/// test binary.
fn imports_placeholder(path: &Path) -> bool {
    use std::io::Read as _;
    use wasmparser::{Chunk, Payload};
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let mut parser = wasmparser::Parser::new(0);
    let mut buf = Vec::new();
    let mut eof = false;
    loop {
        match parser.parse(&buf, eof) {
            Ok(Chunk::NeedMoreData(hint)) if !eof => {
                match (&mut file).take(hint.max(1 << 16)).read_to_end(&mut buf) {
                    Ok(0) => eof = true,
                    Ok(_) => {}
                    Err(_) => return false,
                }
            }
            Ok(Chunk::Parsed { consumed, payload }) => {
                match payload {
                    Payload::ImportSection(imports) => {
                        return imports
                            .into_imports()
                            .any(|i| i.is_ok_and(|i| i.module == PLACEHOLDER));
                    }
                    Payload::CodeSectionStart { .. } | Payload::End(_) => return false,
                    _ => {}
                }
                buf.drain(..consumed);
            }
            _ => return false,
        }
    }
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

/// Where the runner runs a binary's tests (its test mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TestMode {
    /// Under node, the runner's default.
    Node,
    /// In a headless browser's page (`run_in_browser`, `WASM_BINDGEN_USE_BROWSER`), or in a
    /// dedicated, shared or service worker of it (`run_in_dedicated_worker`,
    /// `WASM_BINDGEN_USE_DEDICATED_WORKER`, and the others'): the runtime knows which it is
    /// in.
    Browser,
    /// Somewhere cargo-wasmprof does not run them yet, in words.
    Elsewhere(&'static str),
}

/// Where the runner runs the tests: what the crate asks (`wasm_bindgen_test_configure!`,
/// in the `__wasm_bindgen_test_unstable` section) or, without that, the environment
/// (`WASM_BINDGEN_USE_BROWSER`, ...), as the runner decides.
fn test_mode(wasm: &[u8]) -> TestMode {
    const MODES: [(u8, TestMode, &str); 6] = [
        (1, TestMode::Browser, "WASM_BINDGEN_USE_BROWSER"),
        (2, TestMode::Browser, "WASM_BINDGEN_USE_DEDICATED_WORKER"),
        (3, TestMode::Browser, "WASM_BINDGEN_USE_SHARED_WORKER"),
        (4, TestMode::Browser, "WASM_BINDGEN_USE_SERVICE_WORKER"),
        (5, TestMode::Node, "WASM_BINDGEN_USE_NODE"),
        (
            6,
            TestMode::Elsewhere("under Emscripten"),
            "WASM_BINDGEN_USE_EMSCRIPTEN",
        ),
    ];
    match meta::custom_section(wasm, "__wasm_bindgen_test_unstable") {
        Ok(Some(section)) => MODES
            .iter()
            .find(|(byte, _, _)| section.contains(byte))
            .map_or(TestMode::Node, |&(_, place, _)| place),
        _ if std::env::var_os("WASM_BINDGEN_USE_DENO").is_some() => {
            TestMode::Elsewhere("under deno")
        }
        _ => MODES
            .iter()
            .find(|(_, _, var)| std::env::var_os(var).is_some())
            .map_or(TestMode::Node, |&(_, place, _)| place),
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

/// Whether the runner's browser mode is one cargo-wasmprof can run: headless (it drives
/// the browser and ends), with a WebDriver server to drive it with, with ES modules
/// (no-modules glue cannot import our runtime).
fn browser_supported() -> Result<(), HostError> {
    if std::env::var_os("NO_HEADLESS").is_some() {
        return Err(HostError::Refused(
            "NO_HEADLESS is set: the runner would serve its tests to a browser of yours and \
             never end; cargo-wasmprof runs browser tests headless (unset NO_HEADLESS)"
                .into(),
        ));
    }
    // The WebDriver servers the runner looks for, as it does: a remote one named in
    // `<NAME>_REMOTE`, a binary in `<NAME>`, or on PATH.
    const DRIVERS: [&str; 4] = [
        "geckodriver",
        "safaridriver",
        "chromedriver",
        "msedgedriver",
    ];
    let named = |driver: &str| {
        let var = driver.to_uppercase();
        std::env::var_os(&var).is_some() || std::env::var_os(format!("{var}_REMOTE")).is_some()
    };
    if !DRIVERS
        .iter()
        .any(|driver| named(driver) || which::which(driver).is_ok())
    {
        return Err(HostError::Unavailable(
            "its tests run in a browser, which wasm-bindgen-test-runner drives through a \
             WebDriver server, and none is on PATH: install Chromium's (Debian: `apt install \
             chromium chromium-driver`) or Firefox's geckodriver, or name one with \
             CHROMEDRIVER=/path"
                .into(),
        ));
    }
    if std::env::var_os("WASM_BINDGEN_USE_NO_MODULE").is_some() {
        return Err(HostError::Refused(
            "WASM_BINDGEN_USE_NO_MODULE is set: wasm-bindgen's no-modules glue cannot import \
             the profiler's runtime, an ES module (unset it)"
                .into(),
        ));
    }
    Ok(())
}

/// `NODE_PATH` with `dir` first.
fn node_path(dir: &Path) -> Result<std::ffi::OsString, HostError> {
    std::env::join_paths(
        std::iter::once(dir.to_path_buf()).chain(
            std::env::var_os("NODE_PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default(),
        ),
    )
    .map_err(|e| HostError::Unavailable(format!("NODE_PATH: {e}")))
}

fn cannot_write(e: std::io::Error) -> HostError {
    HostError::Unavailable(format!("cannot write the program's files: {e}"))
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
        // No exception handlers of ours in the thunks: a JS exception thrown through the
        // module's frames is closed at the next entry from JS instead.
        let options = options.clone().for_wasm_bindgen();
        let stamp = match cached_by_stamp(path, &options, status) {
            ControlFlow::Break(found) => return Ok(found),
            ControlFlow::Continue(stamp) => stamp,
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
        let (done, cached) = instrument_cached(&original, &options, stamp.as_ref())
            .map_err(|e| Error::input(path, e))?;
        drop(spinner);
        say_instrumented(status, path, &done, started, cached);
        Ok(Prepared {
            path: path.to_path_buf(),
            wasm: done.wasm,
            meta: Some(done.meta),
        })
    }

    /// Runs `wasm-bindgen-test-runner MODULE ARGS` in the configured directory, the
    /// instrumented module in a temporary directory; under node with our `wasmprof.js`
    /// beside it and the dump file named in the runtime's environment, in a browser with
    /// our server up.
    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError> {
        if !has_tests(&program.wasm) {
            // What the runner says and does for such a binary (it runs nothing).
            if config.inherit_stdio {
                println!("no tests to run!");
            }
            return Err(HostError::NoTests);
        }
        let mode = test_mode(&program.wasm);
        if let TestMode::Elsewhere(elsewhere) = mode {
            return Err(HostError::Refused(format!(
                "its tests run {elsewhere}; cargo-wasmprof runs wasm-bindgen tests under \
                 node, in a browser's page and in its workers so far (`cargo test` runs them)"
            )));
        }
        if mode == TestMode::Browser {
            browser_supported()?;
        }
        let version = bindgen_version(&program.wasm).ok_or_else(|| {
            HostError::Refused(format!(
                "carries no `{UNSTABLE_SECTION}` section that says its wasm-bindgen version"
            ))
        })?;
        let run = RunnerRun {
            runner: runner(&version)?,
            program,
            config,
            meta: program
                .meta
                .as_ref()
                .ok_or_else(|| HostError::Refused("does not carry the profiler".into()))?,
            state: meta::custom_section(&program.wasm, meta::STATE_SECTION)
                .ok()
                .flatten()
                .ok_or_else(|| {
                    HostError::Refused(
                        "was instrumented for the embedded wasmtime (--state own-memory); a \
                         JS host needs the state module"
                            .into(),
                    )
                })?,
            dir: tempfile::Builder::new()
                .prefix("wasmprof-bindgen-")
                .tempdir()
                .map_err(cannot_write)?,
        };
        let (code, dump) = match mode {
            TestMode::Browser => run.in_browser()?,
            _ => run.under_node()?,
        };
        js_process::outcome(code, dump, "the runner's output says why")
    }

    fn calibrated(&self) -> bool {
        false // the calibration measures the embedded wasmtime's probes, not node's
    }
}

/// One run of the runner over an instrumented module: the runner, the program and how to
/// run it, its meta and state module, and the temporary directory the module is run from.
struct RunnerRun<'a> {
    runner: PathBuf,
    program: &'a Prepared,
    config: &'a RunConfig,
    meta: &'a Meta,
    state: &'a [u8],
    dir: tempfile::TempDir,
}

impl RunnerRun<'_> {
    /// The module's file name, as the runner and the runtime name it.
    fn name(&self) -> String {
        self.program
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "program.wasm".into())
    }

    /// The runner's process over the module written into the temporary directory.
    fn process(&self, wasm: &[u8]) -> Result<JsProcess, HostError> {
        let module = self.dir.path().join(self.name());
        std::fs::write(&module, wasm).map_err(cannot_write)?;
        Ok(JsProcess::new(&self.runner, &module, self.config))
    }

    /// Under node: our `wasmprof.js` beside the module, first on `NODE_PATH`, where the
    /// glue's `require("wasmprof")` finds it; the runtime saves the dump to a file.
    fn under_node(&self) -> Result<(i32, Option<Vec<u8>>), HostError> {
        let mut process = self.process(&self.program.wasm)?;
        std::fs::write(
            self.dir.path().join("wasmprof.js"),
            crate::js_runtime::for_bindgen(&self.name(), self.meta, self.state),
        )
        .map_err(cannot_write)?;
        process
            .command
            .env("NODE_PATH", node_path(self.dir.path())?);
        process.run_with_dump_file()
    }

    /// In a browser: the module imports its state from our server's URL, known once it is
    /// up; the page posts the dump back to it (the dump so far, while the tests run).
    fn in_browser(&self) -> Result<(i32, Option<Vec<u8>>), HostError> {
        let server = DumpServer::start()
            .map_err(|e| HostError::Unavailable(format!("cannot start a server: {e}")))?;
        let renamed = import_state_from(&self.program.wasm, &server.runtime_url())
            .map_err(HostError::refused)?;
        server.serve(crate::js_runtime::for_bindgen_page(
            &self.name(),
            self.meta,
            self.state,
            &renamed.names,
            &server.dump_url(),
            &server.so_far_url(),
        ));
        let mut process = self.process(&renamed.wasm)?;
        // The runner gives a suite 20 s, and reads the page through WebDriver calls that
        // wait as long for a page busy in a long test. The probes make a suite slower
        // (serde-wasm-bindgen's in Chromium: 3x with instructions, about 40x with
        // exact-time, which reads the page's clock through JS at every entry and exit), so
        // a suite that passes plain gets as much more, unless the user chose.
        if std::env::var_os(TIMEOUT).is_none() {
            process
                .command
                .env(TIMEOUT, (50 * DEFAULT_TIMEOUT_S).to_string());
        }
        let code = process.run()?;
        let posted = server.finish();
        if posted.as_ref().is_some_and(|p| p.so_far) {
            crate::status::warning(format!(
                "{}: the page was closed before its tests were done (the runner's timeout, \
                 {TIMEOUT}, or a crash); the profile is of what ran until the page last sent it",
                relative(&self.program.path)
            ));
        }
        Ok((code, posted.map(|p| p.dump)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module is told for wasm-bindgen's by its imports alone, wherever it lies, and
    /// whatever follows them: a type section larger than the first read, code after.
    #[test]
    fn a_module_for_bindgen_is_told_by_its_imports() {
        let types: String = (0..5000)
            .map(|i| format!("(type (func (param {})))", "i32 ".repeat(i % 40)))
            .collect();
        let module = |import: &str| {
            wat::parse_str(format!(
                r#"(module {types} (import "{import}" "f" (func)) (func (call 0)))"#
            ))
            .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        for (import, expected) in [(PLACEHOLDER, true), ("env", false)] {
            let path = dir.path().join(format!("{import}.wasm"));
            let wasm = module(import);
            assert!(wasm.len() > 1 << 16, "{}", wasm.len());
            std::fs::write(&path, wasm).unwrap();
            assert_eq!(Bindgen::runs(&path), expected, "{import}");
        }
        let path = dir.path().join("none.wasm");
        std::fs::write(&path, wat::parse_str("(module (func))").unwrap()).unwrap();
        assert!(!Bindgen::runs(&path));
        assert!(!Bindgen::runs(&dir.path().join("missing.wasm")));
    }
}
