//! The text report's call graph, gprof's: for each function shown, its callers above it
//! and its callees below, with the calls and costs of each arc.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{by_cost, location, self_cost, FlatRows, Units, BOLD};
use crate::format::units::{count, percent};
use crate::format::{CallGraph, EmitOptions};
use crate::profile::{Arc, Costs, Function, Profile};

/// How many callers and callees an entry lists unless asked for the full graph: the
/// costliest, then the most called.
const ARCS_SHOWN: usize = 5;

/// What the call graph names the caller of calls that no arc records.
const UNKNOWN_CALLER: &str = "<caller unknown>";
/// The same, where the standard library's helpers are folded into their callers: calls
/// out of a helper of several callers are of none of them in particular.
const UNKNOWN_OR_FOLDED: &str =
    "<caller unknown, or one of a folded helper's callers: --show-helpers lists them>";

/// Writes the call graph of `p`: the entries `options.call_graph` asks for, among the
/// flat profile's `rows`; `folded` when the standard library's helpers were folded into
/// their callers.
pub(super) fn call_graph(
    out: &mut String,
    p: &Profile,
    units: Units<'_>,
    (options, folded): (&EmitOptions, bool),
    rows: &FlatRows,
) {
    if options.call_graph == CallGraph::Top(0) {
        return;
    }
    let mut order = by_cost(p, |f| units.get(&f.cost).1);
    // Inlined functions' rows have no calls, so no arcs.
    order.retain(|f| f.calls > 0);
    // Every function the graph names has its index, as in gprof's: its rank by total
    // cost, whether or not its entry is shown.
    let ranks: HashMap<&str, usize> = (order.iter().enumerate())
        .map(|(i, f)| (f.name.as_str(), i + 1))
        .collect();
    if let CallGraph::Top(n) = options.call_graph {
        let listed: std::collections::HashSet<&str> =
            rows.rows.iter().map(|f| f.name.as_str()).collect();
        order.retain(|f| listed.contains(f.name.as_str()));
        order.truncate(n);
    }
    if order.is_empty() {
        return;
    }
    heading(out, p, units, options, order.len());
    let mut graph = Graph::of(p, units, ranks);
    if folded {
        graph.unknown_caller = UNKNOWN_OR_FOLDED;
    }
    if let CallGraph::Top(_) = options.call_graph {
        graph.arcs_shown = ARCS_SHOWN;
    }
    for (i, f) in order.into_iter().enumerate() {
        // A rule between entries.
        if i > 0 {
            let _ = writeln!(out, "{}", "-".repeat(60));
        }
        graph.entry(out, f);
    }
}

/// The call graph's heading and its columns' header.
fn heading(out: &mut String, p: &Profile, units: Units<'_>, options: &EmitOptions, entries: usize) {
    let entries = match options.call_graph {
        CallGraph::Top(_) => format!(
            "the {entries} costliest of the flat profile's functions, --call-graph N or full for more; "
        ),
        CallGraph::Full => String::new(),
    };
    let exact = match p.sampling.is_some() {
        true => "counts are exact, costs sampled",
        false => "costs are exact",
    };
    let costs = match units.has_cost() {
        true => format!(
            "; {exact}, per arc; {}: the function with its callees, a share of the whole",
            units.percent_header()
        ),
        false => String::new(),
    };
    let _ = writeln!(
        out,
        "\n{BOLD}Call graph{BOLD:#} ({entries}[n]: each function's index, costliest first; callers above each function, callees below{costs})"
    );
    let header_costs = if units.has_cost() {
        format!(
            "{:>11} {:>11} ",
            units.column("self"),
            units.column("children")
        )
    } else {
        String::new()
    };
    let share = match units.has_cost() {
        true => units.percent_header(),
        false => "",
    };
    let _ = writeln!(
        out,
        "{:<7} {share:>6} {header_costs}{:>21}  name",
        "index", "called"
    );
}

/// The profile as the call graph reads it: each entry's index, each function by name, the
/// arcs into and out of each.
struct Graph<'a> {
    units: Units<'a>,
    index: HashMap<&'a str, usize>,
    by_name: HashMap<&'a str, &'a Function>,
    callers: HashMap<&'a str, Vec<&'a Arc>>,
    callees: HashMap<&'a str, Vec<&'a Arc>>,
    /// How many callers and callees an entry lists.
    arcs_shown: usize,
    /// What the caller of calls no arc records is called.
    unknown_caller: &'static str,
}

