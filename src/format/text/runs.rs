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
    let metric = units.metric;
    let (what, rows): (_, Vec<_>) = if p.benchmarks.is_empty() {
        let rows = crate::harness::measured_routines(p).into_iter().map(|r| {
            let names = (units.name(&r.arc.callee), units.name(&r.harness.name));
            (r.per_iteration(metric), r.iterations(), names)
        });
        let what = "the routine a harness loop measured: its cost in those calls / its calls";
        (
            ("routine", "harness loop", what.to_string()),
            rows.collect(),
        )
    } else {
        let measured = p.benchmarks.iter().filter(|b| b.measured).count();
        let rows = p.benchmarks.iter().map(|b| {
            let routine = match b.routine.as_str() {
                "" => "no routine called: inlined into its loop".to_string(),
                routine => units.name(routine),
            };
            let warm_up = if b.measured || measured == 0 {
                ""
            } else {
                ", its warm-up included"
            };
            (
                b.per_iteration(metric),
                b.iterations,
                (b.id.clone(), format!("{routine}{warm_up}")),
            )
        });
        let (counted, per) = match measured {
            0 => ("its iterations", "its iterations"),
            _ => (
                "the iterations criterion measured, its warm-up left out",
                "those iterations",
            ),
        };
        let what = format!("each benchmark as its harness named it, in the order they ran: its routine's cost in {counted} / {per}");
        (("benchmark", "routine", what), rows.collect())
    };
    let inlined = crate::harness::inlined_loops(p);
    if rows.is_empty() && inlined.is_empty() {
        return;
    }
    let (name, beside, what) = what;
    let _ = writeln!(out, "\n{BOLD}Benchmarks per iteration{BOLD:#} ({what})\n");
    let _ = writeln!(
        out,
        "{:>13} {:>13}  {name}  ({beside})",
        "per iteration", "iterations"
    );
    for (per_iteration, iterations, (name, beside)) in rows.into_iter().take(top) {
        let per_iteration = match per_iteration {
            Some(cost) => units.show(cost.round() as u64),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "{per_iteration:>13} {iterations:>13}  {name}  ({beside})"
        );
    }
    for harness in inlined {
        let _ = writeln!(
            out,
            "{:>13} {:>13}  (its routine, inlined into the loop, is not counted: #[inline(never)] on it counts it)  ({})",
            "-",
            "-",
            units.name(&harness.name)
        );
    }
}
