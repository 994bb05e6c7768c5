//! The gprof-style text report: a flat profile, a call graph and the cost of each test, all
//! read from a [`Profile`] alone.

use std::collections::HashMap;
use std::fmt::Write as _;

use anstyle::Style;

use crate::profile::{Arc, Function, Profile};

/// What to include in the report.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Limit each section to its first N rows.
    pub top: Option<usize>,
}

const BOLD: Style = Style::new().bold();

/// Renders the whole report. Headings carry ANSI bold, which `anstream` strips where color
/// is off.
pub fn render(p: &Profile, options: &ReportOptions) -> String {
    let mut out = String::new();
    let top = options.top.unwrap_or(usize::MAX);
    let total: u64 = p.functions.iter().map(|f| f.self_ns).sum();
    header(&mut out, p, total);
    flat_profile(&mut out, p, total, top);
    call_graph(&mut out, p, total, top);
    tests(&mut out, p, total, top);
    notes(&mut out, p);
    out
}

fn header(out: &mut String, p: &Profile, total: u64) {
    let calls: u64 = p.functions.iter().map(|f| f.calls).sum();
    let _ = writeln!(
        out,
        "{BOLD}cargo-wasmprof profile{BOLD:#}: {}",
        p.modules.join(", ")
    );
    let _ = writeln!(
        out,
        "{} in {} functions, {calls} calls{}",
        time(total),
        p.functions.len(),
        if p.complete {
            ""
        } else {
            " (partial: the run ended inside some functions)"
        }
    );
}

fn flat_profile(out: &mut String, p: &Profile, total: u64, top: usize) {
    let mut rows: Vec<&Function> = p.functions.iter().collect();
    rows.sort_by(|a, b| {
        b.self_ns
            .cmp(&a.self_ns)
            .then(b.calls.cmp(&a.calls))
            .then(a.name.cmp(&b.name))
    });
    let _ = writeln!(out, "\n{BOLD}Flat profile{BOLD:#} (self: the function alone; total: with its callees, once per outermost call)\n");
    let _ = writeln!(
        out,
        "{:>6} {:>11} {:>11} {:>10} {:>11} {:>11}  name",
        "%time", "cumulative", "self", "calls", "self/call", "total/call"
    );
    let mut cumulative = 0;
    for f in rows.into_iter().take(top) {
        cumulative += f.self_ns;
        let _ = writeln!(
            out,
            "{:>6.2} {:>11} {:>11} {:>10} {:>11} {:>11}  {}{}",
            percent(f.self_ns, total),
            time(cumulative),
            time(f.self_ns),
            f.calls,
            time(f.self_ns / f.calls.max(1)),
            time(f.total_ns / f.calls.max(1)),
            f.name,
            location(f)
        );
    }
}

fn call_graph(out: &mut String, p: &Profile, total: u64, top: usize) {
    let mut order: Vec<&Function> = p.functions.iter().collect();
    order.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
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
        Some(i) => format!("{name} [{i}]"),
        None => name.to_string(),
    };
    let arc_line = |out: &mut String, a: &Arc, called: String, name: String| {
        let _ = writeln!(
            out,
            "{:<7} {:>6} {:>11} {:>11} {:>15}      {name}",
            "",
            "",
            time(a.self_ns),
            time(a.total_ns.saturating_sub(a.self_ns)),
            called
        );
    };
    let _ = writeln!(out, "\n{BOLD}Call graph{BOLD:#} (callers above each function, callees below; times are exact, per arc)\n");
    let _ = writeln!(
        out,
        "{:<7} {:>6} {:>11} {:>11} {:>15}  name",
        "index", "%time", "self", "children", "called"
    );
    for f in order.into_iter().take(top) {
        let name = f.name.as_str();
        let incoming = callers.get(name).map_or(&[][..], Vec::as_slice);
        let outgoing = callees.get(name).map_or(&[][..], Vec::as_slice);
        let recursive = incoming
            .iter()
            .find(|a| a.caller == f.name)
            .map_or(0, |a| a.count);
        for a in incoming.iter().filter(|a| a.caller != f.name) {
            arc_line(
                out,
                a,
                format!("{}/{}", a.count, f.calls - recursive),
                name_of(&a.caller),
            );
        }
        let called = match recursive {
            0 => f.calls.to_string(),
            r => format!("{}+{r}", f.calls - r),
        };
        let _ = writeln!(
            out,
            "{:<7} {:>6.2} {:>11} {:>11} {:>15}  {}{}",
            format!("[{}]", index[name]),
            percent(f.total_ns, total),
            time(f.self_ns),
            time(f.total_ns.saturating_sub(f.self_ns)),
            called,
            name_of(name),
            location(f)
        );
        for a in outgoing.iter().filter(|a| a.callee != f.name) {
            let callee_calls = by_name.get(a.callee.as_str()).map_or(a.count, |c| c.calls);
            arc_line(
                out,
                a,
                format!("{}/{callee_calls}", a.count),
                name_of(&a.callee),
            );
        }
        let _ = writeln!(out, "{}", "-".repeat(60));
    }
}

