//! Each metric on the hand-written program: the calls metric without a clock, exact
//! instruction counts, and the state module giving the profile an own memory gives.

use super::*;
use cargo_wasmprof::meta::StateLocation;

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

/// The default's probes, which count calls per function and per arc alone (the stack
/// sampler gives the times): the same exact counts, the entry probe only in the functions
/// entered otherwise than by a direct call (the table's, the export), and no tree.
#[test]
fn the_sampled_time_metric_counts_calls_and_arcs_without_a_tree() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        let options = Options {
            state,
            ..Options::default()
        };
        let (p, outcome) = profile_module_with(&wasm, &options);
        assert_eq!(outcome.exit_code, CHECKSUM, "{state:?}");
        assert_eq!(p.metric, Metric::Time);
        assert_eq!(calls(&p, "fib"), fib_calls(10), "{state:?}");
        assert_eq!(arc(&p, "fib", "fib"), fib_calls(10) - 1, "{state:?}");
        assert_eq!(arc(&p, "main", "fib"), 1, "{state:?}");
        assert_eq!(arc(&p, "apply", "inc"), 3, "{state:?}");
        assert_eq!(arc(&p, "apply", "dbl"), 3, "{state:?}");
        assert_eq!(calls(&p, "early"), 3, "{state:?}");
        assert_eq!(calls(&p, "count_down"), 6, "{state:?}");
        assert_eq!(arc(&p, "count_down", "count_down"), 5, "{state:?}");
        assert_eq!(arc(&p, "main", "wasi_snapshot_preview1.sched_yield"), 1);
        assert_eq!(arc(&p, HOST, "_start"), 1, "{state:?}");
        assert_eq!(
            p.runs[0].open_stack,
            ["_start", "wasi_snapshot_preview1.proc_exit"]
        );
        // The contexts are those the samples found: no count of calls.
        assert!(p.sampled_contexts, "{state:?}");
        assert!(p.contexts.iter().all(|c| c.calls == 0), "{state:?}");
    }
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
