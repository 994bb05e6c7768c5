//! The text format: the gprof-style report, a flat profile, a call graph and the cost of
//! each test, all read from a [`Profile`] alone. Costs are shown in the profile's metric: time, executed
//! instructions, or, for the calls metric, counts alone.
//!
//! This module writes the summary and the flat profile; `call_graph` the call graph, `runs`
//! the tables of what ran (tests, benchmarks' iterations, threads), `allocations` the
//! program's allocations, `notes` the notes that say what the figures leave out or how far
//! to trust them.

use std::collections::HashMap;
use std::fmt::Write as _;

use anstyle::Style;

mod allocations;
mod call_graph;
mod header;
mod notes;
mod requests;
mod runs;

use allocations::allocations;
use call_graph::call_graph;
use header::header;
use notes::notes;
use requests::requests;
pub use requests::requests_report;
use runs::{iterations, tests, threads};

use super::units::{count, distinct_elisions, elide, percent, short_path, Scale, NAME_WIDTH};
use super::EmitOptions;
use crate::meta::Metric;
use crate::profile::{Costs, Function, Profile, FEW_SAMPLES};

const BOLD: Style = Style::new().bold();

/// How costs read in the profile's metric, and names in the report's width.
#[derive(Clone, Copy)]
struct Units<'a> {
    metric: Metric,
    /// Whether the sections show costs: the metric has them, and, where they are sampled,
    /// some sample found the program (else the sections show calls alone).
    costed: bool,
    /// The whole run's cost: the sum of all self costs (every unit is some function's self).
    total: u64,
    /// The one unit of every cost column, chosen by `total`.
    scale: Scale,
    /// How many characters of a name are shown.
    name_width: usize,
    /// The names that, elided to the width, would read alike, as they are shown instead.
    distinct: &'a HashMap<&'a str, String>,
}

impl<'a> Units<'a> {
    fn of(p: &Profile, options: &EmitOptions, distinct: &'a HashMap<&'a str, String>) -> Units<'a> {
        let total = p.functions.iter().map(|f| f.cost.get(p.metric).0).sum();
        Units {
            metric: p.metric,
            costed: p.metric.has_cost() && p.sampling.is_none_or(|s| s.samples != 0),
            total,
            scale: Scale::of(p.metric, total),
            name_width: name_width(options),
            distinct,
        }
    }

    /// A function's name as the report shows it: elided past the width, unless that would
    /// make it read as another's.
    fn name(&self, name: &str) -> String {
        match self.distinct.get(name) {
            Some(shown) => shown.clone(),
            None => elide(name, self.name_width),
        }
    }

    /// Whether the sections show costs ([`Units::costed`]).
    fn has_cost(&self) -> bool {
        self.costed
    }

    /// (self, total) of `cost`.
    fn get(&self, cost: &Costs) -> (u64, u64) {
        cost.get(self.metric)
    }

    /// The header of a share column: gprof's `%time`, `%instr`; `%calls` where the
    /// sections show calls alone.
    fn percent_header(&self) -> &'static str {
        match self.has_cost() {
            true => self.metric.facts().share,
            false => "%calls",
        }
    }

    /// A cost column's header: its name and its unit (`self ms`).
    fn column(&self, name: &str) -> String {
        self.scale.header(name)
    }

    /// A cost as a figure of its column, in the column's unit.
    fn show(&self, value: u64) -> String {
        self.scale.show(value)
    }

    /// A cost per call or per iteration, in its own unit with an average's decimals.
    fn per(&self, cost: u64, n: u64) -> String {
        super::units::average(self.metric, cost as f64 / n as f64)
    }

    /// A cost as an amount in words (`1.20 ms`, `3,400,000 instructions`), nothing for
    /// calls.
    fn amount(&self, value: u64) -> String {
        super::units::amount(self.metric, value)
    }
}

/// Writes the whole report. Headings carry ANSI bold: the caller's stream strips it where
/// color is off (a file, a pipe, NO_COLOR).
pub(super) fn write(
    p: &Profile,
    options: &EmitOptions,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    out.write_all(render(p, options).as_bytes())?;
    Ok(())
}

/// How many characters of a name the report shows.
fn name_width(options: &EmitOptions) -> usize {
    match options.full_names {
        true => usize::MAX,
        false => NAME_WIDTH,
    }
}

