//! wasmprof-emcc and wasmprof-emxx on the C and C++ fixtures: a real Makefile, the real emcc,
//! the real node, and gprof as the native oracle of call counts.
//!
//! These tests need emcc, node, gcc and gprof (.ci/run installs them). Without them they
//! say so and pass, except under CI, where a missing tool fails them.

#[path = "../common/mod.rs"]
mod common;

mod browser;
mod c;
mod inlining;
mod rust;
mod threads;
mod unwinding;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cargo_wasmprof::profile::{Profile, HOST};
use common::{
    arc, calls, check_invariants, context_callers, fib_calls, have, line_of, nodes, output,
    validate, wasmprof, NodeBin,
};

/// fixtures/emcc, built once by its Makefile with the wrappers as CC and CXX (the C++ one
/// through a link named `wasmprof-em++`, as a user would make it).
fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("emcc-fixture");
        let _ = std::fs::remove_dir_all(&dir);
        common::copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc"),
            &dir,
        );
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_wasmprof-emxx"),
            bin.join("wasmprof-em++"),
        )
        .unwrap();
        // The fixtures' allocations are recorded: the tests count them.
        let out = output(
            Command::new("make")
                .current_dir(&dir)
                .env("WASMPROF_ALLOCATIONS", "1")
                .arg(format!("CC={}", env!("CARGO_BIN_EXE_wasmprof-emcc")))
                .arg(format!("CXX={}", bin.join("wasmprof-em++").display())),
        );
        assert!(out.status.success(), "make builds the fixtures");
        dir
    })
}

/// Runs `node build/PROGRAM.js ARGS` under node `n` in the fixture directory with the
/// profile going to `out` (or, with None, to the default place); returns the exit code and
/// stdout.
fn node(n: &NodeBin, program: &str, args: &[&str], out: Option<&Path>) -> (i32, String) {
    let mut cmd = n.command();
    cmd.current_dir(built())
        .arg(format!("build/{program}.js"))
        .args(args)
        .env_remove("WASMPROF_OUT");
    if let Some(out) = out {
        cmd.env("WASMPROF_OUT", out);
    }
    let out = output(&mut cmd);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The number after `label` in the program's output.
fn printed(stdout: &str, label: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or_else(|| panic!("`{label}` in {stdout}"))
}

/// `wasmprof-emcc fixtures/emcc/SOURCE ARGS` in `dir`, with the environment variables `env`.
fn wasmprof_emcc(dir: &Path, env: &[(&str, &str)], source: &str, args: &[&str]) -> Output {
    output(
        Command::new(env!("CARGO_BIN_EXE_wasmprof-emcc"))
            .current_dir(dir)
            .envs(env.iter().copied())
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("fixtures/emcc")
                    .join(source),
            )
            .args(args),
    )
}

/// Links fixtures/emcc/calls.c with `WASMPROF_METRIC=METRIC` into `dir/build/calls.js`.
fn link_calls(dir: &Path, metric: &str) {
    link_calls_with(dir, &[("WASMPROF_METRIC", metric)]);
}

/// Links fixtures/emcc/calls.c with the environment `env` into `dir/build/calls.js`.
fn link_calls_with(dir: &Path, env: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("build")).unwrap();
    let out = wasmprof_emcc(dir, env, "calls.c", &["-O1", "-g", "-o", "build/calls.js"]);
    assert!(out.status.success(), "wasmprof-emcc links");
    validate(&std::fs::read(dir.join("build/calls.wasm")).unwrap());
}

/// Runs `dir`'s `build/calls.js FIB_N` under node `n`: the profile it wrote (checked to keep
/// its state where `n` allows).
fn calls_profile(dir: &Path, n: &NodeBin, fib_n: &str) -> Profile {
    let name = format!("calls-{}.json", n.major);
    node_profile(n, dir, &["build/calls.js", fib_n], &name)
}

/// Runs `node ARGS` under node `n` in `dir`, which must succeed, with the profile going to
/// `dir/NAME`: that profile (checked to keep its state where `n` allows).
fn node_profile(n: &NodeBin, dir: &Path, args: &[&str], name: &str) -> Profile {
    let profile = dir.join(name);
    let run = output(
        n.command()
            .current_dir(dir)
            .args(args)
            .env("WASMPROF_OUT", &profile),
    );
    assert!(run.status.success(), "node {}", n.major);
    n.profile(&profile)
}

/// `WASMPROF_METRIC=time`: the sampled metric under node, where V8's own sampler samples
/// the program (the runtime starts it through the inspector). The counts stay exact, and a
/// run of fib(32) (7 M calls, tens of milliseconds) has its samples, most of them in fib.
#[test]
fn the_sampled_metric_samples_under_node() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "time");
    for n in nodes() {
        let p = calls_profile(dir.path(), &n, "32");
        check_invariants(&p);
        assert_eq!(calls(&p, "fib"), fib_calls(32));
        let sampling = p.sampling.expect("a sampled profile");
        assert_eq!(sampling.sampler, cargo_wasmprof::meta::Sampler::V8);
        assert!(sampling.samples > 0, "{sampling:?}");
        let hottest = p.functions.iter().max_by_key(|f| f.cost.self_ns).unwrap();
        assert_eq!(hottest.name, "fib", "node {}: {sampling:?}", n.major);
        // The report says where V8's compiling goes, and, under node 20 (one memory a
        // module), that the probes' calls make its times approximate.
        let file = dir.path().join(format!("calls-{}.json", n.major));
        let report = output(wasmprof().arg("report").arg(&file));
        let text = String::from_utf8_lossy(&report.stdout);
        assert!(text.starts_with("cargo-wasmprof profile"), "{text}");
        assert!(text.contains("samples by V8's sampler"), "{text}");
        assert_eq!(
            text.contains("node 20 ran the probes in a module of their own"),
            n.state() == cargo_wasmprof::meta::StateLocation::StateModule,
            "{text}"
        );
        assert!(
            text.contains("V8 compiles each function at its first call"),
            "{text}"
        );
    }
}

