//! `#[wasm_bindgen_bench]` (wasm-bindgen-test's port of criterion, under node): the routine
//! its loop measured, costed per iteration, and a baseline of it compared as criterion's
//! are.

use super::*;
use cargo_wasmprof::harness::measured_routines;

/// `cargo wasmprof bench --target wasm32-unknown-unknown --metric instructions --bench fib`
/// on the fixture, with `args`.
fn bench(args: &[&str]) -> Output {
    output(
        wasmprof()
            .args([
                "wasmprof",
                "bench",
                "--target",
                TARGET,
                "--metric",
                "instructions",
            ])
            .args(["--bench", "fib", "--manifest-path"])
            .arg(fixture().join("Cargo.toml"))
            .args(args)
            .env("PATH", path_with_runner()),
    )
}

/// The fixture's bench measures `b.iter(|| fib(black_box(10)))`: every iteration is the
/// same fib(10), so its calls of `fib` and its instructions are the same in each (how many,
/// the optimizer decides: it turns one of the two recursive calls into a loop).
#[test]
fn wasm_bindgen_benches_cost_per_iteration_and_compare_with_a_baseline() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("profile.json");
    let baseline = "wasm-bindgen-bench-test";
    let saved = bench(&["--save-baseline", baseline, "-o", file.to_str().unwrap()]);
    assert!(saved.status.success(), "{saved:?}");
    let p = Profile::read(&file).unwrap();
    check_invariants(&p);
    let routines = measured_routines(&p);
    let [routine] = routines.as_slice() else {
        panic!("one measured routine, found {routines:?}");
    };
    assert_eq!(routine.arc.callee, "bindgen_fixture::fib");
    assert!(routine
        .harness
        .name
        .starts_with("wasm_bindgen_test::__rt::criterion::bencher::Bencher"));
    let iterations = routine.iterations();
    assert!(iterations > 0);
    assert_eq!(calls(&p, "bindgen_fixture::fib") % iterations, 0);
    let total = routine.arc.cost.total_instructions.unwrap();
    assert_eq!(total % iterations, 0, "{total} in {iterations} iterations");
    let text = String::from_utf8_lossy(&saved.stdout);
    let per_iteration = (total / iterations).to_string();
    assert!(
        text.lines()
            .skip_while(|l| !l.contains("Benchmarks per iteration"))
            .any(
                |l| l.trim_start().replace(',', "").starts_with(&per_iteration)
                    && l.contains("bindgen_fixture::fib")
            ),
        "{text}"
    );
    // The same code again: the benchmark unchanged, to the instruction.
    let compared = bench(&["--baseline", baseline, "--fail-above", "0", "--no-report"]);
    assert!(compared.status.success(), "{compared:?}");
    let text = String::from_utf8_lossy(&compared.stdout);
    let row = text
        .lines()
        .find(|l| l.contains("bench bindgen_fixture::fib"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("unchanged"), "{row}");
    assert!(
        row.trim_start()
            .replace(',', "")
            .starts_with(&format!("{per_iteration} ")),
        "{row}"
    );
}
