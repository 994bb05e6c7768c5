//! `cargo wasmprof diff BASE NEW`: per-function change of calls and cost between two
//! profiles, sorted by impact, and the change of the whole, which `--fail-above` gates on;
//! written as a table for a terminal, as JSON, or as Markdown for a pull request.
//! `baseline` compares a whole `test` or `bench` run with a saved one.

pub mod baseline;
mod figures;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::format::units;
use crate::meta::Metric;
use crate::profile::{Allocs, MergedNames, Profile};

/// The change of one function.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionChange {
    /// The function's name.
    pub name: String,
    /// Calls in the base profile (0 when it did not run there).
    pub base_calls: u64,
    /// Calls in the new profile.
    pub new_calls: u64,
    /// Self cost in the base profile, in the compared metric.
    pub base_cost: u64,
    /// Self cost in the new profile.
    pub new_cost: u64,
}

impl FunctionChange {
    /// The change of self cost, new minus base.
    pub fn delta(&self) -> i128 {
        i128::from(self.new_cost) - i128::from(self.base_cost)
    }

    /// The functions of `changes` whose calls or self cost changed, the largest change of
    /// self cost first (then of calls, then by name).
    fn most_first(changes: impl IntoIterator<Item = FunctionChange>) -> Vec<FunctionChange> {
        let mut changed: Vec<FunctionChange> = changes
            .into_iter()
            .filter(|c| c.base_calls != c.new_calls || c.base_cost != c.new_cost)
            .collect();
        let calls = |c: &FunctionChange| c.new_calls.abs_diff(c.base_calls);
        changed.sort_by(|a, b| {
            (b.delta().abs().cmp(&a.delta().abs()))
                .then_with(|| calls(b).cmp(&calls(a)))
                .then_with(|| a.name.cmp(&b.name))
        });
        changed
    }
}

/// How a comparison is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffFormat {
    /// A table for a terminal.
    #[default]
    Text,
    /// The comparison as JSON.
    Json,
    /// A Markdown table, largest regression first, for a pull request's comment or a CI
    /// job's summary.
    Markdown,
}

/// Two profiles compared.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// What is compared: self time (ns), self instructions, or calls.
    pub metric: Metric,
    /// The whole base run's cost (the sum of self costs; calls for the calls metric).
    pub base_total: u64,
    /// The whole new run's cost.
    pub new_total: u64,
    /// The change of the whole, in percent of the base (0 when both are 0).
    pub change_percent: f64,
    /// Every function that ran in either profile, largest change of cost first.
    pub functions: Vec<FunctionChange>,
    /// The programs' allocations compared, where both profiles recorded them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocations: Option<AllocationChange>,
}

/// The programs' allocations compared: each run's, all contexts summed, and its peak of
/// live bytes (exact, so any change is one).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AllocationChange {
    /// The base run's allocations.
    pub base: Allocs,
    /// The new run's.
    pub new: Allocs,
    /// The base run's peak of live bytes (`None` where it is not known: a threaded
    /// program's, see [`crate::profile::Allocations::per_thread`]).
    pub base_peak_bytes: Option<u64>,
    /// The new run's.
    pub new_peak_bytes: Option<u64>,
}

impl AllocationChange {
    /// `base` and `new`'s allocations, if both recorded them.
    fn of(base: &Profile, new: &Profile) -> Option<AllocationChange> {
        let recorded = |p: &Profile| {
            p.allocations
                .as_ref()
                .filter(|a| a.not_recorded.is_none())
                .map(|a| a.peak())
        };
        Some(AllocationChange {
            base_peak_bytes: recorded(base)?,
            new_peak_bytes: recorded(new)?,
            base: base.total_allocs(),
            new: new.total_allocs(),
        })
    }

