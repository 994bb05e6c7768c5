//! callgrind's profile format (valgrind.org/docs/manual/cl-format.html), for KCachegrind,
//! QCachegrind and callgrind_annotate: each function's self cost at its source lines (with
//! the profile's exact per-line instructions; lines of code inlined from another file
//! under `fi=`), else at its definition's line; and for each arc a `calls=` line at the
//! call site with the cost of those calls. The event is the profile's metric: `ns` (time),
//! `Ir` (instructions) or `Calls`.

use std::collections::HashMap;
use std::io::Write;

use super::EmitOptions;
use crate::meta::Metric;
use crate::profile::{Function, LineCost, Profile, HOST};

/// Writes `profile` as a callgrind file.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let metric = profile.metric;
    let (event, label) = match metric {
        Metric::Time | Metric::ExactTime => ("ns", "Wall time (ns)"),
        Metric::Instructions => ("Ir", "Executed wasm instructions"),
        Metric::Calls => ("Calls", "Calls"),
    };
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(out, "creator: cargo-wasmprof {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "cmd: {}", profile.modules.join(" "))?;
    writeln!(out, "positions: line")?;
    writeln!(out, "event: {event} : {label}")?;
    writeln!(out, "events: {event}")?;
    let total: u64 = profile.functions.iter().map(|f| f.own_weight(metric)).sum();
    writeln!(out, "summary: {total}")?;

    let by_name: HashMap<&str, &Function> = profile
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f))
        .collect();
    let mut names = Names::default();
    let mut outgoing: HashMap<&str, Vec<&crate::profile::Arc>> = HashMap::new();
    for arc in &profile.arcs {
        outgoing.entry(arc.caller.as_str()).or_default().push(arc);
    }
    // The host, as a function that calls the exports.
    if let Some(arcs) = outgoing.get(HOST) {
        writeln!(out)?;
        writeln!(out, "fl={}", names.file("???"))?;
        writeln!(out, "fn={}", names.function(HOST))?;
        writeln!(out, "0 0")?;
        for arc in arcs {
            write_call(
                out,
                &mut names,
                arc,
                by_name.get(arc.callee.as_str()),
                0,
                metric,
            )?;
        }
    }
    let mut lines: HashMap<&str, Vec<&LineCost>> = HashMap::new();
    for l in &profile.lines {
        lines.entry(l.function.as_str()).or_default().push(l);
    }
    for f in &profile.functions {
        let line = f.line.unwrap_or(0);
        let home = f.file.as_deref().unwrap_or("???");
        writeln!(out)?;
        writeln!(out, "fl={}", names.file(home))?;
        writeln!(out, "fn={}", names.function(&f.name))?;
        // The file the position lines refer to now: the function's, or an inlined one's.
        let mut current = home.to_string();
        let mut switch = |out: &mut dyn Write, names: &mut Names, to: &str| {
            if to != current {
                let tag = if to == home { "fe" } else { "fi" };
                writeln!(out, "{tag}={}", names.file(to))?;
                current = to.to_string();
            }
            std::io::Result::Ok(())
        };
        match lines.get(f.name.as_str()) {
            Some(costs) if metric == Metric::Instructions => {
                for l in costs {
                    switch(out, &mut names, l.file.as_deref().unwrap_or(home))?;
                    writeln!(out, "{} {}", l.line, l.instructions)?;
                }
                // The thunk's own instructions of an import have no line.
                let on_lines: u64 = costs.iter().map(|l| l.instructions).sum();
                let rest = f.own_weight(metric).saturating_sub(on_lines);
                if rest > 0 {
                    switch(out, &mut names, home)?;
                    writeln!(out, "{line} {rest}")?;
                }
            }
            _ => writeln!(out, "{line} {}", f.own_weight(metric))?,
        }
        for arc in outgoing.get(f.name.as_str()).into_iter().flatten() {
            let site = arc.sites.first();
            switch(out, &mut names, site.map_or(home, |s| s.pos.file.as_str()))?;
            let at = site.map_or(line, |s| s.pos.line);
            write_call(
                out,
                &mut names,
                arc,
                by_name.get(arc.callee.as_str()),
                at,
                metric,
            )?;
        }
    }
    Ok(())
}

/// The `cfl=`/`cfn=`/`calls=` lines of one arc, made at line `at` of the caller.
fn write_call(
    out: &mut dyn Write,
    names: &mut Names,
    arc: &crate::profile::Arc,
    callee: Option<&&Function>,
    at: u32,
    metric: Metric,
) -> std::io::Result<()> {
    let file = callee.and_then(|f| f.file.as_deref()).unwrap_or("???");
    let target_line = callee.and_then(|f| f.line).unwrap_or(0);
    let inclusive = match metric {
        Metric::Calls => arc.count,
        other => arc.cost.get(other).1,
    };
    writeln!(out, "cfl={}", names.file(file))?;
    writeln!(out, "cfn={}", names.function(&arc.callee))?;
    writeln!(out, "calls={} {target_line}", arc.count)?;
    writeln!(out, "{at} {inclusive}")
}

/// callgrind's name compression: `(n) name` the first time, `(n)` after.
#[derive(Default)]
struct Names {
    files: HashMap<String, usize>,
    functions: HashMap<String, usize>,
}

impl Names {
    fn file(&mut self, name: &str) -> String {
        compress(&mut self.files, name)
    }

    fn function(&mut self, name: &str) -> String {
        compress(&mut self.functions, name)
    }
}

fn compress(table: &mut HashMap<String, usize>, name: &str) -> String {
    let name = name.replace(['\n', '\r'], " ");
    if let Some(id) = table.get(&name) {
        return format!("({id})");
    }
    let id = table.len() + 1;
    table.insert(name.clone(), id);
    format!("({id}) {name}")
}
