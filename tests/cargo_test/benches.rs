//! `bench`: the benchmarks profiled, criterion's and libtest's measuring loops costed per
//! iteration.

use super::*;

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
