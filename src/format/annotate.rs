//! The annotated source: each source line of a function with what it cost, from the
//! profile's per-line costs: the instructions it executed, exact (the instructions metric
//! counts every straight-line segment's runs; a line's cost is each segment's runs times
//! the line's instructions in it), or the time the stack sampler found it running. Like
//! `callgrind_annotate` and `perf annotate`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anstyle::Style;

use super::units::{amount, count, percent, short_path, value};
use crate::meta::{Metric, Unit};
use crate::profile::{Function, LineCost, Profile};

const BOLD: Style = Style::new().bold();
const HOT: Style = Style::new().bold();

/// A line at least this share of its function's cost is marked hot (`>>`).
const HOT_SHARE: f64 = 20.0;

/// What to annotate.
#[derive(Debug, Clone)]
pub enum Selection {
    /// The N costliest functions of the program (the runtime's left out).
    Top(usize),
    /// The functions whose names match.
    Functions(regex::Regex),
    /// Every function defined in a source file whose path ends with this.
    File(String),
}

/// How the annotation reads.
#[derive(Debug, Clone, Copy)]
pub struct AnnotateOptions {
    /// Lines of source shown around each line with a cost.
    pub context: u32,
}

/// The annotated source of the functions `selection` picks, with ANSI bold where lines
/// are hot. Fails, saying why, when the profile has no per-line costs or nothing matches.
pub fn annotate(
    p: &Profile,
    selection: &Selection,
    options: AnnotateOptions,
) -> anyhow::Result<String> {
    // A component takes no `--metric instructions`: its lines come from samples alone.
    let counted = match p.exact_costs_flag() {
        Some(flag) => format!("{flag} counts every line"),
        None => "a component's lines come from its samples alone".to_string(),
    };
    anyhow::ensure!(
        !p.lines.is_empty(),
        "{}",
        match p.sampling.map(|s| s.sampler) {
            Some(crate::meta::Sampler::Stacks) => format!("the profile has no per-line costs: no sample found a line of the program (a run too short: a longer run, or a shorter --sample-interval; {counted})"),
            Some(crate::meta::Sampler::V8) => format!("the profile has no per-line costs: V8's sampler says which function ran, not which line ({counted})"),
            _ => format!("the profile has no per-line costs: profile with the default metric, time, in the embedded wasmtime (whose sampler finds lines){}", p.exact_costs_flag().map_or(String::new(), |flag| format!(", or with {flag} where the profiler keeps its own memory"))),
        }
    );
    let mut by_function: BTreeMap<&str, Vec<&LineCost>> = BTreeMap::new();
    for line in &p.lines {
        by_function.entry(&line.function).or_default().push(line);
    }
    let mut functions: Vec<&Function> = p
        .functions
        .iter()
        .filter(|f| by_function.contains_key(f.name.as_str()))
        .collect();
    functions.sort_by_key(|f| std::cmp::Reverse(f.own_weight(p.metric)));
    let mut inlined = Vec::new();
    match selection {
        Selection::Top(n) => {
            let program = crate::harness::program_functions(p);
            functions.retain(|f| program[f.id as usize]);
            functions.truncate(*n);
        }
        Selection::Functions(re) => {
            functions.retain(|f| re.is_match(&f.name));
            inlined = inlined_functions(p, re);
        }
        Selection::File(end) => functions.retain(|f| {
            f.file.as_deref().is_some_and(|file| {
                short_path(file).ends_with(end.as_str()) || file.ends_with(end.as_str())
            })
        }),
    }
    anyhow::ensure!(
        !functions.is_empty() || !inlined.is_empty(),
        "no function with per-line costs matches {}",
        match selection {
            Selection::Top(_) => "the program's own code".to_string(),
            Selection::Functions(re) => format!("'{re}'"),
            Selection::File(file) => format!("the file {file}"),
        }
    );
    let listing = Listing {
        metric: p.metric,
        total: p.functions.iter().map(|f| f.own_weight(p.metric)).sum(),
        options,
    };
    let mut out = String::new();
    for f in functions {
        listing.function(&mut out, f, &by_function[f.name.as_str()]);
    }
    for (name, lines) in inlined {
        listing.inlined_function(&mut out, &name, &lines);
    }
    Ok(out)
}

