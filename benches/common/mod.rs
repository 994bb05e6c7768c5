//! What the benchmarks share: medians, and the fixtures built as the profiler builds.
#![allow(dead_code)] // each benchmark uses its own subset

use std::path::Path;

use cargo_wasmprof::build::{build, BuildRequest, Mode, Target, TestBinary};

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// fixtures/`name`'s test or bench binaries (`mode`), built with the profiler's own build
/// step (names and DWARF kept) into target/bench-fixtures.
pub fn fixture(name: &str, mode: Mode) -> Vec<TestBinary> {
    fixture_for(name, mode, Target::default())
}

/// [`fixture`], for `target`; a program to run or serve in release mode, as the benches are.
pub fn fixture_for(name: &str, mode: Mode, target: Target) -> Vec<TestBinary> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let release = match mode {
        Mode::Serve | Mode::Run => vec!["--release".to_string()],
        _ => Vec::new(),
    };
    let request = BuildRequest {
        mode,
        target,
        cargo_args: release,
        manifest_path: Some(root.join("fixtures").join(name).join("Cargo.toml")),
        target_dir: Some(root.join("target/bench-fixtures")),
        ..BuildRequest::default()
    };
    build(&request)
        .unwrap_or_else(|e| panic!("building fixtures/{name}: {e}"))
        .binaries
}

/// fixtures/`name`'s bench binary `target`.
pub fn bench_binary(name: &str, target: &str) -> TestBinary {
    fixture(name, Mode::Bench)
        .into_iter()
        .find(|b| b.kind == "bench" && b.target == target)
        .unwrap_or_else(|| panic!("fixtures/{name} has no bench {target}"))
}