/// The `#[test]` functions: libtest calls each one from a closure of the same path
/// (`tests::foo::{closure#0}` calls `tests::foo`).
pub fn test_functions(p: &Profile) -> Vec<&Function> {
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
        .filter_map(|a| p.function_named(&a.callee))
        .collect();
    found.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    found.dedup_by(|a, b| a.name == b.name);
    found
}

fn tests(out: &mut String, p: &Profile, total: u64, top: usize) {
    let tests = test_functions(p);
    if tests.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{BOLD}Tests by cost{BOLD:#} (each test function with everything it calls)\n"
    );
    let _ = writeln!(out, "{:>6} {:>11} {:>10}  test", "%time", "total", "calls");
    for f in tests.into_iter().take(top) {
        let _ = writeln!(
            out,
            "{:>6.2} {:>11} {:>10}  {}{}",
            percent(f.total_ns, total),
            time(f.total_ns),
            f.calls,
            f.name,
            location(f)
        );
    }
}

fn notes(out: &mut String, p: &Profile) {
    let mut first = true;
    let mut note = |out: &mut String, text: String| {
        if first {
            out.push('\n');
            first = false;
        }
        let _ = writeln!(out, "note: {text}");
    };
    for run in p.runs.iter().filter(|r| !r.open_stack.is_empty()) {
        const SHOWN: usize = 8;
        let stack = &run.open_stack;
        let shown = &stack[stack.len().saturating_sub(SHOWN)..];
        note(
            out,
            format!(
                "{} ended inside {} (exit code {}{}); the open calls' times are missing: {}{}",
                run.module,
                stack.last().map_or("?", String::as_str),
                run.exit_code,
                run.trap
                    .as_ref()
                    .map_or(String::new(), |_| ", trapped".to_string()),
                if stack.len() > SHOWN { "... -> " } else { "" },
                shown.join(" -> ")
            ),
        );
    }
    if p.folded_entries > 0 {
        note(
            out,
            format!(
                "the calling-context tree was full: {} entries were folded per function (raise --max-contexts)",
                p.folded_entries
            ),
        );
    }
    if p.arcs_dropped > 0 {
        note(
            out,
            format!(
                "{} calls could not be recorded as arcs (the arc table was full)",
                p.arcs_dropped
            ),
        );
    }
}

fn location(f: &Function) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("  ({}:{line})", short_path(file)),
        (Some(file), None) => format!("  ({})", short_path(file)),
        _ => String::new(),
    }
}

/// A source path as a person wants to read it: relative to the working directory when
/// under it, and the standard library's `/rustc/<commit>/library/...` as `library/...`.
pub fn short_path(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("/rustc/") {
        if let Some((_, lib)) = rest.split_once('/') {
            return lib.to_string();
        }
    }
    crate::fsutil::relative(std::path::Path::new(path))
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A duration in nanoseconds, in the unit that keeps it short.
pub fn time(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.2} µs", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_pick_their_unit() {
        assert_eq!(time(999), "999 ns");
        assert_eq!(time(1_500), "1.50 µs");
        assert_eq!(time(2_345_678), "2.35 ms");
        assert_eq!(time(3_000_000_000), "3.000 s");
    }

    #[test]
    fn standard_library_paths_are_shortened() {
        assert_eq!(
            short_path(
                "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/ops/function.rs"
            ),
            "library/core/src/ops/function.rs"
        );
    }
}
