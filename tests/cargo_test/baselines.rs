//! Baselines: `bench --save-baseline`, then `--baseline` with `--fail-above`, on a fixture
//! crate whose change adds work, with exact instructions; and the bad input around them.

use super::*;

/// `cargo wasmprof bench --metric instructions --no-report ARGS` in `dir`.
fn bench(dir: &Path, args: &[&str]) -> Output {
    output(
        wasmprof()
            .args([
                "wasmprof",
                "bench",
                "--metric",
                "instructions",
                "--allocations",
                "--no-report",
            ])
            .args(args)
            .current_dir(dir),
    )
}

/// `cargo wasmprof test --lib --metric instructions --no-report ARGS` in `dir`.
fn test_lib(dir: &Path, args: &[&str]) -> Output {
    output(
        wasmprof()
            .args(["wasmprof", "test", "--lib", "--metric", "instructions"])
            .arg("--allocations")
            .args(["--no-report"])
            .args(args)
            .current_dir(dir),
    )
}

/// The comparison's row of the squares benchmark's whole run in `text`.
fn squares_row(text: &str) -> &str {
    text.lines()
        .find(|l| l.contains("the whole run") && l.contains("benches-squares-bench"))
        .unwrap_or_else(|| panic!("the squares row in {text}"))
}

/// The steps of the README's CI job: the main branch's baseline saved, then the change
/// compared with it. Unchanged code compares exactly equal (instructions are the same on
/// every run); a change that makes each `square` call do more work fails the gate with
/// exit code 3, names the benchmark, and lists `square` (its 50,000 calls unchanged) as
/// the function that changed most; the Markdown for the pull request is written.
#[test]
fn a_saved_baseline_gates_a_change_that_adds_work() {
    let dir = copy_fixture("benches");
    let root = dir.path();
    let saved = bench(root, &["--save-baseline", "main"]);
    assert!(saved.status.success(), "{}", stderr(&saved));
    assert!(stderr(&saved).contains("Saved baseline `main` (2 profiles)"));
    let baseline = root.join("target/wasmprof/baselines/main");
    assert!(baseline.join("baseline.json").exists());
    assert!(baseline.join("benches-squares-bench.json").exists());

    let same = bench(root, &["--baseline", "main", "--fail-above", "0"]);
    assert!(same.status.success(), "{}", stderr(&same));
    let text = stdout(&same);
    assert!(text.contains("Compared with baseline `main`"), "{text}");
    assert!(squares_row(&text).contains("unchanged"), "{text}");
    // Each profile's allocated bytes, exact, beside the metric's rows.
    assert!(
        text.lines()
            .any(|l| l.contains("bytes allocated in the whole run") && l.contains("unchanged")),
        "{text}"
    );

    // The change: every call of `square` does more.
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let changed = source.replace(
        "std::hint::black_box(n) * n",
        "std::hint::black_box(n) * std::hint::black_box(n) + std::hint::black_box(1) - 1",
    );
    assert_ne!(source, changed);
    std::fs::write(&lib, changed).unwrap();
    let gated = bench(root, &["--baseline", "main", "--fail-above", "1"]);
    assert_eq!(gated.status.code(), Some(3), "{}", stderr(&gated));
    assert!(
        stderr(&gated).contains("benches-squares-bench.json: the whole run grew by"),
        "{}",
        stderr(&gated)
    );
    let text = stdout(&gated);
    let row = squares_row(&text);
    assert!(row.contains('+') && !row.contains("unchanged"), "{row}");
    let changed_most = text
        .lines()
        .skip_while(|l| !l.contains("changed most under the whole run (benches-squares-bench)"))
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(changed_most.ends_with("benches::square"), "{text}");
    let new = Profile::read(&root.join("target/wasmprof/benches-squares-bench.json")).unwrap();
    assert_eq!(calls(&new, "benches::square"), 50 * 1000);
    let md = std::fs::read_to_string(root.join("target/wasmprof/baselines/main.compared.md"))
        .expect("the Markdown comparison");
    let first_row = md.lines().find(|l| l.starts_with("| benches-")).unwrap();
    assert!(
        first_row.starts_with("| benches-squares-bench | the whole run |"),
        "the regression first: {md}"
    );
    assert!(
        md.contains("- `benches::square`: "),
        "what changed under it: {md}"
    );
}

