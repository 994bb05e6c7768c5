//! The `.cpuprofile` format of Chrome DevTools, VS Code and `node --cpu-prof` (the DevTools
//! protocol's `Profiler.Profile`): a tree of nodes, each a call frame (function name, URL,
//! 0-based line and column) with its children, and samples, each a node and the time since
//! the previous sample in microseconds.
//!
//! The calling-context tree becomes the nodes, one per context; each node with self time
//! gets one sample that lasts its self time, the samples laid out depth first (a sample
//! lasts until the next one's time, the last until `endTime`), so that every node's self
//! and total time are the profile's and the flame chart draws the tree. It holds time only:
//! an instructions profile is refused, with the formats that take other units named.

use std::collections::HashMap;
use std::io::Write;

use serde_json::json;

use super::tree::Tree;
use super::EmitOptions;
use crate::meta::Unit;
use crate::profile::Profile;

/// Writes `profile` (a time profile) as a `.cpuprofile` (a threaded program's merged
/// profile: the format has one thread).
pub(super) fn write(
    profile: &Profile,
    options: &EmitOptions,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let unit = profile.metric.facts().unit;
    anyhow::ensure!(
        unit == Unit::Nanoseconds,
        "a .cpuprofile holds time, and this profile measures {}: write it as speedscope, \
         pprof or firefox, which keep its unit, or profile with the default metric, time",
        unit.name()
    );
    anyhow::ensure!(
        options.weight == super::Weight::Cost,
        "a .cpuprofile holds time: write bytes as speedscope, folded, a flame graph or pprof"
    );
    let tree = Tree::of(profile, options.weight)?;
    let mut scripts = Scripts::default();
    // Node ids are the frames' indices + 1 (V8's root is node 1).
    let nodes: Vec<serde_json::Value> = tree
        .frames
        .iter()
        .enumerate()
        .map(|(id, frame)| {
            let function = frame.function.map(|f| &profile.functions[f as usize]);
            let file = function.and_then(|f| f.file.as_deref());
            let line = function.and_then(|f| f.line);
            json!({
                "id": id + 1,
                "callFrame": {
                    "functionName": if id == 0 { "(root)" } else { frame.name },
                    "scriptId": scripts.id(file),
                    "url": file.unwrap_or(""),
                    "lineNumber": line.map_or(-1, |l| i64::from(l) - 1),
                    "columnNumber": if line.is_some() { 0 } else { -1 },
                },
                "hitCount": u64::from(frame.self_weight > 0),
                "children": frame.children.iter().map(|c| c + 1).collect::<Vec<_>>(),
            })
        })
        .collect();
    // One sample per frame with self time, depth first; each lasts its self time.
    let mut samples = Vec::new();
    let mut starts_us = Vec::new();
    let mut at_ns = 0u64;
    let mut visit = |id: usize, _depth: usize| {
        let weight = tree.frames[id].self_weight;
        if weight > 0 {
            samples.push(id + 1);
            starts_us.push(micros(at_ns));
            at_ns += weight;
        }
    };
    visit(0, 0);
    tree.preorder(&mut visit);
    let deltas: Vec<u64> = starts_us
        .iter()
        .scan(0, |previous, &start| {
            let delta = start - *previous;
            *previous = start;
            Some(delta)
        })
        .collect();
    let file = json!({
        "nodes": nodes,
        "startTime": 0,
        "endTime": micros(at_ns),
        "samples": samples,
        "timeDeltas": deltas,
    });
    serde_json::to_writer(&mut *out, &file)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Nanoseconds as the whole microseconds the format counts in (rounded, so that the
/// samples' sum stays the run's total).
fn micros(ns: u64) -> u64 {
    (ns + 500) / 1000
}

/// A script id for each source file, as V8 numbers the scripts it loads ("0" for none).
#[derive(Default)]
struct Scripts(HashMap<String, usize>);

impl Scripts {
    fn id(&mut self, file: Option<&str>) -> String {
        let Some(file) = file else {
            return "0".to_string();
        };
        let next = self.0.len() + 1;
        self.0.entry(file.to_string()).or_insert(next).to_string()
    }
}
