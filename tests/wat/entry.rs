//! The entry probe as a call: a function of `INLINE_ENTRY_BELOW` instructions or more calls
//! the profiler's `enter` instead of carrying the probe inline, with the same answers; a
//! small leaf's inline probe, which calls nothing, on each of its paths; and every entry a
//! call, as a doc test is instrumented.

use super::*;
use cargo_wasmprof::instrument::{EntryProbes, INLINE_ENTRY_BELOW};
use cargo_wasmprof::profile::Profile;
use cargo_wasmprof::symbols::SymbolTable;
use wasmparser::Operator;

/// fib twice: as it is, small enough for the inline entry, and with [`large_padding`]
/// first, large enough for the call.
fn program() -> String {
    let pad = large_padding();
    format!(
        r#"
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func $big_fib (param $n i32) (result i32)
    {pad}
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $big_fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $big_fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func $main (result i32)
    (i32.add (call $fib (i32.const 10)) (call $big_fib (i32.const 11))))
  ;; fib(10) + fib(11) - 100 = 55 + 89 - 100
  (func (export "_start") (call $exit (i32.sub (call $main) (i32.const 100)))))
"#
    )
}

#[test]
fn a_large_functions_entry_probe_is_a_call_with_the_same_answers() {
    let wasm = wat::parse_str(program()).unwrap();
    let pad = INLINE_ENTRY_BELOW.div_ceil(4);
    for metric in [Metric::Time, Metric::ExactTime, Metric::Instructions] {
        let done = cargo_wasmprof::instrument::instrument(&wasm, &with_metric(metric)).unwrap();
        assert_eq!(
            callers_of(&done.wasm, "__wasmprof_enter"),
            ["big_fib"],
            "{metric:?}: only the large function calls the entry probe"
        );
        let p = fib_answers(&wasm, &with_metric(metric), &format!("{metric:?}"));
        if metric == Metric::Instructions {
            // fib: 4 to test n, then 1 at a leaf or 9 more to recurse, and big_fib its
            // bumps before; fib(11) has F(12) = 144 leaves and 143 inner calls.
            let cost = p.function_named("big_fib").unwrap().cost;
            let bumps = 4 * pad;
            let want = 144 * (5 + bumps) + 143 * (13 + bumps);
            assert_eq!(cost.self_instructions, Some(want));
            assert_eq!(cost.total_instructions, Some(want));
        }
    }
}

