//! One self-contained HTML page (no network): a sortable flat profile, a zoomable flame
//! graph, the callers and callees of a selected function with source positions, and a
//! search box. The page is `templates/report.html` with the profile's view model in it.

use std::io::Write;

use serde_json::json;

use super::tree::{Tree, LOST_PATHS};
use super::EmitOptions;
use crate::profile::{crate_of, Filter, Grouping, Profile, HOST};

/// The page, with [`DATA_MARK`] where the data goes.
const TEMPLATE: &str = include_str!("../../templates/report.html");
/// What the template has where the data goes (a JS expression).
const DATA_MARK: &str = "/*__WASMPROF_DATA__*/null";

/// Flame-graph frames under 1/PRUNE_BELOW of the whole are not drawn: at 2,000 pixels they
/// would stay under a pixel wide zoomed in 50 times.
const PRUNE_BELOW: u64 = 100_000;

/// How many functions' annotated source the page carries (the costliest by self).
const ANNOTATED: usize = 300;

/// Lines of source around each line with a cost.
const CONTEXT: u32 = 2;

/// The per-line costs of each function (by index: `[file, line, cost in the metric's unit,
/// inlined or null]`), and the source text around the costed lines of the costliest functions'
/// files: `{file: [[first line, [text...]], ...]}`.
fn annotated(
    profile: &Profile,
    index: &rustc_hash::FxHashMap<&str, usize>,
) -> (serde_json::Value, serde_json::Value) {
    use std::collections::{BTreeMap, BTreeSet};
    let mut lines: BTreeMap<usize, Vec<serde_json::Value>> = BTreeMap::new();
    let mut wanted: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    let mut costliest: Vec<&crate::profile::Function> = profile.functions.iter().collect();
    costliest.sort_by_key(|f| std::cmp::Reverse(f.own_weight(profile.metric)));
    let annotated: BTreeSet<&str> = costliest
        .iter()
        .take(ANNOTATED)
        .map(|f| f.name.as_str())
        .collect();
    for l in &profile.lines {
        let Some(&f) = index.get(l.function.as_str()) else {
            continue;
        };
        let file = l.file.as_deref().map(crate::source::short_path);
        lines.entry(f).or_default().push(json!([
            file,
            l.line,
            l.cost(profile.metric),
            l.inlined.first().map(|i| &i.function)
        ]));
        if let (Some(file), true) = (l.file.as_deref(), annotated.contains(l.function.as_str())) {
            wanted.entry(file).or_default().insert(l.line);
        }
    }
    let mut sources = serde_json::Map::new();
    for (file, wanted) in wanted {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let text: Vec<&str> = text.lines().collect();
        // Runs of wanted lines with their context, merged where they touch.
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &line in &wanted {
            let (from, to) = (line.saturating_sub(CONTEXT).max(1), line + CONTEXT);
            match runs.last_mut() {
                Some(run) if from <= run.1 + 1 => run.1 = run.1.max(to),
                _ => runs.push((from, to)),
            }
        }
        let runs: Vec<_> = runs
            .into_iter()
            .filter(|&(from, _)| (from as usize) <= text.len())
            .map(|(from, to)| {
                let to = (to as usize).min(text.len());
                json!([from, text[from as usize - 1..to]])
            })
            .collect();
        sources.insert(crate::source::short_path(file), json!(runs));
    }
    let lines: serde_json::Map<String, serde_json::Value> = lines
        .into_iter()
        .map(|(f, v)| (f.to_string(), json!(v)))
        .collect();
    (lines.into(), sources.into())
}

/// The page's title: the first few modules of a merged profile, and how many more.
fn title(modules: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut parts: Vec<String> = modules
        .iter()
        .take(SHOWN)
        .map(|m| crate::source::short_path(m))
        .collect();
    if modules.len() > SHOWN {
        parts.push(format!("and {} more", modules.len() - SHOWN));
    }
    parts.join(", ")
}

