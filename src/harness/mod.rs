//! What the test and bench harnesses left in a profile: the `#[test]` functions libtest
//! ran, and the cost per iteration of a benchmark (a harness's measuring loop, criterion's
//! and libtest's `Bencher::iter`, calls the measured routine N times, so the routine's cost
//! in those calls divided by N is what one iteration costs, probes' compensation included),
//! and the runtime's scaffolding around the program (the start-up, the harness, what only
//! they call), which the text report folds.

mod benchmarks;

use std::collections::HashMap;

use crate::meta::Metric;
pub use benchmarks::{benchmarks, Moment};

use crate::profile::{Arc, Function, Profile, RoutineFunction};

/// The routine one harness loop measured.
#[derive(Debug, Clone, Copy)]
pub struct Routine<'a> {
    /// The harness function that runs the loop.
    pub harness: &'a Function,
    /// The arc from the harness to the routine: its count is the number of iterations, its
    /// cost the routine's cost in them.
    pub arc: &'a Arc,
}

impl Routine<'_> {
    /// The bytes the routine allocated, with everything it calls, in its calls from the
    /// loop (its contexts under the loop's, inclusive), in `p`.
    pub fn alloc_bytes(&self, p: &Profile) -> u64 {
        Self::alloc_bytes_in(p, &self.under(p))
    }

    /// [`Routine::alloc_bytes`], where each context is as `under` says.
    fn alloc_bytes_in(p: &Profile, under: &[Under]) -> u64 {
        let inclusive = p.inclusive_allocs();
        (0..p.contexts.len())
            .filter(|&j| under[j] == Under::Root)
            .map(|j| inclusive[j].alloc_bytes)
            .sum()
    }

    /// Each function that ran in the routine's calls from the loop (the routine and all it
    /// calls), with its calls and self cost there, by name, in `p`.
    pub fn functions(&self, p: &Profile) -> HashMap<String, RoutineFunction> {
        Self::functions_in(p, &self.under(p))
    }

    /// [`Routine::functions`], where each context is as `under` says.
    fn functions_in(p: &Profile, under: &[Under]) -> HashMap<String, RoutineFunction> {
        let mut found: HashMap<String, RoutineFunction> = HashMap::new();
        for (c, _) in p
            .contexts
            .iter()
            .zip(under)
            .filter(|(_, u)| **u != Under::Not)
        {
            let Some(f) = c.function.and_then(|id| p.functions.get(id as usize)) else {
                continue;
            };
            let function = found
                .entry(f.name.clone())
                .or_insert_with(|| RoutineFunction {
                    name: f.name.clone(),
                    ..RoutineFunction::default()
                });
            function.calls += c.calls;
            function.self_cost += c.cost.get(p.metric).0;
        }
        found
    }

    /// Where each context of `p` is: a call of the routine from the loop, below one, or
    /// neither (contexts come parents first).
    fn under(&self, p: &Profile) -> Vec<Under> {
        let routine = p.function_named(&self.arc.callee).map(|f| f.id);
        let function_of = |j: u32| p.contexts[j as usize].function;
        let mut under = Vec::with_capacity(p.contexts.len());
        for c in &p.contexts {
            let place = match c.parent {
                Some(up) if under[up as usize] != Under::Not => Under::Below,
                Some(up)
                    if c.function.is_some()
                        && c.function == routine
                        && function_of(up) == Some(self.harness.id) =>
                {
                    Under::Root
                }
                _ => Under::Not,
            };
            under.push(place);
        }
        under
    }

    /// With the sampled time metric, the samples that found the routine, or a function it
    /// called, running in its calls from the loop, in `p`: what its inclusive time estimates
    /// from.
    pub fn total_samples(&self, p: &Profile) -> Option<u64> {
        Self::total_samples_in(p, &self.under(p))
    }

    /// [`Routine::total_samples`], where each context is as `under` says.
    fn total_samples_in(p: &Profile, under: &[Under]) -> Option<u64> {
        p.sampling.as_ref()?;
        let contexts = p.contexts.iter().zip(under);
        let under = contexts.filter(|(_, u)| **u != Under::Not);
        Some(under.map(|(c, _)| c.cost.self_samples.unwrap_or(0)).sum())
    }

    /// How many times the routine ran.
    pub fn iterations(&self) -> u64 {
        self.arc.count
    }

    /// The routine's inclusive cost per iteration in `metric` (nanoseconds or
    /// instructions); `None` for the calls metric.
    pub fn per_iteration(&self, metric: Metric) -> Option<f64> {
        if !metric.has_cost() || self.arc.count == 0 {
            return None;
        }
        Some(self.arc.cost.get(metric).1 as f64 / self.arc.count as f64)
    }
}