/// Two leaves (`inc`, `dec`) entered on every path of their inline entry probe: taken in
/// turn from two sites of one caller (the first child, then the site's slot), through a
/// table (an indirect site), and at each depth of a recursion, twice (new nodes through
/// the stub, then nodes found again).
const LEAVES: &str = r#"
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (type $leaf (func (param i32) (result i32)))
  (table 1 funcref)
  (elem (i32.const 0) $inc)
  (func $inc (param i32) (result i32) (i32.add (local.get 0) (i32.const 1)))
  (func $dec (param i32) (result i32) (i32.sub (local.get 0) (i32.const 1)))
  ;; n rounds of inc, dec, inc: n
  (func $turns (param $n i32) (result i32) (local $x i32)
    (loop $round
      (local.set $x (call $inc (call $dec (call $inc (local.get $x)))))
      (br_if $round (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $x))
  ;; n calls of inc through the table: n
  (func $indirect (param $n i32) (result i32) (local $x i32)
    (loop $round
      (local.set $x (call_indirect (type $leaf) (local.get $x) (i32.const 0)))
      (br_if $round (local.tee $n (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $x))
  ;; rec(n) = inc(rec(n - 1)), rec(0) = inc(0): n + 1
  (func $rec (param $n i32) (result i32)
    (if (result i32) (local.get $n)
      (then (call $inc (call $rec (i32.sub (local.get $n) (i32.const 1)))))
      (else (call $inc (i32.const 0)))))
  ;; 5 + 7 + 5 + 5
  (func $main (result i32)
    (i32.add (i32.add (call $turns (i32.const 5)) (call $indirect (i32.const 7)))
             (i32.add (call $rec (i32.const 4)) (call $rec (i32.const 4)))))
  (func (export "_start") (call $exit (i32.sub (call $main) (i32.const 22)))))
"#;

#[test]
fn a_leafs_inline_entry_calls_nothing_and_counts_on_every_path() {
    let wasm = wat::parse_str(LEAVES).unwrap();
    let stacks = Options {
        sampler: cargo_wasmprof::meta::Sampler::Stacks,
        ..with_metric(Metric::Time)
    };
    let cases = [
        ("time", with_metric(Metric::Time), true),
        ("time, stacks", stacks, true),
        ("instructions", with_metric(Metric::Instructions), true),
        // Its probes read the host's clock, calls either way: no stub.
        ("exact-time", with_metric(Metric::ExactTime), false),
    ];
    for (name, options, stub) in cases {
        let done = cargo_wasmprof::instrument::instrument(&wasm, &options).unwrap();
        for leaf in ["inc", "dec"] {
            let probes_called = callees_of(&done.wasm, leaf)
                .into_iter()
                .filter(|callee| callee.starts_with("__wasmprof"))
                .count();
            assert_eq!(probes_called == 0, stub, "{name}: {leaf}");
        }
        let stubs = callers_of(&done.wasm, "__wasmprof_enter_from_stub")
            .iter()
            .filter(|caller| caller.starts_with("__wasmprof_reenter"))
            .count();
        assert_eq!(stubs, if stub { 2 } else { 0 }, "{name}: a stub per leaf");
        leaves_answers(&wasm, &options, name);
    }
}

#[test]
fn with_every_entry_a_call_every_function_calls_enter_with_the_same_answers() {
    let fib = wat::parse_str(program()).unwrap();
    let leaves = wat::parse_str(LEAVES).unwrap();
    for metric in [Metric::Time, Metric::ExactTime, Metric::Instructions] {
        let options = Options {
            entries: EntryProbes::Calls,
            ..with_metric(metric)
        };
        let done = cargo_wasmprof::instrument::instrument(&fib, &options).unwrap();
        let callers = callers_of(&done.wasm, "__wasmprof_enter");
        for small in ["fib", "main"] {
            assert!(callers.iter().any(|c| c == small), "{metric:?}: {small}");
        }
        fib_answers(&fib, &options, &format!("{metric:?}"));
        let done = cargo_wasmprof::instrument::instrument(&leaves, &options).unwrap();
        for leaf in ["inc", "dec"] {
            let callees = callees_of(&done.wasm, leaf);
            assert!(
                callees.iter().any(|c| c == "__wasmprof_enter"),
                "{metric:?}: {leaf}"
            );
        }
        let stubs = callers_of(&done.wasm, "__wasmprof_enter_from_stub");
        assert!(stubs.is_empty(), "{metric:?}: no leaf's stub: {stubs:?}");
        leaves_answers(&leaves, &options, &format!("{metric:?}"));
    }
}

/// [`program`] profiled with `options`: its exit code, and the calls, arcs and contexts of
/// its two fibs, fib(10) and fib(11).
fn fib_answers(wasm: &[u8], options: &Options, label: &str) -> Profile {
    let (p, outcome) = profile_module_with(wasm, options);
    assert_eq!(outcome.exit_code, 55 + 89 - 100, "{label}");
    check_invariants(&p);
    for (name, n) in [("fib", 10), ("big_fib", 11)] {
        assert_eq!(calls(&p, name), fib_calls(n), "{label} {name}");
        assert_eq!(arc(&p, name, name), fib_calls(n) - 1, "{label} {name}");
        assert_eq!(arc(&p, "main", name), 1, "{label} {name}");
        // One context per depth of the recursion: fib(n) is n deep.
        let id = p.function_named(name).unwrap().id;
        let contexts = p.contexts.iter().filter(|c| c.function == Some(id));
        assert_eq!(contexts.count(), n as usize, "{label} {name}");
    }
    p
}

/// [`LEAVES`] profiled with `options`: its exit code, and the leaves' calls, arcs and nodes.
fn leaves_answers(wasm: &[u8], options: &Options, label: &str) {
    let (p, outcome) = profile_module_with(wasm, options);
    assert_eq!(outcome.exit_code, 0, "{label}");
    check_invariants(&p);
    assert_eq!(calls(&p, "inc"), 2 * 5 + 7 + 2 * 5, "{label}");
    assert_eq!(calls(&p, "dec"), 5, "{label}");
    assert_eq!(arc(&p, "turns", "inc"), 10, "{label}");
    assert_eq!(arc(&p, "turns", "dec"), 5, "{label}");
    assert_eq!(arc(&p, "indirect", "inc"), 7, "{label}");
    assert_eq!(arc(&p, "rec", "inc"), 10, "{label}");
    assert_eq!(arc(&p, "rec", "rec"), 8, "{label}");
    // inc's nodes: one under turns, one under indirect, one per depth of rec (5).
    let id = p.function_named("inc").unwrap().id;
    let nodes = p.contexts.iter().filter(|c| c.function == Some(id));
    assert_eq!(nodes.count(), 7, "{label}");
}

/// The names of the functions that function `caller` of `wasm` calls (not tail-calls), in
/// the order of its code.
fn callees_of(wasm: &[u8], caller: &str) -> Vec<String> {
    let symbols = SymbolTable::load(wasm, false).unwrap();
    let names = symbols.functions();
    let index = names.iter().position(|s| s.name == caller).expect("named") as u32;
    let (_, ops) = common::operators(wasm)
        .into_iter()
        .find(|(f, _)| *f == index)
        .expect("defined");
    ops.iter()
        .filter_map(|(_, op)| match op {
            Operator::Call { function_index } => Some(names[*function_index as usize].name.clone()),
            _ => None,
        })
        .collect()
}

/// The names of the functions of `wasm` that call the function named `callee`.
fn callers_of(wasm: &[u8], callee: &str) -> Vec<String> {
    let symbols = SymbolTable::load(wasm, false).unwrap();
    let names = symbols.functions();
    let target = names.iter().position(|s| s.name == callee).expect("named") as u32;
    let calls = |op: &Operator| matches!(op, Operator::Call { function_index } if *function_index == target);
    let operators = common::operators(wasm).into_iter();
    let callers = operators.filter(|(_, ops)| ops.iter().any(|(_, op)| calls(op)));
    callers
        .map(|(f, _)| names[f as usize].name.clone())
        .collect()
}
