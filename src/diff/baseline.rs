//! Baselines, as criterion keeps them: `--save-baseline NAME` keeps each profile of a
//! `test` or `bench` run (one per test binary and doc test) under
//! `<target-dir>/wasmprof/baselines/NAME/`, with a manifest of the metric and target it was
//! profiled with; `--baseline NAME` compares a later run with it. The comparison is per
//! benchmark (the cost of one iteration of the routine each harness loop measured), per
//! test (the test function with everything it calls) and per profile's whole run, and under
//! each that changed the functions that changed most ([`Diff`] of the stacks through it). With `--metric instructions` every figure is exact, so one
//! instruction more is a change; with sampled time each figure is an estimate, and a change
//! within its noise (from the samples behind both figures) is called noise.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::figures::{figures, per_iteration_functions, sampled_noise, Figure, Kind};
use super::{Diff, FunctionChange};
use crate::error::Error;
use crate::format::units;
use crate::fsutil::relative;
use crate::harness;
use crate::meta::Metric;
use crate::profile::{Filter, Profile};

/// The `format` field of a baseline's manifest.
const FORMAT: &str = "wasmprof-baseline";
/// The manifest's file name in a baseline's directory.
const MANIFEST: &str = "baseline.json";
/// How many changed functions each changed row lists.
const TOP_FUNCTIONS: usize = 5;

/// What a baseline was profiled with, and its profiles' file names.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    format: String,
    metric: Metric,
    target: String,
    profiles: Vec<String>,
}

/// `name`, checked to be a baseline's name: a name, not a path (as `--save-baseline` and
/// `--baseline` take it).
pub fn check_name(name: &str) -> Result<String, String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(format!(
            "`{name}` is not a baseline name: a name, without a path separator"
        ));
    }
    Ok(name.to_string())
}

/// The directory of baseline `name` under `wasmprof_dir` (`<target-dir>/wasmprof`).
pub fn dir(wasmprof_dir: &Path, name: &str) -> PathBuf {
    wasmprof_dir.join("baselines").join(name)
}

/// Keeps `profiles` (each with its file name) as the baseline in `dir`, profiled with
/// `metric` for `target`, in place of any it held: written beside it, then renamed into
/// place, so that a failed save leaves the old baseline whole.
pub fn save(
    dir: &Path,
    metric: Metric,
    target: &str,
    profiles: &[(String, &Profile)],
) -> Result<(), Error> {
    let parent = dir.parent().expect("a baseline's directory has a parent");
    std::fs::create_dir_all(parent).map_err(|e| Error::input(parent, e))?;
    let staging = tempfile::Builder::new()
        .prefix(".baseline-")
        .tempdir_in(parent)
        .map_err(|e| Error::input(parent, e))?;
    for (file, profile) in profiles {
        profile.write(&staging.path().join(file))?;
    }
    let manifest = Manifest {
        format: FORMAT.to_string(),
        metric,
        target: target.to_string(),
        profiles: profiles.iter().map(|(file, _)| file.clone()).collect(),
    };
    let text = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
    let manifest_file = staging.path().join(MANIFEST);
    std::fs::write(&manifest_file, text).map_err(|e| Error::input(&manifest_file, e))?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::input(dir, e))?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, dir).map_err(|e| Error::input(dir, e))
}

/// A saved baseline, read back.
pub struct Baseline {
    name: String,
    dir: PathBuf,
    manifest: Manifest,
}

