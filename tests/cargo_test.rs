//! `cargo wasmprof test` on real fixture crates, built by real cargo and run in the
//! embedded wasmtime. Every expected count follows from the fixture's code.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use cargo_wasmprof::harness::{measured_routines, test_functions};
use cargo_wasmprof::profile::{Profile, HOST};
use common::{
    arc, calls, check_invariants, copy_fixture, each_function_once, fib_calls, have, line_of,
    output, running, wasmprof,
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

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn test_command_runs_the_tests_and_reports() {
    let run = calls_run();
    assert!(run.out.status.success());
    let (out, err) = (stdout(&run.out), stderr(&run.out));
    // The harness's own output passes through.
    assert!(out.contains("test tests::fib_of_20 ... ok"));
    assert!(out.contains("test fib_from_outside ... ok"));
    // cargo-style status lines, then the report.
    assert!(err.contains("Running unittests src/lib.rs"));
    assert!(err.contains("Running tests/integration.rs"));
    for section in ["Flat profile", "Call graph", "Tests by cost"] {
        assert!(out.contains(section), "report has {section}");
    }
    assert!(out.contains("calls::fib  (src/lib.rs:"));
    // The other formats go to files beside the profiles, and the last lines say where.
    for (format, file) in [
        ("html", "target/wasmprof/report.html"),
        ("callgrind", "target/wasmprof/callgrind.out.report"),
    ] {
        assert!(
            err.contains(&format!("Wrote {format} report to {file}")),
            "{err}"
        );
        assert!(run.dir.path().join(file).exists());
    }
}

#[test]
fn plain_recursion() {
    let run = calls_run();
    let lib = run.lib();
    check_invariants(&lib);
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    assert_eq!(arc(&lib, "calls::fib", "calls::fib"), fib_calls(20) - 1);
    assert_eq!(arc(&lib, "calls::tests::fib_of_20", "calls::fib"), 1);
    let integration = run.profile("calls-integration-test.json");
    check_invariants(&integration);
    assert_eq!(calls(&integration, "calls::fib"), fib_calls(10));
    // The merged profile (-o) adds the binaries up.
    let merged = Profile::read(&run.dir.path().join("merged.json")).unwrap();
    assert_eq!(calls(&merged, "calls::fib"), fib_calls(20) + fib_calls(10));
    assert_eq!(merged.modules.len(), 2);
}

#[test]
fn mutual_recursion() {
    let lib = calls_run().lib();
    // is_even(10) and is_odd(7): is_even runs for 10,8,..,0 and 6,4,2,0; is_odd for 9,..,1 and 7,..,1.
    assert_eq!(calls(&lib, "calls::is_even"), 6 + 4);
    assert_eq!(calls(&lib, "calls::is_odd"), 5 + 4);
    assert_eq!(arc(&lib, "calls::is_even", "calls::is_odd"), 5 + 3);
    assert_eq!(arc(&lib, "calls::is_odd", "calls::is_even"), 5 + 4);
    assert_eq!(arc(&lib, "calls::tests::even_and_odd", "calls::is_even"), 1);
    assert_eq!(arc(&lib, "calls::tests::even_and_odd", "calls::is_odd"), 1);
}

#[test]
fn trait_objects_through_call_indirect() {
    let lib = calls_run().lib();
    let closure = "calls::total_area2::{closure#0}";
    assert_eq!(
        arc(&lib, closure, "<calls::Square as calls::Shape>::area2"),
        2
    );
    assert_eq!(
        arc(&lib, closure, "<calls::Triangle as calls::Shape>::area2"),
        1
    );
}

#[test]
fn function_pointer_tables() {
    let lib = calls_run().lib();
    assert_eq!(arc(&lib, "calls::apply_table", "calls::add_one"), 3);
    assert_eq!(arc(&lib, "calls::apply_table", "calls::double"), 3);
}

#[test]
fn closures_and_generics() {
    let lib = calls_run().lib();
    let repeat = lib
        .arcs
        .iter()
        .find(|a| {
            a.caller.starts_with("calls::repeat<")
                && a.callee.starts_with("calls::tests::closures::{closure#0}")
        })
        .expect("repeat calls the closure");
    assert_eq!(repeat.count, 5);
    assert_eq!(calls(&lib, "calls::largest<u32>"), 1);
    assert_eq!(calls(&lib, "calls::largest<f64>"), 1);
}

#[test]
fn names_files_and_lines_come_from_dwarf() {
    let run = calls_run();
    let lib = run.lib();
    let source = run.source();
    let fib = lib.function_named("calls::fib").unwrap();
    assert_eq!(
        Path::new(fib.file.as_deref().unwrap()).file_name().unwrap(),
        "lib.rs"
    );
    assert_eq!(fib.line, Some(line_of(&source, "pub fn fib(")));
    let area = lib
        .function_named("<calls::Square as calls::Shape>::area2")
        .unwrap();
    assert_eq!(
        area.line,
        Some(line_of(&source, "fn area2(&self) -> u64 {"))
    );
    // The recursive arc's call site is the line with both recursive calls.
    let recursion = lib.arc("calls::fib", "calls::fib").unwrap();
    assert_eq!(recursion.sites.len(), 1);
    assert_eq!(
        recursion.sites[0].pos.line,
        line_of(&source, "fib(n - 1) + fib(n - 2)")
    );
    assert_eq!(recursion.sites[0].count, fib_calls(20) - 1);
}

#[test]
fn host_entries_and_tests_view() {
    let lib = calls_run().lib();
    assert_eq!(arc(&lib, HOST, "_start"), 1);
    assert!(lib.complete);
    let tests: Vec<&str> = test_functions(&lib)
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    for name in [
        "fib_of_20",
        "even_and_odd",
        "shapes",
        "table",
        "closures",
        "generics",
    ] {
        assert!(
            tests.contains(&format!("calls::tests::{name}").as_str()),
            "{name} in {tests:?}"
        );
    }
}

#[test]
fn the_instructions_metric_ranks_tests_deterministically() {
    let dir = copy_fixture("calls");
    let out = output(
        wasmprof()
            .args(["test", "--lib", "--no-report", "--metric", "instructions"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success());
    let lib = Profile::read(&dir.path().join("target/wasmprof/calls-calls-lib.json")).unwrap();
    check_invariants(&lib);
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    // fib_of_20 executes by far the most instructions: 21891 calls of fib.
    let tests = test_functions(&lib);
    assert_eq!(tests[0].name, "calls::tests::fib_of_20");
    let fib = lib.function_named("calls::fib").unwrap().cost;
    assert_eq!(
        fib.self_instructions, fib.total_instructions,
        "fib calls nothing else"
    );
    assert!(
        fib.self_instructions.unwrap() >= 10 * fib_calls(20),
        "a fib call runs at least 10 instructions"
    );
}

#[test]
fn report_reads_a_profile_alone() {
    let run = calls_run();
    let copy = tempfile::tempdir().unwrap();
    let file = copy.path().join("lib.json");
    std::fs::copy(
        run.dir.path().join("target/wasmprof/calls-calls-lib.json"),
        &file,
    )
    .unwrap();
    let out = output(wasmprof().arg("report").arg(&file));
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("calls::fib"));
    assert!(text.contains(&fib_calls(20).to_string()));
}

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
    let wasm = std::fs::read_dir(&deps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.extension().is_some_and(|e| e == "wasm")
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("calls-")
        })
        .expect("the lib's test binary");
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
        assert!(!p.complete, "{metric}");
        assert_eq!(calls(&p, "outcomes::dive_and_trap"), 5, "{metric}");
        let stack = &p.runs[0].open_stack;
        assert_eq!(
            stack
                .iter()
                .filter(|f| *f == "outcomes::dive_and_trap")
                .count(),
            5,
            "{metric}: {stack:?}"
        );
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

#[test]
fn bench_profiles_the_benchmarks() {
    let dir = copy_fixture("benches");
    let out = output(
        wasmprof()
            .args(["bench", "--no-report"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success());
    assert!(stdout(&out).contains("squares: 50 iterations"));
    let p = Profile::read(
        &dir.path()
            .join("target/wasmprof/benches-squares-bench.json"),
    )
    .unwrap();
    check_invariants(&p);
    // ITERATIONS calls of sum_of_squares(N), each N calls of square; built with the bench
    // profile (optimized), with names and lines kept.
    assert_eq!(calls(&p, "benches::sum_of_squares"), 50);
    assert_eq!(calls(&p, "benches::square"), 50 * 1000);
    let square = p.function_named("benches::square").unwrap();
    assert_eq!(
        square.line,
        Some(line_of(&dir.path().join("src/lib.rs"), "pub fn square("))
    );
    assert!(dir.path().join("target/wasm32-wasip1/release").exists());
}

#[test]
fn criterion_benches_report_costs_per_iteration() {
    let dir = copy_fixture("criterion");
    let out = output(
        wasmprof()
            .args(["bench", "--bench", "fib", "--metric", "instructions", "--"])
            // Short runs: criterion's statistics would otherwise dominate the profile.
            .args(["--warm-up-time", "0.05", "--measurement-time", "0.1"])
            .args(["--sample-size", "10", "--nresamples", "100", "--noplot"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("fib 15"), "criterion ran the benchmark");
    let p = Profile::read(
        &dir.path()
            .join("target/wasmprof/criterion-fixture-fib-bench.json"),
    )
    .unwrap();
    check_invariants(&p);
    let routines = measured_routines(&p);
    let [routine] = routines.as_slice() else {
        panic!("one measured routine, found {routines:?}");
    };
    assert_eq!(routine.arc.callee, "criterion_fixture::fib");
    assert!(routine
        .harness
        .name
        .starts_with("criterion::bencher::Bencher<M>::iter<"));
    // Every iteration is one fib(15): 2 * F(16) - 1 calls, and the same instructions.
    let iterations = routine.iterations();
    assert!(iterations > 0);
    assert_eq!(
        calls(&p, "criterion_fixture::fib"),
        iterations * fib_calls(15)
    );
    let total = routine.arc.cost.total_instructions.unwrap();
    assert_eq!(
        total % iterations,
        0,
        "{total} instructions in {iterations} iterations"
    );
    let per_iteration = routine.per_iteration(p.metric).unwrap();
    assert_eq!(per_iteration, (total / iterations) as f64);
    let row = text
        .lines()
        .skip_while(|l| !l.contains("Benchmarks per iteration"))
        .find(|l| l.contains("criterion_fixture::fib  (criterion::bencher::Bencher"))
        .expect("the per-iteration section names the routine and its harness loop");
    assert!(row.contains(&iterations.to_string()), "{row}");
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

/// The default report leads with the program: a summary, the tests by cost, the flat
/// profile of the crate's own calls with the runtime's scaffolding folded into one line,
/// and a short call graph, on a screen or two.
#[test]
fn the_default_report_leads_with_the_programs_own_code() {
    let out = stdout(&calls_run().out);
    let report = &out[out.find("cargo-wasmprof profile:").expect("a report")..];
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines.len() < 80, "{} lines:\n{report}", lines.len());
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{report}"))
    };
    assert!(at("Tests by cost") < at("Flat profile"));
    assert!(at("Flat profile") < at("Call graph"));
    // The crate's hottest function leads the flat profile; the scaffolding is one line
    // after the rows, and libtest's console is in none of them.
    let flat = &lines[at("Flat profile")..at("Call graph")];
    let first_row = flat.iter().find(|l| l.contains("  calls::")).unwrap();
    assert!(
        first_row.contains("calls::fib  (src/lib.rs:"),
        "{first_row}"
    );
    assert!(flat
        .iter()
        .any(|l| l.contains("[the runtime's scaffolding:")));
    assert!(
        !report.contains("test::console::run_tests_console"),
        "{report}"
    );
    assert!(!report.contains("wasi_snapshot_preview1.path_filestat_get"));

    // --show-runtime lists it; --top all lists every function.
    let merged = calls_run().dir.path().join("merged.json");
    let all = stdout(&output(
        wasmprof().args(["wasmprof", "report"]).arg(&merged).args([
            "--show-runtime",
            "--top",
            "all",
        ]),
    ));
    assert!(all.contains("test::console::run_tests_console"), "{all}");
    assert!(!all.contains("[the runtime's scaffolding:"));
    assert!(!all.contains("more: --top all"));
}

/// `--focus`, `--ignore` and `--by`, with counts that follow from the fixture's code.
#[test]
fn focus_ignore_and_grouping_views_keep_exact_counts() {
    let run = calls_run();
    let merged = run.dir.path().join("merged.json");
    let view = |args: &[&str]| -> Profile {
        let file = run.dir.path().join(format!(
            "view-{}.json",
            args.join("_").replace(['$', ':', '\''], "")
        ));
        let out = output(
            wasmprof()
                .args(["wasmprof", "report"])
                .arg(&merged)
                .args(["--format", "json", "-o"])
                .arg(&file)
                .args(args),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        Profile::read(&file).unwrap()
    };
    // is_even(10) and is_odd(7): the stacks through is_even hold all of the first chain's
    // 11 calls and the second's from is_even(6) on: is_even 6 + 4, is_odd 5 + 3, both
    // entries re-rooted at the host.
    let even = view(&["--focus", "calls::is_even$"]);
    assert_eq!(calls(&even, "calls::is_even"), 6 + 4);
    assert_eq!(calls(&even, "calls::is_odd"), 5 + 3);
    assert_eq!(arc(&even, HOST, "calls::is_even"), 2);
    assert_eq!(arc(&even, "calls::is_odd", "calls::is_even"), 5 + 3);
    assert_eq!(even.functions.len(), 2);
    // Without the stacks through is_odd, is_even(10) alone is left.
    let odd = view(&["--ignore", "calls::is_odd$"]);
    assert_eq!(calls(&odd, "calls::is_even"), 1);
    assert!(odd.function_named("calls::is_odd").is_none());
    assert_eq!(calls(&odd, "calls::fib"), fib_calls(20) + fib_calls(10));
    // fib calls nothing: its stacks by crate are one group, entered twice (fib(20) and
    // fib(10)), its recursion inside the group.
    let whole = Profile::read(&merged).unwrap();
    let fib = view(&["--focus", "calls::fib$", "--by", "crate"]);
    assert_eq!(fib.functions.len(), 1);
    assert_eq!(fib.functions[0].name, "calls");
    assert_eq!(fib.functions[0].calls, 2);
    assert_eq!(
        fib.functions[0].cost.self_ns,
        whole.function_named("calls::fib").unwrap().cost.self_ns
    );
    // By crate, every unit of cost is some group's own, and the crates are there.
    let crates = view(&["--by", "crate"]);
    let self_sum = |p: &Profile| p.functions.iter().map(|f| f.cost.self_ns).sum::<u64>();
    assert_eq!(self_sum(&crates), self_sum(&whole));
    for name in [
        "calls",
        "integration",
        "std",
        "core",
        "test",
        "libc",
        "wasi_snapshot_preview1",
    ] {
        assert!(crates.function_named(name).is_some(), "no crate {name}");
    }
    // Every format draws the view: the folded stacks of a focus start there (counted
    // instructions, so that every stack has a weight), and weigh fib's whole self cost.
    let counted = instructions_run().dir.path().join("merged.json");
    let folded = stdout(&output(
        wasmprof().args(["wasmprof", "report"]).arg(&counted).args([
            "--format",
            "folded",
            "--focus",
            "calls::fib$",
        ]),
    ));
    assert!(!folded.is_empty());
    assert!(
        folded.lines().all(|l| l.starts_with("calls::fib")),
        "{folded}"
    );
    let weight: u64 = folded
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let fib = Profile::read(&counted).unwrap();
    let fib = fib.function_named("calls::fib").unwrap();
    assert_eq!(Some(weight), fib.cost.self_instructions);
    let text = stdout(&output(
        wasmprof().args(["wasmprof", "report"]).arg(&merged).args([
            "--focus",
            "calls::is_even$",
            "--top",
            "all",
        ]),
    ));
    assert!(text.contains("view: focus 'calls::is_even$':"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("(src/lib.rs:"))
        .collect();
    assert!(rows.iter().all(|l| l.contains("calls::is_")), "{text}");
    // A bad expression is one line naming the option.
    let bad = output(
        wasmprof()
            .args(["wasmprof", "report"])
            .arg(&merged)
            .args(["--focus", "fib("]),
    );
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--focus"), "{}", stderr(&bad));
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

/// Executed instructions per source line, exact: a line's cost is its runs (known from the
/// code) times its instructions (a constant of the compiled code), and a function's lines
/// sum to its self instructions.
#[test]
fn per_line_instruction_counts_follow_from_the_code() {
    let run = instructions_run();
    let source = run.source();
    let line = |p: &Profile, needle: &str| -> u64 {
        let at = line_of(&source, needle);
        p.lines
            .iter()
            .filter(|l| l.function == "calls::fib" && l.line == at)
            .map(|l| l.instructions)
            .sum()
    };
    // fib(n) makes 2F(n+1)-1 calls: F(n+1) of them take the base case, F(n+1)-1 recurse.
    fn leaves(n: u32) -> u64 {
        fib_calls(n).div_ceil(2)
    }
    let (lib, integration) = (run.lib(), run.profile("calls-integration-test.json"));
    for (needle, runs) in [
        ("pub fn fib(", fib_calls as fn(u32) -> u64),
        ("n as u64", leaves),
        ("fib(n - 1) + fib(n - 2)", |n| leaves(n) - 1),
    ] {
        let (a, b) = (line(&lib, needle), line(&integration, needle));
        assert!(a > 0, "{needle}: no instructions");
        assert_eq!(a % runs(20), 0, "{needle}: {a} in {} runs", runs(20));
        assert_eq!(b % runs(10), 0, "{needle}: {b} in {} runs", runs(10));
        assert_eq!(a / runs(20), b / runs(10), "{needle}: the same per run");
    }
    // Every defined function's lines sum to its self instructions.
    let merged = Profile::read(&run.dir.path().join("merged.json")).unwrap();
    for p in [&lib, &integration, &merged] {
        for f in p.functions.iter().filter(|f| !f.import) {
            let sum: u64 = p
                .lines
                .iter()
                .filter(|l| l.function == f.name)
                .map(|l| l.instructions)
                .sum();
            assert_eq!(Some(sum), f.cost.self_instructions, "{}", f.name);
        }
    }
    // annotate prints the source with each line's count, the hottest marked.
    let out = output(
        wasmprof()
            .args(["wasmprof", "annotate"])
            .arg(run.dir.path().join("merged.json"))
            .arg("calls::fib$")
            .current_dir(run.dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let recursive = line(&merged, "fib(n - 1) + fib(n - 2)");
    let row = text
        .lines()
        .find(|l| l.contains("fib(n - 1) + fib(n - 2)"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.starts_with(">>"), "{row}");
    assert!(row.contains(&format!(" {recursive} ")), "{row}");
    // A profile without per-line costs says what makes them.
    let timed = output(
        wasmprof()
            .args(["wasmprof", "annotate"])
            .arg(calls_run().dir.path().join("merged.json")),
    );
    assert!(!timed.status.success());
    assert!(
        stderr(&timed).contains("--metric instructions"),
        "{}",
        stderr(&timed)
    );
}

/// One `cargo wasmprof test --metric instructions` of the `lines` fixture: `sum(100)` in
/// the library's tests, `sum(10)` in tests/ten.rs.
fn lines_run() -> &'static CallsRun {
    static RUN: OnceLock<CallsRun> = OnceLock::new();
    shared_run(&RUN, "lines", &["--format", "callgrind,pprof"])
}

/// A loop's lines cost their runs (n + 1 for its test, n for its body) times a constant of
/// the compiled code, and an `#[inline(always)]` helper's line is attributed to the helper,
/// inlined at its call's line; `annotate`, `--inlined`, `callgrind_annotate --auto=yes` and
/// `go tool pprof -list` show them.
#[test]
fn loop_lines_and_an_inlined_helper_cost_what_the_code_says() {
    let run = lines_run();
    let source = run.source();
    let (lib, ten) = (
        run.profile("lines-lines-lib.json"),
        run.profile("lines-ten-test.json"),
    );
    let call_line = line_of(&source, "total ^= helper(i);");
    let cost = |p: &Profile, needle: &str| -> u64 {
        let at = line_of(&source, needle);
        p.lines
            .iter()
            .filter(|l| l.function == "lines::sum" && l.line == at)
            .map(|l| l.instructions)
            .sum()
    };
    for (needle, runs) in [
        ("while i < n {", 1),
        ("total ^= helper(i);", 0),
        ("i += 1;", 0),
        ("(x << 1) ^ 5", 0),
    ] {
        let (a, b) = (cost(&lib, needle), cost(&ten, needle));
        let (ra, rb) = (100 + runs, 10 + runs);
        assert!(
            a > 0 && a % ra == 0 && b % rb == 0,
            "{needle}: {a}/{ra}, {b}/{rb}"
        );
        assert_eq!(a / ra, b / rb, "{needle}: the same per run");
    }
    // The helper's line is the helper's, inlined at the call.
    let helper_line = line_of(&source, "(x << 1) ^ 5");
    let helper: Vec<_> = lib
        .lines
        .iter()
        .filter(|l| l.line == helper_line && l.file.as_deref().map(Path::new) == Some(&source))
        .collect();
    assert!(!helper.is_empty());
    for l in &helper {
        assert_eq!(l.function, "lines::sum");
        let inlined = l.inlined.first().expect("attributed to the inlined helper");
        assert_eq!(inlined.function, "lines::helper");
        assert_eq!(inlined.call_line, call_line);
    }
    let helper_cost = cost(&lib, "(x << 1) ^ 5");

    let merged = run.dir.path().join("merged.json");
    let annotate = stdout(&output(
        wasmprof()
            .args(["wasmprof", "annotate"])
            .arg(&merged)
            .arg("lines::helper"),
    ));
    assert!(
        annotate.contains("lines::helper (inlined into lines::sum)"),
        "{annotate}"
    );
    let merged_helper = helper_cost + cost(&ten, "(x << 1) ^ 5");
    assert!(
        annotate
            .lines()
            .any(|l| l.contains("(x << 1) ^ 5") && l.contains(&format!(" {merged_helper} "))),
        "{annotate}"
    );
    // --inlined: the helper is a row of its own, its instructions out of sum's self.
    let report = stdout(&output(
        wasmprof()
            .args(["wasmprof", "report", "--inlined", "--top", "all"])
            .arg(run.dir.path().join("target/wasmprof/lines-lines-lib.json")),
    ));
    let row = |name: &str| -> Vec<String> {
        report
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} in\n{report}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("lines::helper [inlined]")[2], helper_cost.to_string());
    let sum_self = lib
        .function_named("lines::sum")
        .unwrap()
        .cost
        .self_instructions
        .unwrap();
    assert_eq!(
        row("lines::sum  (")[2],
        (sum_self - helper_cost).to_string()
    );

    // The HTML page carries the annotated source of the costliest functions.
    let page = String::from_utf8(
        output(
            wasmprof()
                .args(["wasmprof", "report", "--format", "html"])
                .arg(run.dir.path().join("target/wasmprof/lines-lines-lib.json")),
        )
        .stdout,
    )
    .unwrap();
    assert!(
        page.contains("total ^= helper(i);"),
        "the source of sum in the page"
    );
    // The consumers: callgrind_annotate annotates the source, go tool pprof lists it.
    let body = cost(&lib, "i += 1;") + cost(&ten, "i += 1;");
    if have(&["callgrind_annotate"]) {
        let file = run.dir.path().join("target/wasmprof/callgrind.out.report");
        let out = stdout(&output(
            Command::new("callgrind_annotate")
                .arg("--auto=yes")
                .arg(&file),
        ));
        let grouped = |n: u64| {
            let digits = n.to_string();
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(c);
            }
            out
        };
        assert!(
            out.lines()
                .any(|l| l.contains("i += 1;") && l.trim_start().starts_with(&grouped(body))),
            "{out}"
        );
    }
    if have(&["go"]) {
        let file = run.dir.path().join("target/wasmprof/report.pb.gz");
        let out = output(
            Command::new("go")
                .args([
                    "tool",
                    "pprof",
                    "-sample_index=line_instructions",
                    "-list",
                    "lines::sum$",
                ])
                .arg(&file),
        );
        let out = stdout(&out);
        let listed = format!("{}:", line_of(&source, "i += 1;"));
        let row = out
            .lines()
            .find(|l| l.contains(&listed) && l.contains("i += 1;"))
            .unwrap_or_else(|| panic!("{out}"));
        assert_eq!(
            row.split_whitespace().next(),
            Some(body.to_string().as_str()),
            "{row}"
        );
    }
}

/// fixtures/threads on wasm32-wasip1-threads: four std threads call `step` 100, 200, 300
/// and 400 times, rayon's pool calls `square` 1000 times; the binary's `main` runs three
/// workers (100 + 200 + 300 `step`s), a rayon sum of 500 `square`s and a thread of 7.
#[test]
fn threads_have_exact_counts_each_and_together() {
    let target = ["--target", "wasm32-wasip1-threads"];
    let run = test_run(
        "threads",
        &[
            &target[..],
            &[
                "--metric",
                "instructions",
                "--format",
                "text,speedscope,firefox,pprof",
                "--threads",
            ],
        ]
        .concat(),
    );
    assert!(run.out.status.success());
    assert!(stdout(&run.out).contains("test result: ok. 2 passed"));
    let lib = run.profile("wasm32-wasip1-threads/threads-threads-lib.json");
    let per_thread = |name: &str| -> Vec<u64> {
        lib.threads
            .iter()
            .map(|t| calls_in(&t.profile, name))
            .filter(|&n| n > 0)
            .collect()
    };
    let mut steps = per_thread("threads::step");
    steps.sort();
    assert_eq!(
        steps,
        [100, 200, 300, 400],
        "one worker per thread, each its own count"
    );
    assert_eq!(calls(&lib, "threads::step"), 1000);
    assert_eq!(per_thread("threads::square").iter().sum::<u64>(), 1000);
    assert_eq!(calls(&lib, "threads::square"), 1000);
    assert_eq!(lib.threads[0].id, 0);
    // Every function's calls and self instructions are the sum of the threads'.
    for f in &lib.functions {
        let name = f.name.split(" [").next().unwrap();
        let threads: Vec<&cargo_wasmprof::profile::Function> = lib
            .threads
            .iter()
            .flat_map(|t| &t.profile.functions)
            .filter(|g| {
                g.name.split(" [").next().unwrap() == name && g.file == f.file && g.line == f.line
            })
            .collect();
        assert_eq!(
            f.calls,
            threads.iter().map(|g| g.calls).sum::<u64>(),
            "{}",
            f.name
        );
        assert_eq!(
            f.cost.self_instructions,
            Some(
                threads
                    .iter()
                    .map(|g| g.cost.self_instructions.unwrap_or(0))
                    .sum()
            ),
            "{}",
            f.name
        );
    }
    let report = stdout(&run.out);
    assert!(
        report.contains(&format!("threads: {}", lib.threads.len())),
        "{report}"
    );
    assert!(report.contains("Threads (each thread's cost"), "{report}");
    assert!(report.contains("thread 4: "), "{report}");
    // speedscope: the whole run, then a profile per thread; Firefox: a thread per thread.
    let reports = run.dir.path().join("target/wasmprof/wasm32-wasip1-threads");
    let json = |file: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(reports.join(file)).unwrap()).unwrap()
    };
    let speedscope = json("report.speedscope.json");
    let threads = lib.threads.len()
        + cargo_wasmprof::profile::Profile::read(&reports.join("threads-threads-bin.json"))
            .unwrap()
            .threads
            .len();
    assert_eq!(
        speedscope["profiles"].as_array().unwrap().len(),
        1 + threads
    );
    let firefox = json("report.firefox.json");
    assert_eq!(firefox["threads"].as_array().unwrap().len(), threads);
    // pprof: each thread's samples labelled with it.
    let tags = output(
        Command::new("go")
            .args(["tool", "pprof", "-tags", "-sample_index=calls"])
            .arg(reports.join("report.pb.gz")),
    );
    let tags = stdout(&tags);
    for t in &lib.threads {
        assert!(tags.contains(&format!(": {}\n", t.label())), "{tags}");
    }

    // `run` of the binary: the program's output and exit code as without the profiler.
    let wasm = run
        .dir
        .path()
        .join("target/wasm32-wasip1-threads/debug/threads.wasm");
    let build = output(
        Command::new("cargo")
            .args(["build", "--target", "wasm32-wasip1-threads"])
            .current_dir(run.dir.path()),
    );
    assert!(build.status.success());
    let plain = output(
        wasmprof()
            .args(["wasmprof", "run", "--no-instrument"])
            .arg(&wasm),
    );
    let merged = run.dir.path().join("run.json");
    let profiled = output(
        wasmprof()
            .args(["wasmprof", "run", "--metric", "calls", "--no-report", "-o"])
            .arg(&merged)
            .arg(&wasm),
    );
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(profiled.status.code(), Some(0));
    assert_eq!(stdout(&plain), stdout(&profiled));
    assert!(stdout(&plain).contains("joined: true"));
    let p = Profile::read(&merged).unwrap();
    assert_eq!(calls(&p, "threads::step"), 100 + 200 + 300 + 7);
    assert_eq!(calls(&p, "threads::square"), 500);
    assert_eq!(calls(&p, "threads::work"), 4);
    let mut works: Vec<u64> = p
        .threads
        .iter()
        .map(|t| calls_in(&t.profile, "threads::step"))
        .filter(|&n| n > 0)
        .collect();
    works.sort();
    assert_eq!(works, [7, 100, 200, 300]);
}

/// The calls of `name` in `p`, 0 when it was never called there.
fn calls_in(p: &Profile, name: &str) -> u64 {
    p.function_named(name).map_or(0, |f| f.calls)
}
