//! The stack sampler (`--sampler stacks`, the embedded host on Linux): samples land where
//! the code is, the probes' own code is left out by its address, host calls are charged to
//! the import under its caller, and traps, exits and threads keep their samples. The
//! programs spend nearly all their time in one place, so the answers follow from the code;
//! the timings only decide how many samples there are.

#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

mod common;

use std::time::Duration;

use cargo_wasmprof::host::{Embedded, Outcome, RunConfig};
use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::{self, Metric, Sampler};
use cargo_wasmprof::profile::Profile;
use common::{calls, check_invariants, operators, validate};
use wasmparser::Operator;

/// The interval of these tests' runs: short, for many samples in a short run.
const INTERVAL: Duration = Duration::from_micros(200);

/// The stack sampler's options.
fn stacks() -> Options {
    Options {
        metric: Metric::Time,
        sampler: Sampler::Stacks,
        ..Options::default()
    }
}

/// Instruments `wat` for the stack sampler, runs it, and decodes its profile.
fn sampled(wat: &str) -> (Profile, Outcome) {
    sampled_with(wat, &stacks())
}

/// [`sampled`], instrumented with `options`.
fn sampled_with(wat: &str, options: &Options) -> (Profile, Outcome) {
    let wasm = wat::parse_str(wat).unwrap();
    let done = instrument::instrument(&wasm, options).unwrap();
    validate(&done.wasm);
    let config = RunConfig {
        sample_interval: Some(INTERVAL),
        inherit_stdio: false,
        ..RunConfig::new("test.wasm", Vec::new(), ".")
    };
    let outcome = Embedded.run_module(&done.wasm, &config).unwrap();
    let profile = outcome.profile(&done.meta, "test.wasm").unwrap();
    (profile, outcome)
}

/// A function `$spin` that loops `rounds` times without a call.
fn spin(rounds: u64) -> String {
    format!(
        r#"(func $spin (local i64)
    (loop $again
      (local.set 0 (i64.add (local.get 0) (i64.const 1)))
      (br_if $again (i64.lt_u (local.get 0) (i64.const {rounds})))))"#
    )
}

/// The share of all self time that function `name` has, in percent.
fn self_share(p: &Profile, name: &str) -> f64 {
    let all: u64 = p.functions.iter().map(|f| f.cost.self_ns).sum();
    let own = p.function_named(name).map_or(0, |f| f.cost.self_ns);
    100.0 * own as f64 / all.max(1) as f64
}