/// What cannot make or be a baseline: one line each, naming the problem, before anything
/// runs.
#[test]
fn baselines_bad_input_is_one_line_each() {
    let dir = copy_fixture("benches");
    let root = dir.path();
    let one_line = |out: &Output, code: i32, needle: &str| {
        assert_eq!(out.status.code(), Some(code), "{}", stderr(out));
        let err = stderr(out);
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(errors[0].contains(needle), "{err}");
    };
    one_line(
        &bench(root, &["--save-baseline", "a/b"]),
        2,
        "not a baseline name",
    );
    one_line(
        &bench(root, &["--baseline", ".."]),
        2,
        "not a baseline name",
    );
    let missing = bench(root, &["--baseline", "nope"]);
    one_line(&missing, 1, "no baseline `nope`");
    assert!(
        !stderr(&missing).contains("Running"),
        "refused before anything runs"
    );
    assert!(bench(root, &["--save-baseline", "main"]).status.success());
    // Another metric.
    let calls_run = output(
        wasmprof()
            .args(["wasmprof", "bench", "--metric", "calls", "--no-report"])
            .args(["--baseline", "main"])
            .current_dir(root),
    );
    one_line(
        &calls_run,
        1,
        "was profiled with --metric instructions, this run with calls",
    );
    assert!(!stderr(&calls_run).contains("Running"));
    // A corrupt manifest.
    let manifest = root.join("target/wasmprof/baselines/main/baseline.json");
    std::fs::write(&manifest, "{ not json").unwrap();
    one_line(
        &bench(root, &["--baseline", "main"]),
        1,
        "baseline.json: not a cargo-wasmprof baseline",
    );
}

