//! One self-contained HTML page (no network): a sortable flat profile, a zoomable flame
//! graph, the callers and callees of a selected function with source positions, and a
//! search box. The page is `templates/report.html` with the profile's view model in it.

use std::io::Write;

use serde_json::json;

use super::tree::{Tree, LOST_PATHS};
use super::EmitOptions;
use crate::profile::{Profile, HOST};

/// The page, with [`DATA_MARK`] where the data goes.
const TEMPLATE: &str = include_str!("../../templates/report.html");
/// What the template has where the data goes (a JS expression).
const DATA_MARK: &str = "/*__WASMPROF_DATA__*/null";

/// Writes `profile` as an HTML page.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let metric = profile.metric;
    let index: std::collections::HashMap<&str, usize> = profile
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), i))
        .collect();
    let function_of = |name: &str| index.get(name).map_or(-1, |&i| i as i64);
    let functions: Vec<_> = profile
        .functions
        .iter()
        .map(|f| {
            let (own, total) = f.cost.get(metric);
            json!([f.name, f.file, f.line, f.calls, own, total, f.import])
        })
        .collect();
    let arcs: Vec<_> = profile
        .arcs
        .iter()
        .map(|a| {
            let line = a.sites.first().map(|s| s.pos.line);
            json!([
                function_of(&a.caller),
                function_of(&a.callee),
                a.count,
                a.cost.get(metric).1,
                line
            ])
        })
        .collect();
    // The tree's frames, parents first: [parent, function (-1: lost paths), calls, self, total].
    let frames: Vec<_> = match Tree::of(profile) {
        Ok(tree) => tree
            .frames
            .iter()
            .map(|f| {
                let function = f.function.map_or(-1, i64::from);
                json!([
                    f.parent.map_or(-1, |p| p as i64),
                    function,
                    f.calls,
                    f.self_weight,
                    f.total
                ])
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let run = profile.runs.first();
    let data = json!({
        "title": profile.modules.join(", "),
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
        "generator": concat!("cargo-wasmprof ", env!("CARGO_PKG_VERSION")),
    });
    // Inside <script>, `<` must not start `</script>` or `<!--`.
    let data = serde_json::to_string(&data)?.replace('<', "\\u003c");
    let page = TEMPLATE.replacen(DATA_MARK, &data, 1);
    out.write_all(page.as_bytes())?;
    Ok(())
}
