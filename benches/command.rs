//! The whole command's cost: `cargo bench --bench command`.
//!
//! What a user waits for: `cargo wasmprof run FILE ARGS` (instrumenting, from the cache
//! after the first run; compiling, from wasmtime's cache likewise; the run, sampled; the
//! profile decoded and written) against `cargo wasmprof run --no-instrument FILE ARGS` (the
//! plain module in the same wasmtime), side by side, interleaved, the median of each, the
//! ratio printed: at least MIN_RUNS pairs, more for short programs, until their plain runs
//! add up to PLAIN_SECONDS (at most MAX_RUNS), since a run of 15 ms moves by a millisecond
//! or two on these machines. The programs: fixtures/parts (all three parts, and its
//! recursion alone, a naive fib(31)), fixtures/mixed, the loop kernels of
//! fixtures/kernels, and fixtures/p3, a WASI 0.3 command (a naive fib(31), and a loop of
//! calls) (release builds, names and DWARF kept). An argument runs only the programs whose
//! name holds it (`cargo bench --bench command -- p3`).

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use cargo_wasmprof::build::{Mode, Target};
use common::median;

const MIN_RUNS: usize = 9;
const MAX_RUNS: usize = 61;
const PLAIN_SECONDS: f64 = 1.5;

/// The kernels without calls in their loops (fixtures/kernels/kernels.txt).
const LOOP_KERNELS: [&str; 4] = [
    "multiply-int",
    "vector-multiply-double",
    "sum-int",
    "image-convolve",
];

fn main() {
    let parts = common::bench_binary("parts", "parts");
    let mixed = common::bench_binary("mixed", "mixed");
    let kernels = common::bench_binary("kernels", "kernels");
    let p3 = common::fixture_for("p3", Mode::Run, Target::Wasip2);
    let p3 = &p3.first().expect("fixtures/p3 builds a component").path;
    let mut workloads: Vec<(String, &Path, Vec<&str>)> = vec![
        ("parts: all".into(), &parts.path, vec!["all"]),
        ("parts: fib(31)".into(), &parts.path, vec!["recursion"]),
        ("mixed: all".into(), &mixed.path, vec!["all"]),
    ];
    for kernel in LOOP_KERNELS {
        workloads.push((
            format!("kernel {kernel}"),
            &kernels.path,
            vec!["--bench", kernel],
        ));
    }
    workloads.push(("p3 command: fib(31)".into(), p3, vec!["fib", "31"]));
    workloads.push(("p3 command: loop".into(), p3, vec!["loop", "30000000"]));
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    workloads.retain(|(name, ..)| only.as_ref().is_none_or(|o| name.contains(o.as_str())));
    let work = tempfile::tempdir().unwrap();
    println!(
        "whole `cargo wasmprof run` against `run --no-instrument`, medians of interleaved runs"
    );
    println!(
        "{:<34} {:>10} {:>10} {:>8} {:>6}",
        "program", "plain", "profiled", "ratio", "runs"
    );
    let mut kernel_logs = Vec::new();
    for (name, wasm, args) in &workloads {
        let profile = work.path().join("profile.json");
        // Once each, so that both find their compiled code (and the instrumented module) in
        // the caches, as on every run after a first.
        run(wasm, args, None);
        run(wasm, args, Some(&profile));
        let (mut plain, mut profiled) = (Vec::<f64>::new(), Vec::new());
        while plain.len() < MIN_RUNS
            || (plain.iter().sum::<f64>() < PLAIN_SECONDS && plain.len() < MAX_RUNS)
        {
            plain.push(run(wasm, args, None));
            profiled.push(run(wasm, args, Some(&profile)));
        }
        let runs = plain.len();
        let (plain, profiled) = (median(plain), median(profiled));
        if name.starts_with("kernel ") {
            kernel_logs.push((profiled / plain).ln());
        }
        println!(
            "{name:<34} {:>8.1}ms {:>8.1}ms {:>7.2}x {runs:>6}",
            plain * 1e3,
            profiled * 1e3,
            profiled / plain
        );
    }
    if kernel_logs.is_empty() {
        return;
    }
    println!(
        "{:<34} {:>10} {:>10} {:>7.2}x",
        "geometric mean, loop kernels",
        "",
        "",
        (kernel_logs.iter().sum::<f64>() / kernel_logs.len() as f64).exp()
    );
}

/// Seconds of one `cargo wasmprof run` of `wasm` with `args`: profiled into `profile`, or
/// plain.
fn run(wasm: &Path, args: &[&str], profile: Option<&Path>) -> f64 {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cargo-wasmprof"));
    command.args(["wasmprof", "run", "--quiet"]);
    match profile {
        Some(file) => command.args(["--no-report", "-o"]).arg(file),
        None => command.arg("--no-instrument"),
    };
    let started = Instant::now();
    let status = command
        .arg(wasm)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("cargo-wasmprof runs");
    let seconds = started.elapsed().as_secs_f64();
    assert!(status.success(), "{} {args:?}", wasm.display());
    seconds
}
