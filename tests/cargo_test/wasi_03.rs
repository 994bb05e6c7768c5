//! WASI 0.3, the async world: a `wasi:cli/run@0.3` command (fixtures/p3, the `wasip3`
//! crate's `export!` in a cdylib) run by `run --target wasm32-wasip2`, and its tests, a WASI
//! 0.2 test binary that calls WASI 0.3's functions. The counts follow from its code.

use super::components::have_target;
use super::*;

/// `cargo wasmprof run --target wasm32-wasip2 -q FLAGS -- ARGS` in `dir`.
fn run_p3(dir: &Path, flags: &[&str], args: &[&str]) -> Output {
    output(
        wasmprof()
            .args(["wasmprof", "run", "--target", "wasm32-wasip2", "-q"])
            .args(flags)
            .arg("--")
            .args(args)
            .current_dir(dir),
    )
}

/// fib(20), a loop of 1,000 calls of `step` and an await on the clock, then one more
/// `step`: exact counts, and the plain run's output and exit code; `fail` (its `run`
/// returns `Err(())`) exits 1, as the plain run does, and leaves its profile.
#[test]
fn a_wasi_03_command_gets_the_counts_of_its_code() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let dir = copy_fixture("p3");
    let args = ["fib", "20", "loop", "1000", "wait", "2"];
    let plain = run_p3(dir.path(), &["--no-instrument"], &args);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let profiled = run_p3(dir.path(), &["--no-report", "-o", "p.json"], &args);
    assert!(profiled.status.success(), "{}", stderr(&profiled));
    assert_eq!(stdout(&profiled), stdout(&plain));
    assert!(stdout(&plain).contains("fib = 6765"), "{}", stdout(&plain));
    let p = Profile::read(&dir.path().join("p.json")).unwrap();
    check_invariants(&p);
    each_function_once(&p);
    assert!(p.complete);
    assert_eq!(calls(&p, "p3_fixture::fib"), fib_calls(20));
    assert_eq!(calls(&p, "p3_fixture::step"), 1_000 + 1);
    assert_eq!(
        arc(&p, "p3_fixture::steps::{closure#0}", "p3_fixture::step"),
        1_000
    );
    assert!(p.runs.iter().all(|r| r.component), "{:?}", p.runs);

    for flags in [
        &["--no-instrument"][..],
        &["--no-report", "-o", "failed.json"],
    ] {
        let failed = run_p3(dir.path(), flags, &["fib", "5", "fail"]);
        assert_eq!(
            failed.status.code(),
            Some(1),
            "{flags:?}: {}",
            stderr(&failed)
        );
        assert!(
            stderr(&failed).contains("failing as asked"),
            "{}",
            stderr(&failed)
        );
    }
    let p = Profile::read(&dir.path().join("failed.json")).unwrap();
    assert_eq!(calls(&p, "p3_fixture::fib"), fib_calls(5));
    assert_eq!(p.runs[0].exit_code, 1);

    // The component the instrumenter writes is valid.
    let wasm = dir
        .path()
        .join("target/wasm32-wasip2/debug/p3_fixture.wasm");
    let written = dir.path().join("p3.instrumented.wasm");
    let out = output(
        wasmprof()
            .args(["wasmprof", "instrument"])
            .arg(&wasm)
            .arg("-o")
            .arg(&written),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&std::fs::read(&written).unwrap())
        .unwrap();
}

/// The tests of a crate that calls WASI 0.3's functions: its test binary is a WASI 0.2
/// command, run with WASI 0.2 and 0.3 both linked, with the counts of its code.
#[test]
fn tests_that_call_wasi_03_get_the_counts_of_their_code() {
    if !have_target("wasm32-wasip2") {
        return;
    }
    let run = test_run("p3", &["--target", "wasm32-wasip2", "--no-report"]);
    assert!(run.out.status.success(), "{}", stderr(&run.out));
    assert!(stdout(&run.out).contains("test result: ok. 2 passed"));
    let lib = run.profile("wasm32-wasip2/p3-fixture-p3_fixture-cdylib.json");
    check_invariants(&lib);
    assert_eq!(calls(&lib, "p3_fixture::fib"), fib_calls(15));
    assert_eq!(calls(&lib, "p3_fixture::step"), 10);
}

