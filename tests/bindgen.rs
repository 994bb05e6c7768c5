//! wasm-bindgen crates (`--target wasm32-unknown-unknown`): `fixtures/bindgen`'s
//! wasm-bindgen-test binaries, instrumented and run by the real `wasm-bindgen-test-runner`
//! (of the fixture's pinned wasm-bindgen, 0.2.130) under node. `.ci/run` installs the runner
//! into `target/wasm-bindgen-cli/0.2.130/bin`, which these tests put first on PATH.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::Metric;
use cargo_wasmprof::profile::Profile;
use common::{arc, calls, fib_calls, have, output, validate, wasmprof};

const TARGET: &str = "wasm32-unknown-unknown";
/// The fixture's wasm-bindgen, and so its runner's version.
const VERSION: &str = "0.2.130";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bindgen")
}

/// PATH with the runner `.ci/run` installs first.
fn path_with_runner() -> std::ffi::OsString {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/wasm-bindgen-cli/{VERSION}/bin"));
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&rest))).unwrap()
}

/// Whether the runner and node are there (with the runner's directory on PATH).
fn ready() -> bool {
    let found = which::which_in("wasm-bindgen-test-runner", Some(path_with_runner()), ".").is_ok();
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

/// `cargo wasmprof test --target wasm32-unknown-unknown ARGS` on the fixture.
fn profiled(args: &[&str]) -> Output {
    output(
        wasmprof()
            .args(["wasmprof", "test", "--target", TARGET, "--manifest-path"])
            .arg(fixture().join("Cargo.toml"))
            .args(args)
            .env("PATH", path_with_runner()),
    )
}

/// The profile `cargo wasmprof test` wrote for a test binary of the fixture.
fn profile_of(target: &str) -> Profile {
    Profile::read(
        &fixture()
            .join("target/wasmprof")
            .join(TARGET)
            .join(format!("bindgen-fixture-{target}-test.json")),
    )
    .unwrap()
}

/// One profiled run of the fixture's tests per metric (the tests read it).
fn run(metric: Metric) -> &'static (Output, Profile) {
    static CALLS: OnceLock<(Output, Profile)> = OnceLock::new();
    static INSTRUCTIONS: OnceLock<(Output, Profile)> = OnceLock::new();
    let cell = match metric {
        Metric::Calls => &CALLS,
        _ => &INSTRUCTIONS,
    };
    cell.get_or_init(|| {
        let name = clap::ValueEnum::to_possible_value(&metric).unwrap();
        let out = profiled(&["--test", "node", "--metric", name.get_name()]);
        let profile = profile_of("node");
        (out, profile)
    })
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
        // Not `check_invariants` as a whole: the calls that bindgen's generic-import shims
        // (`wbg_cast`) make back into the module (`__externref_table_alloc`) are counted
        // and in the context tree, but have no arc yet (the shims become imports only at
        // bindgen time, with no thunk of ours). The program's own functions keep them all.
        for name in ["bindgen_fixture::fib", "bindgen_fixture::tick"] {
            let f = p.function_named(name).unwrap();
            let arcs: u64 = p
                .arcs
                .iter()
                .filter(|a| a.callee == name)
                .map(|a| a.count)
                .sum();
            assert_eq!(arcs, f.calls, "{metric:?}: arcs into {name}");
        }
        // fib(15): 2*F(16)-1 calls, one from the test.
        assert_eq!(calls(p, "bindgen_fixture::fib"), fib_calls(15));
        assert_eq!(arc(p, "node::fib_of_15", "bindgen_fixture::fib"), 1);
        // Two squares and a triangle through `dyn Shape`.
        assert_eq!(
            calls(
                p,
                "<bindgen_fixture::Square as bindgen_fixture::Shape>::area2"
            ),
            2
        );
        assert_eq!(
            calls(
                p,
                "<bindgen_fixture::Triangle as bindgen_fixture::Shape>::area2"
            ),
            1
        );
        // JS calls the closure back 7 times: into the module from the import that runs
        // the JS function (`Function::call2`), through wasm-bindgen's closure shim.
        assert_eq!(calls(p, "bindgen_fixture::tick"), 7);
        assert_eq!(
            arc(p, "node::callback::{closure#0}", "bindgen_fixture::tick"),
            7
        );
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
            from_js, 7,
            "{metric:?}: the import's calls back into the module"
        );
    }
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
}

#[test]
fn results_and_exit_codes_are_the_plain_runners() {
    if !ready() {
        return;
    }
    let plain = |args: &[&str]| {
        output(
            Command::new("cargo")
                .args(["test", "--target", TARGET, "--manifest-path"])
                .arg(fixture().join("Cargo.toml"))
                .args(args)
                .env("PATH", path_with_runner())
                .env(
                    "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
                    "wasm-bindgen-test-runner",
                ),
        )
    };
    for args in [
        &["--test", "node"][..],
        &["--features", "failing", "--test", "fails"],
    ] {
        let want = plain(args);
        let got = profiled(&[args, &["--metric", "calls"]].concat());
        assert_eq!(results(&got.stdout), results(&want.stdout), "{args:?}");
        // Success alike; a failure is 101 as always with cargo-wasmprof (cargo itself passes
        // the runner's 1 on).
        assert_eq!(got.status.success(), want.status.success(), "{args:?}");
    }
    // The failing binary still leaves its profile: both tests ran, the failing one up to
    // its panic.
    let p = profile_of("fails");
    assert_eq!(
        calls(&p, "bindgen_fixture::fib"),
        fib_calls(10) + fib_calls(5)
    );
}

#[test]
fn the_instrumented_module_validates() {
    if !ready() {
        return;
    }
    run(Metric::Calls);
    let deps = fixture().join("target").join(TARGET).join("debug/deps");
    let node = std::fs::read_dir(&deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "wasm")
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("node-")
        })
        .expect("the node test binary");
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
        validate(&instrument::instrument(&wasm, &options).unwrap().wasm);
    }
}

#[test]
fn a_missing_runner_is_one_error_line_with_the_install_command() {
    if !ready() {
        return;
    }
    run(Metric::Calls); // built
    let runner_dirs = path_with_runner();
    let path = std::env::join_paths(
        std::env::split_paths(&runner_dirs)
            .filter(|d| !d.join("wasm-bindgen-test-runner").exists()),
    )
    .unwrap();
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
            .env("PATH", path),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!(
            "cargo install wasm-bindgen-cli --version {VERSION}"
        )),
        "{stderr}"
    );
}

#[test]
fn a_browser_test_binary_is_refused_in_one_line() {
    if !ready() {
        return;
    }
    let out = profiled(&["--test", "browser"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("browser.rs") || errors[0].contains("browser-"), "{stderr}");
    assert!(errors[0].contains("its tests run in a browser"), "{stderr}");
}
