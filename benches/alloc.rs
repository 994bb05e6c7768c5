//! The allocation probes' cost: `cargo bench --bench alloc`.
//!
//! Builds fixtures/allocs' `churn` (a loop of allocations and frees, release, names and
//! DWARF kept) with the profiler's own build step, then runs it in the embedded wasmtime
//! uninstrumented and instrumented under the default metric and under the instructions
//! metric, each with its allocations recorded (`--allocations`) and without, side by side,
//! median of RUNS interleaved runs; prints each run time, its ratio to the plain run, and what
//! recording the allocations adds per allocator call (from the profile's exact counts);
//! then the same for a short run of a few hundred allocator calls, as a test binary makes.
//! Run times exclude compilation (the host times `_start` alone).

#[path = "common/mod.rs"]
mod common;

use common::median;

use std::path::Path;

use cargo_wasmprof::build::{build, BuildRequest, Mode};
use cargo_wasmprof::host::{Embedded, RunConfig};
use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::Metric;

const RUNS: usize = 15;
/// The churn's rounds: an allocation and, but for those the ring keeps, a free each.
const ROUNDS: &str = "1000000";
/// A short run's rounds, as many allocator calls as a test binary makes: what recording
/// them costs a run whatever its length (the fresh pages of the profiler's memory that
/// the live table touches) shows there.
const SHORT_ROUNDS: &str = "200";

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let request = BuildRequest {
        mode: Mode::Bench,
        manifest_path: Some(root.join("fixtures/allocs/Cargo.toml")),
        target_dir: Some(root.join("target/bench-fixtures")),
        ..BuildRequest::default()
    };
    let binaries = build(&request).expect("building fixtures/allocs").binaries;
    let churn = binaries
        .iter()
        .find(|b| b.target == "churn")
        .expect("the churn bench");
    let wasm = std::fs::read(&churn.path).unwrap();
    let variants: Vec<(String, Metric, bool)> = [Metric::Time, Metric::Instructions]
        .into_iter()
        .flat_map(|m| [(m, true), (m, false)])
        .map(|(m, alloc)| {
            let name = format!("{}{}", m.name(), if alloc { " --allocations" } else { "" });
            (name, m, alloc)
        })
        .collect();
    let instrumented: Vec<(instrument::Instrumented, Metric)> = variants
        .iter()
        .map(|&(_, metric, allocations)| {
            let options = Options {
                metric,
                allocations,
                ..Options::default()
            };
            (instrument::instrument(&wasm, &options).unwrap(), metric)
        })
        .collect();
    for rounds in [ROUNDS, SHORT_ROUNDS] {
        let config = RunConfig {
            inherit_stdio: false,
            ..RunConfig::new("churn.wasm", vec![rounds.into()], &churn.package_dir)
        };
        let runs = Runs::measure(&wasm, &instrumented, &config);
        runs.print(rounds, &variants);
    }
    println!("\n(median of {RUNS} runs each, interleaved; ratios are to the plain run)");
}

/// One workload's medians: plain, each variant's, and the allocator calls counted.
struct Runs {
    plain: f64,
    medians: Vec<f64>,
    allocs: u64,
    frees: u64,
    held: u64,
}

impl Runs {
    /// Runs `wasm` plain and each of `instrumented` with `config`, RUNS times interleaved.
    fn measure(
        wasm: &[u8],
        instrumented: &[(instrument::Instrumented, Metric)],
        config: &RunConfig,
    ) -> Runs {
        let wall = |wasm: &[u8], config: &RunConfig| {
            Embedded.run_module(wasm, config).unwrap().wall_ns as f64 / 1e9
        };
        let mut plain = Vec::new();
        let mut times = vec![Vec::new(); instrumented.len()];
        for _ in 0..RUNS {
            plain.push(wall(wasm, config));
            for (t, (done, _)) in times.iter_mut().zip(instrumented) {
                t.push(wall(&done.wasm, config));
            }
        }
        // The allocator calls recorded: from one profile's exact counts.
        let done = &instrumented[0].0;
        let profile = Embedded
            .run_module(&done.wasm, config)
            .unwrap()
            .profile(&done.meta, "churn")
            .unwrap();
        let total = profile.total_allocs();
        Runs {
            plain: median(plain),
            medians: times.into_iter().map(median).collect(),
            allocs: total.allocs,
            frees: total.frees,
            held: total.held,
        }
    }

    /// The table of run times and what recording the allocations adds.
    fn print(&self, rounds: &str, variants: &[(String, Metric, bool)]) {
        println!(
            "\nchurn {rounds}: {} allocations, {} frees, {} held at the end",
            self.allocs, self.frees, self.held
        );
        println!("{:<26} {:>10} {:>8}", "run", "time", "ratio");
        let plain = self.plain;
        println!("{:<26} {:>8.3}ms {:>7.2}x", "plain", plain * 1e3, 1.0);
        for ((name, _, _), t) in variants.iter().zip(&self.medians) {
            println!("{name:<26} {:>8.3}ms {:>7.2}x", t * 1e3, t / plain);
        }
        let events = (self.allocs + self.frees) as f64;
        for pair in self.medians.chunks(2).zip(variants.chunks(2)) {
            let ([with, without], [(name, ..), _]) = pair else {
                continue;
            };
            println!(
                "{name}: recording the allocations adds {:.1} us to the run, {:.1} ns per allocator call ({:+.1}% of the run)",
                (with - without) * 1e6,
                (with - without) * 1e9 / events,
                100.0 * (with - without) / without
            );
        }
    }
}