/// The whole report as text, with ANSI bold headings: the summary, the tests and
/// benchmarks by cost, the flat profile's costliest functions of the program (the
/// runtime's scaffolding folded into one line), the call graph of those, the notes.
pub(super) fn render(p: &Profile, options: &EmitOptions) -> String {
    // A server served plain (`serve --no-instrument -o FILE`): its requests, nothing else.
    if let (true, Some(served)) = (p.functions.is_empty(), &p.requests) {
        return requests_report(served);
    }
    let mut out = String::new();
    let top = options.top.unwrap_or(usize::MAX);
    let names = p.functions.iter().map(|f| f.name.as_str());
    let distinct = distinct_elisions(names, name_width(options));
    let units = Units::of(p, options, &distinct);
    // The sections show the program's own calls, the standard library's helpers folded
    // into their callers, unless asked for all; shares are of the whole run either way.
    let program = match options.show_runtime {
        true => None,
        false => crate::harness::program_view(p),
    };
    let scaffolding = program.as_ref().and_then(|q| scaffolding(p, q, units));
    let q = program.as_ref().unwrap_or(p);
    let without_helpers = (!options.show_helpers)
        .then(|| q.without_helpers())
        .flatten();
    let helpers = (without_helpers.as_ref()).map(|w| q.functions.len() - w.functions.len());
    let q = without_helpers.as_ref().unwrap_or(q);
    let with_inlined = (options.inlined && !q.lines.is_empty()).then(|| inlined_rows(q));
    let q = with_inlined.as_ref().unwrap_or(q);
    let rows = FlatRows::of(q, scaffolding, options, units);
    header(&mut out, p, units, rows.by_samples);
    if let Some(helpers) = helpers {
        let _ = writeln!(
            out,
            "folded into their callers: {helpers} small functions of the standard library, as an optimized build inlines them; --show-helpers lists them"
        );
    }
    requests(&mut out, p.requests.as_ref());
    // Tests and harness loops are found by their callers, which a view of the program's
    // stacks leaves out.
    tests(&mut out, p, units, top);
    iterations(&mut out, p, units, top);
    if options.threads {
        threads(&mut out, p, units, options);
    }
    flat_profile(&mut out, q, units, &rows);
    call_graph(&mut out, q, units, (options, helpers.is_some()), &rows);
    allocations(&mut out, p, units, (top, options.weight));
    notes(&mut out, p, units);
    out
}

/// `p` with each function inlined into others as a row of its own, `NAME [inlined]`
/// without calls: the cost of its lines (instructions, or sampled time), taken out of its
/// hosts' self cost.
fn inlined_rows(p: &Profile) -> Profile {
    let mut q = p.clone();
    let metric = p.metric;
    let index = p.index_by_name();
    // Each inlined function's cost, and samples (the stack sampler's).
    let mut rows: std::collections::BTreeMap<&str, (u64, Option<u64>)> = Default::default();
    for l in &p.lines {
        let Some(inlined) = l.inlined.first() else {
            continue;
        };
        let row = rows.entry(&inlined.function).or_default();
        row.0 += l.cost(metric);
        if let Some(n) = l.samples {
            row.1 = Some(row.1.unwrap_or(0) + n);
        }
        if let Some(&host) = index.get(l.function.as_str()) {
            let cost = &mut q.functions[host].cost;
            let (own, total) = cost.get(metric);
            cost.set(metric, own.saturating_sub(l.cost(metric)), total);
            if let (Some(own), Some(n)) = (cost.self_samples.as_mut(), l.samples) {
                *own = own.saturating_sub(n);
            }
        }
    }
    for (name, (own, samples)) in rows {
        q.functions.push(Function {
            cost: Costs::in_unit(metric, own, own, samples),
            ..Function::of_calls(q.functions.len() as u32, format!("{name} {INLINED}"), 0)
        });
    }
    q
}

/// The mark of a row that stands for a function's inlined copies.
const INLINED: &str = "[inlined]";