/// Where a context is, from a routine's point of view ([`Routine::under`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Under {
    /// A call of the routine from its loop.
    Root,
    /// A call below one.
    Below,
    /// Neither.
    Not,
}

/// Whether `name` is a benchmark harness's measuring loop: criterion's (and
/// wasm-bindgen-test's copy of it, for `#[wasm_bindgen_bench]`) `Bencher<M>::iter*` (`iter`, `iter_batched`, `iter_with_setup`, ...; not
/// `iter_custom`, where the routine loops itself), libtest's `Bencher::iter` and the
/// `ns_iter_inner` it loops in.
pub fn is_harness_loop(name: &str) -> bool {
    // The method of type `ty`: `ty::method...` or `ty<M>::method...`.
    let method_of = |ty: &str| -> Option<&str> {
        let rest = name.strip_prefix(ty)?;
        match rest.strip_prefix('<') {
            Some(generic) => Some(generic.split_once(">::")?.1),
            None => rest.strip_prefix("::"),
        }
    };
    let measuring = |ty: &str| {
        method_of(ty).is_some_and(|m| m.starts_with("iter") && !m.starts_with("iter_custom"))
    };
    measuring("criterion::bencher::Bencher")
        || measuring("criterion::bencher::AsyncBencher")
        || measuring("wasm_bindgen_test::__rt::criterion::bencher::Bencher")
        || measuring("test::bench::Bencher")
        || name.split('<').next() == Some("test::bench::ns_iter_inner")
}

/// The routine each harness loop in `p` measured: of the loop's callees but the harness's
/// own (its clock reads), the one that cost the most in its calls from the loop (with the
/// calls metric, the one called most). Sorted by cost per iteration, highest first.
pub fn measured_routines(p: &Profile) -> Vec<Routine<'_>> {
    let mut found: Vec<Routine> = harness_loops(p)
        .filter_map(|harness| {
            let arc = routine_arcs(p, harness).max_by_key(|a| (a.cost.get(p.metric).1, a.count))?;
            Some(Routine { harness, arc })
        })
        .collect();
    found.sort_by(|a, b| {
        let cost = |r: &Routine| r.per_iteration(p.metric).unwrap_or(0.0);
        cost(b)
            .total_cmp(&cost(a))
            .then(a.arc.callee.cmp(&b.arc.callee))
    });
    found
}

/// The harness loops of `p` that called no function of the program, nor another loop
/// (libtest's `Bencher::iter` calls `ns_iter_inner`): the routine was inlined into the
/// loop, so its iterations were not counted.
pub fn inlined_loops(p: &Profile) -> Vec<&Function> {
    let delegates = |harness: &Function| {
        p.arcs
            .iter()
            .any(|a| a.caller == harness.name && is_harness_loop(&a.callee))
    };
    harness_loops(p)
        .filter(|&h| routine_arcs(p, h).next().is_none() && !delegates(h))
        .collect()
}

/// The harness loops that ran in `p` (with a routine counted or not).
pub fn harness_loops(p: &Profile) -> impl Iterator<Item = &Function> {
    p.functions
        .iter()
        .filter(|f| f.calls > 0 && is_harness_loop(&f.name))
}

/// The arcs from `harness` to what may be its routine: not an import, nor the harness's own
/// function, nor the clock it reads around the routine (`std::time`'s, when the harness's
/// measurement was inlined into the loop).
fn routine_arcs<'a>(p: &'a Profile, harness: &'a Function) -> impl Iterator<Item = &'a Arc> {
    let clock = |name: &str| {
        let name = name.strip_prefix('<').unwrap_or(name);
        name.starts_with("std::time::") || name.starts_with("core::time::")
    };
    p.arcs.iter().filter(move |a| {
        a.caller == harness.name
            && p.function_named(&a.callee)
                .is_some_and(|c| !c.import && !is_harness(c) && !clock(&c.name))
    })
}

