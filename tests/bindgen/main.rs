//! wasm-bindgen crates (`--target wasm32-unknown-unknown`): `fixtures/bindgen`'s
//! wasm-bindgen-test binaries, instrumented and run by the real `wasm-bindgen-test-runner`
//! (of the fixture's pinned wasm-bindgen, 0.2.130) under node and in headless Chromium
//! (through ChromeDriver). `.ci/run` installs the runner into
//! `target/wasm-bindgen-cli/0.2.130/bin`; these tests put it first on PATH the way the
//! README's `cargo install` leaves it, beside cargo and rustc.

#[path = "../common/mod.rs"]
mod common;

mod benches;
mod browser;
mod inlining;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::Metric;
use cargo_wasmprof::profile::Profile;
use common::{
    arc, calls, check_invariants, fib_calls, have, output, validate, wasmprof, PathWithout,
};

const TARGET: &str = "wasm32-unknown-unknown";
/// The fixture's wasm-bindgen, and so its runner's version.
const VERSION: &str = "0.2.130";
/// The runner's name.
const RUNNER: &str = "wasm-bindgen-test-runner";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bindgen")
}

/// PATH with the runner first, where `cargo install` (the README's way) leaves it: in one
/// directory with rustup's `cargo` and `rustc`, `$CARGO_TARGET_TMPDIR/cargo-bin`, which
/// holds links to the runner `.ci/run` installs into the target dir (else the one on PATH)
/// and to the `cargo` and `rustc` on PATH. A test that hides the runner must hide it alone.
fn path_with_runner() -> std::ffi::OsString {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let bin = BIN.get_or_init(|| {
        let built = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("target/wasm-bindgen-cli/{VERSION}/bin"))
            .join(RUNNER);
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cargo-bin");
        std::fs::create_dir_all(&bin).unwrap();
        // Found on PATH without this directory (which may be on it already), so that no
        // link points at itself.
        let others =
            std::env::join_paths(std::env::split_paths(&rest).filter(|dir| *dir != bin)).unwrap();
        let find = |name| which::which_in(name, Some(&others), ".").ok();
        let runner = Some(built).filter(|p| p.is_file()).or_else(|| find(RUNNER));
        let tools = [
            runner.map(|p| (RUNNER, p)),
            find("cargo").map(|p| ("cargo", p)),
            find("rustc").map(|p| ("rustc", p)),
        ];
        for (name, target) in tools.into_iter().flatten() {
            let link = bin.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, link).unwrap();
        }
        bin
    });
    std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&rest))).unwrap()
}

/// Whether the runner and node are there (with the runner's directory on PATH).
fn ready() -> bool {
    let found = which::which_in(RUNNER, Some(path_with_runner()), ".").is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have wasm-bindgen-test-runner {VERSION} (.ci/run installs it)"
        );
        eprintln!("skipped: wasm-bindgen-test-runner {VERSION} not installed");
        return false;
    }
    have(&["node"])
}

/// Whether the browser tests can run too: Chromium and the ChromeDriver the runner drives it
/// with.
fn browser_ready() -> bool {
    ready() && have(&["chromium", "chromedriver"])
}

/// `cargo wasmprof test --target wasm32-unknown-unknown ARGS` on the fixture, with
/// environment variables `env` set.
fn profiled_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    output(
        wasmprof()
            .args(["wasmprof", "test", "--target", TARGET, "--manifest-path"])
            .arg(fixture().join("Cargo.toml"))
            .args(args)
            .env("PATH", path_with_runner())
            .envs(env.iter().copied()),
    )
}

/// [`profiled_with`], and the profile of the run, written with `-o` to a file of this call's
/// own (the tests run side by side, and each binary's profile in the target dir is the
/// last run's).
fn profiled_profile(args: &[&str], env: &[(&str, &str)]) -> (Output, Profile) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profile.json");
    let out = profiled_with(&[args, &["-o", file.to_str().unwrap()]].concat(), env);
    let profile = Profile::read(&file).unwrap_or_else(|e| panic!("{e:#}: {out:?}"));
    (out, profile)
}

/// `cargo test --target wasm32-unknown-unknown ARGS` on the fixture, with the runner.
fn plain(args: &[&str]) -> Output {
    plain_with(args, &[])
}

