//! callgrind's profile format (valgrind.org/docs/manual/cl-format.html), for KCachegrind,
//! QCachegrind and callgrind_annotate: each function's self cost at its source lines (with
//! the profile's per-line costs, exact instructions or the stack sampler's times; lines of
//! code inlined from another file under `fi=`), else at its definition's line; and for each arc a `calls=` line at the
//! call site with the cost of those calls. The event is the profile's metric: `ns` (time),
//! `Ir` (instructions) or `Calls`.

use std::collections::HashMap;
use std::io::Write;

use super::EmitOptions;
use crate::meta::{Metric, Unit};
use crate::profile::{Function, LineCost, Profile, HOST};

/// Writes `profile` as a callgrind file.
pub(super) fn write(
    profile: &Profile,
    _options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut writer = Callgrind::of(profile);
    writer.header(out)?;
    writer.host(out)?;
    for f in &profile.functions {
        writer.function(out, f)?;
    }
    Ok(())
}

/// A profile as callgrind sees it: its functions by name, each one's outgoing arcs and
/// per-line costs, and the names written so far.
struct Callgrind<'a> {
    metric: Metric,
    profile: &'a Profile,
    by_name: HashMap<&'a str, &'a Function>,
    outgoing: HashMap<&'a str, Vec<&'a crate::profile::Arc>>,
    lines: HashMap<&'a str, Vec<&'a LineCost>>,
    names: Names,
}

impl<'a> Callgrind<'a> {
    fn of(profile: &'a Profile) -> Callgrind<'a> {
        let mut outgoing: HashMap<&str, Vec<_>> = HashMap::new();
        for arc in &profile.arcs {
            outgoing.entry(arc.caller.as_str()).or_default().push(arc);
        }
        let mut lines: HashMap<&str, Vec<_>> = HashMap::new();
        for l in &profile.lines {
            lines.entry(l.function.as_str()).or_default().push(l);
        }
        Callgrind {
            metric: profile.metric,
            profile,
            by_name: profile
                .functions
                .iter()
                .map(|f| (f.name.as_str(), f))
                .collect(),
            outgoing,
            lines,
            names: Names::default(),
        }
    }

    /// The header: the event (the profile's metric) and the summary.
    fn header(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let (event, label) = match self.metric.facts().unit {
            Unit::Nanoseconds => ("ns", "Wall time (ns)"),
            Unit::Instructions => ("Ir", "Executed wasm instructions"),
            Unit::Calls => ("Calls", "Calls"),
        };
        let p = self.profile;
        writeln!(out, "# callgrind format")?;
        writeln!(out, "version: 1")?;
        writeln!(out, "creator: cargo-wasmprof {}", env!("CARGO_PKG_VERSION"))?;
        writeln!(out, "cmd: {}", p.modules.join(" "))?;
        writeln!(out, "positions: line")?;
        writeln!(out, "event: {event} : {label}")?;
        writeln!(out, "events: {event}")?;
        let total: u64 = p.functions.iter().map(|f| f.own_weight(self.metric)).sum();
        writeln!(out, "summary: {total}")
    }

    /// The host, as a function that calls the exports.
    fn host(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        let Some(arcs) = self.outgoing.get(HOST).cloned() else {
            return Ok(());
        };
        writeln!(out)?;
        writeln!(out, "fl={}", self.names.file("???"))?;
        writeln!(out, "fn={}", self.names.function(HOST))?;
        writeln!(out, "0 0")?;
        for arc in arcs {
            self.call(out, arc, 0)?;
        }
        Ok(())
    }

    /// One function: its self cost at its lines (or its definition's line), then its
    /// calls at their sites.
    fn function(&mut self, out: &mut dyn Write, f: &Function) -> std::io::Result<()> {
        let line = f.line.unwrap_or(0);
        let home = f.file.as_deref().unwrap_or("???");
        writeln!(out)?;
        writeln!(out, "fl={}", self.names.file(home))?;
        writeln!(out, "fn={}", self.names.function(&f.name))?;
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
        let own = f.own_weight(self.metric);
        match self.lines.get(f.name.as_str()) {
            Some(costs) if self.metric.facts().unit != Unit::Calls => {
                for l in costs {
                    switch(out, &mut self.names, l.file.as_deref().unwrap_or(home))?;
                    writeln!(out, "{} {}", l.line, l.cost(self.metric))?;
                }
                // The thunk's own instructions of an import have no line, nor the time of
                // samples of its host code.
                let on_lines: u64 = costs.iter().map(|l| l.cost(self.metric)).sum();
                let rest = own.saturating_sub(on_lines);
                if rest > 0 {
                    switch(out, &mut self.names, home)?;
                    writeln!(out, "{line} {rest}")?;
                }
            }
            _ => writeln!(out, "{line} {own}")?,
        }
        for arc in self
            .outgoing
            .get(f.name.as_str())
            .cloned()
            .into_iter()
            .flatten()
        {
            let site = arc.sites.first();
            switch(
                out,
                &mut self.names,
                site.map_or(home, |s| s.pos.file.as_str()),
            )?;
            self.call(out, arc, site.map_or(line, |s| s.pos.line))?;
        }
        Ok(())
    }

    /// The `cfl=`/`cfn=`/`calls=` lines of one arc, made at line `at` of the caller.
    fn call(
        &mut self,
        out: &mut dyn Write,
        arc: &crate::profile::Arc,
        at: u32,
    ) -> std::io::Result<()> {
        let callee = self.by_name.get(arc.callee.as_str());
        let file = callee.and_then(|f| f.file.as_deref()).unwrap_or("???");
        let target_line = callee.and_then(|f| f.line).unwrap_or(0);
        let inclusive = match self.metric.facts().unit {
            Unit::Calls => arc.count,
            _ => arc.cost.get(self.metric).1,
        };
        writeln!(out, "cfl={}", self.names.file(file))?;
        writeln!(out, "cfn={}", self.names.function(&arc.callee))?;
        writeln!(out, "calls={} {target_line}", arc.count)?;
        writeln!(out, "{at} {inclusive}")
    }
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
