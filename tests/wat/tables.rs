//! The profiler's tables: when they fill, the context tree folds but keeps exact counts, or
//! grows its memory, and a full arc table is reported; the tree's lookup finds a child
//! wherever it is remembered.

use super::*;

#[test]
fn a_full_context_tree_folds_but_keeps_exact_counts() {
    let wasm = wat::parse_str(PROGRAM).unwrap();
    let (p, _) = profile_module_with(
        &wasm,
        &Options {
            max_contexts: 4,
            ..with_metric(Metric::Time)
        },
    );
    check_invariants(&p);
    assert!(p.folded_entries > 0);
    assert_eq!(calls(&p, "fib"), fib_calls(10));
    assert_eq!(arc(&p, "fib", "fib"), fib_calls(10) - 1);
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

/// `walk` calls `a`, `b` and `c` in turn, `n` times: each call finds another callee first
/// among walk's children, so the lookup goes to the call site's slot (or the list). `b`
/// calls `a` too, so `a`'s call of `leaf` runs under two parents in turn, and its slot keeps
/// changing. Every path's count follows from the code, in each placement of the state and
/// with a tree too small for them all (the slots never keep a fold node, whose entries are
/// all counted); with functions small enough for the inline entry probe, and large enough
/// for the call of `enter`, which looks in the site's slot first.
#[test]
fn callees_that_take_turns_keep_exact_contexts() {
    for (size, pad) in sizes() {
        callees_take_turns(size, &pad);
    }
}

fn callees_take_turns(size: &str, pad: &str) {
    const N: u64 = 7;
    let wat = format!(
        r#"(module
          (func $leaf {pad})
          (func $a {pad} (call $leaf))
          (func $b {pad} (call $a))
          (func $c {pad} (call $leaf))
          (func $walk (local $i i32)
            (loop $next
              (call $a) (call $b) (call $c)
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $next (i32.lt_u (local.get $i) (i32.const {N})))))
          (func (export "_start") (call $walk)))"#
    );
    let wasm = wat::parse_str(wat).unwrap();
    let paths: [(&[&str], u64); 7] = [
        (&["walk", "a"], N),
        (&["walk", "a", "leaf"], N),
        (&["walk", "b"], N),
        (&["walk", "b", "a"], N),
        (&["walk", "b", "a", "leaf"], N),
        (&["walk", "c"], N),
        (&["walk", "c", "leaf"], N),
    ];
    for (case, p) in tree_profiles(&wasm) {
        for (path, n) in paths {
            assert_eq!(path_calls(&p, path), n, "{path:?} ({case}, {size})");
        }
        assert_eq!(calls(&p, "leaf"), 3 * N);
        assert_eq!(arc(&p, "a", "leaf"), 2 * N);
    }
    // Room for `_start`, `walk` and two more: the rest fold, each entry counted.
    let (p, _) = profile_module_with(
        &wasm,
        &Options {
            max_contexts: 4,
            ..with_metric(Metric::Instructions)
        },
    );
    check_invariants(&p);
    let contexts = 2 + paths.len() as u64;
    assert_eq!(
        p.folded_entries,
        paths[2..].iter().map(|(_, n)| n).sum::<u64>(),
        "{contexts} paths, room for 4 ({size})"
    );
    assert_eq!(calls(&p, "leaf"), 3 * N);
}

/// `rec(n)` calls `leaf`, then `rec(n - 1)` (while n > 0), then `leaf` again, and `main`
/// calls `rec(D)` `M` times. The second call of `leaf` at each depth finds `rec` first among
/// its parent's children, and its site's slot holding the depth below, which returned just
/// before: the child is the one the first call added, found in the child cache (or the
/// list). Every path's count follows from the code, with small and with large functions.
#[test]
fn a_recursive_sites_callee_is_found_at_each_depth() {
    for (size, pad) in sizes() {
        recursive_site(size, &pad);
    }
}

fn recursive_site(size: &str, pad: &str) {
    const D: usize = 5;
    const M: u64 = 3;
    let wat = format!(
        r#"(module
          (func $leaf {pad})
          (func $rec (param $n i32) {pad}
            (call $leaf)
            (if (local.get $n)
              (then (call $rec (i32.sub (local.get $n) (i32.const 1)))))
            (call $leaf))
          (func $main (local $i i32)
            (loop $again
              (call $rec (i32.const {D}))
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br_if $again (i32.lt_u (local.get $i) (i32.const {M})))))
          (func (export "_start") (call $main)))"#
    );
    let wasm = wat::parse_str(wat).unwrap();
    let levels = D as u64 + 1;
    for (case, p) in tree_profiles(&wasm) {
        for depth in 1..=D + 1 {
            let mut path = vec!["main"];
            path.extend(std::iter::repeat_n("rec", depth));
            assert_eq!(path_calls(&p, &path), M, "{path:?} ({case}, {size})");
            path.push("leaf");
            assert_eq!(path_calls(&p, &path), 2 * M, "{path:?} ({case}, {size})");
        }
        assert_eq!(calls(&p, "leaf"), 2 * M * levels, "{case}, {size}");
        assert_eq!(arc(&p, "rec", "leaf"), 2 * M * levels, "{case}, {size}");
        assert_eq!(arc(&p, "rec", "rec"), M * D as u64, "{case}, {size}");
    }
}

/// `wasm`'s profiles in each placement of the state, under each metric with a context tree,
/// their invariants checked and nothing folded; each with its case's name.
fn tree_profiles(wasm: &[u8]) -> Vec<(String, cargo_wasmprof::profile::Profile)> {
    let mut profiles = Vec::new();
    for state in [StateLocation::OwnMemory, StateLocation::StateModule] {
        for metric in [Metric::Instructions, Metric::Time] {
            let options = Options {
                state,
                ..with_metric(metric)
            };
            let (p, _) = profile_module_with(wasm, &options);
            check_invariants(&p);
            assert_eq!(p.folded_entries, 0, "{state:?}, {metric:?}");
            profiles.push((format!("{state:?}, {metric:?}"), p));
        }
    }
    profiles
}

/// The start of a function body small enough for the inline entry probe (none), and of one
/// large enough for the call of `enter`.
fn sizes() -> [(&'static str, String); 2] {
    [("small", String::new()), ("large", large_padding())]
}

/// The calls of the contexts whose path from the root ends with `path`'s functions.
fn path_calls(p: &cargo_wasmprof::profile::Profile, path: &[&str]) -> u64 {
    let name = |c: &cargo_wasmprof::profile::Context| {
        c.function.map(|f| p.functions[f as usize].name.as_str())
    };
    p.contexts
        .iter()
        .filter(|c| {
            let mut names = Vec::new();
            let mut at = Some(*c);
            while let Some(c) = at {
                names.extend(name(c));
                at = c.parent.map(|up| &p.contexts[up as usize]);
            }
            names.reverse();
            !c.folded && names.ends_with(path)
        })
        .map(|c| c.calls)
        .sum()
}
