//! Known-answer profiles of small hand-written modules: every count follows from the code.

mod common;

use cargo_wasmprof::instrument::Options;
use cargo_wasmprof::meta::{Metric, StateLocation};
use cargo_wasmprof::profile::HOST;
use common::{
    arc, calls, check_invariants, context_callers, fib_calls, profile_module, profile_module_with,
    run,
};

/// fib, a function table, early exits, multi-value, tail calls and a host import; `_start`
/// exits with a checksum of the results so that behaviour can be compared.
const PROGRAM: &str = r#"
(module
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (type $unary (func (param i32) (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $inc $dbl)

  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  (func $inc (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $dbl (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))

  ;; x = 1, then x = table[i % 2](x) for i in 0..n
  (func $apply (param $n i32) (result i32) (local $i i32) (local $x i32)
    (local.set $x (i32.const 1))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $x (call_indirect (type $unary) (local.get $x) (i32.rem_u (local.get $i) (i32.const 2))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $x))

  ;; 0: a branch to the function body; 1: return from inside an if; else: fall off the end
  (func $early (param i32) (result i32)
    (if (i32.eqz (local.get 0)) (then (br 1 (i32.const 20))))
    (if (i32.eq (local.get 0) (i32.const 1)) (then (return (i32.const 10))))
    (i32.const 30))

  (func $pair (param i32) (result i32 i32) (local.get 0) (i32.const 1))

  (func $count_down (param i32) (result i32)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 0))
      (else (return_call $count_down (i32.sub (local.get 0) (i32.const 1))))))

  (func $main (result i32)
    (local $sum i32)
    (local.set $sum (call $fib (i32.const 10)))
    (local.set $sum (i32.add (local.get $sum) (call $apply (i32.const 6))))
    (local.set $sum (i32.add (local.get $sum) (call $early (i32.const 0))))
    (local.set $sum (i32.add (local.get $sum) (call $early (i32.const 1))))
    (local.set $sum (i32.add (local.get $sum) (call $early (i32.const 2))))
    (call $pair (i32.const 3))
    (local.set $sum (i32.add (local.get $sum) (i32.add)))
    (local.set $sum (i32.add (local.get $sum) (call $count_down (i32.const 5))))
    (drop (call $yield))
    (local.get $sum))

  ;; WASI exit codes stay below 126
  (func (export "_start")
    (call $exit (i32.sub (call $main) (i32.const 100)))))
"#;

/// fib(10) = 55; apply(6) = ((((1+1)*2+1)*2+1)*2) = 22; early = 20 + 10 + 30; pair = 3 + 1;
/// less 100.
const CHECKSUM: i32 = 55 + 22 + 20 + 10 + 30 + 4 - 100;

#[test]
fn counts_and_arcs_follow_from_the_code() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let (p, outcome) = profile_module(&wasm);
    check_invariants(&p);
    assert_eq!(outcome.exit_code, CHECKSUM);

    // Plain recursion: 2 * F(11) - 1 calls, all but one from fib itself.
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "fib", "fib"), fib_calls(10) - 1);
    assert_eq!(arc(&p, "main", "fib"), 1);

    // call_indirect through the table: inc and dbl alternate, 3 calls each.
    assert_eq!(arc(&p, "apply", "inc"), 3);
    assert_eq!(arc(&p, "apply", "dbl"), 3);

    // Every way out of a function ends its activation.
    assert_eq!(calls(&p, "early"), 3);
    assert_eq!(calls(&p, "pair"), 1);

    // Tail calls: 6 activations, 5 of them through return_call.
    assert_eq!(calls(&p, "count_down"), 6);
    assert_eq!(arc(&p, "count_down", "count_down"), 5);

    // Imports are counted as calls into the host, named module.field.
    assert_eq!(arc(&p, "main", "wasi_snapshot_preview1.sched_yield"), 1);
    assert_eq!(arc(&p, "_start", "wasi_snapshot_preview1.proc_exit"), 1);
    assert!(
        p.function_named("wasi_snapshot_preview1.sched_yield")
            .unwrap()
            .import
    );

    // The host called _start.
    assert_eq!(arc(&p, HOST, "_start"), 1);

    // proc_exit never returns: the run ends inside _start -> proc_exit.
    assert!(!p.complete);
    assert_eq!(
        p.runs[0].open_stack,
        ["_start", "wasi_snapshot_preview1.proc_exit"]
    );
}

