//! Overhead benchmark: `cargo bench --bench overhead`.
//!
//! Builds the fixture crates' test binaries with the profiler's own build step, then for
//! each workload measures, side by side in one run and in the same embedded wasmtime:
//! - the instrumenter's time on the binary (for the time and the calls metric), against a
//!   plain walrus parse + emit of it;
//! - the program's run time uninstrumented and instrumented under each metric (sampled
//!   time; exact time with the default clock, the TSC where it is invariant, and with
//!   `Instant`; instructions; calls), median of RUNS runs each, interleaved, and the ratios
//!   to the plain run;
//! - the accuracy of both times: the sum of all self times against the plain run time, and
//!   the inclusive time shares of fixtures/parts' three parts (a loop without calls, 60 M
//!   small calls, a recursion) against their true shares, each part's plain run timed
//!   alone.
//!
//! Run times exclude compilation (the host times `_start` alone).

use std::path::{Path, PathBuf};
use std::time::Instant;

use cargo_wasmprof::build::{Mode, TestBinary};
use cargo_wasmprof::calibrate;
use cargo_wasmprof::clock::ClockChoice;
use cargo_wasmprof::host::{Embedded, RunConfig};
use cargo_wasmprof::instrument::{self, Options};
use cargo_wasmprof::meta::{Metric, Sampler};
use cargo_wasmprof::profile::Profile;
use cargo_wasmprof::sampling;

#[path = "common/mod.rs"]
mod common;
#[path = "overhead/epoch.rs"]
mod epoch;

use common::{fixture, median};

const RUNS: usize = 7;

/// The groups whose ratios are summarized (geometric means), as the targets are stated.
const GROUPS: [&str; 4] = ["kernels", "fib", "test suites", "threads"];

struct Workload {
    name: String,
    group: &'static str,
    wasm: Vec<u8>,
    args: Vec<String>,
    dir: PathBuf,
}

impl Workload {
    fn binary(
        name: impl Into<String>,
        group: &'static str,
        binary: &TestBinary,
        args: &[&str],
    ) -> Workload {
        Workload {
            name: name.into(),
            group,
            wasm: std::fs::read(&binary.path).expect("test binary"),
            args: args.iter().map(|a| a.to_string()).collect(),
            dir: binary.package_dir.clone(),
        }
    }
}

/// The kernels of fixtures/kernels, one a line, as its bench binary reads them.
const KERNELS: &str = include_str!("../fixtures/kernels/kernels.txt");