/// Whether a function is the program's runtime's scaffolding rather than the program's own
/// code (what the report folds into one line): an import (the host);
/// the toolchain's sources (the standard library, libtest, the C library and start-up);
/// a harness ([`is_harness`]); wasm-bindgen's glue between JS and the module
/// (`BINDGEN_RUNTIME`); or, without a source file, one of the names the toolchains give
/// their start-up and glue (rustc's `main` that calls `lang_start`).
pub fn is_scaffolding(f: &Function) -> bool {
    let library = f.file.as_deref().and_then(crate::source::library_of);
    if f.import
        || is_harness_of(f, library.as_deref())
        || library.is_some_and(|l| BINDGEN_RUNTIME.contains(&l.as_str()))
    {
        return true;
    }
    match f.file.as_deref() {
        Some(file) => crate::source::is_toolchain_file(file),
        None => {
            const PREFIXES: [&str; 15] = [
                "std::",
                "core::",
                "alloc::",
                "test::",
                "<std::",
                "<core::",
                "<alloc::",
                "__rustc::",
                "__rust_",
                "compiler_builtins::",
                "_start",
                "__main_",
                "__wasm_",
                "emscripten_",
                "_emscripten_",
            ];
            PREFIXES.iter().any(|p| f.name.starts_with(p))
                || ["main", "__original_main", "_initialize"].contains(&f.name.as_str())
        }
    }
}

/// Of `stack` (function names of `p`, outermost first), the index of the innermost frame
/// of the program's own code ([`is_scaffolding`]'s others): where a trap or a panic
/// happened, as the program's author reads it.
pub fn innermost_own(p: &Profile, stack: &[String]) -> Option<usize> {
    stack
        .iter()
        .rposition(|name| p.function_named(name).is_some_and(|f| !is_scaffolding(f)))
}

/// wasm-bindgen's libraries whose code is the glue a wasm-bindgen program runs on, as a
/// native one runs on std: what JS calls the module through (closures, exports' shims), the
/// futures executor that drives wasm-bindgen-test's harness, the conversions. What the
/// program calls of them stays in its stacks; the stacks only they run (the harness's own)
/// do not.
const BINDGEN_RUNTIME: [&str; 3] = ["wasm-bindgen", "js-sys", "wasm-bindgen-futures"];

/// Whether a function is a test or bench harness's (libtest's, criterion's): it calls the
/// program's tests and benchmarks, and what else it calls is its own work.
pub fn is_harness(f: &Function) -> bool {
    is_harness_of(
        f,
        f.file
            .as_deref()
            .and_then(crate::source::library_of)
            .as_deref(),
    )
}

/// [`is_harness`], for `f` of `library` (its file's).
fn is_harness_of(f: &Function, library: Option<&str>) -> bool {
    // libtest's crate is `test`, and so is a crate's `tests/test.rs` (serde_json's): the
    // name counts only where the file is not the program's.
    let libtest_name = f.name.starts_with("test::")
        && f.file
            .as_deref()
            .is_none_or(crate::source::is_toolchain_file);
    libtest_name
        || wasm_bindgen_test_of(&f.name).is_some()
        || matches!(
            library,
            Some("test" | "criterion" | "criterion-plot" | "wasm-bindgen-test")
        )
}

/// The test (or benchmark) function that a wasm-bindgen-test export runs: the
/// `#[wasm_bindgen_test]` macro exports `__wbgt_<modifiers>_<path>` (`__wbgb_` for a
/// `#[wasm_bindgen_bench]`), which the runner calls, and it calls the test at `<path>`.
fn wasm_bindgen_test_of(export: &str) -> Option<&str> {
    let rest = export
        .strip_prefix("__wbgt_")
        .or_else(|| export.strip_prefix("__wbgb_"))?;
    rest.split_once('_').map(|(_, path)| path)
}

