//! Overhead under node: `cargo bench --bench node` (needs emcc, make and node).
//!
//! Builds fixtures/emcc with its Makefile five times, in a temporary copy: with plain emcc,
//! and with wasmprof-emcc under each metric (WASMPROF_METRIC = time, exact-time,
//! instructions, calls).
//! Then, side by side in one run and with the same node, median of RUNS interleaved runs:
//! - the C kernels (kernels.c), timed by the program itself around the kernel, so that
//!   node's start-up and compilation stay out;
//! - the fixture programs calls, shapes and threads (-pthread: a pool of three workers,
//!   each with a state module of its own), timed as whole node processes (start-up
//!   included, as a user running them sees it).
//!
//! Every build links with `-g` (kernels.c's Makefile rule says why), so the plain and the
//! profiled modules differ by the instrumentation alone. Plain runs need node's
//! `--no-experimental-fetch` (Debian's emscripten 3.1.6 glue fetches the .wasm otherwise);
//! every run gets it.

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

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Runs `node build/program.js args` in `dir`; returns the kernel's own time when it prints
/// one, else the process's wall time (ms).
fn run(dir: &Path, build: &str, program: &str, args: &[&str]) -> f64 {
    let started = Instant::now();
    let out = Command::new("node")
        .current_dir(dir)
        .arg("--no-experimental-fetch")
        .arg(format!("{build}/{program}.js"))
        .args(args)
        .env("WASMPROF_OUT", dir.join(format!("{build}-{program}.json")))
        .output()
        .expect("node runs");
    let wall = started.elapsed().as_secs_f64() * 1e3;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{build}/{program}.js {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let builds = builds();
    for (name, cc, cxx, metric) in &builds {
        let mut make = Command::new("make");
        make.current_dir(&dir)
            .args(["-s", "all", "kernels"])
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

    let node_version = Command::new("node").arg("--version").output().unwrap();
    println!(
        "node {}; median of {RUNS} interleaved runs; ratios are profiled / plain",
        String::from_utf8_lossy(&node_version.stdout).trim()
    );
    print!("{:<40} {:>10}", "workload", "plain");
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
    let mut kernel_logs = vec![0.0f64; builds.len() - 1];
    let mut kernel_count = 0;
    for (label, program, args) in &workloads {
        let mut times = vec![Vec::new(); builds.len()];
        for _ in 0..RUNS {
            for (t, (name, ..)) in times.iter_mut().zip(&builds) {
                t.push(run(&dir, name, program, args));
            }
        }
        let medians: Vec<f64> = times.into_iter().map(median).collect();
        print!("{label:<40} {:>8.2}ms", medians[0]);
        let is_kernel = *program == "kernels" && args != &["fib"];
        for (k, m) in medians[1..].iter().enumerate() {
            let ratio = m / medians[0];
            if is_kernel {
                kernel_logs[k] += ratio.ln();
            }
            print!(" {ratio:>12.2}x");
        }
        if is_kernel {
            kernel_count += 1;
        }
        println!();
    }
    print!("{:<40} {:>10}", "geometric mean, kernels (no fib)", "");
    for sum in kernel_logs {
        print!(" {:>12.2}x", (sum / kernel_count as f64).exp());
    }
    println!();
}
