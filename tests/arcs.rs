//! Exact arcs and costs under recursion, through imports and across a trap, in wasmtime.
//! The known answers follow from the WAT: the instructions metric counts each executed
//! instruction of the original module once (`if`, `call` and `i32.const` alike).

mod common;

use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::{self, Metric, StateLocation};
use cargo_wasmprof::profile::{Dump, Profile, RunInfo, HOST};
use common::{arc, calls, check_invariants, context_callers, profile_module_with, validate};
use wasmtime::{Caller, Engine, Linker, Module, Store};

fn instructions() -> Options {
    Options {
        metric: Metric::Instructions,
        ..Options::default()
    }
}

/// (self, total) instructions of the function `name`.
fn cost(p: &Profile, name: &str) -> (u64, u64) {
    p.function_named(name)
        .unwrap_or_else(|| panic!("no function {name}"))
        .cost
        .get(p.metric)
}

/// (self, total) instructions of the arc `caller -> callee`.
fn arc_cost(p: &Profile, caller: &str, callee: &str) -> (u64, u64) {
    p.arc(caller, callee)
        .unwrap_or_else(|| panic!("no arc {caller} -> {callee}"))
        .cost
        .get(p.metric)
}

/// `rec(n)` recurses down to 0: each activation runs `local.get, if` (2), and with n > 0
/// `local.get, i32.const, i32.sub, call` (4 more). `even`/`odd` recurse into each other:
/// `local.get, i32.eqz, if` (3), then `i32.const` (1) at 0, else `local.get, i32.const,
/// i32.sub, call` (4).
const RECURSION: &str = r#"
(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func $rec (param $n i32)
    (if (local.get $n)
      (then (call $rec (i32.sub (local.get $n) (i32.const 1))))))
  (func $even (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 1))
      (else (call $odd (i32.sub (local.get $n) (i32.const 1))))))
  (func $odd (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (call $even (i32.sub (local.get $n) (i32.const 1))))))
  (func (export "_start")
    (call $rec (i32.const 10))
    (drop (call $even (i32.const 6)))))
"#;

#[test]
fn recursive_arcs_cost_once_per_outermost_activation() {
    let wasm = wat::parse_str(RECURSION).unwrap();
    let (p, _) = profile_module_with(&wasm, &instructions());
    check_invariants(&p);
    // rec(10): ten activations of 6, one of 2.
    assert_eq!(calls(&p, "rec"), 11);
    assert_eq!(cost(&p, "rec"), (62, 62));
    // An arc's self is the callee's own cost in that arc's calls: rec(10)'s for _start's.
    assert_eq!(arc_cost(&p, "_start", "rec"), (6, 62));
    // rec -> rec: ten calls; the outermost of them (rec(9)) holds all the others.
    assert_eq!(arc(&p, "rec", "rec"), 10);
    assert_eq!(arc_cost(&p, "rec", "rec"), (9 * 6 + 2, 9 * 6 + 2));
    // even(6) -> odd(5) -> even(4) -> odd(3) -> even(2) -> odd(1) -> even(0): even runs
    // three inner activations (7) and a leaf (4); odd three inner ones.
    assert_eq!((calls(&p, "even"), calls(&p, "odd")), (4, 3));
    assert_eq!(cost(&p, "even"), (3 * 7 + 4, 46));
    assert_eq!(cost(&p, "odd"), (3 * 7, 46 - 7));
    // even -> odd: its outermost activation, odd(5), holds everything below even(6).
    assert_eq!(arc_cost(&p, "even", "odd"), (3 * 7, 46 - 7));
    // odd -> even: even(4) and below; self: even's less even(6)'s.
    assert_eq!(arc_cost(&p, "odd", "even"), (3 * 7 + 4 - 7, 46 - 2 * 7));
    assert_eq!(arc_cost(&p, "_start", "even"), (7, 46));
    // The time metric keeps the same rules.
    let (timed, _) = profile_module_with(&wasm, &Options::default());
    check_invariants(&timed);
}

/// `_start` calls the host's `call_back(i)` three times (each time the host calls table
/// slot 0, `$cb`, which runs `local.get, i32.const, i32.add, global.set` = 4), then
/// `rec(10)` (62), then the host's `fail`, which traps.
const HOST_CALLS: &str = r#"
(module
  (import "env" "call_back" (func $call_back (param i32)))
  (import "env" "fail" (func $fail))
  (memory (export "memory") 1)
  (global $sum (mut i32) (i32.const 0))
  (table (export "table") 1 funcref)
  (elem (i32.const 0) $cb)
  (func $cb (param $x i32)
    (global.set $sum (i32.add (local.get $x) (i32.const 1))))
  (func $rec (param $n i32)
    (if (local.get $n)
      (then (call $rec (i32.sub (local.get $n) (i32.const 1))))))
  (func (export "_start")
    (call $call_back (i32.const 0))
    (call $call_back (i32.const 0))
    (call $call_back (i32.const 0))
    (call $rec (i32.const 10))
    (call $fail)))
"#;