#[test]
fn the_instrumented_module_computes_what_the_original_does() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let plain = run(&wasm);
    let (_, profiled) = profile_module(&wasm);
    assert_eq!(plain.exit_code, CHECKSUM);
    assert_eq!(profiled.exit_code, plain.exit_code);
    assert_eq!(profiled.trap, plain.trap);
}

#[test]
fn context_tree_and_times_are_consistent() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let (p, _) = profile_module(&wasm);
    let fib = p.function_named("fib").unwrap();
    // fib(10) is one outermost activation; its path is main -> fib -> fib ...: 10 deep at most.
    let fib_contexts: Vec<_> = p
        .contexts
        .iter()
        .filter(|c| c.function == Some(fib.id))
        .collect();
    assert_eq!(fib_contexts.len(), 10, "one context per recursion depth");
    let main = p.function_named("main").unwrap();
    let outer = fib_contexts
        .iter()
        .find(|c| p.contexts[c.parent.unwrap() as usize].function == Some(main.id));
    let outer = outer.expect("fib's outermost context is under main");
    assert_eq!(outer.calls, 1);
    // Inclusive time counts the outermost activation once: the outermost context's time.
    assert_eq!(fib.cost.total_ns, outer.cost.total_ns);
    // Self time is the sum over its contexts (each context rounded to the nanosecond).
    let self_sum: u64 = fib_contexts.iter().map(|c| c.cost.self_ns).sum();
    assert!(fib.cost.self_ns.abs_diff(self_sum) <= fib_contexts.len() as u64);
}

#[test]
fn a_module_without_names_or_dwarf_gets_export_and_index_names() {
    let wasm = wat::parse_str(
        r#"(module
             (memory (export "memory") 1)
             (func (export "_start") call 1 call 1)
             (func))"#,
    )
    .unwrap();
    let (p, outcome) = profile_module(&wasm);
    assert_eq!(outcome.exit_code, 0);
    assert!(p.complete);
    // The export's name is all there is for function 0.
    assert_eq!(calls(&p, "_start"), 1);
    assert_eq!(arc(&p, "_start", "func[1]"), 2);
    assert_eq!(p.function_named("func[1]").unwrap().file, None);
}

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

#[test]
fn a_full_context_tree_folds_but_keeps_exact_counts() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let (p, _) = profile_module_with(
        &wasm,
        &Options {
            max_contexts: 4,
            ..Options::default()
        },
    );
    check_invariants(&p);
    assert!(p.folded_entries > 0);
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "fib", "fib"), fib_calls(10) - 1);
}

#[test]
fn call_ref_and_return_call_ref_count_as_indirect_arcs() {
    let wasm = wat::parse_str(
        r#"(module
             (memory (export "memory") 1)
             (type $t (func (param i32) (result i32)))
             (elem declare func $twice $spin)
             (func $twice (type $t) (i32.mul (local.get 0) (i32.const 2)))
             ;; spin(n) tail-calls itself through a typed reference until n is 0
             (func $spin (type $t)
               (if (result i32) (i32.eqz (local.get 0))
                 (then (i32.const 0))
                 (else (return_call_ref $t (i32.sub (local.get 0) (i32.const 1)) (ref.func $spin)))))
             (func (export "_start")
               (drop (call_ref $t (i32.const 4) (ref.func $twice)))
               (drop (call_ref $t (i32.const 5) (ref.func $twice)))
               (drop (call_ref $t (i32.const 3) (ref.func $spin)))))"#,
    )
    .unwrap();
    let (p, outcome) = profile_module(&wasm);
    assert_eq!(outcome.trap, None);
    check_invariants(&p);
    assert_eq!(arc(&p, "_start", "twice"), 2);
    assert_eq!(arc(&p, "_start", "spin"), 1);
    assert_eq!(arc(&p, "spin", "spin"), 3);
    assert_eq!(calls(&p, "spin"), 4);
}