impl<'a> Graph<'a> {
    /// The graph of `p`, each function indexed by its rank (`ranks`).
    fn of(p: &'a Profile, units: Units<'a>, ranks: HashMap<&'a str, usize>) -> Graph<'a> {
        let mut callers: HashMap<&str, Vec<&Arc>> = HashMap::new();
        let mut callees: HashMap<&str, Vec<&Arc>> = HashMap::new();
        for a in &p.arcs {
            callers.entry(a.callee.as_str()).or_default().push(a);
            callees.entry(a.caller.as_str()).or_default().push(a);
        }
        Graph {
            units,
            index: ranks,
            by_name: p.functions.iter().map(|f| (f.name.as_str(), f)).collect(),
            callers,
            callees,
            arcs_shown: usize::MAX,
            unknown_caller: UNKNOWN_CALLER,
        }
    }

    /// Of `arcs`, the `arcs_shown` costliest (then most called) in their order, or all of
    /// them where one more would be left out, and the number and calls of the others.
    fn shown<'b>(&self, arcs: impl Iterator<Item = &'b Arc>) -> (Vec<&'b Arc>, usize, u64) {
        let mut arcs: Vec<(usize, &Arc)> = arcs.enumerate().collect();
        let key = |a: &Arc| (self.units.get(&a.cost).1, a.count);
        arcs.sort_by_key(|&(_, a)| std::cmp::Reverse(key(a)));
        // A line that says "1 more" might as well be that one.
        let shown = match arcs.len() <= self.arcs_shown.saturating_add(1) {
            true => arcs.len(),
            false => self.arcs_shown,
        };
        let rest = arcs.split_off(shown);
        arcs.sort_by_key(|&(i, _)| i);
        let calls = rest.iter().map(|(_, a)| a.count).sum();
        (
            arcs.into_iter().map(|(_, a)| a).collect(),
            rest.len(),
            calls,
        )
    }

    /// A function's name, with its index when it has one (every function called).
    fn name_of(&self, name: &str) -> String {
        match self.index.get(name) {
            Some(i) => format!("{} [{i}]", self.units.name(name)),
            None => self.units.name(name),
        }
    }

    /// Self and children columns, or nothing for the calls metric.
    fn costs(&self, cost: &Costs) -> String {
        let units = self.units;
        if !units.has_cost() {
            return String::new();
        }
        let (self_, total) = units.get(cost);
        format!(
            "{:>11} {:>11} ",
            self_cost(units, cost),
            units.show(total.saturating_sub(self_))
        )
    }

    /// A caller's or a callee's row: the arc's costs (blank where no arc tells them), its
    /// calls, the other function.
    fn row(&self, out: &mut String, cost: Option<&Costs>, called: String, other: &str) {
        let cost = match cost {
            Some(cost) => self.costs(cost),
            None if self.units.has_cost() => format!("{:>11} {:>11} ", "", ""),
            None => String::new(),
        };
        let _ = writeln!(out, "{:<7} {:>6} {cost}{called:>21}      {other}", "", "");
    }

    /// `f`'s entry: its callers, itself, its callees.
    fn entry(&self, out: &mut String, f: &Function) {
        let units = self.units;
        let name = f.name.as_str();
        let incoming = self.callers.get(name).map_or(&[][..], Vec::as_slice);
        let outgoing = self.callees.get(name).map_or(&[][..], Vec::as_slice);
        let recursive = incoming
            .iter()
            .find(|a| a.caller == f.name)
            .map_or(0, |a| a.count);
        let (callers, more, calls) =
            self.shown(incoming.iter().copied().filter(|a| a.caller != f.name));
        for a in callers {
            let called = format!("{}/{}", count(a.count), count(f.calls - recursive));
            self.row(out, Some(&a.cost), called, &self.name_of(&a.caller));
        }
        if more > 0 {
            let called = format!("{}/{}", count(calls), count(f.calls - recursive));
            let what = format!("[{more} more callers: --call-graph full lists them]");
            self.row(out, None, called, &what);
        }
        // Calls no arc tells the caller of (a full arc table; a JS shim that wasm-bindgen
        // writes at bindgen time, which has no thunk of ours; a folded helper of several
        // callers), so the rows add up.
        let unknown = f
            .calls
            .saturating_sub(incoming.iter().map(|a| a.count).sum::<u64>());
        if unknown > 0 {
            let called = format!("{}/{}", count(unknown), count(f.calls - recursive));
            self.row(out, None, called, self.unknown_caller);
        }
        let called = match recursive {
            0 => count(f.calls),
            r => format!("{}+{}", count(f.calls - r), count(r)),
        };
        let share = if units.has_cost() {
            format!("{:.2}", percent(units.get(&f.cost).1, units.total))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<7} {share:>6} {}{called:>21}  {}{}",
            format!("[{}]", self.index[name]),
            self.costs(&f.cost),
            self.name_of(name),
            location(f)
        );
        let (callees, more, calls) =
            self.shown(outgoing.iter().copied().filter(|a| a.callee != f.name));
        for a in callees {
            let callee_calls = self
                .by_name
                .get(a.callee.as_str())
                .map_or(a.count, |c| c.calls);
            let called = format!("{}/{}", count(a.count), count(callee_calls));
            self.row(out, Some(&a.cost), called, &self.name_of(&a.callee));
        }
        if more > 0 {
            let what = format!("[{more} more callees: --call-graph full lists them]");
            self.row(out, None, count(calls), &what);
        }
    }
}
