//! The text report's tables of what ran: the tests and benchmarks by cost, the
//! iterations of each measuring loop, and each thread of a threaded program.

use std::fmt::Write as _;

use super::{by_cost, location, Units, BOLD};
use crate::format::units::{percent, short_path};
use crate::format::EmitOptions;
use crate::profile::Profile;

/// How many of each thread's costliest functions `--threads` lists.
const THREAD_TOP: usize = 5;

/// Each thread's total (its share of the run), how it ended, and its costliest functions
/// of the program's own code (calls, with the calls metric).
pub(super) fn threads(out: &mut String, p: &Profile, units: Units, options: &EmitOptions) {
    if p.threads.is_empty() {
        return;
    }
    let weight = |q: &Profile| -> u64 { q.functions.iter().map(|f| f.own_weight(q.metric)).sum() };
    let whole: u64 = p.threads.iter().map(|t| weight(&t.profile)).sum();
    let modules = p.threads.iter().any(|t| t.module != p.threads[0].module);
    let _ = writeln!(
        out,
        "\n{BOLD}Threads{BOLD:#} (each thread's {} and its costliest functions)\n",
        if units.has_cost() { "cost" } else { "calls" }
    );
    for t in &p.threads {
        let q = &t.profile;
        let calls: u64 = q.functions.iter().map(|f| f.calls).sum();
        let own = weight(q);
        let cost = match units.has_cost() {
            true => format!("{}, ", units.amount(own)),
            false => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>6.2}  {}{}: {cost}{calls} calls, {}",
            percent(own, whole),
            t.label(),
            if modules {
                format!(" of {}", short_path(&t.module))
            } else {
                String::new()
            },
            t.how
        );
        let program = crate::harness::program_view(q);
        let q = program.as_ref().unwrap_or(q);
        let top = options.top.unwrap_or(THREAD_TOP).min(THREAD_TOP);
        for f in by_cost(q, |f| f.own_weight(q.metric)).into_iter().take(top) {
            let w = f.own_weight(q.metric);
            if w == 0 {
                break;
            }
            let _ = writeln!(
                out,
                "        {:>6.2} {:>11} {:>10}  {}{}",
                percent(w, own),
                if units.has_cost() {
                    units.show(w)
                } else {
                    String::new()
                },
                f.calls,
                units.name(&f.name),
                location(f)
            );
        }
    }
}

/// Writes each test function with its inclusive cost, costliest first (the first `top`).
pub(super) fn tests(out: &mut String, p: &Profile, units: Units, top: usize) {
    let tests = crate::harness::test_functions(p);
    if tests.is_empty() || !units.has_cost() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{BOLD}Tests by cost{BOLD:#} (each test function with everything it calls)\n"
    );
    let _ = writeln!(
        out,
        "{:>6} {:>11} {:>10}  test",
        units.percent_header(),
        "total",
        "calls"
    );
    for f in tests.into_iter().take(top) {
        let total = units.get(&f.cost).1;
        let _ = writeln!(
            out,
            "{:>6.2} {:>11} {:>10}  {}{}",
            percent(total, units.total),
            units.show(total),
            f.calls,
            units.name(&f.name),
            location(f)
        );
    }
}

/// Writes the cost per iteration of each benchmark (the first `top`): of those its harness
/// named, in the order they ran, else of each harness loop's measured routine.
pub(super) fn iterations(out: &mut String, p: &Profile, units: Units, top: usize) {
    if !p.benchmarks.is_empty() {
        return named_benchmarks(out, p, units, top);
    }
    let routines = crate::harness::measured_routines(p);
    if routines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{BOLD}Benchmarks per iteration{BOLD:#} (the routine a harness loop measured: its cost in those calls / its calls)\n"
    );
    let _ = writeln!(
        out,
        "{:>13} {:>13}  routine  (harness loop)",
        "per iteration", "iterations"
    );
    for routine in routines.into_iter().take(top) {
        let per_iteration = match routine.per_iteration(units.metric) {
            Some(cost) => units.show(cost.round() as u64),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{:>13} {:>13}  {}  ({})",
            per_iteration,
            routine.iterations(),
            units.name(&routine.arc.callee),
            units.name(&routine.harness.name)
        );
    }
}

/// Writes the cost per iteration of the benchmarks the harness named (the first `top`), in
/// the order they ran.
fn named_benchmarks(out: &mut String, p: &Profile, units: Units, top: usize) {
    let _ = writeln!(
        out,
        "\n{BOLD}Benchmarks per iteration{BOLD:#} (each benchmark as its harness named it, in the order they ran: its routine's cost in its iterations / its iterations)\n"
    );
    let _ = writeln!(
        out,
        "{:>13} {:>13}  benchmark  (routine)",
        "per iteration", "iterations"
    );
    for b in p.benchmarks.iter().take(top) {
        let per_iteration = match b.per_iteration(units.metric) {
            Some(cost) => units.show(cost.round() as u64),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{:>13} {:>13}  {}  ({})",
            per_iteration,
            b.iterations,
            b.id,
            units.name(&b.routine)
        );
    }
}