/// A leaf loop without calls (the blind spot of a sampler that looks only at calls) gets
/// the samples, and the probes, which run only at its entry and exit, almost none.
#[test]
fn a_leaf_loop_without_calls_gets_its_samples() {
    let wat = format!(
        r#"(module
  (func $tiny (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  {}
  (func (export "_start")
    (drop (call $tiny (call $tiny (i32.const 0))))
    (call $spin)))"#,
        spin(300_000_000)
    );
    let (p, outcome) = sampled(&wat);
    assert_eq!(outcome.exit_code, 0);
    check_invariants(&p);
    assert_eq!(calls(&p, "tiny"), 2);
    let s = p.sampling.unwrap();
    assert_eq!(s.sampler, Sampler::Stacks);
    assert!(s.samples > 50, "{s:?}");
    assert!(s.in_probes * 50 < s.samples, "{s:?}");
    assert_eq!(s.unplaced, 0, "{s:?}");
    let all: u64 = p.functions.iter().map(|f| f.cost.self_ns).sum();
    assert_eq!(all, s.sampled_ns);
    assert!(self_share(&p, "spin") >= 95.0, "{s:?}");
    // The sample's stack puts it under its caller.
    let start = p.function_named("_start").unwrap();
    let spin = p.function_named("spin").unwrap();
    assert!(start.cost.total_ns >= spin.cost.total_ns);
    assert_eq!(
        p.arc("_start", "spin").unwrap().cost.total_ns,
        spin.cost.total_ns
    );
}

/// A sample in a small function's prologue or epilogue, where the frame pointer is still
/// (or again) its caller's, keeps the caller in its stack: `$calls` calls `$tiny` and
/// `$wide` (whose arguments do not all fit in registers, so that it pops those on the stack
/// as it returns, `ret imm16` on x86-64) 10 M and 40 M times, so many samples land there,
/// and every one is placed under `$calls`, none left out as unplaced.
#[test]
fn a_sample_in_a_prologue_or_epilogue_keeps_its_caller() {
    const ROUNDS: u64 = 10_000_000;
    const WIDE_PER_ROUND: u64 = 4;
    let params = "i64 ".repeat(16);
    let args = (0..16)
        .map(|i| format!("(local.get {})", i % 2))
        .collect::<String>();
    let wide_calls = format!("(local.set 1 (call $wide {args}))").repeat(WIDE_PER_ROUND as usize);
    let wat = format!(
        r#"(module
  (func $tiny (param i64 i64) (result i64)
    (i64.mul (i64.xor (local.get 0) (local.get 1)) (i64.const 0x2545f4914f6cdd1d)))
  (func $wide (param {params}) (result i64)
    (i64.mul (i64.xor (local.get 0) (local.get 15)) (i64.const 0x2545f4914f6cdd1d)))
  (func $calls (local i64 i64)
    (loop $again
      (local.set 1 (call $tiny (local.get 1) (local.get 0)))
      {wide_calls}
      (local.set 0 (i64.add (local.get 0) (i64.const 1)))
      (br_if $again (i64.lt_u (local.get 0) (i64.const {ROUNDS})))))
  (func (export "_start") (call $calls)))"#
    );
    let (p, outcome) = sampled(&wat);
    assert_eq!(outcome.exit_code, 0);
    check_invariants(&p);
    let s = p.sampling.unwrap();
    assert!(s.samples > 50, "{s:?}");
    assert_eq!(s.unplaced, 0, "{s:?}");
    for (callee, count) in [("tiny", ROUNDS), ("wide", WIDE_PER_ROUND * ROUNDS)] {
        assert_eq!(calls(&p, callee), count);
        let f = p.function_named(callee).unwrap();
        assert!(f.cost.self_ns > 0, "{callee}: {s:?}");
        let arc = p.arc("calls", callee).unwrap();
        assert_eq!(arc.cost.total_ns, f.cost.total_ns, "{callee}");
    }
    let all: u64 = p.functions.iter().map(|f| f.cost.self_ns).sum();
    assert_eq!(all, s.sampled_ns);
}

/// The allocation probes' work (the live table's lookups and its growths, ten of them
/// for 500,000 blocks kept) is the probes' code, left out of the times, not the
/// allocator's.
#[test]
fn the_allocation_probes_time_is_not_the_allocators() {
    let options = Options {
        allocations: true,
        ..stacks()
    };
    let (p, outcome) = sampled_with(&common::keeper_wat(500_000, 600_000_000), &options);
    assert_eq!(outcome.exit_code, 0);
    check_invariants(&p);
    assert_eq!(calls(&p, "malloc"), 500_000);
    assert_eq!(p.total_allocs().held, 500_000);
    let s = p.sampling.unwrap();
    assert!(s.in_probes > 0, "{s:?}");
    assert!(self_share(&p, "malloc") < 5.0, "{s:?}");
}

/// What the addresses section says of each instruction of the instrumented module: every
/// instruction the instrumenter added (those that touch the profiler's memory or globals,
/// or call its functions) is the probes' code; every instruction of the program is the
/// program's. A sample's PC is classified by this map (through wasmtime's address map), so
/// a sample in probe code counts as the probes', never as the function's.
#[test]
fn the_probes_code_is_told_from_the_programs_by_its_address() {
    let wat = r#"(module
  (memory (export "memory") 1)
  (func $leaf (param i64) (result i64)
    (i64.mul (local.get 0) (i64.const 0x1234567)))
  (func $work (param i64) (result i64)
    (i64.store (i32.const 8) (call $leaf (local.get 0)))
    (i64.load (i32.const 8)))
  (func (export "_start") (drop (call $work (i64.const 3)))))"#;
    let plain = wat::parse_str(wat).unwrap();
    // The calls probes (the counts at each direct call site, the exported function's
    // entry), and the context tree's.
    for (contexts, at_least) in [(false, 3), (true, 20)] {
        let options = Options {
            contexts,
            ..stacks()
        };
        let done = instrument::instrument(&plain, &options).unwrap();
        let (probes, program) = probe_and_program_instructions(&done);
        // leaf: i64.const, i64.mul; work: i64.store, i64.load.
        assert!(
            probes > at_least && program == 4,
            "{probes} probe and {program} program instructions"
        );
    }
}

