//! The hosts: what makes a program ready to profile, runs it, and hands back how the run
//! ended with what its profiler left. Every host sits behind one seam, [`Host`]:
//!
//! - [`Embedded`]: wasmtime inside cargo-wasmprof, for WASI command modules;
//! - [`Node`]: node, for the JS programs that Emscripten links (through `wasmprof-emcc`);
//! - [`Bindgen`]: `wasm-bindgen-test-runner`, under node or in a headless browser, for
//!   wasm-bindgen's test binaries.
//!
//! A server is the embedded wasmtime's too, in a shape of its own: [`serve`] answers a
//! `wasi:http` component's requests until told to stop.
//!
//! The commands choose a host once, with [`for_program`], and walk the same pipeline
//! whichever it is. A new host (a browser, node's `node:wasi`) is
//! a module here that implements [`Host`], and one line in [`for_program`].

mod bindgen;
#[cfg(unix)]
mod caught_memories;
mod compiled;
#[cfg(unix)]
mod component;
mod dump_server;
mod embedded;
mod instance;
mod js_process;
mod marks;
mod node;
mod perf_map;
mod sampler;
#[cfg(unix)]
mod server;
#[cfg_attr(
    not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )),
    path = "stacks/unsupported.rs"
)]
mod stacks;
mod threads;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

pub use self::bindgen::{Bindgen, RUNNER as BINDGEN_RUNNER};
pub use self::embedded::Embedded;
pub use self::instance::{profiler_memory, TRAP_EXIT_CODE};
pub use self::marks::{Mark, Marks};
pub use self::node::{Node, NODE_VAR};
pub use self::perf_map::PERF_MAP_VAR;
pub use self::sampler::{HOOK as SAMPLE_HOOK, HOOK_SAMPLE_NS};
#[cfg(unix)]
pub use self::server::{serve, Reuse, ServeConfig, Served};
pub use self::stacks::CPU_TIMER_VAR;
use crate::clock::ClockChoice;
use crate::error::{Error, HostError};
use crate::fsutil::relative;
use crate::instrument::{cached_for_file, FileStamp, Instrumented, Options};
use crate::meta::Meta;
use crate::profile::{Dump, Profile, RunInfo, StackSamples, ThreadDump};
use crate::status::Status;

/// Something that runs programs and collects their profilers' state. One host prepares
/// several programs at once (`test` instruments its binaries ahead of their runs).
pub trait Host: Sync {
    /// Makes the program at `path` ready for this host: instrumented with `options` (the
    /// host may choose where the profiler keeps its state), or taken as it is with
    /// `None`. A program that carries the profiler already is taken as it is.
    fn prepare(
        &self,
        path: &Path,
        options: Option<&Options>,
        status: Status,
    ) -> Result<Prepared, Error>;

    /// Runs a prepared program. The outcome carries the profiler's state whatever way the
    /// program ended, once it got as far as loading its module.
    fn run(&self, program: &Prepared, config: &RunConfig) -> Result<Outcome, HostError>;

    /// Whether the probes' cost that the `calibrate` module measures (in the embedded
    /// wasmtime) is this host's, so that it may be subtracted from its times.
    fn calibrated(&self) -> bool;
}

/// The module at `path` instrumented with `options` as an earlier run left it in the
/// profiler's cache, found by the file's stamp without reading the file (its status line
/// said); else the stamp, taken before the file is read (a write between the two moves
/// it), for `instrument::instrument_cached` to record.
fn cached_by_stamp(
    path: &Path,
    options: &Options,
    status: Status,
) -> ControlFlow<Prepared, Option<FileStamp>> {
    let stamp = FileStamp::of(path);
    match stamp.as_ref().and_then(|s| cached_for_file(s, options)) {
        Some(done) => {
            say_instrumented(status, path, &done, Instant::now(), true);
            ControlFlow::Break(Prepared {
                path: path.to_path_buf(),
                wasm: done.wasm,
                meta: Some(done.meta),
            })
        }
        None => ControlFlow::Continue(stamp),
    }
}

/// The `Instrumented` status line of the module at `path`: its functions and call sites,
/// and how long it took from `started` (`in 0.08s`), or `from the cache`.
fn say_instrumented(
    status: Status,
    path: &Path,
    done: &Instrumented,
    started: Instant,
    cached: bool,
) {
    let took = if cached {
        "from the cache".into()
    } else {
        format!("in {:.2}s", started.elapsed().as_secs_f64())
    };
    status.step(
        "Instrumented",
        format!(
            "{} ({} functions, {} call sites) {took}",
            relative(path),
            done.meta.functions.len(),
            done.meta.direct_sites.len() + done.meta.indirect_sites.len(),
        ),
    );
}

/// The host that runs the program at `path`: node for a JS program (`.js`, `.mjs`, `.cjs`:
/// what Emscripten links), wasm-bindgen's test runner for a module built for wasm-bindgen,
/// else the embedded wasmtime.
pub fn for_program(path: &Path) -> &'static dyn Host {
    if Node::runs(path) {
        &Node
    } else if Bindgen::runs(path) {
        &Bindgen
    } else {
        &Embedded
    }
}