fn seconds(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// fixtures/threads' binary for wasm32-wasip1-threads (release, names and DWARF kept):
/// three std threads and rayon's pool, each thread an instance of its own.
fn threaded_binary(root: &Path) -> Vec<u8> {
    let target_dir = root.join("target/bench-fixtures");
    let status = std::process::Command::new("cargo")
        .args([
            "build",
            "--release",
            "--quiet",
            "--target",
            "wasm32-wasip1-threads",
        ])
        .arg("--manifest-path")
        .arg(root.join("fixtures/threads/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .env("CARGO_PROFILE_RELEASE_DEBUG", "true")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building fixtures/threads");
    std::fs::read(target_dir.join("wasm32-wasip1-threads/release/threads.wasm"))
        .expect("the threads binary")
}

fn main() {
    // `cargo bench` passes --bench; the one filter is `parts`, the parts' accuracy alone
    // (`cargo bench --bench overhead -- parts`).
    if std::env::args().skip(1).any(|a| a == "parts") {
        parts_accuracy();
        return;
    }
    let calls = fixture("calls", Mode::Test);
    let lib = calls
        .iter()
        .find(|b| b.kind == "lib")
        .expect("calls lib tests");
    let integration = calls
        .iter()
        .find(|b| b.kind == "test")
        .expect("calls integration tests");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kernels = fixture("kernels", Mode::Bench);
    let kernels = kernels
        .iter()
        .find(|b| b.kind == "bench")
        .expect("the kernels bench");
    let mut workloads: Vec<Workload> = KERNELS
        .lines()
        .map(|k| Workload::binary(format!("kernel {k}"), "kernels", kernels, &["--bench", k]))
        .collect();
    workloads.extend([
        Workload {
            name: "fib(27) in WAT (call-dense)".into(),
            group: "fib",
            wasm: wat::parse_file(root.join("fixtures/wat/fib.wat")).expect("fib.wat"),
            args: vec![],
            dir: root.to_path_buf(),
        },
        Workload::binary("calls: all unit tests", "test suites", lib, &[]),
        Workload::binary(
            "calls: fib_of_20 only",
            "test suites",
            lib,
            &["--exact", "tests::fib_of_20"],
        ),
        Workload::binary("calls: integration test", "test suites", integration, &[]),
        Workload {
            name: "threads: 3 workers + rayon".into(),
            group: "threads",
            wasm: threaded_binary(root),
            args: vec!["200000".into()],
            dir: root.join("fixtures/threads"),
        },
    ]);

    // The instrumenter's speed, against a plain walrus round trip of the same module.
    // The default metric (time) and the calls metric: their probes differ in size.
    let instrument_metrics = [Metric::Time, Metric::Calls];
    print!("{:<30} {:>8} {:>11}", "workload", "size", "walrus rt");
    for metric in instrument_metrics {
        print!(" {:>13} {:>6}", format!("inst. {}", metric.name()), "ratio");
    }
    println!();
    // Each module once; WASMPROF_BENCH_LARGE=FILE.wasm adds a large module of your own
    // (BENCHMARKS.md used a 52.6 MB debug test binary).
    let mut modules: Vec<(String, Vec<u8>)> = Vec::new();
    for w in &workloads {
        if !modules.iter().any(|(_, wasm)| *wasm == w.wasm) {
            modules.push((w.name.clone(), w.wasm.clone()));
        }
    }
    if let Some(large) = std::env::var_os("WASMPROF_BENCH_LARGE") {
        let wasm = std::fs::read(&large).expect("WASMPROF_BENCH_LARGE names a module");
        let name = Path::new(&large)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        modules.push((name, wasm));
    }
    for (name, wasm) in &modules {
        let round_trip = median(
            (0..RUNS)
                .map(|_| seconds(|| drop(walrus::Module::from_buffer(wasm).unwrap().emit_wasm())))
                .collect(),
        );
        print!(
            "{:<30} {:>6.1}MB {:>9.1}ms",
            name,
            wasm.len() as f64 / 1e6,
            round_trip * 1e3
        );
        for metric in instrument_metrics {
            let options = Options {
                metric,
                ..Options::default()
            };
            let instrument_time = median(
                (0..RUNS)
                    .map(|_| seconds(|| drop(instrument::instrument(wasm, &options).unwrap())))
                    .collect(),
            );
            print!(
                " {:>11.1}ms {:>5.2}x",
                instrument_time * 1e3,
                instrument_time / round_trip
            );
        }
        println!();
    }

    // Run time, uninstrumented and under each metric (and clock, sampler, and with the
    // contexts counted), interleaved.
    let with = |metric, contexts, sampler, clock| {
        let options = Options {
            metric,
            contexts,
            sampler,
            ..Options::default()
        };
        (options, clock)
    };
    let (stacks, word, auto) = (Sampler::Stacks, Sampler::Word, ClockChoice::Auto);
    let configs = [
        ("time", with(Metric::Time, false, stacks, auto)),
        ("time --contexts", with(Metric::Time, true, stacks, auto)),
        ("time/word", with(Metric::Time, true, word, auto)),
        ("exact-time", with(Metric::ExactTime, true, stacks, auto)),
        (
            "exact/Instant",
            with(Metric::ExactTime, true, stacks, ClockChoice::Instant),
        ),
        (
            "instructions",
            with(Metric::Instructions, true, stacks, auto),
        ),
        ("calls", with(Metric::Calls, false, stacks, auto)),
    ];
    println!();
    print!("{:<30} {:>10}", "workload", "plain run");
    for (name, _) in &configs {
        print!(" {name:>15}");
    }
    println!();
    // Per group: the sum of the logarithms of each configuration's ratios, and the count.
    let mut log_sums = [[0.0f64; 7]; GROUPS.len()];
    let mut counts = [0usize; GROUPS.len()];
    for w in &workloads {
        let plain_config = RunConfig {
            inherit_stdio: false,
            ..RunConfig::new("bench.wasm", w.args.clone(), &w.dir)
        };
        let variants: Vec<(Vec<u8>, RunConfig)> = configs
            .iter()
            .map(|(_, (options, clock))| {
                let clock = *clock;
                let wasm = instrument::instrument(&w.wasm, options).unwrap().wasm;
                (
                    wasm,
                    RunConfig {
                        clock,
                        sample_interval: None,
                        ..plain_config.clone()
                    },
                )
            })
            .collect();
        let wall = |wasm: &[u8], config: &RunConfig| {
            Embedded.run_module(wasm, config).unwrap().wall_ns as f64 / 1e9
        };
        let mut plain = Vec::new();
        let mut profiled = vec![Vec::new(); configs.len()];
        for _ in 0..RUNS {
            plain.push(wall(&w.wasm, &plain_config));
            for (times, (wasm, config)) in profiled.iter_mut().zip(&variants) {
                times.push(wall(wasm, config));
            }
        }
        let plain = median(plain);
        let group = GROUPS
            .iter()
            .position(|g| *g == w.group)
            .expect("a known group");
        counts[group] += 1;
        print!("{:<30} {:>8.2}ms", w.name, plain * 1e3);
        for (k, times) in profiled.into_iter().enumerate() {
            let ratio = median(times) / plain;
            log_sums[group][k] += ratio.ln();
            print!(" {ratio:>14.2}x");
        }
        println!();
    }
    for (g, name) in GROUPS.iter().enumerate() {
        print!("{:<30} {:>10}", format!("geometric mean, {name}"), "");
        for sum in log_sums[g] {
            print!(" {:>14.2}x", (sum / counts[g].max(1) as f64).exp());
        }
        println!();
    }
    println!("\n(median of {RUNS} runs each; ratios are profiled / plain run time)");

    accuracy(&workloads);
    parts_accuracy();
}

fn self_sum(p: &Profile) -> f64 {
    p.functions
        .iter()
        .map(|f| f.cost.self_ns as f64)
        .sum::<f64>()
}

/// Instruments `wasm` for `metric`.
fn instrumented(wasm: &[u8], metric: Metric) -> instrument::Instrumented {
    let options = Options {
        metric,
        ..Options::default()
    };
    instrument::instrument(wasm, &options).unwrap()
}

/// Accuracy of both times: the sum of all self times against the plain run time; exact
/// time as measured and with the probes' cost subtracted.
fn accuracy(workloads: &[Workload]) {
    let cost = calibrate::probe_cost(ClockChoice::Auto).unwrap();
    println!(
        "\nprobe cost measured at start-up: {:.1} ns in the callee, {:.1} ns in the caller, per call",
        cost.in_callee_ns, cost.in_caller_ns
    );
    println!(
        "{:<30} {:>10} {:>12} {:>14} {:>16}",
        "workload", "plain run", "sampled", "exact (raw)", "(compensated)"
    );
    for w in workloads {
        let config = RunConfig {
            inherit_stdio: false,
            ..RunConfig::new("bench.wasm", w.args.clone(), &w.dir)
        };
        let exact = instrumented(&w.wasm, Metric::ExactTime);
        let sampled = instrumented(&w.wasm, Metric::Time);
        let (mut plain, mut sampled_sums, mut raw, mut compensated) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            plain.push(Embedded.run_module(&w.wasm, &config).unwrap().wall_ns as f64);
            let run = |done: &instrument::Instrumented| {
                Embedded
                    .run_module(&done.wasm, &config)
                    .unwrap()
                    .profile(&done.meta, "bench")
                    .unwrap()
            };
            sampled_sums.push(self_sum(&run(&sampled)));
            let mut p = run(&exact);
            raw.push(self_sum(&p));
            let _ = p.compensate(cost);
            compensated.push(self_sum(&p));
        }
        let plain = median(plain);
        println!(
            "{:<30} {:>8.2}ms {:>11.2}x {:>13.2}x {:>15.2}x",
            w.name,
            plain / 1e6,
            median(sampled_sums) / plain,
            median(raw) / plain,
            median(compensated) / plain
        );
    }
    println!("(sum of self times / plain run time; 1.00x is exact)");
}

/// The parts of fixtures/parts (a loop without calls, 60 M small calls, a recursion) and of
/// fixtures/mixed (sorting, a hash map, libm, formatting, a tree of boxes): each part's
/// true share of the whole (from plain runs of each part alone, less a run of none),
/// against the inclusive time share of its function in profiles of all of them: the default
/// (calls counted per function, time from the stack sampler), `--contexts` (the context
/// tree's probes, the stack sampler's time placed in it), the word sampler, exact time
/// (compensated), and wasmtime's own epoch sampler on the plain module; then the stack
/// sampler's own cost per sample.
fn parts_accuracy() {
    const PARTS: [(&str, &str); 3] = [
        ("loop", "parts::part_loop"),
        ("calls", "parts::part_calls"),
        ("recursion", "parts::part_recursion"),
    ];
    const MIXED: [(&str, &str); 5] = [
        ("sort", "mixed::part_sort"),
        ("hash", "mixed::part_hash"),
        ("float", "mixed::part_float"),
        ("format", "mixed::part_format"),
        ("tree", "mixed::part_tree"),
    ];
    let (wasm, config) = accuracy_of("parts", &PARTS);
    accuracy_of("mixed", &MIXED);
    stack_sample_cost(&wasm, &config);
}

/// The ways the accuracy table profiles a program: a name and the options.
fn accuracy_variants() -> Vec<(&'static str, Options)> {
    let time = |contexts, sampler| Options {
        metric: Metric::Time,
        contexts,
        sampler,
        ..Options::default()
    };
    vec![
        ("time", time(false, Sampler::Stacks)),
        ("time --contexts", time(true, Sampler::Stacks)),
        ("time, word", time(true, Sampler::Word)),
        (
            "exact, compens.",
            Options {
                metric: Metric::ExactTime,
                ..Options::default()
            },
        ),
    ]
}

/// The accuracy table of fixtures/`fixture`'s bench binary, whose `parts` (an argument and
/// the function that does it) run one by one or `all` together; the module, and the run
/// of its first part alone, for the cost per sample.
fn accuracy_of(fixture: &str, parts: &[(&str, &str)]) -> (Vec<u8>, RunConfig) {
    let binary = common::bench_binary(fixture, fixture);
    let wasm = std::fs::read(&binary.path).unwrap();
    let config = |args: &[&str]| RunConfig {
        inherit_stdio: false,
        ..RunConfig::new(
            format!("{fixture}.wasm"),
            args.iter().map(|a| a.to_string()).collect(),
            &binary.package_dir,
        )
    };
    let wall = |wasm: &[u8], args: &[&str]| {
        Embedded.run_module(wasm, &config(args)).unwrap().wall_ns as f64
    };
    let cost = calibrate::probe_cost(ClockChoice::Auto).unwrap();
    let variants: Vec<(&str, instrument::Instrumented)> = accuracy_variants()
        .into_iter()
        .map(|(name, options)| (name, instrument::instrument(&wasm, &options).unwrap()))
        .collect();
    let names: Vec<&str> = parts.iter().map(|(_, f)| *f).collect();
    let mut alone = vec![Vec::new(); parts.len()];
    let mut none = Vec::new();
    // Each variant's shares, then wasmtime's epoch sampler's, per part, per run.
    let mut shares = vec![vec![Vec::new(); parts.len()]; variants.len() + 1];
    let mut epoch_samples = Vec::new();
    for _ in 0..RUNS {
        none.push(wall(&wasm, &[]));
        for (k, (part, _)) in parts.iter().enumerate() {
            alone[k].push(wall(&wasm, &[part]));
        }
        let mut totals: Vec<Vec<f64>> = Vec::new();
        for (_, done) in &variants {
            let config = RunConfig {
                sample_interval: None,
                ..config(&["all"])
            };
            let mut p = Embedded
                .run_module(&done.wasm, &config)
                .unwrap()
                .profile(&done.meta, fixture)
                .unwrap();
            if done.meta.metric == Metric::ExactTime {
                let _ = p.compensate(cost);
            }
            totals.push(
                parts
                    .iter()
                    .map(|(_, f)| p.function_named(f).map_or(0.0, |f| f.cost.total_ns as f64))
                    .collect(),
            );
        }
        let interval = sampling::default_interval(Sampler::Stacks);
        let by_epochs = epoch::sample(&wasm, &binary.package_dir, &["all"], interval, &names);
        epoch_samples.push(by_epochs.samples as f64);
        totals.push(by_epochs.inclusive_ns);
        for (m, totals) in totals.iter().enumerate() {
            let sum: f64 = totals.iter().sum();
            for (k, t) in totals.iter().enumerate() {
                shares[m][k].push(100.0 * t / sum);
            }
        }
    }
    let none = median(none);
    let truth: Vec<f64> = alone
        .into_iter()
        .map(|times| (median(times) - none).max(0.0))
        .collect();
    let truth_sum: f64 = truth.iter().sum();
    let mut header = format!("\n{:<10} {:>10} {:>11}", "part", "plain run", "true share");
    for (name, _) in &variants {
        header.push_str(&format!(" {name:>17}"));
    }
    println!("{header} {:>17}", "wasmtime epochs");
    for (k, (part, _)) in parts.iter().enumerate() {
        let true_share = 100.0 * truth[k] / truth_sum;
        let mut row = format!(
            "{:<10} {:>8.1}ms {:>10.1}%",
            part,
            truth[k] / 1e6,
            true_share
        );
        for runs in &shares {
            let share = median(runs[k].clone());
            let worst = runs[k]
                .iter()
                .map(|s| (s - true_share).abs())
                .fold(0.0, f64::max);
            let cell = format!("{share:.1}% ({:+.1}|{worst:.1})", share - true_share);
            row.push_str(&format!(" {cell:>17}"));
        }
        println!("{row}");
    }
    println!(
        "({fixture}: inclusive time shares of the parts' functions, median of {RUNS} profiles of all of them (the median's points off the truth | the worst run's); true shares from each part run alone, plain, less a run of none; wasmtime epochs: the plain module sampled as GuestProfiler samples, a backtrace at each epoch deadline, every {} ms, {:.0} samples a run)",
        sampling::default_interval(Sampler::Stacks).as_millis(),
        median(epoch_samples)
    );
    (wasm, config(&[parts[0].0]))
}

/// The stack sampler's cost per sample: `wasm` (the parts' loop, whose probes run once)
/// profiled every 100 us against every second (a sample or two), median of RUNS runs
/// each, interleaved; the difference per sample taken.
fn stack_sample_cost(wasm: &[u8], config: &RunConfig) {
    let done = instrument::instrument(wasm, &Options::default()).unwrap();
    let run = |interval_us: u64| {
        let config = RunConfig {
            sample_interval: Some(std::time::Duration::from_micros(interval_us)),
            ..config.clone()
        };
        let outcome = Embedded.run_module(&done.wasm, &config).unwrap();
        let p = outcome.profile(&done.meta, "parts").unwrap();
        let s = p.sampling.unwrap_or_default();
        (
            outcome.wall_ns as f64,
            (s.samples + s.in_probes + s.idle) as f64,
        )
    };
    let (mut dense, mut sparse, mut taken) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let (wall, samples) = run(100);
        dense.push(wall);
        taken.push(samples);
        sparse.push(run(1_000_000).0);
    }
    let (dense, sparse, taken) = (median(dense), median(sparse), median(taken));
    println!(
        "\nstack sampler: {:.1} us per sample (the parts' loop: {:.1} ms with a sample every second, {:.1} ms with {taken:.0} samples every 100 us; median of {RUNS})",
        (dense - sparse) / taken.max(1.0) / 1e3,
        sparse / 1e6,
        dense / 1e6,
    );
}