/// The functions whose names match `re` that were inlined into others (the innermost at
/// some costed line), with their lines, costliest first.
fn inlined_functions<'a>(p: &'a Profile, re: &regex::Regex) -> Vec<(String, Vec<&'a LineCost>)> {
    let mut found: BTreeMap<&str, Vec<&LineCost>> = BTreeMap::new();
    for l in &p.lines {
        if let Some(inlined) = l.inlined.first().filter(|i| re.is_match(&i.function)) {
            found.entry(&inlined.function).or_default().push(l);
        }
    }
    let mut found: Vec<(String, Vec<&LineCost>)> = found
        .into_iter()
        .map(|(name, lines)| (name.to_string(), lines))
        .collect();
    found.sort_by_key(|(_, lines)| {
        std::cmp::Reverse(lines.iter().map(|l| l.cost(p.metric)).sum::<u64>())
    });
    found
}

/// How the annotation of one profile reads: its metric, the whole program's cost (what the
/// shares of the profile are of), and the options.
struct Listing {
    metric: Metric,
    total: u64,
    options: AnnotateOptions,
}

impl Listing {
    /// An inlined function's annotation: its lines wherever it was inlined, summed.
    fn inlined_function(&self, out: &mut String, name: &str, lines: &[&LineCost]) {
        let own: u64 = lines.iter().map(|l| l.cost(self.metric)).sum();
        let mut into: Vec<&str> = lines.iter().map(|l| l.function.as_str()).collect();
        into.sort_unstable();
        into.dedup();
        let _ = writeln!(
            out,
            "{BOLD}{name}{BOLD:#} (inlined into {}): {} ({:.2}% of the profile)",
            into.join(", "),
            self.amount(own, lines),
            percent(own, self.total),
        );
        let mut files: BTreeMap<&str, BTreeMap<u32, Cost>> = BTreeMap::new();
        for l in lines {
            let cost = files
                .entry(l.file.as_deref().unwrap_or_default())
                .or_default()
                .entry(l.line)
                .or_default();
            cost.n += l.cost(self.metric);
        }
        for (file, costs) in files {
            self.source_listing(out, file, &costs, own);
        }
        out.push('\n');
    }

    /// One function's annotation: its own file's lines with their source, then the lines of
    /// other files (code inlined into it from them).
    fn function(&self, out: &mut String, f: &Function, lines: &[&LineCost]) {
        let own: u64 = lines.iter().map(|l| l.cost(self.metric)).sum();
        let _ = writeln!(
            out,
            "{BOLD}{}{BOLD:#}{}: {} ({:.2}% of the profile) in {} call{}",
            f.name,
            f.file
                .as_deref()
                .map_or(String::new(), |file| match f.line {
                    Some(line) => format!("  ({}:{line})", short_path(file)),
                    None => format!("  ({})", short_path(file)),
                }),
            self.amount(own, lines),
            percent(own, self.total),
            count(f.calls),
            if f.calls == 1 { "" } else { "s" },
        );
        let mut files: BTreeMap<Option<&str>, BTreeMap<u32, Cost>> = BTreeMap::new();
        for l in lines {
            let cost = files
                .entry(l.file.as_deref())
                .or_default()
                .entry(l.line)
                .or_default();
            cost.n += l.cost(self.metric);
            if let Some(inlined) = l.inlined.first() {
                let note = match inlined.call_line {
                    // The symbolizer's inference: the debug info lost this frame.
                    0 => format!(
                        "{} (inlined; the debug info does not say where)",
                        inlined.function
                    ),
                    line => format!("{} (inlined at line {line})", inlined.function),
                };
                if !cost.inlined.contains(&note) {
                    cost.inlined.push(note);
                }
            }
        }
        let home = f.file.as_deref();
        if let Some(costs) = home.and_then(|file| files.get(&Some(file))) {
            self.source_listing(out, home.unwrap_or_default(), costs, own);
        }
        let others: Vec<(&Option<&str>, &BTreeMap<u32, Cost>)> =
            files.iter().filter(|(file, _)| **file != home).collect();
        if !others.is_empty() {
            let _ = writeln!(
                out,
                "\n  elsewhere (code inlined from other files; [no line]: none in the line table):"
            );
            for (file, costs) in others {
                for (&line, cost) in costs {
                    let n = cost.n;
                    let place = match file {
                        Some(file) => format!("{}:{line}", short_path(file)),
                        None => "[no line]".to_string(),
                    };
                    let _ = writeln!(
                        out,
                        "{}{:>14} {:>6.2}%  {place}{}",
                        mark(n, own),
                        self.figure(n),
                        percent(n, own),
                        cost.note()
                    );
                }
            }
        }
        out.push('\n');
    }

