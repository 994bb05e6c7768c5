//! Runs that end early or unwind: traps, exceptions through exit probes, stack exhaustion,
//! out of memory, a trapping thread; every open activation is closed or reported.

use super::*;

#[test]
fn a_trap_leaves_a_partial_profile_with_the_open_stack() {
    let wasm = wat::parse_str(
        r#"(module
             (memory (export "memory") 1)
             (func $boom unreachable)
             (func $middle call $boom)
             (func (export "_start") call $middle))"#,
    )
    .unwrap();
    let (p, outcome) = profile_module(&wasm);
    assert!(outcome.trap.is_some());
    assert_eq!(outcome.exit_code, cargo_wasmprof::host::TRAP_EXIT_CODE);
    assert!(!p.complete);
    assert_eq!(p.runs[0].open_stack, ["_start", "middle", "boom"]);
    assert_eq!(calls(&p, "boom"), 1);
}

/// An exception thrown five frames down and caught in `catcher`: every frame it unwinds
/// runs its exit probe, so the profile is complete, the times nest, and what runs after the
/// catch is attributed to the right caller.
#[test]
fn exceptions_unwind_through_exit_probes() {
    let wasm = wat::parse_str(
        r#"(module
  (tag $e (param i32))
  (func $thrower (param i32)
    (if (i32.eqz (local.get 0)) (then (throw $e (i32.const 7))))
    (call $thrower (i32.sub (local.get 0) (i32.const 1))))
  (func $catcher (result i32)
    (block $h (result i32)
      (try_table (catch $e $h) (call $thrower (i32.const 5)))
      (i32.const 0)))
  (func $after)
  (func (export "_start")
    (drop (call $catcher))
    (call $after)
    (drop (call $catcher))))"#,
    )
    .unwrap();
    for metric in [Metric::ExactTime, Metric::Instructions] {
        let (p, outcome) = profile_module_with(&wasm, &with_metric(metric));
        assert_eq!(outcome.exit_code, 0);
        check_invariants(&p);
        assert!(p.complete, "{metric:?}: every activation ended");
        assert!(p.runs[0].open_stack.is_empty());
        assert_eq!(calls(&p, "thrower"), 12);
        assert_eq!(arc(&p, "thrower", "thrower"), 10);
        // `after` runs under `_start`, not inside the unwound frames.
        assert_eq!(context_callers(&p, "after"), ["_start"], "{metric:?}");
        // Inclusive costs nest: the thrower's within the catcher's within _start's.
        let total = |name: &str| p.function_named(name).unwrap().cost.get(metric).1;
        assert!(
            total("thrower") > 0,
            "{metric:?}: the thrower's cost is counted"
        );
        assert!(total("thrower") <= total("catcher"));
        assert!(total("catcher") <= total("_start"));
        assert_eq!(context_callers(&p, "_start"), ["<host>"]);
    }
}

/// Unbounded recursion exhausts the stack: the profile is partial, with every frame that
/// was open, outermost first.
#[test]
fn stack_exhaustion_leaves_the_open_stack() {
    let wasm = wat::parse_str(
        r#"(module
             (func $down (param i32) (call $down (i32.add (local.get 0) (i32.const 1))))
             (func (export "_start") (call $down (i32.const 0))))"#,
    )
    .unwrap();
    let (p, outcome) = profile_module(&wasm);
    let trap = outcome.trap.expect("a trap");
    assert!(trap.contains("stack"), "{trap}");
    assert!(!p.complete);
    let stack = &p.runs[0].open_stack;
    assert_eq!(stack[0], "_start");
    let depth = calls(&p, "down");
    assert!(depth > 1000, "deep: {depth}");
    // The innermost activation may have run out of stack in its prologue or its entry
    // probe, before its call was counted: the host's backtrace still shows it open.
    let open = stack.len() as u64;
    assert!(
        open == depth + 1 || open == depth + 2,
        "every activation is still open: {open} frames, {depth} calls"
    );
    assert!(stack[1..].iter().all(|f| f == "down"));
    // The innermost call may have been counted as an arc and then run out of stack in
    // its entry probe (in `find_child`), before its context counted it.
    let arcs = arc(&p, "down", "down");
    assert!(
        arcs == depth - 1 || arcs == depth,
        "{arcs} arcs, {depth} calls"
    );
}