/// Writes `profile` as an HTML page.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let metric = profile.metric;
    let index = profile.index_by_name();
    let function_of = |name: &str| index.get(name).map_or(-1, |&i| i as i64);
    let functions: Vec<_> = profile
        .functions
        .iter()
        .map(|f| {
            let (own, total) = f.cost.get(metric);
            let file = f.file.as_deref().map(crate::source::short_path);
            json!([
                f.name,
                file,
                f.line,
                f.calls,
                own,
                total,
                f.import,
                crate_of(f)
            ])
        })
        .collect();
    let (lines, sources) = annotated(profile, &index);
    let arcs: Vec<_> = profile
        .arcs
        .iter()
        .map(|a| {
            // A call's line with its file: an inlined callee's call is in another file.
            let line = (a.sites.first())
                .map(|s| format!("{}:{}", crate::source::short_path(&s.pos.file), s.pos.line));
            json!([
                function_of(&a.caller),
                function_of(&a.callee),
                a.count,
                a.cost.get(metric).1,
                line
            ])
        })
        .collect();
    let (frames, pruned) = frames(profile);
    let run = profile.runs.first();
    let data = json!({
        "title": title(&profile.modules),
        "metric": metric.name(),
        "complete": profile.complete,
        "exit_code": run.map(|r| r.exit_code),
        "trap": run.and_then(|r| r.trap.clone()),
        "wall_ns": profile.runs.iter().map(|r| r.wall_ns).sum::<u64>(),
        "host": HOST,
        "lost": LOST_PATHS,
        "functions": functions,
        "arcs": arcs,
        "frames": frames,
        "pruned": [pruned.0, pruned.1, PRUNE_BELOW],
        "lines": lines,
        "sources": sources,
        "groups": groups(profile),
        "generator": concat!("cargo-wasmprof ", env!("CARGO_PKG_VERSION")),
    });
    // Inside <script>, `<` must not start `</script>` or `<!--`.
    let data = serde_json::to_string(&data)?.replace('<', "\\u003c");
    let page = TEMPLATE.replacen(DATA_MARK, &data, 1);
    out.write_all(page.as_bytes())?;
    Ok(())
}

/// The flat profile grouped by file and by crate, exact (views of the profile).
fn groups(profile: &Profile) -> serde_json::Map<String, serde_json::Value> {
    let mut groups = serde_json::Map::new();
    for (key, by) in [("file", Grouping::File), ("crate", Grouping::Crate)] {
        let filter = Filter {
            by,
            ..Filter::default()
        };
        if let Ok(view) = profile.view(&filter) {
            let rows: Vec<_> = view
                .functions
                .iter()
                .map(|g| {
                    let (own, total) = g.cost.get(profile.metric);
                    json!([g.name, g.calls, own, total])
                })
                .collect();
            groups.insert(key.to_string(), json!(rows));
        }
    }
    groups
}

/// The tree's frames, parents first: [parent, function (-1: lost paths), calls, self,
/// total]. Frames under a fraction of the whole that no zoom would draw wider than a pixel
/// are left out (their cost stays in their parents' totals), and counted: how many, and
/// their cost.
fn frames(profile: &Profile) -> (Vec<serde_json::Value>, (u64, u64)) {
    let mut pruned = (0u64, 0u64);
    let Ok(tree) = Tree::of(profile, super::Weight::Cost) else {
        return (Vec::new(), pruned);
    };
    let least = tree.frames[0].total / PRUNE_BELOW;
    let mut kept = vec![-1i64; tree.frames.len()];
    let mut frames = Vec::new();
    for (k, f) in tree.frames.iter().enumerate() {
        let parent = f.parent.map_or(-1, |p| kept[p]);
        if k > 0 && (parent < 0 || f.total < least.max(1)) {
            // Every context left out is counted, the cost once per subtree.
            pruned.0 += 1;
            if parent >= 0 {
                pruned.1 += f.total;
            }
            continue;
        }
        kept[k] = frames.len() as i64;
        frames.push(json!([
            parent,
            f.function.map_or(-1, i64::from),
            f.calls,
            f.self_weight,
            f.total
        ]));
    }
    (frames, pruned)
}