    /// In words: `allocated: 1.03 MiB ARROW 1.10 MiB (+6.80%) in 196 ARROW 210
    /// allocations; held at the end: ...; peak live: ...`.
    fn describe(&self, arrow: &str) -> String {
        let (b, n) = (&self.base, &self.new);
        let bytes = |base: u64, new: u64| {
            format!(
                "{} {arrow} {}{}",
                units::bytes(base),
                units::bytes(new),
                match base == new {
                    true => String::new(),
                    false => format!(" ({:+.2}%)", percent(new, base)),
                }
            )
        };
        let peak = match (self.base_peak_bytes, self.new_peak_bytes) {
            (Some(base), Some(new)) => bytes(base, new),
            _ => "not known (a threaded program's)".to_string(),
        };
        format!(
            "allocated: {} in {} {arrow} {} allocations; held at the end: {}; peak live: {peak}",
            bytes(b.alloc_bytes, n.alloc_bytes),
            b.allocs,
            n.allocs,
            bytes(b.held_bytes, n.held_bytes),
        )
    }
}

impl Diff {
    /// Compares `base` and `new` in `metric`, or, when None, in the metric both measured
    /// (calls when they differ). Sampled and exact time are both wall time, and compare.
    pub fn of(base: &Profile, new: &Profile, metric: Option<Metric>) -> anyhow::Result<Diff> {
        let metric = compared_metric(base, new, metric)?;
        // By identity: a ` [func N]` is each build's own index.
        let names = MergedNames::of([base, new]);
        let mut by_name: BTreeMap<&str, FunctionChange> = BTreeMap::new();
        let entry = |name: &str| FunctionChange {
            name: name.to_string(),
            base_calls: 0,
            new_calls: 0,
            base_cost: 0,
            new_cost: 0,
        };
        for f in &base.functions {
            let name = names.name(f);
            let e = by_name.entry(name).or_insert_with(|| entry(name));
            e.base_calls += f.calls;
            e.base_cost += f.own_weight(metric);
        }
        let shared = new
            .functions
            .iter()
            .filter(|f| by_name.contains_key(names.name(f)))
            .count();
        anyhow::ensure!(
            shared > 0 || base.functions.is_empty() || new.functions.is_empty(),
            "BASE ({}) and NEW ({}) have no function in common: profiles of different programs",
            base.modules.join(", "),
            new.modules.join(", ")
        );
        for f in &new.functions {
            let name = names.name(f);
            let e = by_name.entry(name).or_insert_with(|| entry(name));
            e.new_calls += f.calls;
            e.new_cost += f.own_weight(metric);
        }
        let functions = FunctionChange::most_first(by_name.into_values());
        let total = |p: &Profile| {
            p.functions
                .iter()
                .map(|f| f.own_weight(metric))
                .sum::<u64>()
        };
        let (base_total, new_total) = (total(base), total(new));
        Ok(Diff {
            metric,
            base_total,
            new_total,
            change_percent: percent(new_total, base_total),
            functions,
            allocations: AllocationChange::of(base, new),
        })
    }

    /// The comparison written as `format` (the first `top` functions; long names elided
    /// unless `full_names`, but in JSON).
    pub fn write(&self, format: DiffFormat, top: Option<usize>, full_names: bool) -> String {
        match format {
            DiffFormat::Text => self.render(top, full_names),
            DiffFormat::Json => serde_json::to_string_pretty(self).expect("diffs serialize") + "\n",
            DiffFormat::Markdown => self.markdown(top, full_names),
        }
    }

    /// The whole's change in words: `self instructions: 1.2M ARROW 1.3M (+8.33%)`.
    fn whole(&self, arrow: &str) -> String {
        let what = match self.metric.has_cost() {
            true => format!("self {}", self.metric.facts().label),
            false => "calls".to_string(),
        };
        let show = |v: u64| units::value(self.metric, v);
        format!(
            "{what}: {} {arrow} {} ({:+.2}%)",
            show(self.base_total),
            show(self.new_total),
            self.change_percent
        )
    }