/// [`plain`] with environment variables `env` set.
fn plain_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    output(
        Command::new("cargo")
            .args(["test", "--target", TARGET, "--manifest-path"])
            .arg(fixture().join("Cargo.toml"))
            .args(args)
            .env("PATH", path_with_runner())
            .env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER", RUNNER)
            .envs(env.iter().copied()),
    )
}

/// One profiled run of the fixture's tests per metric (the tests read it).
fn run(metric: Metric) -> &'static (Output, Profile) {
    static CALLS: OnceLock<(Output, Profile)> = OnceLock::new();
    static INSTRUCTIONS: OnceLock<(Output, Profile)> = OnceLock::new();
    let cell = match metric {
        Metric::Calls => &CALLS,
        _ => &INSTRUCTIONS,
    };
    // The instructions run records the allocations too.
    let allocations: &[&str] = match metric {
        Metric::Calls => &[],
        _ => &["--allocations"],
    };
    cell.get_or_init(|| {
        let args = [&["--test", "node", "--metric", metric.name()], allocations].concat();
        profiled_profile(&args, &[])
    })
}

/// The wasm frames of the stacks in the runner's output, without their places (each
/// build numbers its functions its own way).
fn wasm_frames(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("at "))
        .filter_map(|frame| {
            frame
                .split_once(" (wasm://")
                .map(|(name, _)| name.to_string())
        })
        .collect()
}

/// The lines of the tests' own results, whatever their order, times left out.
fn results(stdout: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.starts_with("test ") || l.starts_with("running "))
        .map(|l| l.split("; finished in").next().unwrap().to_string())
        .collect();
    lines.sort();
    lines
}

#[test]
fn node_tests_have_exact_counts_and_arcs() {
    if !ready() {
        return;
    }
    for metric in [Metric::Calls, Metric::Instructions] {
        let (out, p) = run(metric);
        assert!(out.status.success(), "{metric:?}");
        known_counts(p, NODE_TESTS);
    }
}

/// The node tests' allocations, recorded with the state in the state module (the
/// wasm-bindgen path's): `shapes` boxes a Square, a Triangle and a Square (8 bytes each)
/// into a vector of three 8-byte `Box<dyn Shape>`s, and drops them all.
#[test]
fn node_tests_have_exact_allocations() {
    if !ready() {
        return;
    }
    let (_, p) = run(Metric::Instructions);
    common::check_allocations(p);
    let summary = p.allocations.as_ref().expect("the allocations' summary");
    assert_eq!(summary.not_recorded, None);
    let shapes = common::allocs_under(p, "node::shapes");
    // (What grew the memory, and what was live at the peak, the test does not say.)
    assert_eq!(
        cargo_wasmprof::profile::Allocs {
            at_peak: 0,
            at_peak_bytes: 0,
            ..common::ignoring_growth(shapes)
        },
        common::freed_allocs(4, 3 * 8 + 3 * 8)
    );
}

/// The node tests under the current node too (the one `.ci/run` installs beside node 20,
/// first on the runner's PATH): the same counts, and the state in the state module, which
/// the wasm-bindgen path keeps on every host (its glue instantiates the module).
#[test]
fn node_tests_count_the_same_under_the_current_node() {
    if !ready() {
        return;
    }
    // The first node is PATH's, which the test above runs.
    for n in common::nodes().into_iter().skip(1) {
        let runner_path = path_with_runner();
        let dirs = std::iter::once(n.path.parent().unwrap().to_path_buf())
            .chain(std::env::split_paths(&runner_path));
        let path = std::env::join_paths(dirs).unwrap();
        let (out, p) = profiled_profile(
            &["--test", "node", "--metric", "instructions"],
            &[("PATH", path.to_str().unwrap())],
        );
        assert!(out.status.success(), "node {}", n.major);
        assert!(p
            .runs
            .iter()
            .all(|r| r.state == Some(cargo_wasmprof::meta::StateLocation::StateModule)));
        known_counts(&p, NODE_TESTS);
    }
}

/// What the fixture's node tests (tests/node.rs) count.
const NODE_TESTS: Known = Known {
    fib_test: "node::fib_of_15",
    fib_n: 15,
    squares: 2,
    triangles: 1,
    closure: "node::callback::{closure#0}",
    ticks: 7,
};

/// What a run of the fixture's tests must count, from their code.
struct Known {
    /// The test that calls fib(fib_n) once.
    fib_test: &'static str,
    fib_n: u32,
    /// The squares and triangles whose area the tests sum through `dyn Shape`.
    squares: u64,
    triangles: u64,
    /// The closure that JS calls back `ticks` times, each calling `tick` once.
    closure: &'static str,
    ticks: u64,
}

