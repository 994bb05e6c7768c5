//! `--target wasm32-wasip2`: the test binaries are components, whose core module is
//! profiled as a wasip1 module is, with the same known counts.

use super::*;

/// The `calls` fixture's suite as components: the counts of its code, the samples, a
/// profile for every binary and doc test, the components valid as written.
#[test]
fn components_get_the_counts_their_code_makes() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let target = ["--target", "wasm32-wasip2"];
    let run = test_run("calls", &[&target[..], &["-o", "merged.json"]].concat());
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    assert!(stdout(&run.out).contains("test result: ok."));
    let lib = run.profile("wasm32-wasip2/calls-calls-lib.json");
    check_invariants(&lib);
    // fib_of_20: fib(20); even_and_odd: is_even(10) runs for 10, 8, .., 0 and is_odd(7)
    // reaches it for 6, 4, 2, 0.
    assert_eq!(calls(&lib, "calls::fib"), fib_calls(20));
    assert_eq!(arc(&lib, "calls::tests::fib_of_20", "calls::fib"), 1);
    assert_eq!(calls(&lib, "calls::is_even"), 6 + 4);
    assert_eq!(arc(&lib, "calls::is_odd", "calls::is_even"), 5 + 4);
    let sampling = lib.sampling.as_ref().expect("sampled time");
    assert_eq!(sampling.sampler, cargo_wasmprof::meta::Sampler::Stacks);
    // The WASI 0.2 host's functions are the imports the program calls.
    assert!(
        lib.functions.iter().any(|f| f.name.starts_with("wasi:")),
        "{:?}",
        lib.functions.iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    let merged = Profile::read(&run.dir.path().join("merged.json")).unwrap();
    each_function_once(&merged);
    // A component refuses `--metric instructions` (so its profile, which says it was a
    // component's, suggests it nowhere: the hints test).
    assert!(lib.runs.iter().all(|r| r.component), "{:?}", lib.runs);
    let refused = test_run(
        "calls",
        &[&target[..], &["--lib", "--metric", "instructions"]].concat(),
    );
    assert!(!refused.out.status.success());

    // The calls metric, and the context tree with the allocations.
    for extra in [&["--metric", "calls"][..], &["--contexts", "--allocations"]] {
        let run = test_run("calls", &[&target[..], &["--lib"], extra].concat());
        assert!(run.out.status.success(), "{extra:?}: {}", stderr(&run.out));
        let lib = run.profile("wasm32-wasip2/calls-calls-lib.json");
        check_invariants(&lib);
        assert_eq!(calls(&lib, "calls::fib"), fib_calls(20), "{extra:?}");
    }
}

/// A trap (a panic aborts), a failing test (libtest exits 101), a stack overflow: each
/// leaves its profile, with the stack where the run stopped, and the plain run's exit code.
#[test]
fn a_component_that_traps_exits_or_overflows_keeps_its_profile() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let dir = copy_fixture("outcomes");
    let profile = || {
        Profile::read(
            &dir.path()
                .join("target/wasmprof/wasm32-wasip2/outcomes-outcomes-lib.json"),
        )
        .unwrap()
    };
    let test = |name: &str, flags: &[&str]| {
        output(
            wasmprof()
                .args(["test", name, "--target", "wasm32-wasip2"])
                .args(flags)
                .current_dir(dir.path()),
        )
    };
    for flags in [
        &["--metric", "time", "--contexts"][..],
        &["--metric", "calls"],
    ] {
        let out = test("traps", flags);
        assert_eq!(out.status.code(), Some(101), "{flags:?}: {}", stderr(&out));
        dove_five_times(&profile(), &format!("{flags:?}"));
    }
    // libtest exits with 101 after the failed assertion's panic (which aborts: a trap of
    // the test's, reported by libtest's own process in a plain run too).
    let out = test("fails", &["--", "--nocapture"]);
    assert_eq!(out.status.code(), Some(101), "{}", stderr(&out));
    assert!(stderr(&out).contains("this test fails on purpose"));
    assert_eq!(calls(&profile(), "outcomes::countdown"), 4);
    // A stack overflow: thousands of levels, each counted, the run ended inside them.
    let out = test("overflows", &["--contexts"]);
    assert_eq!(out.status.code(), Some(101), "{}", stderr(&out));
    let p = profile();
    assert!(!p.complete);
    let levels = calls(&p, "outcomes::recurse_until_overflow");
    assert!(levels > 1000, "{levels}");
    let open = p.runs[0]
        .open_stack
        .iter()
        .filter(|f| *f == "outcomes::recurse_until_overflow")
        .count() as u64;
    // Every level is open; the call whose prologue overflowed the stack is on the
    // backtrace, and a context tree's entry probe did not count it yet.
    assert!(
        open == levels || open == levels + 1,
        "{open} open of {levels} levels"
    );
}

