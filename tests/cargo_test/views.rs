//! The report's views: the program's own code first, `--focus`, `--ignore` and `--by`
//! with exact counts.

use super::*;

/// The default report leads with the program: a summary, the tests by cost, the flat
/// profile of the crate's own calls with the runtime's scaffolding folded into one line,
/// and a short call graph, on one screen.
#[test]
fn the_default_report_leads_with_the_programs_own_code() {
    let out = stdout(&calls_run().out);
    let report = &out[out.find("cargo-wasmprof profile:").expect("a report")..];
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines.len() <= 60, "{} lines:\n{report}", lines.len());
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{report}"))
    };
    // (A run whose samples found none of the program has no costs to rank tests by.)
    if report.contains("Tests by cost") {
        assert!(at("Tests by cost") < at("Flat profile"));
    }
    assert!(at("Flat profile") < at("Call graph"));
    // The scaffolding is one line after the rows, and libtest's console is in none of
    // them.
    let flat = &lines[at("Flat profile")..at("Call graph")];
    assert!(flat
        .iter()
        .any(|l| l.contains("[the runtime's scaffolding:")));
    assert!(
        !report.contains("test::console::run_tests_console"),
        "{report}"
    );
    assert!(!report.contains("wasi_snapshot_preview1.path_filestat_get"));
    // A suite of a few milliseconds may get few samples of the program (how many depends
    // on how long the machine let it run): with fewer than 11, too few for any figure, the
    // first lines say so and name the exact alternative; with more, each figure from fewer
    // than 11 carries its own `~`.
    let sampled = lines[..4]
        .iter()
        .find(|l| l.starts_with("time: ") && l.contains("by the stack sampler"))
        .unwrap_or_else(|| panic!("{report}"));
    let program: u64 = match sampled.contains("none in the program") {
        true => 0,
        false => regex::Regex::new(r"([\d,]+) in the program")
            .unwrap()
            .captures(sampled)
            .and_then(|c| c[1].replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("the program's samples in {sampled}")),
    };
    let warned = (sampled.contains("none in the program")
        || sampled.contains("the times say nothing"))
        && sampled.contains("--metric instructions");
    assert_eq!(warned, program < 11, "{sampled}");
    // Ranked by exact instructions, the crate's hottest function leads the flat profile.
    let exact = stdout(&output(
        wasmprof()
            .args(["wasmprof", "report"])
            .arg(instructions_run().dir.path().join("merged.json")),
    ));
    let first_row = exact
        .lines()
        .skip_while(|l| !l.contains("Flat profile"))
        .find(|l| l.contains("  calls::"))
        .unwrap_or_else(|| panic!("{exact}"));
    assert!(
        first_row.contains("calls::fib  (") && first_row.contains("src/lib.rs:"),
        "{first_row}"
    );

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

/// In an unoptimized build (`cargo test`'s), the standard library's small helpers fold into
/// their callers: `total_area2`'s closure, which the helpers of `map(..).sum()` call, is
/// called by `total_area2` itself, once per shape of the `shapes` test (3), and no
/// `core::iter` function has a row of its own; `--show-helpers` lists them.
#[test]
fn an_unoptimized_builds_standard_library_helpers_fold_into_their_callers() {
    let merged = calls_run().dir.path().join("merged.json");
    let report = |args: &[&str]| {
        stdout(&output(
            wasmprof()
                .args(["wasmprof", "report"])
                .arg(&merged)
                .args(["--top", "all", "--call-graph", "full"])
                .args(args),
        ))
    };
    // A flat profile's row starts with its share.
    let is_row = |l: &&str| {
        l.get(..6)
            .is_some_and(|share| share.trim().parse::<f64>().is_ok())
    };
    let helper_rows = |report: &str| {
        report
            .lines()
            .skip_while(|l| !l.starts_with("Flat profile"))
            .take_while(|l| !l.starts_with("Call graph"))
            .filter(is_row)
            .filter(|l| l.contains("  core::iter::") || l.contains("  <core::iter::"))
            .count()
    };
    let folded = report(&[]);
    let header: Vec<&str> = folded.lines().take(5).collect();
    assert!(
        header
            .iter()
            .any(|l| l.starts_with("folded into their callers: ")),
        "{folded}"
    );
    assert_eq!(helper_rows(&folded), 0, "{folded}");
    let lines: Vec<&str> = folded.lines().collect();
    let entry = lines
        .iter()
        .position(|l| l.starts_with('[') && l.contains("  calls::total_area2::{closure#0}"))
        .unwrap_or_else(|| panic!("no entry of the closure in\n{folded}"));
    let caller = lines[entry - 1];
    assert!(
        caller.contains(" 3/3 ") && caller.contains("calls::total_area2"),
        "{caller}"
    );
    let listed = report(&["--show-helpers"]);
    assert!(helper_rows(&listed) > 0, "{listed}");
    assert!(!listed.contains("folded into their callers: "));
}

/// `--focus`, `--ignore` and `--by` of a profile that counted its calls per calling
/// context (`--contexts`), with counts that follow from the fixture's code.
#[test]
fn focus_ignore_and_grouping_views_keep_exact_counts() {
    static RUN: OnceLock<CallsRun> = OnceLock::new();
    let run = RUN.get_or_init(|| {
        let run = test_run("calls", &["--contexts", "-o", "merged.json", "--no-report"]);
        assert!(run.out.status.success(), "{}", stderr(&run.out));
        run
    });
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

/// `report` of several profiles merges them as `test` merged its binaries': the `calls`
/// run's profiles, one per binary and doc test, give the merged profile's functions and
/// counts. A profile of another metric is refused in one line that names its file, and
/// nothing is written.
#[test]
fn report_merges_the_profiles_it_is_given() {
    let run = calls_run();
    let mut parts: Vec<PathBuf> = std::fs::read_dir(run.dir.path().join("target/wasmprof"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    parts.sort();
    let merged = Profile::read(&run.dir.path().join("merged.json")).unwrap();
    assert_eq!(parts.len(), merged.modules.len());
    let report = |profiles: &[&Path], file: &Path| {
        output(
            wasmprof()
                .args(["wasmprof", "report"])
                .args(profiles)
                .args(["--format", "json", "-o"])
                .arg(file),
        )
    };
    let again = run.dir.path().join("again.json");
    let parts: Vec<&Path> = parts.iter().map(PathBuf::as_path).collect();
    let out = report(&parts, &again);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = Profile::read(&again).unwrap();
    each_function_once(&again);
    assert_eq!(again.functions.len(), merged.functions.len());
    for f in &merged.functions {
        assert_eq!(calls(&again, &f.name), f.calls, "{}", f.name);
    }
    assert_eq!(calls(&again, "calls::fib"), fib_calls(20) + fib_calls(10));

    let counted = instructions_run().dir.path().join("merged.json");
    let refused = run.dir.path().join("refused.json");
    let out = report(&[parts[0], &counted], &refused);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(counted.to_str().unwrap()) && err.contains("an instructions profile"),
        "{err}"
    );
    assert!(!refused.exists());
}