#[test]
fn instrumenting_is_deterministic() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let first = cargo_wasmprof::instrument::instrument(&wasm, &Options::default()).unwrap();
    let second = cargo_wasmprof::instrument::instrument(&wasm, &Options::default()).unwrap();
    assert!(
        first.wasm == second.wasm,
        "the same module instruments to the same bytes"
    );
}

fn with_metric(metric: Metric) -> Options {
    Options {
        metric,
        ..Options::default()
    }
}

#[test]
fn the_calls_metric_counts_without_a_clock() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let done = cargo_wasmprof::instrument::instrument(&wasm, &with_metric(Metric::Calls)).unwrap();
    let imports = wasmparser::Parser::new(0)
        .parse_all(&done.wasm)
        .filter_map(|p| match p.unwrap() {
            wasmparser::Payload::ImportSection(r) => Some(r.into_imports().count()),
            _ => None,
        })
        .sum::<usize>();
    assert_eq!(imports, 2, "only the program's own imports: no clock");
    let (p, outcome) = profile_module_with(&wasm, &with_metric(Metric::Calls));
    assert_eq!(outcome.exit_code, CHECKSUM);
    assert_eq!(p.metric, Metric::Calls);
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "fib", "fib"), fib_calls(10) - 1);
    assert_eq!(arc(&p, "apply", "inc"), 3);
    assert_eq!(arc(&p, "count_down", "count_down"), 5);
    assert_eq!(arc(&p, HOST, "_start"), 1);
    assert_eq!(p.contexts.len(), 1, "no calling-context tree");
    assert!(p.functions.iter().all(|f| f.cost == Default::default()));
}

#[test]
fn the_instructions_metric_counts_executed_instructions_exactly() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let (p, outcome) = profile_module_with(&wasm, &with_metric(Metric::Instructions));
    assert_eq!(outcome.exit_code, CHECKSUM);
    check_invariants(&p);
    let instructions = |name: &str| {
        let cost = p.function_named(name).unwrap().cost;
        (
            cost.self_instructions.unwrap(),
            cost.total_instructions.unwrap(),
        )
    };
    // inc and dbl: local.get, i32.const, i32.add (or mul); 3 calls each.
    assert_eq!(instructions("inc"), (9, 9));
    assert_eq!(instructions("dbl"), (9, 9));
    // fib: 4 to test n, then 1 at a leaf or 9 more to recurse; fib(10) has F(11) = 89 leaves
    // and 88 inner calls.
    assert_eq!(instructions("fib"), (89 * 5 + 88 * 13, 89 * 5 + 88 * 13));
    // count_down(5): 5 activations of 3 + 4 (ending in return_call), then 3 + 1.
    assert_eq!(instructions("count_down").0, 5 * 7 + 4);
    // The same on every run.
    let (again, _) = profile_module_with(&wasm, &with_metric(Metric::Instructions));
    let costs = |p: &cargo_wasmprof::profile::Profile| {
        p.functions.iter().map(|f| f.cost).collect::<Vec<_>>()
    };
    assert_eq!(costs(&p), costs(&again));
}

