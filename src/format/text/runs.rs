//! The text report's tables of what ran: the tests and benchmarks by cost, the
//! iterations of each measuring loop, and each thread of a threaded program.

use std::fmt::Write as _;

use super::{by_cost, location, Units, BOLD};
use crate::format::units::{average, count, percent, short_path};
use crate::format::EmitOptions;
use crate::meta::Metric;
use crate::profile::{Profile, FEW_SAMPLES};

/// How many of each thread's costliest functions `--threads` lists.
const THREAD_TOP: usize = 5;

/// Each thread's total (its share of the run), how it ended, and its costliest functions
/// of the program's own code (calls, with the calls metric).
pub(super) fn threads(out: &mut String, p: &Profile, units: Units<'_>, options: &EmitOptions) {
    if p.threads.is_empty() {
        return;
    }
    let weight = |q: &Profile| -> u64 { q.functions.iter().map(|f| f.own_weight(q.metric)).sum() };
    let whole: u64 = p.threads.iter().map(|t| weight(&t.profile)).sum();
    let modules = p.threads.iter().any(|t| t.module != p.threads[0].module);
    let _ = writeln!(
        out,
        "\n{BOLD}Threads{BOLD:#} (each thread's {} and its costliest functions)",
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
            "{:>6.2}  {}{}: {cost}{} calls, {}",
            percent(own, whole),
            t.label(),
            if modules {
                format!(" of {}", short_path(&t.module))
            } else {
                String::new()
            },
            count(calls),
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
                "        {:>6.2} {:>11} {:>13}  {}{}",
                percent(w, own),
                if units.has_cost() {
                    crate::format::units::value(units.metric, w)
                } else {
                    String::new()
                },
                count(f.calls),
                units.name(&f.name),
                location(f)
            );
        }
    }
}

/// Writes each test function with its inclusive cost, costliest first (the first `top`).
pub(super) fn tests(out: &mut String, p: &Profile, units: Units<'_>, top: usize) {
    let tests = crate::harness::test_functions(p);
    if tests.is_empty() || !units.has_cost() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{BOLD}Tests by cost{BOLD:#} (each test function with everything it calls)"
    );
    let _ = writeln!(
        out,
        "{:>6} {:>11} {:>13}  test",
        units.percent_header(),
        units.column("total"),
        "calls"
    );
    // Of a run too short to rank by time, the tests its samples found, if they found any.
    let sampled = tests.iter().filter(|f| units.get(&f.cost).1 > 0).count();
    let shown = match top < usize::MAX && super::too_short(p) && sampled > 0 {
        true => sampled,
        false => tests.len(),
    };
    let unsampled = tests.len() - shown;
    let listed = top.min(shown);
    let beyond_top = shown.saturating_sub(listed);
    for f in tests.into_iter().take(listed) {
        let total = units.get(&f.cost).1;
        let _ = writeln!(
            out,
            "{:>6.2} {:>11} {:>13}  {}{}",
            percent(total, units.total),
            units.show(total),
            count(f.calls),
            units.name(&f.name),
            location(f)
        );
    }
    let more = match (beyond_top, unsampled) {
        (0, 0) => None,
        (n, 0) => Some(format!("[{n} more: --top all lists them]")),
        (0, n) => Some(format!(
            "[{n} more, which no sample found: --top all lists them]"
        )),
        (n, m) => Some(format!(
            "[{} more, {m} of which no sample found: --top all lists them]",
            n + m
        )),
    };
    if let Some(more) = more {
        let _ = writeln!(out, "{:>6} {:>11} {:>13}  {more}", "", "", "");
    }
}

/// A benchmark's cost per iteration, from `samples` samples where it is sampled: marked
/// `~` where they are too few; `-` where the metric has no cost.
fn per_iteration_cell(metric: Metric, cost: Option<f64>, samples: Option<u64>) -> String {
    match (cost, samples) {
        (Some(cost), Some(n)) if n < FEW_SAMPLES => format!("~{}", average(metric, cost)),
        (Some(cost), _) => average(metric, cost),
        (None, _) => "-".to_string(),
    }
}