impl Baseline {
    /// Baseline `name` in `dir`, its manifest checked.
    pub fn load(dir: &Path, name: &str) -> Result<Baseline, Error> {
        let file = dir.join(MANIFEST);
        if !dir.exists() {
            return Err(Error::input(
                dir,
                format!("no baseline `{name}`: save one with --save-baseline {name}"),
            ));
        }
        let text = std::fs::read(&file).map_err(|e| Error::input(&file, e))?;
        let manifest: Manifest = serde_json::from_slice(&text)
            .ok()
            .filter(|m: &Manifest| m.format == FORMAT)
            .ok_or_else(|| Error::input(&file, "not a cargo-wasmprof baseline's manifest"))?;
        Ok(Baseline {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    /// Checks that a run profiled with `metric` for `target` compares with this baseline:
    /// a baseline of another metric or target is refused.
    pub fn check(&self, metric: Metric, target: &str) -> Result<(), Error> {
        let m = &self.manifest;
        let refuse = |what: &str, theirs: &str, ours: &str, flag: String| {
            Error::input(
                &self.dir,
                format!(
                    "baseline `{}` was profiled with {what} {theirs}, this run with {ours}: \
                     run with {flag}, or save the baseline again",
                    self.name
                ),
            )
        };
        if m.metric != metric {
            let flag = format!("--metric {}", m.metric.name());
            return Err(refuse("--metric", m.metric.name(), metric.name(), flag));
        }
        if m.target != target {
            let flag = format!("--target {}", m.target);
            return Err(refuse("--target", &m.target, target, flag));
        }
        Ok(())
    }

    /// Compares `profiles` (each with its file name), profiled with the baseline's metric
    /// ([`Baseline::check`]), with this baseline. A profile on one side only is a note of
    /// the comparison.
    pub fn compare(&self, profiles: &[(String, &Profile)]) -> Result<Comparison, Error> {
        let m = &self.manifest;
        let metric = m.metric;
        let mut comparison = Comparison {
            baseline: self.name.clone(),
            metric,
            ..Comparison::default()
        };
        for (file, new) in profiles {
            if !m.profiles.contains(file) {
                comparison
                    .notes
                    .push(format!("{file}: not in baseline `{}` (new)", self.name));
                continue;
            }
            let path = self.dir.join(file);
            let base = Profile::read(&path).map_err(|e| Error::input(&path, format!("{e:#}")))?;
            comparison.add(file, &base, new)?;
        }
        for file in &m.profiles {
            if !profiles.iter().any(|(f, _)| f == file) {
                comparison.notes.push(format!(
                    "{file}: in baseline `{}`, not in this run",
                    self.name
                ));
            }
        }
        Ok(comparison)
    }
}

/// A run compared with a baseline.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Comparison {
    /// The baseline's name.
    pub baseline: String,
    /// What the figures are.
    pub metric: Metric,
    /// Each benchmark and test of each profile, in the run's order.
    pub rows: Vec<Row>,
    /// What could not be compared: a profile on one side only, a benchmark or test on one
    /// side only.
    pub notes: Vec<String>,
}

/// One benchmark's or test's figure in the baseline and now.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The profile's file name.
    pub profile: String,
    /// What the row measures.
    pub kind: Kind,
    /// The measured routine's or the test function's name.
    pub name: String,
    /// The figure in the baseline.
    pub base: f64,
    /// The figure now.
    pub new: f64,
    /// How far a change may be noise, in percent of the baseline's figure: 0 for exact
    /// figures (instructions, calls); `None` where no estimate exists (exact time).
    pub noise_percent: Option<f64>,
    /// When it changed past its noise and is gated on: the functions whose self cost
    /// changed most under it (per iteration under the benchmark's routine; in the stacks
    /// through the test; in the whole run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionChange>,
    /// Whether `--fail-above` gates on it: not the bytes allocated (shown only), nor the
    /// whole run of a profile whose harness loops ran as many iterations as their timings
    /// asked for (its figure follows those counts; its benchmarks' per iteration do not).
    pub gated: bool,
}

impl Row {
    /// The change in percent of the baseline's figure.
    pub fn change_percent(&self) -> f64 {
        match self.base {
            0.0 if self.new == 0.0 => 0.0,
            0.0 => f64::INFINITY,
            base => 100.0 * (self.new - base) / base,
        }
    }

    /// Whether the change is within the figures' noise.
    pub fn is_noise(&self) -> bool {
        self.noise_percent
            .is_some_and(|noise| self.change_percent().abs() <= noise)
    }

    /// What the row is, in words, its name whole.
    pub fn describe(&self) -> String {
        self.label(usize::MAX)
    }

    /// What the row is, in words: `bench NAME`, `test NAME`, `the whole run`, or the bytes
    /// of one of them (names elided past `width`).
    fn label(&self, width: usize) -> String {
        let name = units::elide(&self.name, width);
        match self.kind {
            Kind::Run | Kind::Allocated => self.name.clone(),
            Kind::BenchBytes => format!("bytes per iteration, bench {name}"),
            Kind::TestBytes => format!("bytes, test {name}"),
            kind => format!("{} {name}", kind.name()),
        }
    }

    /// The profile's name, without `.json`.
    fn profile_stem(&self) -> &str {
        self.profile.strip_suffix(".json").unwrap_or(&self.profile)
    }