/// A Spin SDK 7 service (fixtures/spin: `#[http_service]`, a `wasi:http/handler@0.3`
/// component), built and served by `serve` on one worker, its instances reused for 10
/// requests each: an instance's count of its requests, sequential and concurrent requests,
/// a panicking one answered 500 and kept, then more in a new instance; each handler's calls
/// are the requests' times its calls per request.
#[test]
fn a_spin_service_is_served_with_the_counts_its_code_makes() {
    use super::serve::{curl, fib_and_hello, served_counts, serving};
    if !have_target("wasm32-wasip2") || !have(&["curl"]) {
        return;
    }
    let dir = copy_fixture("spin");
    let (counted, sequential, concurrent, after) = (12, 20, 40, 2);
    let requests = counted + sequential + concurrent + 1 + after;
    let count = requests.to_string();
    let reuse = [
        "--workers",
        "1",
        "--instance-reuse",
        "10",
        "--requests",
        &count,
    ];
    let (server, base) = serving(
        dir.path(),
        &[&["--no-report", "-o", "served.json"], &reuse[..]].concat(),
    );
    // What `/count` answers, `n` times in turn: the instance's count of its requests.
    let counts = |n: usize| -> Vec<String> {
        (0..n)
            .map(|_| {
                stdout(&output(
                    Command::new("curl").args(["-s", &format!("{base}/count")]),
                ))
            })
            .map(|body| body.trim().to_string())
            .collect()
    };
    // Ten requests an instance, then a new one.
    let first: Vec<String> = (1..=10).chain(1..=2).map(|n| n.to_string()).collect();
    assert_eq!(counts(counted), first);
    fib_and_hello(&base, sequential, concurrent);
    assert_eq!(curl(&[], &[&format!("{base}/panic")]), [500]);
    // The panic ended its instance: the next request is a new one's first.
    assert_eq!(counts(after), ["1", "2"]);
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    let p = Profile::read(&dir.path().join("served.json")).unwrap();
    let fibs = served_counts(&p, "spin_fixture", (sequential, concurrent), "panics");
    let served = p.requests.as_ref().expect("the requests");
    assert_eq!(served.total(), requests as u64);
    let route = |r: &str| served.routes.iter().find(|x| x.route == r).unwrap();
    assert_eq!(route("GET /fib").requests, fibs);
    assert_eq!(route("GET /count").requests, (counted + after) as u64);
    let panicked = route("GET /panic");
    assert_eq!(
        (panicked.requests, panicked.trapped, panicked.server_errors),
        (1, 1, 1)
    );
    let trapped = p
        .runs
        .iter()
        .find(|r| r.trap.is_some())
        .expect("the trap's run");
    assert!(trapped
        .open_stack
        .iter()
        .any(|f| f == "spin_fixture::panics"));
}

/// A WASI 0.3 service's instance serves requests at once while their handlers wait, as
/// `wasmtime serve` does: on one worker, eight requests that each wait a second (fixtures/
/// spin's `/wait`) all see the instance's nine requests (a first, then the eight), where
/// `--instance-concurrency 1` serves them one after another (each sees its own count).
#[test]
fn a_spin_services_instance_serves_the_requests_that_wait_at_once() {
    use super::serve::serving;
    if !have_target("wasm32-wasip2") || !have(&["curl"]) {
        return;
    }
    let dir = copy_fixture("spin");
    for (at_once, answers) in [("16", vec![9; 8]), ("1", (2..=9).collect::<Vec<u32>>())] {
        let args = [
            "--no-report",
            "-o",
            "served.json",
            "--workers",
            "1",
            "--requests",
            "9",
        ];
        let at_once_args = ["--instance-concurrency", at_once];
        let (server, base) = serving(dir.path(), &[&args[..], &at_once_args].concat());
        let curl = |args: &[&str]| stdout(&output(Command::new("curl").arg("-s").args(args)));
        assert_eq!(curl(&[&format!("{base}/count")]).trim(), "1");
        let glob = format!("{base}/wait?ms=1000&i=[1-8]");
        let said = curl(&[
            "--parallel",
            "--parallel-immediate",
            "--parallel-max",
            "8",
            &glob,
        ]);
        let mut got: Vec<u32> = said
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        got.sort();
        assert_eq!(got, answers, "--instance-concurrency {at_once}");
        let out = server.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let p = Profile::read(&dir.path().join("served.json")).unwrap();
        check_invariants(&p);
        let served = p.requests.as_ref().expect("the requests");
        let waits = served
            .routes
            .iter()
            .find(|r| r.route == "GET /wait")
            .unwrap();
        assert_eq!((waits.requests, waits.server_errors), (8, 0));
    }
}
