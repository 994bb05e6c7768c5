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
            .args(["bench", "--bench", "fib", "--bench", "groups"])
            .args(["--metric", "instructions", "--"])
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
    // The benchmarks as criterion named them, the routine beside each; `inlined`'s routine
    // was inlined into the loop, which is said, not costed.
    let [benchmark, inlined] = p.benchmarks.as_slice() else {
        panic!("two named benchmarks, found {:?}", p.benchmarks);
    };
    assert_eq!((inlined.id.as_str(), inlined.iterations), ("inlined", 0));
    assert_eq!(inlined.routine, "");
    assert_eq!(inlined_loops(&p).len(), 1);
    assert!(
        text.contains("(its routine, inlined into the loop, is not counted"),
        "{text}"
    );
    assert_eq!(benchmark.id, "fib 15");
    assert_eq!(benchmark.routine, routine.arc.callee);
    // The iterations criterion measured, its warm-up's left out.
    assert!(benchmark.iterations < iterations, "{benchmark:?}");
    measured_as_criterion_said(benchmark, &stderr(&out));
    assert_eq!(benchmark.per_iteration(p.metric), Some(per_iteration));
    let row = text
        .lines()
        .skip_while(|l| !l.contains("Benchmarks per iteration"))
        .find(|l| l.contains("fib 15  (criterion_fixture::fib)"))
        .expect("the per-iteration section names the benchmark and its routine");
    // (Exact counts are written whole, their digits grouped by commas.)
    assert!(
        row.replace(',', "")
            .contains(&benchmark.iterations.to_string()),
        "{row}"
    );
    assert!(text.contains("the iterations criterion measured"), "{text}");
    inputs_of_one_routine_are_benchmarks_of_their_own(
        &dir.path().join("target/wasmprof"),
        &stderr(&out),
    );
}

/// Under sampled time (the default metric, the word sampler) each benchmark carries the
/// samples its time per iteration comes from, and how many samples in its stretch found
/// the probes running: a part of all the run's, which the report shows as a share.
#[test]
fn criterion_benches_under_sampled_time_say_what_the_probes_took() {
    let dir = copy_fixture("criterion");
    let out = output(
        wasmprof()
            .args(["bench", "--bench", "fib", "--"])
            .args(["--warm-up-time", "0.05", "--measurement-time", "0.2"])
            .args(["--sample-size", "10", "--nresamples", "100", "--noplot"])
            .current_dir(dir.path()),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let p = Profile::read(
        &dir.path()
            .join("target/wasmprof/criterion-fixture-fib-bench.json"),
    )
    .unwrap();
    let [benchmark, _inlined] = p.benchmarks.as_slice() else {
        panic!("two named benchmarks, found {:?}", p.benchmarks);
    };
    let (Some(total), Some(probes)) = (benchmark.total_samples, benchmark.probe_samples) else {
        panic!("{benchmark:?}");
    };
    assert!(
        total >= benchmark.cost.self_samples.unwrap(),
        "{benchmark:?}"
    );
    assert!(probes <= p.sampling.as_ref().unwrap().in_probes);
    let text = stdout(&out);
    assert!(
        text.contains("per iteration   probes    iterations"),
        "{text}"
    );
    assert!(text.contains("(probes: the share of the samples"), "{text}");
}

/// Checks that `b`'s iterations are those criterion measured, as its `stderr` announced
/// them (`Benchmarking ID: Collecting 10 samples in estimated ... (N iterations)`, N
/// rounded from 10,000 on, as criterion's `format::iter_count` rounds it), and as its
/// linear sampling makes them with 10 samples: d + 2d + ... + 10d = 55d.
fn measured_as_criterion_said(b: &Benchmark, stderr: &str) {
    assert!(b.measured, "{b:?}");
    assert_eq!(b.iterations % 55, 0, "{b:?}");
    let n = b.iterations as f64;
    let count = match b.iterations {
        0..10_000 => format!("{} iterations", b.iterations),
        10_000..1_000_000 => format!("{:.0}k iterations", n / 1e3),
        1_000_000..10_000_000 => format!("{:.1}M iterations", n / 1e6),
        _ => format!("{:.0}M iterations", n / 1e6),
    };
    let said = format!("Benchmarking {}: Collecting 10 samples in estimated ", b.id);
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&said))
        .unwrap_or_else(|| panic!("criterion announced {}: {stderr}", b.id));
    assert!(line.ends_with(&format!("({count})")), "{line}, {b:?}");
}

/// `fixtures/criterion`'s `groups`: one routine, `fib(n)`, measured with n = 5, 10 and 15
/// (criterion's `bench_with_input`), so the routine's arc sums the three; each input's
/// iterations and instructions come from the profiler's state as criterion named each
/// benchmark. Every iteration of one input executes the same instructions, and naive fib's
/// instructions are affine in its calls (a constant per call, the leaves' and the inner
/// calls' costs differing by a constant too): in F(n + 1), whose values are 8, 89 and 987.
fn inputs_of_one_routine_are_benchmarks_of_their_own(profiles: &Path, stderr: &str) {
    let p = Profile::read(&profiles.join("criterion-fixture-groups-bench.json")).unwrap();
    check_invariants(&p);
    let ids: Vec<&str> = p.benchmarks.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["fib/5", "fib/10", "fib/15"]);
    let routines = measured_routines(&p);
    let [routine] = routines.as_slice() else {
        panic!("one measured routine, found {routines:?}");
    };
    // The measured iterations are part of the routine's, which its warm-ups make up.
    let sum = |f: fn(&Benchmark) -> u64| p.benchmarks.iter().map(f).sum::<u64>();
    assert!(sum(|b| b.iterations) < routine.iterations());
    assert!(
        sum(|b| b.cost.total_instructions.unwrap()) < routine.arc.cost.total_instructions.unwrap()
    );
    let per_iteration: Vec<u64> = p
        .benchmarks
        .iter()
        .zip([5, 10, 15])
        .map(|(b, n)| {
            assert_eq!(b.routine, "criterion_fixture::fib");
            measured_as_criterion_said(b, stderr);
            // Each iteration is one fib(n): its calls, and the same instructions.
            let fib = b.functions.iter().find(|f| f.name == b.routine).unwrap();
            assert_eq!(fib.calls, b.iterations * fib_calls(n), "{b:?}");
            let total = b.cost.total_instructions.unwrap();
            assert_eq!(total % b.iterations, 0, "{b:?}");
            total / b.iterations
        })
        .collect();
    let [i5, i10, i15] = per_iteration[..] else {
        unreachable!()
    };
    let (g5, g10, g15) = (8, 89, 987);
    assert_eq!(
        (i15 - i10) * (g10 - g5),
        (i10 - i5) * (g15 - g10),
        "{per_iteration:?}"
    );
}
