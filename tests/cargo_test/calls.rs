//! What the `calls` fixture's test run records: exact counts, arcs through every kind of
//! call, names and lines from DWARF, the report read back from the profile alone.

use super::*;

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
    for section in ["Flat profile", "Call graph"] {
        assert!(out.contains(section), "report has {section}");
    }
    // Tests are ranked by their cost: a run whose samples found none of the program has
    // calls alone (how many samples a run of a few milliseconds gets is the machine's).
    let merged = Profile::read(&run.dir.path().join("merged.json")).unwrap();
    let sampled = merged.sampling.is_some_and(|s| s.samples > 0);
    assert_eq!(out.contains("Tests by cost"), sampled, "{out}");
    if sampled {
        assert!(
            out.contains("calls::tests::fib_of_20  (src/lib.rs:"),
            "{out}"
        );
    }
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
    let out = output(wasmprof().arg("report").arg(&file).args(["--top", "all"]));
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("calls::fib  ("), "{text}");
    // (Exact counts are written whole, their digits grouped by commas.)
    assert!(text.replace(',', "").contains(&fib_calls(20).to_string()));
}