#[test]
fn a_state_module_gives_the_same_profile_as_an_own_memory() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    for metric in [Metric::Calls, Metric::ExactTime, Metric::Instructions] {
        let (own, _) = profile_module_with(&wasm, &with_metric(metric));
        let options = Options {
            state: StateLocation::StateModule,
            ..with_metric(metric)
        };
        let done = cargo_wasmprof::instrument::instrument(&wasm, &options).unwrap();
        let memories = wasmparser::Parser::new(0)
            .parse_all(&done.wasm)
            .filter_map(|p| match p.unwrap() {
                wasmparser::Payload::MemorySection(r) => Some(r.count()),
                _ => None,
            })
            .sum::<u32>();
        assert_eq!(memories, 1, "{metric:?}: only the program's memory");
        let (split, outcome) = profile_module_with(&wasm, &options);
        assert_eq!(outcome.exit_code, CHECKSUM, "{metric:?}");
        if metric.has_cost() {
            check_invariants(&split);
        }
        let counts = |p: &cargo_wasmprof::profile::Profile| {
            let mut arcs: Vec<_> = p
                .arcs
                .iter()
                .map(|a| (a.caller.clone(), a.callee.clone(), a.count))
                .collect();
            arcs.sort();
            let functions: Vec<_> = p
                .functions
                .iter()
                .map(|f| (f.name.clone(), f.calls))
                .collect();
            (functions, arcs, p.contexts.len())
        };
        assert_eq!(counts(&own), counts(&split), "{metric:?}");
        if metric == Metric::Instructions {
            let costs = |p: &cargo_wasmprof::profile::Profile| {
                p.functions.iter().map(|f| f.cost).collect::<Vec<_>>()
            };
            assert_eq!(
                costs(&own),
                costs(&split),
                "{metric:?}: the same instructions"
            );
        }
    }
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
    assert_eq!(
        stack.len() as u64,
        depth + 1,
        "every activation is still open"
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

/// More (site, callee) pairs than the dynamic-arc table holds: the arcs that do not fit are
/// counted and the report says so; the functions' call counts stay exact.
#[test]
fn a_full_arc_table_is_reported() {
    let n = 5000;
    let mut text = String::from("(module (type $t (func)) (table 5000 funcref)\n");
    for i in 0..n {
        text.push_str(&format!("(func $f{i})\n"));
    }
    text.push_str("(elem (i32.const 0)");
    for i in 0..n {
        text.push_str(&format!(" $f{i}"));
    }
    text.push_str(")\n");
    text.push_str(&format!(
        r#"(func (export "_start") (local $i i32)
             (loop $next
               (call_indirect (type $t) (local.get $i))
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br_if $next (i32.lt_u (local.get $i) (i32.const {n})))))
        )"#
    ));
    let (p, _) = profile_module(&wat::parse_str(&text).unwrap());
    assert!(p.arcs_dropped > 0, "the table filled up");
    let recorded: u64 = p.arcs.iter().map(|a| a.count).sum::<u64>() - 1; // <host> -> _start
    assert_eq!(
        recorded + p.arcs_dropped,
        n as u64,
        "every call is an arc or a dropped one"
    );
    assert_eq!(calls(&p, "f4999"), 1, "counts stay exact");
    let text = cargo_wasmprof::format::Format::Text
        .render(&p, &Default::default())
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("could not be recorded as arcs"),
        "the report says so"
    );
}