/// How many of the instrumented module `done`'s instructions are the probes' and how many
/// the program's (of those that show which they are), each checked against what the
/// addresses section says of it.
fn probe_and_program_instructions(done: &instrument::Instrumented) -> (usize, usize) {
    validate(&done.wasm);
    let section = meta::custom_section(&done.wasm, meta::ADDRESSES_SECTION)
        .unwrap()
        .expect("the addresses section");
    let stretches: Vec<(u32, u32)> = section
        .chunks_exact(8)
        .map(|b| {
            let word = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
            (word(0), word(4))
        })
        .collect();
    let what = |offset: usize| {
        let at = stretches.partition_point(|&(o, _)| o as usize <= offset);
        stretches[at - 1].1
    };
    // The program's own: its three functions, its memory (0), no globals. The profiler's
    // functions are told by their index (the frames table maps them to no function id, or
    // ends before them), whole.
    let frames = &done.meta.frames;
    let profilers = |f: u32| {
        frames
            .get(f as usize)
            .is_none_or(|&id| id == meta::NO_FUNCTION)
    };
    let (mut probes, mut program) = (0, 0);
    for (function, ops) in operators(&done.wasm) {
        if profilers(function) {
            continue;
        }
        for (offset, op) in ops {
            let class = what(offset);
            if touches_profiler(&op, profilers) {
                assert_eq!(
                    class,
                    meta::PROBE_CODE,
                    "{op:?} at {offset} (function {function})"
                );
                probes += 1;
            } else if is_programs(&op) {
                assert_eq!(
                    class,
                    meta::NO_LINE,
                    "{op:?} at {offset} (function {function})"
                );
                program += 1;
            }
        }
    }
    (probes, program)
}

/// Whether `op` is one the instrumenter adds: it reads or writes the profiler's memory (any
/// memory but 0) or a global (the program has none), or calls one of the `profilers`
/// functions.
fn touches_profiler(op: &Operator, profilers: impl Fn(u32) -> bool) -> bool {
    let memarg = match op {
        Operator::I32Load { memarg }
        | Operator::I64Load { memarg }
        | Operator::I32Store { memarg }
        | Operator::I64Store { memarg }
        | Operator::I32AtomicLoad { memarg }
        | Operator::I64AtomicLoad { memarg }
        | Operator::I64AtomicRmwAdd { memarg } => Some(memarg.memory),
        _ => None,
    };
    memarg.is_some_and(|m| m != 0)
        || matches!(op, Operator::GlobalGet { .. } | Operator::GlobalSet { .. })
        || matches!(op, Operator::Call { function_index } if profilers(*function_index))
}

/// Whether `op` is one of the program's distinctive instructions in the fixture above.
fn is_programs(op: &Operator) -> bool {
    match op {
        Operator::I64Const { value } => *value == 0x1234567,
        Operator::I64Load { memarg } | Operator::I64Store { memarg } => memarg.memory == 0,
        Operator::I64Mul => true,
        _ => false,
    }
}