/// Out of memory: the program grows its memory until it cannot, then aborts (as Rust's
/// allocation-failure handler does); the profiler's own memory neither hides nor causes it.
#[test]
fn out_of_memory_leaves_the_open_stack() {
    let wasm = wat::parse_str(
        r#"(module
             (memory 1 64)
             (func $abort unreachable)
             (func $alloc (result i32) (memory.grow (i32.const 16)))
             (func (export "_start")
               (loop $more
                 (if (i32.eq (call $alloc) (i32.const -1)) (then (call $abort)))
                 (br $more))))"#,
    )
    .unwrap();
    let (p, outcome) = profile_module(&wasm);
    assert!(outcome.trap.expect("a trap").contains("unreachable"));
    assert!(!p.complete);
    assert_eq!(p.runs[0].open_stack, ["_start", "abort"]);
    // 1 page, then 17, 33, 49; the fourth growth fails (49 + 16 > 64).
    assert_eq!(calls(&p, "alloc"), 4);
}

#[test]
fn a_trapping_thread_ends_the_program_and_every_thread_keeps_its_profile() {
    let wasm = wat::parse_str(THREADED).unwrap();
    for metric in [
        Metric::Calls,
        Metric::Instructions,
        Metric::ExactTime,
        Metric::Time,
    ] {
        let (p, outcome) = profile_module_with(&wasm, &with_metric(metric));
        assert_eq!(outcome.exit_code, 134, "{metric:?}: a trap's exit code");
        let trap = outcome.trap.as_deref().unwrap_or_default();
        assert!(trap.starts_with("thread 1: "), "{metric:?}: {trap}");
        assert_eq!(
            p.threads.len(),
            2,
            "{metric:?}: the main thread and the spawned one"
        );
        let (main, spawned) = (&p.threads[0], &p.threads[1]);
        assert_eq!((main.id, spawned.id), (0, 1));
        assert_eq!(main.how, "waiting when the program ended", "{metric:?}");
        assert!(
            spawned.how.starts_with("trapped: "),
            "{metric:?}: {}",
            spawned.how
        );
        assert_eq!(calls(&spawned.profile, "f"), 3, "{metric:?}");
        assert_eq!(calls(&main.profile, "_start"), 1, "{metric:?}");
        assert_eq!(calls(&main.profile, "wasi.thread-spawn"), 1, "{metric:?}");
        assert!(main.profile.function_named("f").is_none(), "{metric:?}");
        // The run ended where the thread trapped.
        assert_eq!(
            p.runs[0].open_stack.last().map(String::as_str),
            Some("wasi_thread_start"),
            "{metric:?}"
        );
        // The merged profile is their sum.
        assert_eq!(calls(&p, "f"), 3, "{metric:?}");
        assert_eq!(calls(&p, "_start"), 1, "{metric:?}");
        assert_eq!(calls(&p, "wasi_thread_start"), 1, "{metric:?}");
        if metric == Metric::Instructions {
            // `_start` ran `i32.const 7; call` and `drop; i32.const 0; i32.const 0;
            // i64.const -1; memory.atomic.wait32` before it blocked: 7 instructions.
            let start = main.profile.function_named("_start").unwrap();
            assert_eq!(start.cost.self_instructions, Some(7));
            // `$f`: local.get, i32.const, i32.add, three times.
            let f = spawned.profile.function_named("f").unwrap();
            assert_eq!(f.cost.self_instructions, Some(9));
            let sum = |q: &cargo_wasmprof::profile::Profile| -> u64 {
                q.functions
                    .iter()
                    .map(|f| f.cost.self_instructions.unwrap_or(0))
                    .sum()
            };
            assert_eq!(sum(&p), sum(&main.profile) + sum(&spawned.profile));
        }
    }
}
