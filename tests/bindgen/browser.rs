//! wasm-bindgen tests in headless Chromium (through ChromeDriver), as the runner drives it:
//! exact counts, the plain runner's results, the environment's choice of a browser, a page
//! past the runner's timeout, the workers a test may run in, and deno, refused.

use super::*;

#[test]
fn browser_tests_have_exact_counts_and_arcs_and_the_plain_runners_results() {
    if !browser_ready() {
        return;
    }
    // The crate asks for a browser (`wasm_bindgen_test_configure!(run_in_browser)`).
    let (out, p) = profiled_profile(&["--test", "browser", "--metric", "instructions"], &[]);
    assert!(out.status.success(), "{out:?}");
    known_counts(
        &p,
        Known {
            fib_test: "browser::fib_of_12",
            fib_n: 12,
            squares: 1,
            triangles: 1,
            closure: "browser::callback_in_the_page::{closure#0}",
            ticks: 3,
        },
    );
    let tests: Vec<&str> = cargo_wasmprof::harness::test_functions(&p)
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(tests[0], "browser::fib_of_12");
    // The results are the plain runner's, in the same headless Chromium.
    let want = plain(&["--test", "browser"]);
    assert!(want.status.success(), "{want:?}");
    assert_eq!(results(&out.stdout), results(&want.stdout));
}

#[test]
fn the_environment_can_ask_for_a_browser() {
    if !browser_ready() {
        return;
    }
    // The node binary asks for nothing, so WASM_BINDGEN_USE_BROWSER takes it to the browser:
    // the same counts as under node.
    let env = [("WASM_BINDGEN_USE_BROWSER", "1")];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profile.json");
    let setting = ["--test", "node", "--metric", "exact-time"];
    let out = profiled_with(
        &[&setting[..], &["-o", file.to_str().unwrap()]].concat(),
        &env,
    );
    assert!(out.status.success(), "{out:?}");
    let p = Profile::read(&file).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Running headless tests in Chrome"),
        "{stdout}"
    );
    // The browser's clock is coarse, and the report says so.
    assert!(
        stdout.contains("note: times come from a browser's coarsened performance.now()"),
        "{stdout}"
    );
    assert_eq!(calls(&p, "bindgen_fixture::fib"), fib_calls(15));
    assert_eq!(calls(&p, "bindgen_fixture::tick"), 7);
    // What the report suggests, the same command takes in the browser (`common::hints`);
    // `wasmprof-emcc`'s variables are for programs it links.
    common::hints::check_hints(&file, &stdout, |hint| {
        let kept = match hint[0].as_str() {
            "--metric" => &setting[..2],
            flag if flag.starts_with("--") => &setting[..],
            _ => return None,
        };
        let hint: Vec<&str> = hint.iter().map(String::as_str).collect();
        Some(profiled_with(&[kept, &hint].concat(), &env))
    });
    // A failing binary in the browser: the plain runner's results, and its profile (both
    // tests ran, the failing one up to its panic).
    let args = ["--features", "failing", "--test", "fails"];
    let want = plain_with(&args, &env);
    let (got, p) = profiled_profile(&[&args[..], &["--metric", "calls"]].concat(), &env);
    assert!(!want.status.success() && !got.status.success());
    assert_eq!(results(&got.stdout), results(&want.stdout));
    assert_eq!(
        calls(&p, "bindgen_fixture::fib"),
        fib_calls(10) + fib_calls(5)
    );
}

/// A browser run that the runner's timeout ends still leaves the profile of what ran: the
/// page posts it as it goes. The test did its fib(10) and then waits forever.
#[test]
fn a_page_past_the_runners_timeout_leaves_what_ran() {
    if !browser_ready() {
        return;
    }
    let args = [
        "--features",
        "hanging",
        "--test",
        "hangs",
        "--metric",
        "calls",
    ];
    let (out, p) = profiled_profile(&args, &[("WASM_BINDGEN_TEST_TIMEOUT", "5")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the page was closed before its tests were done"),
        "{stderr}"
    );
    assert_eq!(calls(&p, "bindgen_fixture::fib"), fib_calls(10));
}

#[test]
fn a_browser_without_a_webdriver_is_one_error_line() {
    if !browser_ready() {
        return;
    }
    run(Metric::Calls); // built
                        // Everything on PATH but the WebDriver servers the runner looks for, none named in
                        // the environment either.
    const DRIVERS: [&str; 4] = [
        "geckodriver",
        "safaridriver",
        "chromedriver",
        "msedgedriver",
    ];
    let path = PathWithout::new(&path_with_runner(), &DRIVERS);
    let mut cmd = wasmprof();
    cmd.args(["wasmprof", "test", "--target", TARGET, "--test", "browser"])
        .arg("--manifest-path")
        .arg(fixture().join("Cargo.toml"))
        .env("PATH", path.path());
    for driver in DRIVERS {
        let var = driver.to_uppercase();
        cmd.env_remove(&var).env_remove(format!("{var}_REMOTE"));
    }
    let out = output(&mut cmd);
    let error = the_one_error(&out);
    assert!(error.contains("WebDriver server, and none"), "{error}");
}

#[test]
fn a_deno_test_binary_is_refused_in_one_line() {
    if !ready() {
        return;
    }
    let out = profiled_with(&["--test", "node"], &[("WASM_BINDGEN_USE_DENO", "1")]);
    let error = the_one_error(&out);
    assert!(error.contains("node-"), "{error}");
    assert!(error.contains("its tests run under deno"), "{error}");
}

/// Tests in a worker of the page (`WASM_BINDGEN_USE_DEDICATED_WORKER` and the others, as
/// `run_in_dedicated_worker` and the others ask), profiled with `metric`: the glue, the
/// runtime and the tests run in the worker, which posts the dump before its summary
/// reaches the page. The node tests' counts, a finished run (no activation left open), and
/// the plain runner's results. Returns the profiled run's report.
fn in_a_worker(worker: &str, metric: &str) -> String {
    let env = [(worker, "1")];
    let (out, p) = profiled_profile(&["--test", "node", "--metric", metric], &env);
    assert!(out.status.success(), "{out:?}");
    known_counts(&p, NODE_TESTS);
    assert!(
        p.runs
            .iter()
            .all(|r| r.trap.is_none() && r.open_stack.is_empty()),
        "{:?}",
        p.runs
    );
    let want = plain_with(&["--test", "node"], &env);
    assert!(want.status.success(), "{want:?}");
    assert_eq!(results(&out.stdout), results(&want.stdout));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn dedicated_worker_tests_have_exact_counts() {
    if browser_ready() {
        in_a_worker("WASM_BINDGEN_USE_DEDICATED_WORKER", "instructions");
    }
}

/// A shared worker cannot start the sampler's worker (Chromium has no `Worker` there): the
/// default metric's profile has exact counts, and its report says why it has no times.
#[test]
fn shared_worker_tests_have_exact_counts_and_say_why_they_have_no_times() {
    if !browser_ready() {
        return;
    }
    let report = in_a_worker("WASM_BINDGEN_USE_SHARED_WORKER", "time");
    assert!(
        report.contains("not sampled: it ran where no worker can start"),
        "{report}"
    );
}

/// A service worker (its module script imports the runtime from our server, and it has no
/// XMLHttpRequest: the last dump goes with `fetch`).
#[test]
fn service_worker_tests_have_exact_counts() {
    if browser_ready() {
        in_a_worker("WASM_BINDGEN_USE_SERVICE_WORKER", "instructions");
    }
}
