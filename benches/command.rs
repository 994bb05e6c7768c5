//! The whole command's cost: `cargo bench --bench command`.
//!
//! What a user waits for: `cargo wasmprof run FILE ARGS` (instrumenting, from the cache
//! after the first run; compiling, from wasmtime's cache likewise; the run, sampled; the
//! profile decoded and written) against `cargo wasmprof run --no-instrument FILE ARGS` (the
//! plain module in the same wasmtime), side by side, interleaved, median of RUNS each, the
//! ratio printed. The programs: fixtures/parts (all three parts, and its recursion alone, a
//! naive fib(31)), fixtures/mixed, and the loop kernels of fixtures/kernels (release builds,
//! names and DWARF kept).

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use common::median;

const RUNS: usize = 9;

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
    let work = tempfile::tempdir().unwrap();
    println!("whole `cargo wasmprof run` against `run --no-instrument`, median of {RUNS} interleaved runs");
    println!(
        "{:<34} {:>10} {:>10} {:>8}",
        "program", "plain", "profiled", "ratio"
    );
    let mut logs = Vec::new();
    for (name, wasm, args) in &workloads {
        let profile = work.path().join("profile.json");
        // Once each, so that both find their compiled code (and the instrumented module) in
        // the caches, as on every run after a first.
        run(wasm, args, None);
        run(wasm, args, Some(&profile));
        let (mut plain, mut profiled) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            plain.push(run(wasm, args, None));
            profiled.push(run(wasm, args, Some(&profile)));
        }
        let (plain, profiled) = (median(plain), median(profiled));
        logs.push((profiled / plain).ln());
        println!(
            "{name:<34} {:>8.1}ms {:>8.1}ms {:>7.2}x",
            plain * 1e3,
            profiled * 1e3,
            profiled / plain
        );
    }
    let kernels: Vec<f64> = logs[3..].to_vec();
    println!(
        "{:<34} {:>10} {:>10} {:>7.2}x",
        "geometric mean, loop kernels",
        "",
        "",
        (kernels.iter().sum::<f64>() / kernels.len() as f64).exp()
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
