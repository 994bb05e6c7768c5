//! The sampled time metric with the word sampler: where samples land, with known answers.
//! The sampler's thread is off in most of these; the module takes each sample itself through the embedded
//! host's test hook (`wasmprof-test.sample`, one sample of `HOOK_SAMPLE_NS` each), so the
//! answers follow from the program's text, not from timing.

mod common;

use cargo_wasmprof::format::{EmitOptions, Format};
use cargo_wasmprof::host::{Embedded, Outcome, RunConfig, HOOK_SAMPLE_NS, SAMPLE_HOOK};
use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::{Metric, Sampler, StateLocation};
use cargo_wasmprof::profile::{Context, Profile};
use common::{calls, check_invariants, validate};

const NS: u64 = HOOK_SAMPLE_NS;

/// Instruments `wat` with the sampled metric and the word sampler (state where `state`
/// says, allocations recorded), runs it with samples taken at `interval` (zero: by the hook
/// alone), and decodes the profile.
fn sampled(wat: &str, state: StateLocation, interval: std::time::Duration) -> (Profile, Outcome) {
    let wasm = wat::parse_str(wat).unwrap();
    let options = Options {
        metric: Metric::Time,
        sampler: Sampler::Word,
        state,
        allocations: true,
        ..Options::default()
    };
    let done = instrument::instrument(&wasm, &options).unwrap();
    validate(&done.wasm);
    let config = RunConfig {
        sample_interval: Some(interval),
        ..RunConfig::new("test.wasm", Vec::new(), ".")
    };
    let outcome = Embedded.run_module(&done.wasm, &config).unwrap();
    let profile = outcome.profile(&done.meta, "test.wasm").unwrap();
    (profile, outcome)
}

/// The hook's import, as the program declares it.
fn hook() -> String {
    format!(
        r#"(import "{}" "{}" (func $sample))"#,
        SAMPLE_HOOK.0, SAMPLE_HOOK.1
    )
}

/// The hook's function name in a profile.
fn hook_name() -> String {
    format!("{}.{}", SAMPLE_HOOK.0, SAMPLE_HOOK.1)
}

/// The function names along context `c`'s path, outermost first.
fn path(p: &Profile, c: &Context) -> Vec<String> {
    let mut names = Vec::new();
    let mut at = Some(c);
    while let Some(c) = at {
        if let Some(f) = c.function {
            names.push(p.functions[f as usize].name.clone());
        }
        at = c.parent.map(|parent| &p.contexts[parent as usize]);
    }
    names.reverse();
    names
}

/// (path, self samples, self ns, total ns) of every context that has samples or time.
fn sampled_contexts(p: &Profile) -> Vec<(Vec<String>, u64, u64, u64)> {
    let mut v: Vec<_> = p
        .contexts
        .iter()
        .filter(|c| c.function.is_some() && c.cost.total_ns > 0)
        .map(|c| {
            (
                path(p, c),
                c.cost.self_samples.unwrap_or(0),
                c.cost.self_ns,
                c.cost.total_ns,
            )
        })
        .collect();
    v.sort();
    v
}

/// `f(n)` recurses to depth n and samples there; `g` samples twice.
fn recursion() -> String {
    format!(
        r#"(module
  {}
  (func $f (param i32)
    (if (i32.eqz (local.get 0))
      (then (call $sample))
      (else (call $f (i32.sub (local.get 0) (i32.const 1))))))
  (func $g (call $sample) (call $sample))
  (func (export "_start") (call $f (i32.const 3)) (call $g)))"#,
        hook()
    )
}