/// `cargo wasmprof instrument` of a component writes a component; `run` runs it.
#[test]
fn instrument_writes_a_component_that_run_profiles() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let dir = copy_fixture("calls");
    let built = output(
        Command::new("cargo")
            .args(["test", "--target", "wasm32-wasip2", "--lib", "--no-run"])
            .current_dir(dir.path()),
    );
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let component = binary_in(
        &dir.path().join("target/wasm32-wasip2/debug/deps"),
        "calls-",
    );
    let out_wasm = dir.path().join("calls.instrumented.wasm");
    let out = output(
        wasmprof()
            .args(["wasmprof", "instrument"])
            .arg(&component)
            .arg("-o")
            .arg(&out_wasm),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let bytes = std::fs::read(&out_wasm).unwrap();
    assert!(wasmparser::Parser::is_component(&bytes));
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&bytes)
        .unwrap();
    let profile = dir.path().join("p.json");
    let out = output(
        wasmprof()
            .args(["wasmprof", "run", "-o"])
            .arg(&profile)
            .arg(&out_wasm)
            .args(["fib_of_20"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let p = Profile::read(&profile).unwrap();
    assert_eq!(calls(&p, "calls::fib"), fib_calls(20));
}

/// Whether rustup has `target` (CI installs it; elsewhere the test says it is skipped).
pub(super) fn have_target(target: &str) -> bool {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == target)
        });
    if !installed && std::env::var_os("CI").is_some() {
        panic!("the {target} target is missing (rustup target add {target})");
    }
    if !installed {
        eprintln!("skipped: the {target} target is not installed");
    }
    installed
}

/// A wasip2 suite runs as on wasip1: cargo's order, the doc tests (each a component of its
/// own), fail-fast, and the plain run's `test result:` lines.
#[test]
fn a_wasip2_suite_runs_in_cargos_order_with_its_doc_tests() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let dir = copy_fixture("order");
    let all = [
        "unittests src/lib.rs",
        "unittests src/main.rs",
        "tests/alpha.rs",
        "tests/mid.rs",
        "tests/zeta.rs",
        "Doc-tests order",
    ];
    let run = |fail: Option<&str>| {
        let mut cmd = wasmprof();
        cmd.args(["test", "--target", "wasm32-wasip2", "--no-report"])
            .args(["-o", "merged.json"])
            .current_dir(dir.path());
        match fail {
            Some(how) => cmd.env("ORDER_FAIL", how),
            None => cmd.env_remove("ORDER_FAIL"),
        };
        output(&mut cmd)
    };
    let out = run(None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(running(&out), all);
    let merged = || Profile::read(&dir.path().join("merged.json")).unwrap();
    let p = merged();
    // 1 (lib) + 1 (bin) + 2 (alpha) + 3 (mid) + 4 (zeta) + 2 (the doc test).
    assert_eq!(calls(&p, "order::add"), 13);
    assert_eq!(p.modules.len(), 6);
    each_function_once(&p);
    // The plain run's verdicts, with cargo-wasmprof's plain runner as the target's runner.
    let plain = output(
        Command::new("cargo")
            .args(["test", "--target", "wasm32-wasip2"])
            .env(
                "CARGO_TARGET_WASM32_WASIP2_RUNNER",
                format!(
                    "{} wasmprof run --no-instrument",
                    env!("CARGO_BIN_EXE_cargo-wasmprof")
                ),
            )
            .env_remove("ORDER_FAIL")
            .current_dir(dir.path()),
    );
    assert!(plain.status.success(), "{}", stderr(&plain));
    let verdicts = |out: &Output| -> Vec<String> {
        stdout(out)
            .lines()
            .filter(|l| l.starts_with("test result:"))
            .map(|l| l.split("; finished").next().unwrap().to_string())
            .collect()
    };
    assert_eq!(verdicts(&out), verdicts(&plain));

    let out = run(Some("panic"));
    assert_eq!(out.status.code(), Some(101));
    assert_eq!(running(&out), all[..4]);
    assert!(stderr(&out).contains("not run after the failure: tests/zeta.rs, the doc tests"));
    assert_eq!(calls(&merged(), "order::add"), 7);
}

/// Any component that targets `wasi:cli/command`: here a wasip1 test binary made a
/// component with WASI's adapter (as `wasm-tools component new --adapt` makes one), whose
/// program is its main module and the adapter a module of its own.
#[test]
fn a_component_made_with_the_wasip1_adapter_is_profiled() {
    use wasi_preview1_component_adapter_provider::{
        WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
    };
    let dir = copy_fixture("calls");
    let built = output(
        Command::new("cargo")
            .args(["test", "--target", "wasm32-wasip1", "--lib", "--no-run"])
            .current_dir(dir.path()),
    );
    assert!(built.status.success(), "{}", stderr(&built));
    let module = std::fs::read(binary_in(
        &dir.path().join("target/wasm32-wasip1/debug/deps"),
        "calls-",
    ))
    .unwrap();
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )
        .unwrap()
        .validate(true)
        .encode()
        .unwrap();
    let path = dir.path().join("adapted.wasm");
    std::fs::write(&path, component).unwrap();
    let profile = dir.path().join("p.json");
    let out = output(
        wasmprof()
            .args(["wasmprof", "run", "--no-report", "-o"])
            .arg(&profile)
            .arg(&path)
            .arg("fib_of_20")
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("test result: ok. 1 passed"));
    let p = Profile::read(&profile).unwrap();
    check_invariants(&p);
    assert_eq!(calls(&p, "calls::fib"), fib_calls(20));
    // The adapter's code is not the program's: its functions are none of the profile's.
    assert!(p
        .functions
        .iter()
        .all(|f| !f.name.contains("wasi_snapshot_preview1::")));
}