    /// How the change reads: `noise`, `unchanged`, or the change in percent (and that a
    /// whole run is not gated on).
    fn verdict(&self) -> String {
        let change = self.change_percent();
        if change == 0.0 {
            "unchanged".to_string()
        } else if self.is_noise() {
            format!("{change:+.2}% (noise)")
        } else if !self.gated && self.kind == Kind::Run {
            format!("{change:+.2}% (not gated)")
        } else {
            format!("{change:+.2}%")
        }
    }
}

impl Comparison {
    /// Adds profile `file`'s comparison: its benchmarks and tests, and the functions that
    /// changed most.
    fn add(&mut self, file: &str, base: &Profile, new: &Profile) -> Result<(), Error> {
        let metric = self.metric;
        let (before, now) = (figures(base, metric), figures(new, metric));
        // A harness that times its loops chooses their iterations, and the whole run with
        // them.
        let timed_loops = harness::harness_loops(new).next().is_some();
        for (&(kind, ref name), &now_figure) in &now {
            let Some(&old) = before.get(&(kind, name.clone())) else {
                // A new benchmark's or test's bytes: its row of the metric says it is new.
                if !kind.is_bytes_of_one() {
                    self.notes
                        .push(format!("{file}: {} {name} is new", kind.name()));
                }
                continue;
            };
            // A benchmark or test that allocates nothing, before or now: no row of bytes.
            if kind.is_bytes_of_one() && old.value + now_figure.value == 0.0 {
                continue;
            }
            let noise_percent = match metric {
                _ if kind.is_bytes() => Some(0.0),
                // A benchmark's figure is per iteration; its samples are the whole
                // routine's, which the iterations share alike.
                Metric::Time => {
                    let spread = |p: &Profile, f: Figure| sampled_noise(p, f.whole).unwrap_or(0.0);
                    Some((spread(base, old).powi(2) + spread(new, now_figure).powi(2)).sqrt())
                }
                Metric::ExactTime => None,
                Metric::Instructions | Metric::Calls => Some(0.0),
            };
            let (old, value) = (old.value, now_figure.value);
            let mut row = Row {
                profile: file.to_string(),
                kind,
                name: name.clone(),
                base: old,
                new: value,
                noise_percent,
                functions: Vec::new(),
                gated: !(kind.is_bytes() || (kind == Kind::Run && timed_loops)),
            };
            if kind == Kind::Run && !row.gated && old != value {
                self.notes.push(format!(
                    "{file}: the whole run is not gated on: its harness ran as many iterations as its timings asked for (its benchmarks per iteration are)"
                ));
            }
            if old != value && !row.is_noise() && row.gated {
                row.functions = changed_under(base, new, &row, metric)
                    .map_err(|e| Error::input(Path::new(file), format!("{e:#}")))?;
            }
            self.rows.push(row);
        }
        for b in new.benchmarks.iter().filter(|b| b.iterations == 0) {
            self.notes.push(format!(
                "{file}: bench {} is not compared: it called no routine (inlined into its loop; #[inline(never)] on it counts its iterations)",
                b.id
            ));
        }
        for (kind, name) in before
            .keys()
            .filter(|(kind, _)| !kind.is_bytes_of_one())
            .filter(|k| !now.contains_key(k))
        {
            self.notes
                .push(format!("{file}: {} {name} is not in this run", kind.name()));
        }
        Ok(())
    }

    /// The largest change past its noise, in percent (regressions positive), of the
    /// metric's rows (the allocated bytes are shown, not gated on).
    pub fn worst_regression(&self) -> Option<&Row> {
        self.rows
            .iter()
            .filter(|r| r.gated && !r.is_noise() && r.change_percent() > 0.0)
            .max_by(|a, b| a.change_percent().total_cmp(&b.change_percent()))
    }

