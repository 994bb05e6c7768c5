//! The `.cpuprofile` view (Chrome DevTools', VS Code's, `node --cpu-prof`'s): the format's
//! shape, a node per calling context with its function's file and line, each function's
//! self time in the samples, and speedscope's page importing it.

use std::collections::{HashMap, HashSet};

use super::*;
use serde_json::Value;

/// An exact-time profile whose functions have source positions (the WAT fixture has no
/// DWARF: each function gets a file and line of its own, which the view must carry).
fn placed_profile() -> Profile {
    let mut p = profile(N, Metric::ExactTime);
    for (i, f) in p.functions.iter_mut().enumerate() {
        f.file = Some(format!("src/part{i}.c"));
        f.line = Some(10 + i as u32);
    }
    p
}

/// The format's shape, as DevTools reads it: a root named `(root)`, unique node ids,
/// every child and every sample a node, each node below the root the child of one, one
/// time delta per sample, and samples inside `startTime..endTime`. Returns each node's
/// parent.
fn check_shape(file: &Value) -> HashMap<u64, u64> {
    let nodes = file["nodes"].as_array().expect("nodes");
    let ids: HashSet<u64> = nodes.iter().map(|n| n["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), nodes.len(), "unique ids");
    assert_eq!(nodes[0]["callFrame"]["functionName"], "(root)");
    let mut parent = HashMap::new();
    for node in nodes {
        for field in [
            "functionName",
            "scriptId",
            "url",
            "lineNumber",
            "columnNumber",
        ] {
            assert!(!node["callFrame"][field].is_null(), "{field} in {node}");
        }
        for child in node["children"].as_array().unwrap() {
            let child = child.as_u64().unwrap();
            assert!(ids.contains(&child), "child {child} is a node");
            let before = parent.insert(child, node["id"].as_u64().unwrap());
            assert!(before.is_none(), "node {child} has one parent");
        }
    }
    assert_eq!(
        parent.len(),
        nodes.len() - 1,
        "every node but the root has a parent"
    );
    let samples = file["samples"].as_array().unwrap();
    let deltas = file["timeDeltas"].as_array().unwrap();
    assert_eq!(samples.len(), deltas.len());
    assert!(samples.iter().all(|s| ids.contains(&s.as_u64().unwrap())));
    let span: u64 = deltas.iter().map(|d| d.as_u64().unwrap()).sum();
    let (start, end) = (file["startTime"].as_u64(), file["endTime"].as_u64());
    assert!(start.unwrap() + span <= end.unwrap());
    parent
}

#[test]
fn cpuprofile_nodes_are_the_contexts_and_samples_their_self_time() {
    let p = placed_profile();
    let file: Value = serde_json::from_slice(&render(&p, Format::Cpuprofile)).unwrap();
    check_shape(&file);
    let nodes = file["nodes"].as_array().unwrap();
    // A node per calling context (the root is the host's).
    assert_eq!(nodes.len(), p.contexts.len());
    let mut name_of = HashMap::new();
    for node in &nodes[1..] {
        let frame = &node["callFrame"];
        let name = frame["functionName"].as_str().unwrap();
        let f = p.function_named(name).expect("a function of the profile");
        assert_eq!(frame["url"], f.file.clone().unwrap().as_str());
        assert_eq!(
            frame["lineNumber"],
            i64::from(f.line.unwrap()) - 1,
            "0-based"
        );
        name_of.insert(node["id"].as_u64().unwrap(), name);
    }
    // Each sample lasts until the next one's time (the last until endTime).
    let samples: Vec<u64> = file["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let mut starts = Vec::new();
    let mut at = file["startTime"].as_u64().unwrap();
    for delta in file["timeDeltas"].as_array().unwrap() {
        at += delta.as_u64().unwrap();
        starts.push(at);
    }
    starts.push(file["endTime"].as_u64().unwrap());
    let mut self_us: HashMap<&str, (u64, u64)> = HashMap::new();
    for (i, id) in samples.iter().enumerate() {
        let entry = self_us.entry(name_of[id]).or_default();
        entry.0 += starts[i + 1] - starts[i];
        entry.1 += 1;
    }
    // Each function's self time, to the microsecond each of its samples rounds.
    for f in &p.functions {
        let (us, count) = self_us.get(f.name.as_str()).copied().unwrap_or_default();
        let exact = f.cost.self_ns as f64 / 1e3;
        assert!(
            (us as f64 - exact).abs() <= count as f64 + 1.0,
            "{}: {us} us in {count} samples, {exact} us in the profile",
            f.name
        );
    }
    // Every context's own time, the root's (the host's, outside any function) too.
    let total_ns: u64 = p.contexts.iter().map(|c| c.cost.self_ns).sum();
    assert_eq!(
        file["endTime"],
        (total_ns + 500) / 1000,
        "the run's total, rounded"
    );
}

/// A .cpuprofile holds time only: an instructions profile is refused with what to use.
#[test]
fn cpuprofile_refuses_instructions() {
    let error = Format::Cpuprofile
        .render(&profile(N, Metric::Instructions), &EmitOptions::default())
        .expect_err("instructions are not time");
    let error = error.to_string();
    assert!(error.contains("measures instructions"), "{error}");
    assert!(error.contains("the default metric, time"), "{error}");
}

/// speedscope's page imports the file as a Chrome profile: the title names it, which the
/// page does only once an import has succeeded.
#[test]
fn speedscope_page_imports_the_cpuprofile() {
    if !have(&["chromium", "npm"]) {
        return;
    }
    let bytes = render(&placed_profile(), Format::Cpuprofile);
    let dom = stacks::speedscope_dom("p.cpuprofile", &bytes);
    assert!(
        dom.contains("<title>p.cpuprofile - speedscope</title>"),
        "{dom:.3000}"
    );
}