/// `test` keeps baselines too, and names what changed under each test: a change inside
/// `fib`'s leaves changes the test that calls it (`fib_of_20`) and lists what changed
/// under it, while the tests that do not call it compare unchanged, to the instruction.
#[test]
fn a_test_baseline_names_what_changed_under_each_test() {
    let dir = copy_fixture("calls");
    let root = dir.path();
    let test = |args: &[&str]| test_lib(root, args);
    assert!(test(&["--save-baseline", "before"]).status.success());
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let changed = source.replacen(
        "        n as u64\n",
        "        std::hint::black_box(n) as u64\n",
        1,
    );
    assert_ne!(source, changed);
    std::fs::write(&lib, changed).unwrap();
    let out = test(&["--baseline", "before"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = |test: &str| {
        text.lines()
            .find(|l| l.contains(&format!("test {test}  (")))
            .unwrap_or_else(|| panic!("{test} in {text}"))
    };
    assert!(
        row("calls::tests::even_and_odd").contains("unchanged"),
        "{text}"
    );
    assert!(
        !row("calls::tests::fib_of_20").contains("unchanged"),
        "{text}"
    );
    // Under fib_of_20: the new `black_box` (a function of its own in a debug build, called
    // at each of fib(20)'s F(21) = 10,946 leaves), then `fib`, whose leaves grew.
    let under: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("changed most under test calls::tests::fib_of_20 "))
        .skip(1)
        .take(2)
        .collect();
    assert!(under[0].ends_with("core::hint::black_box<u32>"), "{text}");
    assert!(under[1].ends_with("calls::fib"), "{text}");
    let p = Profile::read(&root.join("target/wasmprof/calls-calls-lib.json")).unwrap();
    assert_eq!(calls(&p, "core::hint::black_box<u32>"), 10_946);
    assert_eq!(calls(&p, "calls::fib"), fib_calls(20));
}

/// With allocations recorded, a baseline compares each test's allocated bytes too, exactly
/// (beside its instructions): five boxes of 32 u64s instead of 16 add 5 * 128 bytes to the
/// one test of fixtures/allocs, which allocated 10 * 1000 + 5 * 128 + 4096 + 1 MiB before.
#[test]
fn a_baseline_compares_each_tests_allocated_bytes() {
    let dir = copy_fixture("allocs");
    let root = dir.path();
    let test = |args: &[&str]| test_lib(root, args);
    assert!(test(&["--save-baseline", "before"]).status.success());
    let same = stdout(&test(&["--baseline", "before"]));
    let row = |text: &str| {
        text.lines()
            .find(|l| l.contains("bytes, test allocs::tests::allocations_of_known_sizes"))
            .unwrap_or_else(|| panic!("the test's bytes in {text}"))
            .to_string()
    };
    assert!(row(&same).contains("unchanged"), "{same}");
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let changed = source.replace("[i as u64; 16]", "[i as u64; 32]");
    assert_ne!(source, changed);
    std::fs::write(&lib, changed).unwrap();
    let out = test(&["--baseline", "before", "--fail-above", "50"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let before = 10 * 1000 + 5 * 128 + 4096 + (1 << 20);
    let change = 100.0 * (5 * 128) as f64 / before as f64;
    assert!(
        row(&text).contains(&format!("{change:+.2}%")),
        "{change:+.2}% in {text}"
    );
}

/// A benchmark's bytes per iteration, compared exactly: criterion's routine `fib(15)` makes
/// 2 * F(16) - 1 = 1973 calls, each allocating a vector of 8 bytes in the baseline and of
/// 16 after the change: 15,784 bytes per iteration, then twice as many. The same for each
/// input of the `groups` bench, named as criterion names them: fib(5) makes 15 calls,
/// fib(10) 177. Their whole run follows the iteration counts criterion chose from timings,
/// so it is shown, not gated on.
#[test]
fn a_baseline_compares_each_benchmarks_bytes_per_iteration() {
    let dir = copy_fixture("criterion");
    let root = dir.path();
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let allocating = |bytes: u32| {
        source.replace(
            "pub fn fib(n: u32) -> u64 {\n",
            &format!(
                "pub fn fib(n: u32) -> u64 {{\n    black_box(Vec::<u8>::with_capacity({bytes}));\n"
            ),
        )
    };
    // Both criterion benches, briefly: criterion's statistics would dominate otherwise.
    let criterion = |baseline: &[&str]| {
        let mut args = vec!["--bench", "fib", "--bench", "groups"];
        args.extend(baseline);
        args.extend(["--", "--warm-up-time", "0.05", "--measurement-time", "0.1"]);
        args.extend(["--sample-size", "10", "--nresamples", "100", "--noplot"]);
        bench(root, &args)
    };
    std::fs::write(&lib, allocating(8)).unwrap();
    let saved = criterion(&["--save-baseline", "before"]);
    assert!(saved.status.success(), "{}", stderr(&saved));
    std::fs::write(&lib, allocating(16)).unwrap();
    let out = criterion(&["--baseline", "before"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.contains("bytes per iteration, bench fib 15"))
        .unwrap_or_else(|| panic!("the benchmark's bytes in {text}"));
    // 1973 * 8 = 15,784 bytes (15.4 KiB), then 31,568 (30.8 KiB).
    assert!(row.contains("15.4 KiB"), "{row}");
    assert!(row.contains("30.8 KiB"), "{row}");
    assert!(row.contains("+100.00%"), "{row}");
    for (id, before, after) in [
        ("fib/5", "120 B", "240 B"),
        ("fib/10", "1416 B", "2832 B"),
        ("fib/15", "15.4 KiB", "30.8 KiB"),
    ] {
        let row = text
            .lines()
            .find(|l| l.contains(&format!("bytes per iteration, bench {id} ")))
            .unwrap_or_else(|| panic!("{id}'s bytes in {text}"));
        assert!(row.contains(before) && row.contains(after), "{row}");
        assert!(row.contains("+100.00%"), "{row}");
    }
    let whole_runs = text.lines().filter(|l| l.contains("  the whole run  "));
    for row in whole_runs.filter(|row| !row.contains("unchanged")) {
        assert!(row.contains("(not gated)"), "{row}");
        assert!(text.contains("the whole run is not gated on"), "{text}");
    }
}