/// Checks the counts and arcs `known` says.
fn known_counts(p: &Profile, known: Known) {
    // Every function's arcs cover its calls, also those that bindgen's generic-import
    // shims (`wbg_cast`, JS functions once bindgen is done) make back into the module.
    check_invariants(p);
    // fib(n): 2*F(n+1)-1 calls, one from the test.
    assert_eq!(calls(p, "bindgen_fixture::fib"), fib_calls(known.fib_n));
    assert_eq!(arc(p, known.fib_test, "bindgen_fixture::fib"), 1);
    for (shape, n) in [("Square", known.squares), ("Triangle", known.triangles)] {
        let area = format!("<bindgen_fixture::{shape} as bindgen_fixture::Shape>::area2");
        assert_eq!(calls(p, &area), n, "{area}");
        // The `dyn` call is in the closure that `map` runs.
        let caller = "bindgen_fixture::total_area2::{closure#0}";
        assert_eq!(arc(p, caller, &area), n, "{area}");
    }
    // JS calls the closure back: into the module from the import that runs the JS function
    // (`Function::call2`), through wasm-bindgen's closure shim.
    assert_eq!(calls(p, "bindgen_fixture::tick"), known.ticks);
    assert_eq!(arc(p, known.closure, "bindgen_fixture::tick"), known.ticks);
    let from_js: u64 = p
        .arcs
        .iter()
        .filter(|a| {
            a.caller.starts_with("__wbindgen_placeholder__.__wbg_call_")
                && a.callee == "wasm_bindgen::convert::closures::_::invoke<(), true>"
        })
        .map(|a| a.count)
        .sum();
    assert_eq!(
        from_js, known.ticks,
        "the import's calls back into the module"
    );
}

#[test]
fn the_report_leads_with_wasm_bindgen_tests() {
    if !ready() {
        return;
    }
    let (out, p) = run(Metric::Instructions);
    let tests: Vec<&str> = cargo_wasmprof::harness::test_functions(p)
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    // By cost: fib(15) is the costliest; each test once.
    assert_eq!(tests[0], "node::fib_of_15");
    let mut sorted = tests.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["node::callback", "node::fib_of_15", "node::shapes"]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Tests by cost"), "{stdout}");
    // The calls into the module from wasm-bindgen's generic-import shims are the shims'
    // arcs: `Closure::new` in `callback` casts its closure into a JsValue once, whose JS
    // side keeps it in the externref table (one `__externref_table_alloc`). No call is of
    // a caller unknown.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.json");
    p.write(&file).unwrap();
    let report = output(wasmprof().args(["wasmprof", "report"]).arg(&file).args([
        "--call-graph",
        "full",
        "--show-runtime",
    ]));
    let text = String::from_utf8_lossy(&report.stdout);
    let shim = "wasm_bindgen::__rt::wbg_cast::breaks_if_inlined<wasm_bindgen::closure::\
                OwnedClosure<dyn core::ops::function::FnMut<(), Output=()>, true>, \
                wasm_bindgen::closure::JsClosure>";
    assert!(
        p.function_named(shim).unwrap().import,
        "{shim} runs in the host"
    );
    assert_eq!(arc(p, shim, "__externref_table_alloc"), 1);
    assert!(!text.contains("<caller unknown"), "{text}");
}

#[test]
fn results_and_exit_codes_are_the_plain_runners() {
    if !ready() {
        return;
    }
    let mut profiles = Vec::new();
    for args in [
        &["--test", "node"][..],
        &["--features", "failing", "--test", "fails"],
    ] {
        let want = plain(args);
        let (got, p) = profiled_profile(&[args, &["--metric", "calls"]].concat(), &[]);
        assert_eq!(results(&got.stdout), results(&want.stdout), "{args:?}");
        // Success alike; a failure is 101 as always with cargo-wasmprof (cargo itself passes
        // the runner's 1 on).
        assert_eq!(got.status.success(), want.status.success(), "{args:?}");
        // The panic's stacks name the plain run's wasm frames, in its order: none of the
        // profiler's thunks (V8 keeps 10 frames, so one more may be cut at the end).
        let failed = !want.status.success();
        let (got, want) = (wasm_frames(&got.stdout), wasm_frames(&want.stdout));
        assert_eq!(!want.is_empty(), failed, "{want:#?}");
        assert!(got.iter().all(|f| !f.contains("wasmprof")), "{got:#?}");
        assert!(got.iter().all(|f| want.contains(f)), "{got:#?}\n{want:#?}");
        assert!(got.len() + 2 >= want.len(), "{got:#?}\n{want:#?}");
        profiles.push(p);
    }
    // The failing binary still leaves its profile: both tests ran, the failing one up to
    // its panic.
    assert_eq!(
        calls(&profiles[1], "bindgen_fixture::fib"),
        fib_calls(10) + fib_calls(5)
    );
}