#[test]
fn a_sample_lands_on_the_context_that_runs_under_recursion_and_in_an_import() {
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        let (p, outcome) = sampled(&recursion(), state, std::time::Duration::ZERO);
        assert_eq!(outcome.exit_code, 0);
        check_invariants(&p);
        let s = hook_name();
        let at = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        // The samples are the hook import's own time, in each context it ran in; its
        // callers' inclusive time holds them, once per outermost activation.
        assert_eq!(
            sampled_contexts(&p),
            vec![
                (at(&["_start"]), 0, 0, 3 * NS),
                (at(&["_start", "f"]), 0, 0, NS),
                (at(&["_start", "f", "f"]), 0, 0, NS),
                (at(&["_start", "f", "f", "f"]), 0, 0, NS),
                (at(&["_start", "f", "f", "f", "f"]), 0, 0, NS),
                (at(&["_start", "f", "f", "f", "f", &s]), 1, NS, NS),
                (at(&["_start", "g"]), 0, 0, 2 * NS),
                (at(&["_start", "g", &s]), 2, 2 * NS, 2 * NS),
            ],
            "{state:?}"
        );
        let f = p.function_named("f").unwrap();
        assert_eq!(calls(&p, "f"), 4);
        assert_eq!((f.cost.self_ns, f.cost.total_ns), (0, NS), "{state:?}");
        let hook = p.function_named(&s).unwrap();
        assert_eq!(hook.cost.self_samples, Some(3));
        assert_eq!((hook.cost.self_ns, hook.cost.total_ns), (3 * NS, 3 * NS));
        let arc = p.arc("f", &s).unwrap();
        assert_eq!((arc.count, arc.cost.self_ns), (1, NS));
        let sampling = p.sampling.expect("a sampled profile says how");
        assert_eq!(sampling.samples, 3);
        assert_eq!(sampling.sampled_ns, 3 * NS);
        assert_eq!(sampling.in_probes, 0);
    }
}

#[test]
fn samples_before_a_trap_and_a_proc_exit_stay_in_the_profile() {
    let trap = format!(
        r#"(module
  {}
  (func $deep (call $sample) (unreachable))
  (func (export "_start") (call $deep)))"#,
        hook()
    );
    let (p, outcome) = sampled(&trap, StateLocation::OwnMemory, std::time::Duration::ZERO);
    assert!(outcome.trap.is_some());
    assert!(!p.complete);
    assert_eq!(p.runs[0].open_stack, ["_start", "deep"]);
    let s = hook_name();
    assert_eq!(p.function_named(&s).unwrap().cost.self_ns, NS);
    assert_eq!(p.function_named("deep").unwrap().cost.total_ns, NS);
    // The report says whose the time after the trap is.
    let text = Format::Text.render(&p, &EmitOptions::default()).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("sampled up to the end, the host's handling of the trap in the innermost's"),
        "{text}"
    );

    let exit = format!(
        r#"(module
  {}
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func $leave (call $sample) (call $sample) (call $exit (i32.const 3)))
  (func (export "_start") (call $leave)))"#,
        hook()
    );
    let (p, outcome) = sampled(&exit, StateLocation::StateModule, std::time::Duration::ZERO);
    assert_eq!(outcome.exit_code, 3);
    assert_eq!(
        p.runs[0].open_stack,
        ["_start", "leave", "wasi_snapshot_preview1.proc_exit"]
    );
    assert_eq!(p.function_named(&s).unwrap().cost.self_samples, Some(2));
    assert_eq!(p.function_named("leave").unwrap().cost.total_ns, 2 * NS);
}

/// Runs `wat` on its own memory with the sampler's thread on, every 100 us, and checks that
/// it ran to its end with a consistent profile.
fn sampled_by_the_thread(wat: &str) -> Profile {
    let (p, outcome) = sampled(
        wat,
        StateLocation::OwnMemory,
        std::time::Duration::from_micros(100),
    );
    assert_eq!(outcome.exit_code, 0);
    check_invariants(&p);
    p
}

/// With the sampler's thread on: a program that spends its time in one loop has its time
/// there, and the calls stay exact.
#[test]
fn the_sampler_thread_finds_the_loop_that_runs() {
    let wat = r#"(module
  (func $tiny (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $spin (local i32) (local i64)
    (loop $again
      (local.set 1 (i64.add (local.get 1) (i64.const 1)))
      (br_if $again (i64.lt_u (local.get 1) (i64.const 300000000)))))
  (func (export "_start")
    (drop (call $tiny (call $tiny (i32.const 0))))
    (call $spin)))"#;
    let p = sampled_by_the_thread(wat);
    assert_eq!(calls(&p, "tiny"), 2);
    let sampling = p.sampling.unwrap();
    assert!(sampling.samples > 10, "{sampling:?}");
    let spin = p.function_named("spin").unwrap();
    let all: u64 = p.functions.iter().map(|f| f.cost.self_ns).sum();
    assert_eq!(all, sampling.sampled_ns);
    assert!(
        spin.cost.self_ns as f64 >= 0.95 * all as f64,
        "spin's self time {} of {all} ns",
        spin.cost.self_ns
    );
}