    /// The comparison as Markdown: the whole, then the functions that changed, largest
    /// regression first (improvements after, largest first).
    pub fn markdown(&self, top: Option<usize>, full_names: bool) -> String {
        let show = |v: u64| units::value(self.metric, v);
        let mut out = format!("**{}**\n\n", self.whole("→"));
        if let Some(a) = &self.allocations {
            let _ = writeln!(out, "Allocations: {}\n", a.describe("→"));
        }
        if self.functions.is_empty() {
            out.push_str("No function changed.\n");
            return out;
        }
        out.push_str("| function | base | new | change | calls |\n|---|--:|--:|--:|--:|\n");
        let mut changes: Vec<&FunctionChange> = self.functions.iter().collect();
        changes.sort_by(|a, b| {
            let regression = |c: &FunctionChange| c.delta() > 0;
            regression(b)
                .cmp(&regression(a))
                .then(b.delta().abs().cmp(&a.delta().abs()))
                .then(a.name.cmp(&b.name))
        });
        let shown = top.unwrap_or(usize::MAX);
        for c in changes.iter().take(shown) {
            let name = match full_names {
                true => c.name.clone(),
                false => units::elide(&c.name, units::NAME_WIDTH),
            };
            let calls = match c.base_calls == c.new_calls {
                true => c.new_calls.to_string(),
                false => format!("{} → {}", c.base_calls, c.new_calls),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {calls} |",
                markdown_code(&name),
                show(c.base_cost),
                show(c.new_cost),
                change(c)
            );
        }
        if changes.len() > shown {
            let _ = writeln!(out, "\n{} more functions changed.", changes.len() - shown);
        }
        out
    }

    /// The comparison as a table: the whole, then each function that changed (long names
    /// elided unless `full_names`).
    pub fn render(&self, top: Option<usize>, full_names: bool) -> String {
        let show = |v: u64| units::value(self.metric, v);
        let mut out = format!("Total {}\n", self.whole("->"));
        if let Some(a) = &self.allocations {
            let _ = writeln!(out, "Allocations {}", a.describe("->"));
        }
        out.push('\n');
        if self.functions.is_empty() {
            out.push_str("No function changed.\n");
            return out;
        }
        let _ = writeln!(
            out,
            "{:>12} {:>12} {:>9} {:>10} {:>10}  name",
            "base", "new", "change", "calls", "calls new"
        );
        for c in self.functions.iter().take(top.unwrap_or(usize::MAX)) {
            let _ = writeln!(
                out,
                "{:>12} {:>12} {:>9} {:>10} {:>10}  {}",
                show(c.base_cost),
                show(c.new_cost),
                change(c),
                c.base_calls,
                c.new_calls,
                if full_names {
                    c.name.clone()
                } else {
                    units::elide(&c.name, units::NAME_WIDTH)
                }
            );
        }
        out
    }
}

/// What `base` and `new` are compared in: `metric` if both measured it (sampled and exact
/// time are both wall time; calls every profile counts), else what both measured, else
/// calls.
fn compared_metric(
    base: &Profile,
    new: &Profile,
    metric: Option<Metric>,
) -> anyhow::Result<Metric> {
    Ok(match metric {
        Some(m) => {
            for (which, p) in [("BASE", base), ("NEW", new)] {
                anyhow::ensure!(
                    m == Metric::Calls || p.metric == m || (m.is_time() && p.metric.is_time()),
                    "{which} measured {}, not {}; compare them with --metric {}",
                    p.metric.name(),
                    m.name(),
                    if base.metric == new.metric {
                        base.metric.name()
                    } else {
                        "calls"
                    }
                );
            }
            m
        }
        None if base.metric == new.metric => base.metric,
        None if base.metric.is_time() && new.metric.is_time() => Metric::Time,
        None => Metric::Calls,
    })
}

/// A function's change of cost in percent, or `new` when it cost nothing before.
fn change(c: &FunctionChange) -> String {
    match c.base_cost {
        0 => "new".to_string(),
        base => format!("{:+.1}%", percent(c.new_cost, base)),
    }
}

/// `text` as Markdown code, whatever it holds (a name may hold backticks or `|`, which
/// would end a table's cell).
fn markdown_code(text: &str) -> String {
    let text = text.replace('|', "\\|");
    let fence = if text.contains('`') { "`` " } else { "`" };
    format!("{fence}{text}{}", fence.chars().rev().collect::<String>())
}

