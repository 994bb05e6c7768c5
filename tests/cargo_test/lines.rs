//! Per-line instruction counts (`--metric instructions`), exact from the code: loops,
//! inlined helpers, and `annotate`, callgrind and pprof's views of them.

use super::*;

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
    // Exact counts are written whole, their digits grouped by commas.
    let recursive = cargo_wasmprof::format::units::count(recursive);
    assert!(row.contains(&format!(" {recursive} ")), "{row}");
    // A profile without per-line costs (one whose samples found no line) says what makes
    // them.
    let mut unlined = Profile::read(&calls_run().dir.path().join("merged.json")).unwrap();
    unlined.lines.clear();
    let file = run.dir.path().join("unlined.json");
    unlined.write(&file).unwrap();
    let timed = output(wasmprof().args(["wasmprof", "annotate"]).arg(&file));
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
    // Exact counts are written whole, their digits grouped by commas.
    assert_eq!(
        row("lines::helper [inlined]")[2].replace(',', ""),
        helper_cost.to_string()
    );
    let sum_self = lib
        .function_named("lines::sum")
        .unwrap()
        .cost
        .self_instructions
        .unwrap();
    assert_eq!(
        row("lines::sum  (")[2].replace(',', ""),
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

/// With the stack sampler, a time profile has per-line costs too: `parts`' loop, run alone,
/// spends its time on the loop's lines (its header, with the range's inlined `next`, and
/// its body), which `annotate`, callgrind_annotate and `go tool pprof -list` show.
#[test]
fn sampled_time_lands_on_the_lines_of_the_loop_that_runs() {
    let dir = copy_fixture("parts");
    let out = output(
        wasmprof()
            .args(["wasmprof", "bench", "--sampler", "stacks"])
            .args(["--sample-interval", "200", "--format", "callgrind,pprof"])
            .args(["--", "loop"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let profiles = dir.path().join("target/wasmprof");
    let p = Profile::read(&profiles.join("parts-parts-bench.json")).unwrap();
    let source = dir.path().join("src/lib.rs");
    let (header, body) = (
        line_of(&source, "for i in 0..n {"),
        line_of(&source, "x = (x ^ i).wrapping_mul"),
    );
    let lines: Vec<_> = p
        .lines
        .iter()
        .filter(|l| l.function == "parts::part_loop")
        .collect();
    let ns = |keep: &dyn Fn(&&&cargo_wasmprof::profile::LineCost) -> bool| -> u64 {
        lines.iter().filter(keep).filter_map(|l| l.self_ns).sum()
    };
    let all = ns(&|_| true);
    let own_file = |l: &&&cargo_wasmprof::profile::LineCost| {
        l.file.as_deref().map(Path::new) == Some(source.as_path())
    };
    let on_body = ns(&|l| own_file(l) && l.line == body);
    let on_loop = ns(&|l| !own_file(l) || l.line == header || l.line == body);
    let part_loop = p.function_named("parts::part_loop").unwrap();
    assert_eq!(
        all, part_loop.cost.self_ns,
        "the lines sum to the self time"
    );
    assert!(
        part_loop.cost.self_samples.unwrap() > 500,
        "{:?}",
        p.sampling
    );
    assert!(
        on_body > all / 4,
        "{on_body} of {all} ns on the body: {lines:?}"
    );
    assert!(
        on_loop as f64 >= 0.98 * all as f64,
        "{on_loop} of {all} ns: {lines:?}"
    );

    let annotate = stdout(&output(
        wasmprof()
            .args(["wasmprof", "annotate"])
            .arg(profiles.join("parts-parts-bench.json"))
            .arg("part_loop"),
    ));
    let row = annotate
        .lines()
        .find(|l| l.contains("x = (x ^ i).wrapping_mul"))
        .unwrap_or_else(|| panic!("{annotate}"));
    assert!(row.contains(" ms ") && row.contains('%'), "{row}");
    if have(&["callgrind_annotate"]) {
        let out = stdout(&output(
            Command::new("callgrind_annotate")
                .arg("--auto=yes")
                .arg(profiles.join("callgrind.out.report")),
        ));
        assert!(
            out.lines()
                .any(|l| l.starts_with("Events shown:") && l.ends_with(" ns")),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.contains("x = (x ^ i).wrapping_mul") && !l.trim_start().starts_with('.')),
            "{out}"
        );
    }
    if have(&["go"]) {
        let out = stdout(&output(
            Command::new("go")
                .args([
                    "tool",
                    "pprof",
                    "-sample_index=line_wall",
                    "-list",
                    "part_loop",
                ])
                .arg(profiles.join("report.pb.gz")),
        ));
        let row = out
            .lines()
            .find(|l| l.contains(&format!("{body}:")) && l.contains("x = (x ^ i)"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            row.trim_start().starts_with(|c: char| c.is_ascii_digit()),
            "{row}"
        );
    }
}
