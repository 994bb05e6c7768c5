//! How `test` runs binaries, as cargo does: the programs' behaviour and the harness's
//! arguments unchanged, failing and trapping tests, build failures, cargo's order and
//! fail-fast.

use super::*;

/// The libtest summary line ends with a time that varies from run to run.
fn without_timing(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("; finished in ") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn instrumented_binaries_behave_like_the_originals() {
    let run = calls_run();
    let deps = run.dir.path().join("target/wasm32-wasip1/debug/deps");
    let wasm = binary_in(&deps, "calls-");
    let plain = output(
        wasmprof()
            .args(["run", "--no-instrument"])
            .arg(&wasm)
            .arg("--test-threads=1")
            .current_dir(run.dir.path()),
    );
    let profiled = output(
        wasmprof()
            .args(["run", "--no-report", "-o"])
            .arg(run.dir.path().join("run.json"))
            .arg(&wasm)
            .arg("--test-threads=1")
            .current_dir(run.dir.path()),
    );
    assert_eq!(plain.status.code(), profiled.status.code());
    assert_eq!(
        without_timing(&stdout(&plain)),
        without_timing(&stdout(&profiled))
    );
    assert!(run.dir.path().join("run.json").exists());
}

#[test]
fn harness_arguments_select_tests() {
    let dir = copy_fixture("calls");
    let out = output(
        wasmprof()
            .args([
                "test",
                "--lib",
                "--no-report",
                "fib_of",
                "--",
                "--exact",
                "tests::fib_of_20",
            ])
            .current_dir(dir.path()),
    );
    assert!(out.status.success());
    assert!(stdout(&out).contains("1 passed"));
    let lib = Profile::read(&dir.path().join("target/wasmprof/calls-calls-lib.json")).unwrap();
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    assert!(lib.function_named("calls::is_even").is_none());
    // --lib built no integration test.
    assert!(!dir
        .path()
        .join("target/wasmprof/calls-integration-test.json")
        .exists());
}

#[test]
fn failing_and_trapping_tests_still_leave_their_profile() {
    let dir = copy_fixture("outcomes");
    let profile = || {
        Profile::read(
            &dir.path()
                .join("target/wasmprof/outcomes-outcomes-lib.json"),
        )
        .unwrap()
    };

    let out = output(
        wasmprof()
            .args(["test", "passes", "--", "--nocapture"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success());
    assert!(stdout(&out).contains("countdown done"));
    let p = profile();
    assert!(p.complete);
    assert_eq!(calls(&p, "outcomes::countdown"), 8);

    // A failing assertion panics, and panics abort on wasm32-wasip1 (so libtest's capture
    // would swallow the message without --nocapture): cargo's exit code 101.
    let out = output(
        wasmprof()
            .args(["test", "fails", "--", "--nocapture"])
            .current_dir(dir.path()),
    );
    assert_eq!(out.status.code(), Some(101));
    assert!(stderr(&out).contains("this test fails on purpose"));
    assert!(stderr(&out).contains("test failed, to rerun pass `--lib`"));
    let p = profile();
    assert!(!p.complete);
    assert_eq!(calls(&p, "outcomes::countdown"), 4);
    // Captured, the message is lost with the abort: the test runs again alone, uncaptured,
    // and its output is shown under its name, as `cargo test` shows a failing test's.
    let out = output(
        wasmprof()
            .args(["test", "fails", "--no-report"])
            .current_dir(dir.path()),
    );
    assert_eq!(out.status.code(), Some(101));
    let shown = stdout(&out);
    let heading = shown
        .find("---- tests::fails stdout ----")
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        shown[heading..].contains("this test fails on purpose"),
        "{shown}"
    );
    assert!(stderr(&out).contains("from a second run of it alone"));

    // A trap: the profile is partial and names where the run stopped, under every metric
    // (the calls metric keeps no context tree: the stack is the host's backtrace).
    for metric in ["time", "calls", "exact-time", "instructions"] {
        let out = output(
            wasmprof()
                .args(["test", "traps", "--metric", metric])
                .current_dir(dir.path()),
        );
        assert_eq!(out.status.code(), Some(101), "{metric}");
        let p = profile();
        dove_five_times(&p, metric);
        let stack = &p.runs[0].open_stack;
        // In a debug build core::arch::wasm32::unreachable is a function of its own.
        let innermost = stack
            .iter()
            .rposition(|f| f == "outcomes::dive_and_trap")
            .unwrap();
        assert!(
            stack.len() - innermost <= 2,
            "{metric}: the trap is in or just below dive_and_trap: {stack:?}"
        );
        assert!(stdout(&out).contains("ended inside"), "{metric}");
        let err = stderr(&out);
        let trap_line = err
            .lines()
            .find(|l| l.contains("trapped:"))
            .expect("a trap message");
        assert!(trap_line.contains("`unreachable` instruction executed"));
        assert!(
            trap_line.contains("outcomes::dive_and_trap"),
            "{metric}: {trap_line}"
        );
    }
}

#[test]
fn a_build_failure_shows_cargos_diagnostics() {
    let dir = copy_fixture("broken");
    let out = output(wasmprof().args(["test"]).current_dir(dir.path()));
    assert_eq!(out.status.code(), Some(101));
    let err = stderr(&out);
    assert!(err.contains("error[E0308]"), "cargo's diagnostic is shown");
    assert!(err.contains("error: could not build the test binaries"));
    assert!(!dir.path().join("target/wasmprof").exists());
}

/// cargo's order (lib, bin, tests by name, doc tests) on every run; fail-fast stops after
/// the failing binary and says what it left out; --no-fail-fast runs all; the merged
/// profile holds what ran, each function once, under every metric.
#[test]
fn binaries_run_in_cargos_order_and_fail_fast_as_cargo() {
    let dir = copy_fixture("order");
    let all = [
        "unittests src/lib.rs",
        "unittests src/main.rs",
        "tests/alpha.rs",
        "tests/mid.rs",
        "tests/zeta.rs",
        "Doc-tests order",
    ];
    let merged = || Profile::read(&dir.path().join("merged.json")).unwrap();
    let run = |metric: &str, fail: Option<&str>, extra: &[&str]| {
        let mut cmd = wasmprof();
        cmd.args([
            "test",
            "--no-report",
            "-o",
            "merged.json",
            "--metric",
            metric,
        ])
        .args(extra)
        .current_dir(dir.path());
        match fail {
            Some(how) => cmd.env("ORDER_FAIL", how),
            None => cmd.env_remove("ORDER_FAIL"),
        };
        output(&mut cmd)
    };
    for metric in ["calls", "time", "exact-time", "instructions"] {
        let out = run(metric, None, &[]);
        assert!(out.status.success(), "{metric}: {}", stderr(&out));
        if metric == "exact-time" {
            // The doc tests' exact times are compensated as the binaries' are.
            assert_eq!(merged().uncompensated, None, "{metric}");
            assert!(!stderr(&out).contains("include the probes' own cost"));
        }
        assert_eq!(running(&out), all, "{metric}");
        let p = merged();
        // 1 (lib) + 1 (bin) + 2 (alpha) + 3 (mid) + 4 (zeta) + 2 (the doc test).
        assert_eq!(calls(&p, "order::add"), 13, "{metric}");
        assert_eq!(p.modules.len(), 6, "{metric}");
        assert!(
            p.modules
                .iter()
                .any(|m| m == "doc test src/lib.rs (line 7)"),
            "{metric}: {:?}",
            p.modules
        );
        each_function_once(&p);
        if metric != "calls" {
            check_invariants(&p);
        }
    }

    let out = run("calls", Some("panic"), &[]);
    assert_eq!(out.status.code(), Some(101));
    assert_eq!(running(&out), all[..4]);
    let err = stderr(&out);
    assert!(
        err.contains("test failed, to rerun pass `--test mid`"),
        "{err}"
    );
    assert!(
        err.contains("not run after the failure: tests/zeta.rs, the doc tests"),
        "{err}"
    );
    assert_eq!(calls(&merged(), "order::add"), 7);

    // A test that binds a socket fails by itself (wasip1 has no sockets to bind); its
    // panic aborts, so libtest's capture would keep its message.
    let out = run(
        "calls",
        Some("net"),
        &["--no-fail-fast", "--", "--nocapture"],
    );
    assert_eq!(out.status.code(), Some(101));
    assert_eq!(running(&out), all);
    let err = stderr(&out);
    assert!(err.contains("mid binds a socket"), "{err}");
    assert!(!err.contains("not run after the failure"), "{err}");
    // cargo's verdict with --no-fail-fast: the failed targets listed, even one.
    assert!(
        err.contains("error: 1 target failed:\n    `--test mid`"),
        "{err}"
    );
    assert_eq!(calls(&merged(), "order::add"), 13);

    // --doc: the doc tests alone, as cargo.
    let out = run("calls", None, &["--doc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(running(&out), ["Doc-tests order"]);
    assert_eq!(calls(&merged(), "order::add"), 2);

    // Edition 2024 merges the doc tests into one module: one profile, named for what it is.
    let manifest = dir.path().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("edition = \"2021\"", "edition = \"2024\""),
    )
    .unwrap();
    let out = run("calls", None, &["--doc"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let p = merged();
    assert_eq!(p.modules, ["the merged doc tests of order"]);
    assert_eq!(calls(&p, "order::add"), 2);
    std::fs::write(&manifest, text).unwrap();

    // A dependency that does not build for wasm: cargo's diagnostic, cargo's exit code.
    let out = run("calls", None, &["--features", "nowasm"]);
    assert_eq!(out.status.code(), Some(101));
    let err = stderr(&out);
    assert!(err.contains("nowasm does not support WebAssembly"), "{err}");
    assert!(
        err.contains("error: could not build the test binaries"),
        "{err}"
    );
}

/// `run` without a FILE builds the package's binary and runs it as `cargo run` does: its
/// arguments after `--`, its stdin and stdout, its exit code; the profile goes where
/// `test`'s go.
#[test]
fn run_builds_and_runs_the_packages_binary_as_cargo_run_does() {
    use std::io::Write as _;
    let dir = copy_fixture("order");
    let out = output(
        wasmprof()
            .args(["run", "--no-report"])
            .env_remove("ORDER_FAIL")
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "2");
    let bin = Profile::read(&dir.path().join("target/wasmprof/order-order-bin.json")).unwrap();
    assert_eq!(calls(&bin, "order::add"), 1);

    let mut child = wasmprof()
        .args(["run", "--example", "echo", "--no-report", "--", "3", "--x"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stdout(&out).contains("args: 3 --x"), "{}", stdout(&out));
    assert!(stdout(&out).contains("stdin: hello"));
    let example =
        Profile::read(&dir.path().join("target/wasmprof/order-echo-example.json")).unwrap();
    assert_eq!(calls(&example, "order::add"), 3);
}