/// The change from `base` to `new` in percent of `base` (0 when both are 0).
fn percent(new: u64, base: u64) -> f64 {
    match (base, new) {
        (0, 0) => 0.0,
        (0, _) => f64::INFINITY,
        _ => 100.0 * (new as f64 - base as f64) / base as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile of one function `name` at src/lib.rs:7, called `calls` times.
    fn one(name: &str, calls: u64) -> Profile {
        serde_json::from_value(serde_json::json!({
            "format": "wasmprof-profile", "version": 1, "modules": ["m.wasm"],
            "complete": true, "runs": [], "metric": "calls",
            "functions": [{"id": 0, "name": name, "file": "src/lib.rs", "line": 7,
                           "calls": calls, "self_ns": 0, "total_ns": 0}],
            "arcs": [], "contexts": [], "folded_entries": 0, "arcs_dropped": 0
        }))
        .unwrap()
    }

    #[test]
    fn functions_are_compared_by_identity_not_by_a_builds_index() {
        let diff = Diff::of(&one("grow [func 3]", 2), &one("grow [func 9]", 5), None).unwrap();
        assert_eq!(diff.functions.len(), 1);
        let change = &diff.functions[0];
        assert_eq!(change.name, "grow");
        assert_eq!((change.base_calls, change.new_calls), (2, 5));
    }

    #[test]
    fn profiles_of_different_programs_are_refused() {
        let error = Diff::of(&one("a", 1), &one("b", 1), None).unwrap_err();
        assert!(
            error.to_string().contains("no function in common"),
            "{error}"
        );
    }

    #[test]
    fn markdown_lists_regressions_first_and_keeps_cells_whole() {
        let mut base = one("calls::fib", 10);
        let mut new = one("calls::fib", 30);
        let mut f = base.functions[0].clone();
        f.name = "a|b::{closure#0}".into();
        f.calls = 5;
        base.functions.push(f.clone());
        f.calls = 1;
        new.functions.push(f);
        let md = Diff::of(&base, &new, None).unwrap().markdown(None, false);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
        assert_eq!(rows.len(), 2, "{md}");
        assert!(
            rows[0].starts_with("| `calls::fib` | 10 | 30 | +200.0% | 10 → 30 |"),
            "{md}"
        );
        assert!(
            rows[1].starts_with("| `a\\|b::{closure#0}` | 5 | 1 | -80.0% |"),
            "{md}"
        );
        assert!(md.starts_with("**calls: 15 → 31 (+106.67%)**"), "{md}");
    }

    #[test]
    fn allocations_are_compared_where_both_recorded_them() {
        let with_allocs = |bytes: u64, held: u64| {
            let mut p = one("grow", 1);
            p.contexts = serde_json::from_value(serde_json::json!([
                {"id": 0, "calls": 0, "self_ns": 0, "total_ns": 0},
                {"id": 1, "parent": 0, "function": 0, "calls": 1, "self_ns": 0,
                 "total_ns": 0, "alloc": {"allocs": 2, "alloc_bytes": bytes, "frees": 1,
                 "freed_bytes": bytes - held, "held": 1, "held_bytes": held}}
            ]))
            .unwrap();
            p.allocations = Some(crate::profile::Allocations {
                peak_bytes: bytes,
                ..Default::default()
            });
            p
        };
        let diff = Diff::of(&with_allocs(1000, 100), &with_allocs(1500, 100), None).unwrap();
        let a = diff.allocations.as_ref().expect("both recorded them");
        assert_eq!((a.base.alloc_bytes, a.new.alloc_bytes), (1000, 1500));
        let text = diff.render(None, false);
        assert!(
            text.contains("Allocations allocated: 1000 B -> 1500 B (+50.00%) in 2 -> 2 allocations; held at the end: 100 B -> 100 B; peak live: 1000 B -> 1500 B (+50.00%)"),
            "{text}"
        );
        assert!(Diff::of(&one("grow", 1), &with_allocs(1, 1), None)
            .unwrap()
            .allocations
            .is_none());
    }

    #[test]
    fn percentages() {
        assert_eq!(percent(110, 100), 10.0);
        assert_eq!(percent(0, 0), 0.0);
        assert!(percent(5, 0).is_infinite());
    }
}
