//! The entry probe as a call: a function of `INLINE_ENTRY_BELOW` instructions or more calls
//! the profiler's `enter` instead of carrying the probe inline, with the same answers.

use super::*;
use cargo_wasmprof::instrument::INLINE_ENTRY_BELOW;
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
        let (p, outcome) = profile_module_with(&wasm, &with_metric(metric));
        assert_eq!(outcome.exit_code, 55 + 89 - 100, "{metric:?}");
        check_invariants(&p);
        for (name, n) in [("fib", 10), ("big_fib", 11)] {
            assert_eq!(calls(&p, name), fib_calls(n), "{metric:?} {name}");
            assert_eq!(arc(&p, name, name), fib_calls(n) - 1, "{metric:?} {name}");
            assert_eq!(arc(&p, "main", name), 1, "{metric:?} {name}");
            // One context per depth of the recursion: fib(n) is n deep.
            let id = p.function_named(name).unwrap().id;
            let contexts = p.contexts.iter().filter(|c| c.function == Some(id));
            assert_eq!(contexts.count(), n as usize, "{metric:?} {name}");
        }
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