/// The program's own functions, indexed by function id: all but the runtime's
/// ([`is_scaffolding`]), and but the `main` that libtest's harness generates in the crate (it
/// calls `test::test_main*`).
pub fn program_functions(p: &Profile) -> Vec<bool> {
    let mut program: Vec<bool> = p.functions.iter().map(|f| !is_scaffolding(f)).collect();
    for a in p
        .arcs
        .iter()
        .filter(|a| a.callee.starts_with("test::test_main"))
    {
        if let Some(caller) = p.function_named(&a.caller) {
            program[caller.id as usize] = false;
        }
    }
    program
}

/// What the program's own calls cost, for the text report to lead with: the stacks through
/// its functions ([`program_functions`]), re-rooted there, so the runtime's scaffolding
/// (the start-up, the harness, the standard library and WASI calls only they make) is left
/// out and a function the program and the harness both call keeps the program's calls
/// alone. Without a calling-context tree (the calls metric, a run no sample found), the
/// profile without the runtime's functions the program does not reach, and without their
/// calls of those it reaches (libtest's `memcmp`s are not the program's). `None` where there is
/// nothing to leave out or no program to keep: a grouped view, a module without names or
/// sources.
pub fn program_view(p: &Profile) -> Option<Profile> {
    if p.view
        .as_ref()
        .is_some_and(|v| v.by != crate::profile::Grouping::Function)
    {
        return None;
    }
    let program = program_functions(p);
    if !program.contains(&true) || !program.contains(&false) {
        return None;
    }
    let unreached = unreached(p, &program);
    if p.contexts.len() > 1 {
        let reached: Vec<bool> = unreached.iter().map(|u| !u).collect();
        return Some(p.focused_on(&program, &reached));
    }
    let mut view = p.clone();
    // An arc from or to a function left out is the runtime's: its calls leave with it.
    let by_name = p.index_by_name();
    let left_out = |name: &str| by_name.get(name).is_some_and(|&i| unreached[i]);
    for a in p
        .arcs
        .iter()
        .filter(|a| left_out(&a.caller) && !left_out(&a.callee))
    {
        if let Some(&callee) = by_name.get(a.callee.as_str()) {
            let f = &mut view.functions[callee];
            f.calls = f.calls.saturating_sub(a.count);
        }
    }
    view.arcs
        .retain(|a| !left_out(&a.caller) && !left_out(&a.callee));
    view.functions.retain(|f| !unreached[f.id as usize]);
    for (id, f) in view.functions.iter_mut().enumerate() {
        f.id = id as u32;
    }
    Some(view)
}

/// The runtime's functions that no function of the `program` reaches, directly or through
/// other runtime functions (but not through a harness's: what criterion does when the
/// program calls it is criterion's), indexed by function id.
fn unreached(p: &Profile, program: &[bool]) -> Vec<bool> {
    let by_name = p.index_by_name();
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); p.functions.len()];
    for a in &p.arcs {
        if let (Some(&caller), Some(&callee)) = (
            by_name.get(a.caller.as_str()),
            by_name.get(a.callee.as_str()),
        ) {
            callees[caller].push(callee);
        }
    }
    let mut reached = program.to_vec();
    let mut todo: Vec<usize> = (0..reached.len()).filter(|&i| reached[i]).collect();
    while let Some(f) = todo.pop() {
        if is_harness(&p.functions[f]) {
            continue;
        }
        for &callee in &callees[f] {
            if !reached[callee] {
                reached[callee] = true;
                todo.push(callee);
            }
        }
    }
    reached.into_iter().map(|r| !r).collect()
}

/// The `#[test]` functions: libtest calls each one from a closure of the same path
/// (`tests::foo::{closure#0}` calls `tests::foo`); wasm-bindgen-test's, named by the
/// exports that run them.
pub fn test_functions(p: &Profile) -> Vec<&Function> {
    let by_name = p.index_by_name();
    let named = |name: &str| by_name.get(name).map(|&i| &p.functions[i]);
    let mut found: Vec<&Function> = p
        .arcs
        .iter()
        .filter(|a| {
            a.caller
                .strip_prefix(a.callee.as_str())
                .is_some_and(|rest| {
                    rest.starts_with("::{{closure}}") || rest.starts_with("::{closure#")
                })
        })
        .filter_map(|a| named(&a.callee))
        .chain(
            p.functions
                .iter()
                .filter_map(|f| wasm_bindgen_test_of(&f.name))
                .filter_map(named),
        )
        .collect();
    let metric = p.metric;
    found.sort_by(|a, b| {
        let (ta, tb) = (a.cost.get(metric).1, b.cost.get(metric).1);
        tb.cmp(&ta).then(a.name.cmp(&b.name))
    });
    found.dedup_by(|a, b| a.name == b.name);
    found
}

