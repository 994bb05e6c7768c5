//! Known-answer profiles of small hand-written modules: every count follows from the code.

#[path = "../common/mod.rs"]
mod common;

mod allocs;
mod ends;
mod entry;
mod inlining;
mod metrics;
mod tables;

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

/// `metric`'s probes with the calling-context tree, which these known answers check (the
/// sampled time metric keeps it only when asked, `--contexts`).
fn with_metric(metric: Metric) -> Options {
    Options {
        metric,
        contexts: true,
        ..Options::default()
    }
}

/// The start of a function body that makes the function large enough for the call of
/// `enter` instead of the inline entry probe: a local bumped `INLINE_ENTRY_BELOW / 4` times
/// (four instructions each).
fn large_padding() -> String {
    let bump = "(local.set $pad (i32.add (local.get $pad) (i32.const 1)))\n";
    let bumps = cargo_wasmprof::instrument::INLINE_ENTRY_BELOW.div_ceil(4) as usize;
    format!("(local $pad i32)\n{}", bump.repeat(bumps))
}
