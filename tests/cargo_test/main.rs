//! `cargo wasmprof test` on real fixture crates, built by real cargo and run in the
//! embedded wasmtime. Every expected count follows from the fixture's code.

#[path = "../common/mod.rs"]
mod common;

mod allocations;
mod baselines;
mod benches;
mod calls;
mod components;
mod hints;
mod lines;
mod runs;
mod serve;
mod threads;
mod views;
mod wasi_03;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cargo_wasmprof::harness::{inlined_loops, measured_routines, test_functions};
use cargo_wasmprof::profile::{Benchmark, Profile, HOST};
use common::{
    arc, binary_in, calls, check_invariants, copy_fixture, each_function_once, fib_calls, have,
    line_of, output, running, wasmprof,
};

/// One `cargo wasmprof test` of the `calls` fixture, shared by the tests that read it.
struct CallsRun {
    dir: tempfile::TempDir,
    out: Output,
}

impl CallsRun {
    fn profile(&self, name: &str) -> Profile {
        Profile::read(&self.dir.path().join("target/wasmprof").join(name)).expect("profile")
    }
    fn lib(&self) -> Profile {
        self.profile("calls-calls-lib.json")
    }
    fn source(&self) -> PathBuf {
        self.dir.path().join("src/lib.rs")
    }
}

fn calls_run() -> &'static CallsRun {
    static RUN: OnceLock<CallsRun> = OnceLock::new();
    RUN.get_or_init(|| {
        test_run(
            "calls",
            &["-o", "merged.json", "--format", "text,html,callgrind"],
        )
    })
}

/// `cargo wasmprof test ARGS` in a fresh copy of `fixture`.
fn test_run(fixture: &str, args: &[&str]) -> CallsRun {
    let dir = copy_fixture(fixture);
    let out = output(
        wasmprof()
            .args(["wasmprof", "test"])
            .args(args)
            .current_dir(dir.path()),
    );
    CallsRun { dir, out }
}

/// The `outcomes` fixture's `traps` test as its profile tells it: the run ended inside
/// `dive_and_trap`, called five times, each call still open in the stack (`what` names the
/// run in a failure).
fn dove_five_times(p: &Profile, what: &str) {
    assert!(!p.complete, "{what}");
    assert_eq!(calls(p, "outcomes::dive_and_trap"), 5, "{what}");
    let stack = &p.runs[0].open_stack;
    let open = stack.iter().filter(|f| *f == "outcomes::dive_and_trap");
    assert_eq!(open.count(), 5, "{what}: {stack:?}");
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One `cargo wasmprof test --metric instructions` of the `calls` fixture.
fn instructions_run() -> &'static CallsRun {
    static RUN: OnceLock<CallsRun> = OnceLock::new();
    shared_run(&RUN, "calls", &["--no-report"])
}

/// `cargo wasmprof test --metric instructions -o merged.json ARGS` of `fixture`, run once
/// for the tests that share `cell`, which must succeed.
fn shared_run(
    cell: &'static OnceLock<CallsRun>,
    fixture: &str,
    args: &[&str],
) -> &'static CallsRun {
    cell.get_or_init(|| {
        let args = [&["--metric", "instructions", "-o", "merged.json"], args].concat();
        let run = test_run(fixture, &args);
        assert!(run.out.status.success(), "{}", stderr(&run.out));
        run
    })
}