/// A blocking host call (WASI's `poll_oneoff` sleeping 300 ms) is charged to that import,
/// under the function that called it: the host's time stays visible.
#[test]
fn a_blocking_host_call_is_charged_to_the_import_under_its_caller() {
    // One clock subscription at 0 (48 bytes: userdata, tag 0 = clock, clock id 1 =
    // monotonic at 16, timeout at 24, precision at 32, flags 0 = relative at 40), its
    // event at 64, the count of events at 128.
    let wat = r#"(module
  (import "wasi_snapshot_preview1" "poll_oneoff"
    (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func $nap
    (i32.store (i32.const 16) (i32.const 1))
    (i64.store (i32.const 24) (i64.const 300000000))
    (drop (call $poll (i32.const 0) (i32.const 64) (i32.const 1) (i32.const 128))))
  (func (export "_start") (call $nap)))"#;
    let (p, outcome) = sampled(wat);
    assert_eq!(outcome.exit_code, 0);
    check_invariants(&p);
    let poll = "wasi_snapshot_preview1.poll_oneoff";
    let s = p.sampling.unwrap();
    assert!(s.sampled_ns >= 250_000_000, "{s:?}");
    assert!(self_share(&p, poll) >= 95.0, "{s:?}");
    let arc = p.arc("nap", poll).expect("nap calls poll_oneoff");
    assert_eq!(arc.count, 1);
    assert!(arc.cost.self_ns >= 250_000_000, "{arc:?}");
    assert!(p.function_named("nap").unwrap().cost.total_ns >= arc.cost.self_ns);
}

/// A program that traps, or exits through WASI, keeps the samples it took.
#[test]
fn a_trapping_or_exiting_program_keeps_its_samples() {
    let trap = format!(
        r#"(module
  {}
  (func (export "_start") (call $spin) (unreachable)))"#,
        spin(200_000_000)
    );
    let (p, outcome) = sampled(&trap);
    assert!(outcome.trap.is_some());
    assert!(!p.complete);
    assert!(p.sampling.unwrap().samples > 20, "{:?}", p.sampling);
    assert!(self_share(&p, "spin") >= 90.0);

    let exit = format!(
        r#"(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  {}
  (func (export "_start") (call $spin) (call $exit (i32.const 3))))"#,
        spin(200_000_000)
    );
    let (p, outcome) = sampled(&exit);
    assert_eq!(outcome.exit_code, 3);
    assert!(p.sampling.unwrap().samples > 20, "{:?}", p.sampling);
    assert!(self_share(&p, "spin") >= 90.0);
}

/// A wasi-threads program: the spawned thread spins, the main thread waits for it; each
/// thread's samples are in its own profile, and the main thread's, blocked in its wait, are
/// charged to the function that waits.
#[test]
fn each_thread_keeps_its_own_samples() {
    let wat = format!(
        r#"(module
  (import "wasi" "thread-spawn" (func $spawn (param i32) (result i32)))
  (import "env" "memory" (memory 1 1 shared))
  {}
  (func (export "wasi_thread_start") (param i32 i32)
    (call $spin)
    (i32.atomic.store (i32.const 0) (i32.const 1))
    (drop (memory.atomic.notify (i32.const 0) (i32.const 1))))
  (func (export "_start")
    (drop (call $spawn (i32.const 0)))
    (block $done
      (loop $again
        (br_if $done (i32.atomic.load (i32.const 0)))
        (drop (memory.atomic.wait32 (i32.const 0) (i32.const 0) (i64.const -1)))
        (br $again)))))"#,
        spin(200_000_000)
    );
    let (p, outcome) = sampled(&wat);
    assert_eq!(outcome.exit_code, 0);
    assert_eq!(p.threads.len(), 2);
    let spin_ns = |q: &Profile| q.function_named("spin").map_or(0, |f| f.cost.self_ns);
    let (main, spawned) = (&p.threads[0].profile, &p.threads[1].profile);
    assert_eq!(spin_ns(main), 0);
    let s = spawned.sampling.unwrap();
    assert!(s.samples > 20, "{s:?}");
    assert!(self_share(spawned, "spin") >= 90.0, "{s:?}");
    assert_eq!(spin_ns(&p), spin_ns(spawned));
    // The main thread's samples found it waiting, not idle in wasmtime's code.
    let waited = main.sampling.unwrap();
    assert!(
        waited.samples > 20 && waited.idle * 10 < waited.samples,
        "{waited:?}"
    );
    assert!(self_share(main, "_start") >= 90.0, "{waited:?}");
}