/// What the flat profile shows: its rows, and what it leaves out.
struct FlatRows<'a> {
    /// The rows, costliest first.
    rows: Vec<&'a Function>,
    /// The program's functions past `--top`, or, of a run too short to rank by time,
    /// those no sample found (`unsampled`).
    rest: Vec<&'a Function>,
    /// Whether `rest` is what no sample found.
    unsampled: bool,
    /// Whether the sections list what the samples found, first: the run was too short to
    /// rank by time, and its samples found some of the program's functions (else, as with
    /// no sample, they rank by calls).
    by_samples: bool,
    /// The runtime's scaffolding left out of the sections, when some is.
    scaffolding: Option<Scaffolding>,
}

/// What the program's view leaves out of a profile: the runtime's scaffolding.
#[derive(Clone, Copy)]
struct Scaffolding {
    /// The runtime's functions the program never reached.
    unreached: usize,
    /// The scaffolding's calls.
    calls: u64,
    /// Its self cost.
    self_cost: u64,
    /// Whether a test or bench harness is part of it (a Rust test binary's), or the
    /// start-up alone (a C program's).
    harness: bool,
}

impl<'a> FlatRows<'a> {
    /// The rows of `q`, the view the sections show, and what it left out of the runtime's
    /// `scaffolding`.
    fn of(
        q: &'a Profile,
        scaffolding: Option<Scaffolding>,
        options: &EmitOptions,
        units: Units<'_>,
    ) -> FlatRows<'a> {
        let mut rows = by_cost(q, |f| units.get(&f.cost).0);
        let top = options.top.unwrap_or(usize::MAX);
        let by_samples =
            too_short(q) && rows.first().is_some_and(|f| f.cost.self_samples > Some(0));
        let unsampled = options.top.is_some() && by_samples;
        let shown = match unsampled {
            true => rows
                .iter()
                .take_while(|f| f.cost.self_samples > Some(0))
                .count(),
            false => top,
        };
        let rest = rows.split_off(rows.len().min(shown.min(top)));
        FlatRows {
            rows,
            rest,
            unsampled,
            by_samples,
            scaffolding,
        }
    }
}

/// What the `program`'s view leaves out of `p`: the runtime's functions the program never
/// reached, and the calls and self cost of its scaffolding; `None` when nothing.
fn scaffolding(p: &Profile, program: &Profile, units: Units<'_>) -> Option<Scaffolding> {
    let sum = |p: &Profile| -> (u64, u64) {
        p.functions
            .iter()
            .fold((0, 0), |(c, s), f| (c + f.calls, s + units.get(&f.cost).0))
    };
    let ((calls, self_), (q_calls, q_self)) = (sum(p), sum(program));
    let kept: std::collections::HashSet<&str> =
        program.functions.iter().map(|f| f.name.as_str()).collect();
    let unreached = (p.functions.iter())
        .filter(|f| !kept.contains(f.name.as_str()))
        .count();
    let calls = calls.saturating_sub(q_calls);
    (unreached + calls as usize > 0).then(|| Scaffolding {
        unreached,
        calls,
        self_cost: self_.saturating_sub(q_self),
        harness: p.functions.iter().any(crate::harness::is_harness),
    })
}

/// Whether `p`'s times are sampled from too few samples to say anything, but some.
fn too_short(p: &Profile) -> bool {
    p.sampling
        .is_some_and(|s| (1..FEW_SAMPLES).contains(&s.samples))
}

/// A self cost as text, marked `~` when it is sampled from too few samples to rank by.
fn self_cost(units: Units<'_>, cost: &Costs) -> String {
    let shown = units.show(units.get(cost).0);
    match cost.self_samples {
        // A sampled time no sample found is a zero, as gprof prints one.
        Some(n) if (1..FEW_SAMPLES).contains(&n) => format!("~{shown}"),
        _ => shown,
    }
}

/// The functions, most `cost` first, then most calls (where a short run left many at no
/// sample), then by name.
fn by_cost(p: &Profile, cost: impl Fn(&Function) -> u64) -> Vec<&Function> {
    let mut rows: Vec<&Function> = p.functions.iter().collect();
    rows.sort_by(|a, b| {
        cost(b)
            .cmp(&cost(a))
            .then(b.calls.cmp(&a.calls))
            .then(a.name.cmp(&b.name))
    });
    rows
}