/// A program made ready to run.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The file the user named: the module, or the JS program that loads it.
    pub path: PathBuf,
    /// The module as it runs (instrumented, unless it was prepared as it is).
    pub wasm: Vec<u8>,
    /// Its meta, when it carries the profiler.
    pub meta: Option<Meta>,
}

/// How to run a program.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// `argv[0]` as the program sees it.
    pub program: String,
    /// Further arguments.
    pub args: Vec<String>,
    /// The working directory (the embedded host preopens it as `.`).
    pub dir: PathBuf,
    /// Give the program our stdin, stdout and stderr (else it reads nothing and its output
    /// is discarded, as benchmarks want).
    pub inherit_stdio: bool,
    /// The clock an instrumented module reads, where the host provides it.
    pub clock: ClockChoice,
    /// How often the sampled time metric's sampler samples (`None`: the default of the
    /// module's sampler, `sampling::default_interval`); zero: never (a test hook takes the
    /// samples).
    pub sample_interval: Option<Duration>,
    /// Sample an uninstrumented module's stacks (the embedded host on Linux), into
    /// [`Outcome::plain_samples`]: what the stack sampler sees of the program with no probe
    /// in it, which the accuracy checks hold against `perf` on the same run.
    pub sample_plain: bool,
}

impl RunConfig {
    /// The sampling interval of a module sampled by `sampler`: the one asked for, else the
    /// sampler's own.
    pub fn interval(&self, sampler: crate::meta::Sampler) -> Duration {
        self.sample_interval
            .unwrap_or_else(|| crate::sampling::default_interval(sampler))
    }

    /// Runs `program` with `args` in `dir`, with inherited stdio, the cheapest clock and the
    /// sampler's own interval.
    pub fn new(
        program: impl Into<String>,
        args: Vec<String>,
        dir: impl Into<PathBuf>,
    ) -> RunConfig {
        RunConfig {
            program: program.into(),
            args,
            dir: dir.into(),
            inherit_stdio: true,
            clock: ClockChoice::Auto,
            sample_interval: None,
            sample_plain: false,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The program's exit code: its `proc_exit` code, 0 after a normal return, or
    /// [`TRAP_EXIT_CODE`] after a trap (node's own exit code under node).
    pub exit_code: i32,
    /// The trap's message, when the program trapped.
    pub trap: Option<String>,
    /// What the profiler left in the module, for an instrumented module (the main
    /// thread's, in a threaded program).
    pub dump: Option<Dump>,
    /// Wall time of the program's run (compilation excluded).
    pub wall_ns: u64,
    /// A threaded program's threads (wasi-threads, Emscripten's -pthread), by thread id,
    /// the main thread (0) first: what each one's profiler left (`dump` is the main
    /// thread's).
    pub threads: Vec<ThreadDump>,
    /// Threads whose state the host could not collect: they neither stopped nor waited
    /// when the program ended (blocked in a host call).
    pub lost_threads: Vec<u32>,
    /// The meta of the module that ran, when the host chose which (a JS runtime runs a
    /// module's one-memory variant where the host allows a module one memory): it decodes
    /// the dump in place of the prepared module's.
    pub ran: Option<Meta>,
    /// The profiler's state each time the harness said that a benchmark starts, or that its
    /// measured iterations start or end (the embedded host, a program of one thread; empty
    /// elsewhere).
    pub marks: Marks,
    /// With [`RunConfig::sample_plain`], the stack sampler's samples of the uninstrumented
    /// module (function ids are its function indices).
    pub plain_samples: Option<StackSamples>,
}

impl Outcome {
    /// How a run of one thread ended, with what its profiler left (`dump`), and nothing of
    /// threads, marks or plain samples.
    pub fn of_one_thread(
        exit_code: i32,
        trap: Option<String>,
        dump: Option<Dump>,
        wall_ns: u64,
    ) -> Outcome {
        Outcome {
            exit_code,
            trap,
            dump,
            wall_ns,
            threads: Vec::new(),
            lost_threads: Vec::new(),
            ran: None,
            marks: Marks::default(),
            plain_samples: None,
        }
    }

    /// The profile of an instrumented `module` (its meta `meta`) from what this run
    /// left.
    ///
    /// A threaded program's profile is its threads' merged, each thread's kept; a thread
    /// whose state could not be read counts as lost, as one the host could not stop.
    pub fn profile(&self, meta: &Meta, module: impl Into<String>) -> anyhow::Result<Profile> {
        let dump = self
            .dump
            .as_ref()
            .context("the module carries no profiler state")?;
        Profile::decode_threads(
            self.ran.as_ref().unwrap_or(meta),
            dump,
            self.run_info(module),
            &self.threads,
            &self.lost_threads,
        )
    }

    /// How the run ended, for the profile of `module`.
    pub fn run_info(&self, module: impl Into<String>) -> RunInfo {
        RunInfo {
            module: module.into(),
            exit_code: self.exit_code,
            trap: self.trap.clone(),
            open_stack: Vec::new(),
            wall_ns: self.wall_ns,
            clock: self
                .dump
                .as_ref()
                .map(|d| d.clock.clone())
                .unwrap_or_default(),
            threads_lost: Vec::new(),
            state: None,
            component: false,
        }
    }
}
