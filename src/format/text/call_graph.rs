//! The text report's call graph, gprof's: for each function shown, its callers above it
//! and its callees below, with the calls and costs of each arc.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{by_cost, location, self_cost, Shown, Units, BOLD};
use crate::format::units::percent;
use crate::format::{CallGraph, EmitOptions};
use crate::profile::{Arc, Costs, Function, Profile};

/// What the call graph names the caller of calls that no arc records.
const UNKNOWN_CALLER: &str = "<caller unknown>";

/// Writes the call graph of `p`: the entries `options.call_graph` asks for, among the
/// flat profile's `shown` rows.
pub(super) fn call_graph(
    out: &mut String,
    p: &Profile,
    units: Units,
    options: &EmitOptions,
    shown: &Shown,
) {
    if options.call_graph == CallGraph::Top(0) {
        return;
    }
    let mut order = by_cost(p, |f| units.get(&f.cost).1);
    // Inlined functions' rows have no calls, so no arcs.
    order.retain(|f| f.calls > 0);
    if let CallGraph::Top(n) = options.call_graph {
        let listed: std::collections::HashSet<&str> =
            shown.rows.iter().map(|f| f.name.as_str()).collect();
        order.retain(|f| listed.contains(f.name.as_str()));
        order.truncate(n);
    }
    let index: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), i + 1))
        .collect();
    let by_name: HashMap<&str, &Function> =
        p.functions.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut callers: HashMap<&str, Vec<&Arc>> = HashMap::new();
    let mut callees: HashMap<&str, Vec<&Arc>> = HashMap::new();
    for a in &p.arcs {
        callers.entry(a.callee.as_str()).or_default().push(a);
        callees.entry(a.caller.as_str()).or_default().push(a);
    }
    let name_of = |name: &str| match index.get(name) {
        Some(i) => format!("{} [{i}]", units.name(name)),
        None => units.name(name),
    };
    // Self and children columns, or nothing for the calls metric.
    let costs = |cost: &Costs| -> String {
        if !units.has_cost() {
            return String::new();
        }
        let (self_, total) = units.get(cost);
        format!(
            "{:>11} {:>11} ",
            self_cost(units, cost),
            units.show(total.saturating_sub(self_))
        )
    };
    let _ = writeln!(
        out,
        "\n{BOLD}Call graph{BOLD:#} ({}callers above each function, callees below{})\n",
        match options.call_graph {
            CallGraph::Top(_) => format!(
                "the {} costliest of the flat profile's functions, --call-graph N or full for more; ",
                order.len()
            ),
            CallGraph::Full => String::new(),
        },
        match (units.has_cost(), p.sampling.is_some()) {
            (true, false) => "; costs are exact, per arc",
            (true, true) => "; counts are exact, costs sampled, per arc",
            (false, _) => "",
        }
    );
    let header_costs = if units.has_cost() {
        format!("{:>11} {:>11} ", "self", "children")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{:<7} {:>6} {header_costs}{:>15}  name",
        "index",
        units.percent_header(),
        "called"
    );
    // A caller's or a callee's row: the arc's costs (blank where no arc tells them), its
    // calls, the other function.
    let row = |out: &mut String, cost: Option<&Costs>, called: String, other: &str| {
        let cost = match cost {
            Some(cost) => costs(cost),
            None if units.has_cost() => format!("{:>11} {:>11} ", "", ""),
            None => String::new(),
        };
        let _ = writeln!(out, "{:<7} {:>6} {cost}{called:>15}      {other}", "", "");
    };
    let arc_row = |out: &mut String, a: &Arc, called: String, other: &str| {
        row(out, Some(&a.cost), called, &name_of(other));
    };
    for f in order {
        let name = f.name.as_str();
        let incoming = callers.get(name).map_or(&[][..], Vec::as_slice);
        let outgoing = callees.get(name).map_or(&[][..], Vec::as_slice);
        let recursive = incoming
            .iter()
            .find(|a| a.caller == f.name)
            .map_or(0, |a| a.count);
        for a in incoming.iter().filter(|a| a.caller != f.name) {
            let called = format!("{}/{}", a.count, f.calls - recursive);
            arc_row(out, a, called, &a.caller);
        }
        // Calls no arc tells the caller of (a full arc table; a JS shim that wasm-bindgen
        // writes at bindgen time, which has no thunk of ours), so the rows add up.
        let unknown = f
            .calls
            .saturating_sub(incoming.iter().map(|a| a.count).sum::<u64>());
        if unknown > 0 {
            let called = format!("{unknown}/{}", f.calls - recursive);
            row(out, None, called, UNKNOWN_CALLER);
        }
        let called = match recursive {
            0 => f.calls.to_string(),
            r => format!("{}+{r}", f.calls - r),
        };
        let share = if units.has_cost() {
            format!("{:.2}", percent(units.get(&f.cost).1, units.total))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<7} {share:>6} {}{called:>15}  {}{}",
            format!("[{}]", index[name]),
            costs(&f.cost),
            name_of(name),
            location(f)
        );
        for a in outgoing.iter().filter(|a| a.callee != f.name) {
            let callee_calls = by_name.get(a.callee.as_str()).map_or(a.count, |c| c.calls);
            let called = format!("{}/{callee_calls}", a.count);
            arc_row(out, a, called, &a.callee);
        }
        let _ = writeln!(out, "{}", "-".repeat(60));
    }
}