/// The doc test whose module a profile is of, as rustdoc names its `main`:
/// `_doctest_main_<path>_<line>_<n>`, the path's every character but letters and digits
/// made `_` (`src_lib_rs` for src/lib.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocTest {
    /// The source path as rustdoc mangled it.
    pub mangled_path: String,
    /// The line of the doc test's code block.
    pub line: u32,
}

impl DocTest {
    /// The doc test a profile is of, if it is one rustdoc built on its own (edition 2024's
    /// merged doc tests run many in one module and are not told apart).
    pub fn of(p: &Profile) -> Option<DocTest> {
        p.functions.iter().find_map(|f| DocTest::from_name(&f.name))
    }

    /// Whether a profile is of edition 2024's merged doc tests: one module that runs every
    /// doc test of a crate that can be merged, under a harness of its own
    /// (`doctest_runner_2024::main`).
    pub fn merged(p: &Profile) -> bool {
        p.functions
            .iter()
            .any(|f| f.name.starts_with("doctest_runner_") && f.name.ends_with("::main"))
    }

    fn from_name(name: &str) -> Option<DocTest> {
        let (_, rest) = name.rsplit_once("::_doctest_main_")?;
        let (rest, _n) = rest.rsplit_once('_')?;
        let (path, line) = rest.rsplit_once('_')?;
        Some(DocTest {
            mangled_path: path.to_string(),
            line: line.parse().ok()?,
        })
    }

    /// Whether `path` (relative to its package) is the doc test's source file.
    pub fn is_in(&self, path: &str) -> bool {
        let mangled: String = path
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        mangled == self.mangled_path
    }
}

#[cfg(test)]
mod tests {
    use super::{is_harness_loop, wasm_bindgen_test_of, DocTest};

    #[test]
    fn wasm_bindgen_tests_by_their_exports() {
        assert_eq!(
            wasm_bindgen_test_of("__wbgt__node::fib_of_15"),
            Some("node::fib_of_15")
        );
        // `$` marks an ignored test.
        assert_eq!(wasm_bindgen_test_of("__wbgt_$_t::slow"), Some("t::slow"));
        assert_eq!(
            wasm_bindgen_test_of("__wbgb__fib::bench_fib"),
            Some("fib::bench_fib")
        );
        assert_eq!(wasm_bindgen_test_of("node::fib_of_15"), None);
    }

    #[test]
    fn harness_loops_by_name() {
        for name in [
            "criterion::bencher::Bencher<M>::iter<criterion::measurement::WallTime, u64, fib::bench::{closure#0}::{closure_env#0}>",
            "criterion::bencher::Bencher<M>::iter_batched<criterion::measurement::WallTime>",
            "criterion::bencher::Bencher::iter",
            "wasm_bindgen_test::__rt::criterion::bencher::Bencher<M>::iter<wasm_bindgen_test::__rt::criterion::measurement::WallTime, u64, fib::bench_fib::{closure#0}::{closure_env#0}>",
            "test::bench::Bencher::iter<u64, fn() -> u64>",
            "test::bench::ns_iter_inner<u64>",
        ] {
            assert!(is_harness_loop(name), "{name}");
        }
        for name in [
            "criterion::bencher::Bencher<M>::iter_custom<criterion::measurement::WallTime>",
            "criterion::bencher::Bencher<M>::bench",
            "core::iter::traits::iterator::Iterator::next",
            "my::Bencher::iter",
        ] {
            assert!(!is_harness_loop(name), "{name}");
        }
    }

    #[test]
    fn doc_tests_are_known_by_their_main() {
        let t = DocTest::from_name("rust_out::main::_doctest_main_src_de_impl_rs_120_0").unwrap();
        assert_eq!(t.line, 120);
        assert!(t.is_in("src/de_impl.rs"));
        assert!(t.is_in("src/de/impl.rs"));
        assert!(!t.is_in("src/lib.rs"));
        assert_eq!(DocTest::from_name("rust_out::main"), None);
    }
}