/// With the sampler's thread on: a program of 20 M calls of a one-instruction function
/// spends most of its profiled time in the probes, and the report says that the times of
/// such call-dense code are the least exact, naming the exact alternative.
#[test]
fn the_report_says_when_dense_calls_make_the_times_least_exact() {
    let wat = r#"(module
  (func $tiny (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func (export "_start") (local i32) (local i32)
    (loop $again
      (local.set 0 (call $tiny (local.get 0)))
      (local.set 1 (i32.add (local.get 1) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get 1) (i32.const 20000000))))))"#;
    let p = sampled_by_the_thread(wat);
    assert_eq!(calls(&p, "tiny"), 20_000_000);
    let sampling = p.sampling.unwrap();
    let all = sampling.samples + sampling.in_probes + sampling.idle;
    assert!(sampling.in_probes * 10 >= all, "{sampling:?}");
    let text = Format::Text.render(&p, &EmitOptions::default()).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(
            "with calls this dense, small functions' and their callers' times are the least exact"
        ) && text.contains("--metric instructions is exact"),
        "{text}"
    );
}

/// With the sampler's thread on: the allocation probes' work (the live table's lookups and
/// its growths, ten of them for 500,000 blocks kept) is the probes', left out of the times
/// as the entry and exit probes' is, not the allocator's.
#[test]
fn the_allocation_probes_time_is_not_the_allocators() {
    let wat = common::keeper_wat(500_000, 600_000_000);
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        let (p, outcome) = sampled(&wat, state, std::time::Duration::from_micros(100));
        assert_eq!(outcome.exit_code, 0);
        check_invariants(&p);
        assert_eq!(calls(&p, "malloc"), 500_000);
        let kept = p.total_allocs();
        assert_eq!((kept.held, kept.held_bytes), (500_000, 4_000_000));
        let sampling = p.sampling.unwrap();
        assert!(sampling.in_probes > 0, "{sampling:?}");
        let all: u64 = p.functions.iter().map(|f| f.cost.self_ns).sum();
        let malloc = p.function_named("malloc").unwrap().cost.self_ns;
        assert!(
            (malloc as f64) < 0.05 * all as f64,
            "{state:?}: malloc's self time {malloc} of {all} ns; {sampling:?}"
        );
    }
}

/// A wasi-threads program: each thread's samples land in its own profile. The spawned
/// thread takes three samples and stores 1 at address 0 for the main thread, which took
/// one and waits for that (its wait sees 1 at once, or is woken).
#[test]
fn each_thread_is_sampled_in_its_own_profile() {
    let wat = format!(
        r#"(module
             (import "wasi" "thread-spawn" (func $spawn (param i32) (result i32)))
             {hook}
             (import "env" "memory" (memory 1 1 shared))
             (func (export "wasi_thread_start") (param i32 i32)
               (call $sample) (call $sample) (call $sample)
               (i32.atomic.store (i32.const 0) (i32.const 1))
               (drop (memory.atomic.notify (i32.const 0) (i32.const 1))))
             (func (export "_start")
               (call $sample)
               (drop (call $spawn (i32.const 0)))
               (block $done
                 (loop $again
                   (br_if $done (i32.atomic.load (i32.const 0)))
                   (drop (memory.atomic.wait32 (i32.const 0) (i32.const 0) (i64.const -1)))
                   (br $again)))))"#,
        hook = hook()
    );
    let (p, outcome) = sampled(&wat, StateLocation::OwnMemory, std::time::Duration::ZERO);
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(p.threads.len(), 2);
    let samples = |q: &Profile| {
        let f = q.function_named(&hook_name()).expect("the hook ran");
        (f.calls, f.cost.self_samples.unwrap_or(0), f.cost.self_ns)
    };
    assert_eq!(samples(&p.threads[0].profile), (1, 1, NS));
    assert_eq!(samples(&p.threads[1].profile), (3, 3, 3 * NS));
    assert_eq!(samples(&p), (4, 4, 4 * NS));
    assert_eq!(p.sampling.unwrap().samples, 4);
}