/// One row of the table of costs per iteration.
struct IterationRow {
    per_iteration: Option<f64>,
    /// The samples its cost per iteration estimates from.
    samples: Option<u64>,
    /// Of its stretch's samples that found its routine or the probes running, the share
    /// that found the probes.
    probe_share: Option<f64>,
    iterations: u64,
    name: String,
    beside: String,
}

/// Writes the cost per iteration of each benchmark (the first `top`): of those its harness
/// named, in the order they ran, else of each harness loop's measured routine.
pub(super) fn iterations(out: &mut String, p: &Profile, units: Units<'_>, top: usize) {
    let (name, beside, what, rows) = if p.benchmarks.is_empty() {
        let what = "the routine a harness loop measured: its cost in those calls / its calls";
        (
            "routine",
            "harness loop",
            what.to_string(),
            routine_rows(p, units),
        )
    } else {
        let (what, rows) = benchmark_rows(p, units);
        ("benchmark", "routine", what, rows)
    };
    let inlined = crate::harness::inlined_loops(p);
    if rows.is_empty() && inlined.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{BOLD}Benchmarks per iteration{BOLD:#} ({what})");
    let probes = rows.iter().any(|r| r.probe_share.is_some());
    let header = if probes { "   probes" } else { "" };
    let _ = writeln!(
        out,
        "{:>13}{header} {:>13}  {name}  ({beside})",
        "per iteration", "iterations"
    );
    let more = rows.len().saturating_sub(top);
    for row in rows.into_iter().take(top) {
        let per_iteration = per_iteration_cell(units.metric, row.per_iteration, row.samples);
        let share = match row.probe_share {
            Some(share) if probes => format!(" {:>7.0}%", share * 100.0),
            _ if probes => format!(" {:>8}", "-"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{per_iteration:>13}{share} {:>13}  {}  ({})",
            count(row.iterations),
            row.name,
            row.beside
        );
    }
    if more > 0 {
        let _ = writeln!(
            out,
            "{:>13} {:>13}  [{more} more: --top all lists them]",
            "", ""
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
    if probes {
        let _ = writeln!(
            out,
            "(probes: the share of the samples in the benchmark's stretch that found the probes running, of those that found them or its routine; left out of the times; the higher it is, the shorter the routine's calls against the probes', and the further its time per iteration may be from the program's without them: most often low, by up to about that share{})",
            p.exact_costs_flag()
                .map_or(String::new(), |flag| format!("; {flag} counts exactly"))
        );
    }
}

/// The rows of each harness loop's measured routine.
fn routine_rows(p: &Profile, units: Units<'_>) -> Vec<IterationRow> {
    let routines = crate::harness::measured_routines(p).into_iter();
    routines
        .map(|r| IterationRow {
            per_iteration: r.per_iteration(units.metric),
            samples: r.total_samples(p),
            probe_share: None,
            iterations: r.iterations(),
            name: units.name(&r.arc.callee),
            beside: units.name(&r.harness.name),
        })
        .collect()
}

/// The rows of the benchmarks a harness named, and what they are.
fn benchmark_rows(p: &Profile, units: Units<'_>) -> (String, Vec<IterationRow>) {
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
        IterationRow {
            per_iteration: b.per_iteration(units.metric),
            samples: b.total_samples,
            probe_share: b.probe_share(),
            iterations: b.iterations,
            name: b.id.clone(),
            beside: format!("{routine}{warm_up}"),
        }
    });
    let (counted, per) = match measured {
        0 => ("its iterations", "its iterations"),
        _ => (
            "the iterations criterion measured, its warm-up left out",
            "those iterations",
        ),
    };
    let what = format!("each benchmark as its harness named it, in the order they ran: its routine's cost in {counted} / {per}");
    (what, rows.collect())
}