fn flat_profile(out: &mut String, p: &Profile, units: Units<'_>, rows: &FlatRows) {
    let what = units.metric.facts().describes;
    let what = match p.sampling.is_some_and(|s| s.cpu) {
        true => what.replacen("wall time", "CPU time", 1),
        false => what.to_string(),
    };
    let all_calls: u64 =
        p.functions.iter().map(|f| f.calls).sum::<u64>() + rows.scaffolding.map_or(0, |s| s.calls);
    if units.has_cost() {
        let share = units.percent_header();
        let _ = writeln!(
            out,
            "\n{BOLD}Flat profile{BOLD:#} ({what}; {share}: the self column's share of the whole)"
        );
        let _ = writeln!(
            out,
            "{share:>6} {:>14} {:>11} {:>13} {:>11} {:>11}  name",
            units.column("cumulative"),
            units.column("self"),
            "calls",
            "self/call",
            "total/call"
        );
    } else {
        let _ = writeln!(
            out,
            "\n{BOLD}Flat profile{BOLD:#} (exact calls; %calls: a share of all calls)"
        );
        let _ = writeln!(out, "{:>6} {:>13}  name", "%calls", "calls");
    }
    let mut cumulative = 0;
    for f in &rows.rows {
        flat_row(out, f, units, all_calls, &mut cumulative);
    }
    if !rows.rest.is_empty() {
        let (calls, self_) = rows
            .rest
            .iter()
            .fold((0, 0), |(c, s), f| (c + f.calls, s + units.get(&f.cost).0));
        let what = match rows.unsampled {
            true => format!(
                "[{} more, which no sample found: --top all lists them]",
                rows.rest.len()
            ),
            false => format!("[{} more: --top all lists them]", rows.rest.len()),
        };
        left_out(out, units, all_calls, (calls, self_), &what);
    }
    if let Some(s) = rows.scaffolding {
        let parts = match s.harness {
            true => "the start-up, the harness and what only they call",
            false => "the start-up and what only it calls",
        };
        let what = format!(
            "[the runtime's scaffolding: {parts} ({} functions the program never calls); --show-runtime lists it]",
            s.unreached
        );
        left_out(out, units, all_calls, (s.calls, s.self_cost), &what);
    }
}

/// One function's row of the flat profile (`cumulative` its running sum of self costs).
fn flat_row(
    out: &mut String,
    f: &Function,
    units: Units<'_>,
    all_calls: u64,
    cumulative: &mut u64,
) {
    if !units.has_cost() {
        let _ = writeln!(
            out,
            "{:>6.2} {:>13}  {}{}",
            percent(f.calls, all_calls),
            count(f.calls),
            units.name(&f.name),
            location(f)
        );
        return;
    }
    let (self_, total) = units.get(&f.cost);
    *cumulative += self_;
    // An inlined function's row has no calls of its own.
    let per_call = |cost: u64| match f.calls {
        0 => "-".to_string(),
        n => units.per(cost, n),
    };
    let _ = writeln!(
        out,
        "{:>6.2} {:>14} {:>11} {:>13} {:>11} {:>11}  {}{}",
        percent(self_, units.total),
        units.show(*cumulative),
        self_cost(units, &f.cost),
        match f.calls {
            0 => "-".to_string(),
            n => count(n),
        },
        per_call(self_),
        per_call(total),
        units.name(&f.name),
        location(f)
    );
}

/// A line of the flat profile for what it leaves out (`what`): its share, its calls and
/// self cost.
fn left_out(
    out: &mut String,
    units: Units<'_>,
    all_calls: u64,
    (calls, self_): (u64, u64),
    what: &str,
) {
    let _ = match units.has_cost() {
        true => writeln!(
            out,
            "{:>6.2} {:>14} {:>11} {:>13} {:>11} {:>11}  {what}",
            percent(self_, units.total),
            "",
            units.show(self_),
            count(calls),
            "",
            ""
        ),
        false => writeln!(
            out,
            "{:>6.2} {:>13}  {what}",
            percent(calls, all_calls),
            count(calls)
        ),
    };
}

fn location(f: &Function) -> String {
    match (&f.file, f.line) {
        // A file of a view grouped by file is its own name.
        (Some(file), None) if short_path(file) == f.name => String::new(),
        (Some(file), Some(line)) => format!("  ({}:{line})", short_path(file)),
        (Some(file), None) => format!("  ({})", short_path(file)),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
