//! Hints never point at a refusal, for a core module (wasm32-wasip1) and a component
//! (wasm32-wasip2) under each metric: what the run, its report and `annotate` suggest, the
//! same `cargo wasmprof test` takes (`common::hints`).

use std::collections::BTreeSet;

use super::components::have_target;
use super::*;
use common::hints::{check_hints, Hint};

/// `setting` with `hint`'s flag in place of the one it names, if `setting` has it.
fn with_hint(setting: &[&str], hint: &Hint) -> Vec<String> {
    let mut args: Vec<String> = setting.iter().map(|s| s.to_string()).collect();
    if let Some(at) = args.iter().position(|a| *a == hint[0]) {
        let valued = at + 1 < args.len() && !args[at + 1].starts_with('-');
        args.drain(at..at + 1 + usize::from(valued && hint.len() > 1));
    }
    args.extend(hint.iter().cloned());
    args
}

#[test]
fn every_hint_a_core_modules_or_a_components_profile_gives_is_taken() {
    let dir = copy_fixture("calls");
    let mut settings: Vec<(&str, Vec<&str>)> = ["time", "calls", "exact-time", "instructions"]
        .iter()
        .map(|m| ("wasm32-wasip1", vec!["--metric", m]))
        .collect();
    settings.push(("wasm32-wasip1", vec!["--metric", "calls", "--allocations"]));
    if have_target("wasm32-wasip2") {
        settings.push(("wasm32-wasip2", vec!["--metric", "time"]));
        settings.push(("wasm32-wasip2", vec!["--metric", "calls", "--allocations"]));
    }
    let mut all = BTreeSet::new();
    for (target, setting) in &settings {
        let test = |args: &[String]| {
            output(
                wasmprof()
                    .args(["wasmprof", "test", "--lib", "--target", target])
                    .args(args)
                    .current_dir(dir.path()),
            )
        };
        let args: Vec<String> = setting.iter().map(|s| s.to_string()).collect();
        let out = test(&args);
        assert!(out.status.success(), "{setting:?}: {}", stderr(&out));
        let file = match *target {
            "wasm32-wasip1" => dir.path().join("target/wasmprof/calls-calls-lib.json"),
            _ => dir
                .path()
                .join(format!("target/wasmprof/{target}/calls-calls-lib.json")),
        };
        let said = format!("{}{}", stdout(&out), stderr(&out));
        let hints = check_hints(&file, &said, |hint| Some(test(&with_hint(setting, hint))));
        all.extend(hints);
    }
    // The check saw the hints these settings give: exact costs, and more rows.
    let seen = |h: &[&str]| {
        all.iter()
            .any(|x| x.iter().map(String::as_str).eq(h.iter().copied()))
    };
    assert!(seen(&["--top", "all"]), "{all:?}");
}