/// Runs an instrumented `wasm` in a host whose `env.call_back(i)` calls table slot `i`,
/// whose `env.invoke(i, x)` calls table slot `i` with `x` and returns normally even when
/// that traps (as Emscripten's `invoke_*` trampolines catch a longjmp), and whose
/// `env.fail` traps; returns the profile, decoded as the embedded host does.
fn run_with_callbacks(wasm: &[u8], options: &Options) -> Profile {
    let done = instrument::instrument(wasm, options).unwrap();
    validate(&done.wasm);
    // The sampled metric's profiler memory is a shared one.
    let mut config = wasmtime::Config::new();
    config.shared_memory(true);
    let engine = Engine::new(&config).unwrap();
    let module = Module::new(&engine, &done.wasm).unwrap();
    let mut store = Store::new(&engine, 0i64);
    let mut linker: Linker<i64> = Linker::new(&engine);
    linker
        .func_wrap(
            "env",
            "call_back",
            |mut caller: Caller<'_, i64>, slot: i32| -> wasmtime::Result<()> {
                let table = caller.get_export("table").unwrap().into_table().unwrap();
                let callee = table.get(&mut caller, slot as u64).unwrap();
                let callee = callee.unwrap_func().unwrap().typed::<i32, ()>(&caller)?;
                callee.call(&mut caller, slot)
            },
        )
        .unwrap();
    linker
        .func_wrap(
            "env",
            "invoke",
            |mut caller: Caller<'_, i64>, slot: i32, x: i32| -> wasmtime::Result<()> {
                let table = caller.get_export("table").unwrap().into_table().unwrap();
                let callee = table.get(&mut caller, slot as u64).unwrap();
                let callee = callee.unwrap_func().unwrap().typed::<i32, ()>(&caller)?;
                // What unwinds the callee's frames is caught here, like a longjmp; then, as
                // Emscripten's trampolines call `stackRestore`, the module's `restore`.
                if callee.call(&mut caller, x).is_err() {
                    if let Some(restore) = caller.get_export("restore") {
                        let restore = restore.into_func().unwrap().typed::<(), ()>(&caller)?;
                        restore.call(&mut caller, ())?;
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    linker
        .func_wrap("env", "fail", || -> wasmtime::Result<()> {
            Err(wasmtime::Error::msg("the host fails"))
        })
        .unwrap();
    // A clock for the time metric that ticks by one at each read.
    linker
        .func_wrap(
            meta::CLOCK_MODULE,
            meta::CLOCK_NAME,
            |mut caller: Caller<'_, i64>| -> i64 {
                *caller.data_mut() += 1;
                *caller.data()
            },
        )
        .unwrap();
    // The state module first, when the profiler's state is in one.
    let state = meta::custom_section(&done.wasm, meta::STATE_SECTION)
        .unwrap()
        .map(|bytes| {
            let state = linker
                .instantiate(&mut store, &Module::new(&engine, bytes).unwrap())
                .unwrap();
            linker
                .instance(&mut store, meta::STATE_MODULE, state)
                .unwrap();
            state
        });
    let instance = linker.instantiate(&mut store, &module).unwrap();
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .unwrap();
    let trap = start.call(&mut store, ()).err();
    let instance = state.unwrap_or(instance);
    let memory = cargo_wasmprof::host::profiler_memory(&mut store, &instance).unwrap();
    let cur = instance
        .get_global(&mut store, meta::CUR_EXPORT)
        .unwrap()
        .get(&mut store)
        .i32()
        .unwrap();
    let end = instance
        .get_global(&mut store, meta::INSTRUCTIONS_EXPORT)
        .and_then(|g| g.get(&mut store).i64())
        .unwrap_or(*store.data());
    let dump = Dump {
        memory,
        cur: cur as u32,
        ticks_per_ns: 1.0,
        clock: "test".into(),
        end: Some(end as u64),
        frames: Vec::new(),
        stacks: None,
        no_sampler: None,
    };
    let run = RunInfo {
        module: "host-calls.wasm".into(),
        exit_code: if trap.is_some() { 134 } else { 0 },
        trap: trap.map(|t| t.to_string()),
        open_stack: Vec::new(),
        wall_ns: 0,
        clock: String::new(),
        threads_lost: Vec::new(),
        state: None,
        component: false,
    };
    Profile::decode(&done.meta, &dump, run).unwrap()
}

#[test]
fn an_entry_from_the_host_during_an_import_is_the_imports_arc() {
    let wasm = wat::parse_str(HOST_CALLS).unwrap();
    // The sampled time metric counts calls per function and arc unless asked for the
    // contexts too.
    for ((metric, contexts), state) in [
        (Metric::Calls, false),
        (Metric::ExactTime, true),
        (Metric::Instructions, true),
        (Metric::Time, false),
        (Metric::Time, true),
    ]
    .into_iter()
    .flat_map(|m| {
        [
            (m, StateLocation::OwnMemory),
            (m, StateLocation::StateModule),
        ]
    }) {
        let options = Options {
            metric,
            contexts,
            state,
            ..Options::default()
        };
        let p = run_with_callbacks(&wasm, &options);
        assert_eq!(calls(&p, "cb"), 3, "{metric:?}");
        assert_eq!(arc(&p, "env.call_back", "cb"), 3, "{metric:?}");
        assert_eq!(arc(&p, HOST, "cb"), 0, "{metric:?}");
        assert_eq!(arc(&p, HOST, "_start"), 1, "{metric:?}");
        if contexts {
            assert_eq!(
                context_callers(&p, "cb"),
                ["env.call_back"],
                "{metric:?}: the callback's context is under the import"
            );
            check_invariants(&p);
        }
    }
    let p = run_with_callbacks(&wasm, &instructions());
    // The arc carries the callback's cost, and the import's total includes it: the
    // import's thunk runs `local.get, call` (2) a call.
    assert_eq!(cost(&p, "cb"), (3 * 4, 3 * 4));
    assert_eq!(arc_cost(&p, "env.call_back", "cb"), (3 * 4, 3 * 4));
    assert_eq!(cost(&p, "env.call_back"), (3 * 2, 3 * 2 + 3 * 4));
}

#[test]
fn activations_open_at_a_trap_cost_up_to_the_end_of_the_run() {
    let wasm = wat::parse_str(HOST_CALLS).unwrap();
    let p = run_with_callbacks(&wasm, &instructions());
    check_invariants(&p);
    assert!(!p.complete);
    assert_eq!(p.runs[0].open_stack, ["_start", "env.fail"]);
    // _start: `i32.const, call` three times, `i32.const, call`, `call` (9); its callees:
    // the three callbacks through the import, rec(10), and the failing import's thunk
    // (`call`, 1), open when the run ended.
    assert_eq!(cost(&p, "env.fail"), (1, 1));
    assert_eq!(cost(&p, "_start"), (9, 9 + (3 * 2 + 3 * 4) + 62 + 1));
    assert_eq!(arc_cost(&p, HOST, "_start"), cost(&p, "_start"));
}

/// `guarded` calls `dive(3)` through the host's `invoke` twice; `dive(0)` calls `nop` and
/// traps, which unwinds every frame of `dive` back to `invoke`, which calls `restore` and
/// returns normally: a longjmp. `dive(d > 0)` runs `local.get, i32.eqz, if` (3) and
/// `local.get, i32.const, i32.sub, call` (4); `dive(0)` the 3 and `call` (1), and then
/// traps at `unreachable` (which a frame that traps in its own code never reports: it
/// adds what it ran to the shared counter at calls and exits); `restore` `i32.const,
/// global.set` (2).
const LONGJMP: &str = r#"
(module
  (import "env" "invoke" (func $invoke (param i32 i32)))
  (memory (export "memory") 1)
  (table (export "table") 1 funcref)
  (elem (i32.const 0) $dive)
  (global $sp (mut i32) (i32.const 8))
  (func $nop)
  (func $restore (export "restore")
    (global.set $sp (i32.const 8)))
  (func $dive (param $d i32)
    (if (i32.eqz (local.get $d)) (then (call $nop) (unreachable)))
    (call $dive (i32.sub (local.get $d) (i32.const 1))))
  (func $guarded
    (call $invoke (i32.const 0) (i32.const 3)))
  (func (export "_start")
    (call $guarded)
    (call $guarded)))
"#;

#[test]
fn frames_a_longjmp_unwinds_are_closed_when_control_comes_back() {
    let wasm = wat::parse_str(LONGJMP).unwrap();
    let p = run_with_callbacks(&wasm, &instructions());
    check_invariants(&p);
    assert!(p.complete, "every activation was closed");
    assert_eq!(calls(&p, "dive"), 2 * 4);
    assert_eq!(arc(&p, "env.invoke", "dive"), 2);
    // The unwound frames keep their cost: three inner activations and the deepest, twice.
    assert_eq!(cost(&p, "dive"), (2 * (3 * 7 + 4), 2 * (3 * 7 + 4)));
    // What the trampoline calls after the unwinding is its callee.
    assert_eq!(arc(&p, "env.invoke", "restore"), 2);
    assert_eq!(cost(&p, "restore"), (2 * 2, 2 * 2));
    // The trampoline keeps only its thunk's `local.get, local.get, call` (3).
    assert_eq!(cost(&p, "env.invoke"), (2 * 3, 2 * 3 + 50 + 4));
    // guarded: `i32.const, i32.const, call` (3); _start: `call, call` (2).
    assert_eq!(cost(&p, "guarded"), (2 * 3, 2 * 3 + 60));
    assert_eq!(cost(&p, "_start"), (2, 2 + 66));
    // The state module's probes follow the same rules.
    let in_state_module = Options {
        state: StateLocation::StateModule,
        ..instructions()
    };
    assert_eq!(
        run_with_callbacks(&wasm, &in_state_module).functions,
        p.functions
    );
    for metric in [Metric::Calls, Metric::ExactTime, Metric::Time] {
        for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
            let options = Options {
                metric,
                state,
                ..Options::default()
            };
            let p = run_with_callbacks(&wasm, &options);
            assert_eq!(arc(&p, "env.invoke", "dive"), 2, "{metric:?}, {state:?}");
            if metric.has_cost() {
                check_invariants(&p);
                assert!(p.complete, "{metric:?}, {state:?}");
            }
        }
    }
}