    /// The comparison as text, for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\nCompared with baseline `{}` ({}; {})\n",
            self.baseline,
            self.metric.facts().label,
            self.precision()
        );
        let _ = writeln!(
            out,
            "{:>14} {:>14} {:>20}  what (profile)",
            "baseline", "now", "change"
        );
        for row in &self.rows {
            let _ = writeln!(
                out,
                "{:>14} {:>14} {:>20}  {}  ({})",
                self.show_row(row, row.base),
                self.show_row(row, row.new),
                row.verdict(),
                row.label(units::NAME_WIDTH),
                row.profile_stem()
            );
        }
        for row in self.rows.iter().filter(|r| !r.functions.is_empty()) {
            let _ = writeln!(
                out,
                "\nFunctions that changed most under {} ({}), {}:",
                row.label(units::NAME_WIDTH),
                row.profile_stem(),
                self.functions_measure(row)
            );
            for c in &row.functions {
                let _ = writeln!(
                    out,
                    "{:>14} {:>14}  {}",
                    self.show(c.base_cost as f64),
                    self.show(c.new_cost as f64),
                    units::elide(&c.name, units::NAME_WIDTH)
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }

    /// The comparison as Markdown, largest regression first, for a pull request.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "### cargo-wasmprof: compared with baseline `{}`\n\n{} ({}).\n",
            self.baseline,
            self.metric.facts().label,
            self.precision()
        );
        out.push_str("| profile | what | baseline | now | change |\n|---|---|--:|--:|--:|\n");
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by(|a, b| b.change_percent().total_cmp(&a.change_percent()));
        for row in rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                row.profile_stem(),
                row.label(units::NAME_WIDTH).replace('|', "\\|"),
                self.show_row(row, row.base),
                self.show_row(row, row.new),
                row.verdict()
            );
        }
        let changed: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| !r.functions.is_empty())
            .collect();
        if !changed.is_empty() {
            out.push_str("\n<details><summary>What changed under each</summary>\n\n");
            for row in changed {
                let _ = writeln!(
                    out,
                    "{} ({}), {}:",
                    row.label(units::NAME_WIDTH),
                    row.profile_stem(),
                    self.functions_measure(row)
                );
                for c in &row.functions {
                    let _ = writeln!(
                        out,
                        "- `{}`: {} → {}",
                        units::elide(&c.name, units::NAME_WIDTH).replace('`', "'"),
                        self.show(c.base_cost as f64),
                        self.show(c.new_cost as f64)
                    );
                }
                out.push('\n');
            }
            out.push_str("</details>\n");
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n- {note}");
        }
        out
    }

    /// What the functions listed under `row` show: their self cost per iteration under a
    /// benchmark's routine, else in the whole stacks.
    fn functions_measure(&self, row: &Row) -> &'static str {
        match row.kind == Kind::Bench && self.metric.has_cost() {
            true => "self per iteration",
            false => "self",
        }
    }

    /// What the figures' precision is, in words.
    fn precision(&self) -> &'static str {
        match self.metric {
            Metric::Instructions | Metric::Calls => "exact: any change is a change",
            Metric::Time => "sampled estimates: a change within the samples' noise is noise",
            Metric::ExactTime => {
                "measured once each: run-to-run noise is not estimated; compare instructions \
                 for an exact gate"
            }
        }
    }

    fn show(&self, value: f64) -> String {
        units::value(self.metric, value.round() as u64)
    }

    /// A figure of `row`: in bytes for the allocated bytes, else in the metric.
    fn show_row(&self, row: &Row, value: f64) -> String {
        match row.kind.is_bytes() {
            true => units::bytes(value.round() as u64),
            false => self.show(value),
        }
    }

    /// Where the comparison goes as Markdown, beside the baselines.
    pub fn markdown_file(wasmprof_dir: &Path, name: &str) -> PathBuf {
        wasmprof_dir
            .join("baselines")
            .join(format!("{name}.compared.md"))
    }

    /// Writes the Markdown to `file` and says where it went.
    pub fn write_markdown(&self, file: &Path) -> Result<(), Error> {
        crate::fsutil::write_atomic(file, self.markdown().as_bytes())?;
        crate::status::note(format!(
            "the comparison as Markdown (for a pull request): {}",
            relative(file)
        ));
        Ok(())
    }
}

/// The functions whose self cost changed most under `row`: per iteration under a
/// benchmark's routine (so that runs of different iteration counts compare), in the stacks
/// through its test function (a view focused on it), or in the program's stacks for the
/// whole run (as [`program_cost`] counts it). A profile without a calling-context tree (the
/// calls metric) has no stacks to focus on: the whole run's.
fn changed_under(
    base: &Profile,
    new: &Profile,
    row: &Row,
    metric: Metric,
) -> anyhow::Result<Vec<FunctionChange>> {
    if let (Kind::Bench, true) = (row.kind, metric.has_cost()) {
        let of = |p| per_iteration_functions(p, &row.name);
        return Ok(match (of(base), of(new)) {
            (Some(before), Some(now)) => per_iteration_changes(before, now),
            _ => Vec::new(),
        });
    }
    let focus = Filter {
        focus: Some(regex::Regex::new(&format!(
            "^{}$",
            regex::escape(&row.name)
        ))?),
        ..Filter::default()
    };
    let program = |p: &Profile| harness::program_view(p).unwrap_or_else(|| p.clone());
    let diff = match (row.kind, metric.has_cost()) {
        (_, false) => Diff::of(base, new, Some(metric))?,
        (Kind::Run, true) => Diff::of(&program(base), &program(new), Some(metric))?,
        (_, true) => Diff::of(&base.view(&focus)?, &new.view(&focus)?, Some(metric))?,
    };
    Ok(diff.functions.into_iter().take(TOP_FUNCTIONS).collect())
}

/// The functions whose self cost per iteration changed most from `before` to `now` (by
/// name: calls and self cost per iteration), rounded to whole calls and units.
fn per_iteration_changes(
    before: BTreeMap<String, (f64, f64)>,
    now: BTreeMap<String, (f64, f64)>,
) -> Vec<FunctionChange> {
    let names: BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    let round = |figure: Option<&(f64, f64)>| {
        let (calls, cost) = figure.copied().unwrap_or_default();
        (calls.round() as u64, cost.round() as u64)
    };
    let changes = names.into_iter().map(|name| {
        let ((base_calls, base_cost), (new_calls, new_cost)) =
            (round(before.get(name)), round(now.get(name)));
        FunctionChange {
            name: name.clone(),
            base_calls,
            new_calls,
            base_cost,
            new_cost,
        }
    });
    let mut changes = FunctionChange::most_first(changes);
    changes.truncate(TOP_FUNCTIONS);
    changes
}