/// `br_table` whose targets include the function body itself (a return), multi-value
/// returns through it, and a function that never returns (it loops until it traps): the
/// exit probe runs for every way out, and the trap leaves the loop open.
#[test]
fn br_table_to_the_body_multi_value_and_a_function_that_never_returns() {
    let wasm = wat::parse_str(
        r#"(module
  (func $pick (param i32) (result i32 i32)
    (block $zero
      (block $one
        (br_table $zero $one 1 (local.get 0)))   ;; 2 and above: out of the body
      (return (i32.const 1) (i32.const 1)))
    (i32.const 0) (i32.const 0))
  (func $forever (local i32)
    (loop $again
      (local.set 0 (i32.add (local.get 0) (i32.const 1)))
      (if (i32.eq (local.get 0) (i32.const 1000)) (then unreachable))
      (br $again)))
  (func (export "_start")
    (drop (drop (call $pick (i32.const 0))))
    (drop (drop (call $pick (i32.const 1))))
    (drop (drop (call $pick (i32.const 2))))
    (call $forever)))"#,
    )
    .unwrap();
    for metric in [Metric::ExactTime, Metric::Instructions] {
        let (p, outcome) = profile_module_with(&wasm, &with_metric(metric));
        assert!(outcome.trap.is_some());
        check_invariants(&p);
        assert_eq!(calls(&p, "pick"), 3);
        assert_eq!(p.runs[0].open_stack, ["_start", "forever"]);
        // Had an exit of pick skipped its probe, `forever` would hang below pick.
        assert_eq!(context_callers(&p, "forever"), ["_start"]);
        let pick = p.function_named("pick").unwrap();
        let (own, total) = pick.cost.get(metric);
        assert!(
            own > 0 && own == total,
            "{metric:?}: pick's three activations all ended"
        );
    }
}

/// A tree of calls with more paths than the profiler's memory has room for at the start:
/// it grows with the context tree, and nothing is folded. `f(n)` calls `a(n)` and `b(n)`,
/// each of which calls `f(n - 1)`: f runs 2^(n+1) - 1 times, each time on a path of its
/// own, so the tree holds 2^(n+2) - 2 contexts under the root (`_start` among them).
#[test]
fn the_context_tree_grows_its_memory_instead_of_folding() {
    const N: u32 = 14;
    let wasm = wat::parse_str(format!(
        r#"(module
  (func $f (param i32)
    (if (local.get 0)
      (then (call $a (local.get 0)) (call $b (local.get 0)))))
  (func $a (param i32) (call $f (i32.sub (local.get 0) (i32.const 1))))
  (func $b (param i32) (call $f (i32.sub (local.get 0) (i32.const 1))))
  (func (export "_start") (call $f (i32.const {N}))))"#
    ))
    .unwrap();
    let paths = (1u64 << (N + 2)) - 2;
    assert!(paths > u64::from(cargo_wasmprof::layout::INITIAL_CONTEXTS));
    for metric in [Metric::Time, Metric::ExactTime, Metric::Instructions] {
        for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
            let options = Options {
                state,
                ..with_metric(metric)
            };
            let (p, outcome) = profile_module_with(&wasm, &options);
            assert_eq!(outcome.exit_code, 0);
            assert_eq!(p.folded_entries, 0, "{metric:?}, {state:?}");
            assert_eq!(calls(&p, "f"), (1 << (N + 1)) - 1);
            assert_eq!(p.contexts.len() as u64, 1 + paths, "{metric:?}, {state:?}");
            check_invariants(&p);
        }
    }
    // A cap below that folds, and says so.
    let options = Options {
        max_contexts: 1000,
        ..with_metric(Metric::Time)
    };
    let (p, _) = profile_module_with(&wasm, &options);
    assert!(p.folded_entries > 0);
    assert_eq!(calls(&p, "f"), (1 << (N + 1)) - 1);
}

/// A wasi-threads program: `_start` spawns a thread and waits forever; the thread calls
/// `$f` three times and traps.
const THREADED: &str = r#"
(module
  (import "wasi" "thread-spawn" (func $spawn (param i32) (result i32)))
  (import "env" "memory" (memory 1 1 shared))
  (func $f (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func (export "wasi_thread_start") (param $tid i32) (param $arg i32)
    (drop (call $f (call $f (call $f (local.get $arg)))))
    unreachable)
  (func (export "_start")
    (drop (call $spawn (i32.const 7)))
    ;; address 0 stays 0: this waits until the host ends the program
    (drop (memory.atomic.wait32 (i32.const 0) (i32.const 0) (i64.const -1)))))
"#;

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