/// Hints never point at a refusal under node: what a profile's readers suggest for a
/// program `wasmprof-emcc` linked is a variable the wrapper takes (`common::hints`); a
/// flag of `cargo wasmprof` is for its own commands.
#[test]
fn every_hint_a_node_profile_gives_is_taken() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let mut seen = std::collections::BTreeSet::new();
    for metric in ["time", "calls", "exact-time"] {
        let dir = tempfile::tempdir().unwrap();
        link_calls(dir.path(), metric);
        for n in nodes() {
            calls_profile(dir.path(), &n, "25");
            let file = dir.path().join(format!("calls-{}.json", n.major));
            let hints = common::hints::check_hints(&file, "", |hint| {
                let (name, value) = hint[0].split_once('=')?;
                let again = tempfile::tempdir().unwrap();
                link_calls_with(again.path(), &[("WASMPROF_METRIC", metric), (name, value)]);
                let mut run = n.command();
                run.current_dir(again.path())
                    .args(["build/calls.js", "25"])
                    .env("WASMPROF_OUT", again.path().join("p.json"));
                Some(output(&mut run))
            });
            seen.extend(hints);
        }
    }
    assert!(
        seen.contains(&vec!["WASMPROF_METRIC=instructions".to_string()]),
        "{seen:?}"
    );
}

/// How many times over threads.c takes its threads' steps with `long`.
const LONG_ROUNDS: u64 = 100_000;

/// Every pthread of a sampled profile of `threads.js long` has sampled time of its own in
/// `work` or `step` (`what` names the run).
fn each_pthread_sampled(p: &Profile, what: &str) {
    for t in p.threads.iter().filter(|t| t.id != 0) {
        let q = &t.profile;
        let own = |name| q.function_named(name).map_or(0, |f| f.cost.self_ns);
        let sampled = own("work") + own("step");
        assert!(sampled > 0, "{what}: thread {}: {:?}", t.id, q.sampling);
    }
}

/// Self instructions of `name`.
fn self_instructions(p: &Profile, name: &str) -> u64 {
    p.function_named(name)
        .unwrap_or_else(|| panic!("no function {name}"))
        .cost
        .self_instructions
        .unwrap()
}

/// The instructions metric under node counts each source line where the profiler's state
/// is the module's own (node 22 and later): fib is one line, which holds all its
/// instructions. Under node 20 the state-module variant runs, which counts no lines, and
/// the profile has none (rather than zeros).
#[test]
fn per_line_instructions_where_the_state_is_the_modules_own() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    link_calls(dir.path(), "instructions");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/calls.c");
    for n in nodes() {
        let p = calls_profile(dir.path(), &n, "12");
        assert_eq!(calls(&p, "fib"), fib_calls(12));
        let fib_lines: Vec<_> = p.lines.iter().filter(|l| l.function == "fib").collect();
        match n.state() {
            cargo_wasmprof::meta::StateLocation::OwnMemory => {
                assert_eq!(fib_lines.len(), 1, "{fib_lines:?}");
                assert_eq!(fib_lines[0].line, line_of(&source, "int fib("));
                assert_eq!(
                    Some(fib_lines[0].instructions),
                    p.function_named("fib").unwrap().cost.self_instructions
                );
            }
            cargo_wasmprof::meta::StateLocation::StateModule => {
                assert!(p.lines.is_empty(), "node {}", n.major)
            }
        }
    }
}

/// emcc's link at -O2 -g has Binaryen rewrite the DWARF, and it leaves some inlined
/// subroutines with a high_pc of 2^32 (in fixtures/emcc/kernels.c with emcc 3.1.6:
/// `seed`, inlined into `doubles`), a range that would claim every function after it.
/// Every line's inlined frames must be true ones: `seed`'s code is its one line.
#[test]
fn inlined_frames_stay_inside_their_function() {
    if !have(&["emcc", "node"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let env = [("WASMPROF_METRIC", "instructions")];
    let args = ["-O2", "-g", "-sALLOW_MEMORY_GROWTH", "-o", "kernels.js"];
    let out = wasmprof_emcc(dir.path(), &env, "kernels.c", &args);
    assert!(out.status.success(), "wasmprof-emcc links");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/kernels.c");
    let seed = line_of(&source, "static void seed(");
    for n in nodes() {
        if n.state() != cargo_wasmprof::meta::StateLocation::OwnMemory {
            continue; // per-line counts need the profiler's own memory
        }
        let name = format!("kernels-{}.json", n.major);
        let p = node_profile(&n, dir.path(), &["kernels.js", "sum-double"], &name);
        let sum = self_instructions(&p, "sum_double");
        let sum_lines: u64 = p
            .lines
            .iter()
            .filter(|l| l.function == "sum_double")
            .map(|l| l.instructions)
            .sum();
        assert_eq!(sum_lines, sum, "sum_double's lines hold its instructions");
        for l in &p.lines {
            for frame in l.inlined.iter().filter(|i| i.function == "seed") {
                assert_eq!(l.line, seed, "{} line {}: {frame:?}", l.function, l.line);
            }
        }
        assert!(p
            .lines
            .iter()
            .any(|l| l.function == "sum_double" && l.inlined.is_empty()));
    }
}