/// Doc tests on wasm32-unknown-unknown run as `cargo test` runs them: rustdoc builds each,
/// and the runner runs only `#[wasm_bindgen_test]` functions, which they have none of. The
/// plain run's results and success, a doc test that does not build (`--features failing`)
/// failing both, and a note that says they were not profiled.
#[test]
fn doc_tests_run_as_with_cargo_test() {
    if !ready() {
        return;
    }
    for (args, builds) in [
        (&["--doc"][..], true),
        (&["--features", "failing", "--doc"], false),
    ] {
        let want = plain(args);
        let got = profiled_with(args, &[]);
        assert_eq!(results(&got.stdout), results(&want.stdout), "{args:?}");
        assert_eq!(got.status.success(), builds, "{args:?}: {got:?}");
        assert_eq!(want.status.success(), builds, "{args:?}: {want:?}");
        let stderr = String::from_utf8_lossy(&got.stderr);
        assert!(
            stderr.contains("ran as `cargo test` runs them, not profiled"),
            "{stderr}"
        );
    }
}

#[test]
fn the_instrumented_module_validates_and_is_the_same_on_every_run() {
    if !ready() {
        return;
    }
    run(Metric::Calls);
    let deps = fixture().join("target").join(TARGET).join("debug/deps");
    let node = common::binary_in(&deps, "node-");
    let wasm = std::fs::read(node).unwrap();
    for metric in [
        Metric::Calls,
        Metric::Instructions,
        Metric::ExactTime,
        Metric::Time,
    ] {
        let options = Options {
            metric,
            host_exceptions: false,
            ..Options::default().for_js_host()
        };
        let once = instrument::instrument(&wasm, &options).unwrap().wasm;
        validate(&once);
        // The same bytes on every run (the generic-import shims' thunks included).
        let again = instrument::instrument(&wasm, &options).unwrap().wasm;
        assert!(once == again, "{metric:?}: instrumenting is deterministic");
    }
}

#[test]
fn a_missing_runner_is_one_error_line_with_the_install_command() {
    if !ready() {
        return;
    }
    run(Metric::Calls); // built
                        // Everything on PATH but the runner: cargo and rustc, beside it, stay.
    let path = PathWithout::new(&path_with_runner(), &[RUNNER]);
    let out = output(
        wasmprof()
            .args([
                "wasmprof",
                "test",
                "--target",
                TARGET,
                "--test",
                "node",
                "--manifest-path",
            ])
            .arg(fixture().join("Cargo.toml"))
            .env("PATH", path.path()),
    );
    let error = the_one_error(&out);
    assert!(
        error.contains(&format!(
            "cargo install wasm-bindgen-cli --version {VERSION}"
        )),
        "{error}"
    );
}

/// The one error line of a run that failed with exit code 1.
fn the_one_error(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    errors[0].to_string()
}

/// A test binary whose tests are all configured out (`fails` without its feature) imports
/// nothing of wasm-bindgen; the runner runs nothing of it, and so does cargo-wasmprof.
#[test]
fn a_binary_without_tests_runs_nothing_as_with_the_plain_runner() {
    if !ready() {
        return;
    }
    let args = ["--test", "fails"];
    let want = plain(&args);
    let got = profiled_with(&args, &[]);
    assert!(want.status.success(), "{want:?}");
    assert!(got.status.success(), "{got:?}");
    for out in [&want, &got] {
        assert!(String::from_utf8_lossy(&out.stdout).contains("no tests to run!"));
    }
    // No empty report either: one note says why there is none.
    let said = String::from_utf8_lossy(&got.stderr);
    assert!(said.contains("note: no profile and no report"), "{said}");
    assert!(!String::from_utf8_lossy(&got.stdout).contains("Flat profile"));
}