    /// The source of `file` around its lines with a cost, each line's cost beside it.
    fn source_listing(&self, out: &mut String, file: &str, costs: &BTreeMap<u32, Cost>, own: u64) {
        let options = self.options;
        let text = std::fs::read_to_string(file).ok();
        let source: Vec<&str> = text
            .as_deref()
            .map_or_else(Vec::new, |t| t.lines().collect());
        if text.is_none() {
            let _ = writeln!(out, "  (source not found: {})", short_path(file));
        }
        let _ = writeln!(
            out,
            "\n  {:>14} {:>7}  {:>5}  source",
            self.column(),
            "%",
            "line"
        );
        let mut shown: Vec<u32> = Vec::new();
        for &line in costs.keys() {
            let from = line.saturating_sub(options.context).max(1);
            let to = line + options.context;
            for l in from..=to {
                let listed = (source.is_empty() && costs.contains_key(&l))
                    || (!source.is_empty() && (l as usize) <= source.len());
                if listed && shown.last().is_none_or(|&last| last < l) {
                    shown.push(l);
                }
            }
        }
        let mut previous = None;
        for l in shown {
            if previous.is_some_and(|p: u32| p + 1 < l) {
                let _ = writeln!(out, "  {:>14} {:>7}  {:>5}", "", "", "⋮");
            }
            previous = Some(l);
            let text = source.get(l as usize - 1).copied().unwrap_or("");
            match costs.get(&l) {
                Some(cost) => {
                    let n = cost.n;
                    let _ = writeln!(
                        out,
                        "{}{:>14} {:>6.2}%  {l:>5}  {text}{}",
                        mark(n, own),
                        self.figure(n),
                        percent(n, own),
                        cost.note()
                    );
                }
                None => {
                    let _ = writeln!(out, "  {:>14} {:>7}  {l:>5}  {text}", "", "");
                }
            }
        }
    }

    /// A cost in the annotation's header: `1234 instructions`, or a time with the samples it
    /// comes from (of `lines`).
    fn amount(&self, own: u64, lines: &[&LineCost]) -> String {
        match self.metric.facts().unit {
            Unit::Instructions => format!("{} instructions", count(own)),
            _ => {
                let samples: u64 = lines.iter().filter_map(|l| l.samples).sum();
                format!(
                    "{} sampled ({})",
                    amount(self.metric, own),
                    super::units::plural(samples, "sample")
                )
            }
        }
    }

    /// A line's cost in the column: exact instructions in full, a time in its unit.
    fn figure(&self, n: u64) -> String {
        match self.metric.facts().unit {
            Unit::Instructions => count(n),
            _ => value(self.metric, n),
        }
    }

    /// The cost column's heading.
    fn column(&self) -> &'static str {
        match self.metric.facts().unit {
            Unit::Instructions => "instructions",
            _ => "time",
        }
    }
}

/// A line's cost in one function, and the functions inlined there (innermost).
#[derive(Default)]
struct Cost {
    n: u64,
    inlined: Vec<String>,
}

impl Cost {
    /// `  ← helper (inlined at line 16)`, or nothing for the function's own code.
    fn note(&self) -> String {
        match self.inlined.is_empty() {
            true => String::new(),
            false => format!("  ← {}", self.inlined.join(", ")),
        }
    }
}

/// `>>` for a hot line (in bold where colours are on), two spaces otherwise.
fn mark(n: u64, own: u64) -> String {
    if percent(n, own) >= HOT_SHARE {
        format!("{HOT}>>{HOT:#}")
    } else {
        "  ".to_string()
    }
}
